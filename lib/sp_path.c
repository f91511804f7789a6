/* sp_path: building and making paths (never truncating one silently), sizes,
 * and the file locks that serialize work on one thing. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sp_core.h"
#include "sp_tls.h"

int
sp_path_fmt(char *out, size_t n, struct sp_err *e, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(out, n, fmt, ap);
	va_end(ap);
	if (r < 0 || (size_t)r >= n)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "path too long");
	return 0;
}

int
sp_path_adopt(int fd, const char *path, struct sp_err *e)
{
	char dir[SP_PATH_MAX], *slash;
	struct stat st;
	uid_t uid;
	gid_t gid;

	if (geteuid() != 0)
		return 0;
	if (sp_path_fmt(dir, sizeof dir, e, "%s", path) == -1)
		return -1;
	if ((slash = strrchr(dir, '/')) == NULL)
		snprintf(dir, sizeof dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	if (stat(dir, &st) == -1 || st.st_uid == 0 ||
	    !sp_space_ids(&uid, &gid) || st.st_uid != uid)
		return 0;
	if ((fd >= 0 ? fchown(fd, uid, gid) : lchown(path, uid, gid)) == -1)
		return sp_err_sys(e, SP_E_IO, "give %s to %s", path, SP_USER);
	return 0;
}

int
sp_path_space_dir(const char *path, mode_t mode, struct sp_err *e)
{
	uid_t uid;
	gid_t gid;
	int fd, rc = 0;

	if (sp_path_mkdirs(path, mode, e) == -1)
		return -1;
	if (geteuid() != 0 || !sp_space_ids(&uid, &gid))
		return 0;
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1 || fchown(fd, uid, gid) == -1 ||
	    fchmod(fd, mode) == -1)
		rc = sp_err_sys(e, SP_E_IO, "give %s to %s", path, SP_USER);
	if (fd != -1)
		close(fd);
	return rc;
}

int
sp_path_mkdirs(const char *path, mode_t mode, struct sp_err *e)
{
	char buf[SP_PATH_MAX], *p;
	struct stat st;

	if (sp_path_fmt(buf, sizeof buf, e, "%s", path) == -1)
		return -1;
	for (p = buf + 1; ; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;

		*p = '\0';
		if (mkdir(buf, mode) == 0) {
			if (sp_path_adopt(-1, buf, e) == -1)
				return -1;
		} else if (errno != EEXIST)
			return sp_err_sys(e, SP_E_IO, "mkdir %s", buf);
		*p = c;
		if (c == '\0')
			break;
	}
	if (stat(path, &st) == -1 || !S_ISDIR(st.st_mode))
		return sp_err_set(e, SP_E_IO, 0, "%s is not a directory", path);
	return 0;
}

static int
remove1(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		return rmdir(p) == -1 && errno != ENOENT ? -1 : 0;
	return unlink(p) == -1 && errno != ENOENT ? -1 : 0;
}

int
sp_path_remove_tree(const char *path, struct sp_err *e)
{
	struct stat st;

	if (lstat(path, &st) == -1) {
		if (errno == ENOENT)
			return 0;
		return sp_err_sys(e, SP_E_IO, "%s", path);
	}
	/* FTW_PHYS: never follow a symlink out of the tree; FTW_MOUNT: stay here. */
	if (nftw(path, remove1, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) == -1)
		return sp_err_sys(e, SP_E_IO, "remove %s", path);
	return 0;
}

int
sp_size_parse(const char *s, uint64_t *out, struct sp_err *e)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	errno = 0;
	if (s == NULL || *s < '0' || *s > '9')
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "not a size");
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "size out of range");
	switch (*end) {
	case '\0':
		break;
	case 'K': case 'k':
		shift = 10;
		break;
	case 'M': case 'm':
		shift = 20;
		break;
	case 'G': case 'g':
		shift = 30;
		break;
	case 'T': case 't':
		shift = 40;
		break;
	default:
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "unknown size suffix");
	}
	if (*end != '\0' && end[1] != '\0')
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "unknown size suffix");
	if (shift > 0 && v > (UINT64_MAX >> shift))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "size out of range");
	*out = (uint64_t)v << shift;
	return 0;
}

int
sp_flock(int fd, int wait, struct sp_err *e)
{
	while (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) == -1) {
		if (errno == EINTR)
			continue;
		if (errno == EWOULDBLOCK)
			return sp_err_set(e, SP_E_BUSY, 1,
			    "another command is acting on it");
		return sp_err_sys(e, SP_E_IO, "lock");
	}
	return 0;
}

const char *
sp_path_beneath(const char *root, const char *abs)
{
	size_t n = strlen(root);

	return strncmp(abs, root, n) == 0 && abs[n] == '/' ? abs + n + 1 : NULL;
}

int
sp_lock_path(const char *path, int wait, int *fd, struct sp_err *e)
{
	if ((*fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
	    0644)) == -1)
		return sp_err_sys(e, SP_E_IO, "open lock '%s'", path);
	if (sp_flock(*fd, wait, e) == -1) {
		close(*fd);
		*fd = -1;
		return -1;
	}
	return 0;
}

/* Here and not in sp_tls.c: a template build asks for this path, and
 * should not pay for loading OpenSSL to learn it. */
int
sp_tls_ca_cert_path(const char *root, char *out, size_t n, struct sp_err *e)
{
	struct stat st;

	if (sp_path_fmt(out, n, e, "%s/%s/ca.crt", root, SP_TLS_CA_DIR) == -1)
		return -1;
	if (stat(out, &st) == -1) {
		if (errno == ENOENT)
			return sp_err_set(e, SP_E_NOT_FOUND, 0, "no node CA "
			    "certificate '%s' (space-init makes it)", out);
		return sp_err_sys(e, SP_E_IO, "stat '%s'", out);
	}
	if (!S_ISREG(st.st_mode))
		return sp_err_set(e, SP_E_CORRUPT, 0, "node CA certificate '%s' "
		    "is not a regular file", out);
	return 0;
}

int
sp_path_replace_text(const char *path, const char *text, struct sp_err *e)
{
	size_t len = strlen(text);
	int fd;

	if (unlink(path) == -1 && errno != ENOENT)
		return sp_err_sys(e, SP_E_IO, "unlink %s", path);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0644)) == -1)
		return sp_err_sys(e, SP_E_IO, "create %s", path);
	if (sp_path_adopt(fd, path, e) == -1) {
		close(fd);
		return -1;
	}
	if (sp_write_all(fd, text, len) == -1) {
		sp_err_sys(e, SP_E_IO, "write %s", path);
		close(fd);
		return -1;
	}
	if (close(fd) == -1)
		return sp_err_sys(e, SP_E_IO, "%s", path);
	return 0;
}

int
sp_path_write_text(const char *path, const char *text, struct sp_err *e)
{
	int fd;
	ssize_t n;
	size_t len = strlen(text);

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_IO, "%s", path);
	n = write(fd, text, len);
	if (n != (ssize_t)len) {
		sp_err_sys(e, SP_E_IO, "write %s", path);
		close(fd);
		return -1;
	}
	if (close(fd) == -1)
		return sp_err_sys(e, SP_E_IO, "%s", path);
	return 0;
}
