/*
 * sp_noded: space-noded's operations, carried out beneath SPACE_ROOT.  A
 * request's paths were checked by sp_noded_parse; here each is opened with
 * openat2 from the root's directory, RESOLVE_BENEATH (nothing outside it),
 * RESOLVE_NO_SYMLINKS (no component a symlink: a client cannot point one
 * into /etc) and RESOLVE_NO_XDEV (no other mount), and libbtrfsutil acts
 * on the file descriptors it got, never on a path it would look up again.
 */
#include <sys/syscall.h>

#include <linux/openat2.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "sp_storage.h"

int
sp_noded_open_beneath(int root_fd, const char *path, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
		    RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};

	return (int)syscall(SYS_openat2, root_fd, path, &how, sizeof how);
}

static int
sys_err(struct sp_err *e, const char *what, const char *path)
{
	enum sp_code code = SP_E_IO;

	if (errno == ENOENT)
		code = SP_E_NOT_FOUND;
	else if (errno == EEXIST)
		code = SP_E_EXISTS;
	else if (errno == ELOOP || errno == EXDEV || errno == ENOTDIR)
		code = SP_E_BAD_INPUT;
	return sp_err_sys(e, code, "%s '%s'", what, path);
}

static int
bt_err(struct sp_err *e, enum btrfs_util_error err, const char *what,
    const char *path)
{
	if (errno == ENOENT || errno == EEXIST)
		return sys_err(e, what, path);
	return sp_err_sys(e, SP_E_BTRFS, "%s '%s': %s", what, path,
	    btrfs_util_strerror(err));
}

/* The directory that holds path's last part, and that part. */
static int
open_parent(int root_fd, const char *path, const char **name,
    struct sp_err *e)
{
	char parent[SP_NODED_PATH_MAX + 1];
	const char *slash = strrchr(path, '/');
	int fd;

	/* sp_noded_parse made sure of at least two parts. */
	memcpy(parent, path, (size_t)(slash - path));
	parent[slash - path] = '\0';
	*name = slash + 1;
	if ((fd = sp_noded_open_beneath(root_fd, parent, O_RDONLY | O_DIRECTORY)) == -1)
		return sys_err(e, "the directory of", path);
	return fd;
}

/* A subvolume, opened beneath the root: bad-state when path is a plain
 * directory. */
static int
open_subvol(int root_fd, const char *what, const char *path, struct sp_err *e)
{
	enum btrfs_util_error err;
	int fd;

	if ((fd = sp_noded_open_beneath(root_fd, path, O_RDONLY | O_DIRECTORY)) == -1)
		return sys_err(e, what, path);
	if ((err = btrfs_util_is_subvolume_fd(fd)) != BTRFS_UTIL_OK) {
		close(fd);
		if (err == BTRFS_UTIL_ERROR_NOT_SUBVOLUME)
			return sp_err_set(e, SP_E_BAD_STATE, 0, "%s '%s' is not a "
			    "subvolume", what, path);
		return bt_err(e, err, what, path);
	}
	return fd;
}

int
sp_noded_do(int root_fd, const struct sp_noded_req *r, struct sp_err *e)
{
	enum btrfs_util_error err = BTRFS_UTIL_OK;
	const char *name;
	int pfd = -1, fd = -1, rc = -1;

	if (r->op == SP_NODED_PING)
		return 0;
	if ((pfd = open_parent(root_fd, r->path, &name, e)) == -1)
		return -1;
	switch (r->op) {
	case SP_NODED_CREATE:
		err = btrfs_util_create_subvolume_fd(pfd, name, 0, NULL, NULL);
		break;
	case SP_NODED_SNAPSHOT:
		if ((fd = open_subvol(root_fd, "src", r->src, e)) == -1)
			goto out;
		err = btrfs_util_create_snapshot_fd2(fd, pfd, name,
		    r->readonly ? BTRFS_UTIL_CREATE_SNAPSHOT_READ_ONLY : 0,
		    NULL, NULL);
		break;
	case SP_NODED_DELETE:
		/* Only a subvolume goes: not a directory that holds them. */
		if ((fd = open_subvol(root_fd, "path", r->path, e)) == -1)
			goto out;
		close(fd);
		fd = -1;
		err = btrfs_util_delete_subvolume_fd(pfd, name, 0);
		break;
	default:
		sp_err_set(e, SP_E_INTERNAL, 0, "op %d", (int)r->op);
		goto out;
	}
	if (err != BTRFS_UTIL_OK) {
		bt_err(e, err, r->op == SP_NODED_CREATE ? "create" :
		    r->op == SP_NODED_SNAPSHOT ? "snapshot to" : "delete", r->path);
		goto out;
	}
	rc = 0;
out:
	if (fd != -1)
		close(fd);
	close(pfd);
	return rc;
}
