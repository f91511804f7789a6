/*
 * daemon-fs: the file ops of space-daemon (design.md): read, write,
 * append, stat, list, mkdir, remove, rename, and trees in and out as tar
 * streams made with libarchive.  Each op runs to its end in the port's
 * thread; data comes in STDIN frames (an empty one ends it) and goes out in
 * STDOUT frames, and the call ends with EXIT {"status":0,...} or ERROR.
 * Threads share the process: no chdir, no umask, nothing global.
 */
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "sp.h"
#include "daemon.h"

#define FS_TIMEOUT_MS	30000	/* silence of the host within a call */
#define FS_LIST_MAX	100000	/* entries one fs.list returns */
#define FS_PATH_MAX	4096

/* An absolute path from req[key]: not empty, no NUL, bounded.  NULL after
 * an ERROR was sent (*rc says whether the host is still there). */
static const char *
req_path(struct port *p, uint32_t stream, json_t *req, const char *key,
    int *rc)
{
	json_t *v = json_object_get(req, key);
	const char *s;

	if (!json_is_string(v)) {
		*rc = sd_send_error(p, stream, SP_E_BAD_INPUT, "%s must be a path",
		    key);
		return NULL;
	}
	s = json_string_value(v);
	if (json_string_length(v) != strlen(s) || s[0] != '/' ||
	    strlen(s) >= FS_PATH_MAX) {
		*rc = sd_send_error(p, stream, SP_E_BAD_INPUT, "%s must be an "
		    "absolute path under %d bytes without NUL", key,
		    FS_PATH_MAX);
		return NULL;
	}
	return s;
}

/* The error token of an errno. */
static enum sp_code
err_code(int err)
{
	switch (err) {
	case ENOENT:
		return SP_E_NOT_FOUND;
	case EEXIST:
		return SP_E_EXISTS;
	case ENOTEMPTY:
		return SP_E_NOT_EMPTY;
	case EACCES:
	case EPERM:
	case EROFS:
		return SP_E_DENIED;
	case ENOTDIR:
	case EISDIR:
	case EINVAL:
	case ENAMETOOLONG:
	case ELOOP:
		return SP_E_BAD_INPUT;
	case ENOSPC:
	case EDQUOT:
		return SP_E_NO_SPACE;
	default:
		return SP_E_IO;
	}
}

static int
sys_error(struct port *p, uint32_t stream, const char *what, const char *path)
{
	int err = errno;

	return sd_send_error(p, stream, err_code(err), "%s \"%.300s\": %s", what,
	    path, strerror(err));
}

static int
done(struct port *p, uint32_t stream, json_t *extra)
{
	json_t *j = json_pack("{s:i}", "status", 0);

	if (extra != NULL) {
		json_object_update(j, extra);
		json_decref(extra);
	}
	return sd_send_json(p, SP_FR_EXIT, stream, j);
}

static int
flag(json_t *req, const char *key)
{
	return json_is_true(json_object_get(req, key));
}

/* The mode in req, or def; -1 when it is not one. */
static int
req_mode(json_t *req, int def)
{
	json_t *v = json_object_get(req, "mode");

	if (v == NULL)
		return def;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > 07777)
		return -1;
	return (int)json_integer_value(v);
}

/* The next STDIN frame of the call: 1 with data, 0 at its end, -1 (e set)
 * when the host broke off. */
static int
next_input(struct port *p, uint32_t stream, struct sp_frame *f,
    struct sp_err *e)
{
	if (sd_recv_frame(p, f, FS_TIMEOUT_MS, e) == -1)
		return -1;
	if (f->type != SP_FR_STDIN || f->stream != stream)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "frame of type %u stream %u "
		    "during a data call", f->type, f->stream);
	return f->len > 0;
}

int
fs_read(struct port *p, uint32_t stream, json_t *req)
{
	const char *path;
	struct stat st;
	uint64_t total = 0;
	ssize_t n;
	int fd = -1, rc = 0;

	if ((path = req_path(p, stream, req, "path", &rc)) == NULL)
		return rc;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) ==
	    -1 || fstat(fd, &st) == -1) {
		rc = sys_error(p, stream, "open", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = sd_send_error(p, stream, SP_E_BAD_INPUT, "\"%.300s\" is not "
		    "a regular file", path);
		goto out;
	}
	for (;;) {
		n = read(fd, p->out + SP_FRAME_HDR, SP_FRAME_CHUNK);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			rc = sys_error(p, stream, "read", path);
			goto out;
		}
		if (n == 0)
			break;
		if ((rc = sd_send_out(p, SP_FR_STDOUT, stream, n)) == -1)
			goto out;
		total += n;
	}
	rc = done(p, stream, json_pack("{s:I}", "size", (json_int_t)total));
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* fs.write replaces the file atomically (a temporary file in the same
 * directory, fsync, rename); fs.append adds to it in place. */
static int
write_common(struct port *p, uint32_t stream, json_t *req, int append)
{
	char tmp[FS_PATH_MAX + 32];
	struct sp_frame f;
	struct sp_err e;
	struct stat st;
	const char *path, *slash;
	uint64_t total = 0;
	int fd = -1, mode, r, rc = 0;

	if ((path = req_path(p, stream, req, "path", &rc)) == NULL)
		return rc;
	if ((mode = req_mode(req, -1)) == -1 &&
	    json_object_get(req, "mode") != NULL)
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "mode must be an "
		    "integer 0..07777");
	tmp[0] = '\0';
	if (append) {
		fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
		    O_NOCTTY, mode >= 0 ? mode : 0644);
		if (fd == -1) {
			rc = sys_error(p, stream, "open", path);
			goto out;
		}
	} else {
		/* A new file keeps the mode of the one it replaces. */
		if (mode < 0)
			mode = stat(path, &st) == 0 && S_ISREG(st.st_mode) ?
			    (int)(st.st_mode & 07777) : 0644;
		slash = strrchr(path, '/');
		snprintf(tmp, sizeof tmp, "%.*s.space-write.XXXXXX",
		    (int)(slash - path + 1), path);
		if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1) {
			tmp[0] = '\0';
			rc = sys_error(p, stream, "create in the directory of",
			    path);
			goto out;
		}
		if (fchmod(fd, mode) == -1) {
			rc = sys_error(p, stream, "chmod", tmp);
			goto out;
		}
	}
	while ((r = next_input(p, stream, &f, &e)) == 1) {
		if (sp_write_all(fd, f.data, f.len) == -1) {
			rc = sys_error(p, stream, "write", path);
			goto out;
		}
		total += f.len;
	}
	if (r == -1) {
		sd_log(p, "stream %u: %s", stream, e.msg);
		rc = e.code == SP_E_PROTOCOL ?
		    sd_send_error(p, stream, SP_E_PROTOCOL, "%s", e.msg) : -1;
		goto out;
	}
	/* Appends may go to a device or a pipe, which cannot be synced. */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && fsync(fd) == -1) {
		rc = sys_error(p, stream, "fsync", path);
		goto out;
	}
	if (!append) {
		if (rename(tmp, path) == -1) {
			rc = sys_error(p, stream, "rename onto", path);
			goto out;
		}
		tmp[0] = '\0';
	}
	rc = done(p, stream, json_pack("{s:I}", "size", (json_int_t)total));
out:
	if (fd >= 0)
		close(fd);
	if (tmp[0] != '\0')
		unlink(tmp);
	return rc;
}

int
fs_write(struct port *p, uint32_t stream, json_t *req)
{
	return write_common(p, stream, req, 0);
}

int
fs_append(struct port *p, uint32_t stream, json_t *req)
{
	return write_common(p, stream, req, 1);
}

static const char *
type_name(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "dir";
	if (S_ISLNK(m))
		return "symlink";
	if (S_ISCHR(m))
		return "char";
	if (S_ISBLK(m))
		return "block";
	if (S_ISFIFO(m))
		return "fifo";
	if (S_ISSOCK(m))
		return "socket";
	return "unknown";
}

static json_t *
stat_json(const struct stat *st)
{
	return json_pack("{s:s,s:I,s:i,s:I,s:I,s:f}", "type",
	    type_name(st->st_mode), "size", (json_int_t)st->st_size, "mode",
	    (int)(st->st_mode & 07777), "uid", (json_int_t)st->st_uid, "gid",
	    (json_int_t)st->st_gid, "mtime", (double)st->st_mtim.tv_sec +
	    st->st_mtim.tv_nsec / 1e9);
}

int
fs_stat(struct port *p, uint32_t stream, json_t *req)
{
	char target[FS_PATH_MAX];
	const char *path;
	struct stat st;
	json_t *j;
	ssize_t n;
	int rc = 0;

	if ((path = req_path(p, stream, req, "path", &rc)) == NULL)
		return rc;
	if ((flag(req, "follow") ? stat(path, &st) : lstat(path, &st)) == -1)
		return sys_error(p, stream, "stat", path);
	j = stat_json(&st);
	if (S_ISLNK(st.st_mode) &&
	    (n = readlink(path, target, sizeof target - 1)) >= 0) {
		target[n] = '\0';
		/* A target that is not UTF-8 is left out. */
		json_object_set_new(j, "target", json_string(target));
	}
	return done(p, stream, json_pack("{s:o}", "stat", j));
}

/* fs.list: one JSON line per entry, as many whole lines in a frame as fit. */
int
fs_list(struct port *p, uint32_t stream, json_t *req)
{
	char *buf = (char *)p->out + SP_FRAME_HDR;
	const char *path;
	struct dirent *de;
	struct stat st;
	size_t used = 0, n, count = 0, skipped = 0;
	json_t *j;
	DIR *d;
	int truncated = 0, rc = 0;

	if ((path = req_path(p, stream, req, "path", &rc)) == NULL)
		return rc;
	if ((d = opendir(path)) == NULL)
		return sys_error(p, stream, "open directory", path);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (count == FS_LIST_MAX) {
			truncated = 1;
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
		    -1) {
			skipped++;
			continue;
		}
		j = stat_json(&st);
		/* Names that are not UTF-8 cannot be told in JSON. */
		if (json_object_set_new(j, "name", json_string(de->d_name)) ==
		    -1) {
			json_decref(j);
			skipped++;
			continue;
		}
		for (;;) {
			n = json_dumpb(j, buf + used, SP_FRAME_CHUNK - used,
			    JSON_COMPACT);
			if (n > 0 && used + n < SP_FRAME_CHUNK)
				break;
			if (used == 0)
				break;
			if ((rc = sd_send_out(p, SP_FR_STDOUT, stream, used)) ==
			    -1) {
				json_decref(j);
				goto out;
			}
			used = 0;
		}
		json_decref(j);
		if (n == 0 || used + n >= SP_FRAME_CHUNK) {
			skipped++;
			continue;
		}
		used += n;
		buf[used++] = '\n';
		count++;
	}
	if (used > 0 && (rc = sd_send_out(p, SP_FR_STDOUT, stream, used)) == -1)
		goto out;
	rc = done(p, stream, json_pack("{s:I,s:I,s:b}", "count",
	    (json_int_t)count, "skipped", (json_int_t)skipped, "truncated",
	    truncated));
out:
	closedir(d);
	return rc;
}

int
fs_mkdir(struct port *p, uint32_t stream, json_t *req)
{
	char buf[FS_PATH_MAX];
	const char *path;
	struct stat st;
	size_t i;
	int mode, rc = 0;

	if ((path = req_path(p, stream, req, "path", &rc)) == NULL)
		return rc;
	if ((mode = req_mode(req, 0755)) == -1)
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "mode must be an "
		    "integer 0..07777");
	if (!flag(req, "parents")) {
		if (mkdir(path, mode) == -1)
			return sys_error(p, stream, "mkdir", path);
		return done(p, stream, NULL);
	}
	snprintf(buf, sizeof buf, "%s", path);
	for (i = 1; ; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, mode) == -1 && (errno != EEXIST ||
		    stat(buf, &st) == -1 || !S_ISDIR(st.st_mode))) {
			if (errno == EEXIST)
				errno = ENOTDIR;
			return sys_error(p, stream, "mkdir", buf);
		}
		if (path[i] == '\0')
			break;
		buf[i] = '/';
	}
	return done(p, stream, NULL);
}

/* nftw takes no argument: each thread counts in its own. */
static _Thread_local int rm_errno;
static _Thread_local char rm_failed[FS_PATH_MAX];

static int
rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	if ((type == FTW_DP ? rmdir(path) : unlink(path)) == -1 &&
	    rm_errno == 0) {
		rm_errno = errno;
		snprintf(rm_failed, sizeof rm_failed, "%s", path);
	}
	return 0;
}

/* fs.remove: never follows a symlink, and recursion stays on the
 * filesystem of path (what is mounted below is left, and so its parent). */
int
fs_remove(struct port *p, uint32_t stream, json_t *req)
{
	const char *path;
	struct stat st;
	int rc = 0;

	if ((path = req_path(p, stream, req, "path", &rc)) == NULL)
		return rc;
	if (strspn(path, "/") == strlen(path))
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "will not remove /");
	if (lstat(path, &st) == -1)
		return sys_error(p, stream, "stat", path);
	if (!S_ISDIR(st.st_mode)) {
		if (unlink(path) == -1)
			return sys_error(p, stream, "remove", path);
		return done(p, stream, NULL);
	}
	if (!flag(req, "recursive")) {
		if (rmdir(path) == -1)
			return sys_error(p, stream, "remove", path);
		return done(p, stream, NULL);
	}
	rm_errno = 0;
	if (nftw(path, rm_one, 64, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) == -1)
		return sys_error(p, stream, "walk", path);
	if (rm_errno != 0) {
		errno = rm_errno;
		return sys_error(p, stream, "remove", rm_failed);
	}
	return done(p, stream, NULL);
}

int
fs_rename(struct port *p, uint32_t stream, json_t *req)
{
	const char *from, *to;
	int rc = 0;

	if ((from = req_path(p, stream, req, "path", &rc)) == NULL ||
	    (to = req_path(p, stream, req, "to", &rc)) == NULL)
		return rc;
	if (rename(from, to) == -1)
		return sys_error(p, stream, "rename", from);
	return done(p, stream, NULL);
}

/* ---- tar ---- */

struct tar_io {
	struct port *p;
	uint32_t stream;
	int gone;		/* the host went: the op returns -1 */
	int ended;		/* the call ended: what libarchive flushes now
				   would follow its ERROR on the wire */
};

static la_ssize_t
tar_write_cb(struct archive *a, void *arg, const void *buf, size_t n)
{
	struct tar_io *t = arg;
	const unsigned char *b = buf;
	size_t left = n, k;

	if (t->ended)
		return n;
	while (left > 0) {
		k = left < SP_FRAME_CHUNK ? left : SP_FRAME_CHUNK;
		memcpy(t->p->out + SP_FRAME_HDR, b, k);
		if (sd_send_out(t->p, SP_FR_STDOUT, t->stream, k) == -1) {
			t->gone = 1;
			archive_set_error(a, EPIPE, "the host went away");
			return -1;
		}
		b += k;
		left -= k;
	}
	return n;
}

/* tar.out: path packed as a pax stream whose top entry is named "name"
 * (default the last component of path); symlinks are not followed. */
int
tar_out(struct port *p, uint32_t stream, json_t *req)
{
	struct archive *w = NULL;
	struct tar_io t = { p, stream, 0, 0 };
	const char *path, *top, *slash;
	struct sp_err e = { SP_E_NONE, 0, "" };
	struct stat st;
	size_t plen;
	json_t *v;
	int rc = 0;

	if ((path = req_path(p, stream, req, "path", &rc)) == NULL)
		return rc;
	plen = strlen(path);
	while (plen > 1 && path[plen - 1] == '/')
		plen--;
	slash = path + plen - 1;
	while (slash > path && *slash != '/')
		slash--;
	top = plen == 1 ? "." : slash + 1;
	v = json_object_get(req, "name");
	if (v != NULL && (!json_is_string(v) ||
	    json_string_length(v) != strlen(json_string_value(v)) ||
	    json_string_length(v) == 0 || json_string_length(v) > 255 ||
	    strchr(json_string_value(v), '/') != NULL ||
	    strcmp(json_string_value(v), "..") == 0))
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "name must be one "
		    "path component");
	if (v != NULL)
		top = json_string_value(v);
	if ((w = archive_write_new()) == NULL) {
		rc = sd_send_error(p, stream, SP_E_NOMEM, "libarchive");
		goto out;
	}
	archive_write_set_format_pax_restricted(w);
	archive_write_set_bytes_per_block(w, SP_FRAME_CHUNK);
	archive_write_set_bytes_in_last_block(w, 1);
	if (lstat(path, &st) == -1) {
		rc = sys_error(p, stream, "stat", path);
		goto out;
	}
	if (archive_write_open(w, &t, NULL, tar_write_cb, NULL) != ARCHIVE_OK) {
		sp_err_set(&e, SP_E_IO, 0, "%s", archive_error_string(w));
		goto fail;
	}
	/* Entries are named from top; mounts below path are not crossed. */
	if (sp_tar_pack(w, path, top, SP_TAR_ONE_FS, &e) == -1)
		goto fail;
	if (archive_write_close(w) != ARCHIVE_OK) {
		sp_err_set(&e, SP_E_IO, 0, "%s", archive_error_string(w));
		goto fail;
	}
	rc = done(p, stream, NULL);
	goto out;
fail:
	rc = t.gone ? -1 : sd_send_error(p, stream, e.code != SP_E_NONE ?
	    e.code : SP_E_IO,
	    "tar \"%.300s\": %.200s", path, e.msg);
out:
	t.ended = 1;
	archive_write_free(w);
	return rc;
}

struct tar_in {
	struct port *p;
	uint32_t stream;
	int eof;
	int broke;		/* the host broke off: e says how */
	struct sp_err e;
};

static la_ssize_t
tar_read_cb(struct archive *a, void *arg, const void **buf)
{
	struct tar_in *t = arg;
	struct sp_frame f;
	int r;

	if (t->eof)
		return 0;
	if ((r = next_input(t->p, t->stream, &f, &t->e)) == -1) {
		t->broke = 1;
		archive_set_error(a, EIO, "%s", t->e.msg);
		return -1;
	}
	if (r == 0)
		t->eof = 1;
	*buf = f.data;
	return f.len;
}

/* tar.in: a tar stream from the host unpacked into dir, refusing entries
 * that would land outside it. */
int
tar_in(struct port *p, uint32_t stream, json_t *req)
{
	char real[PATH_MAX], name[PATH_MAX * 2];
	struct archive *rd = NULL, *disk = NULL;
	struct archive_entry *ent;
	struct tar_in t = { p, stream, 0, 0, { SP_E_NONE, 0, "" } };
	const char *dir, *ep, *err = NULL;
	const void *buf;
	size_t size;
	la_int64_t off;
	struct stat st;
	uint64_t count = 0;
	int r, rc = 0;

	if ((dir = req_path(p, stream, req, "path", &rc)) == NULL)
		return rc;
	/* The secure checks refuse symlinks on the way: resolve dir's. */
	if (realpath(dir, real) == NULL || stat(real, &st) == -1)
		return sys_error(p, stream, "resolve", dir);
	if (!S_ISDIR(st.st_mode))
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "\"%.300s\" is not "
		    "a directory", dir);
	if ((rd = archive_read_new()) == NULL ||
	    (disk = archive_write_disk_new()) == NULL) {
		rc = sd_send_error(p, stream, SP_E_NOMEM, "libarchive");
		goto out;
	}
	archive_read_support_format_tar(rd);
	/* Names are made absolute under real (threads share the cwd), so
	 * SECURE_NOABSOLUTEPATHS cannot apply: absolute names are refused
	 * before they are joined. */
	archive_write_disk_set_options(disk, ARCHIVE_EXTRACT_SECURE_NODOTDOT |
	    ARCHIVE_EXTRACT_SECURE_SYMLINKS |
	    ARCHIVE_EXTRACT_PERM |
	    ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_TIME |
	    ARCHIVE_EXTRACT_SPARSE | ARCHIVE_EXTRACT_UNLINK);
	if (archive_read_open(rd, &t, NULL, tar_read_cb, NULL) != ARCHIVE_OK) {
		err = archive_error_string(rd);
		goto fail;
	}
	while ((r = archive_read_next_header(rd, &ent)) != ARCHIVE_EOF) {
		if (r < ARCHIVE_WARN) {
			err = archive_error_string(rd);
			goto fail;
		}
		ep = archive_entry_pathname(ent);
		if (ep == NULL || ep[0] == '/' || strlen(ep) >= PATH_MAX) {
			err = "an entry with an absolute or overlong path";
			goto fail;
		}
		snprintf(name, sizeof name, "%s/%s", strcmp(real, "/") == 0 ?
		    "" : real, ep);
		archive_entry_set_pathname(ent, name);
		if ((ep = archive_entry_hardlink(ent)) != NULL) {
			if (ep[0] == '/' || strlen(ep) >= PATH_MAX) {
				err = "a hard link with an absolute path";
				goto fail;
			}
			snprintf(name, sizeof name, "%s/%s",
			    strcmp(real, "/") == 0 ? "" : real, ep);
			archive_entry_set_hardlink(ent, name);
		}
		if (archive_write_header(disk, ent) < ARCHIVE_WARN) {
			err = archive_error_string(disk);
			goto fail;
		}
		while ((r = archive_read_data_block(rd, &buf, &size, &off)) ==
		    ARCHIVE_OK)
			if (archive_write_data_block(disk, buf, size, off) <
			    ARCHIVE_WARN) {
				err = archive_error_string(disk);
				goto fail;
			}
		if (r != ARCHIVE_EOF) {
			err = archive_error_string(rd);
			goto fail;
		}
		if (archive_write_finish_entry(disk) < ARCHIVE_WARN) {
			err = archive_error_string(disk);
			goto fail;
		}
		count++;
	}
	if (archive_write_close(disk) != ARCHIVE_OK) {
		err = archive_error_string(disk);
		goto fail;
	}
	/* Tar's end blocks come before the stream's end: read up to it. */
	while (!t.eof && !t.broke)
		if (tar_read_cb(rd, &t, &buf) < 0)
			break;
	if (t.broke)
		goto fail;
	rc = done(p, stream, json_pack("{s:I}", "entries", (json_int_t)count));
	goto out;
fail:
	if (t.broke && t.e.code != SP_E_PROTOCOL)
		rc = -1;
	else
		rc = sd_send_error(p, stream, t.broke ? SP_E_PROTOCOL : SP_E_BAD_INPUT,
		    "untar into \"%.300s\": %.200s", dir, t.broke ? t.e.msg :
		    err != NULL ? err : "failed");
out:
	archive_read_free(rd);
	archive_write_free(disk);
	return rc;
}
