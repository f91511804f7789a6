/*
 * sp_fs: the host side of the guest daemon's file ops (fs.* and tar.*).
 * Each call is a REQ on a fresh stream, data in STDIN frames (an empty one
 * ends it), data back in STDOUT frames, and EXIT {"status":0,...} or ERROR.
 * Data moves a frame at a time, so memory stays bounded whatever the size.
 * Trees from the guest are extracted with libarchive's secure checks and
 * our own: the guest is hostile, and nothing it sends may land outside the
 * destination, become a device node or a set-id file.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_vm.h"
#include "sp_archive.h"

#define TRAILER_MAX	(1024 * 1024)	/* bytes after a tar's end we skip */

int sp_fs_timeout_ms = SP_FS_TIMEOUT_MS;

struct fcall {
	struct sp_chan *c;
	uint32_t stream;
	json_t *result;		/* the EXIT message */
};

int
sp_fs_path_check(const char *path, struct sp_err *e)
{
	if (path == NULL || path[0] != '/')
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "guest path must be "
		    "absolute: \"%.200s\"", path != NULL ? path : "");
	if (strlen(path) >= SP_PATH_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "guest path over %d bytes",
		    SP_PATH_MAX);
	if (!sp_utf8_valid(path, strlen(path)))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "guest path is not UTF-8");
	return 0;
}

/* Sends req (stolen) on a fresh stream. */
static int
call_start(struct sp_chan *c, struct fcall *k, json_t *req, struct sp_err *e)
{
	int rc;

	k->c = c;
	k->result = NULL;
	if (req == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "cannot build a request");
	k->stream = sp_chan_stream_new(c);
	rc = sp_chan_send_json(c, SP_FR_REQ, k->stream, req, sp_fs_timeout_ms,
	    e);
	json_decref(req);
	return rc;
}

/* The call's next frame: 1 for data (STDOUT), 0 at its end (k->result set),
 * -1 on the guest's error or a broken protocol. */
static int
call_next(struct fcall *k, struct sp_frame *f, struct sp_err *e)
{
	json_t *j, *st;

	if (sp_chan_recv(k->c, f, sp_fs_timeout_ms, e) == -1)
		return -1;
	if (f->type == SP_FR_ERROR && (f->stream == k->stream ||
	    f->stream == 0))
		return sp_chan_error_frame(f, e);
	if (f->stream != k->stream)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "the guest sent a frame for "
		    "stream %u during the call on stream %u", f->stream,
		    k->stream);
	switch (f->type) {
	case SP_FR_STDOUT:
		return 1;
	case SP_FR_EXIT:
		if (sp_frame_json(f, &j, e) == -1)
			return -1;
		st = json_object_get(j, "status");
		if (!json_is_integer(st) || json_integer_value(st) != 0) {
			json_decref(j);
			return sp_err_set(e, SP_E_PROTOCOL, 0, "bad end of a file "
			    "call from the guest");
		}
		json_decref(k->result);
		k->result = j;
		return 0;
	default:
		return sp_err_set(e, SP_E_PROTOCOL, 0, "the guest sent a frame of "
		    "type %u during a file call", f->type);
	}
}

/* Waits for the end of a call that sends no data. */
static int
call_end(struct fcall *k, struct sp_err *e)
{
	struct sp_frame f;
	int r;

	if ((r = call_next(k, &f, e)) == 1)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "unexpected data from the "
		    "guest");
	return r;
}

static int
call_simple(struct sp_chan *c, json_t *req, json_t **result, struct sp_err *e)
{
	struct fcall k;
	int rc = -1;

	if (call_start(c, &k, req, e) == -1 || call_end(&k, e) == -1)
		goto out;
	if (result != NULL) {
		*result = k.result;
		k.result = NULL;
	}
	rc = 0;
out:
	json_decref(k.result);
	return rc;
}

/* The STDOUT of a call to out_fd until its end.  A reader that went away
 * (EPIPE) does not break the channel: the rest is read and dropped. */
static int
call_to_fd(struct fcall *k, int out_fd, struct sp_err *e)
{
	struct sp_frame f;
	int r, werr = 0;

	while ((r = call_next(k, &f, e)) == 1)
		if (werr == 0 && sp_write_all(out_fd, f.data, f.len) == -1)
			werr = errno;
	if (r == -1)
		return -1;
	if (werr != 0) {
		errno = werr;
		return sp_err_sys(e, SP_E_IO, "writing the output");
	}
	return 0;
}

/* in_fd's bytes as STDIN frames, then the empty one. */
static int
fd_to_call(struct fcall *k, int in_fd, struct sp_err *e)
{
	unsigned char *buf;
	ssize_t n;
	int rc = -1;

	if ((buf = malloc(SP_FRAME_CHUNK)) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
	for (;;) {
		n = read(in_fd, buf, SP_FRAME_CHUNK);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			sp_err_sys(e, SP_E_IO, "reading the input");
			goto out;
		}
		if (sp_chan_send(k->c, SP_FR_STDIN, k->stream, buf, n,
		    sp_fs_timeout_ms, e) == -1)
			goto out;
		if (n == 0)
			break;
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

int
sp_fs_read(struct sp_chan *c, const char *path, int out_fd, uint64_t *size,
    struct sp_err *e)
{
	struct fcall k = { 0 };
	json_t *v;
	int rc = -1;

	if (sp_fs_path_check(path, e) == -1)
		return -1;
	if (call_start(c, &k, json_pack("{s:s,s:s}", "op", "fs.read", "path",
	    path), e) == -1 || call_to_fd(&k, out_fd, e) == -1)
		goto out;
	v = json_object_get(k.result, "size");
	if (size != NULL)
		*size = json_is_integer(v) && json_integer_value(v) >= 0 ?
		    (uint64_t)json_integer_value(v) : 0;
	rc = 0;
out:
	json_decref(k.result);
	return rc;
}

int
sp_fs_write(struct sp_chan *c, const char *path, int in_fd, int mode,
    int append, uint64_t *size, struct sp_err *e)
{
	struct fcall k = { 0 };
	json_t *req, *v;
	int rc = -1;

	if (sp_fs_path_check(path, e) == -1)
		return -1;
	if (mode > 07777)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "mode %o out of range",
		    mode);
	req = json_pack("{s:s,s:s}", "op", append ? "fs.append" : "fs.write",
	    "path", path);
	if (req != NULL && mode >= 0)
		json_object_set_new(req, "mode", json_integer(mode));
	if (call_start(c, &k, req, e) == -1 || fd_to_call(&k, in_fd, e) == -1 ||
	    call_end(&k, e) == -1)
		goto out;
	v = json_object_get(k.result, "size");
	if (size != NULL)
		*size = json_is_integer(v) && json_integer_value(v) >= 0 ?
		    (uint64_t)json_integer_value(v) : 0;
	rc = 0;
out:
	json_decref(k.result);
	return rc;
}

int
sp_fs_stat(struct sp_chan *c, const char *path, int follow, json_t **out,
    struct sp_err *e)
{
	json_t *res = NULL, *st;
	int rc = -1;

	*out = NULL;
	if (sp_fs_path_check(path, e) == -1)
		return -1;
	if (call_simple(c, json_pack("{s:s,s:s,s:b}", "op", "fs.stat", "path",
	    path, "follow", follow), &res, e) == -1)
		goto out;
	st = json_object_get(res, "stat");
	if (!json_is_object(st) || !json_is_string(json_object_get(st,
	    "type"))) {
		sp_err_set(e, SP_E_PROTOCOL, 0, "bad stat from the guest");
		goto out;
	}
	*out = json_incref(st);
	rc = 0;
out:
	json_decref(res);
	return rc;
}

/* One frame of fs.list: whole JSON lines, each an object with a name. */
static int
list_frame(const struct sp_frame *f, int (*fn)(json_t *, void *), void *arg,
    size_t *count, struct sp_err *e)
{
	const char *p = (const char *)f->data, *end = p + f->len, *nl;
	json_error_t je;
	json_t *j;
	int r;

	while (p < end) {
		if ((nl = memchr(p, '\n', end - p)) == NULL)
			return sp_err_set(e, SP_E_PROTOCOL, 0, "a list line cut "
			    "across frames");
		j = json_loadb(p, nl - p, JSON_REJECT_DUPLICATES, &je);
		if (!json_is_object(j) ||
		    !json_is_string(json_object_get(j, "name"))) {
			json_decref(j);
			return sp_err_set(e, SP_E_PROTOCOL, 0, "bad list entry from "
			    "the guest");
		}
		if (++*count > SP_FS_LIST_MAX) {
			json_decref(j);
			return sp_err_set(e, SP_E_PROTOCOL, 0, "the guest lists more "
			    "than %d entries", SP_FS_LIST_MAX);
		}
		r = fn != NULL ? fn(j, arg) : 0;
		json_decref(j);
		if (r == -1)
			return sp_err_set(e, SP_E_STOPPED, 0, "stopped by caller");
		p = nl + 1;
	}
	return 0;
}

int
sp_fs_list(struct sp_chan *c, const char *path,
    int (*fn)(json_t *ent, void *arg), void *arg, int *truncated,
    struct sp_err *e)
{
	struct fcall k = { 0 };
	struct sp_frame f;
	size_t count = 0;
	int r, stopped = 0, rc = -1;
	struct sp_err le;

	if (sp_fs_path_check(path, e) == -1)
		return -1;
	if (call_start(c, &k, json_pack("{s:s,s:s}", "op", "fs.list", "path",
	    path), e) == -1)
		goto out;
	while ((r = call_next(&k, &f, e)) == 1) {
		if (stopped)
			continue;
		if (list_frame(&f, fn, arg, &count, &le) == -1) {
			/* The rest is read so that the channel stays usable. */
			*e = le;
			stopped = 1;
		}
	}
	if (r == -1 || stopped)
		goto out;
	if (truncated != NULL)
		*truncated = json_is_true(json_object_get(k.result,
		    "truncated"));
	rc = 0;
out:
	json_decref(k.result);
	return rc;
}

int
sp_fs_mkdir(struct sp_chan *c, const char *path, int parents, int mode,
    struct sp_err *e)
{
	if (sp_fs_path_check(path, e) == -1)
		return -1;
	if (mode < 0)
		mode = 0755;
	return call_simple(c, json_pack("{s:s,s:s,s:b,s:i}", "op", "fs.mkdir",
	    "path", path, "parents", parents, "mode", mode & 07777), NULL, e);
}

int
sp_fs_remove(struct sp_chan *c, const char *path, int recursive,
    struct sp_err *e)
{
	if (sp_fs_path_check(path, e) == -1)
		return -1;
	return call_simple(c, json_pack("{s:s,s:s,s:b}", "op", "fs.remove",
	    "path", path, "recursive", recursive), NULL, e);
}

int
sp_fs_rename(struct sp_chan *c, const char *from, const char *to,
    struct sp_err *e)
{
	if (sp_fs_path_check(from, e) == -1 || sp_fs_path_check(to, e) == -1)
		return -1;
	return call_simple(c, json_pack("{s:s,s:s,s:s}", "op", "fs.rename",
	    "path", from, "to", to), NULL, e);
}

int
sp_fs_tar_out(struct sp_chan *c, const char *path, const char *name,
    int out_fd, struct sp_err *e)
{
	struct fcall k = { 0 };
	json_t *req;
	int rc = -1;

	if (sp_fs_path_check(path, e) == -1)
		return -1;
	req = json_pack("{s:s,s:s}", "op", "tar.out", "path", path);
	if (req != NULL && name != NULL)
		json_object_set_new(req, "name", json_string(name));
	if (call_start(c, &k, req, e) == -1 || call_to_fd(&k, out_fd, e) == -1)
		goto out;
	rc = 0;
out:
	json_decref(k.result);
	return rc;
}

int
sp_fs_tar_in(struct sp_chan *c, const char *dir, int in_fd, struct sp_err *e)
{
	struct fcall k = { 0 };
	int rc = -1;

	if (sp_fs_path_check(dir, e) == -1)
		return -1;
	if (call_start(c, &k, json_pack("{s:s,s:s}", "op", "tar.in", "path",
	    dir), e) == -1 || fd_to_call(&k, in_fd, e) == -1 ||
	    call_end(&k, e) == -1)
		goto out;
	rc = 0;
out:
	json_decref(k.result);
	return rc;
}

/* ---- trees: packing on the host, extracting what the guest sends ---- */

struct put_io {
	struct fcall *k;
	struct sp_err e;
	int failed;
	int ended;		/* the stream was ended: drop what is flushed */
};

static la_ssize_t
put_write(struct archive *a, void *arg, const void *buf, size_t n)
{
	struct put_io *t = arg;
	const unsigned char *b = buf;
	size_t left = n, m;

	if (t->ended)
		return n;
	while (left > 0) {
		m = left < SP_FRAME_CHUNK ? left : SP_FRAME_CHUNK;
		if (sp_chan_send(t->k->c, SP_FR_STDIN, t->k->stream, b, m,
		    sp_fs_timeout_ms, &t->e) == -1) {
			t->failed = 1;
			sp_archive.set_error(a, EIO, "%s", t->e.msg);
			return -1;
		}
		b += m;
		left -= m;
	}
	return n;
}

/* The last component of path (without trailing slashes) into out. */
static int
base_name(const char *path, char *out, size_t n, struct sp_err *e)
{
	size_t len = strlen(path), i;

	while (len > 1 && path[len - 1] == '/')
		len--;
	for (i = len; i > 0 && path[i - 1] != '/'; i--)
		;
	if (len - i == 0 || len - i >= n || (len - i == 2 &&
	    strncmp(path + i, "..", 2) == 0) || (len - i == 1 && path[i] == '.'))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "\"%.200s\" names no file",
		    path);
	memcpy(out, path + i, len - i);
	out[len - i] = '\0';
	return 0;
}

static int
name_ok(const char *name, struct sp_err *e)
{
	if (name[0] == '\0' || strchr(name, '/') != NULL ||
	    strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
	    strlen(name) > 255)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "\"%.200s\" is not a file "
		    "name", name);
	return 0;
}

/* The archive's top entry: name when given (a plain file name), else the
 * last component of path. */
static int
top_name(const char *path, const char *name, char *top, size_t n,
    struct sp_err *e)
{
	if (name == NULL)
		return base_name(path, top, n, e);
	if (name_ok(name, e) == -1)
		return -1;
	snprintf(top, n, "%s", name);
	return 0;
}

int
sp_fs_put(struct sp_chan *c, const char *src, const char *dir,
    const char *name, struct sp_err *e)
{
	char top[256];
	struct fcall k = { 0 };
	struct put_io t;
	struct archive *w = NULL;
	int rc = -1;

	memset(&t, 0, sizeof t);
	t.k = &k;
	sp_err_clear(e);
	if (sp_fs_path_check(dir, e) == -1)
		return -1;
	if (top_name(src, name, top, sizeof top, e) == -1 ||
	    sp_archive_load(e) == -1)
		return -1;
	if ((w = sp_archive.write_new()) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
	sp_archive.write_set_format_pax_restricted(w);
	sp_archive.write_set_bytes_per_block(w, SP_FRAME_CHUNK);
	sp_archive.write_set_bytes_in_last_block(w, 1);
	if (call_start(c, &k, json_pack("{s:s,s:s}", "op", "tar.in", "path",
	    dir), e) == -1)
		goto out;
	if (sp_archive.write_open(w, &t, NULL, put_write, NULL) != ARCHIVE_OK ||
	    sp_tar_pack(w, src, top, 0, e) == -1 ||
	    sp_archive.write_close(w) != ARCHIVE_OK) {
		if (t.failed)
			*e = t.e;
		else if (e->code == SP_E_NONE)
			sp_err_set(e, SP_E_IO, 0, "%s",
			    sp_archive.error_string(w));
		/* The guest drops what it took of a stream we broke off, or
		 * its error says why the stream stopped. */
		if (!t.failed && sp_chan_send(c, SP_FR_STDIN, k.stream, NULL, 0,
		    sp_fs_timeout_ms, &t.e) == 0)
			call_end(&k, &t.e);
		goto out;
	}
	if (sp_chan_send(c, SP_FR_STDIN, k.stream, NULL, 0, sp_fs_timeout_ms,
	    e) == -1 || call_end(&k, e) == -1)
		goto out;
	rc = 0;
out:
	t.ended = 1;
	sp_archive.write_free(w);
	json_decref(k.result);
	return rc;
}

/* Whether a name from the stream may be extracted: relative, no "."/".."
 * component, and under top when there is one. */
static int
entry_ok(const char *p, const char *top)
{
	const char *s;
	size_t n;

	if (p == NULL || p[0] == '\0' || p[0] == '/' || strlen(p) >= PATH_MAX)
		return 0;
	for (s = p; *s != '\0'; s += n + (s[n] == '/')) {
		n = strcspn(s, "/");
		if ((n == 2 && strncmp(s, "..", 2) == 0) || (n == 1 &&
		    s[0] == '.' && s != p))
			return 0;
		if (n == 0 && s[0] == '/')
			return 0;	/* "//" */
	}
	if (top == NULL)
		return 1;
	n = strlen(top);
	return strncmp(p, top, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/* Unpacks rd (a tar stream) into dir. */
static int
extract(struct archive *rd, const char *dir, const char *top,
    struct sp_err *e)
{
	char real[PATH_MAX], name[2 * PATH_MAX];
	struct archive *disk = NULL;
	struct archive_entry *ent;
	struct stat st;
	const char *p;
	const void *buf;
	size_t size;
	la_int64_t off;
	int r, flags, rc = -1;

	/* libarchive's checks refuse any symlink on the way: resolve dir's. */
	if (realpath(dir, real) == NULL || stat(real, &st) == -1)
		return sp_err_sys(e, errno == ENOENT ? SP_E_NOT_FOUND : SP_E_IO,
		    "\"%.200s\"", dir);
	if (!S_ISDIR(st.st_mode))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "\"%.200s\" is not a "
		    "directory", dir);
	if ((disk = sp_archive.write_disk_new()) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
	/* Names are made absolute under real (no chdir in a library), so
	 * SECURE_NOABSOLUTEPATHS cannot apply: entry_ok refuses absolute
	 * names before they are joined. */
	flags = ARCHIVE_EXTRACT_SECURE_NODOTDOT |
	    ARCHIVE_EXTRACT_SECURE_SYMLINKS |
	    ARCHIVE_EXTRACT_PERM |
	    ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SPARSE |
	    ARCHIVE_EXTRACT_UNLINK;
	if (geteuid() == 0)
		flags |= ARCHIVE_EXTRACT_OWNER;
	sp_archive.write_disk_set_options(disk, flags);
	while ((r = sp_archive.read_next_header(rd, &ent)) != ARCHIVE_EOF) {
		if (r < ARCHIVE_WARN) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "tar stream: %s",
			    sp_archive.error_string(rd));
			goto out;
		}
		p = sp_archive.entry_pathname(ent);
		if (!entry_ok(p, top)) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "refused an entry named "
			    "\"%.200s\"", p != NULL ? p : "");
			goto out;
		}
		/* Device nodes and set-id bits from a guest have no place on
		 * the host. */
		if (sp_archive.entry_filetype(ent) == AE_IFCHR ||
		    sp_archive.entry_filetype(ent) == AE_IFBLK) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "refused the device node "
			    "\"%.200s\"", p);
			goto out;
		}
		sp_archive.entry_set_perm(ent,
		    sp_archive.entry_perm(ent) & 01777);
		snprintf(name, sizeof name, "%s/%s", strcmp(real, "/") == 0 ?
		    "" : real, p);
		sp_archive.entry_set_pathname(ent, name);
		if ((p = sp_archive.entry_hardlink(ent)) != NULL) {
			if (!entry_ok(p, top)) {
				sp_err_set(e, SP_E_BAD_INPUT, 0, "refused a hard "
				    "link to \"%.200s\"", p);
				goto out;
			}
			snprintf(name, sizeof name, "%s/%s",
			    strcmp(real, "/") == 0 ? "" : real, p);
			sp_archive.entry_set_hardlink(ent, name);
		}
		if (sp_archive.write_header(disk, ent) < ARCHIVE_WARN) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "%s",
			    sp_archive.error_string(disk));
			goto out;
		}
		while ((r = sp_archive.read_data_block(rd, &buf, &size,
		    &off)) == ARCHIVE_OK)
			if (sp_archive.write_data_block(disk, buf, size, off) <
			    ARCHIVE_WARN) {
				sp_err_set(e, SP_E_IO, 0, "%s",
				    sp_archive.error_string(disk));
				goto out;
			}
		if (r != ARCHIVE_EOF) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "tar stream: %s",
			    sp_archive.error_string(rd));
			goto out;
		}
		if (sp_archive.write_finish_entry(disk) < ARCHIVE_WARN) {
			sp_err_set(e, SP_E_IO, 0, "%s",
			    sp_archive.error_string(disk));
			goto out;
		}
	}
	if (sp_archive.write_close(disk) != ARCHIVE_OK) {
		sp_err_set(e, SP_E_IO, 0, "%s",
		    sp_archive.error_string(disk));
		goto out;
	}
	rc = 0;
out:
	sp_archive.write_free(disk);
	return rc;
}

int
sp_fs_untar(int in_fd, const char *dir, const char *top, struct sp_err *e)
{
	struct archive *rd;
	int rc = -1;

	if (sp_archive_load(e) == -1)
		return -1;
	if ((rd = sp_archive.read_new()) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
	sp_archive.read_support_format_tar(rd);
	if (sp_archive.read_open_fd(rd, in_fd, SP_FRAME_CHUNK) != ARCHIVE_OK) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "tar stream: %s",
		    sp_archive.error_string(rd));
		goto out;
	}
	rc = extract(rd, dir, top, e);
out:
	sp_archive.read_free(rd);
	return rc;
}

struct get_io {
	struct fcall *k;
	int eof, failed;
	struct sp_err e;
};

static la_ssize_t
get_read(struct archive *a, void *arg, const void **buf)
{
	struct get_io *t = arg;
	struct sp_frame f;
	int r;

	if (t->eof)
		return 0;
	/* An empty frame would read as the end: skip it. */
	while ((r = call_next(t->k, &f, &t->e)) == 1 && f.len == 0)
		;
	if (r == -1) {
		t->failed = 1;
		sp_archive.set_error(a, EIO, "%s", t->e.msg);
		return -1;
	}
	if (r == 0) {
		t->eof = 1;
		return 0;
	}
	*buf = f.data;
	return f.len;
}

int
sp_fs_get(struct sp_chan *c, const char *path, const char *dir,
    const char *name, struct sp_err *e)
{
	char top[256];
	struct fcall k = { 0 };
	struct get_io t;
	struct archive *rd = NULL;
	struct sp_frame f;
	size_t extra = 0;
	int r = 0, rc = -1;

	memset(&t, 0, sizeof t);
	t.k = &k;
	sp_err_clear(e);
	if (sp_fs_path_check(path, e) == -1)
		return -1;
	if (top_name(path, name, top, sizeof top, e) == -1 ||
	    sp_archive_load(e) == -1)
		return -1;
	if ((rd = sp_archive.read_new()) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
	sp_archive.read_support_format_tar(rd);
	if (call_start(c, &k, json_pack("{s:s,s:s,s:s}", "op", "tar.out",
	    "path", path, "name", top), e) == -1)
		goto out;
	if (sp_archive.read_open(rd, &t, NULL, get_read, NULL) != ARCHIVE_OK ||
	    extract(rd, dir, top, e) == -1) {
		/* The guest's own error says more than the broken stream. */
		if (t.failed)
			*e = t.e;
		else if (e->code == SP_E_NONE)
			sp_err_set(e, SP_E_BAD_INPUT, 0, "tar stream: %s",
			    sp_archive.error_string(rd));
		goto out;
	}
	/* What follows the tar's end blocks, up to the call's end. */
	while (!t.eof && (r = call_next(&k, &f, e)) == 1)
		if ((extra += f.len) > TRAILER_MAX) {
			sp_err_set(e, SP_E_PROTOCOL, 0, "the guest sends on after "
			    "the end of the tar stream");
			goto out;
		}
	if (!t.eof && r == -1)
		goto out;
	rc = 0;
out:
	sp_archive.read_free(rd);
	json_decref(k.result);
	return rc;
}
