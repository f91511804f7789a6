/*
 * sp_node: prepares this node: a btrfs filesystem at SPACE_ROOT (a loop-backed
 * image when the directory is on something else), the layout in design.md,
 * the DB, and a libvirt that answers.  Every step is idempotent.  And its
 * beat: what it can hold, written to the DB with a lease renewed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "sp_sandbox.h"

/* libvirt's own directory of the system instance's QEMU processes. */
#define LIBVIRT_QEMU_DIR	"/var/lib/libvirt/qemu"

/* The node's directories.  space-noded makes what is below an area of
 * subvolumes, never the area itself, so each one it serves is here
 * (sp_noded_parse.c). */
static const char *const layout[] = {
	"templates", "sandboxes", "snapshots", "lineages", "pool", "volumes",
	"objects", "tmp", "locks",
};

/*
 * Makes <root>.img a btrfs image of the given size and mounts it on root,
 * nosuid and nodev: what root's programs write there (a layer unpacked, a
 * stream received) may hold a setuid-root file or a device node, and
 * neither may give anyone anything.
 */
static int
loop_btrfs(const char *root, uint64_t bytes, struct sp_err *e)
{
	char img[SP_PATH_MAX];
	char *mkfs[] = { "mkfs.btrfs", "-q", img, NULL };
	char *mnt[] = { "mount", "-o", "loop,nosuid,nodev", img, (char *)root,
	    NULL };
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
sp_node_lease_s(struct sp_err *e)
{
	const char *v = getenv("SPACE_NODE_LEASE");
	char *end;
	long s;

	if (v == NULL || *v == '\0')
		return SP_NODE_LEASE_DEFAULT;
	s = strtol(v, &end, 10);
	if (*end != '\0' || s < 2 || s > 86400)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_NODE_LEASE must be "
		    "2 to 86400 seconds");
	return (int)s;
}

/* The templates this node has on disk, as a JSON array of name@digest. */
static char *
templates_here(const char *root, struct sp_err *e)
{
	char dir[SP_PATH_MAX], *out;
	struct dirent *d;
	json_t *a;
	DIR *dp;
	size_t n;

	if (sp_path_fmt(dir, sizeof dir, e, "%s/templates", root) == -1)
		return NULL;
	if ((a = json_array()) == NULL) {
		sp_err_sys(e, SP_E_INTERNAL, "out of memory");
		return NULL;
	}
	if ((dp = opendir(dir)) != NULL) {
		while ((d = readdir(dp)) != NULL) {
			n = strlen(d->d_name);
			if (strchr(d->d_name, '@') != NULL && d->d_name[0] != '.' &&
			    (n < 5 || strcmp(d->d_name + n - 5, ".ckpt") != 0))
				json_array_append_new(a, json_string(d->d_name));
		}
		closedir(dp);
	}
	if ((out = json_dumps(a, JSON_COMPACT)) == NULL)
		sp_err_sys(e, SP_E_INTERNAL, "out of memory");
	json_decref(a);
	return out;
}

/* Fills n with what this node has; templates is the caller's to free. */
static int
node_facts(const struct sp_conf *c, const char *virt_type,
    struct sp_node_row *n, struct sp_err *e)
{
	struct sysinfo si;
	struct statvfs vfs;
	long cpus;

	memset(n, 0, sizeof *n);
	snprintf(n->name, sizeof n->name, "%s", c->node);
	snprintf(n->root, sizeof n->root, "%s", c->root);
	snprintf(n->virt, sizeof n->virt, "%s", virt_type);
	if (sysinfo(&si) == -1)
		return sp_err_sys(e, SP_E_IO, "sysinfo");
	n->memory_mib = (int64_t)((uint64_t)si.totalram * si.mem_unit >> 20);
	if ((cpus = sysconf(_SC_NPROCESSORS_ONLN)) < 1)
		cpus = 1;
	n->vcpus = cpus;
	if (statvfs(c->root, &vfs) == -1)
		return sp_err_sys(e, SP_E_IO, "statvfs %s", c->root);
	n->disk_free = (int64_t)vfs.f_bavail * (int64_t)vfs.f_frsize;
	return (n->templates = templates_here(c->root, e)) == NULL ? -1 : 0;
}

/* When this node's lease ends by its own clock: $SPACE_RUN/node/lease, the
 * monotonic milliseconds (one clock for every process since boot, and the
 * run dir does not outlive a boot), written after each beat the DB took.
 * Its directory is space's (space-init), as the beat's timer runs as
 * space. */
static void
lease_note(const struct sp_conf *c, int lease_s)
{
	char dir[SP_PATH_MAX], p[SP_PATH_MAX], tmp[SP_PATH_MAX];
	struct sp_err ignored;
	FILE *f;

	if (sp_path_fmt(dir, sizeof dir, &ignored, "%s/" SP_NODE_RUN_DIR,
	    c->run) == -1 || sp_path_space_dir(dir, 0755, &ignored) == -1 ||
	    sp_path_fmt(p, sizeof p, &ignored, "%s/lease", dir) == -1 ||
	    sp_path_fmt(tmp, sizeof tmp, &ignored, "%s/lease.tmp", dir) == -1 ||
	    (f = fopen(tmp, "w")) == NULL)
		return;
	fprintf(f, "%lld\n", (long long)(sp_clock_ms() + (int64_t)lease_s * 1000));
	if (fclose(f) == 0)
		rename(tmp, p);
}

int
sp_node_lease_lapsed(const struct sp_conf *c)
{
	char p[SP_PATH_MAX];
	struct sp_err ignored;
	long long end = 0;
	FILE *f;

	if (sp_path_fmt(p, sizeof p, &ignored, "%s/" SP_NODE_RUN_DIR "/lease",
	    c->run) == -1 || (f = fopen(p, "r")) == NULL)
		return 0;
	if (fscanf(f, "%lld", &end) != 1)
		end = 0;
	fclose(f);
	return end > 0 && sp_clock_ms() > end;
}

static int
beat(const struct sp_conf *c, struct sp_db *db, const char *virt_type,
    int lease_s, struct sp_node_row *out, struct sp_err *e)
{
	struct sp_node_row n;
	int rc;

	if (node_facts(c, virt_type, &n, e) == -1) {
		sp_db_node_release(&n);
		return -1;
	}
	rc = sp_db_node_beat(db, &n, lease_s, e);
	sp_db_node_release(&n);
	if (rc == 0)
		lease_note(c, lease_s);
	if (rc == 0 && out != NULL)
		rc = sp_db_node_get(db, c->node, out, e);
	return rc;
}

int
sp_node_beat(struct sp_ctx *x, int lease_s, struct sp_node_row *out,
    struct sp_err *e)
{
	if (sp_ctx_virt(x, e) == -1)
		return -1;
	return beat(&x->conf, x->db, x->virt_type, lease_s, out, e);
}

/*
 * With each VM under a uid of its own (sp_jail.c), libvirt makes each
 * domain's private directory (its master key) in its QEMU directory, owned
 * by that uid: the uid must be able to go through (not read) that
 * directory, which Debian makes libvirt-qemu's alone.  The uid
 * reservations are root's, and so is what holds secrets or policies.
 */
static int
jail_dirs(const struct sp_conf *c, struct sp_err *e)
{
	char p[SP_PATH_MAX];
	struct stat st;

	if (!sp_jail_on(c))
		return 0;
	static const char *const private[] = { "egress", "creds", "keys",
	    "api" };
	size_t i;

	if (sp_path_fmt(p, sizeof p, e, "%s/jail", c->root) == -1 ||
	    sp_path_mkdirs(p, 0700, e) == -1)
		return -1;
	/* What a VM's jail must not read, root's alone however an older
	 * build made it (the egress policies were 0755). */
	for (i = 0; i < sizeof private / sizeof private[0]; i++)
		if (sp_path_fmt(p, sizeof p, e, "%s/%s", c->root, private[i]) ==
		    -1 || (chmod(p, 0700) == -1 && errno != ENOENT))
			return sp_err_sys(e, SP_E_IO, "chmod %s", p);
	if ((strcmp(c->libvirt_uri, "qemu:///system") != 0 &&
	    !sp_virt_uri_noded(c->libvirt_uri)) ||
	    stat(LIBVIRT_QEMU_DIR, &st) == -1 || (st.st_mode & 0001))
		return 0;
	if (chmod(LIBVIRT_QEMU_DIR, (st.st_mode & 07777) | 0001) == -1)
		return sp_err_sys(e, SP_E_IO, "chmod o+x %s", LIBVIRT_QEMU_DIR);
	return 0;
}

/*
 * The user and group the node's unprivileged side is to run as (the group
 * is the one space-noded's socket lets in): made once, a system account
 * with no home and no shell.  Only root can; anyone else has them made
 * already or does without.
 */
static int
space_account(struct sp_err *e)
{
	char *group[] = { "groupadd", "--system", SP_USER, NULL };
	char *user[] = { "useradd", "--system", "--gid", SP_USER, "--home-dir",
	    "/nonexistent", "--no-create-home", "--shell", "/usr/sbin/nologin",
	    "--comment", "SPACE sandboxes", SP_USER, NULL };

	if (geteuid() != 0)
		return 0;
	if (getgrnam(SP_USER) == NULL && sp_proc_run(group, e) == -1)
		return -1;
	if (getpwnam(SP_USER) == NULL && sp_proc_run(user, e) == -1)
		return -1;
	return 0;
}

/*
 * What of the root is the unprivileged side's alone: the manager's stores
 * (below), the node's SQLite state (its WAL and shared-memory files too:
 * SQLite run as root gives those it makes the database's owner), the jail
 * uids' claims (jail/: space-noded reads a claim, never follows it), and
 * locks/ with the lock files in it (commands open them read-only:
 * sp_lock_path), and $SPACE_RUN/pods (a claim's pod record and boost
 * mark, a trim's and a fence's marks) and node (the lease's end).  The
 * subvolumes' areas stay root's (space-noded makes what is in them): see
 * design.md.
 */
static int
give(const char *p, const struct passwd *pw, mode_t mode, int must,
    struct sp_err *e)
{
	if ((lchown(p, pw->pw_uid, pw->pw_gid) == -1 || chmod(p, mode) == -1) &&
	    (errno != ENOENT || must))
		return sp_err_sys(e, SP_E_IO, "give %s to %s", p, SP_USER);
	return 0;
}

/* nftw's walk: each entry of a tree space's, no link followed. */
static uid_t owns_uid;
static gid_t owns_gid;

static int
own_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return lchown(p, owns_uid, owns_gid) == -1 ? -1 : 0;
}

/* The templates' checkpoints, for space to make sandboxes of: those warmed
 * before its group was there (sp_jail_share_ckpt). */
static int
share_ckpts(const struct sp_conf *c, struct sp_err *e)
{
	char p[SP_PATH_MAX];
	struct dirent *d;
	size_t n;
	DIR *dir;
	int rc = 0;

	if (sp_path_fmt(p, sizeof p, e, "%s/templates", c->root) == -1)
		return -1;
	if ((dir = opendir(p)) == NULL)
		return errno == ENOENT ? 0 : sp_err_sys(e, SP_E_IO, "%s", p);
	while (rc == 0 && (d = readdir(dir)) != NULL) {
		n = strlen(d->d_name);
		if (d->d_name[0] == '.' || n < 6 ||
		    strcmp(d->d_name + n - 5, ".ckpt") != 0)
			continue;
		if (sp_path_fmt(p, sizeof p, e, "%s/templates/%s", c->root,
		    d->d_name) == -1 || sp_jail_share_ckpt(p, e) == -1)
			rc = -1;
	}
	closedir(dir);
	return rc;
}

static int
space_owns(const struct sp_conf *c, struct sp_err *e)
{
	/* The manager's own stores: egress policies, the
	 * credentials and their vault, the tenants' keys, inbound ports
	 * (and the object store, below, when it is a directory).
	 * Their modes stay (0700: no VM's jail reads them). */
	static const char *const trees[] = { "creds", "egress", "keys",
	    "ports", "api", "tmp/transfer" };
	static const char *const ends[] = { "", "-wal", "-shm" };
	char p[SP_PATH_MAX];
	struct passwd *pw;
	struct dirent *d;
	DIR *dir;
	size_t i;
	int rc = 0;

	if (geteuid() != 0 || (pw = getpwnam(SP_USER)) == NULL)
		return 0;
	owns_uid = pw->pw_uid;
	owns_gid = pw->pw_gid;
	/* Each made now if missing, so that what a command run as root
	 * makes in it later is space's too (sp_path_adopt). */
	for (i = 0; i < sizeof trees / sizeof trees[0]; i++)
		if (sp_path_fmt(p, sizeof p, e, "%s/%s", c->root, trees[i]) ==
		    -1 || sp_path_mkdirs(p, 0700, e) == -1 ||
		    nftw(p, own_one, 16, FTW_PHYS) == -1)
			return sp_err_sys(e, SP_E_IO, "give %s to %s", p,
			    SP_USER);
	/* A file store (the default, objects/): the snapshots suspend and
	 * backup send there are the manager's. */
	if (strncmp(c->store, "file://", 7) == 0 &&
	    nftw(c->store + 7, own_one, 16, FTW_PHYS) == -1 && errno != ENOENT)
		return sp_err_sys(e, SP_E_IO, "give %s to %s", c->store + 7,
		    SP_USER);
	for (i = 0; strncmp(c->db, "sqlite:", 7) == 0 &&
	    i < sizeof ends / sizeof ends[0]; i++)
		if (sp_path_fmt(p, sizeof p, e, "%s%s", c->db + 7, ends[i]) ==
		    -1 || give(p, pw, 0600, i == 0, e) == -1)
			return -1;
	/* What the pool keeps of each pod beside its VM (sp_pod_file), and
	 * what space-gatewayd writes (sp_gateway_run_dirs). */
	if (sp_path_fmt(p, sizeof p, e, "%s/" SP_PODS_DIR, c->run) == -1 ||
	    sp_path_space_dir(p, 0700, e) == -1 ||
	    sp_path_fmt(p, sizeof p, e, "%s/" SP_NODE_RUN_DIR, c->run) == -1 ||
	    sp_path_space_dir(p, 0755, e) == -1 ||
	    sp_gateway_run_dirs(c->run, e) == -1)
		return -1;
	if (sp_volume_area(c->root, e) == -1 ||
	    sp_path_fmt(p, sizeof p, e, "%s/jail", c->root) == -1 ||
	    give(p, pw, 0700, 0, e) == -1 ||
	    sp_path_fmt(p, sizeof p, e, "%s/locks", c->root) == -1 ||
	    give(p, pw, 0700, 1, e) == -1)
		return -1;
	if ((dir = opendir(p)) == NULL)
		return sp_err_sys(e, SP_E_IO, "%s", p);
	while (rc == 0 && (d = readdir(dir)) != NULL)
		if (d->d_type == DT_REG && (sp_path_fmt(p, sizeof p, e,
		    "%s/locks/%s", c->root, d->d_name) == -1 ||
		    give(p, pw, 0644, 0, e) == -1))
			rc = -1;
	closedir(dir);
	return rc == -1 ? -1 : share_ckpts(c, e);
}

#define KSM_DIR		"/sys/kernel/mm/ksm"
#define KSM_SLEEP_MS	20

static int
ksm_write(const char *name, long v, struct sp_err *e)
{
	char p[128], num[32];

	snprintf(p, sizeof p, KSM_DIR "/%s", name);
	snprintf(num, sizeof num, "%ld", v);
	return sp_path_write_text(p, num, e);
}

/*
 * SPACE_KSM=on: ksmd scans SPACE_KSM_RATE pages a second, and a page of
 * zeros becomes the kernel's zero page (use_zero_pages), which tells no
 * sandbox anything of another.  off: the node's KSM is left as it is, and
 * no VM's memory may be merged (sp_jail_spec).  design.md, "Memory".
 */
static int
ksm_apply(const struct sp_conf *c, struct sp_err *e)
{
	if (!c->ksm_on)
		return 0;
	if (access(KSM_DIR "/run", W_OK) == -1)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "SPACE_KSM is on, but "
		    KSM_DIR "/run cannot be written (%s)", strerror(errno));
	if (ksm_write("use_zero_pages", 1, e) == -1 ||
	    ksm_write("sleep_millisecs", KSM_SLEEP_MS, e) == -1 ||
	    ksm_write("pages_to_scan", c->ksm_pages_per_s * KSM_SLEEP_MS /
	    1000 > 0 ? c->ksm_pages_per_s * KSM_SLEEP_MS / 1000 : 1, e) == -1)
		return -1;
	return ksm_write("run", 1, e);
}

int
sp_node_init(const struct sp_conf *c, uint64_t loop_bytes,
    struct sp_node_info *info, struct sp_err *e)
{
	char p[SP_PATH_MAX];
	struct sp_virt *v = NULL;
	struct sp_db *db = NULL;
	size_t i;
	int lease, rc = -1;

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
	/* Simple quotas, for the backstop under each sandbox's disk
	 * (sp_jail_disk_limit). */
	if (sp_subvol_quota_enable(c->root, info->quota, e) == -1)
		goto out;
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
	if (sp_path_mkdirs(c->run, 0755, e) == -1 || jail_dirs(c, e) == -1 ||
	    space_account(e) == -1 || ksm_apply(c, e) == -1)
		goto out;
	if (sp_db_open(&db, c, e) == -1 || space_owns(c, e) == -1)
		goto out;
	/* Root's, before space-noded can serve: libvirt itself. */
	if (sp_virt_open(&v, sp_virt_uri_noded(c->libvirt_uri) ?
	    "qemu:///system" : c->libvirt_uri, e) == -1 ||
	    sp_virt_pick_type(v, c->virt_type, info->virt_type, e) == -1 ||
	    sp_virt_version(v, info->libvirt, sizeof info->libvirt, e) == -1)
		goto out;
	if ((lease = sp_node_lease_s(e)) == -1 ||
	    beat(c, db, info->virt_type, lease, NULL, e) == -1)
		goto out;
	info->kvm = strcmp(info->virt_type, "kvm") == 0;
	rc = 0;
out:
	sp_virt_close(v);
	sp_db_close(db);
	return rc;
}
