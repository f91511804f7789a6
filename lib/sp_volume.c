/*
 * sp_volume: volumes (space-volume; design.md, "Volumes").  A volume is a
 * disk that outlives sandboxes: the btrfs subvolume volumes/ID holding a
 * raw ext4 image (disk.raw), its snapshots volumes/ID@SNAP (read-only
 * subvolumes), and a row (sp_db_volume.c).  A running sandbox of the
 * volume's node and tenant mounts it: the image is plugged into the VM as
 * one more virtio-blk disk whose serial is the volume's id, and the guest's
 * daemon mounts it at a path.  Read-write to one sandbox, or read-only to
 * many: the row's mounts say who has it, and every change of them is one
 * compare-and-set on the row's generation, written before the disk is
 * plugged (a reservation) and taken back when the plug fails.
 *
 * The jail: each VM's QEMU runs as its own uid and may open only its own
 * files.  A volume's image stays root's (0600) and its ACL names the uid of
 * each VM that mounts it, read or read-write; its directory lets those
 * uids through (search only).  libvirt is told not to chown it.
 */
#include <linux/posix_acl.h>
#include <linux/posix_acl_xattr.h>

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "sp_sandbox.h"

#define MiB			(1024LL * 1024)
#define VOLUME_MIN		(16 * MiB)	/* mkfs.ext4 journals from here */
#define VOLUME_MAX		(4096LL * 1024 * MiB)
#define MOUNTS_MAX		256
#define SNAPS_MAX		1000
#define MOUNT_TIMEOUT_MS	20000	/* the guest probes the disk, mounts */
#define FREEZE_MS		10000
#define CAS_TRIES		8

/* ---- where a volume lives ---- */

static int
volume_dir(const struct sp_ctx *x, const char *id, char *out, size_t n,
    struct sp_err *e)
{
	return sp_path_fmt(out, n, e, "%s/volumes/%s", x->conf.root, id);
}

static int
volume_disk(const struct sp_ctx *x, const char *id, char *out, size_t n,
    struct sp_err *e)
{
	return sp_path_fmt(out, n, e, "%s/volumes/%s/disk.raw", x->conf.root,
	    id);
}

static int
snap_dir(const struct sp_ctx *x, const char *id, const char *snap, char *out,
    size_t n, struct sp_err *e)
{
	return sp_path_fmt(out, n, e, "%s/volumes/%s@%s", x->conf.root, id,
	    snap);
}

/* volumes/ itself: root's, search only for the VMs' uids; listed by the
 * group space too, the manager's, when there is one (as root makes it:
 * here, or space-init for one made before). */
int
sp_volume_area(const char *root, struct sp_err *e)
{
	char p[SP_PATH_MAX];
	gid_t gid;

	if (sp_path_fmt(p, sizeof p, e, "%s/volumes", root) == -1)
		return -1;
	if (mkdir(p, 0711) == -1 && errno != EEXIST)
		return sp_err_sys(e, SP_E_IO, "mkdir %s", p);
	if (geteuid() == 0 && sp_space_ids(NULL, &gid) && (chown(p, 0,
	    gid) == -1 || chmod(p, 0751) == -1))
		return sp_err_sys(e, SP_E_IO, "give %s to the group %s", p,
		    SP_USER);
	return 0;
}

/* ---- the ACL: who of the VMs may open the image ---- */

void
sp_acl_entry(struct posix_acl_xattr_entry *a, int tag, int perm, unsigned id)
{
	a->e_tag = htole16(tag);
	a->e_perm = htole16(perm);
	a->e_id = htole32(id);
}

/*
 * path's access ACL: its owner (root) own, and each of uids[0..n) perms[i];
 * nobody else.  Written in the kernel's format (as sp_jail.c does), the
 * users in ascending order as the kernel wants them.
 */
static int
set_acl(const char *path, int owner, const unsigned *uids, const int *perms,
    size_t n, struct sp_err *e)
{
	struct {
		struct posix_acl_xattr_header h;
		struct posix_acl_xattr_entry a[MOUNTS_MAX + 4];
	} acl;
	size_t i, k = 0;
	int mask = 0;

	if (n == 0) {
		if (removexattr(path, "system.posix_acl_access") == -1 &&
		    errno != ENODATA && errno != EOPNOTSUPP)
			return sp_err_sys(e, SP_E_IO, "the ACL of %s", path);
		if (chmod(path, (mode_t)(owner << 6)) == -1)
			return sp_err_sys(e, SP_E_IO, "chmod %s", path);
		return 0;
	}
	acl.h.a_version = htole32(POSIX_ACL_XATTR_VERSION);
	sp_acl_entry(&acl.a[k++], ACL_USER_OBJ, owner, ACL_UNDEFINED_ID);
	for (i = 0; i < n; i++) {
		sp_acl_entry(&acl.a[k++], ACL_USER, perms[i], uids[i]);
		mask |= perms[i];
	}
	sp_acl_entry(&acl.a[k++], ACL_GROUP_OBJ, 0, ACL_UNDEFINED_ID);
	sp_acl_entry(&acl.a[k++], ACL_MASK, mask, ACL_UNDEFINED_ID);
	sp_acl_entry(&acl.a[k++], ACL_OTHER, 0, ACL_UNDEFINED_ID);
	if (setxattr(path, "system.posix_acl_access", &acl, sizeof acl.h +
	    k * sizeof acl.a[0], 0) == -1)
		return sp_err_sys(e, SP_E_IO, "the ACL of %s", path);
	return 0;
}

/* The ACLs of volume id for the mounts of this node: each mount's uid (0,
 * a VM without a jail: libvirt's user, which libvirt labels itself). */
static int
apply_acl(struct sp_ctx *x, const char *id, json_t *mounts, struct sp_err *e)
{
	unsigned uids[MOUNTS_MAX];
	int disk_perms[MOUNTS_MAX], dir_perms[MOUNTS_MAX];
	char dir[SP_PATH_MAX], disk[SP_PATH_MAX];
	size_t i, j, n = 0;
	json_t *m;

	json_array_foreach(mounts, i, m) {
		unsigned uid = (unsigned)json_integer_value(json_object_get(m,
		    "uid"));
		int perm = json_is_true(json_object_get(m, "ro")) ? ACL_READ :
		    ACL_READ | ACL_WRITE;

		if (uid == 0 || n == MOUNTS_MAX)
			continue;
		/* In order, one entry a uid (its widest). */
		for (j = n; j > 0 && uids[j - 1] > uid; j--)
			;
		if (j > 0 && uids[j - 1] == uid) {
			disk_perms[j - 1] |= perm;
			continue;
		}
		memmove(uids + j + 1, uids + j, (n - j) * sizeof uids[0]);
		memmove(disk_perms + j + 1, disk_perms + j,
		    (n - j) * sizeof disk_perms[0]);
		uids[j] = uid;
		disk_perms[j] = perm;
		n++;
	}
	for (i = 0; i < n; i++)
		dir_perms[i] = ACL_EXECUTE;
	if (volume_dir(x, id, dir, sizeof dir, e) == -1 ||
	    volume_disk(x, id, disk, sizeof disk, e) == -1 ||
	    set_acl(dir, 07, uids, dir_perms, n, e) == -1 ||
	    set_acl(disk, 06, uids, disk_perms, n, e) == -1)
		return -1;
	return 0;
}

/* The uid dom's QEMU runs as (0: libvirt's user, no jail), from its XML. */
static int
vm_uid(struct sp_ctx *x, const char *dom, unsigned *uid, struct sp_err *e)
{
	char *xml = NULL;
	int rc;

	if (sp_ctx_virt(x, e) == -1 || sp_virt_xml(x->virt, dom, &xml, e) == -1)
		return -1;
	rc = sp_vm_xml_jail(xml, dom, uid, e);
	free(xml);
	return rc;
}

/* dst (new, 0600) sharing src's blocks: btrfs clones the extents, no data
 * is copied. */
static int
reflink_copy(const char *src, const char *dst, struct sp_err *e)
{
	int in, out, rc = 0;

	if ((in = open(src, O_RDONLY | O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_IO, "open %s", src);
	if ((out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600)) == -1) {
		close(in);
		return sp_err_sys(e, SP_E_IO, "create %s", dst);
	}
	if (ioctl(out, FICLONE, in) == -1)
		rc = sp_err_sys(e, errno == ENOSPC ? SP_E_NO_SPACE : SP_E_IO,
		    "clone %s to %s", src, dst);
	if (close(out) == -1 && rc == 0)
		rc = sp_err_sys(e, SP_E_IO, "close %s", dst);
	close(in);
	if (rc == -1)
		unlink(dst);
	return rc;
}

/* ---- checks ---- */

static int
bytes_check(int64_t bytes, struct sp_err *e)
{
	if (bytes < VOLUME_MIN || bytes > VOLUME_MAX || bytes % MiB != 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a volume's size is whole "
		    "MiB from %lld MiB to %lld GiB", VOLUME_MIN / MiB,
		    VOLUME_MAX / 1024 / MiB);
	return 0;
}

int
sp_volume_path_check(const char *path, struct sp_err *e)
{
	const char *c;
	size_t len;

	if (path[0] != '/' || path[1] == '\0' || strlen(path) > 255)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a volume's mount path is "
		    "absolute, not /, at most 255 bytes");
	for (c = path + 1; *c != '\0'; c += len + (c[len] == '/')) {
		len = strcspn(c, "/");
		if (len == 0 || (len == 1 && c[0] == '.') ||
		    (len == 2 && c[0] == '.' && c[1] == '.'))
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "mount path '%.64s'"
			    ": no empty, . or .. parts", path);
	}
	for (c = path; *c != '\0'; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "mount path has "
			    "a control character");
	return 0;
}

/* The volume of ref in tenant, on this node. */
static int
local_volume(struct sp_ctx *x, const char *tenant, const char *ref,
    struct sp_volume_row *v, struct sp_err *e)
{
	if (!sp_handle_valid(ref) && !sp_id_valid(ref))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "'%.64s' is neither a "
		    "volume's id nor a name (1 to %d of a-z, 0-9 and '-')", ref,
		    SP_HANDLE_MAX);
	if (sp_db_volume_get(x->db, tenant, ref, v, e) == -1)
		return -1;
	if (strcmp(v->node, x->conf.node) != 0) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "volume %s is on node %s",
		    v->name, v->node);
		sp_db_volume_release(v);
		return -1;
	}
	return 0;
}

static json_t *
parse_array(const char *text)
{
	json_t *a = json_loads(text, 0, NULL);

	if (!json_is_array(a)) {
		json_decref(a);
		a = json_array();
	}
	return a;
}

/* Writes mounts and snaps (stolen) of v if v is unchanged. */
static int
write_row(struct sp_ctx *x, const struct sp_volume_row *v, json_t *mounts,
    json_t *snaps, struct sp_err *e)
{
	char *m = json_dumps(mounts, JSON_COMPACT),
	    *s = json_dumps(snaps, JSON_COMPACT);
	int rc;

	rc = m == NULL || s == NULL ? sp_err_sys(e, SP_E_NOMEM, "volume row") :
	    sp_db_volume_set(x->db, v, m, s, v->node, e);
	free(m);
	free(s);
	json_decref(mounts);
	json_decref(snaps);
	return rc;
}

json_t *
sp_volume_json(const struct sp_volume_row *v)
{
	json_t *mounts = parse_array(v->mounts), *m, *o;
	size_t i;

	json_array_foreach(mounts, i, m)
		json_object_del(m, "uid");
	o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:o, s:o}", "volume", v->name,
	    "id", v->id, "node", v->node, "bytes", (json_int_t)v->bytes,
	    "created", (json_int_t)v->created, "mounts", mounts, "snaps",
	    parse_array(v->snaps));
	json_object_set_new(o, "tenant", v->tenant[0] != '\0' ?
	    json_string(v->tenant) : json_null());
	if (v->origin[0] != '\0')
		json_object_set_new(o, "origin", json_string(v->origin));
	return o;
}

/* ---- create, remove, snapshot ---- */

static int
make_image(const char *disk, int64_t bytes, struct sp_err *e)
{
	char sz[32];
	char *argv[] = {
		"mkfs.ext4", "-q", "-F", "-t", "ext4", "-b", "4096", "-m", "0",
		"-L", "space-volume",
		/* Inode tables zeroed now, not by the guest's ext4lazyinit
		 * after every mount (sp_template.c does the same). */
		"-E", "root_owner=0:0,lazy_itable_init=0,lazy_journal_init=1,"
		"nodiscard", (char *)disk, sz, NULL,
	};
	int fd;

	if ((fd = open(disk, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0600)) == -1)
		return sp_err_sys(e, SP_E_IO, "create %s", disk);
	if (ftruncate(fd, bytes) == -1) {
		sp_err_sys(e, errno == EFBIG || errno == ENOSPC ? SP_E_NO_SPACE :
		    SP_E_IO, "size %s", disk);
		close(fd);
		return -1;
	}
	close(fd);
	snprintf(sz, sizeof sz, "%lldk", (long long)(bytes / 1024));
	return sp_proc_run(argv, e);
}

/* The snapshot of snaps named name, or NULL; *at its index. */
static json_t *
snap_at(json_t *snaps, const char *name, size_t *at)
{
	json_t *s;
	size_t i;

	json_array_foreach(snaps, i, s)
		if (json_is_string(json_object_get(s, "snap")) &&
		    strcmp(json_string_value(json_object_get(s, "snap")),
		    name) == 0) {
			*at = i;
			return s;
		}
	return NULL;
}

static json_t *
snap_find(json_t *snaps, const char *name)
{
	size_t at;

	return snap_at(snaps, name, &at);
}

int
sp_volume_create(struct sp_ctx *x, const char *name, const char *tenant,
    int64_t bytes, const char *from, json_t **out, struct sp_err *e)
{
	struct sp_volume_row v, src;
	char dir[SP_PATH_MAX], disk[SP_PATH_MAX], sdir[SP_PATH_MAX];
	char vol[SP_HANDLE_MAX + 1];
	const char *at;
	struct sp_err ignored;
	json_t *snaps;
	int rc;

	*out = NULL;
	memset(&v, 0, sizeof v);
	if (sp_handle_check(name, e) == -1 ||
	    (*tenant != '\0' && sp_name_check("tenant", tenant, e) == -1))
		return -1;
	if (from != NULL) {
		/* VOLUME@SNAP: a writable copy of a snapshot, of its size. */
		if ((at = strchr(from, '@')) == NULL ||
		    (size_t)(at - from) > SP_HANDLE_MAX)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "--from wants "
			    "VOLUME@SNAP");
		snprintf(vol, sizeof vol, "%.*s", (int)(at - from), from);
		if (sp_name_check("snapshot", at + 1, e) == -1 ||
		    local_volume(x, tenant, vol, &src, e) == -1)
			return -1;
		snaps = parse_array(src.snaps);
		rc = snap_find(snaps, at + 1) != NULL ? 0 :
		    sp_err_set(e, SP_E_NOT_FOUND, 0, "volume %s has no snapshot "
		    "%s", src.name, at + 1);
		json_decref(snaps);
		bytes = src.bytes;
		if (rc == 0)
			rc = snap_dir(x, src.id, at + 1, sdir, sizeof sdir, e);
		sp_db_volume_release(&src);
		if (rc == -1)
			return -1;
		snprintf(v.origin, sizeof v.origin, "%s", from);
	} else if (bytes_check(bytes, e) == -1)
		return -1;
	if (sp_id_new(v.id, e) == -1 || sp_volume_area(x->conf.root, e) == -1 ||
	    volume_dir(x, v.id, dir, sizeof dir, e) == -1 ||
	    volume_disk(x, v.id, disk, sizeof disk, e) == -1)
		return -1;
	if ((from != NULL ? sp_subvol_snapshot(sdir, dir, 0, e) :
	    sp_subvol_create(dir, e)) == -1)
		return -1;
	if ((from == NULL && make_image(disk, bytes, e) == -1) ||
	    chmod(dir, 0700) == -1 || chmod(disk, 0600) == -1) {
		if (e->code == SP_E_NONE)
			sp_err_sys(e, SP_E_IO, "chmod %s", dir);
		sp_subvol_delete(dir, &ignored);
		return -1;
	}
	snprintf(v.name, sizeof v.name, "%s", name);
	snprintf(v.tenant, sizeof v.tenant, "%s", tenant);
	snprintf(v.node, sizeof v.node, "%s", x->conf.node);
	v.bytes = bytes;
	v.created = (int64_t)time(NULL);
	v.mounts = "[]";
	v.snaps = "[]";
	if (sp_db_volume_insert(x->db, &v, e) == -1) {
		sp_subvol_delete(dir, &ignored);
		return -1;
	}
	*out = sp_volume_json(&v);
	return 0;
}

/* Mounted somewhere: in-use, saying where. */
static int
mounted_check(const struct sp_volume_row *v, json_t *mounts, struct sp_err *e)
{
	json_t *m = json_array_get(mounts, 0);

	if (m == NULL)
		return 0;
	return sp_err_set(e, SP_E_IN_USE, 0, "volume %s is mounted in %s at "
	    "%s%s", v->name, json_string_value(json_object_get(m, "sandbox")),
	    json_string_value(json_object_get(m, "path")),
	    json_array_size(mounts) > 1 ? " (and more)" : "");
}

int
sp_volume_rm(struct sp_ctx *x, const char *tenant, const char *ref,
    struct sp_err *e)
{
	struct sp_volume_row v;
	char dir[SP_PATH_MAX], vol[SP_HANDLE_MAX + 1];
	const char *at = strchr(ref, '@');
	json_t *mounts, *snaps, *s;
	size_t i;
	int rc;

	snprintf(vol, sizeof vol, "%.*s", at != NULL ? (int)(at - ref) :
	    (int)strlen(ref), ref);
	if (at != NULL && sp_name_check("snapshot", at + 1, e) == -1)
		return -1;
	if (local_volume(x, tenant, vol, &v, e) == -1)
		return -1;
	mounts = parse_array(v.mounts);
	snaps = parse_array(v.snaps);
	if (at != NULL) {
		/* VOLUME@SNAP: that snapshot alone. */
		if (snap_at(snaps, at + 1, &i) == NULL) {
			rc = sp_err_set(e, SP_E_NOT_FOUND, 0, "volume %s has no "
			    "snapshot %s", v.name, at + 1);
			json_decref(mounts);
			json_decref(snaps);
		} else {
			json_array_remove(snaps, i);
			rc = write_row(x, &v, mounts, snaps, e);
			if (rc == 0 && snap_dir(x, v.id, at + 1, dir, sizeof dir,
			    e) == 0 && sp_subvol_exists(dir))
				rc = sp_subvol_delete(dir, e);
		}
		sp_db_volume_release(&v);
		return rc;
	}
	if ((rc = mounted_check(&v, mounts, e)) == 0 &&
	    (rc = sp_db_volume_delete(x->db, &v, e)) == 0) {
		/* The row is gone first: what is left on disk is nobody's,
		 * and the next removal of it (sp_volume_gc) finishes. */
		json_array_foreach(snaps, i, s)
			if (rc == 0 && snap_dir(x, v.id, json_string_value(
			    json_object_get(s, "snap")), dir, sizeof dir, e) == 0 &&
			    sp_subvol_exists(dir))
				rc = sp_subvol_delete(dir, e);
		if (rc == 0 && volume_dir(x, v.id, dir, sizeof dir, e) == 0 &&
		    sp_subvol_exists(dir))
			rc = sp_subvol_delete(dir, e);
	}
	json_decref(mounts);
	json_decref(snaps);
	sp_db_volume_release(&v);
	return rc;
}

/* The channel to the running sandbox id (NULL and 0 when it is not
 * running: nothing in a guest to ask). */
static int
guest_of(struct sp_ctx *x, const char *id, struct sp_chan **c,
    struct sp_err *e)
{
	struct sp_sandbox_row r;
	int running;

	*c = NULL;
	if (sp_db_sandbox_get(x->db, id, &r, e) == -1)
		return e->code == SP_E_NOT_FOUND ? 0 : -1;
	running = r.state == SP_ST_RUNNING;
	sp_db_row_release(&r);
	if (!running)
		return 0;
	return sp_chan_open_running(x, id, c, 5000, e);
}

int
sp_volume_snap(struct sp_ctx *x, const char *tenant, const char *ref,
    const char *snap, json_t **out, struct sp_err *e)
{
	struct sp_volume_row v;
	struct sp_chan *c = NULL;
	char src[SP_PATH_MAX], dst[SP_PATH_MAX];
	struct sp_err ignored;
	json_t *mounts, *snaps, *m, *req;
	const char *path = NULL;
	size_t i;
	int rc, frozen = 0, consistent = 1;

	*out = NULL;
	if (sp_name_check("snapshot", snap, e) == -1 ||
	    local_volume(x, tenant, ref, &v, e) == -1)
		return -1;
	mounts = parse_array(v.mounts);
	snaps = parse_array(v.snaps);
	rc = snap_find(snaps, snap) != NULL ? sp_err_set(e, SP_E_EXISTS, 0,
	    "volume %s has a snapshot %s", v.name, snap) :
	    json_array_size(snaps) >= SNAPS_MAX ? sp_err_set(e, SP_E_FULL, 0,
	    "volume %s has %d snapshots", v.name, SNAPS_MAX) : 0;
	if (rc == 0)
		rc = volume_dir(x, v.id, src, sizeof src, e) == -1 ||
		    snap_dir(x, v.id, snap, dst, sizeof dst, e) == -1 ? -1 : 0;
	/* Mounted read-write: its guest holds the filesystem still (FIFREEZE
	 * flushes it and marks it clean) while btrfs snapshots the image.  A
	 * guest that is not running has nothing in flight but what a crash
	 * would lose: the snapshot is then as after a crash. */
	json_array_foreach(mounts, i, m)
		if (rc == 0 && !json_is_true(json_object_get(m, "ro"))) {
			path = json_string_value(json_object_get(m, "path"));
			rc = guest_of(x, json_string_value(json_object_get(m,
			    "sandbox")), &c, e);
			consistent = c != NULL;
		}
	if (rc == 0 && c != NULL) {
		req = json_pack("{s:s, s:i, s:s}", "op", "freeze", "timeout_ms",
		    FREEZE_MS, "path", path);
		rc = sp_chan_call(c, req, FREEZE_MS, NULL, e);
		frozen = rc == 0;
	}
	if (rc == 0)
		rc = sp_subvol_snapshot(src, dst, 1, e);
	if (frozen && sp_chan_call(c, json_pack("{s:s}", "op", "thaw"),
	    FREEZE_MS, NULL, &ignored) == -1)
		sp_warn("volume %s: the thaw of %s failed: %s (the guest thaws "
		    "it itself within %d ms)", v.name, path, ignored.msg,
		    FREEZE_MS);
	if (c != NULL)
		sp_chan_close(c);
	if (rc == 0) {
		json_array_append_new(snaps, json_pack("{s:s, s:I}", "snap",
		    snap, "created", (json_int_t)time(NULL)));
		if ((rc = write_row(x, &v, json_incref(mounts),
		    json_incref(snaps), e)) == -1)
			sp_subvol_delete(dst, &ignored);
	}
	if (rc == 0)
		*out = json_pack("{s:s, s:s, s:b}", "volume", v.name, "snap",
		    snap, "consistent", consistent);
	json_decref(mounts);
	json_decref(snaps);
	sp_db_volume_release(&v);
	return rc;
}

/* ---- mounts ---- */

static void
tenant_of(const struct sp_sandbox_row *r, char out[SP_NAME_MAX + 1])
{
	json_t *l = json_loads(r->labels != NULL ? r->labels : "{}", 0, NULL);
	const char *t = json_string_value(json_object_get(l, "tenant"));

	snprintf(out, SP_NAME_MAX + 1, "%s", t != NULL ? t : "");
	json_decref(l);
}

/* The mount of sandbox id in mounts, and its index. */
static json_t *
mount_of(json_t *mounts, const char *id, size_t *at)
{
	json_t *m;
	size_t i;

	json_array_foreach(mounts, i, m)
		if (strcmp(json_string_value(json_object_get(m, "sandbox")),
		    id) == 0) {
			*at = i;
			return m;
		}
	return NULL;
}

/* Another sandbox's mount in mounts that keeps id from mounting it (ro:
 * read-only): read-write is one sandbox's alone, read-only goes beside
 * read-only only.  NULL when none does. */
static json_t *
mount_in_the_way(json_t *mounts, const char *id, int ro)
{
	json_t *m;
	size_t i;

	json_array_foreach(mounts, i, m)
		if (strcmp(json_string_value(json_object_get(m, "sandbox")),
		    id) != 0 && (!ro || !json_is_true(json_object_get(m, "ro"))))
			return m;
	return NULL;
}

/* A target of vdb..vdz that dom's disks do not use. */
static int
free_target(const char *xml, char out[4], struct sp_err *e)
{
	char t[32];
	char c;

	for (c = 'b'; c <= 'z'; c++) {
		snprintf(t, sizeof t, "<target dev='vd%c'", c);
		if (strstr(xml, t) == NULL) {
			snprintf(out, 4, "vd%c", c);
			return 0;
		}
	}
	return sp_err_set(e, SP_E_FULL, 0, "no free disk name");
}

/* Plugs volume v into sandbox id's VM and mounts it at path, unless the VM
 * has it plugged already. */
static int
plug_and_mount(struct sp_ctx *x, const char *id, const struct sp_volume_row *v,
    const char *path, int ro, unsigned uid, struct sp_err *e)
{
	struct sp_vm_volume d;
	char dom[SP_ID_LEN + 4], disk[SP_PATH_MAX];
	char *xml = NULL;
	struct sp_chan *c = NULL;
	struct sp_err ignored;
	int rc;

	sp_sandbox_domain(id, dom);
	if (volume_disk(x, v->id, disk, sizeof disk, e) == -1 ||
	    sp_virt_xml(x->virt, dom, &xml, e) == -1)
		return -1;
	if (sp_virt_volume_in(xml, v->id)) {
		free(xml);
		return 0;
	}
	memset(&d, 0, sizeof d);
	d.disk = disk;
	d.serial = v->id;
	d.ro = ro;
	rc = free_target(xml, d.target, e);
	free(xml);
	if (rc == -1 ||
	    (rc = sp_virt_volume_plug(x->virt, dom, &d, uid != 0, e)) == -1) {
		char why[sizeof e->msg];

		snprintf(why, sizeof why, "%s", e->msg);
		if (strstr(why, "PCI") != NULL || strstr(why, "slot") != NULL)
			sp_err_set(e, SP_E_FULL, 0, "sandbox %s has no free PCIe "
			    "port for another disk (%.200s)", id, why);
		return -1;
	}
	if ((rc = sp_chan_open(&c, x->conf.run, id, 5000, e)) == 0) {
		rc = sp_chan_call(c, json_pack("{s:s, s:s, s:s, s:b}", "op",
		    "volume-mount", "serial", v->id, "path", path, "ro", ro),
		    MOUNT_TIMEOUT_MS, NULL, e);
		sp_chan_close(c);
	}
	if (rc == -1)
		sp_virt_volume_unplug(x->virt, dom, v->id, &ignored);
	return rc;
}

int
sp_volume_attach(struct sp_ctx *x, const char *id, const char *ref,
    const char *path, int ro, int *changed, struct sp_err *e)
{
	struct sp_sandbox_row r;
	struct sp_volume_row v;
	char tenant[SP_NAME_MAX + 1], dom[SP_ID_LEN + 4];
	json_t *mounts, *m;
	struct sp_err ignored;
	size_t at;
	unsigned uid;
	int rc, tries, reserved = 0;

	*changed = 0;
	if (sp_volume_path_check(path, e) == -1 ||
	    sp_db_sandbox_get(x->db, id, &r, e) == -1)
		return -1;
	tenant_of(&r, tenant);
	rc = r.pod || r.state == SP_ST_DESTROYED ? sp_err_set(e,
	    SP_E_NOT_FOUND, 0, "no such sandbox") : strcmp(r.node,
	    x->conf.node) != 0 ? sp_err_set(e, SP_E_BAD_STATE, 0, "sandbox %s "
	    "is on node %s: attach its volumes there", id, r.node) :
	    r.state != SP_ST_RUNNING ? sp_err_set(e, SP_E_BAD_STATE, 0,
	    "sandbox %s is %s: a volume is attached to a running one", id,
	    sp_state_name(r.state)) : 0;
	sp_db_row_release(&r);
	sp_sandbox_domain(id, dom);
	if (rc == -1 || vm_uid(x, dom, &uid, e) == -1)
		return -1;
	for (tries = 0; ; tries++) {
		if (local_volume(x, tenant, ref, &v, e) == -1)
			return -1;
		mounts = parse_array(v.mounts);
		rc = 0;
		if ((m = mount_of(mounts, id, &at)) != NULL) {
			/* Again as it is: done; otherwise it is taken. */
			if (strcmp(json_string_value(json_object_get(m, "path")),
			    path) == 0 && json_is_true(json_object_get(m,
			    "ro")) == ro) {
				json_decref(mounts);
				sp_db_volume_release(&v);
				return 0;
			}
			rc = sp_err_set(e, SP_E_EXISTS, 0, "volume %s is mounted "
			    "in %s at %s already", v.name, id,
			    json_string_value(json_object_get(m, "path")));
		}
		if (rc == 0 && (m = mount_in_the_way(mounts, id, ro)) != NULL)
			rc = sp_err_set(e, SP_E_IN_USE, 0, "volume %s is mounted "
			    "%s in %s: %s", v.name, json_is_true(json_object_get(m,
			    "ro")) ? "read-only" : "read-write", json_string_value(
			    json_object_get(m, "sandbox")), ro ? "read-only mounts "
			    "wait for it to go" : "read-write is one sandbox's "
			    "alone");
		if (rc == 0 && json_array_size(mounts) >= MOUNTS_MAX)
			rc = sp_err_set(e, SP_E_FULL, 0, "volume %s is mounted "
			    "%d times", v.name, MOUNTS_MAX);
		if (rc == 0 && !ro && strcmp(v.writer, id) != 0) {
			/* Another writer: checkpoints of others that had it
			 * no longer match it (sp_volume_restore). */
			memcpy(v.writer, id, SP_ID_LEN + 1);
			v.epoch++;
		}
		if (rc == 0) {
			json_array_append_new(mounts, json_pack("{s:s, s:s, s:b,"
			    " s:I}", "sandbox", id, "path", path, "ro", ro,
			    "uid", (json_int_t)uid));
			rc = write_row(x, &v, json_incref(mounts),
			    parse_array(v.snaps), e);
		}
		if (rc == 0 || e->code != SP_E_BUSY || tries == CAS_TRIES) {
			if (rc == 0) {
				v.gen++;
				reserved = 1;
			}
			break;
		}
		json_decref(mounts);
		sp_db_volume_release(&v);
	}
	if (rc == 0 && (rc = apply_acl(x, v.id, mounts, e)) == 0 &&
	    (rc = plug_and_mount(x, id, &v, path, ro, uid, e)) == 0) {
		*changed = 1;
		json_decref(mounts);
		sp_db_volume_release(&v);
		return 0;
	}
	/* Taken back: the reservation, then the ACL. */
	if (reserved && mount_of(mounts, id, &at) != NULL) {
		json_array_remove(mounts, at);
		if (write_row(x, &v, json_incref(mounts), parse_array(v.snaps),
		    &ignored) == 0)
			apply_acl(x, v.id, mounts, &ignored);
	}
	json_decref(mounts);
	sp_db_volume_release(&v);
	return -1;
}

/* Takes sandbox id out of volume v's mounts (and v's ACL), retrying on a
 * change of the row in between. */
static int
unmount_row(struct sp_ctx *x, const char *id, struct sp_volume_row *v,
    struct sp_err *e)
{
	json_t *mounts;
	size_t at;
	int rc, tries;

	for (tries = 0; ; tries++) {
		mounts = parse_array(v->mounts);
		if (mount_of(mounts, id, &at) == NULL) {
			json_decref(mounts);
			return 0;
		}
		json_array_remove(mounts, at);
		rc = write_row(x, v, json_incref(mounts), parse_array(v->snaps),
		    e);
		if (rc == 0)
			rc = apply_acl(x, v->id, mounts, e);
		json_decref(mounts);
		if (rc == 0 || e->code != SP_E_BUSY || tries == CAS_TRIES)
			return rc;
		sp_db_volume_release(v);
		if (sp_db_volume_get(x->db, NULL, v->id, v, e) == -1)
			return -1;
	}
}

int
sp_volume_detach(struct sp_ctx *x, const char *id, const char *ref,
    int *changed, struct sp_err *e)
{
	struct sp_sandbox_row r;
	struct sp_volume_row v;
	struct sp_chan *c = NULL;
	char tenant[SP_NAME_MAX + 1], dom[SP_ID_LEN + 4], st[16];
	enum sp_state state;
	json_t *mounts, *m;
	size_t at;
	int rc, running;

	*changed = 0;
	if (sp_db_sandbox_get(x->db, id, &r, e) == -1)
		return -1;
	tenant_of(&r, tenant);
	state = r.state;
	running = state == SP_ST_RUNNING;
	rc = strcmp(r.node, x->conf.node) != 0 ? sp_err_set(e, SP_E_BAD_STATE,
	    0, "sandbox %s is on node %s", id, r.node) : 0;
	sp_db_row_release(&r);
	if (rc == -1 || local_volume(x, tenant, ref, &v, e) == -1)
		return -1;
	mounts = parse_array(v.mounts);
	m = mount_of(mounts, id, &at);
	if (m == NULL) {
		json_decref(mounts);
		sp_db_volume_release(&v);
		return 0;
	}
	/* A paused guest cannot let go of its filesystem; one whose memory
	 * waits to be restored (suspended, failed) has it mounted there, and
	 * the restore takes it again.  A stopped one's boot plugs what its
	 * row says. */
	if (!running && state != SP_ST_STOPPED)
		rc = sp_err_set(e, SP_E_BAD_STATE, 0, "sandbox %s is %s: a volume "
		    "is detached from a running or stopped one", id,
		    sp_state_name(state));
	else if ((rc = guest_of(x, id, &c, e)) == 0 && c != NULL) {
		/* The guest unmounts first: busy, and nothing changes, when
		 * a process there holds a file open. */
		rc = sp_chan_call(c, json_pack("{s:s, s:s}", "op",
		    "volume-umount", "path", json_string_value(json_object_get(m,
		    "path"))), MOUNT_TIMEOUT_MS, NULL, e);
		sp_chan_close(c);
	}
	sp_sandbox_domain(id, dom);
	if (rc == 0 && running && ((rc = sp_ctx_virt(x, e)) == 0 &&
	    (rc = sp_virt_state(x->virt, dom, st, e)) == 0) &&
	    strcmp(st, "absent") != 0 && strcmp(st, "shutoff") != 0)
		rc = sp_virt_volume_unplug(x->virt, dom, v.id, e);
	json_decref(mounts);
	if (rc == 0 && (rc = unmount_row(x, id, &v, e)) == 0)
		*changed = 1;
	sp_db_volume_release(&v);
	return rc;
}

struct each_mount {
	struct sp_ctx *x;
	const char *id;
	char (*ids)[SP_ID_LEN + 1];
	size_t n;
};

static int
collect(const struct sp_volume_row *v, void *arg)
{
	struct each_mount *a = arg;
	json_t *mounts = parse_array(v->mounts);
	size_t at;

	if (mount_of(mounts, a->id, &at) != NULL && a->n < MOUNTS_MAX)
		memcpy(a->ids[a->n++], v->id, SP_ID_LEN + 1);
	json_decref(mounts);
	return 0;
}

/* The ids of this node's volumes that sandbox id mounts, into ids. */
static int
volumes_of(struct sp_ctx *x, const char *id,
    char (*ids)[SP_ID_LEN + 1], size_t *n, struct sp_err *e)
{
	struct each_mount a = { x, id, ids, 0 };

	if (sp_db_volume_each(x->db, x->conf.node, NULL, collect, &a, e) == -1)
		return -1;
	*n = a.n;
	return 0;
}

int
sp_volume_count(struct sp_ctx *x, const char *id, size_t *n,
    struct sp_err *e)
{
	char ids[MOUNTS_MAX][SP_ID_LEN + 1];

	return volumes_of(x, id, ids, n, e);
}

int
sp_volume_forget(struct sp_ctx *x, const char *id, struct sp_err *e)
{
	char ids[MOUNTS_MAX][SP_ID_LEN + 1];
	struct sp_volume_row v;
	size_t n, i;
	int rc = 0;

	if (volumes_of(x, id, ids, &n, e) == -1)
		return -1;
	for (i = 0; i < n; i++) {
		if (sp_db_volume_get(x->db, NULL, ids[i], &v, e) == -1) {
			if (e->code != SP_E_NOT_FOUND)
				rc = -1;
			continue;
		}
		if (unmount_row(x, id, &v, e) == -1)
			rc = -1;
		sp_db_volume_release(&v);
	}
	return rc;
}

int
sp_volume_replug(struct sp_ctx *x, const char *id, struct sp_err *e)
{
	char ids[MOUNTS_MAX][SP_ID_LEN + 1], dom[SP_ID_LEN + 4];
	struct sp_volume_row v;
	json_t *mounts, *m;
	size_t n, i, at;
	unsigned uid;
	int rc = 0;

	if (volumes_of(x, id, ids, &n, e) == -1)
		return -1;
	if (n == 0)
		return 0;
	sp_sandbox_domain(id, dom);
	if (vm_uid(x, dom, &uid, e) == -1)
		return -1;
	for (i = 0; i < n && rc == 0; i++) {
		if (sp_db_volume_get(x->db, NULL, ids[i], &v, e) == -1)
			return -1;
		mounts = parse_array(v.mounts);
		if ((m = mount_of(mounts, id, &at)) != NULL) {
			/* Its VM may run as another uid now. */
			if ((unsigned)json_integer_value(json_object_get(m,
			    "uid")) != uid) {
				json_object_set_new(m, "uid",
				    json_integer((json_int_t)uid));
				rc = write_row(x, &v, json_incref(mounts),
				    parse_array(v.snaps), e);
			}
			if (rc == 0)
				rc = apply_acl(x, v.id, mounts, e);
			if (rc == 0)
				rc = plug_and_mount(x, id, &v,
				    json_string_value(json_object_get(m, "path")),
				    json_is_true(json_object_get(m, "ro")), uid, e);
		}
		json_decref(mounts);
		sp_db_volume_release(&v);
	}
	return rc;
}

/* ---- saved and restored with the sandbox ---- */

/*
 * The volumes plugged into dom, from its live XML: each <disk> with an alias
 * of ours gives its serial (the volume's id), target, PCIe bus and whether
 * it is read-only.  At most max.
 */
struct plugged {
	char id[SP_ID_LEN + 1];
	char target[4];
	int bus, ro;
};

static int
plugged_of(const char *xml, struct plugged *p, size_t max, size_t *n)
{
	const char *d = xml, *end, *a;
	char serial[SP_ID_LEN + 2];
	unsigned bus;

	*n = 0;
	while ((d = strstr(d, "<disk ")) != NULL && *n < max) {
		if ((end = strstr(d, "</disk>")) == NULL)
			break;
		a = strstr(d, "<alias name='ua-vol-");
		if (a != NULL && a < end && sscanf(a, "<alias name='ua-vol-%13[a-z2-7]'",
		    serial) == 1 && strlen(serial) == SP_ID_LEN) {
			struct plugged *q = &p[*n];
			const char *t = strstr(d, "<target dev='vd"),
			    *b = strstr(d, "<address type='pci'");

			memset(q, 0, sizeof *q);
			memcpy(q->id, serial, SP_ID_LEN + 1);
			if (t != NULL && t < end)
				snprintf(q->target, sizeof q->target, "vd%c",
				    t[strlen("<target dev='vd")]);
			if (b != NULL && b < end && (b = strstr(b, "bus='0x")) !=
			    NULL && b < end && sscanf(b, "bus='0x%x'", &bus) == 1)
				q->bus = (int)bus;
			q->ro = strstr(d, "<readonly/>") != NULL &&
			    strstr(d, "<readonly/>") < end;
			if (q->target[0] != '\0' && q->bus > 0)
				(*n)++;
		}
		d = end;
	}
	return 0;
}

int
sp_volume_capture(struct sp_ctx *x, const char *id, const char *dst,
    struct sp_err *e)
{
	struct plugged p[MOUNTS_MAX];
	char dom[SP_ID_LEN + 4], dir[SP_PATH_MAX], src[SP_PATH_MAX];
	char to[SP_PATH_MAX], path[256];
	struct sp_volume_row v;
	json_t *list, *mounts, *m;
	char *xml = NULL;
	size_t n, i, at;
	int rc = 0;

	sp_sandbox_domain(id, dom);
	if (sp_ctx_virt(x, e) == -1 || sp_virt_xml(x->virt, dom, &xml, e) == -1)
		return -1;
	plugged_of(xml, p, MOUNTS_MAX, &n);
	free(xml);
	if (n == 0) {
		/* None: no word of one, whatever the subvolume held. */
		if (sp_path_fmt(to, sizeof to, e, "%s/volumes.json", dst) == -1)
			return -1;
		return unlink(to) == 0 || errno == ENOENT ? 0 :
		    sp_err_sys(e, SP_E_IO, "unlink %s", to);
	}
	if (sp_path_fmt(dir, sizeof dir, e, "%s/volumes", dst) == -1)
		return -1;
	if (mkdir(dir, 0700) == -1 && errno != EEXIST)
		return sp_err_sys(e, SP_E_IO, "mkdir %s", dir);
	list = json_array();
	for (i = 0; i < n && rc == 0; i++) {
		if ((rc = sp_db_volume_get(x->db, NULL, p[i].id, &v, e)) == -1)
			break;
		mounts = parse_array(v.mounts);
		m = mount_of(mounts, id, &at);
		/* Plugged with no mount in its row (an attach whose undoing
		 * failed): kept plugged as the memory has it, at a path of
		 * its own should it be mounted again. */
		if (m != NULL)
			snprintf(path, sizeof path, "%s", json_string_value(
			    json_object_get(m, "path")));
		else
			snprintf(path, sizeof path, "/mnt/%s", v.id);
		json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:b, "
		    "s:s, s:i, s:I}", "id", v.id, "volume", v.name, "path", path,
		    "ro", p[i].ro, "target", p[i].target, "bus", p[i].bus,
		    "epoch", (json_int_t)v.epoch));
		/* Read-write: the image as it is at this instant (the VM is
		 * paused), shared with the volume until either changes. */
		if (!p[i].ro && (rc = volume_disk(x, v.id, src, sizeof src,
		    e)) == 0 && (rc = sp_path_fmt(to, sizeof to, e, "%s/%s.raw",
		    dir, v.id)) == 0)
			rc = reflink_copy(src, to, e);
		json_decref(mounts);
		sp_db_volume_release(&v);
	}
	/* A new file: one copied with the sandbox may be another user's. */
	if (rc == 0 && sp_path_fmt(to, sizeof to, e, "%s/volumes.json",
	    dst) == 0 && ((unlink(to) == -1 && errno != ENOENT) ||
	    json_dump_file(list, to, JSON_COMPACT) == -1))
		rc = sp_err_sys(e, SP_E_IO, "write %s", to);
	json_decref(list);
	return rc;
}

/* The volume row of id moved to this node from the capture at img: its
 * subvolume made here (a stale one replaced), then the row's node. */
static int
move_here(struct sp_ctx *x, struct sp_volume_row *v, const char *img,
    struct sp_err *e)
{
	char dir[SP_PATH_MAX], disk[SP_PATH_MAX];
	struct sp_err ignored;

	if (sp_volume_area(x->conf.root, e) == -1 ||
	    volume_dir(x, v->id, dir, sizeof dir, e) == -1 ||
	    volume_disk(x, v->id, disk, sizeof disk, e) == -1)
		return -1;
	if (sp_subvol_exists(dir) && sp_subvol_delete(dir, e) == -1)
		return -1;
	if (sp_subvol_create(dir, e) == -1)
		return -1;
	if (reflink_copy(img, disk, e) == -1 || chmod(dir, 0700) == -1) {
		if (e->code == SP_E_NONE)
			sp_err_sys(e, SP_E_IO, "chmod %s", dir);
		sp_subvol_delete(dir, &ignored);
		return -1;
	}
	/* Its snapshots stay on the node it left (they are that node's
	 * subvolumes): the row forgets them. */
	if (sp_db_volume_set(x->db, v, v->mounts, "[]", x->conf.node, e) == -1) {
		sp_subvol_delete(dir, &ignored);
		return -1;
	}
	v->gen++;
	snprintf(v->node, sizeof v->node, "%s", x->conf.node);
	free(v->snaps);
	v->snaps = strdup("[]");
	return 0;
}

/* dir/volumes.json: *list (an empty one when there is none). */
static int
load_entries(const char *dir, json_t **list, struct sp_err *e)
{
	char p[SP_PATH_MAX];

	*list = NULL;
	if (sp_path_fmt(p, sizeof p, e, "%s/volumes.json", dir) == -1)
		return -1;
	if (access(p, F_OK) == -1) {
		*list = json_array();
		return 0;
	}
	if ((*list = json_load_file(p, 0, NULL)) == NULL ||
	    !json_is_array(*list)) {
		json_decref(*list);
		*list = NULL;
		return sp_err_set(e, SP_E_CORRUPT, 0, "%s is not a list", p);
	}
	return 0;
}

/* The row of a checkpoint's volume vid. */
static int
entry_row(struct sp_ctx *x, const char *vid, struct sp_volume_row *v,
    struct sp_err *e)
{
	if (sp_db_volume_get(x->db, NULL, vid, v, e) == 0)
		return 0;
	if (e->code == SP_E_NOT_FOUND)
		sp_err_set(e, SP_E_NOT_FOUND, 0, "volume %s of this checkpoint "
		    "is gone", vid);
	return -1;
}

/*
 * Whether sandbox id may have volume v (its row read, mounts parsed) back
 * as a checkpoint's entry says (ro, the epoch then, have: a clone of the
 * image is in the checkpoint).
 */
static int
entry_ok(struct sp_ctx *x, const char *id, const struct sp_volume_row *v,
    json_t *mounts, int ro, json_int_t epoch, int have, struct sp_err *e)
{
	json_t *m;

	if ((m = mount_in_the_way(mounts, id, ro)) != NULL)
		return sp_err_set(e, SP_E_IN_USE, 0, "volume %s is mounted in %s",
		    v->name, json_string_value(json_object_get(m, "sandbox")));
	/* Written by another sandbox since the checkpoint: the guest's
	 * memory would not match the disk, and putting the clone back would
	 * lose that writing. */
	if (v->epoch != epoch)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "volume %s was mounted "
		    "read-write by %s since this checkpoint", v->name,
		    v->writer[0] != '\0' ? v->writer : "another sandbox");
	/* On another node: only a read-write one moves here, from its
	 * clone. */
	if (strcmp(v->node, x->conf.node) != 0 && (ro || !have))
		return sp_err_set(e, SP_E_BAD_STATE, 0, "volume %s is on node "
		    "%s", v->name, v->node);
	return 0;
}

int
sp_volume_restore_check(struct sp_ctx *x, const char *id, const char *dir,
    struct sp_err *e)
{
	char img[SP_PATH_MAX];
	struct sp_volume_row v;
	json_t *list, *ent, *mounts;
	const char *vid;
	json_int_t epoch;
	size_t i;
	int rc = 0, ro;

	if (load_entries(dir, &list, e) == -1)
		return -1;
	json_array_foreach(list, i, ent) {
		ro = 0;
		if (json_unpack(ent, "{s:s, s:b, s:I}", "id", &vid, "ro", &ro,
		    "epoch", &epoch) == -1 || !sp_id_valid(vid)) {
			rc = sp_err_set(e, SP_E_CORRUPT, 0, "%s: a bad entry of "
			    "volumes.json", dir);
			break;
		}
		if ((rc = sp_path_fmt(img, sizeof img, e, "%s/volumes/%s.raw",
		    dir, vid)) == -1 || (rc = entry_row(x, vid, &v, e)) == -1)
			break;
		mounts = parse_array(v.mounts);
		rc = entry_ok(x, id, &v, mounts, ro, epoch, access(img, F_OK) == 0,
		    e);
		json_decref(mounts);
		sp_db_volume_release(&v);
		if (rc == -1)
			break;
	}
	json_decref(list);
	return rc;
}

int
sp_volume_restore(struct sp_ctx *x, const char *id, const char *dir,
    unsigned uid, int copy, struct sp_volume_plug *out, int max, int *n,
    struct sp_err *e)
{
	char p[SP_PATH_MAX], img[SP_PATH_MAX], tmp[SP_PATH_MAX];
	struct sp_volume_row v;
	json_t *list, *ent, *mounts;
	const char *vid, *path, *target;
	json_int_t epoch;
	size_t i, at;
	int rc = 0, ro, bus, tries, have;

	*n = 0;
	if (load_entries(dir, &list, e) == -1)
		return -1;
	json_array_foreach(list, i, ent) {
		ro = bus = 0;
		if (json_unpack(ent, "{s:s, s:s, s:b, s:s, s:i, s:I}", "id",
		    &vid, "path", &path, "ro", &ro, "target", &target, "bus",
		    &bus, "epoch", &epoch) == -1 || !sp_id_valid(vid) || *n >= max ||
		    strlen(target) != 3 || sp_volume_path_check(path, e) == -1) {
			rc = sp_err_set(e, SP_E_CORRUPT, 0, "%s: a bad entry of "
			    "volumes.json", dir);
			break;
		}
		if ((rc = sp_path_fmt(img, sizeof img, e, "%s/volumes/%s.raw",
		    dir, vid)) == -1)
			break;
		have = access(img, F_OK) == 0;
		/* A copy of a sandbox (a fork) shares a read-only volume;
		 * read-write stays its source's. */
		if (copy && !ro) {
			rc = sp_err_set(e, SP_E_IN_USE, 0, "this checkpoint has "
			    "volume %s mounted read-write, which a copy of it "
			    "cannot share: fork from one taken without it",
			    json_string_value(json_object_get(ent, "volume")));
			break;
		}
		memset(&v, 0, sizeof v);
		mounts = NULL;
		/* Its row takes this sandbox's mount back (a compare-and-set,
		 * again when the row changed in between). */
		for (tries = 0; ; tries++) {
			if ((rc = entry_row(x, vid, &v, e)) == -1)
				break;
			mounts = parse_array(v.mounts);
			rc = entry_ok(x, id, &v, mounts, ro, epoch, have, e);
			/* On another node: a read-write one moves here with
			 * the sandbox, from the copy its checkpoint holds. */
			if (rc == 0 && strcmp(v.node, x->conf.node) != 0)
				rc = move_here(x, &v, img, e);
			if (rc == 0) {
				if (mount_of(mounts, id, &at) != NULL)
					json_array_remove(mounts, at);
				json_array_append_new(mounts, json_pack("{s:s, s:s,"
				    " s:b, s:I}", "sandbox", id, "path", path,
				    "ro", ro, "uid", (json_int_t)uid));
				/* Its writer again, in the same epoch. */
				if (!ro)
					memcpy(v.writer, id, SP_ID_LEN + 1);
				rc = write_row(x, &v, json_incref(mounts),
				    parse_array(v.snaps), e);
			}
			if (rc == 0 || e->code != SP_E_BUSY || tries == CAS_TRIES)
				break;
			json_decref(mounts);
			mounts = NULL;
			sp_db_volume_release(&v);
			rc = 0;
		}
		if (rc == -1) {
			json_decref(mounts);
			sp_db_volume_release(&v);
			break;
		}
		/* Read-write: the volume goes back to the checkpoint's
		 * instant with the sandbox (a new file renamed over). */
		if (!ro && have && ((rc = volume_disk(x, v.id, p, sizeof p,
		    e)) == -1 || (rc = sp_path_fmt(tmp, sizeof tmp, e,
		    "%s.restore", p)) == -1 || (rc = reflink_copy(img, tmp,
		    e)) == -1 || (rename(tmp, p) == -1 && (rc = sp_err_sys(e,
		    SP_E_IO, "rename %s", tmp)) == -1)))
			unlink(tmp);
		if (rc == 0)
			rc = apply_acl(x, v.id, mounts, e);
		json_decref(mounts);
		sp_db_volume_release(&v);
		if (rc == -1)
			break;
		/* The copy has done its work: the sandbox's own subvolume
		 * keeps no volume. */
		unlink(img);
		if ((rc = volume_disk(x, vid, out[*n].disk, sizeof out[*n].disk,
		    e)) == -1)
			break;
		snprintf(out[*n].serial, sizeof out[*n].serial, "%s", vid);
		memset(&out[*n].vm, 0, sizeof out[*n].vm);
		out[*n].vm.disk = out[*n].disk;
		out[*n].vm.serial = out[*n].serial;
		snprintf(out[*n].vm.target, sizeof out[*n].vm.target, "%s",
		    target);
		out[*n].vm.ro = ro;
		out[*n].vm.bus = bus;
		(*n)++;
	}
	json_decref(list);
	/* What the checkpoint said is in the VM's definition now: the
	 * sandbox's own subvolume keeps none of it, or its next checkpoint
	 * would say it again. */
	if (rc == 0 && sp_path_fmt(p, sizeof p, e, "%s/volumes.json",
	    dir) == 0 && (unlink(p) == 0 || errno == ENOENT) &&
	    sp_path_fmt(p, sizeof p, e, "%s/volumes", dir) == 0)
		(void)rmdir(p);
	return rc;
}

void
sp_volume_spec(struct sp_vm_spec *s, const struct sp_volume_plug *p, int n,
    struct sp_vm_volume *vols)
{
	int i;

	for (i = 0; i < n; i++)
		vols[i] = p[i].vm;
	s->volumes = n > 0 ? vols : NULL;
	s->nvolumes = n;
}

/* ---- what no row claims ---- */

struct gc_walk {
	struct sp_ctx *x;
	int removed;
};

int
sp_volume_gc(struct sp_ctx *x, int *removed, struct sp_err *e)
{
	char area[SP_PATH_MAX], p[SP_PATH_MAX], id[SP_ID_LEN + 1];
	struct sp_volume_row v;
	struct dirent *d;
	struct stat st;
	DIR *dir;
	int rc = 0, mine;

	*removed = 0;
	if (sp_path_fmt(area, sizeof area, e, "%s/volumes", x->conf.root) == -1)
		return -1;
	if ((dir = opendir(area)) == NULL)
		return errno == ENOENT ? 0 : sp_err_sys(e, SP_E_IO, "%s", area);
	while ((d = readdir(dir)) != NULL) {
		if (strlen(d->d_name) < SP_ID_LEN || (d->d_name[SP_ID_LEN] !=
		    '\0' && d->d_name[SP_ID_LEN] != '@'))
			continue;
		memcpy(id, d->d_name, SP_ID_LEN);
		id[SP_ID_LEN] = '\0';
		if (!sp_id_valid(id) || sp_path_fmt(p, sizeof p, e, "%s/%s", area,
		    d->d_name) == -1)
			continue;
		/* A create in flight has made its subvolume and not yet its
		 * row: a minute's grace. */
		if (stat(p, &st) == -1 || st.st_mtime > time(NULL) - 60)
			continue;
		if (sp_db_volume_get(x->db, NULL, id, &v, e) == 0) {
			mine = strcmp(v.node, x->conf.node) == 0;
			if (mine && d->d_name[SP_ID_LEN] == '@')
			{
				json_t *snaps = parse_array(v.snaps);

				mine = snap_find(snaps, d->d_name + SP_ID_LEN +
				    1) != NULL;
				json_decref(snaps);
			}
			sp_db_volume_release(&v);
		} else if (e->code == SP_E_NOT_FOUND)
			mine = 0;
		else {
			rc = -1;
			break;
		}
		if (!mine) {
			if (sp_subvol_delete(p, e) == -1) {
				rc = -1;
				break;
			}
			(*removed)++;
		}
	}
	closedir(dir);
	return rc;
}
