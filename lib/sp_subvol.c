/*
 * sp_subvol: btrfs subvolumes through libbtrfsutil.  Templates, sandboxes,
 * pods and snapshots are all subvolumes (design.md): creating a sandbox is a
 * snapshot of its template, so no data is copied.  This file also measures
 * how much of a subvolume's data is its own (exclusive bytes), which is what
 * a clone really costs on disk, and bounds it: btrfs's simple quotas charge
 * each extent to the subvolume that wrote it, so a sandbox's qgroup limit
 * caps what its own writes take from the host, its template's shared
 * extents not counted.
 */
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <linux/btrfs.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/magic.h>

#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <pthread.h>
#include <search.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <btrfsutil.h>

#include "sp_vm.h"

/* Extents fetched per FIEMAP call; large files are walked in batches. */
#define FIEMAP_BATCH	256

/* Linux 6.7's simple quotas; older headers lack the name. */
#ifndef BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA
#define BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA 4
#endif

/*
 * libbtrfsutil leaves errno as the failing system call set it, so the message
 * carries both its own description and strerror.
 */
static int
bterr(struct sp_err *e, enum btrfs_util_error err, const char *what,
    const char *path)
{
	enum sp_code code = SP_E_BTRFS;

	if (errno == EEXIST)
		code = SP_E_EXISTS;
	return sp_err_sys(e, code, "%s '%s': %s", what, path,
	    btrfs_util_strerror(err));
}

/*
 * Where this process's subvolumes are made, snapshotted, flagged and
 * deleted: here, or by space-noded at sock when the process goes through
 * it (sp_noded_for), as one not run as root must (btrfs lets only root
 * delete a subvolume that holds files).  Set once, by the first
 * sp_subvol_route (a process has one config; the API server's threads
 * each open a context, and each waits here until it is set); root and its
 * real path name the paths it takes.
 */
static struct {
	pthread_mutex_t mu;
	int set;
	char sock[SP_PATH_MAX];
	char root[SP_PATH_MAX];
	char real[SP_PATH_MAX];
} via = { .mu = PTHREAD_MUTEX_INITIALIZER };

int
sp_subvol_route(const struct sp_conf *c, struct sp_err *e)
{
	char sock[SP_PATH_MAX], *real = NULL;
	int rc = 0;

	pthread_mutex_lock(&via.mu);
	if (via.set)
		goto out;
	if ((rc = sp_noded_for(c, sock, e)) == 1) {
		if ((real = realpath(c->root, NULL)) == NULL)
			rc = sp_err_sys(e, SP_E_NOT_INITIALIZED, "%s", c->root);
		else if (sp_path_fmt(via.real, sizeof via.real, e, "%s",
		    real) == -1 || sp_path_fmt(via.root, sizeof via.root, e,
		    "%s", c->root) == -1)
			rc = -1;
		else
			memcpy(via.sock, sock, sizeof sock);
	}
	via.set = rc != -1;
	rc = rc == -1 ? -1 : 0;
out:
	pthread_mutex_unlock(&via.mu);
	free(real);
	return rc;
}

const char *
sp_subvol_noded(void)
{
	const char *sock;

	pthread_mutex_lock(&via.mu);
	sock = via.sock[0] != '\0' ? via.sock : NULL;
	pthread_mutex_unlock(&via.mu);
	return sock;
}

/* path relative to SPACE_ROOT, as space-noded takes it. */
static int
rel(const char *path, char out[SP_PATH_MAX], struct sp_err *e)
{
	const char *r;

	if ((r = sp_path_beneath(via.root, path)) != NULL ||
	    (r = sp_path_beneath(via.real, path)) != NULL)
		return sp_path_fmt(out, SP_PATH_MAX, e, "%s", r);
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "subvolume '%s' is not beneath "
	    "%s", path, via.root);
}

/* op on path (and src) by space-noded; 0 when this process acts itself. */
static int
by_noded(const char *op, const char *path, const char *src, int readonly,
    struct sp_err *e)
{
	char p[SP_PATH_MAX], s[SP_PATH_MAX];
	json_t *req;

	if (via.sock[0] == '\0')
		return 0;
	if (rel(path, p, e) == -1 || (src != NULL && rel(src, s, e) == -1))
		return -1;
	req = json_pack("{s:s, s:s}", "op", op, "path", p);
	if (req != NULL && src != NULL)
		json_object_set_new(req, "src", json_string(s));
	if (req != NULL && readonly != -1)
		json_object_set_new(req, "readonly", json_boolean(readonly));
	return sp_virt_noded_call(via.sock, req, NULL, e) == -1 ? -1 : 1;
}

int
sp_subvol_mkdirs(const char *dir, mode_t mode, struct sp_err *e)
{
	struct stat st;
	int rc;

	/* There already (an area itself, say): nothing to ask. */
	if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	if ((rc = by_noded("dir-create", dir, NULL, -1, e)) != 0)
		return rc == 1 ? 0 : -1;
	return sp_path_mkdirs(dir, mode, e);
}

int
sp_subvol_rmdir(const char *dir, struct sp_err *e)
{
	int rc;

	if ((rc = by_noded("dir-remove", dir, NULL, -1, e)) != 0)
		return rc == 1 || e->code == SP_E_NOT_FOUND ? 0 : -1;
	if (rmdir(dir) == -1 && errno != ENOENT)
		return sp_err_sys(e, SP_E_IO, "rmdir %s", dir);
	return 0;
}

int
sp_subvol_is_btrfs(const char *path)
{
	struct statfs sfs;

	if (statfs(path, &sfs) == -1)
		return 0;
	return (uint32_t)sfs.f_type == BTRFS_SUPER_MAGIC;
}

int
sp_subvol_exists(const char *path)
{
	return btrfs_util_is_subvolume(path) == BTRFS_UTIL_OK;
}

int
sp_subvol_create(const char *path, struct sp_err *e)
{
	struct stat st;
	enum btrfs_util_error err;
	int rc;

	if (lstat(path, &st) == 0)
		return sp_err_set(e, SP_E_EXISTS, 0, "'%s' already exists", path);
	if ((rc = by_noded("subvol-create", path, NULL, -1, e)) != 0)
		return rc == 1 ? 0 : -1;
	err = btrfs_util_create_subvolume(path, 0, NULL, NULL);
	if (err != BTRFS_UTIL_OK)
		return bterr(e, err, "create subvolume", path);
	return 0;
}

int
sp_subvol_snapshot(const char *src, const char *dst, int readonly,
    struct sp_err *e)
{
	struct stat st;
	enum btrfs_util_error err;
	int flags = readonly ? BTRFS_UTIL_CREATE_SNAPSHOT_READ_ONLY : 0;
	int rc;

	if (lstat(src, &st) == -1) {
		if (errno == ENOENT)
			return sp_err_set(e, SP_E_NOT_FOUND, 0,
			    "snapshot source '%s' does not exist", src);
		return sp_err_sys(e, SP_E_BTRFS, "snapshot source '%s'", src);
	}
	if (lstat(dst, &st) == 0)
		return sp_err_set(e, SP_E_EXISTS, 0, "'%s' already exists", dst);
	if ((rc = by_noded("subvol-snapshot", dst, src, readonly != 0, e)) != 0)
		return rc == 1 ? 0 : -1;
	err = btrfs_util_create_snapshot(src, dst, flags, NULL, NULL);
	if (err != BTRFS_UTIL_OK)
		return bterr(e, err, "snapshot to", dst);
	return 0;
}

int
sp_subvol_set_readonly(const char *path, int readonly, struct sp_err *e)
{
	enum btrfs_util_error err;
	int rc;

	if ((rc = by_noded("subvol-readonly", path, NULL, readonly != 0, e)) != 0)
		return rc == 1 ? 0 : -1;
	err = btrfs_util_set_subvolume_read_only(path, readonly != 0);
	if (err != BTRFS_UTIL_OK) {
		if (errno == ENOENT)
			return sp_err_set(e, SP_E_NOT_FOUND, 0,
			    "subvolume '%s' does not exist", path);
		return bterr(e, err, "set read-only flag of", path);
	}
	return 0;
}

/* Clears the read-only flag of one subvolume when it is set. */
static int
make_writable(const char *path, struct sp_err *e)
{
	enum btrfs_util_error err;
	bool ro;

	err = btrfs_util_get_subvolume_read_only(path, &ro);
	if (err != BTRFS_UTIL_OK)
		return bterr(e, err, "read read-only flag of", path);
	if (ro)
		return sp_subvol_set_readonly(path, 0, e);
	return 0;
}

/*
 * Removing a subvolume removes its entry from the directory that holds it, so
 * that directory must be writable: a read-only subvolume nested in another
 * read-only one could not be removed.  Every subvolume of the tree is made
 * writable first; the whole tree goes away anyway.
 */
static int
make_tree_writable(const char *path, struct sp_err *e)
{
	struct btrfs_util_subvolume_iterator *it = NULL;
	enum btrfs_util_error err;
	char *rel = NULL, *full = NULL;
	int ret = -1;

	if (make_writable(path, e) == -1)
		goto out;
	err = btrfs_util_create_subvolume_iterator(path, 0, 0, &it);
	if (err != BTRFS_UTIL_OK) {
		bterr(e, err, "list subvolumes under", path);
		goto out;
	}
	for (;;) {
		err = btrfs_util_subvolume_iterator_next(it, &rel, NULL);
		if (err == BTRFS_UTIL_ERROR_STOP_ITERATION)
			break;
		if (err != BTRFS_UTIL_OK) {
			bterr(e, err, "list subvolumes under", path);
			goto out;
		}
		if (asprintf(&full, "%s/%s", path, rel) == -1) {
			full = NULL;
			sp_err_sys(e, SP_E_BTRFS, "list subvolumes under '%s'",
			    path);
			goto out;
		}
		if (make_writable(full, e) == -1)
			goto out;
		free(rel);
		free(full);
		rel = full = NULL;
	}
	ret = 0;
out:
	free(rel);
	free(full);
	if (it != NULL)
		btrfs_util_destroy_subvolume_iterator(it);
	return ret;
}

int
sp_subvol_delete(const char *path, struct sp_err *e)
{
	struct stat st;
	enum btrfs_util_error err;
	int rc;

	if (lstat(path, &st) == -1) {
		if (errno == ENOENT)
			return 0;
		return sp_err_sys(e, SP_E_BTRFS, "delete subvolume '%s'", path);
	}
	err = btrfs_util_is_subvolume(path);
	if (err == BTRFS_UTIL_ERROR_NOT_SUBVOLUME ||
	    err == BTRFS_UTIL_ERROR_NOT_BTRFS)
		return sp_err_set(e, SP_E_BTRFS, 0,
		    "delete subvolume '%s': not a btrfs subvolume", path);
	if (err != BTRFS_UTIL_OK)
		return bterr(e, err, "delete subvolume", path);
	if ((rc = by_noded("subvol-delete", path, NULL, -1, e)) != 0) {
		/* Someone else deleting it at the same time is fine. */
		if (rc == -1 && e->code == SP_E_NOT_FOUND && lstat(path, &st) == -1)
			return 0;
		return rc == 1 ? 0 : -1;
	}
	if (make_tree_writable(path, e) == -1)
		return -1;
	err = btrfs_util_delete_subvolume(path,
	    BTRFS_UTIL_DELETE_SUBVOLUME_RECURSIVE);
	if (err != BTRFS_UTIL_OK) {
		/* Someone else deleting it at the same time is fine. */
		if (errno == ENOENT && lstat(path, &st) == -1)
			return 0;
		return bterr(e, err, "delete subvolume", path);
	}
	return 0;
}

/* Inodes with several names, so that each is counted once. */
struct seen {
	dev_t dev;
	ino_t ino;
};

static int
seen_cmp(const void *a, const void *b)
{
	const struct seen *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return 0;
}

/* Returns 1 when the inode was met before, 0 the first time, -1 on ENOMEM. */
static int
seen_add(void **tree, const struct stat *st)
{
	struct seen *s, **found;

	if ((s = malloc(sizeof *s)) == NULL)
		return -1;
	s->dev = st->st_dev;
	s->ino = st->st_ino;
	if ((found = tsearch(s, tree, seen_cmp)) == NULL) {
		free(s);
		return -1;
	}
	if (*found != s) {
		free(s);
		return 1;
	}
	return 0;
}

/*
 * Sums the unshared extents of one file.  FIEMAP_FLAG_SYNC writes dirty
 * pages back first, so that data just written has real extents instead of
 * delayed allocations; should any remain delayed they are new data, which
 * nothing shares yet, and they count.  Inline extents live in metadata, take
 * no data space and are never reported shared, so like `btrfs filesystem du`
 * they are left out: otherwise a fresh snapshot of many small files would
 * look like it owned them.
 */
static int
file_exclusive(int fd, struct fiemap *fm, const char *path, uint64_t *sum,
    struct sp_err *e)
{
	struct fiemap_extent *x;
	uint64_t start = 0;
	uint32_t i;
	int flags = FIEMAP_FLAG_SYNC;

	for (;;) {
		memset(fm, 0, sizeof *fm +
		    FIEMAP_BATCH * sizeof(struct fiemap_extent));
		fm->fm_start = start;
		fm->fm_length = FIEMAP_MAX_OFFSET - start;
		fm->fm_flags = flags;
		fm->fm_extent_count = FIEMAP_BATCH;
		if (ioctl(fd, FS_IOC_FIEMAP, fm) == -1)
			return sp_err_sys(e, SP_E_BTRFS, "fiemap '%s'", path);
		flags = 0;
		if (fm->fm_mapped_extents == 0)
			return 0;
		for (i = 0; i < fm->fm_mapped_extents; i++) {
			x = &fm->fm_extents[i];
			if (!(x->fe_flags & (FIEMAP_EXTENT_SHARED |
			    FIEMAP_EXTENT_DATA_INLINE)))
				*sum += x->fe_length;
			if (x->fe_flags & FIEMAP_EXTENT_LAST)
				return 0;
		}
		x = &fm->fm_extents[fm->fm_mapped_extents - 1];
		if (x->fe_logical + x->fe_length <= start)
			return 0;
		start = x->fe_logical + x->fe_length;
	}
}

/*
 * Another mount below path (a different filesystem, or a bind mount) is not
 * part of it; nested subvolumes of the same filesystem are, although their
 * st_dev differs, which is why fts' FTS_XDEV is not used.
 */
static int
is_mount_root(const char *path)
{
	struct statx stx;

	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS,
	    &stx) == -1)
		return 0;
	return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	    (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

int
sp_subvol_exclusive_bytes(const char *path, uint64_t *out, struct sp_err *e)
{
	char *argv[2] = { (char *)path, NULL }, p[SP_PATH_MAX];
	struct fiemap *fm = NULL;
	FTS *fts = NULL;
	FTSENT *f;
	void *seen = NULL;
	uint64_t sum = 0;
	json_t *value = NULL;
	int fd, r, ret = -1;

	/* Its files are the VMs' alone: walked by space-noded. */
	if (via.sock[0] != '\0') {
		if (rel(path, p, e) == -1 || sp_virt_noded_call(via.sock,
		    json_pack("{s:s, s:s}", "op", "subvol-usage", "path", p),
		    &value, e) == -1)
			return -1;
		ret = json_is_integer(value) && json_integer_value(value) >= 0 ?
		    0 : sp_err_set(e, SP_E_INTERNAL, 0, "subvol-usage: no "
		    "count");
		if (ret == 0)
			*out = (uint64_t)json_integer_value(value);
		json_decref(value);
		return ret;
	}

	fm = malloc(sizeof *fm + FIEMAP_BATCH * sizeof(struct fiemap_extent));
	if (fm == NULL) {
		sp_err_sys(e, SP_E_BTRFS, "exclusive bytes of '%s'", path);
		goto out;
	}
	fts = fts_open(argv, FTS_PHYSICAL | FTS_NOCHDIR, NULL);
	if (fts == NULL) {
		sp_err_sys(e, SP_E_BTRFS, "walk '%s'", path);
		goto out;
	}
	errno = 0;
	while ((f = fts_read(fts)) != NULL) {
		switch (f->fts_info) {
		case FTS_D:
			if (f->fts_level > 0 && is_mount_root(f->fts_accpath))
				fts_set(fts, f, FTS_SKIP);
			break;
		case FTS_F:
			if (f->fts_statp->st_nlink > 1) {
				r = seen_add(&seen, f->fts_statp);
				if (r == -1) {
					sp_err_sys(e, SP_E_BTRFS, "walk '%s'",
					    path);
					goto out;
				}
				if (r == 1)
					break;
			}
			fd = open(f->fts_accpath,
			    O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK |
			    O_CLOEXEC);
			if (fd == -1) {
				/* A file removed meanwhile holds no data. */
				if (errno == ENOENT)
					break;
				sp_err_sys(e, SP_E_BTRFS, "open '%s'",
				    f->fts_path);
				goto out;
			}
			r = file_exclusive(fd, fm, f->fts_path, &sum, e);
			close(fd);
			if (r == -1)
				goto out;
			break;
		case FTS_DNR:
		case FTS_ERR:
		case FTS_NS:
			if (f->fts_errno == ENOENT && f->fts_level > 0)
				break;
			errno = f->fts_errno;
			sp_err_sys(e, f->fts_level == 0 && errno == ENOENT ?
			    SP_E_NOT_FOUND : SP_E_BTRFS, "walk '%s'", f->fts_path);
			goto out;
		default:
			break;
		}
		errno = 0;
	}
	if (errno != 0) {
		sp_err_sys(e, SP_E_BTRFS, "walk '%s'", path);
		goto out;
	}
	*out = sum;
	ret = 0;
out:
	if (fts != NULL)
		fts_close(fts);
	tdestroy(seen, free);
	free(fm);
	return ret;
}

/* A UUID's 16 bytes as text. */
static void
uuid_text(const uint8_t *u, char out[37])
{
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
	    "%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3], u[4], u[5],
	    u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

/* A subvolume's lineage: the UUID of the subvolume it was received from
 * (btrfs receive sets received_uuid), else its own.  A send stream made
 * against a parent names the parent's lineage; receive finds it by that. */
int
sp_subvol_lineage(const char *path, char out[37], int *received,
    struct sp_err *e)
{
	struct btrfs_util_subvolume_info info;
	enum btrfs_util_error err;
	static const uint8_t zero[16];

	err = btrfs_util_subvolume_info(path, 0, &info);
	if (err != BTRFS_UTIL_OK)
		return bterr(e, err, "subvolume info", path);
	*received = memcmp(info.received_uuid, zero, 16) != 0;
	uuid_text(*received ? info.received_uuid : info.uuid, out);
	return 0;
}

int
sp_subvol_readonly(const char *path)
{
	bool ro = false;

	return btrfs_util_get_subvolume_read_only(path, &ro) == BTRFS_UTIL_OK &&
	    ro;
}

/* The quota mode of the btrfs at path, as its sysfs says: "simple", "full"
 * (also a kernel before 6.7, which has a qgroups directory but no mode) or
 * "" for none. */
static void
quota_mode(const char *path, char mode[8])
{
	struct btrfs_ioctl_fs_info_args fi = { 0 };
	char p[128], uuid[37], text[16] = "";
	FILE *f;
	int fd;

	mode[0] = '\0';
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return;
	if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi) == -1) {
		close(fd);
		return;
	}
	close(fd);
	uuid_text(fi.fsid, uuid);
	snprintf(p, sizeof p, "/sys/fs/btrfs/%s/qgroups", uuid);
	if (access(p, F_OK) == -1)
		return;		/* no qgroups directory: quotas are off */
	snprintf(mode, 8, "full");
	snprintf(p, sizeof p, "/sys/fs/btrfs/%s/qgroups/mode", uuid);
	if ((f = fopen(p, "re")) == NULL)
		return;
	if (fgets(text, sizeof text, f) != NULL &&
	    strncmp(text, "squota", 6) == 0)
		snprintf(mode, 8, "simple");
	fclose(f);
}

int
sp_subvol_quota_enable(const char *path, char mode[8], struct sp_err *e)
{
	struct btrfs_ioctl_quota_ctl_args a = {
		.cmd = BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA,
	};
	int fd, rc = 0;

	quota_mode(path, mode);
	if (mode[0] != '\0')
		return 0;
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_BTRFS, "%s", path);
	/* A kernel before 6.7 does not know the command: no backstop there
	 * (full qgroups would cost every snapshot and delete a walk of
	 * shared extents). */
	if (ioctl(fd, BTRFS_IOC_QUOTA_CTL, &a) == -1 && errno != EINVAL)
		rc = sp_err_sys(e, SP_E_BTRFS, "enable simple quotas on %s", path);
	close(fd);
	if (rc == 0)
		quota_mode(path, mode);
	return rc;
}

int
sp_subvol_limit(const char *path, uint64_t bytes, struct sp_err *e)
{
	struct btrfs_ioctl_qgroup_limit_args a = { 0 };
	int fd, rc = 0;

	/* qgroupid 0: the subvolume the file descriptor is in.  Under
	 * simple quotas exclusive and referenced are the same: what it
	 * wrote. */
	a.lim.flags = BTRFS_QGROUP_LIMIT_MAX_EXCL;
	a.lim.max_excl = bytes;
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_BTRFS, "%s", path);
	if (ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &a) == -1 && errno != ENOTCONN)
		rc = sp_err_sys(e, SP_E_BTRFS, "qgroup limit of %s", path);
	close(fd);
	return rc;
}
