/*
 * sp_noded_virt: space-noded's libvirt operations.  libvirt runs QEMU as any
 * uid and opens, as root, every file a domain XML names: a client that could
 * hand libvirt an XML of its own would hold the node.  So space-noded takes
 * only the very XML space writes (sp_virt_xml_spec reads its parts back and
 * writes them again: any other text is refused), and of those parts only
 * what a sandbox of this node may have:
 *   - the domain sp-<id>, its channel directory $SPACE_RUN/<id>;
 *   - its disk.raw, vmlinuz and initrd.img side by side in one directory
 *     beneath SPACE_ROOT, each a regular file with one link, reached with
 *     no symlink on the way (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
 *   - a jail uid from SPACE_JAIL_UIDS that $SPACE_ROOT/jail/<uid> gives to
 *     that id, or none (libvirt's own user for QEMU);
 *   - with a jail only, volumes' disks, each volumes/<volume>/disk.raw
 *     beneath the root, not relabelled (volume_disk), as vm-plug plugs
 *     them.
 * A save image (mem.sav) is written and read in such a directory too (one
 * the client made, a full checkpoint's snapshot, is made root's first), and
 * re-identified here before a restore, as the client may not write it.  A
 * VM's host side is set up the same way: its directory (beneath the root)
 * and run directory ($SPACE_RUN/<id>, made here) owned by its jail, each
 * reached with no symlink; its cgroup's limits; its subvolume's qgroup
 * limit.  What space-noded guards is the host: the unprivileged manager
 * runs every sandbox, and may ask for any of them what it could do itself.
 */
#include <sys/stat.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "sp_sandbox.h"

/* The part of abs beneath the root, when abs is a well-formed path there
 * (sp_noded_path_check); else NULL with e set. */
static const char *
rel_of(const struct sp_noded_vm *c, const char *what, const char *abs,
    struct sp_err *e)
{
	const char *rel = sp_path_beneath(c->conf->root, abs);

	if (rel == NULL) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "%s '%.64s' is not beneath %s",
		    what, abs, c->conf->root);
		return NULL;
	}
	return sp_noded_path_check(what, rel, 0, e) == -1 ? NULL : rel;
}

/* dir: the directory of the VM file at abs, AREA/NAME[/...] beneath the
 * root, when abs is one named base. */
static int
file_dir(const struct sp_noded_vm *c, const char *what, const char *abs,
    const char *base, char dir[SP_NODED_PATH_MAX + 1], struct sp_err *e)
{
	const char *rel, *slash;

	if ((rel = rel_of(c, what, abs, e)) == NULL)
		return -1;
	if ((slash = strrchr(rel, '/')) == NULL || strcmp(slash + 1, base) != 0 ||
	    strchr(rel, '/') == slash)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s '%.64s' is not a "
		    "sandbox's %s", what, abs, base);
	snprintf(dir, SP_NODED_PATH_MAX + 1, "%.*s", (int)(slash - rel), rel);
	return 0;
}

/*
 * A VM file at abs (named base, in dir: file_dir's) as libvirt will find
 * it: AREA/NAME/base beneath the root (the file of a subvolume, not an
 * area's), with no symlink on the way and only root able to change the
 * directories there (sp_noded_root_only), a regular file with one link
 * (not another file's hard link).  must 0: absent is fine too.
 */
static int
vm_file_in(const struct sp_noded_vm *c, const char *what, const char *abs,
    const char *dir, const char *base, int must, struct sp_err *e)
{
	struct stat st;
	int fd;

	if (sp_noded_root_only(c->root_fd, c->conf->root, what, abs, dir,
	    e) == -1)
		return -1;
	if ((fd = sp_noded_open_beneath(c->root_fd, dir, O_PATH | O_DIRECTORY)) ==
	    -1)
		return sp_err_sys(e, errno == ENOENT ? SP_E_NOT_FOUND :
		    SP_E_BAD_INPUT, "%s: the directory of '%.64s'", what, abs);
	if (fstatat(fd, base, &st, AT_SYMLINK_NOFOLLOW) == -1) {
		close(fd);
		if (errno == ENOENT && !must)
			return 0;
		return sp_err_sys(e, errno == ENOENT ? SP_E_NOT_FOUND : SP_E_IO,
		    "%s '%.64s'", what, abs);
	}
	close(fd);
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s '%.64s' is not a "
		    "regular file of one link", what, abs);
	return 0;
}

/* vm_file_in, the directory worked out from abs. */
static int
vm_file(const struct sp_noded_vm *c, const char *what, const char *abs,
    const char *base, int must, struct sp_err *e)
{
	char dir[SP_NODED_PATH_MAX + 1];

	return file_dir(c, what, abs, base, dir, e) == -1 ? -1 :
	    vm_file_in(c, what, abs, dir, base, must, e);
}

/*
 * The directory r's save image goes in, when r's client owns it (a full
 * checkpoint's snapshot, just made and filled by the unprivileged
 * manager): root's before libvirt writes there, so nothing in it changes
 * under libvirt or under a later restore (root:gid 0750, as a read-only
 * snapshot made for that client).  A mem.sav already there is not one
 * libvirt wrote: refused.  What the client does not own is left to
 * vm_file_in.
 */
static int
take_dir(const struct sp_noded_vm *c, const struct sp_noded_req *r,
    const char *dir, struct sp_err *e)
{
	struct stat st;
	int fd, rc = -1;

	if (r->peer_uid == 0)
		return 0;
	if ((fd = sp_noded_open_beneath(c->root_fd, dir, O_RDONLY |
	    O_DIRECTORY)) == -1)
		return sp_err_sys(e, errno == ENOENT ? SP_E_NOT_FOUND :
		    SP_E_BAD_INPUT, "file: the directory of '%.64s'", r->file);
	if (fstat(fd, &st) == -1)
		sp_err_sys(e, SP_E_IO, "%s", dir);
	else if (st.st_uid != r->peer_uid)
		rc = 0;
	else if (fstatat(fd, "mem.sav", &st, AT_SYMLINK_NOFOLLOW) == 0 ||
	    errno != ENOENT)
		sp_err_set(e, SP_E_BAD_INPUT, 0, "file '%.64s': a save image "
		    "is there already", r->file);
	else if (fchown(fd, 0, r->peer_gid) == -1 || fchmod(fd, 0750) == -1)
		sp_err_sys(e, SP_E_IO, "chown %s", dir);
	else
		rc = 0;
	close(fd);
	return rc;
}

/*
 * r's VM saved (stopped, or left as it was for a memory save) into r's
 * file, in a directory taken first when the client made it (take_dir).
 * The image is given to the client's group to read (root:gid 0640), as
 * the manager reads its header back (its jail, its layout).
 */
static int
save(const struct sp_noded_vm *c, struct sp_virt *v,
    const struct sp_noded_req *r, struct sp_err *e)
{
	char dir[SP_NODED_PATH_MAX + 1], file[SP_NODED_PATH_MAX + 16];
	int fd, rc;

	if (file_dir(c, "file", r->file, "mem.sav", dir, e) == -1 ||
	    take_dir(c, r, dir, e) == -1 ||
	    vm_file_in(c, "file", r->file, dir, "mem.sav", 0, e) == -1)
		return -1;
	rc = r->op == SP_NODED_VM_SAVE ? sp_virt_save(v, r->name, r->file, e) :
	    sp_virt_save_memory(v, r->name, r->file, e);
	if (rc == -1 || r->peer_uid == 0)
		return rc;
	snprintf(file, sizeof file, "%s/mem.sav", dir);
	if ((fd = sp_noded_open_beneath(c->root_fd, file, O_RDONLY |
	    O_NOFOLLOW)) == -1)
		return sp_err_sys(e, SP_E_IO, "open %s", file);
	if (fchown(fd, 0, r->peer_gid) == -1 || fchmod(fd, 0640) == -1)
		rc = sp_err_sys(e, SP_E_IO, "chown %s", file);
	close(fd);
	return rc;
}

/* 1 when uid is id's jail: in the node's range and reserved for it. */
static int
jail_of(const struct sp_noded_vm *c, unsigned uid, const char *id)
{
	char slot[32], to[SP_NAME_MAX + 1];
	ssize_t n;
	int fd;

	if (uid < c->conf->lim.first || uid - c->conf->lim.first >=
	    c->conf->lim.count)
		return 0;
	if ((fd = sp_noded_open_beneath(c->root_fd, "jail", O_PATH |
	    O_DIRECTORY)) == -1)
		return 0;
	snprintf(slot, sizeof slot, "%u", uid);
	n = readlinkat(fd, slot, to, sizeof to - 1);
	close(fd);
	if (n <= 0)
		return 0;
	to[n] = '\0';
	return strcmp(to, id) == 0;
}

/*
 * abs (SP_PATH_MAX bytes): the disk of volume id, volumes/ID/disk.raw
 * beneath the root, a regular file of one link reached with no symlink.
 * The volume's directory is space's (its subvolume's maker's), so what is
 * at that path when QEMU opens it is space's to choose: a volume goes only
 * into a VM with a jail, in XML that tells libvirt not to relabel it, and
 * QEMU opens it as the VM's uid, with what the volume's ACL gives that
 * uid.  A VM without a jail would have libvirt chown the file for its
 * shared QEMU user: root plugs those.
 */
static int
volume_disk(const struct sp_noded_vm *c, const char *id, char *abs,
    struct sp_err *e)
{
	char rel[SP_NODED_PATH_MAX + 1];
	struct stat st;
	int fd, rc;

	if (!sp_id_valid(id))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "volume '%.32s' is not "
		    "an id", id);
	snprintf(rel, sizeof rel, "volumes/%s/disk.raw", id);
	if (sp_path_fmt(abs, SP_PATH_MAX, e, "%s/%s", c->conf->root, rel) == -1)
		return -1;
	if ((fd = sp_noded_open_beneath(c->root_fd, rel, O_PATH)) == -1)
		return sp_err_sys(e, errno == ENOENT ? SP_E_NOT_FOUND :
		    SP_E_BAD_INPUT, "volume %s's disk", id);
	rc = fstat(fd, &st);
	close(fd);
	if (rc == -1 || !S_ISREG(st.st_mode) || st.st_nlink != 1)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "volume %s's disk is not "
		    "a regular file of one link", id);
	return 0;
}

/* xml is space's, for a sandbox of this node (the file's comment); its
 * domain's name and UUID to dom and uuid (may be NULL). */
static int
check_xml(const struct sp_noded_vm *c, const char *xml, const char *name,
    char dom[SP_ID_LEN + 4], char uuid[37], struct sp_err *e)
{
	struct sp_vm_spec_text *t;
	struct sp_vm_spec s;
	char run[SP_PATH_MAX], dir[SP_PATH_MAX], abs[SP_PATH_MAX];
	const char *id;
	int i, rc = -1;

	if ((t = malloc(sizeof *t)) == NULL)
		return sp_err_sys(e, SP_E_NOMEM, "xml");
	if (sp_virt_xml_spec(xml, &s, t, e) == -1)
		goto out;
	id = s.name + 3;
	if (strncmp(s.name, "sp-", 3) != 0 || !sp_id_valid(id)) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "domain '%.64s' is not sp-<id>",
		    s.name);
		goto out;
	}
	if (name != NULL && strcmp(name, s.name) != 0) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "the XML is %s's, not %s's",
		    s.name, name);
		goto out;
	}
	if (sp_path_fmt(run, sizeof run, e, "%s/%s", c->conf->run, id) == -1)
		goto out;
	if (strcmp(s.chan_dir, run) != 0) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "%s's channels are in %s, not "
		    "'%.64s'", s.name, run, s.chan_dir);
		goto out;
	}
	snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(s.disk, '/') - s.disk),
	    s.disk);
	if (vm_file(c, "disk", s.disk, "disk.raw", 1, e) == -1 ||
	    vm_file(c, "kernel", s.kernel, "vmlinuz", 1, e) == -1 ||
	    vm_file(c, "initrd", s.initrd, "initrd.img", 1, e) == -1)
		goto out;
	if (strncmp(s.kernel, dir, strlen(dir)) != 0 ||
	    strcmp(s.kernel + strlen(dir), "/vmlinuz") != 0 ||
	    strncmp(s.initrd, dir, strlen(dir)) != 0 ||
	    strcmp(s.initrd + strlen(dir), "/initrd.img") != 0) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "%s's disk, kernel and initrd "
		    "are not side by side", s.name);
		goto out;
	}
	if (s.jail_uid != 0 && (s.jail_gid != s.jail_uid ||
	    !jail_of(c, s.jail_uid, id))) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "uid %u is not %s's jail",
		    s.jail_uid, s.name);
		goto out;
	}
	/* Volumes plugged when it was saved: each its own disk, in a VM
	 * with a jail (volume_disk). */
	for (i = 0; i < s.nvolumes; i++) {
		if (s.jail_uid == 0) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "%s has no jail: root "
			    "restores it with its volumes", s.name);
			goto out;
		}
		if (volume_disk(c, s.volumes[i].serial, abs, e) == -1)
			goto out;
		if (strcmp(abs, s.volumes[i].disk) != 0) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "volume %s's disk is "
			    "%s, not '%.64s'", s.volumes[i].serial, abs,
			    s.volumes[i].disk);
			goto out;
		}
	}
	if (dom != NULL)
		snprintf(dom, SP_ID_LEN + 4, "%s", s.name);
	if (uuid != NULL)
		snprintf(uuid, 37, "%s", t->uuid);
	rc = 0;
out:
	free(t);
	return rc;
}

/* A sandbox's directory at abs, opened beneath the root (no symlink on
 * the way). */
static int
vm_dir(const struct sp_noded_vm *c, const char *abs, struct sp_err *e)
{
	const char *rel;
	int fd;

	if ((rel = rel_of(c, "dir", abs, e)) == NULL)
		return -1;
	if ((fd = sp_noded_open_beneath(c->root_fd, rel, O_RDONLY |
	    O_DIRECTORY)) == -1)
		return sp_err_sys(e, errno == ENOENT ? SP_E_NOT_FOUND :
		    SP_E_BAD_INPUT, "dir '%.64s'", abs);
	return fd;
}

/* The jail directories of r's VM (sp_jail_dirs_at). */
static int
prepare(const struct sp_noded_vm *c, const struct sp_noded_req *r,
    struct sp_err *e)
{
	struct sp_jail j = { .uid = r->uid, .gid = r->uid };
	const char *id = r->name + 3;
	int dfd, rfd, rc;

	if (r->uid != 0 && !jail_of(c, r->uid, id))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "uid %u is not %s's "
		    "jail", r->uid, r->name);
	if ((dfd = vm_dir(c, r->dir, e)) == -1)
		return -1;
	if ((rfd = open(c->conf->run, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) ==
	    -1) {
		close(dfd);
		return sp_err_sys(e, SP_E_IO, "%s", c->conf->run);
	}
	rc = sp_jail_dirs_at(&j, dfd, rfd, id, e);
	close(rfd);
	close(dfd);
	return rc;
}

/*
 * The run directory of r's VM removed, as its sandbox's removal and a
 * restore elsewhere leave it: its jail's, in SPACE_RUN which is root's, so
 * the unprivileged side cannot.  Not while libvirt runs the VM (bad-state):
 * its sockets are there.
 */
static int
release(const struct sp_noded_vm *c, struct sp_virt *v,
    const struct sp_noded_req *r, struct sp_err *e)
{
	char run[SP_PATH_MAX], state[16];

	if (sp_virt_state(v, r->name, state, e) == -1)
		return -1;
	if (strcmp(state, "absent") != 0 && strcmp(state, "shutoff") != 0)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "%s is %s: its run "
		    "directory stays", r->name, state);
	if (sp_path_fmt(run, sizeof run, e, "%s/%s", c->conf->run, r->name +
	    3) == -1)
		return -1;
	return sp_path_remove_tree(run, e);
}

/*
 * r's VM restored from its save image, which is first re-identified as the
 * domain of r's XML (a copy of a checkpoint is named as the VM it was
 * saved from, and the manager may not write the image), and goes once
 * restored (it has done its work; a later snapshot of the directory would
 * carry it).
 */
static int
restore(const struct sp_noded_vm *c, struct sp_virt *v,
    const struct sp_noded_req *r, struct sp_err *e)
{
	char dir[SP_NODED_PATH_MAX + 1], dom[SP_ID_LEN + 4], uuid[37];
	int fd;

	if (file_dir(c, "file", r->file, "mem.sav", dir, e) == -1 ||
	    vm_file_in(c, "file", r->file, dir, "mem.sav", 1, e) == -1 ||
	    check_xml(c, r->xml, r->name[0] ? r->name : NULL, dom, uuid,
	    e) == -1)
		return -1;
	if (sp_ckpt_identify(r->file, dom, uuid, e) == -1 ||
	    sp_virt_restore(v, r->file, r->xml, r->name[0] ? r->name : NULL,
	    e) == -1)
		return -1;
	if ((fd = sp_noded_open_beneath(c->root_fd, dir, O_PATH |
	    O_DIRECTORY)) != -1) {
		(void)unlinkat(fd, "mem.sav", 0);
		close(fd);
	}
	return 0;
}

/* The qgroup limit of the subvolume at r->dir. */
static int
disk_limit(const struct sp_noded_vm *c, const struct sp_noded_req *r,
    struct sp_err *e)
{
	char self[64];
	int fd, rc;

	if ((fd = vm_dir(c, r->dir, e)) == -1)
		return -1;
	snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
	rc = sp_subvol_limit(self, r->bytes, e);
	close(fd);
	return rc;
}

/* noded's own connection: opened at the first VM op, and again after one
 * that lost it. */
static int
virt(struct sp_noded_vm *c, struct sp_virt **v, struct sp_err *e)
{
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	if (c->virt == NULL)
		rc = sp_virt_open(&c->virt, c->uri, e);
	*v = c->virt;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* A volume's disk into running VM name (vm-plug), in XML written here
 * (volume_disk). */
static int
volume_plug(struct sp_noded_vm *c, struct sp_virt *v,
    const struct sp_noded_req *r, struct sp_err *e)
{
	char abs[SP_PATH_MAX], *xml = NULL;
	struct sp_vm_volume d;
	unsigned uid;
	int rc;

	if (sp_virt_xml(v, r->name, &xml, e) == -1)
		return -1;
	rc = sp_vm_xml_jail(xml, r->name, &uid, e);
	free(xml);
	if (rc == -1)
		return -1;
	if (uid == 0)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "%s has no jail: root "
		    "plugs its volumes", r->name);
	if (volume_disk(c, r->volume, abs, e) == -1)
		return -1;
	memset(&d, 0, sizeof d);
	d.disk = abs;
	d.serial = r->volume;
	memcpy(d.target, r->target, sizeof d.target);
	d.ro = r->readonly;
	return sp_virt_volume_plug(v, r->name, &d, 1, e);
}

static int
collect(const char *name, void *arg)
{
	json_array_append_new(arg, json_string(name));
	return 0;
}

static int
run_op(struct sp_noded_vm *c, struct sp_virt *v, const struct sp_noded_req *r,
    json_t **value, struct sp_err *e)
{
	char buf[64], *xml = NULL;
	unsigned long long kib;
	json_t *list;

	switch (r->op) {
	case SP_NODED_VM_RELEASE:
		return release(c, v, r, e);
	case SP_NODED_VM_DEFINE:
		return check_xml(c, r->xml, NULL, NULL, NULL, e) == -1 ? -1 :
		    sp_virt_define(v, r->xml, e);
	case SP_NODED_VM_START:
		return sp_virt_start(v, r->name, e);
	case SP_NODED_VM_DESTROY:
		return sp_virt_destroy(v, r->name, e);
	case SP_NODED_VM_UNDEFINE:
		return sp_virt_undefine(v, r->name, e);
	case SP_NODED_VM_PAUSE:
		return sp_virt_pause(v, r->name, e);
	case SP_NODED_VM_RESUME:
		return sp_virt_resume(v, r->name, e);
	case SP_NODED_VM_SAVE:
	case SP_NODED_VM_SAVE_MEMORY:
		return save(c, v, r, e);
	case SP_NODED_VM_RESTORE:
		return restore(c, v, r, e);
	case SP_NODED_VM_RESIZE:
		return sp_virt_block_resize(v, r->name, "vda", r->bytes, e);
	case SP_NODED_VM_STATE:
		if (sp_virt_state(v, r->name, buf, e) == -1)
			return -1;
		*value = json_string(buf);
		return 0;
	case SP_NODED_VM_UUID:
		if (sp_virt_uuid(v, r->name, buf, e) == -1)
			return -1;
		*value = json_string(buf);
		return 0;
	case SP_NODED_VM_XML:
		if (sp_virt_xml(v, r->name, &xml, e) == -1)
			return -1;
		*value = json_string(xml);
		free(xml);
		return 0;
	case SP_NODED_VM_MEMORY:
		if (sp_virt_memory_kib(v, r->name, &kib, e) == -1)
			return -1;
		*value = json_integer((json_int_t)kib);
		return 0;
	case SP_NODED_VM_LIST:
		if ((list = json_array()) == NULL ||
		    sp_virt_list(v, collect, list, e) == -1) {
			json_decref(list);
			return -1;
		}
		*value = list;
		return 0;
	case SP_NODED_VM_STATS:
		return sp_virt_stats(v, value, e);
	case SP_NODED_VM_PLUG:
		return volume_plug(c, v, r, e);
	case SP_NODED_VM_UNPLUG:
		return sp_virt_volume_unplug(v, r->name, r->volume, e);
	case SP_NODED_VIRT_TYPE:
		if (sp_virt_pick_type(v, r->want, buf, e) == -1)
			return -1;
		*value = json_string(buf);
		return 0;
	case SP_NODED_VIRT_VERSION:
		if (sp_virt_version(v, buf, sizeof buf, e) == -1)
			return -1;
		*value = json_string(buf);
		return 0;
	default:
		return sp_err_set(e, SP_E_INTERNAL, 0, "op %d", (int)r->op);
	}
}

/* 1 when the address host (parsed already) is unspecified (every one of
 * this host's) or one of this host's interfaces has it. */
static int
this_hosts(const char *host)
{
	unsigned char a[16], zero[16] = { 0 };
	struct ifaddrs *list, *i;
	const void *have;
	int family = strchr(host, ':') != NULL ? AF_INET6 : AF_INET, found = 0;
	size_t n = family == AF_INET ? 4 : 16;

	if (inet_pton(family, host, a) != 1)
		return 0;
	if (memcmp(a, zero, n) == 0)
		return 1;
	if (getifaddrs(&list) == -1)
		return 0;
	for (i = list; i != NULL && !found; i = i->ifa_next) {
		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != family)
			continue;
		have = family == AF_INET ?
		    (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr :
		    (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
		found = memcmp(have, a, n) == 0;
	}
	freeifaddrs(list);
	return found;
}

/*
 * A TLS leaf for host, signed by the node CA (its key root's alone), as
 * {"key", "cert"} PEM texts: only for an address of this host, so that the
 * leaf cannot pass for any other server the templates' trust of the CA
 * reaches (the gateway's TLS to the world).
 */
static int
tls_leaf(const char *root, const char *host, json_t **value,
    struct sp_err *e)
{
	char *key, *cert;

	if (!this_hosts(host))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "host %s is not an "
		    "address of this host", host);
	if (sp_tls_leaf_pems(root, host, &key, &cert, e) == -1)
		return -1;
	*value = json_pack("{s:s, s:s}", "key", key, "cert", cert);
	sodium_memzero(key, strlen(key));
	free(key);
	free(cert);
	return *value != NULL ? 0 : sp_err_set(e, SP_E_INTERNAL, 0,
	    "out of memory");
}

int
sp_noded_vm_do(struct sp_noded_vm *c, const struct sp_noded_req *r,
    json_t **value, struct sp_err *e)
{
	struct sp_virt *v;
	int rc;

	*value = NULL;
	/* A VM's host side, and the CA's leaf: no libvirt. */
	switch (r->op) {
	case SP_NODED_TLS_LEAF:
		return tls_leaf(c->conf->root, r->host, value, e);
	case SP_NODED_VM_PREPARE:
		return prepare(c, r, e);
	case SP_NODED_VM_LIMIT:
		return sp_jail_limit(r->name, r->bytes, r->pids, e);
	case SP_NODED_DISK_LIMIT:
		return disk_limit(c, r, e);
	case SP_NODED_PIDS_SWEEP:
		sp_jail_pids_sweep();
		return 0;
	default:
		break;
	}
	if (virt(c, &v, e) == -1)
		return -1;
	rc = run_op(c, v, r, value, e);
	if (rc == -1 && e->temp) {
		/*
		 * The connection may be gone: the next op opens another.
		 * The old one is left open, not closed: another thread may
		 * be in a call on it (a libvirtd restart is rare). */
		pthread_mutex_lock(&c->lock);
		if (c->virt == v)
			c->virt = NULL;
		pthread_mutex_unlock(&c->lock);
	}
	return rc;
}
