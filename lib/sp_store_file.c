/*
 * sp_store_file: the file:// backend of the object store (sp_store.c).  Each
 * object is a file, written beside its place and renamed into it whole.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "sp_storage.h"
#include "sp_store_int.h"

static int
file_path(struct sp_store *s, const char *key, char *out, size_t n,
    struct sp_err *e)
{
	return sp_path_fmt(out, n, e, "%s/%s", s->dir, key);
}

/* Makes the directory a key's file goes in. */
static int
file_mkparent(const char *path, struct sp_err *e)
{
	char dir[SP_PATH_MAX];
	char *slash;

	if (sp_path_fmt(dir, sizeof dir, e, "%s", path) == -1)
		return -1;
	if ((slash = strrchr(dir, '/')) == NULL || slash == dir)
		return 0;
	*slash = '\0';
	return sp_path_mkdirs(dir, 0700, e);
}

/*
 * What root writes into a store another user owns (the user space's, which
 * space-init gives it) is that user's too, so that the unprivileged
 * manager goes on using the store whoever wrote last: path's directories
 * below the store's, and the file out about to become path.
 */
static int
adopt(struct sp_store *s, const char *path, int out, struct sp_err *e)
{
	char p[SP_PATH_MAX], *c;
	struct stat top, st;

	if (geteuid() != 0 || stat(s->dir, &top) == -1 || top.st_uid == 0)
		return 0;
	if (sp_path_fmt(p, sizeof p, e, "%s", path) == -1)
		return -1;
	for (c = p + strlen(s->dir) + 1; (c = strchr(c, '/')) != NULL; c++) {
		*c = '\0';
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
		    lchown(p, top.st_uid, top.st_gid) == -1)
			return sp_err_sys(e, SP_E_IO, "chown %s", p);
		*c = '/';
	}
	if (fchown(out, top.st_uid, top.st_gid) == -1)
		return sp_err_sys(e, SP_E_IO, "chown the file of %s", path);
	return 0;
}

/* fsync of the directory holding path, so that a rename in it lasts. */
static int
file_sync_parent(const char *path, struct sp_err *e)
{
	char dir[SP_PATH_MAX];
	char *slash;
	int fd, rc = 0;

	if (sp_path_fmt(dir, sizeof dir, e, "%s", path) == -1)
		return -1;
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_IO, "open %s", dir);
	if (fsync(fd) == -1)
		rc = sp_err_sys(e, SP_E_IO, "fsync %s", dir);
	close(fd);
	return rc;
}

/* Writes path's sibling .NAME.tmp-XXXXXX, then renames it into place: a
 * reader sees the old object or the new one, never a part. */
int
store_file_put(struct sp_store *s, const char *key, int fd, uint64_t *bytes,
    struct sp_err *e)
{
	char path[SP_PATH_MAX], tmp[SP_PATH_MAX];
	const char *name;
	unsigned char *buf = NULL;
	uint64_t total = 0;
	size_t got;
	int out = -1, tries, rc = -1;

	if (file_path(s, key, path, sizeof path, e) == -1)
		return -1;
	name = strrchr(path, '/') + 1;
	if (sp_path_fmt(tmp, sizeof tmp, e, "%.*s.%s.tmp-XXXXXX",
	    (int)(name - path), path, name) == -1)
		return -1;
	/* A delete may remove the (empty) directory between the two steps. */
	for (tries = 0; out == -1; tries++) {
		if (file_mkparent(path, e) == -1)
			return -1;
		memcpy(tmp + strlen(tmp) - 6, "XXXXXX", 6);
		if ((out = mkostemp(tmp, O_CLOEXEC)) == -1 &&
		    (errno != ENOENT || tries == 3))
			return sp_err_sys(e, SP_E_IO, "create %s", tmp);
	}
	if (adopt(s, path, out, e) == -1)
		goto out;
	if ((buf = malloc(COPY_BUF)) == NULL) {
		sp_err_set(e, SP_E_NOMEM, 1, "put %s: no memory", key);
		goto out;
	}
	for (;;) {
		if (store_fill(fd, buf, COPY_BUF, &got, "put", key, e) == -1)
			goto out;
		if (got == 0)
			break;
		if (sp_write_all(out, buf, got) == -1) {
			sp_err_sys(e, SP_E_IO, "write %s", tmp);
			goto out;
		}
		total += got;
	}
	if (fsync(out) == -1) {
		sp_err_sys(e, SP_E_IO, "fsync %s", tmp);
		goto out;
	}
	if (close(out) == -1) {
		out = -1;
		sp_err_sys(e, SP_E_IO, "close %s", tmp);
		goto out;
	}
	out = -1;
	if (rename(tmp, path) == -1) {
		sp_err_sys(e, SP_E_IO, "rename to %s", path);
		goto out;
	}
	if (file_sync_parent(path, e) == -1)
		goto out;
	if (bytes != NULL)
		*bytes = total;
	rc = 0;
out:
	free(buf);
	if (out != -1)
		close(out);
	if (rc == -1)
		unlink(tmp);
	return rc;
}

/* Opens the object's file: not-found unless it is a regular file. */
static int
file_open(struct sp_store *s, const char *key, const char *what,
    struct stat *st, struct sp_err *e)
{
	char path[SP_PATH_MAX];
	int fd;

	if (file_path(s, key, path, sizeof path, e) == -1)
		return -1;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
			return sp_err_set(e, SP_E_NOT_FOUND, 0, "%s %s: no such "
			    "object", what, key);
		return sp_err_sys(e, SP_E_IO, "%s %s", what, key);
	}
	if (fstat(fd, st) == -1 || !S_ISREG(st->st_mode)) {
		close(fd);
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "%s %s: no such object",
		    what, key);
	}
	return fd;
}

int
store_file_get(struct sp_store *s, const char *key, int fd, uint64_t *bytes,
    struct sp_err *e)
{
	unsigned char *buf = NULL;
	struct stat st;
	size_t got;
	int in, rc = -1;

	if ((in = file_open(s, key, "get", &st, e)) == -1)
		return -1;
	if ((buf = malloc(COPY_BUF)) == NULL) {
		sp_err_set(e, SP_E_NOMEM, 1, "get %s: no memory", key);
		goto out;
	}
	for (;;) {
		if (store_fill(in, buf, COPY_BUF, &got, "get", key, e) == -1)
			goto out;
		if (got == 0)
			break;
		if (s->get_max > 0 && *bytes + got > s->get_max) {
			sp_err_set(e, SP_E_TOO_BIG, 0, "get %s: longer than %llu "
			    "bytes", key, (unsigned long long)s->get_max);
			goto out;
		}
		if (sp_write_all(fd, buf, got) == -1) {
			sp_err_sys(e, SP_E_IO, "get %s: write", key);
			goto out;
		}
		*bytes += got;
	}
	rc = 0;
out:
	free(buf);
	close(in);
	return rc;
}

int
store_file_head(struct sp_store *s, const char *key, uint64_t *size,
    struct sp_err *e)
{
	struct stat st;
	int fd;

	if ((fd = file_open(s, key, "head", &st, e)) == -1)
		return -1;
	close(fd);
	*size = (uint64_t)st.st_size;
	return 0;
}

int
store_file_delete(struct sp_store *s, const char *key, struct sp_err *e)
{
	char path[SP_PATH_MAX];
	char *slash;
	size_t root = strlen(s->dir);

	if (file_path(s, key, path, sizeof path, e) == -1)
		return -1;
	if (unlink(path) == -1 && errno != ENOENT && errno != ENOTDIR &&
	    errno != EISDIR)
		return sp_err_sys(e, SP_E_IO, "delete %s", key);
	/* Directories the key made and nothing else uses go too. */
	while ((slash = strrchr(path, '/')) != NULL &&
	    (size_t)(slash - path) > root) {
		*slash = '\0';
		if (rmdir(path) == -1)
			break;
	}
	return 0;
}

struct walk {
	char key[SP_STORE_KEY_MAX + 2];
	const char *prefix;
	int (*fn)(const char *, uint64_t, void *);
	void *arg;
	int stop;
};

struct entry {
	char *name;
	int dir;
	uint64_t size;
};

/* Whether a and b agree over the length of the shorter. */
static int
prefixes_meet(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	return strncmp(a, b, la < lb ? la : lb) == 0;
}

/* Byte order of the keys: a directory sorts as its name with a '/'. */
static int
entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	const unsigned char *p = (const unsigned char *)x->name;
	const unsigned char *q = (const unsigned char *)y->name;
	int c, d;

	for (;; p++, q++) {
		c = *p != '\0' ? *p : x->dir ? '/' : 0;
		d = *q != '\0' ? *q : y->dir ? '/' : 0;
		if (c != d || c == 0 || c == '/')
			return c - d;
	}
}

/* The keys under directory dfd (its key so far in w->key, len bytes). */
static int
file_walk(struct walk *w, int dfd, size_t len, struct sp_err *e)
{
	struct entry *v = NULL, *nv;
	size_t n = 0, cap = 0, i, nl;
	struct dirent *d;
	struct stat st;
	DIR *dir;
	int sub, rc = -1;

	if ((dir = fdopendir(dfd)) == NULL) {
		close(dfd);
		return sp_err_sys(e, SP_E_IO, "list: opendir");
	}
	while ((errno = 0, d = readdir(dir)) != NULL) {
		if (d->d_name[0] == '.')
			continue;	/* ., .., and a put's temporary files */
		if (fstatat(dfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1)
			continue;	/* deleted meanwhile */
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
			continue;
		nl = strlen(d->d_name);
		/* Keys under a directory take a '/' and a byte more. */
		if (!store_key_valid(d->d_name, SP_STORE_NAME_MAX) ||
		    len + nl + (S_ISDIR(st.st_mode) ? 2 : 0) > SP_STORE_KEY_MAX)
			continue;	/* no key can name it */
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			if ((nv = realloc(v, cap * sizeof *v)) == NULL) {
				sp_err_set(e, SP_E_NOMEM, 1, "list: no memory");
				goto out;
			}
			v = nv;
		}
		if ((v[n].name = strdup(d->d_name)) == NULL) {
			sp_err_set(e, SP_E_NOMEM, 1, "list: no memory");
			goto out;
		}
		v[n].dir = S_ISDIR(st.st_mode);
		v[n++].size = (uint64_t)st.st_size;
	}
	if (errno != 0) {
		sp_err_sys(e, SP_E_IO, "list: readdir");
		goto out;
	}
	if (n > 0)
		qsort(v, n, sizeof *v, entry_cmp);
	for (i = 0; i < n && !w->stop; i++) {
		nl = strlen(v[i].name);
		memcpy(w->key + len, v[i].name, nl + 1);
		if (v[i].dir) {
			/* Only into directories the prefix may reach. */
			w->key[len + nl] = '/';
			w->key[len + nl + 1] = '\0';
			if (!prefixes_meet(w->key, w->prefix))
				continue;
			sub = openat(dfd, v[i].name, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
			if (sub == -1)
				continue;
			if (file_walk(w, sub, len + nl + 1, e) == -1)
				goto out;
		} else if (strncmp(w->key, w->prefix, strlen(w->prefix)) == 0 &&
		    store_key_valid(w->key, SP_STORE_KEY_MAX) &&
		    w->fn(w->key, v[i].size, w->arg) != 0)
			w->stop = 1;
	}
	rc = 0;
out:
	for (i = 0; i < n; i++)
		free(v[i].name);
	free(v);
	closedir(dir);
	return rc;
}

int
store_file_list(struct sp_store *s, const char *prefix,
    int (*fn)(const char *, uint64_t, void *), void *arg, struct sp_err *e)
{
	char path[SP_PATH_MAX];
	const char *slash = strrchr(prefix, '/');
	size_t len = slash != NULL ? (size_t)(slash - prefix) + 1 : 0;
	struct walk w;
	int dfd;

	/* Start in the deepest directory the prefix names whole. */
	if (sp_path_fmt(path, sizeof path, e, "%s/%.*s", s->dir, (int)len,
	    prefix) == -1)
		return -1;
	if ((dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return sp_err_sys(e, SP_E_IO, "list %s", prefix);
	}
	memcpy(w.key, prefix, len);
	w.key[len] = '\0';
	w.prefix = prefix;
	w.fn = fn;
	w.arg = arg;
	w.stop = 0;
	return file_walk(&w, dfd, len, e);
}
