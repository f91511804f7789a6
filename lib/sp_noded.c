/*
 * sp_noded: space-noded's operations, carried out beneath SPACE_ROOT.  A
 * request's paths were checked by sp_noded_parse; here each is opened with
 * openat2 from the root's directory, RESOLVE_BENEATH (nothing outside it),
 * RESOLVE_NO_SYMLINKS (no component a symlink: a client cannot point one
 * into /etc) and RESOLVE_NO_XDEV (no other mount), and libbtrfsutil acts
 * on the file descriptors it got, never on a path it would look up again.
 * btrfs send and receive, which do look up again, get the same checks and
 * directories only root may change.
 */
#include <sys/stat.h>
#include <sys/syscall.h>

#include <linux/openat2.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
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

/* 1 when only root may change what the directory at fd holds. */
static int
root_only(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
	    (st.st_mode & 022) == 0;
}

int
sp_noded_root_only(int root_fd, const char *root, const char *what,
    const char *abs, const char *dir, struct sp_err *e)
{
	char part[SP_NODED_PATH_MAX + 1];
	const char *p = dir;
	int fd, ok;

	if (!root_only(root_fd))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s: %s may be changed "
		    "by others than root", what, root);
	if (*dir == '\0')
		return 0;
	for (;;) {
		p = strchr(p, '/');
		snprintf(part, sizeof part, "%.*s", p != NULL ?
		    (int)(p - dir) : (int)strlen(dir), dir);
		if ((fd = sp_noded_open_beneath(root_fd, part, O_PATH |
		    O_DIRECTORY)) == -1)
			return sp_err_sys(e, errno == ENOENT ? SP_E_NOT_FOUND :
			    SP_E_BAD_INPUT, "%s: the directory of '%.64s'", what,
			    abs);
		ok = root_only(fd);
		close(fd);
		if (!ok)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s '%.64s': "
			    "%s/%s may be changed by others than root", what,
			    abs, root, part);
		if (p == NULL)
			return 0;
		p++;
	}
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

	/* A request's path has two parts at least (sp_noded_parse); a
	 * subvolume's in another may have one, or be longer than a request's. */
	if (strlen(path) > SP_NODED_PATH_MAX)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "'%.64s...' is longer "
		    "than %d bytes", path, SP_NODED_PATH_MAX);
	if (slash == NULL) {
		strcpy(parent, ".");
		*name = path;
	} else {
		memcpy(parent, path, (size_t)(slash - path));
		parent[slash - path] = '\0';
		*name = slash + 1;
	}
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

/* A subvolume that is read-only, as btrfs send wants its source and
 * parent: bad-state when it is not. */
static int
open_read_only(int root_fd, const char *what, const char *path,
    struct sp_err *e)
{
	enum btrfs_util_error err;
	bool ro = false;
	int fd;

	if ((fd = open_subvol(root_fd, what, path, e)) == -1)
		return -1;
	if ((err = btrfs_util_get_subvolume_read_only_fd(fd, &ro)) !=
	    BTRFS_UTIL_OK || !ro) {
		close(fd);
		if (err != BTRFS_UTIL_OK)
			return bt_err(e, err, what, path);
		return sp_err_set(e, SP_E_BAD_STATE, 0, "%s '%s' is not "
		    "read-only", what, path);
	}
	return fd;
}

/* The descriptor passed with a send or a receive: a pipe or a regular
 * file, open for what the op does with it. */
static int
passed_ok(const struct sp_noded_req *r, struct sp_err *e)
{
	int need = sp_noded_op_fd(r->op), mode;
	struct stat st;

	if (r->fd < 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s needs a descriptor "
		    "passed with the request", sp_noded_op_name(r->op));
	if ((mode = fcntl(r->fd, F_GETFL)) == -1 || fstat(r->fd, &st) == -1)
		return sp_err_sys(e, SP_E_BAD_INPUT, "the descriptor passed");
	if (!S_ISFIFO(st.st_mode) && !S_ISREG(st.st_mode))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "the descriptor passed "
		    "is not a pipe or a regular file");
	mode &= O_ACCMODE;
	if (mode != need && mode != O_RDWR)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "the descriptor passed "
		    "is not open for %s", need == O_WRONLY ? "writing" :
		    "reading");
	return 0;
}

/* The directories above path (relative) only root may change, as btrfs
 * opens it again by its real path (sp_noded_root_only). */
static int
above_root_only(int root_fd, const char *root, const char *what,
    const char *path, struct sp_err *e)
{
	char dir[SP_NODED_PATH_MAX + 1];
	const char *slash = strrchr(path, '/');

	snprintf(dir, sizeof dir, "%.*s", slash != NULL ? (int)(slash - path) :
	    0, path);
	return sp_noded_root_only(root_fd, root, what, path, dir, e);
}

/*
 * btrfs send and btrfs receive, on what was opened and checked here beneath
 * the root (no symlink on the way, a read-only subvolume to send), handed
 * to btrfs as /proc/self/fd/3 (and 4).  btrfs-progs resolves that to the
 * real path and opens it again by name, so the directories above it must
 * be root's alone, as libvirt's files must: nobody swaps one in between.
 * A receive is chrooted into its directory: no path in the stream reaches
 * out of it.  The stream goes to, or comes from, the client's descriptor;
 * the call waits for the program.
 */
static int
stream(int root_fd, const char *root, const struct sp_noded_req *r,
    struct sp_err *e)
{
	char *send[] = { "btrfs", "-q", "send", "/proc/self/fd/3", NULL };
	char *send_p[] = { "btrfs", "-q", "send", "-p", "/proc/self/fd/4",
	    "/proc/self/fd/3", NULL };
	char *recv[] = { "btrfs", "-q", "receive", "--chroot",
	    "/proc/self/fd/3", NULL };
	int fds[2] = { -1, -1 }, n = 1, errs = -1, rc = -1;
	pid_t pid;

	if (passed_ok(r, e) == -1 ||
	    above_root_only(root_fd, root, "path", r->path, e) == -1 ||
	    (r->parent[0] != '\0' && above_root_only(root_fd, root, "parent",
	    r->parent, e) == -1))
		return -1;
	if (r->op == SP_NODED_SEND) {
		if ((fds[0] = open_read_only(root_fd, "path", r->path, e)) == -1 ||
		    (r->parent[0] != '\0' && (fds[n++] = open_read_only(root_fd,
		    "parent", r->parent, e)) == -1))
			goto out;
	} else if ((fds[0] = sp_noded_open_beneath(root_fd, r->path, O_RDONLY |
	    O_DIRECTORY)) == -1) {
		sys_err(e, "receive into", r->path);
		goto out;
	}
	if ((errs = sp_proc_errfd(e)) == -1 ||
	    sp_proc_spawn_fds(r->op == SP_NODED_RECEIVE ? recv : n == 2 ?
	    send_p : send, r->op == SP_NODED_RECEIVE ? r->fd : -1,
	    r->op == SP_NODED_SEND ? r->fd : -1, errs, fds, n, &pid, e) == -1)
		goto out;
	rc = sp_proc_wait(pid, r->op == SP_NODED_SEND ? "btrfs send" :
	    "btrfs receive", errs, e);
out:
	if (fds[0] != -1)
		close(fds[0]);
	if (fds[1] != -1)
		close(fds[1]);
	if (errs != -1)
		close(errs);
	return rc;
}

/*
 * Clears the read-only flag of the subvolume at fd (path) and of every
 * subvolume in it (top first: one's entry lives in the subvolume above),
 * then deletes those, deepest first, so that a tree with read-only parts
 * goes as a whole, as the commands' own deletes go (sp_subvol.c).  The
 * iterator names them from btrfs's own records; each is opened beneath
 * fd, no symlink followed, so a directory swapped in between is refused.
 */
static int
delete_tree(int fd, const char *path, struct sp_err *e)
{
	struct btrfs_util_subvolume_iterator *it = NULL;
	enum btrfs_util_error err;
	const char *name;
	char *rel = NULL;
	int pass, sub, rc = -1;

	if ((err = btrfs_util_set_subvolume_read_only_fd(fd, false)) !=
	    BTRFS_UTIL_OK)
		return bt_err(e, err, "make writable", path);
	for (pass = 0; pass < 2; pass++) {
		if ((err = btrfs_util_create_subvolume_iterator_fd(fd, 0, pass ==
		    1 ? BTRFS_UTIL_SUBVOLUME_ITERATOR_POST_ORDER : 0, &it)) !=
		    BTRFS_UTIL_OK) {
			bt_err(e, err, "list the subvolumes in", path);
			goto out;
		}
		while ((err = btrfs_util_subvolume_iterator_next(it, &rel,
		    NULL)) == BTRFS_UTIL_OK) {
			if (pass == 0) {
				if ((sub = sp_noded_open_beneath(fd, rel, O_RDONLY |
				    O_DIRECTORY)) == -1) {
					sys_err(e, "a subvolume in", path);
					goto out;
				}
				err = btrfs_util_set_subvolume_read_only_fd(sub,
				    false);
				close(sub);
			} else {
				if ((sub = open_parent(fd, rel, &name, e)) == -1)
					goto out;
				err = btrfs_util_delete_subvolume_fd(sub, name, 0);
				close(sub);
			}
			if (err != BTRFS_UTIL_OK) {
				bt_err(e, err, pass == 0 ? "make writable" :
				    "delete", rel);
				goto out;
			}
			free(rel);
			rel = NULL;
		}
		if (err != BTRFS_UTIL_ERROR_STOP_ITERATION) {
			bt_err(e, err, "list the subvolumes in", path);
			goto out;
		}
		btrfs_util_destroy_subvolume_iterator(it);
		it = NULL;
	}
	rc = 0;
out:
	free(rel);
	if (it != NULL)
		btrfs_util_destroy_subvolume_iterator(it);
	return rc;
}

/*
 * A subvolume just made in pfd (name) is its maker's (uid, gid), so that a
 * client of the space group fills what it asked for; a read-only one is
 * root's, and so is one about to be made read-only: btrfs lets a
 * subvolume's owner clear the flag, and what libvirt and btrfs open by path
 * must not change under them (sp_noded_root_only).  A read-only one made for
 * a client other than root stays readable to its group (root:gid 0750), as
 * the manager reads a snapshot's ckpt.json back.  fd is the subvolume,
 * opened (give's: beneath pfd, no symlink).
 */
static int
give_fd(int fd, const char *path, unsigned uid, unsigned gid, int readonly,
    struct sp_err *e)
{
	enum btrfs_util_error err;
	unsigned to_uid = readonly ? 0 : uid, to_gid = gid;
	struct stat st;
	bool ro = false;
	int rc = -1;

	if (readonly && uid == 0)
		to_gid = 0;
	/* Read-only already (made so again): kept as it is when it is as it
	 * would be made, else its flag cleared while it changes hands. */
	if (readonly && fstat(fd, &st) == 0 && (err =
	    btrfs_util_get_subvolume_read_only_fd(fd, &ro)) == BTRFS_UTIL_OK &&
	    ro && st.st_uid == 0 && st.st_gid == to_gid && (uid == 0 ||
	    (st.st_mode & 07777) == 0750))
		rc = 0;
	else if (ro && (err = btrfs_util_set_subvolume_read_only_fd(fd,
	    false)) != BTRFS_UTIL_OK)
		bt_err(e, err, "clear the read-only flag of", path);
	else if (fchown(fd, to_uid, to_gid) == -1 || (readonly && uid != 0 &&
	    fchmod(fd, 0750) == -1))
		sys_err(e, "chown", path);
	else if (readonly && (err = btrfs_util_set_subvolume_read_only_fd(fd,
	    true)) != BTRFS_UTIL_OK)
		bt_err(e, err, "set the read-only flag of", path);
	else
		rc = 0;
	return rc;
}

static int
give(int pfd, const char *name, const char *path, unsigned uid, unsigned gid,
    int readonly, struct sp_err *e)
{
	int fd, rc;

	if ((fd = sp_noded_open_beneath(pfd, name, O_RDONLY | O_DIRECTORY)) ==
	    -1)
		return sys_err(e, "subvolume", path);
	rc = give_fd(fd, path, uid, gid, readonly, e);
	close(fd);
	return rc;
}

/*
 * path and each missing directory above it beneath the area, made root's
 * (0755, as the areas are: what a client may not change, and what the
 * directories above a stream's or a VM's files must be), one mkdirat at
 * a time in a directory opened beneath the root.
 */
static int
make_dirs(int root_fd, const char *path, struct sp_err *e)
{
	char part[SP_NODED_PATH_MAX + 1];
	const char *slash = strchr(path, '/'), *name;
	int fd, pfd;

	for (;;) {
		slash = slash != NULL ? strchr(slash + 1, '/') : NULL;
		snprintf(part, sizeof part, "%.*s", slash != NULL ?
		    (int)(slash - path) : (int)strlen(path), path);
		if ((fd = sp_noded_open_beneath(root_fd, part, O_PATH |
		    O_DIRECTORY)) == -1) {
			if (errno != ENOENT)
				return sys_err(e, "dir", part);
			if ((pfd = open_parent(root_fd, part, &name, e)) == -1)
				return -1;
			if (mkdirat(pfd, name, 0755) == -1 && errno != EEXIST) {
				close(pfd);
				return sys_err(e, "make", part);
			}
			close(pfd);
			if ((fd = sp_noded_open_beneath(root_fd, part, O_PATH |
			    O_DIRECTORY)) == -1)
				return sys_err(e, "dir", part);
		}
		close(fd);
		if (slash == NULL)
			return 0;
	}
}

/*
 * What the subvolume at path holds of its own, walked as root (a sandbox's
 * disk is its jail's alone), beneath the root: through the opened
 * directory's /proc link, which the trailing slash makes the walk follow,
 * and nothing below it followed (sp_subvol_exclusive_bytes).
 */
static int
usage(int root_fd, const char *path, json_t **value, struct sp_err *e)
{
	char self[64];
	uint64_t bytes;
	int fd, rc;

	if ((fd = open_subvol(root_fd, "path", path, e)) == -1)
		return -1;
	snprintf(self, sizeof self, "/proc/self/fd/%d/", fd);
	rc = sp_subvol_exclusive_bytes(self, &bytes, e);
	close(fd);
	if (rc == 0 && (*value = json_integer((json_int_t)bytes)) == NULL)
		rc = sp_err_set(e, SP_E_INTERNAL, 0, "out of memory");
	return rc;
}

int
sp_noded_do(int root_fd, const char *root, const struct sp_noded_req *r,
    json_t **value, struct sp_err *e)
{
	enum btrfs_util_error err = BTRFS_UTIL_OK;
	const char *name;
	struct stat st;
	int pfd = -1, fd = -1, rc = -1, direct;

	*value = NULL;
	if (r->op == SP_NODED_PING)
		return 0;
	if (r->op == SP_NODED_USAGE)
		return usage(root_fd, r->path, value, e);
	if (r->op == SP_NODED_USERNS_MAP)
		return sp_noded_userns_map(r, e);
	if (r->op == SP_NODED_SEND || r->op == SP_NODED_RECEIVE)
		return stream(root_fd, root, r, e);
	if (r->op == SP_NODED_DIR)
		return make_dirs(root_fd, r->path, e);
	if ((pfd = open_parent(root_fd, r->path, &name, e)) == -1)
		return -1;
	if (r->op == SP_NODED_RMDIR) {
		if ((rc = unlinkat(pfd, name, AT_REMOVEDIR)) == -1)
			sys_err(e, "remove", r->path);
		close(pfd);
		return rc;
	}
	switch (r->op) {
	case SP_NODED_CREATE:
		if ((err = btrfs_util_create_subvolume_fd(pfd, name, 0, NULL,
		    NULL)) == BTRFS_UTIL_OK && give(pfd, name, r->path,
		    r->peer_uid, r->peer_gid, 0, e) == -1)
			goto out;
		break;
	case SP_NODED_SNAPSHOT:
		/* A snapshot's top is its source's: read-only at once when
		 * that is root's, else given its owner first. */
		if ((fd = open_subvol(root_fd, "src", r->src, e)) == -1)
			goto out;
		if (fstat(fd, &st) == -1) {
			sys_err(e, "src", r->src);
			goto out;
		}
		direct = r->readonly && st.st_uid == 0 && st.st_gid == 0;
		if ((err = btrfs_util_create_snapshot_fd2(fd, pfd, name, direct ?
		    BTRFS_UTIL_CREATE_SNAPSHOT_READ_ONLY : 0, NULL, NULL)) ==
		    BTRFS_UTIL_OK && !direct && give(pfd, name, r->path,
		    r->peer_uid, r->peer_gid, r->readonly, e) == -1)
			goto out;
		break;
	case SP_NODED_DELETE:
		/* Only a subvolume goes, with those in it: not a directory
		 * that holds them. */
		if ((fd = open_subvol(root_fd, "path", r->path, e)) == -1 ||
		    delete_tree(fd, r->path, e) == -1)
			goto out;
		close(fd);
		fd = -1;
		err = btrfs_util_delete_subvolume_fd(pfd, name, 0);
		break;
	case SP_NODED_READONLY:
		if ((fd = open_subvol(root_fd, "path", r->path, e)) == -1)
			goto out;
		if (r->readonly) {
			rc = give_fd(fd, r->path, r->peer_uid, r->peer_gid, 1,
			    e);
			goto out;
		}
		err = btrfs_util_set_subvolume_read_only_fd(fd, false);
		break;
	default:
		sp_err_set(e, SP_E_INTERNAL, 0, "op %d", (int)r->op);
		goto out;
	}
	if (err != BTRFS_UTIL_OK) {
		bt_err(e, err, r->op == SP_NODED_CREATE ? "create" :
		    r->op == SP_NODED_SNAPSHOT ? "snapshot to" : r->op ==
		    SP_NODED_DELETE ? "delete" : "set the read-only flag of",
		    r->path);
		goto out;
	}
	rc = 0;
out:
	if (fd != -1)
		close(fd);
	close(pfd);
	return rc;
}
