/*
 * sp_jail: each sandbox's QEMU in a jail of its own on the host.  A VM runs
 * as a uid and gid of its own, taken from SPACE_JAIL_UIDS (libvirt's static
 * DAC label; libvirt chowns the disk, kernel and initrd to it at each start
 * and back at the end); its sandbox directory lets only that gid through,
 * its files are 0600, its run directory (the sockets QEMU makes) is that
 * uid's alone.  So a QEMU taken over by its guest reaches neither another
 * sandbox's disk nor its sockets.  Its cgroup holds memory (guest memory
 * plus SPACE_MEM_OVERHEAD_MIB), pids, and optionally a CPU quota and an I/O
 * weight; seccomp and dropped capabilities are libvirt's (qemu.conf's
 * seccomp_sandbox, on by default).  design.md, "What an attacker must
 * break".
 *
 * A uid is a sandbox's while its VM is defined on this node: the first free
 * slot from a hash of its id, reserved as $SPACE_ROOT/jail/UID, a symlink
 * to the id (made atomically, so two creates never share one); it goes
 * when the VM is undefined (rm, suspend, a reconcile that takes a VM
 * apart), and reconcile takes back those of sandboxes gone without it.  A
 * VM defined before the jail (or with it off) keeps running as libvirt's
 * user: what its XML says decides (sp_jail_of_vm, sp_jail_of_image).
 */
#include <linux/posix_acl.h>
#include <linux/posix_acl_xattr.h>

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "sp_sandbox.h"

#define LIBVIRT_XATTR	"trusted.libvirt.security."
#define JAIL_GRACE_S	60	/* a reservation's age before gc may take it */
#define SP_MEM_OVERHEAD_KVM	256	/* MiB over the guest's memory */
#define SP_MEM_OVERHEAD_TCG	1280

int
sp_jail_on(const struct sp_conf *c)
{
	return c->lim.on;
}

static unsigned long
hash(const char *s)
{
	unsigned long h = 2166136261UL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619UL;
	return h & 0xffffffffUL;
}

static int
slot_path(const struct sp_conf *c, unsigned long uid, char *out, size_t n,
    struct sp_err *e)
{
	return sp_path_fmt(out, n, e, "%s/jail/%lu", c->root, uid);
}

/* 1 when slot uid is id's, 0 when it is free, 2 when another's; -1
 * (errno) when it cannot be read. */
static int
slot_owner(const char *path, const char *id)
{
	char buf[SP_NAME_MAX + 1];
	ssize_t n;

	if ((n = readlink(path, buf, sizeof buf - 1)) == -1)
		return errno == ENOENT ? 0 : errno == EINVAL ? 2 : -1;
	buf[n] = '\0';
	return strcmp(buf, id) == 0 ? 1 : 2;
}

int
sp_jail_get(struct sp_ctx *x, const char *id, struct sp_jail *j,
    struct sp_err *e)
{
	char dir[SP_PATH_MAX], p[SP_PATH_MAX];
	unsigned long first, n, start, uid, i;
	int free_at = -1, own;

	memset(j, 0, sizeof *j);
	if (!sp_jail_on(&x->conf))
		return 0;
	first = x->conf.lim.first;
	n = x->conf.lim.count;
	if (sp_path_fmt(dir, sizeof dir, e, "%s/jail", x->conf.root) == -1)
		return -1;
	if (mkdir(dir, 0700) == -1 && errno != EEXIST)
		return sp_err_sys(e, SP_E_IO, "mkdir %s", dir);
	start = hash(id) % n;
	for (;;) {
		/* Its own slot, wherever it is among the probes, comes first:
		 * one freed before it must not give it a second. */
		for (i = 0; i < SP_JAIL_PROBES; i++) {
			uid = first + (start + i) % n;
			if (slot_path(&x->conf, uid, p, sizeof p, e) == -1)
				return -1;
			if ((own = slot_owner(p, id)) == -1)
				return sp_err_sys(e, SP_E_IO, "read %s", p);
			if (own == 1) {
				j->uid = j->gid = (unsigned)uid;
				return 0;
			}
			if (own == 0 && free_at == -1)
				free_at = (int)i;
		}
		if (free_at == -1)
			return sp_err_set(e, SP_E_FULL, 1, "no jail uid free "
			    "for %s: %d slots from its hash in SPACE_JAIL_UIDS "
			    "are taken", id, SP_JAIL_PROBES);
		uid = first + (start + (unsigned long)free_at) % n;
		if (slot_path(&x->conf, uid, p, sizeof p, e) == -1)
			return -1;
		if (symlink(id, p) == 0) {
			j->uid = j->gid = (unsigned)uid;
			return 0;
		}
		if (errno != EEXIST)
			return sp_err_sys(e, SP_E_IO, "symlink %s", p);
		free_at = -1;	/* another took it first: look again */
	}
}

void
sp_jail_release(struct sp_ctx *x, const char *id)
{
	unsigned long first, n, start, i, uid;
	struct sp_err ignored;
	char p[SP_PATH_MAX];

	first = x->conf.lim.first;
	n = x->conf.lim.count;
	start = hash(id) % n;
	for (i = 0; i < SP_JAIL_PROBES; i++) {
		uid = first + (start + i) % n;
		if (slot_path(&x->conf, uid, p, sizeof p, &ignored) == 0 &&
		    slot_owner(p, id) == 1)
			unlink(p);
	}
}

int
sp_jail_gc(struct sp_ctx *x, int (*in_use)(struct sp_ctx *, const char *),
    int *freed, struct sp_err *e)
{
	char dir[SP_PATH_MAX], p[SP_PATH_MAX], id[SP_NAME_MAX + 1];
	time_t now = time(NULL);
	struct dirent *d;
	struct stat st;
	ssize_t n;
	DIR *dp;

	*freed = 0;
	if (sp_path_fmt(dir, sizeof dir, e, "%s/jail", x->conf.root) == -1)
		return -1;
	if ((dp = opendir(dir)) == NULL)
		return errno == ENOENT ? 0 : sp_err_sys(e, SP_E_IO, "%s", dir);
	while ((d = readdir(dp)) != NULL) {
		if (d->d_name[0] == '.' ||
		    sp_path_fmt(p, sizeof p, e, "%s/%s", dir, d->d_name) == -1)
			continue;
		/* A create reserves before it defines its VM: a young
		 * reservation may be one under way. */
		if (lstat(p, &st) == -1 || st.st_mtime > now - JAIL_GRACE_S ||
		    (n = readlink(p, id, sizeof id - 1)) == -1)
			continue;
		id[n] = '\0';
		if (!in_use(x, id) && unlink(p) == 0)
			(*freed)++;
	}
	closedir(dp);
	return 0;
}

/*
 * What every VM file of the sandbox directory gets: its owner's alone, and
 * none of the owner libvirt remembered when a VM last used it (the
 * trusted.libvirt.security.* attributes it counts users in).  A snapshot
 * copies them from a VM still running (a fork): libvirt would take the copy
 * as in use by that VM and refuse this one's uid.  No VM uses the file when
 * its sandbox is prepared for a start.  Opened without following a symlink,
 * and only a regular file is changed.
 */
static int
private_file(int dfd, const char *name, struct sp_err *e)
{
	char names[4096], *n;
	struct stat st;
	ssize_t len;
	int fd, rc = -1;

	if ((fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
	    O_CLOEXEC)) == -1)
		return errno == ENOENT ? 0 : sp_err_sys(e, errno == ELOOP ?
		    SP_E_BAD_INPUT : SP_E_IO, "open %s", name);
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "%s is not a regular file", name);
		goto out;
	}
	if (fchmod(fd, 0600) == -1) {
		sp_err_sys(e, SP_E_IO, "chmod %s", name);
		goto out;
	}
	if ((len = flistxattr(fd, names, sizeof names)) == -1) {
		rc = errno == ENOTSUP ? 0 : sp_err_sys(e, SP_E_IO,
		    "listxattr %s", name);
		goto out;
	}
	for (n = names; n < names + len; n += strlen(n) + 1)
		if (strncmp(n, LIBVIRT_XATTR, strlen(LIBVIRT_XATTR)) == 0 &&
		    fremovexattr(fd, n) == -1 && errno != ENODATA) {
			sp_err_sys(e, SP_E_IO, "removexattr %s %s", name, n);
			goto out;
		}
	rc = 0;
out:
	close(fd);
	return rc;
}

int
sp_jail_of_vm(struct sp_ctx *x, const char *dom, struct sp_jail *j,
    struct sp_err *e)
{
	char *xml = NULL;
	int rc;

	if (sp_virt_xml(x->virt, dom, &xml, e) == -1)
		return -1;
	rc = sp_vm_xml_jail(xml, dom, &j->uid, e);
	j->gid = j->uid;
	free(xml);
	return rc;
}

int
sp_jail_of_image(const char *path, struct sp_jail *j, struct sp_err *e)
{
	if (sp_ckpt_jail(path, &j->uid, e) == -1)
		return -1;
	j->gid = j->uid;
	return 0;
}

int
sp_jail_prepare(struct sp_ctx *x, const char *id, const char *dir,
    const char *run, struct sp_jail *j, struct sp_err *e)
{
	if (sp_jail_get(x, id, j, e) == -1)
		return -1;
	return sp_jail_dirs(x, j, dir, run, e);
}

int
sp_vm_files(const char *dir, struct sp_vm_files *f, struct sp_err *e)
{
	return sp_path_fmt(f->disk, sizeof f->disk, e, "%s/disk.raw", dir) ==
	    -1 || sp_path_fmt(f->kernel, sizeof f->kernel, e, "%s/vmlinuz",
	    dir) == -1 || sp_path_fmt(f->initrd, sizeof f->initrd, e,
	    "%s/initrd.img", dir) == -1 || sp_path_fmt(f->sav, sizeof f->sav,
	    e, "%s/mem.sav", dir) == -1 ? -1 : 0;
}

/* run_name made in run_parent (if not there) and opened, never through a
 * symlink. */
static int
run_dir(int run_parent, const char *run_name, mode_t mode, struct sp_err *e)
{
	int fd;

	if (mkdirat(run_parent, run_name, mode) == -1 && errno != EEXIST)
		return sp_err_sys(e, SP_E_IO, "mkdir %s", run_name);
	if ((fd = openat(run_parent, run_name, O_RDONLY | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC)) == -1)
		return sp_err_sys(e, errno == ELOOP || errno == ENOTDIR ?
		    SP_E_BAD_INPUT : SP_E_IO, "open %s", run_name);
	return fd;
}

/*
 * A VM's run directory as the group space (the unprivileged manager's)
 * needs it, when there is such a group: space may reach a socket there by
 * its name (search only: no listing, no creating, so it cannot plant a
 * path where libvirt, as root, makes and labels a socket), and each socket
 * made there is space's to connect to (the default ACL, which the socket
 * keeps when libvirt chowns it to the VM's uid).  Nobody else but the
 * owner and owner_group (its perms).  On a filesystem without ACLs it is
 * left to its owner (and root) as before.  Written in the kernel's own ACL
 * format (uapi posix_acl_xattr.h) rather than with libacl, so a short
 * command loads no library more (tests/linking.bats).
 */
static int
space_acl(int rfd, int owner_group, struct sp_err *e)
{
	struct {
		struct posix_acl_xattr_header h;
		struct posix_acl_xattr_entry a[5];
	} acl;
	gid_t gid;
	int i, mask;

	if (!sp_space_ids(NULL, &gid))
		return 0;
	for (i = 0; i < 2; i++) {
		/* Access: search for space; default: read and write. */
		mask = owner_group | (i == 0 ? ACL_EXECUTE : ACL_READ | ACL_WRITE);
		acl.h.a_version = htole32(POSIX_ACL_XATTR_VERSION);
		sp_acl_entry(&acl.a[0], ACL_USER_OBJ, 07, ACL_UNDEFINED_ID);
		sp_acl_entry(&acl.a[1], ACL_GROUP_OBJ, owner_group, ACL_UNDEFINED_ID);
		sp_acl_entry(&acl.a[2], ACL_GROUP, i == 0 ? ACL_EXECUTE :
		    ACL_READ | ACL_WRITE, gid);
		sp_acl_entry(&acl.a[3], ACL_MASK, mask, ACL_UNDEFINED_ID);
		sp_acl_entry(&acl.a[4], ACL_OTHER, 0, ACL_UNDEFINED_ID);
		/* A filesystem without ACLs: as before, root's alone. */
		if (fsetxattr(rfd, i == 0 ? "system.posix_acl_access" :
		    "system.posix_acl_default", &acl, sizeof acl, 0) == -1)
			return errno == EOPNOTSUPP ? 0 : sp_err_sys(e, SP_E_IO,
			    "the ACL of a VM's run directory");
	}
	return 0;
}

/* fd's access ACL: its mode's entries, and perm for the group gid. */
static int
group_acl(int fd, gid_t gid, int perm)
{
	struct {
		struct posix_acl_xattr_header h;
		struct posix_acl_xattr_entry a[5];
	} acl;
	struct stat st;

	if (fstat(fd, &st) == -1)
		return -1;
	acl.h.a_version = htole32(POSIX_ACL_XATTR_VERSION);
	sp_acl_entry(&acl.a[0], ACL_USER_OBJ, (st.st_mode >> 6) & 07,
	    ACL_UNDEFINED_ID);
	sp_acl_entry(&acl.a[1], ACL_GROUP_OBJ, (st.st_mode >> 3) & 07,
	    ACL_UNDEFINED_ID);
	sp_acl_entry(&acl.a[2], ACL_GROUP, perm, gid);
	sp_acl_entry(&acl.a[3], ACL_MASK, ((st.st_mode >> 3) & 07) | perm,
	    ACL_UNDEFINED_ID);
	sp_acl_entry(&acl.a[4], ACL_OTHER, st.st_mode & 07, ACL_UNDEFINED_ID);
	return fsetxattr(fd, "system.posix_acl_access", &acl, sizeof acl, 0);
}

int
sp_jail_share_ckpt(const char *dir, struct sp_err *e)
{
	struct sp_err ignored;
	int dfd, fd = -1, ro = 0, rc = -1;
	gid_t gid;

	if (!sp_space_ids(NULL, &gid))
		return 0;
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_IO, "open %s", dir);
	if ((fd = openat(dfd, "mem.sav", O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) ==
	    -1) {
		sp_err_sys(e, SP_E_IO, "open %s/mem.sav", dir);
		goto out;
	}
	/* Shared already (an ACL of its own): nothing to do. */
	if (fgetxattr(fd, "system.posix_acl_access", NULL, 0) > 0) {
		rc = 0;
		goto out;
	}
	/* Read-only once made (a checkpoint from before the group): open for
	 * the change, then closed again. */
	if ((ro = sp_subvol_readonly(dir)) && sp_subvol_set_readonly(dir, 0,
	    e) == -1) {
		ro = 0;
		goto out;
	}
	if ((group_acl(dfd, gid, ACL_EXECUTE) == -1 ||
	    group_acl(fd, gid, ACL_READ) == -1) && errno != EOPNOTSUPP)
		sp_err_sys(e, SP_E_IO, "the ACL of %s", dir);
	else
		rc = 0;
out:
	if (fd != -1)
		close(fd);
	close(dfd);
	if (ro && sp_subvol_set_readonly(dir, 1, rc == 0 ? e : &ignored) == -1)
		rc = -1;
	return rc;
}

/*
 * The channel ports' lock files, root's and readable (0644; the group
 * space reads them through the directory's default ACL), made in a jailed
 * VM's run directory where space may only search (sp_chan.c's lock_port).
 */
static int
port_locks(int rfd, struct sp_err *e)
{
	char name[32];
	int i, fd;

	for (i = 0; i < SP_PORTS_MAX; i++) {
		snprintf(name, sizeof name, "space.%d.lock", i);
		if ((fd = openat(rfd, name, O_RDONLY | O_CREAT | O_CLOEXEC |
		    O_NOFOLLOW | O_NONBLOCK, 0644)) == -1)
			return sp_err_sys(e, SP_E_IO, "make %s", name);
		if (fchmod(fd, 0644) == -1) {
			close(fd);
			return sp_err_sys(e, SP_E_IO, "chmod %s", name);
		}
		close(fd);
	}
	return 0;
}

int
sp_jail_dirs_at(const struct sp_jail *j, int dfd, int run_parent,
    const char *run_name, struct sp_err *e)
{
	static const char *const files[] = {
		"disk.raw", "vmlinuz", "initrd.img", "mem.sav",
	};
	gid_t qemu_gid;
	size_t i;
	int rfd, qemu, rc = -1;

	if (j->uid == 0) {
		/*
		 * No jail: the run dir holds the channel sockets QEMU creates
		 * as libvirt's unprivileged user, so that user's group may
		 * write there and nobody else; the directory and files are
		 * as before the jail.
		 */
		if ((rfd = run_dir(run_parent, run_name, 0770, e)) == -1)
			return -1;
		qemu = sp_group_id("libvirt-qemu", &qemu_gid);
		if ((qemu && fchown(rfd, 0, qemu_gid) == -1) ||
		    fchmod(rfd, qemu ? 0770 : 0777) == -1)
			sp_err_sys(e, SP_E_IO, "chown %s", run_name);
		else if (qemu && space_acl(rfd, 07, e) == -1)
			;
		else if (fchown(dfd, 0, 0) == -1 || fchmod(dfd, 0755) == -1)
			sp_err_sys(e, SP_E_IO, "chown the sandbox's directory");
		else
			rc = 0;
		close(rfd);
		return rc;
	}
	if ((rfd = run_dir(run_parent, run_name, 0700, e)) == -1)
		return -1;
	if (fchown(rfd, j->uid, j->gid) == -1 || fchmod(rfd, 0700) == -1) {
		sp_err_sys(e, SP_E_IO, "chown %s", run_name);
		close(rfd);
		return -1;
	}
	rc = space_acl(rfd, 0, e) == -1 ? -1 : port_locks(rfd, e);
	close(rfd);
	if (rc == -1)
		return -1;
	rc = -1;
	/* QEMU opens its files by path: its gid goes through the
	 * directory, nobody else's (no listing: 0710). */
	if (fchown(dfd, 0, j->gid) == -1 || fchmod(dfd, 0710) == -1)
		return sp_err_sys(e, SP_E_IO, "chown the sandbox's directory");
	for (i = 0; i < sizeof files / sizeof files[0]; i++)
		if (private_file(dfd, files[i], e) == -1)
			return -1;
	return 0;
}

/* The socket of space-noded when x reaches libvirt through it, else NULL. */
static const char *
via_noded(struct sp_ctx *x)
{
	struct sp_err ignored;

	if (sp_ctx_virt(x, &ignored) == -1)
		return NULL;
	return sp_virt_noded_sock(x->virt);
}

int
sp_jail_run_remove(struct sp_ctx *x, const char *id, const char *run,
    struct sp_err *e)
{
	char dom[SP_ID_LEN + 4];
	const char *sock;

	sp_pod_forget(x->conf.run, id);
	if ((sock = via_noded(x)) == NULL)
		return sp_path_remove_tree(run, e);
	sp_sandbox_domain(id, dom);
	return sp_virt_noded_call(sock, json_pack("{s:s, s:s}", "op",
	    "vm-release", "name", dom), NULL, e);
}

int
sp_jail_dirs(struct sp_ctx *x, const struct sp_jail *j, const char *dir,
    const char *run, struct sp_err *e)
{
	char parent[SP_PATH_MAX];
	const char *sock, *name = strrchr(run, '/');
	json_t *req;
	int dfd, pfd, rc;

	if (name == NULL || name == run)
		return sp_err_set(e, SP_E_INTERNAL, 0, "run dir '%s'", run);
	if ((sock = via_noded(x)) != NULL) {
		req = json_pack("{s:s, s:s+, s:s, s:I}", "op", "vm-prepare",
		    "name", "sp-", name + 1, "dir", dir, "uid",
		    (json_int_t)j->uid);
		return sp_virt_noded_call(sock, req, NULL, e);
	}
	snprintf(parent, sizeof parent, "%.*s", (int)(name - run), run);
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_IO, "open %s", dir);
	if ((pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		close(dfd);
		return sp_err_sys(e, SP_E_IO, "open %s", parent);
	}
	rc = sp_jail_dirs_at(j, dfd, pfd, name + 1, e);
	close(dfd);
	close(pfd);
	return rc;
}

/* 1 when this host's block cgroup takes a weight (it needs the BFQ
 * scheduler under cgroup v1). */
static int
io_weight_supported(void)
{
	static const char *const v1[] = { "blkio.weight", "blkio.bfq.weight" };
	static const char *const v2[] = {
		"machine.slice/io.weight", "machine.slice/io.bfq.weight",
		"machine/io.weight", "machine/io.bfq.weight",
	};
	char mount[SP_PATH_MAX], p[SP_PATH_MAX];
	const char *const *files;
	size_t i, n;
	int is_v2;

	if (sp_cgroup_mount("blkio", mount, sizeof mount, &is_v2) == -1)
		return 0;
	files = is_v2 ? v2 : v1;
	n = is_v2 ? sizeof v2 / sizeof v2[0] : sizeof v1 / sizeof v1[0];
	for (i = 0; i < n; i++)
		if (snprintf(p, sizeof p, "%s/%s", mount, files[i]) <
		    (int)sizeof p && access(p, F_OK) == 0)
			return 1;
	return 0;
}

int
sp_jail_disk_limit(struct sp_ctx *x, const char *dir, int64_t disk_bytes,
    struct sp_err *e)
{
	char disk[SP_PATH_MAX];
	struct stat st;
	const char *sock;
	uint64_t bytes;

	if (sp_path_fmt(disk, sizeof disk, e, "%s/disk.raw", dir) == -1)
		return -1;
	if (stat(disk, &st) == -1)
		return sp_err_sys(e, SP_E_IO, "%s", disk);
	if (disk_bytes < st.st_size)
		disk_bytes = st.st_size;
	bytes = 2 * (uint64_t)disk_bytes + SP_DISK_LIMIT_SLACK;
	if ((sock = via_noded(x)) != NULL)
		return sp_virt_noded_call(sock, json_pack("{s:s, s:s, s:I}",
		    "op", "disk-limit", "dir", dir, "bytes", (json_int_t)bytes),
		    NULL, e);
	return sp_subvol_limit(dir, bytes, e);
}

int
sp_sandbox_restore_xml(struct sp_ctx *x, const char *id, const char *dir,
    const struct sp_ckpt_info *ci, int cpu_pct, const struct sp_jail *jail,
    char **xml, struct sp_err *e)
{
	char run[SP_PATH_MAX], dom[SP_ID_LEN + 4], sav[SP_PATH_MAX];
	struct sp_volume_plug plugs[SP_VOLUMES_MAX];
	struct sp_vm_volume vols[SP_VOLUMES_MAX];
	struct sp_vm_files f;
	struct sp_vm_spec spec;
	struct sp_vm_layout l;
	int nvols;

	sp_sandbox_domain(id, dom);
	if (sp_sandbox_run_dir(x, id, run, sizeof run, e) == -1 ||
	    sp_vm_files(dir, &f, e) == -1 ||
	    sp_path_fmt(sav, sizeof sav, e, "%s/mem.sav", dir) == -1 ||
	    sp_ckpt_layout(sav, &l, e) == -1)
		return -1;
	spec = (struct sp_vm_spec){
		.name = dom, .uuid = ci->uuid, .memory_mib = ci->memory_mib,
		.vcpus = ci->vcpus, .kernel = f.kernel, .initrd = f.initrd,
		.cmdline = NULL, .disk = f.disk, .chan_dir = run,
		.nports = l.nports, .virt_type = x->virt_type,
		.shared_vectors = l.shared_vectors, .no_egress = !l.egress,
		.balloon = l.balloon,
		.cpu_quota_pct = cpu_pct,
	};
	/* The volumes its memory has plugged: mounted in it again. */
	if (sp_volume_restore(x, id, dir, jail->uid, 0, plugs, SP_VOLUMES_MAX,
	    &nvols, e) == -1)
		return -1;
	sp_volume_spec(&spec, plugs, nvols, vols);
	if (sp_jail_spec(x, jail, &spec, e) == -1)
		return -1;
	return sp_virt_domain_xml(&spec, xml, e);
}

int
sp_jail_spec(struct sp_ctx *x, const struct sp_jail *j, struct sp_vm_spec *s,
    struct sp_err *e)
{
	s->jail_uid = j->uid;
	s->jail_gid = j->gid;
	s->mergeable = x->conf.ksm_on;
	if (!sp_jail_on(&x->conf))
		return 0;
	/* A sandbox's own quota (--cpu-quota), else the node's. */
	if (s->cpu_quota_pct == 0)
		s->cpu_quota_pct = (int)x->conf.lim.cpu_quota_pct;
	/* The probe reads mountinfo: only when a weight is asked for. */
	s->io_weight = x->conf.lim.io_weight > 0 && io_weight_supported() ?
	    (int)x->conf.lim.io_weight : 0;
	(void)e;
	return 0;
}

/* SPACE_MEM_OVERHEAD_MIB: what QEMU may hold besides the guest's memory.
 * TCG keeps up to 1 GiB of translated code (QEMU's default tb-size on a
 * host of 8 GiB or more). */
static long
mem_overhead(const struct sp_ctx *x)
{
	if (x->conf.lim.mem_overhead_mib >= 0)
		return x->conf.lim.mem_overhead_mib;
	return strcmp(x->virt_type, "kvm") == 0 ? SP_MEM_OVERHEAD_KVM :
	    SP_MEM_OVERHEAD_TCG;
}

/* QEMU's pid, from libvirt's pid file: 0 when it has none. */
static long
qemu_pid(const char *dom)
{
	char p[SP_PATH_MAX], buf[32];
	FILE *f;
	long pid = 0;

	snprintf(p, sizeof p, "/run/libvirt/qemu/%s.pid", dom);
	if ((f = fopen(p, "re")) == NULL)
		return 0;
	if (fgets(buf, sizeof buf, f) != NULL)
		pid = strtol(buf, NULL, 10);
	fclose(f);
	return pid > 1 ? pid : 0;
}

/* Writes value to file in the cgroup directory dir. */
static int
cg_write(const char *dir, const char *file, unsigned long long value,
    struct sp_err *e)
{
	char p[SP_PATH_MAX], num[32];

	snprintf(num, sizeof num, "%llu", value);
	if (sp_path_fmt(p, sizeof p, e, "%s/%s", dir, file) == -1)
		return -1;
	return sp_path_write_text(p, num, e);
}

/* Limits the VM whose QEMU is pid, in its memory cgroup cg: under v2 one
 * directory holds both limits; under v1 libvirt leaves the pids controller
 * alone, so QEMU gets a pids cgroup of the same path. */
static int
limit(long pid, const struct sp_cgroup *cg, unsigned long long mem,
    long pids, struct sp_err *e)
{
	char dir[SP_PATH_MAX], mount[SP_PATH_MAX];
	int v2, tries;

	if (sp_path_fmt(dir, sizeof dir, e, "%s%s", cg->mount, cg->path) == -1 ||
	    (mem > 0 && cg_write(dir, cg->v2 ? "memory.max" :
	    "memory.limit_in_bytes", mem, e) == -1))
		return -1;
	if (pids == 0)
		return 0;
	if (cg->v2)
		return cg_write(dir, "pids.max", (unsigned long long)pids, e);
	/* A stale one of the same name (an ended VM's, not yet swept by
	 * reconcile) is taken as it is.  Until QEMU is in it, it is empty, and
	 * a reconcile of this or another node on the host may sweep it
	 * (sp_jail_pids_sweep): then it is made again. */
	if (sp_cgroup_mount("pids", mount, sizeof mount, &v2) == -1 || v2)
		return sp_err_set(e, SP_E_IO, 0, "no pids cgroup hierarchy "
		    "for %s", cg->path);
	if (sp_path_fmt(dir, sizeof dir, e, "%s%s", mount, cg->path) == -1)
		return -1;
	for (tries = 1;; tries++) {
		if (sp_path_mkdirs(dir, 0755, e) == 0 &&
		    cg_write(dir, "pids.max", (unsigned long long)pids, e) == 0 &&
		    cg_write(dir, "cgroup.procs", (unsigned long long)pid, e) == 0)
			return 0;
		/* sp_err_sys keeps errno as the failed call left it. */
		if (errno != ENOENT || tries == 3)
			return -1;
	}
}

int
sp_jail_started(struct sp_ctx *x, const char *dom, struct sp_err *e)
{
	unsigned long long kib, mem = 0;
	const char *sock;
	long pids, overhead;

	if (!sp_jail_on(&x->conf))
		return 0;
	pids = x->conf.lim.pids_max;
	overhead = mem_overhead(x);
	if (overhead > 0) {
		if (sp_virt_memory_kib(x->virt, dom, &kib, e) == -1)
			return -1;
		mem = kib * 1024 + (unsigned long long)overhead * 1048576;
	}
	/* Even with neither limit: the step gives space the VM's CPU
	 * weight file (sp_boost_give). */
	if ((sock = via_noded(x)) != NULL)
		return sp_virt_noded_call(sock, json_pack("{s:s, s:s, s:I, s:I}",
		    "op", "vm-limit", "name", dom, "bytes", (json_int_t)mem,
		    "pids", (json_int_t)pids), NULL, e);
	return sp_jail_limit(dom, mem, pids, e);
}

int
sp_jail_limit(const char *dom, unsigned long long mem, long pids,
    struct sp_err *e)
{
	struct sp_cgroup cg;
	struct sp_err ignored;
	long pid;

	if ((pid = qemu_pid(dom)) == 0)
		return sp_err_set(e, SP_E_NOT_RUNNING, 1, "%s has no QEMU to "
		    "limit (no /run/libvirt/qemu/%s.pid)", dom, dom);
	/* dom is sp-ID. */
	if (sp_cgroup_of((pid_t)pid, "memory", dom + 3, &cg) == -1)
		return sp_err_set(e, SP_E_IO, 0, "no memory cgroup of %s", dom);
	if (limit(pid, &cg, mem, pids, e) == -1)
		return -1;
	/* Best effort, as the boost is: a claim without it is not boosted. */
	(void)sp_boost_give((pid_t)pid, dom + 3, &ignored);
	return 0;
}

int
sp_jail_pids_tidy(struct sp_ctx *x, struct sp_err *e)
{
	const char *sock;

	if ((sock = via_noded(x)) != NULL)
		return sp_virt_noded_call(sock, json_pack("{s:s}", "op",
		    "pids-sweep"), NULL, e);
	sp_jail_pids_sweep();
	return 0;
}

void
sp_jail_pids_sweep(void)
{
	char mount[SP_PATH_MAX], dir[SP_PATH_MAX], p[SP_PATH_MAX];
	struct dirent *d;
	DIR *dp;
	int v2;

	/* The v1 pids cgroups of VMs that ended: rmdir fails on one in use. */
	if (sp_cgroup_mount("pids", mount, sizeof mount, &v2) == -1 || v2 ||
	    snprintf(dir, sizeof dir, "%s/machine", mount) >= (int)sizeof dir ||
	    (dp = opendir(dir)) == NULL)
		return;
	while ((d = readdir(dp)) != NULL)
		if (strncmp(d->d_name, "qemu-", 5) == 0 &&
		    snprintf(p, sizeof p, "%s/%s", dir, d->d_name) <
		    (int)sizeof p)
			rmdir(p);
	closedir(dp);
}
