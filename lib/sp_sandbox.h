/*
 * sp_sandbox.h: sandboxes: a command's context, making one, the pool, the lifecycle
 * verbs, snapshots, suspend and restore, the node.  Built on every part
 * below it, the network's included.
 */
#ifndef SP_SANDBOX_H
#define SP_SANDBOX_H

#include "sp_net.h"

/* ---- node: this node's storage and services ---- */
struct sp_node_info {
	char fs[16];		/* "btrfs" */
	int loop;		/* 1 when root is a loop-backed image we made */
	int kvm;		/* 1 when VMs use KVM */
	char virt_type[16];
	char libvirt[64];	/* libvirt version, or "" when it does not answer */
	char quota[8];		/* the btrfs's quotas: "simple", "full", "" */
};
/* Makes root a btrfs filesystem (a loop-backed image of loop_bytes when it is
 * not and loop_bytes > 0), creates the layout, migrates the DB, checks that
 * libvirt answers.  Idempotent. */
int sp_node_init(const struct sp_conf *c, uint64_t loop_bytes,
    struct sp_node_info *info, struct sp_err *e);
/* A node's lease: SPACE_NODE_LEASE seconds (2..86400), else the default;
 * reconcile (every 30 s) renews it, so the default outlives two missed
 * passes. */
#define SP_NODE_LEASE_DEFAULT 90
int sp_node_lease_s(struct sp_err *e);
/* Writes what this node has (memory, vCPUs, free disk, virt type, the
 * templates on its disk) to the DB and renews its lease; out (may be NULL)
 * gets its row as the DB then has it. */
int sp_node_beat(struct sp_ctx *x, int lease_s, struct sp_node_row *out,
    struct sp_err *e);
/* 1 when the lease of this node's last beat has run out by its own clock
 * (it could not renew it: the DB is out of its reach). */
int sp_node_lease_lapsed(const struct sp_conf *c);
/* $SPACE_RUN's directory of the node's own notes (its lease's end), the
 * user space's (space-init), as a beat run as space writes there. */
#define SP_NODE_RUN_DIR	"node"
/* A node whose lease ran out pauses every VM it runs (and marks each
 * $SPACE_RUN/pods/ID.fenced), so that none runs on while the scheduler
 * may restore it elsewhere; reconcile resumes them once the DB says they
 * are still this node's.  fn gets a line per VM. */
int sp_reconcile_fence(struct sp_ctx *x, int (*fn)(json_t *, void *),
    void *arg, struct sp_err *e);

/* ---- sandbox: the lifecycle operations, composed from the modules above ---- */
#define SP_GIB		(1024LL * 1024 * 1024)
#define SP_DISK_GB_MAX	16384	/* ext4 with 4 KiB blocks takes 16 TiB */
struct sp_create_req {
	const char *template;	/* name or name@digest */
	int memory_mib, vcpus;
	int disk_gb;		/* 0: the template's disk; else its size in
				 * GiB, the guest's root grown to it (no
				 * pod: pods have the template's) */
	int cpu_pct;		/* 0: the node's CPU quota (SPACE_CPU_QUOTA);
				 * else its own, in hundredths of a CPU (no
				 * pod: pods have the node's) */
	json_t *labels;		/* object of strings, borrowed; may be NULL */
	json_t *env;		/* array of "K=V" the guest gives calls, or NULL */
	int ready_timeout_ms;	/* boot until the daemon says hello */
	int no_checkpoint;	/* 1: boot cold even when the template is warm */
	int no_pool;		/* 1: do not take a warm pod */
	int pod;		/* 1: make a warm pod (paused, no identity) */
	struct sp_chan **chan;	/* non-NULL: a claim from the pool leaves the
				 * channel it told the guest its identity on
				 * open here (else NULL), for a first call */
	const struct sp_exec *first;	/* with chan: that first call, which
				 * a claim sends ahead (sp_chan_exec_ahead);
				 * once sent, a failure after it is not
				 * retried on another path */
	struct sp_boost *boost;	/* non-NULL: a claim boosts its VM here, for
				 * the caller to end (sp_boost_end) */
	int64_t ttl_s;		/* > 0: it expires this long after it is
				 * made (space-create --ttl) */
	const char *on_expiry;	/* with ttl_s: kill (NULL), pause, suspend */
	const char *idle;	/* non-NULL: its own idle tiers (sp_idle_parse),
				 * not the node's SPACE_IDLE */
	const char *placed_id;	/* non-NULL: the row of this id is there
				 * already, placed on this node by the
				 * scheduler (no pod is claimed for it) */
	const char *name;	/* non-NULL: its name (sp_handle_check),
				 * unique in its tenant */
	const char *request_id;	/* non-NULL: a create of this request id
				 * made before, in this tenant, is given
				 * back instead (marked "existing") */
	const char *volume;	/* non-NULL: a volume of its tenant mounted
				 * at volume_path once it runs (read-only
				 * with volume_ro); a sandbox that cannot
				 * mount it is removed again */
	const char *volume_path;
	int volume_ro;
};
/* A sandbox asked for on no node yet (space-create --anywhere): its row,
 * creating, with node '' and the wish running, for the scheduler to place
 * and that node to make.  r's template must be known to the DB.  Returns
 * 0, or 1 when r's request id had made it already (id is that one's). */
int sp_sandbox_request(struct sp_ctx *x, const struct sp_create_req *r,
    char id[SP_ID_LEN + 1], struct sp_err *e);
/* Creates and boots one sandbox; *out gets {"id","state","template",
 * "create_ms",...}.  On failure everything it made is removed. */
int sp_sandbox_create(struct sp_ctx *x, const struct sp_create_req *r,
    json_t **out, struct sp_err *e);
/* The id a command's operand stands for: an id as it is, a name (any
 * tenant's, and one only) looked up; else bad-input, not-found. */
int sp_sandbox_ref(struct sp_ctx *x, const char *ref, char id[SP_ID_LEN + 1],
    struct sp_err *e);
struct sp_ckpt_info;
/* One new sandbox from a subvolume: a template, a template's checkpoint, a
 * snapshot (space-fork).  With saved, src/mem.sav holds the memory state of
 * domain sp-<saved->id>, which is re-identified and restored; without, the
 * VM boots cold.  Returns when its daemon answered and, unless it is a pod
 * of the pool named, it knows who it is; on failure all it made is gone. */
struct sp_make {
	const char *src;
	const struct sp_ckpt_info *saved;
	const char *template;	/* name@digest, for the row */
	int memory_mib, vcpus;
	int64_t disk_bytes;	/* 0: the source's disk; else grown to it */
	int cpu_pct;		/* 0: the node's CPU quota; else its own */
	json_t *labels, *env;	/* borrowed; may be NULL */
	const char *pool;	/* a pod of this pool, or NULL */
	int ready_timeout_ms;
	/* With pool: run on the ready guest before it is paused. */
	void (*prepare)(struct sp_ctx *x, const char *id);
	/* The row of this id is there already (a placed create): it is used,
	 * and on a failure it is kept, failed, rather than removed. */
	const char *placed_id;
	const char *name, *request_id;	/* its handles, or NULL */
};
int sp_sandbox_make(struct sp_ctx *x, const struct sp_make *m,
    char id[SP_ID_LEN + 1], struct sp_err *e);
/* The files of a VM's directory (a sandbox's, a checkpoint's); sp_jail.c. */
struct sp_vm_files {
	char disk[SP_PATH_MAX], kernel[SP_PATH_MAX], initrd[SP_PATH_MAX];
	char sav[SP_PATH_MAX];		/* its saved memory, when it has one */
};
int sp_vm_files(const char *dir, struct sp_vm_files *f, struct sp_err *e);
/* A create's path without a pod: template t's checkpoint when it was saved
 * as r asks, else a cold boot; with r->pod, prepare is the pod's (see
 * sp_make). */
int sp_sandbox_make_new(struct sp_ctx *x, const struct sp_create_req *r,
    const struct sp_template_row *t, int64_t t0,
    void (*prepare)(struct sp_ctx *, const char *), json_t **out,
    struct sp_err *e);
/* Takes apart what a sandbox is on this node: its VM, disk, rollback
 * leftover and run dir; sets *existed when any was there. */
int sp_sandbox_teardown(struct sp_ctx *x, const char *id, int *existed,
    struct sp_err *e);
/* After a teardown: forgets its egress policy, credentials and row. */
int sp_sandbox_forget(struct sp_ctx *x, const char *id, struct sp_err *e);
/* Removes a sandbox that never had snapshots or stored copies (a half-made
 * create, a pod), under its lock: marks it destroyed, tears it down and
 * forgets it. */
int sp_sandbox_discard(struct sp_ctx *x, const char *id, struct sp_err *e);
/* The pool's claim (sp_pool_claim.c): takes a warm pod of template t if
 * one is ready, claimed in one DB statement, resumed, told who it is.  1
 * with *out when it did, 0 when no pod was ready (or the one taken would
 * not wake: it is removed), -1 on error. */
int sp_pool_claim(struct sp_ctx *x, const struct sp_create_req *r,
    const struct sp_template_row *t, int64_t t0, json_t **out,
    struct sp_err *e);
/* Finishes on its node the claim of a pod that the scheduler took for a
 * create --anywhere (its row creating, its VM paused): resumes it and tells
 * it who it is.  -1 leaves the row creating, for the caller to make the
 * sandbox afresh. */
int sp_pool_claim_finish(struct sp_ctx *x, const char *id, json_t *labels,
    json_t *env, struct sp_err *e);
/* What a new pod does before its pause: rehearses a claim and records
 * what the claim would ask QEMU (sp_make's prepare). */
void sp_pool_prepare(struct sp_ctx *x, const char *id);
/* The warm pool (design.md): space-pool set keeps the wanted size per
 * template; fill makes or removes pods until each pool has that many (fn is
 * told each as JSON, stolen).  Idempotent: what a timer runs. */
int sp_pool_set(struct sp_ctx *x, const char *template, int size,
    int memory_mib, int vcpus, struct sp_err *e);
int sp_pool_fill(struct sp_ctx *x, int (*fn)(json_t *, void *), void *arg,
    struct sp_err *e);

/* Destroys the VM, deletes subvolumes, run dir and rows; *existed says
 * whether there was anything to remove. */
int sp_sandbox_remove(struct sp_ctx *x, const char *id, int *existed,
    struct sp_err *e);
/* The lifecycle verbs of design.md.  Each is idempotent: a sandbox already
 * in the target state is left alone and *changed is 0.  A move the state
 * table forbids is bad-state and changes nothing.  The DB claims the move by
 * compare-and-set before the VM is touched, and is rolled back when libvirt
 * refuses. */
int sp_sandbox_pause(struct sp_ctx *x, const char *id, int *changed,
    struct sp_err *e);
int sp_sandbox_resume(struct sp_ctx *x, const char *id, int *changed,
    struct sp_err *e);
/* The channel to a running sandbox of this node, for a call (exec, files,
 * processes): sp_chan_open_running, but a sandbox that idle tiers steer
 * (its own or SPACE_IDLE) and that is paused is resumed first: a call
 * wakes it.  Its guest daemon has SPACE_HELLO_TIMEOUT_MS (default
 * SP_HELLO_TIMEOUT_MS) to answer the hello, else timed-out. */
#define SP_HELLO_TIMEOUT_MS	30000
int sp_sandbox_chan(struct sp_ctx *x, const char *id, struct sp_chan **c,
    struct sp_err *e);
/* What a call does to a sandbox of this node before it calls: 0 when it
 * runs, or was paused, steered by idle tiers, and is resumed now;
 * bad-state when it is in another state (or paused by a user's wish). */
int sp_sandbox_wake(struct sp_ctx *x, const char *id, struct sp_err *e);
/* Asks the guest to power off, waits up to timeout_ms, then forces it. */
int sp_sandbox_stop(struct sp_ctx *x, const char *id, int timeout_ms,
    int *changed, int *forced, struct sp_err *e);
/* Cold boot from the sandbox's own disk; returns when the daemon answers. */
int sp_sandbox_start(struct sp_ctx *x, const char *id, int ready_timeout_ms,
    int *changed, struct sp_err *e);


/* One pass of the node-local reconcile loop: every sandbox of this node
 * whose record and VM disagree, or that a dead command left in a transient
 * state, is brought to a legal state; orphan domains and subvolumes of this
 * root are removed.  fn is told each action as a JSON object (stolen). */
/* ---- schedule: a node for each sandbox wished somewhere (sp_schedule.c) ---- */
struct sp_sched_opts {
	int limit;		/* rows a pass places at most */
	double vcpu_ratio;	/* vCPUs given per host CPU */
	double memory_ratio;	/* memory given per MiB of the host's */
	int lost_after_s;	/* a lease lapsed this long: its node is lost */
	int recover;		/* 1: restore a lost node's backed-up sandboxes
				 * elsewhere */
	/* The rows of a create --anywhere that may take, instead, a warm
	 * pod waiting on the node they are placed on: the pod's id then
	 * replaces the row's here, and the row is gone. */
	char (*claim_ids)[SP_ID_LEN + 1];
	size_t nclaim;
};
#define SP_SCHED_LIMIT		1000
#define SP_SCHED_VCPU_RATIO	8.0
#define SP_SCHED_MEMORY_RATIO	1.0
/* Past its lease, a node that cannot reach the DB has paused its VMs
 * (space-reconcile); this much later the scheduler calls it lost. */
#define SP_SCHED_LOST_AFTER_S	60
#define SP_SCHED_DEFAULTS { SP_SCHED_LIMIT, SP_SCHED_VCPU_RATIO, \
	SP_SCHED_MEMORY_RATIO, SP_SCHED_LOST_AFTER_S, 1, NULL, 0 }
/* One pass in one transaction: the sandboxes of nodes lost (lease lapsed
 * o->lost_after_s ago) become lost, and with o->recover those with a
 * restorable snapshot are unplaced; then up to o->limit unplaced sandboxes
 * get a node (fn gets a line for each, "lost", "recovering", "placed" with
 * why, or "unplaced" with why not, once the pass is committed; fn may be
 * NULL); *placed counts them. */
int sp_schedule_pass(struct sp_ctx *x, const struct sp_sched_opts *o,
    int (*fn)(json_t *, void *), void *arg, int *placed, struct sp_err *e);

/* Carries out the wishes recorded for this node's sandboxes (a state asked
 * by a command on another node): each that is done is cleared, each that
 * fails is given its error (want_error) for whoever waits on it.  Those
 * that failed before are tried again only with failed_too (a full pass;
 * not on every wake-up, which their own error would cause). */
int sp_reconcile_wishes(struct sp_ctx *x, int failed_too,
    int (*fn)(json_t *, void *), void *arg, struct sp_err *e);
int sp_reconcile_once(struct sp_ctx *x, int (*fn)(json_t *, void *),
    void *arg, struct sp_err *e);

/* What a running sandbox's daemon says: seconds since anything happened
 * in it and the calls it served (each -1 when it does not answer in 2 s,
 * or says one out of bounds). */
void sp_sandbox_activity(struct sp_ctx *x, const char *id, long long *idle_s,
    long long *calls);

/* The record space-ls prints for a row: DB joined with libvirt and btrfs. */
/* Waits, woken by the DB (sp_db_wait: the caller listens first), until id
 * is in state with no wish left, and gives its row; the error its node
 * reported for the wish (want_error), or timed-out (temp) after
 * timeout_ms.  For "destroyed", a row that is gone will do. */
int sp_sandbox_wait(struct sp_ctx *x, const char *id, const char *state,
    int timeout_ms, struct sp_sandbox_row *out, struct sp_err *e);
int sp_sandbox_describe(struct sp_ctx *x, const struct sp_sandbox_row *r,
    json_t **out, struct sp_err *e);
/* Tells a booted guest its id (and host name), labels, environment (for
 * calls that bring none) and a fresh seed for its random generator (copies
 * of one checkpoint would share it).  labels and env may be NULL.  With
 * keep, the channel stays open in *keep for a call after it; with first
 * too, that call is sent ahead (in the hello's own write with with_hello),
 * and *sent says whether it went. */
int sp_sandbox_identify(struct sp_ctx *x, const char *id, json_t *labels,
    json_t *env, struct sp_chan **keep, const struct sp_exec *first,
    int with_hello, int *sent, struct sp_err *e);
/* sp_sandbox_identify with neither. */
int sp_sandbox_hand_identity(struct sp_ctx *x, const char *id, json_t *labels,
    json_t *env, struct sp_err *e);
/* Sets the guest's clock to the host's (after a resume: a paused VM's clock
 * stands still). */
int sp_sandbox_sync_clock(struct sp_ctx *x, const char *id, struct sp_err *e);
/* Runs argv in the sandbox's guest with no input and its output dropped:
 * the channel waited for up to open_ms, the command killed after exec_ms
 * (0: never); *status as sp_chan_exec gives it. */
int sp_sandbox_exec_quiet(struct sp_ctx *x, const char *id, char *argv[],
    int open_ms, int exec_ms, int *status, struct sp_err *e);
/* The run dir QEMU makes the channel sockets in (its group may write). */

/* ---- jail: each VM's uid, directories and limits (sp_jail.c) ---- */
struct sp_jail {
	unsigned uid, gid;		/* 0 when SPACE_JAIL is off */
};
int sp_jail_on(const struct sp_conf *c);
/* id's uid and gid, reserved for it on this node the first time. */
int sp_jail_get(struct sp_ctx *x, const char *id, struct sp_jail *j,
    struct sp_err *e);
/* Gives id's uid back (its VM was undefined). */
void sp_jail_release(struct sp_ctx *x, const char *id);
/* The run directory of id's VM (run), gone with the VM: space-noded's
 * vm-release when x goes through it (the directory is the jail's, in
 * root's SPACE_RUN), else removed here; and its pod record and boost mark
 * (sp_pod_forget). */
int sp_jail_run_remove(struct sp_ctx *x, const char *id, const char *run,
    struct sp_err *e);
/* Frees the uids of ids for which in_use says 0; *freed counts them. */
int sp_jail_gc(struct sp_ctx *x, int (*in_use)(struct sp_ctx *, const char *),
    int *freed, struct sp_err *e);
/* The jail that VM dom's definition, or the save image at path, names (a
 * uid of 0: none, a VM made before the jail or with it off). */
int sp_jail_of_vm(struct sp_ctx *x, const char *dom, struct sp_jail *j,
    struct sp_err *e);
int sp_jail_of_image(const char *path, struct sp_jail *j, struct sp_err *e);
/* Before a VM of jail j starts: run (the sockets' directory) is made j's
 * alone, and only j's gid may go through dir to its 0600 VM files.  With
 * no jail, run is libvirt-qemu's group's and dir 0755, as before it. */
int sp_jail_dirs(struct sp_ctx *x, const struct sp_jail *j, const char *dir,
    const char *run, struct sp_err *e);
/* The same on the sandbox's directory dfd and run_name in run_parent (made
 * if not there), neither reached through a symlink: space-noded's. */
int sp_jail_dirs_at(const struct sp_jail *j, int dfd, int run_parent,
    const char *run_name, struct sp_err *e);
/* A template's checkpoint at dir (still writable) as the group space, the
 * unprivileged manager's, reads it: dir searchable and its mem.sav
 * readable (an ACL entry each), so that a sandbox can be made from it;
 * nothing when there is no such group or the filesystem has no ACLs. */
int sp_jail_share_ckpt(const char *dir, struct sp_err *e);
/* Before a new VM of id is defined: sp_jail_get, then sp_jail_dirs. */
int sp_jail_prepare(struct sp_ctx *x, const char *id, const char *dir,
    const char *run, struct sp_jail *j, struct sp_err *e);
/* The host's backstop under a sandbox's disk quota (its filesystem's size,
 * which the guest meets first): the subvolume at dir may hold of its own
 * twice its disk (the larger of disk_bytes and disk.raw's size: btrfs keeps
 * a partly overwritten extent whole) and SP_DISK_LIMIT_SLACK for the rest.
 * Set on each new subvolume of a sandbox (create, fork, rollback, restore);
 * nothing when the filesystem has no quotas. */
#define SP_DISK_LIMIT_SLACK (256ull << 20)
int sp_jail_disk_limit(struct sp_ctx *x, const char *dir, int64_t disk_bytes,
    struct sp_err *e);
/* Puts j's uid, the configured limits and whether KSM may merge its pages
 * (SPACE_KSM) in s (after s->memory_mib); a CPU quota s has already (the
 * sandbox's own) stays. */
int sp_jail_spec(struct sp_ctx *x, const struct sp_jail *j,
    struct sp_vm_spec *s, struct sp_err *e);
/* The domain XML a sandbox's VM saved in dir/mem.sav comes back with here:
 * this node's paths, ci's uuid and size, the layout it was saved with, its
 * own CPU quota (cpu_pct, 0 for the node's) and jail j.  The caller frees
 * *xml. */
int sp_sandbox_restore_xml(struct sp_ctx *x, const char *id, const char *dir,
    const struct sp_ckpt_info *ci, int cpu_pct, const struct sp_jail *j,
    char **xml, struct sp_err *e);
/* After VM dom started: its memory (guest memory and SPACE_MEM_OVERHEAD_MIB)
 * and pids (SPACE_PIDS_MAX) limits, and its CPU weight file space's. */
int sp_jail_started(struct sp_ctx *x, const char *dom, struct sp_err *e);
/* Writes them, mem bytes and pids (0: none), in the cgroups of dom's QEMU,
 * and gives space its weight file (sp_boost_give): sp_jail_started's, or
 * space-noded's for it. */
int sp_jail_limit(const char *dom, unsigned long long mem, long pids,
    struct sp_err *e);
/* Removes the v1 pids cgroups of ended VMs (reconcile, each pass):
 * sp_jail_pids_sweep, or space-noded's for it. */
int sp_jail_pids_tidy(struct sp_ctx *x, struct sp_err *e);
void sp_jail_pids_sweep(void);


/* ---- snap: snapshots, rollback, fork, retention (design.md) ---- */
/* A disk snapshot, or with SP_SNAP_FULL a checkpoint of disk and memory;
 * *out gets its JSON line.  A running guest's root is frozen around a disk
 * snapshot unless SP_SNAP_NO_FREEZE.  Tag (may be NULL) keeps it from
 * space-gc. */
#define SP_SNAP_FULL		1
#define SP_SNAP_NO_FREEZE	2
int sp_snap_take(struct sp_ctx *x, const char *id, int flags,
    const char *tag, json_t **out, struct sp_err *e);
/* The same, the sandbox's lock held by the caller; r gets the row. */
int sp_snap_take_locked(struct sp_ctx *x, const char *id, int flags,
    const char *tag, struct sp_snap_row *r, json_t **out, struct sp_err *e);
/* A sandbox's snapshots, oldest first, as JSON lines given to fn. */
int sp_snap_list(struct sp_ctx *x, const char *id,
    int (*fn)(json_t *, void *), void *arg, struct sp_err *e);
/* Idempotent: *removed says whether there was anything. */
int sp_snap_remove(struct sp_ctx *x, const char *id, const char *snap,
    int *removed, struct sp_err *e);
/* Keeps the state now as a snapshot, then puts the sandbox on snap: restored
 * from its memory (full) or booted on its disk; running after. */
int sp_snap_rollback(struct sp_ctx *x, const char *id, const char *snap,
    json_t **out, struct sp_err *e);
/* For reconcile, the sandbox's lock held: a failed sandbox goes back to its
 * newest full checkpoint; a recovering one finishes the move its record
 * names.  *snap gets the snapshot. */
int sp_snap_recover_locked(struct sp_ctx *x, const struct sp_sandbox_row *sb,
    char snap[SP_ID_LEN + 1], struct sp_err *e);
/* count new sandboxes from snap, or (snap NULL) from a snapshot taken now:
 * full when the source runs.  One JSON line per fork to fn. */
int sp_snap_fork(struct sp_ctx *x, const char *id, const char *snap,
    int count, int (*fn)(json_t *, void *), void *arg, struct sp_err *e);
/* Deletes the ready snapshots no tier of SPACE_RETAIN keeps (dry_run: only
 * tells); one JSON line per snapshot to fn. */
int sp_snap_gc(struct sp_ctx *x, int dry_run, int (*fn)(json_t *, void *),
    void *arg, struct sp_err *e);
/* Clears snapshots a dead command left "taking" (rows and subvolumes). */
int sp_snap_drop_unfinished(struct sp_ctx *x, int (*fn)(json_t *, void *),
    void *arg, struct sp_err *e);
/* Deletes snapshots/<id>/ and every snapshot in it. */
int sp_snap_remove_all(struct sp_ctx *x, const char *id, struct sp_err *e);

/* ---- expiry: a sandbox's lifetime (sp_expiry.c) ---- */
/* Carries out every expiry of this node that is due: one JSON line each
 * to fn ({"id","ok","action":"expired","on_expiry","expires","changed"}). */
int sp_expiry_run(struct sp_ctx *x, int (*fn)(json_t *, void *), void *arg,
    struct sp_err *e);

/* ---- suspend: sandboxes to the object store and back (design.md) ---- */
int sp_suspend(struct sp_ctx *x, const char *id, int keep_local, json_t **out,
    struct sp_err *e);
/* A running or paused sandbox of this node to the store as it is now, while
 * it goes on: a full checkpoint, sent as a suspend sends one; it becomes
 * the sandbox's restorable snapshot (older ones are superseded), from which
 * a node takes it back when this one is lost. */
int sp_backup(struct sp_ctx *x, const char *id, json_t **out, struct sp_err *e);
/* node NULL or this node: restore here; else ask that node (its reconcile);
 * "" asks the scheduler to pick one (space-schedule). */
int sp_restore(struct sp_ctx *x, const char *id, const char *node,
    json_t **out, struct sp_err *e);
/* For reconcile, the lock held: restores a sandbox placed on this node. */
int sp_restore_locked(struct sp_ctx *x, const char *id, json_t **out,
    struct sp_err *e);
/* Deletes from the object store what id's snapshots put there (space-rm). */
int sp_remote_forget(struct sp_ctx *x, const char *id, struct sp_err *e);
/* space-key rotate: re-wraps the data keys of the tenant's restorable
 * snapshots with keyref (no data moves) and makes it the tenant's key. */
int sp_key_rotate(struct sp_ctx *x, const char *tenant, const char *keyref,
    int (*fn)(json_t *, void *), void *arg, struct sp_err *e);

/* ---- template_warm: a template's booted checkpoint ---- */
struct sp_warm {
	int memory_mib, vcpus;
	const char *start;	/* sh -c START, detached, before the save */
	int start_image;	/* 1: the image's Entrypoint + Cmd, detached */
	const char *ready;	/* sh -c READY until it exits 0 ... */
	int ready_timeout_s;	/* ... within this many seconds (0: 120) */
};
/* Boots the template once and keeps its saved memory state beside it; a
 * second warm-up (or a concurrent one) with the same start and ready
 * commands finds it made ("reused"), one with others makes it anew.  The
 * save comes after the start command is started and the ready command
 * succeeded: what the start command serves is up in every copy.  A ready
 * command that never succeeds is timed-out, and nothing is saved. */
int sp_template_warm(struct sp_ctx *x, const char *ref, const struct sp_warm *w,
    json_t **out, struct sp_err *e);

/* ---- volumes (sp_volume.c): disks apart from sandboxes, mounted in them ---- */
/* One entry of a POSIX ACL in the kernel's xattr format (a struct
 * posix_acl_xattr_entry; sp_jail.c writes them too). */
struct posix_acl_xattr_entry;
void sp_acl_entry(struct posix_acl_xattr_entry *a, int tag, int perm,
    unsigned id);
/* ROOT/volumes made if missing; run as root, made root:space 0751 (the
 * VMs search it, the manager lists it) when the user space exists. */
int sp_volume_area(const char *root, struct sp_err *e);
/* A mount path: absolute, not /, no empty, . or .. parts, <= 255 bytes. */
int sp_volume_path_check(const char *path, struct sp_err *e);
/* A new volume of bytes (whole MiB), or a writable copy of from
 * ("VOLUME@SNAP", its size), named name in tenant ("" none) on this node. */
int sp_volume_create(struct sp_ctx *x, const char *name, const char *tenant,
    int64_t bytes, const char *from, json_t **out, struct sp_err *e);
/* Removes a volume mounted nowhere with its snapshots, or with
 * "VOLUME@SNAP" that snapshot alone. */
int sp_volume_rm(struct sp_ctx *x, const char *tenant, const char *ref,
    struct sp_err *e);
/* A read-only snapshot; a read-write mount's guest freezes the filesystem
 * meanwhile ("consistent" false when its guest was not running). */
int sp_volume_snap(struct sp_ctx *x, const char *tenant, const char *ref,
    const char *snap, json_t **out, struct sp_err *e);
json_t *sp_volume_json(const struct sp_volume_row *v);
/* Mounts volume ref (of the sandbox's tenant) in running sandbox id at
 * path: in-use when another sandbox mounts it read-write, or any does and
 * ro is 0.  The caller holds the sandbox's lock. */
int sp_volume_attach(struct sp_ctx *x, const char *id, const char *ref,
    const char *path, int ro, int *changed, struct sp_err *e);
/* Unmounts it in the guest (busy while a file there is open), unplugs it
 * and lets it go; a stopped sandbox just lets it go; a paused, suspended
 * or failed one (whose memory has it mounted) is bad-state. */
int sp_volume_detach(struct sp_ctx *x, const char *id, const char *ref,
    int *changed, struct sp_err *e);
/* How many of this node's volumes sandbox id mounts. */
int sp_volume_count(struct sp_ctx *x, const char *id, size_t *n,
    struct sp_err *e);
/* A full checkpoint of sandbox id being taken into dst (its VM paused):
 * dst/volumes.json says which volumes its VM has plugged where (PCIe bus,
 * target) and at which path, and dst/volumes/VOLID.raw holds a clone of
 * each read-write one's image at this instant. */
int sp_volume_capture(struct sp_ctx *x, const char *id, const char *dst,
    struct sp_err *e);
/* Before sandbox id's VM is restored from the checkpoint copied to dir:
 * each volume of dir/volumes.json mounted in it again in its row (in-use
 * when another sandbox has it so that this one cannot), a read-write
 * one's image put back to the checkpoint's (and moved to this node when
 * it was on another), with uid (its VM's) let in; out[0..*n) are the disks
 * the restored VM must have.  copy: id is a new sandbox made from another's
 * checkpoint (a fork), which may share read-only volumes only. */
#define SP_VOLUMES_MAX	8
struct sp_volume_plug {
	struct sp_vm_volume vm;
	char disk[SP_PATH_MAX];
	char serial[SP_ID_LEN + 1];
};
int sp_volume_restore(struct sp_ctx *x, const char *id, const char *dir,
    unsigned uid, int copy, struct sp_volume_plug *out, int max, int *n,
    struct sp_err *e);
/* What sp_volume_restore would refuse, found before anything changes (a
 * rollback asks before it takes the VM down). */
int sp_volume_restore_check(struct sp_ctx *x, const char *id,
    const char *dir, struct sp_err *e);
/* out[0..n)'s disks, as a VM spec takes them. */
void sp_volume_spec(struct sp_vm_spec *s, const struct sp_volume_plug *p,
    int n, struct sp_vm_volume *vols);
/* Volume subvolumes no row of this node claims (a removal cut short, a
 * volume that moved away), older than a minute: deleted. */
int sp_volume_gc(struct sp_ctx *x, int *removed, struct sp_err *e);
/* A removed sandbox's mounts let go. */
int sp_volume_forget(struct sp_ctx *x, const char *id, struct sp_err *e);
/* A sandbox whose VM came up without its volumes (a cold start, a restore
 * of memory saved before they were plugged) gets each plugged and mounted
 * again where its row says. */
int sp_volume_replug(struct sp_ctx *x, const char *id, struct sp_err *e);

#endif
