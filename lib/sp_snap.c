/*
 * sp_snap: snapshots, rollback, fork, retention and crash recovery (design.md).
 *
 * A disk snapshot is a read-only btrfs snapshot of sandboxes/<id>, taken
 * while the guest runs.  The guest's daemon freezes its root around it
 * (FIFREEZE: flushed, its journal committed and marked clean), so the
 * snapshot mounts without a replay; a guest that cannot (an older daemon, no
 * answer) gets a crash-consistent one, which ext4's journal recovers as after
 * a power cut, and the snapshot's line says "consistent":false.  The guest
 * thaws by itself if the thaw never comes.  A full checkpoint pauses the
 * vCPUs (QEMU drains and flushes the disk), snapshots the subvolume, writes
 * the memory state into it (mem.sav, with ckpt.json naming the domain it
 * came from), resumes, then makes the snapshot read-only: disk and memory
 * of one instant.  Both live in snapshots/<id>/<snap>/ with a DB row that
 * is "taking" until whole.
 *
 * A rollback replaces the sandbox's subvolume with a writable snapshot of the
 * chosen one and restores the VM from its memory (full) or boots it (disk).
 * The sandbox is "recovering" meanwhile, with the target in its record, so a
 * rollback cut short is done again by reconcile: every step starts from the
 * immutable snapshot, so doing it twice ends in the same place.  Crash
 * recovery is the same move to the newest full checkpoint.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sp_sandbox.h"

#define FREEZE_MS	10000	/* the guest thaws by itself after this */
#define FREEZE_CALL_MS	30000	/* the flush before a freeze may be long */
#define FREEZE_PORT_MS	5000	/* all channel ports busy: no freeze */
#define BOOT_READY_MS	180000
#define RESTORE_READY_MS 60000
#define FORK_MAX	64

static int
snap_dir(const struct sp_ctx *x, const char *id, const char *snap, char *out,
    size_t n, struct sp_err *e)
{
	if (snap == NULL)
		return sp_path_fmt(out, n, e, "%s/snapshots/%s", x->conf.root, id);
	return sp_path_fmt(out, n, e, "%s/snapshots/%s/%s", x->conf.root, id,
	    snap);
}


static json_t *
describe(const struct sp_snap_row *r, const char *dir)
{
	uint64_t excl = 0;
	struct sp_err ignored;
	json_t *o;

	o = json_pack("{s:s, s:b, s:s, s:s, s:I, s:s, s:I}", "id", r->id, "ok", 1,
	    "snap", r->snap, "kind", r->kind, "taken", (json_int_t)r->taken,
	    "state", r->state, "ms", (json_int_t)r->ms);
	if (o == NULL)
		return NULL;
	if (r->tag[0] != '\0')
		json_object_set_new(o, "tag", json_string(r->tag));
	if (r->paused_ms >= 0)
		json_object_set_new(o, "paused_ms", json_integer(r->paused_ms));
	/* In the object store: uploading, restorable, or restored. */
	if (r->remote[0] != '\0')
		json_object_set_new(o, "remote", json_string(r->remote));
	json_object_set_new(o, "exclusive_bytes",
	    sp_subvol_exclusive_bytes(dir, &excl, &ignored) == 0 ?
	    json_integer((json_int_t)excl) : json_null());
	return o;
}

/* ckpt.json of a full checkpoint: what sp_ckpt_read reads, as for a
 * template's checkpoint, so a fork re-identifies it the same way. */
static int
write_ckpt_info(const char *dir, const char *id, const char *uuid,
    const struct sp_sandbox_row *sb, int64_t taken, struct sp_err *e)
{
	char p[SP_PATH_MAX], *text;
	json_t *j;
	int rc;

	if (sp_path_fmt(p, sizeof p, e, "%s/ckpt.json", dir) == -1)
		return -1;
	j = json_pack("{s:s, s:s, s:i, s:i, s:I, s:s}", "id", id, "uuid", uuid,
	    "memory_mib", sb->memory_mib, "vcpus", sb->vcpus, "created",
	    (json_int_t)taken, "template", sb->template);
	text = j != NULL ? json_dumps(j, JSON_INDENT(2)) : NULL;
	json_decref(j);
	if (text == NULL)
		return sp_err_set(e, SP_E_INTERNAL, 0, "out of memory");
	/* The template's, copied with the sandbox, is root's: a new file. */
	rc = sp_path_replace_text(p, text, e);
	free(text);
	return rc;
}

/* Freezes a running guest's root for a disk snapshot: the channel to thaw
 * it on, or NULL when it cannot be (the snapshot is crash-consistent). */
static struct sp_chan *
guest_freeze(struct sp_ctx *x, const char *id)
{
	struct sp_chan *c = NULL;
	struct sp_err e;

	if (sp_chan_open(&c, x->conf.run, id, FREEZE_PORT_MS, &e) == -1) {
		sp_warn("%s: not frozen for its snapshot (%s): crash-consistent",
		    id, e.msg);
		return NULL;
	}
	if (sp_chan_call(c, json_pack("{s:s, s:i}", "op", "freeze", "timeout_ms",
	    FREEZE_MS), FREEZE_CALL_MS, NULL, &e) == -1) {
		sp_warn("%s: not frozen for its snapshot (%s): crash-consistent",
		    id, e.msg);
		sp_chan_close(c);
		return NULL;
	}
	return c;
}

static void
guest_thaw(const char *id, struct sp_chan *c)
{
	struct sp_err e;

	if (sp_chan_call(c, json_pack("{s:s}", "op", "thaw"), FREEZE_CALL_MS,
	    NULL, &e) == -1)
		sp_warn("%s: thaw: %s (the guest thaws by itself in %d s)", id,
		    e.msg, FREEZE_MS / 1000);
	sp_chan_close(c);
}

/*
 * A snapshot root took itself (not through space-noded) as space-noded
 * leaves one it took for the user space: its directory root's and the
 * group space's (0750), taken first; then a full checkpoint's memory image
 * the group's to read (0640; opened without following a link, a regular
 * file of one link: the directory was the VM jail's until then).  So the
 * unprivileged manager restores, rolls back to and forks it as its own
 * (space-noded restores only from directories root alone may change).
 */
static int
space_reads(const char *dst, int full, struct sp_err *e)
{
	struct stat st;
	gid_t gid;
	int dfd, fd, rc = -1;

	if (geteuid() != 0 || !sp_space_ids(NULL, &gid))
		return 0;
	if ((dfd = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_IO, "open %s", dst);
	if (fchown(dfd, 0, gid) == -1 || fchmod(dfd, 0750) == -1) {
		sp_err_sys(e, SP_E_IO, "give %s to the group %s", dst, SP_USER);
		goto out;
	}
	if (!full) {
		rc = 0;
		goto out;
	}
	if ((fd = openat(dfd, "mem.sav", O_RDONLY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1) {
		sp_err_sys(e, SP_E_IO, "open %s/mem.sav", dst);
		goto out;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) || st.st_nlink != 1)
		sp_err_set(e, SP_E_CORRUPT, 0, "%s/mem.sav is not a regular "
		    "file of one link", dst);
	else if (fchown(fd, 0, gid) == -1 || fchmod(fd, 0640) == -1)
		sp_err_sys(e, SP_E_IO, "give %s/mem.sav to the group %s", dst,
		    SP_USER);
	else
		rc = 0;
	close(fd);
out:
	close(dfd);
	return rc;
}

/* A disk snapshot, read-only: made writable first when root takes it
 * itself and the user space is there, for space_reads. */
static int
take_disk(const char *src, const char *dst, struct sp_err *e)
{
	if (geteuid() != 0 || !sp_space_ids(NULL, NULL))
		return sp_subvol_snapshot(src, dst, 1, e);
	return sp_subvol_snapshot(src, dst, 0, e) == -1 ||
	    space_reads(dst, 0, e) == -1 ||
	    sp_subvol_set_readonly(dst, 1, e) == -1 ? -1 : 0;
}

/* A sandbox's snapshots' directory, made if missing: root's alone (the
 * VMs' jails own their disk snapshots, which must stay out of their
 * reach), listed by the group space when root makes it (0750; through
 * space-noded it is root's 0755, its snapshots root's). */
static int
snap_parent(const char *parent, struct sp_err *e)
{
	struct stat st;
	gid_t gid;

	if (sp_subvol_mkdirs(parent, 0700, e) == -1)
		return -1;
	if (geteuid() != 0 || !sp_space_ids(NULL, &gid) ||
	    lstat(parent, &st) == -1 || st.st_uid != 0 ||
	    (st.st_mode & 07777) != 0700)
		return 0;
	if (chown(parent, 0, gid) == -1 || chmod(parent, 0750) == -1)
		return sp_err_sys(e, SP_E_IO, "give %s to the group %s", parent,
		    SP_USER);
	return 0;
}

/* Pause, snapshot, memory, resume: the guest is stopped only for the middle
 * two.  *paused_ms is how long it was. */
static int
take_full(struct sp_ctx *x, const struct sp_sandbox_row *sb, const char *src,
    const char *dst, int64_t taken, int64_t *paused_ms, struct sp_err *e)
{
	char dom[SP_ID_LEN + 4], vstate[16], sav[SP_PATH_MAX], uuid[37];
	struct sp_err lost;
	int64_t t0;
	int was_running, rc = -1;

	sp_sandbox_domain(sb->id, dom);
	if (sp_ctx_virt(x, e) == -1 ||
	    sp_virt_state(x->virt, dom, vstate, e) == -1 ||
	    sp_virt_uuid(x->virt, dom, uuid, e) == -1 ||
	    sp_path_fmt(sav, sizeof sav, e, "%s/mem.sav", dst) == -1)
		return -1;
	was_running = strcmp(vstate, "running") == 0;
	if (!was_running && strcmp(vstate, "paused") != 0)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "a full checkpoint needs a "
		    "running or paused VM; it is %s", vstate);
	t0 = sp_clock_ms();
	if (was_running && sp_virt_pause(x->virt, dom, e) == -1)
		return -1;
	/* Its volumes' read-write images are cloned at the same instant.  All
	 * the snapshot holds is written before the memory: space-noded makes
	 * the directory root's for that, when the manager is not root. */
	if (sp_subvol_snapshot(src, dst, 0, e) == 0 &&
	    sp_volume_capture(x, sb->id, dst, e) == 0 &&
	    write_ckpt_info(dst, sb->id, uuid, sb, taken, e) == 0 &&
	    sp_virt_save_memory(x->virt, dom, sav, e) == 0)
		rc = 0;
	sp_crashpoint("snap-full-paused");
	if (was_running && sp_virt_resume(x->virt, dom, rc == 0 ? e : &lost) == -1)
		rc = -1;
	*paused_ms = was_running ? sp_clock_ms() - t0 : 0;
	if (rc == 0 && (space_reads(dst, 1, e) == -1 ||
	    sp_subvol_set_readonly(dst, 1, e) == -1))
		rc = -1;
	return rc;
}

/* Takes one snapshot of a sandbox whose lock the caller holds; *out (may be
 * NULL) gets its JSON line, r its row. */
static int
take_locked(struct sp_ctx *x, const char *id, int flags, const char *tag,
    struct sp_snap_row *r, json_t **out, struct sp_err *e)
{
	int full = (flags & SP_SNAP_FULL) != 0;
	char src[SP_PATH_MAX], dst[SP_PATH_MAX], parent[SP_PATH_MAX];
	struct sp_sandbox_row sb;
	struct sp_chan *frozen = NULL;
	struct sp_err ignored;
	int64_t t0 = sp_clock_ms();
	int rc = -1, taken, consistent;

	if (sp_db_sandbox_get(x->db, id, &sb, e) == -1)
		return -1;
	memset(r, 0, sizeof *r);
	if (sb.pod) {
		sp_err_set(e, SP_E_NOT_FOUND, 0, "no such sandbox");
		goto out;
	}
	/* Suspending: the checkpoint space-suspend takes of a paused VM. */
	if (sb.state != SP_ST_RUNNING && sb.state != SP_ST_PAUSED &&
	    sb.state != SP_ST_SUSPENDING &&
	    (full || (sb.state != SP_ST_STOPPED && sb.state != SP_ST_FAILED))) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "cannot take a %s snapshot of a "
		    "sandbox that is %s", full ? "full" : "disk",
		    sp_state_name(sb.state));
		goto out;
	}
	if (tag != NULL && sp_name_check("tag", tag, e) == -1)
		goto out;
	memcpy(r->id, id, SP_ID_LEN + 1);
	snprintf(r->kind, sizeof r->kind, "%s", full ? "full" : "disk");
	snprintf(r->tag, sizeof r->tag, "%s", tag != NULL ? tag : "");
	snprintf(r->state, sizeof r->state, "taking");
	r->paused_ms = -1;
	if (sp_id_new(r->snap, e) == -1 || sp_now(&r->taken, e) == -1 ||
	    sp_sandbox_dir(x, id, src, sizeof src, e) == -1 ||
	    snap_dir(x, id, NULL, parent, sizeof parent, e) == -1 ||
	    snap_dir(x, id, r->snap, dst, sizeof dst, e) == -1 ||
	    snap_parent(parent, e) == -1)
		goto out;
	/* The row first: a crash leaves a "taking" row reconcile clears. */
	if (sp_db_snap_insert(x->db, r, e) == -1)
		goto out;
	sp_crashpoint("snap-after-row");
	/* A stopped guest's disk is clean already; a paused one cannot
	 * answer, and a full checkpoint keeps its memory with it. */
	if (!full && sb.state == SP_ST_RUNNING && !(flags & SP_SNAP_NO_FREEZE))
		frozen = guest_freeze(x, id);
	if (frozen != NULL)
		sp_crashpoint("snap-frozen");
	taken = full ? take_full(x, &sb, src, dst, r->taken, &r->paused_ms, e) :
	    take_disk(src, dst, e);
	consistent = full || frozen != NULL || sb.state == SP_ST_STOPPED;
	if (frozen != NULL)
		guest_thaw(id, frozen);
	if (taken == -1) {
		sp_subvol_delete(dst, &ignored);
		sp_db_snap_delete(x->db, id, r->snap, &ignored);
		goto out;
	}
	r->ms = sp_clock_ms() - t0;
	if (sp_db_snap_ready(x->db, r, e) == -1)
		goto out;
	snprintf(r->state, sizeof r->state, "ready");
	if (out != NULL && (*out = describe(r, dst)) == NULL) {
		sp_err_set(e, SP_E_INTERNAL, 0, "out of memory");
		goto out;
	}
	if (out != NULL)
		json_object_set_new(*out, "consistent",
		    json_boolean(consistent));
	rc = 0;
out:
	sp_db_row_release(&sb);
	return rc;
}

int
sp_snap_take_locked(struct sp_ctx *x, const char *id, int flags,
    const char *tag, struct sp_snap_row *r, json_t **out, struct sp_err *e)
{
	return take_locked(x, id, flags, tag, r, out, e);
}

int
sp_snap_take(struct sp_ctx *x, const char *id, int flags, const char *tag,
    json_t **out, struct sp_err *e)
{
	struct sp_snap_row r;
	int fd, rc;

	*out = NULL;
	if (sp_id_check(id, e) == -1 || sp_sandbox_lock(x, id, 1, &fd, e) == -1)
		return -1;
	rc = take_locked(x, id, flags, tag, &r, out, e);
	sp_sandbox_unlock(fd);
	return rc;
}

struct list {
	struct sp_ctx *x;
	int (*fn)(json_t *, void *);
	void *arg;
};

static int
list_one(const struct sp_snap_row *r, void *arg)
{
	struct list *l = arg;
	char dir[SP_PATH_MAX];
	struct sp_err e;
	json_t *o;

	if (snap_dir(l->x, r->id, r->snap, dir, sizeof dir, &e) == -1 ||
	    (o = describe(r, dir)) == NULL)
		return -1;
	return l->fn(o, l->arg);
}

int
sp_snap_list(struct sp_ctx *x, const char *id, int (*fn)(json_t *, void *),
    void *arg, struct sp_err *e)
{
	struct sp_sandbox_row sb;
	struct list l = { x, fn, arg };

	if (sp_id_check(id, e) == -1 || sp_db_sandbox_get(x->db, id, &sb, e) == -1)
		return -1;
	sp_db_row_release(&sb);
	return sp_db_snap_each(x->db, id, NULL, list_one, &l, e);
}

static int
remove_locked(struct sp_ctx *x, const char *id, const char *snap, int *removed,
    struct sp_err *e)
{
	char dir[SP_PATH_MAX];
	struct sp_snap_row r;
	struct sp_err ge;
	int in_db;

	*removed = 0;
	if (!sp_id_valid(snap))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "\"%.40s\" is not a snapshot "
		    "id", snap);
	if (snap_dir(x, id, snap, dir, sizeof dir, e) == -1)
		return -1;
	in_db = sp_db_snap_get(x->db, id, snap, &r, &ge) == 0;
	if (!in_db && ge.code != SP_E_NOT_FOUND) {
		*e = ge;
		return -1;
	}
	*removed = in_db || sp_subvol_exists(dir);
	if (sp_subvol_delete(dir, e) == -1)
		return -1;
	return in_db ? sp_db_snap_delete(x->db, id, snap, e) : 0;
}

int
sp_snap_remove(struct sp_ctx *x, const char *id, const char *snap,
    int *removed, struct sp_err *e)
{
	struct sp_sandbox_row sb;
	int fd, rc;

	*removed = 0;
	if (sp_id_check(id, e) == -1 || sp_db_sandbox_get(x->db, id, &sb, e) == -1)
		return -1;
	sp_db_row_release(&sb);
	if (sp_sandbox_lock(x, id, 1, &fd, e) == -1)
		return -1;
	rc = remove_locked(x, id, snap, removed, e);
	sp_sandbox_unlock(fd);
	return rc;
}

/* ---- rollback and recovery ---- */

/* The target of a rollback under way, from the sandbox's record. */
static int
recovery_target(const struct sp_sandbox_row *sb, char snap[SP_ID_LEN + 1],
    struct sp_err *e)
{
	json_t *j = sb->recovered ? json_loads(sb->recovered, 0, NULL) : NULL;
	const char *s = NULL;
	int rc = -1;

	if (j != NULL && json_unpack(j, "{s:s}", "snap", &s) == 0 &&
	    sp_id_valid(s)) {
		memcpy(snap, s, SP_ID_LEN + 1);
		rc = 0;
	} else
		sp_err_set(e, SP_E_BAD_STATE, 0, "%s is recovering but its record "
		    "names no snapshot", sb->id);
	json_decref(j);
	return rc;
}

/*
 * Puts the sandbox (state recovering, lock held) on snapshot snap and brings
 * its VM up: restored from the memory of a full checkpoint, booted on a disk
 * snapshot.  Then it is told its identity again (a restored memory replays
 * its RNG) and is running.
 */
static int
finish_recovery(struct sp_ctx *x, const struct sp_sandbox_row *sb,
    const char *snap, struct sp_err *e)
{
	char dir[SP_PATH_MAX], tmp[SP_PATH_MAX], src[SP_PATH_MAX];
	char sav[SP_PATH_MAX], dom[SP_ID_LEN + 4], run[SP_PATH_MAX];
	struct sp_snap_row r;
	struct sp_jail jail;
	json_t *labels, *env;
	int rc, full;

	if (sp_ctx_virt(x, e) == -1 ||
	    sp_db_snap_get(x->db, sb->id, snap, &r, e) == -1)
		return -1;
	if (strcmp(r.state, "ready") != 0)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "snapshot %s is %s", snap,
		    r.state);
	full = strcmp(r.kind, "full") == 0;
	sp_sandbox_domain(sb->id, dom);
	if (sp_sandbox_dir(x, sb->id, dir, sizeof dir, e) == -1 ||
	    sp_path_fmt(tmp, sizeof tmp, e, "%s/sandboxes/.%s.rollback",
	    x->conf.root, sb->id) == -1 ||
	    snap_dir(x, sb->id, snap, src, sizeof src, e) == -1 ||
	    sp_path_fmt(sav, sizeof sav, e, "%s/mem.sav", dir) == -1)
		return -1;
	if (!sp_subvol_exists(src))
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "snapshot %s has no "
		    "subvolume (%s)", snap, src);
	/* Off with the VM, then the disk swapped for a copy of the snapshot
	 * (what was there is kept as a snapshot already, or is the crash
	 * being recovered from).  No rename: sandboxes/ is root's, and the
	 * manager may not be; a step cut short is done again from the
	 * start.  A copy made by a rollback before 2026-12-07 goes too. */
	if (sp_virt_destroy(x->virt, dom, e) == -1 ||
	    sp_subvol_delete(tmp, e) == -1 ||
	    sp_subvol_delete(dir, e) == -1)
		return -1;
	sp_crashpoint("rollback-after-delete");
	if (sp_subvol_snapshot(src, dir, 0, e) == -1)
		return -1;
	sp_crashpoint("rollback-after-copy");
	if (sp_jail_disk_limit(x, dir, 0, e) == -1)
		return -1;
	/* The snapshot's files get the jail the VM comes back in: the saved
	 * image's (its XML goes on), or the domain's. */
	if (sp_sandbox_run_dir(x, sb->id, run, sizeof run, e) == -1 ||
	    (full ? sp_jail_of_image(sav, &jail, e) :
	    sp_jail_of_vm(x, dom, &jail, e)) == -1)
		return -1;
	if (full) {
		/* The image's own XML is this sandbox's (same name, same
		 * paths), written again: space-noded takes only ours, and
		 * the sandbox's CPU quota is what its row says now.  Read
		 * while the directory is still its maker's, before its jail
		 * has it.  A snapshot without ckpt.json (before 2026-11-30)
		 * goes back with the image's. */
		struct sp_ckpt_info ci;
		struct sp_err old;
		char *xml = NULL;

		if (sp_ckpt_read(dir, &ci, &old) == 0 &&
		    sp_sandbox_restore_xml(x, sb->id, dir, &ci, sb->cpu_pct,
		    &jail, &xml, e) == -1)
			return -1;
		rc = sp_jail_dirs(x, &jail, dir, run, e) == -1 ? -1 :
		    sp_virt_restore(x->virt, sav, xml, dom, e);
		free(xml);
		if (rc == -1)
			return -1;
		unlink(sav);
	} else {
		unlink(sav);	/* a disk snapshot of a checkpoint may hold one */
		if (sp_jail_dirs(x, &jail, dir, run, e) == -1 ||
		    sp_virt_start(x->virt, dom, e) == -1)
			return -1;
	}
	if (sp_jail_started(x, dom, e) == -1)
		return -1;
	if (sp_chan_wait_ready(x->conf.run, sb->id, full ? RESTORE_READY_MS :
	    BOOT_READY_MS, e) == -1)
		return -1;
	/* Volumes it mounts that its memory had not plugged (a boot, or
	 * mounted after the checkpoint) are plugged and mounted again. */
	if (sp_volume_replug(x, sb->id, e) == -1)
		return -1;
	labels = json_loads(sb->labels ? sb->labels : "{}", 0, NULL);
	env = json_loads(sb->env ? sb->env : "[]", 0, NULL);
	rc = sp_sandbox_hand_identity(x, sb->id, labels, env, e);
	json_decref(labels);
	json_decref(env);
	if (rc == -1)
		return -1;
	return sp_db_transition(x->db, sb->id, SP_ST_RUNNING, -1, NULL, e);
}

/* Moves a sandbox (lock held) into recovering towards snap, recording why. */
static int
begin_recovery(struct sp_ctx *x, const struct sp_sandbox_row *sb,
    const struct sp_snap_row *r, const char *why, const char *saved,
    struct sp_err *e)
{
	char *text;
	json_t *j;
	int rc;

	j = json_pack("{s:s, s:s, s:I, s:s}", "snap", r->snap, "kind", r->kind,
	    "at", (json_int_t)time(NULL), "why", why);
	if (j != NULL && saved != NULL)
		json_object_set_new(j, "saved", json_string(saved));
	text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(j);
	if (text == NULL)
		return sp_err_set(e, SP_E_INTERNAL, 0, "out of memory");
	/* The target goes in before the state, so recovering always has one. */
	rc = sp_db_sandbox_set_recovered(x->db, sb->id, text, e);
	free(text);
	if (rc == -1)
		return -1;
	return sp_db_transition(x->db, sb->id, SP_ST_RECOVERING, sb->gen, NULL, e);
}

int
sp_snap_rollback(struct sp_ctx *x, const char *id, const char *snap,
    json_t **out, struct sp_err *e)
{
	struct sp_snap_row r, before;
	struct sp_sandbox_row sb;
	char dir[SP_PATH_MAX];
	int64_t t0 = sp_clock_ms();
	int fd, rc = -1, have_sb = 0;

	*out = NULL;
	if (sp_id_check(id, e) == -1)
		return -1;
	if (!sp_id_valid(snap))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "\"%.40s\" is not a snapshot "
		    "id", snap);
	if (sp_ctx_virt(x, e) == -1 || sp_sandbox_lock(x, id, 1, &fd, e) == -1)
		return -1;
	if (sp_db_snap_get(x->db, id, snap, &r, e) == -1)
		goto out;
	if (strcmp(r.state, "ready") != 0) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "snapshot %s is %s", snap, r.state);
		goto out;
	}
	if (sp_db_sandbox_get(x->db, id, &sb, e) == -1)
		goto out;
	have_sb = 1;
	if (sb.pod || (sb.state != SP_ST_RUNNING && sb.state != SP_ST_PAUSED &&
	    sb.state != SP_ST_STOPPED && sb.state != SP_ST_FAILED)) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "cannot roll back a sandbox that "
		    "is %s", sb.pod ? "a pod" : sp_state_name(sb.state));
		goto out;
	}
	/* A checkpoint whose volumes cannot come back (written by another
	 * sandbox since, mounted elsewhere, gone) is refused while the VM
	 * still runs. */
	if (strcmp(r.kind, "full") == 0 && (snap_dir(x, id, snap, dir,
	    sizeof dir, e) == -1 || sp_volume_restore_check(x, id, dir,
	    e) == -1))
		goto out;
	/* What is there now is kept, so the rollback can be undone: with its
	 * memory when the VM runs. */
	if (take_locked(x, id, sb.state == SP_ST_RUNNING ||
	    sb.state == SP_ST_PAUSED, NULL, &before, NULL, e) == -1)
		goto out;
	sp_db_row_release(&sb);
	if (sp_db_sandbox_get(x->db, id, &sb, e) == -1) {
		have_sb = 0;
		goto out;
	}
	if (begin_recovery(x, &sb, &r, "rollback", before.snap, e) == -1)
		goto out;
	sp_crashpoint("rollback-after-claim");
	if (finish_recovery(x, &sb, snap, e) == -1)
		goto out;
	*out = json_pack("{s:s, s:b, s:s, s:s, s:s, s:s, s:I}", "id", id, "ok", 1,
	    "snap", snap, "kind", r.kind, "saved", before.snap, "state",
	    "running", "ms", (json_int_t)(sp_clock_ms() - t0));
	rc = 0;
out:
	if (have_sb)
		sp_db_row_release(&sb);
	sp_sandbox_unlock(fd);
	return rc;
}

struct newest {
	char snap[SP_ID_LEN + 1];
	int found;
};

static int
newest_full(const struct sp_snap_row *r, void *arg)
{
	struct newest *n = arg;

	/* Rows come oldest first: the last ready full one wins. */
	if (strcmp(r->kind, "full") == 0 && strcmp(r->state, "ready") == 0) {
		memcpy(n->snap, r->snap, SP_ID_LEN + 1);
		n->found = 1;
	}
	return 0;
}

int
sp_snap_recover_locked(struct sp_ctx *x, const struct sp_sandbox_row *sb,
    char snap[SP_ID_LEN + 1], struct sp_err *e)
{
	struct newest n = { "", 0 };
	struct sp_sandbox_row now;
	struct sp_snap_row r, crashed;
	int rc;

	if (sb->state == SP_ST_RECOVERING) {
		/* Cut short: the record says where it was going. */
		if (recovery_target(sb, snap, e) == -1)
			return -1;
		return finish_recovery(x, sb, snap, e);
	}
	if (sb->state != SP_ST_FAILED)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "only a failed sandbox is "
		    "recovered; it is %s", sp_state_name(sb->state));
	if (sp_db_snap_each(x->db, sb->id, NULL, newest_full, &n, e) == -1)
		return -1;
	if (!n.found)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no full checkpoint to "
		    "recover from");
	memcpy(snap, n.snap, SP_ID_LEN + 1);
	/* The disk as the crash left it is kept: what was written after the
	 * checkpoint is not lost, only set aside. */
	if (take_locked(x, sb->id, 0, NULL, &crashed, NULL, e) == -1 ||
	    sp_db_sandbox_get(x->db, sb->id, &now, e) == -1)
		return -1;
	rc = sp_db_snap_get(x->db, sb->id, snap, &r, e) == -1 ||
	    begin_recovery(x, &now, &r, "crash", crashed.snap, e) == -1 ? -1 : 0;
	sp_db_row_release(&now);
	if (rc == -1 ||
	    sp_db_sandbox_get(x->db, sb->id, &now, e) == -1)
		return -1;
	rc = finish_recovery(x, &now, snap, e);
	sp_db_row_release(&now);
	return rc;
}

/* ---- fork ---- */

int
sp_snap_fork(struct sp_ctx *x, const char *id, const char *snap, int count,
    int (*fn)(json_t *, void *), void *arg, struct sp_err *e)
{
	char src[SP_PATH_MAX], newid[SP_ID_LEN + 1];
	struct sp_sandbox_row sb;
	struct sp_snap_row r;
	struct sp_ckpt_info ci;
	struct sp_make m;
	json_t *labels = NULL, *env = NULL, *o;
	int64_t t0;
	int fd, i, rc = -1, full;

	if (sp_id_check(id, e) == -1)
		return -1;
	if (count < 1 || count > FORK_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "count must be 1 to %d",
		    FORK_MAX);
	if (snap != NULL && !sp_id_valid(snap))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "\"%.40s\" is not a snapshot "
		    "id", snap);
	if (sp_ctx_virt(x, e) == -1 || sp_db_sandbox_get(x->db, id, &sb, e) == -1)
		return -1;
	if (sb.pod) {
		sp_db_row_release(&sb);
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no such sandbox");
	}
	/* The source's state now, or the snapshot named. */
	if (snap == NULL) {
		if (sp_sandbox_lock(x, id, 1, &fd, e) == -1)
			goto out;
		rc = take_locked(x, id, sb.state == SP_ST_RUNNING ||
		    sb.state == SP_ST_PAUSED, NULL, &r, NULL, e);
		sp_sandbox_unlock(fd);
		if (rc == -1)
			goto out;
		rc = -1;
	} else if (sp_db_snap_get(x->db, id, snap, &r, e) == -1)
		goto out;
	if (strcmp(r.state, "ready") != 0) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "snapshot %s is %s", r.snap, r.state);
		goto out;
	}
	full = strcmp(r.kind, "full") == 0;
	if (snap_dir(x, id, r.snap, src, sizeof src, e) == -1 ||
	    (full && sp_ckpt_read(src, &ci, e) == -1))
		goto out;
	labels = json_loads(sb.labels ? sb.labels : "{}", 0, NULL);
	env = json_loads(sb.env ? sb.env : "[]", 0, NULL);
	m = (struct sp_make){
		.src = src, .saved = full ? &ci : NULL, .template = sb.template,
		.memory_mib = sb.memory_mib, .vcpus = sb.vcpus,
		.cpu_pct = sb.cpu_pct, .labels = labels, .env = env,
		.ready_timeout_ms = full ? RESTORE_READY_MS : BOOT_READY_MS,
	};
	rc = 0;
	for (i = 0; i < count; i++) {
		t0 = sp_clock_ms();
		if (sp_sandbox_make(x, &m, newid, e) == -1) {
			rc = -1;
			break;
		}
		o = json_pack("{s:s, s:b, s:s, s:s, s:s, s:s, s:I}", "id", newid,
		    "ok", 1, "from", id, "snap", r.snap, "kind", r.kind, "state",
		    "running", "ms", (json_int_t)(sp_clock_ms() - t0));
		if (o == NULL || fn(o, arg) == -1) {
			rc = sp_err_set(e, SP_E_INTERNAL, 0, "cannot tell fork %s",
			    newid);
			break;
		}
	}
out:
	json_decref(labels);
	json_decref(env);
	sp_db_row_release(&sb);
	return rc;
}

/* ---- retention ---- */

struct gc_rows {
	struct sp_snap_row *v;
	size_t n, cap;
};

/* Ready snapshots only: "taking" ones are reconcile's, and one in the
 * object store (a suspend's, a backup's) stays while a restore may want it;
 * a superseded one (a newer backup, or a restore, came after it) goes by the
 * tiers like any other. */
static int
gc_collect(const struct sp_snap_row *r, void *arg)
{
	struct gc_rows *g = arg;
	struct sp_snap_row *nv;

	if (strcmp(r->state, "ready") != 0 ||
	    (r->remote[0] != '\0' && strcmp(r->remote, "superseded") != 0))
		return 0;
	if (g->n == g->cap) {
		g->cap = g->cap ? 2 * g->cap : 64;
		if ((nv = realloc(g->v, g->cap * sizeof *nv)) == NULL)
			return -1;
		g->v = nv;
	}
	g->v[g->n++] = *r;
	return 0;
}

/* Applies the tiers to rows[0..n), one sandbox's ready snapshots. */
static int
gc_sandbox(struct sp_ctx *x, const struct sp_tier *t, int nt,
    struct sp_snap_row *rows, size_t n, int dry_run,
    int (*fn)(json_t *, void *), void *arg, struct sp_err *e)
{
	struct sp_retain_item *items;
	struct sp_err re;
	json_t *o;
	size_t i;
	int fd, removed, rc = 0;

	if ((items = calloc(n, sizeof *items)) == NULL)
		return sp_err_set(e, SP_E_INTERNAL, 0, "out of memory");
	for (i = 0; i < n; i++) {
		items[i].kind = rows[i].kind;
		items[i].taken = rows[i].taken;
		items[i].tagged = rows[i].tag[0] != '\0';
	}
	sp_retain_select(t, nt, items, n);
	/* A sandbox busy with a command is left for the next pass. */
	if (!dry_run && sp_sandbox_lock(x, rows[0].id, 0, &fd, &re) == -1) {
		free(items);
		return 0;
	}
	for (i = 0; i < n; i++) {
		if (items[i].keep)
			continue;
		removed = 0;
		if (!dry_run && remove_locked(x, rows[i].id, rows[i].snap,
		    &removed, &re) == -1) {
			o = json_pack("{s:s, s:b, s:s, s:s, s:s}", "id", rows[i].id,
			    "ok", 0, "snap", rows[i].snap, "error", sp_code_name(re.code),
			    "msg", re.msg);
			rc = -1;
		} else
			o = json_pack("{s:s, s:b, s:s, s:s, s:I, s:b}", "id",
			    rows[i].id, "ok", 1, "snap", rows[i].snap, "kind",
			    rows[i].kind, "taken", (json_int_t)rows[i].taken,
			    "deleted", !dry_run && removed);
		if (o != NULL)
			fn(o, arg);
	}
	if (!dry_run)
		sp_sandbox_unlock(fd);
	free(items);
	return rc;
}

int
sp_snap_gc(struct sp_ctx *x, int dry_run, int (*fn)(json_t *, void *),
    void *arg, struct sp_err *e)
{
	struct sp_tier t[SP_TIERS_MAX];
	struct gc_rows g = { 0 };
	size_t i, j;
	int nt, rc = 0;

	if (sp_retain_parse(x->conf.retain, t, SP_TIERS_MAX, &nt, e) == -1)
		return -1;
	if (sp_db_snap_each(x->db, NULL, x->conf.node, gc_collect, &g, e) == -1) {
		free(g.v);
		return -1;
	}
	/* Rows come grouped by sandbox. */
	for (i = 0; i < g.n; i = j) {
		for (j = i; j < g.n && strcmp(g.v[j].id, g.v[i].id) == 0; j++)
			;
		if (gc_sandbox(x, t, nt, g.v + i, j - i, dry_run, fn, arg, e) == -1)
			rc = -1;
	}
	free(g.v);
	if (rc == -1)
		sp_err_set(e, SP_E_PARTIAL, 0, "some snapshots could not be deleted");
	return rc;
}

/* ---- for reconcile and remove ---- */

/* Clears what a snapshot cut short left: its row and its subvolume. */
static int
drop_taking(const struct sp_snap_row *r, void *arg)
{
	struct list *l = arg;
	struct sp_err e;
	json_t *o;
	int fd, removed, rc;

	if (strcmp(r->state, "taking") != 0)
		return 0;
	/* Still being taken by a live command: not ours. */
	if (sp_sandbox_lock(l->x, r->id, 0, &fd, &e) == -1)
		return 0;
	rc = remove_locked(l->x, r->id, r->snap, &removed, &e);
	sp_sandbox_unlock(fd);
	o = json_pack("{s:s, s:b, s:s, s:s}", "id", r->id, "ok", rc == 0,
	    "action", "dropped-snapshot", "snap", r->snap);
	if (o != NULL && rc == -1) {
		json_object_set_new(o, "error", json_string(sp_code_name(e.code)));
		json_object_set_new(o, "msg", json_string(e.msg));
	}
	if (o != NULL)
		l->fn(o, l->arg);
	return rc;
}

int
sp_snap_drop_unfinished(struct sp_ctx *x, int (*fn)(json_t *, void *),
    void *arg, struct sp_err *e)
{
	struct list l = { x, fn, arg };

	return sp_db_snap_each(x->db, NULL, x->conf.node, drop_taking, &l, e);
}

int
sp_snap_remove_all(struct sp_ctx *x, const char *id, struct sp_err *e)
{
	char dir[SP_PATH_MAX], p[SP_PATH_MAX];
	struct dirent *d;
	DIR *dp;
	int rc = 0;

	if (snap_dir(x, id, NULL, dir, sizeof dir, e) == -1)
		return -1;
	if ((dp = opendir(dir)) == NULL)
		return errno == ENOENT ? 0 : sp_err_sys(e, SP_E_IO, "%s", dir);
	while ((d = readdir(dp)) != NULL) {
		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		if (sp_path_fmt(p, sizeof p, e, "%s/%s", dir, d->d_name) == -1 ||
		    sp_subvol_delete(p, e) == -1) {
			rc = -1;
			break;
		}
	}
	closedir(dp);
	if (rc == 0)
		rc = sp_subvol_rmdir(dir, e);
	return rc;
}
