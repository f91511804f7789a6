/*
 * sp_node: prepares this node: a btrfs filesystem at SPACE_ROOT (a loop-backed
 * image when the directory is on something else), the layout in design.md,
 * the DB, and a libvirt that answers.  Every step is idempotent.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sp_sandbox.h"

static const char *const layout[] = {
	"templates", "sandboxes", "snapshots", "pool", "objects", "tmp", "locks",
};

/* Makes <root>.img a btrfs image of the given size and mounts it on root. */
static int
loop_btrfs(const char *root, uint64_t bytes, struct sp_err *e)
{
	char img[SP_PATH_MAX];
	char *mkfs[] = { "mkfs.btrfs", "-q", img, NULL };
	char *mnt[] = { "mount", "-o", "loop", img, (char *)root, NULL };
	struct stat st;
	int fd;

	if (sp_path_fmt(img, sizeof img, e, "%s.img", root) == -1)
		return -1;
	if (stat(img, &st) == -1) {
		if (errno != ENOENT)
			return sp_err_sys(e, SP_E_IO, "%s", img);
		if ((fd = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) == -1)
			return sp_err_sys(e, SP_E_IO, "create %s", img);
		if (ftruncate(fd, (off_t)bytes) == -1) {
			sp_err_sys(e, SP_E_IO, "size %s", img);
			close(fd);
			unlink(img);
			return -1;
		}
		close(fd);
		if (sp_proc_run(mkfs, e) == -1) {
			unlink(img);
			return -1;
		}
	}
	if (sp_proc_run(mnt, e) == -1)
		return -1;
	if (!sp_subvol_is_btrfs(root))
		return sp_err_set(e, SP_E_IO, 0, "%s: mounted %s but it is not btrfs",
		    root, img);
	return 0;
}

int
sp_node_init(const struct sp_conf *c, uint64_t loop_bytes,
    struct sp_node_info *info, struct sp_err *e)
{
	char p[SP_PATH_MAX];
	struct sp_virt *v = NULL;
	struct sp_db *db = NULL;
	size_t i;
	int rc = -1;

	memset(info, 0, sizeof *info);
	if (sp_path_mkdirs(c->root, 0755, e) == -1)
		goto out;
	if (!sp_subvol_is_btrfs(c->root)) {
		if (loop_bytes == 0) {
			sp_err_set(e, SP_E_NOT_BTRFS, 0, "%s is not on btrfs (use "
			    "--loop-size to make a loop-backed one)", c->root);
			goto out;
		}
		if (loop_btrfs(c->root, loop_bytes, e) == -1)
			goto out;
		info->loop = 1;
	}
	strcpy(info->fs, "btrfs");
	/* QEMU runs as an unprivileged user and must reach the sandbox disks. */
	if (chmod(c->root, 0755) == -1) {
		sp_err_sys(e, SP_E_IO, "chmod %s", c->root);
		goto out;
	}
	for (i = 0; i < sizeof layout / sizeof layout[0]; i++) {
		if (sp_path_fmt(p, sizeof p, e, "%s/%s", c->root, layout[i]) == -1 ||
		    sp_path_mkdirs(p, 0755, e) == -1)
			goto out;
	}
	if (sp_path_mkdirs(c->run, 0755, e) == -1)
		goto out;
	if (sp_db_open(&db, c, e) == -1 ||
	    sp_db_node_upsert(db, c->node, c->root, e) == -1)
		goto out;
	if (sp_virt_open(&v, c->libvirt_uri, e) == -1 ||
	    sp_virt_pick_type(v, c->virt_type, info->virt_type, e) == -1 ||
	    sp_virt_version(v, info->libvirt, sizeof info->libvirt, e) == -1)
		goto out;
	info->kvm = strcmp(info->virt_type, "kvm") == 0;
	rc = 0;
out:
	sp_virt_close(v);
	sp_db_close(db);
	return rc;
}
