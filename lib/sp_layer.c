/*
 * sp_layer: unpacks an archive into a template's staging tree, checking every
 * entry on the way.  A root filesystem tarball is unpacked as it is.  An OCI
 * image layer (image-spec, "Applying changesets") goes over the layers below
 * it:
 *
 *  - a whiteout ".wh.NAME" removes NAME as lower layers made it, and an
 *    opaque whiteout ".wh..wh..opq" everything lower layers put in its
 *    directory; neither is itself unpacked;
 *  - an entry that is not a directory replaces a directory of that name,
 *    with all below it;
 *  - a hard link may name a file of a lower layer.
 *
 * Nothing is written through a symlink: an entry, a hard link target or a
 * whiteout whose directory is reached through a symlink is refused (the
 * layer that makes a directory a symlink and then writes through it), as are
 * absolute names and ".." (entry_check).  Symlinks themselves may point
 * anywhere, absolute targets included: they are the guest's, resolved in the
 * guest.  Owners are the archive's numeric ids; modes (setuid included),
 * xattrs (file capabilities included), device nodes and times are kept.
 */
#include <sys/stat.h>
#include <sys/syscall.h>

#include <linux/openat2.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_storage.h"
#include "sp_archive.h"

/*
 * What libarchive enforces while extracting.  SECURE_NOABSOLUTEPATHS is left
 * out on purpose: every entry is rewritten to an absolute path under the
 * staging directory, which that flag would refuse; absolute entry names are
 * refused by entry_check() before the rewrite instead.
 */
#define EXTRACT_FLAGS	(ARCHIVE_EXTRACT_SECURE_NODOTDOT | \
	ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_PERM | \
	ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_XATTR)

/*
 * Refuses entry names that would land outside the root once put under the
 * staging directory: absolute paths and any ".." component.
 */
static int
entry_check(const char *entry, const char *what, const char *s,
    struct sp_err *e)
{
	char q[128], q2[128];
	const char *p, *c;

	if (s == NULL || *s == '\0')
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "archive entry '%s': empty or unreadable %s",
		    sp_quote(entry ? entry : "", q, sizeof q), what);
	if (*s == '/')
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "archive entry '%s': absolute %s '%s'",
		    sp_quote(entry, q, sizeof q), what, sp_quote(s, q2, sizeof q2));
	for (p = s; *p != '\0'; p = c) {
		while (*p == '/')
			p++;
		for (c = p; *c != '\0' && *c != '/'; c++)
			;
		if (c - p == 2 && p[0] == '.' && p[1] == '.')
			return sp_err_set(e, SP_E_BAD_INPUT, 0,
			    "archive entry '%s': '..' in %s '%s'",
			    sp_quote(entry, q, sizeof q), what,
			    sp_quote(s, q2, sizeof q2));
	}
	return 0;
}

/*
 * libarchive refuses an entry for what it is (escaping, writing through a
 * symlink, unsupported) or because the host failed; only the second may go
 * better on a retry.
 */
static int
extract_err(struct archive *a, const char *dest, const char *name,
    struct sp_err *e)
{
	char q[128], q2[300], why[256];
	const char *s = sp_archive.error_string(a), *at;
	size_t n;

	/* Its messages carry the rewritten path: show the archive's. */
	if (s == NULL)
		s = "unknown error";
	if ((at = strstr(s, dest)) != NULL) {
		n = (size_t)(at - s) < sizeof why ? (size_t)(at - s) :
		    sizeof why - 1;
		memcpy(why, s, n);
		snprintf(why + n, sizeof why - n, "%s", at + strlen(dest));
	} else
		snprintf(why, sizeof why, "%s", s);

	switch (sp_archive.errno_of(a)) {
	case ENOSPC:
	case EDQUOT:
	case EIO:
	case ENOMEM:
	case EMFILE:
	case ENFILE:
	case EROFS:
		errno = sp_archive.errno_of(a);
		return sp_err_sys(e, SP_E_IO, "extract '%s'",
		    sp_quote(name, q, sizeof q));
	default:
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "archive entry '%s' refused: %s", sp_quote(name, q, sizeof q),
		    sp_quote(why, q2, sizeof q2));
	}
}

/* Where device nodes are noted instead of made (sp_layer_defer_devices). */
static json_t *deferred;

void
sp_layer_defer_devices(json_t *list)
{
	deferred = list;
}

/* A name that goes into debugfs's commands as it is (sp_template.c). */
static int
plain_name(const char *rel)
{
	const char *p;

	for (p = rel; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("._+@-/", *p) != NULL))
			return 0;
	return *rel != '\0';
}

/* A device node's entry noted in deferred and turned into an empty file;
 * its stand-in's inode is noted once it is made (note_stand_in). */
static int
defer_device(struct archive_entry *ent, const char *rel, json_t **note,
    struct sp_err *e)
{
	char q[128];
	int chr = sp_archive.entry_filetype(ent) == AE_IFCHR;

	if (!plain_name(rel))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "archive entry '%s': a "
		    "device node's name is of [A-Za-z0-9._+@-] parts (debugfs "
		    "makes it in the image)", sp_quote(rel, q, sizeof q));
	*note = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "path", rel,
	    "type", chr ? "c" : "b", "major",
	    (json_int_t)sp_archive.entry_rdevmajor(ent), "minor",
	    (json_int_t)sp_archive.entry_rdevminor(ent), "mode",
	    (json_int_t)sp_archive.entry_perm(ent), "uid",
	    (json_int_t)sp_archive.entry_uid(ent), "gid",
	    (json_int_t)sp_archive.entry_gid(ent));
	if (*note == NULL)
		return sp_err_set(e, SP_E_INTERNAL, 1, "out of memory");
	sp_archive.entry_set_filetype(ent, AE_IFREG);
	sp_archive.entry_set_size(ent, 0);
	return 0;
}

static int
note_stand_in(json_t *note, const char *path, struct sp_err *e)
{
	struct stat st;

	if (lstat(path, &st) == -1)
		return sp_err_sys(e, SP_E_IO, "stat '%s'", path);
	if (json_object_set_new(note, "ino", json_integer((json_int_t)
	    st.st_ino)) == -1 || json_array_append(deferred, note) == -1)
		return sp_err_set(e, SP_E_INTERNAL, 1, "out of memory");
	return 0;
}

/* One archive being unpacked. */
struct layer {
	const char *dest;
	int destfd;
	int oci;
	json_t *seen;	/* OCI: the paths this layer made (a set) */
};

/* The entry name as a clean relative path: no "." or empty components, no
 * leading or trailing "/"; "" is the root.  ".." was refused before. */
static int
clean_name(const char *in, char *out, size_t n, struct sp_err *e)
{
	const char *p = in, *c;
	size_t j = 0, len;

	while (*p != '\0') {
		while (*p == '/')
			p++;
		for (c = p; *c != '\0' && *c != '/'; c++)
			;
		len = (size_t)(c - p);
		if (len == 0 || (len == 1 && p[0] == '.')) {
			p = c;
			continue;
		}
		if (j + len + 2 > n)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "archive entry "
			    "name of %zu bytes is too long", strlen(in));
		if (j > 0)
			out[j++] = '/';
		memcpy(out + j, p, len);
		j += len;
		p = c;
	}
	out[j] = '\0';
	return 0;
}

/* A directory of the staged tree, reached without following any symlink:
 * -1 with errno ENOENT (not there), ELOOP (a symlink on the way) or
 * ENOTDIR (a file on the way). */
static int
open_dir(const struct layer *l, const char *rel)
{
	struct open_how how;

	memset(&how, 0, sizeof how);
	how.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	    RESOLVE_NO_MAGICLINKS;
	return (int)syscall(SYS_openat2, l->destfd, *rel ? rel : ".", &how,
	    sizeof how);
}

/* Splits rel into its directory (parent, "" for the root) and its last
 * component (returned). */
static const char *
split(const char *rel, char *parent, size_t n)
{
	const char *slash = strrchr(rel, '/');

	if (slash == NULL) {
		parent[0] = '\0';
		return rel;
	}
	snprintf(parent, n, "%.*s", (int)(slash - rel), rel);
	return slash + 1;
}

/* The directory of rel, for a change there; a symlink on the way refuses
 * the entry.  -2 when the directory is not there. */
static int
parent_dir(const struct layer *l, const char *rel, const char *what,
    struct sp_err *e)
{
	char parent[SP_PATH_MAX], q[128];
	int fd;

	split(rel, parent, sizeof parent);
	if ((fd = open_dir(l, parent)) != -1)
		return fd;
	if (errno == ENOENT)
		return -2;
	if (errno == ELOOP || errno == ENOTDIR || errno == EXDEV)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "layer %s '%s' lies "
		    "under a symlink or a file: nothing is written through "
		    "one", what, sp_quote(rel, q, sizeof q));
	return sp_err_sys(e, SP_E_IO, "open '%s'", sp_quote(parent, q,
	    sizeof q));
}

/* Removes name in dirfd (rel is its path in the tree), whatever it is. */
static int
remove_at(const struct layer *l, int dirfd, const char *name, const char *rel,
    struct sp_err *e)
{
	char path[SP_PATH_MAX];
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1)
		return errno == ENOENT ? 0 : sp_err_sys(e, SP_E_IO, "stat '%s'",
		    rel);
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) == -1 && errno != ENOENT)
			return sp_err_sys(e, SP_E_IO, "remove '%s'", rel);
		return 0;
	}
	/* Its parents were reached without a symlink: the path is safe, and
	 * the walk does not follow one either. */
	if (sp_path_fmt(path, sizeof path, e, "%s/%s", l->dest, rel) == -1)
		return -1;
	return sp_path_remove_tree(path, e);
}

/* Everything under the directory dirfd (rel) that lower layers made: what
 * this layer made stays, and in its directories only what it made too. */
static int
remove_lower(const struct layer *l, int dirfd, const char *rel,
    struct sp_err *e)
{
	char path[SP_PATH_MAX];
	struct dirent *d;
	DIR *dp;
	int fd, ret = 0;

	if ((fd = dup(dirfd)) == -1 || (dp = fdopendir(fd)) == NULL) {
		if (fd != -1)
			close(fd);
		return sp_err_sys(e, SP_E_IO, "read '%s'", rel);
	}
	while (ret == 0 && (d = readdir(dp)) != NULL) {
		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		if (sp_path_fmt(path, sizeof path, e, "%s%s%s", rel,
		    *rel ? "/" : "", d->d_name) == -1) {
			ret = -1;
			break;
		}
		if (json_object_get(l->seen, path) == NULL) {
			ret = remove_at(l, dirfd, d->d_name, path, e);
			continue;
		}
		fd = openat(dirfd, d->d_name, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC);
		if (fd == -1)
			continue;	/* not a directory: it is this layer's */
		ret = remove_lower(l, fd, path, e);
		close(fd);
	}
	closedir(dp);
	return ret;
}

/* ".wh.NAME" removes NAME; ".wh..wh..opq" what lower layers put beside it. */
static int
whiteout(const struct layer *l, const char *rel, const char *base,
    struct sp_err *e)
{
	char parent[SP_PATH_MAX], victim[SP_PATH_MAX], q[128];
	const char *name = base + 4;
	int fd, ret;

	split(rel, parent, sizeof parent);
	if (strcmp(name, ".wh..opq") != 0 && (*name == '\0' ||
	    strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
	    strncmp(name, ".wh.", 4) == 0))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "layer whiteout '%s' "
		    "names no file it may remove", sp_quote(rel, q, sizeof q));
	if ((fd = parent_dir(l, rel, "whiteout", e)) == -1)
		return -1;
	if (fd == -2)
		return 0;	/* nothing there to remove */
	if (strcmp(name, ".wh..opq") == 0)
		ret = remove_lower(l, fd, parent, e);
	else if (sp_path_fmt(victim, sizeof victim, e, "%s%s%s", parent,
	    *parent ? "/" : "", name) == -1)
		ret = -1;
	else if (json_object_get(l->seen, victim) != NULL)
		ret = 0;	/* this layer's own, not a lower one's */
	else
		ret = remove_at(l, fd, name, victim, e);
	close(fd);
	return ret;
}

/*
 * Before an OCI layer's entry is written: its directory must be reached
 * without a symlink, and a directory of lower layers where it puts something
 * else goes, with all below it.  The entry joins the layer's set.
 */
static int
layer_entry(const struct layer *l, const char *rel, int isdir,
    struct sp_err *e)
{
	struct stat st;
	const char *base;
	char parent[SP_PATH_MAX];
	int fd, ret = 0;

	if (*rel == '\0')
		return 0;
	base = split(rel, parent, sizeof parent);
	if ((fd = parent_dir(l, rel, "entry", e)) == -1)
		return -1;
	if (fd >= 0) {
		if (!isdir && fstatat(fd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode))
			ret = remove_at(l, fd, base, rel, e);
		close(fd);
	}
	if (ret == 0 && json_object_set_new(l->seen, rel, json_true()) == -1)
		ret = sp_err_set(e, SP_E_INTERNAL, 1, "out of memory");
	return ret;
}

/* A hard link's target: a file of this layer or a lower one, reached without
 * a symlink. */
static int
link_target(const struct layer *l, const char *entry, const char *hl,
    char *out, size_t n, struct sp_err *e)
{
	char rel[SP_PATH_MAX];
	int fd;

	if (entry_check(entry, "hard link target", hl, e) == -1 ||
	    clean_name(hl, rel, sizeof rel, e) == -1)
		return -1;
	if (l->oci) {
		if ((fd = parent_dir(l, rel, "hard link target", e)) == -1)
			return -1;
		if (fd >= 0)
			close(fd);
	}
	return sp_path_fmt(out, n, e, "%s/%s", l->dest, rel);
}

static int
unpack(struct layer *l, struct archive *in, struct archive *out,
    const char *file, struct sp_err *e)
{
	struct archive_entry *ent;
	char path[SP_PATH_MAX], link[SP_PATH_MAX], name[SP_PATH_MAX];
	char rel[SP_PATH_MAX], parent[SP_PATH_MAX], q[128];
	const char *hl, *base;
	const void *buf;
	json_t *note = NULL;
	size_t len;
	la_int64_t off;
	int r, isdir, ft, rc;

	for (;;) {
		r = sp_archive.read_next_header(in, &ent);
		if (r == ARCHIVE_EOF)
			return 0;
		if (r < ARCHIVE_WARN)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "archive '%s': %s",
			    sp_quote(file, q, sizeof q),
			    sp_archive.error_string(in));
		if (entry_check(sp_archive.entry_pathname(ent), "path",
		    sp_archive.entry_pathname(ent), e) == -1)
			return -1;
		snprintf(name, sizeof name, "%s",
		    sp_archive.entry_pathname(ent));
		if (clean_name(name, rel, sizeof rel, e) == -1)
			return -1;
		if (l->oci) {
			base = split(rel, parent, sizeof parent);
			if (strncmp(base, ".wh.", 4) == 0) {
				if (whiteout(l, rel, base, e) == -1)
					return -1;
				continue;
			}
			isdir = sp_archive.entry_filetype(ent) == AE_IFDIR;
			if (layer_entry(l, rel, isdir, e) == -1)
				return -1;
		}
		if (sp_path_fmt(path, sizeof path, e, "%s/%s", l->dest,
		    *rel ? rel : ".") == -1)
			return -1;
		sp_archive.entry_copy_pathname(ent, path);
		if ((hl = sp_archive.entry_hardlink(ent)) != NULL) {
			if (link_target(l, name, hl, link, sizeof link, e) == -1)
				return -1;
			sp_archive.entry_copy_hardlink(ent, link);
		}
		ft = sp_archive.entry_filetype(ent);
		if (deferred != NULL && hl == NULL && (ft == AE_IFCHR ||
		    ft == AE_IFBLK) && defer_device(ent, rel, &note, e) == -1)
			return -1;
		if (sp_archive.write_header(out, ent) < ARCHIVE_WARN) {
			json_decref(note);
			return extract_err(out, l->dest, name, e);
		}
		if (note != NULL) {
			rc = note_stand_in(note, path, e);
			json_decref(note);
			note = NULL;
			if (rc == -1)
				return -1;
		}
		for (;;) {
			r = sp_archive.read_data_block(in, &buf, &len, &off);
			if (r == ARCHIVE_EOF)
				break;
			if (r < ARCHIVE_WARN)
				return sp_err_set(e, SP_E_BAD_INPUT, 0,
				    "archive entry '%s': %s",
				    sp_quote(name, q, sizeof q),
				    sp_archive.error_string(in));
			if (sp_archive.write_data_block(out, buf, len, off) <
			    ARCHIVE_WARN)
				return extract_err(out, l->dest, name, e);
		}
		if (sp_archive.write_finish_entry(out) < ARCHIVE_WARN)
			return extract_err(out, l->dest, name, e);
	}
}

int
sp_layer_unpack(const char *file, const char *dest, int oci, struct sp_err *e)
{
	char q[128];
	int fd, rc;

	if ((fd = open(file, O_RDONLY | O_CLOEXEC)) == -1)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "archive '%s': %s",
		    sp_quote(file, q, sizeof q), strerror(errno));
	rc = sp_layer_unpack_fd(fd, file, dest, oci, e);
	close(fd);
	return rc;
}

int
sp_layer_unpack_fd(int fd, const char *file, const char *dest, int oci,
    struct sp_err *e)
{
	struct layer l = { .dest = dest, .destfd = -1, .oci = oci };
	struct archive *in = NULL, *out = NULL;
	char q[128];
	int ret = -1;

	if (sp_archive_load(e) == -1)
		return -1;
	l.destfd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l.destfd == -1)
		return sp_err_sys(e, SP_E_IO, "open '%s'", dest);
	in = sp_archive.read_new();
	out = sp_archive.write_disk_new();
	if (in == NULL || out == NULL || (oci && (l.seen = json_object()) ==
	    NULL)) {
		sp_err_set(e, SP_E_INTERNAL, 1, "libarchive: out of memory");
		goto out;
	}
	sp_archive.read_support_filter_all(in);
	sp_archive.read_support_format_all(in);
	/* No user lookup: owners are the archive's numeric ids, not the
	 * host's idea of its user names. */
	sp_archive.write_disk_set_options(out, EXTRACT_FLAGS);
	if (sp_archive.read_open_fd(in, fd, 64 * 1024) != ARCHIVE_OK) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "archive '%s': %s",
		    sp_quote(file, q, sizeof q), sp_archive.error_string(in));
		goto out;
	}
	if (unpack(&l, in, out, file, e) == -1)
		goto out;
	/* Directory modes and times are applied at close. */
	if (sp_archive.write_close(out) < ARCHIVE_WARN) {
		extract_err(out, dest, "(directories)", e);
		goto out;
	}
	ret = 0;
out:
	sp_archive.read_free(in);
	sp_archive.write_free(out);
	json_decref(l.seen);
	close(l.destfd);
	return ret;
}
