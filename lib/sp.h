/*
 * sp.h: the one public header of libspace, the library under every space-*
 * command.  Every symbol is sp_<module>_<verb>; functions return 0 or -1 and
 * fill a struct sp_err; they never print and never exit.
 */
#ifndef SP_H
#define SP_H

#include <stddef.h>
#include <stdio.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>

/* ---- exit statuses (design.md) ---- */
#define SP_EXIT_OK	0
#define SP_EXIT_FAIL	1	/* some item failed */
#define SP_EXIT_USAGE	100	/* usage or bad input */
#define SP_EXIT_TEMP	111	/* temporary failure: a retry may help */

/* ---- err: stable error tokens + message ---- */
/* The error tokens: the "error" of a command's JSON line, the code of a
 * guest's error frame.  Their names are in sp_err.c; a new one is added to
 * both and to the list in docs/design.md. */
enum sp_code {
	SP_E_NONE,		/* no error set */
	SP_E_AUDIT,
	SP_E_BAD_INPUT,
	SP_E_BAD_STATE,
	SP_E_BTRFS,
	SP_E_BUSY,
	SP_E_CORRUPT,
	SP_E_DB,
	SP_E_DENIED,
	SP_E_EXEC_FAILED,
	SP_E_EXISTS,
	SP_E_EXPIRED,
	SP_E_FETCH,
	SP_E_FULL,
	SP_E_GONE,
	SP_E_GUEST,
	SP_E_IN_USE,
	SP_E_INTERNAL,
	SP_E_IO,
	SP_E_KEY_REVOKED,
	SP_E_KILLED,
	SP_E_KMS,
	SP_E_LIBVIRT,
	SP_E_NO_SPACE,
	SP_E_NOMEM,
	SP_E_NOT_BTRFS,
	SP_E_NOT_EMPTY,
	SP_E_NOT_FOUND,
	SP_E_NOT_INITIALIZED,
	SP_E_NOT_RESTORABLE,
	SP_E_NOT_RUNNING,
	SP_E_PARTIAL,
	SP_E_PROTOCOL,
	SP_E_QEMU,
	SP_E_RATE_LIMITED,
	SP_E_RESEED_FAILED,
	SP_E_STOPPED,
	SP_E_TIMED_OUT,
	SP_E_TLS,
	SP_E_TOO_BIG,
	SP_E_VAULT,
	SP_E__COUNT
};

struct sp_err {
	enum sp_code code;	/* SP_E_NONE until an error is set */
	int temp;		/* 1 when a retry may help */
	char msg[512];
};

/* The token's name ("not-found"), "" for SP_E_NONE. */
const char *sp_code_name(enum sp_code code);
/* The token named name; -1 when there is none (a guest's unknown code). */
int sp_code_of(const char *name, enum sp_code *code);

/* All return -1 so that `return sp_err_set(...)` reads naturally. */
int sp_err_set(struct sp_err *e, enum sp_code code, int temp,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Like sp_err_set, appends ": strerror(errno)"; temp is derived from errno. */
int sp_err_sys(struct sp_err *e, enum sp_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sp_err_clear(struct sp_err *e);
/* The exit status an error maps to: 111 when temp, 100 for bad-input, else 1. */
int sp_err_exit(const struct sp_err *e);

/* ---- io: byte-level helpers both sides share (sp_io.c) ---- */
/* All of buf to fd, again after EINTR; -1 with errno on error. */
int sp_write_all(int fd, const void *buf, size_t n);
uint32_t sp_be32_get(const unsigned char *p);
void sp_be32_put(unsigned char *p, uint32_t v);

/* ---- tar: packing a tree, on both sides (sp_tar.c) ---- */
struct archive;
#define SP_TAR_ONE_FS	1	/* do not cross into other mounts */
/* src packed into w (opened by the caller) as entries named from top (its
 * last component replaced by top); bad-input, not-found or io. */
int sp_tar_pack(struct archive *w, const char *src, const char *top,
    int flags, struct sp_err *e);

/* ---- out: JSON lines on stdout, human lines on stderr ---- */
void sp_out_init(const char *prog);
/*
 * The start of every command's main: sp_out_init, then --help (usage() on
 * stdout, exit 0) and --version ("prog VERSION", exit 0) wherever they stand
 * before "--".  usage() writes to sp_usage_stream() and ends with
 * sp_usage_exit(): stderr and exit 100 for a mistake, stdout and 0 for help.
 */
void sp_cli_init(int argc, char *argv[], void (*usage)(void));
FILE *sp_usage_stream(void);
_Noreturn void sp_usage_exit(void);
const char *sp_out_prog(void);
/* Prints obj as one compact line and flushes; steals the reference. */
int sp_out_json(json_t *obj);
/* {"id":id,"ok":false,"error":code,"msg":msg} + "prog: id: msg" on stderr.
 * Returns sp_err_exit(e).  id may be NULL. */
int sp_out_fail(const char *id, const struct sp_err *e);
/* {"id":id,"ok":true, ...fields of extra}; steals extra (may be NULL). */
int sp_out_ok(const char *id, json_t *extra);
void sp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- each: the input loop every command shares ---- */
/* rec is the JSON object of the line when stdin carried JSON lines, else NULL. */
typedef int (*sp_item_fn)(const char *id, json_t *rec, void *ctx);
/* Items from argv, or with argc == 0 one per line on stdin (a bare id, or a
 * JSON object carrying "id").  A malformed line is reported and skipped.
 * Returns the largest status any item returned (0 when all were ok). */
int sp_each(int argc, char **argv, sp_item_fn fn, void *ctx);
#define SP_LINE_MAX	65536	/* one stdin line, JSON included */
/* The body of a command acting on sandbox ids: opens *x (libvirt too when
 * with_virt; x may sit inside arg), runs fn(id, rec, arg) over the items as
 * sp_each does, closes *x; returns the exit status. */
struct sp_ctx;
int sp_each_sandbox(int argc, char **argv, struct sp_ctx *x, int with_virt,
    sp_item_fn fn, void *arg);

/* ---- verb: a command that moves sandboxes to one state (sp_verb.c) ---- */
#define SP_VERB_TIMEOUT_MAX_S	3600
struct sp_verb {
	const char *state;	/* the state its JSON line names */
	int timeout_ms;		/* --timeout's default; 0: no --timeout */
	/* Sets *changed, and *forced when the verb can force (else it stays
	 * -1 and the line has no "forced"). */
	int (*act)(struct sp_ctx *x, const char *id, int timeout_ms,
	    int *changed, int *forced, struct sp_err *e);
};
/* The whole command: options, ids from argv or stdin, one line each. */
int sp_verb_main(int argc, char *argv[], const struct sp_verb *v,
    void (*usage)(void));

/* ---- conf: /etc/space/space.conf + SPACE_* environment ---- */
#define SP_PATH_MAX	4096
struct sp_conf {
	char root[SP_PATH_MAX];		/* SPACE_ROOT, default /var/lib/space */
	char db[SP_PATH_MAX];		/* SPACE_DB, default sqlite:$root/space.db */
	char store[SP_PATH_MAX];	/* SPACE_STORE, default file://$root/objects */
	char libvirt_uri[256];		/* SPACE_LIBVIRT_URI, default qemu:///system */
	char node[64];			/* SPACE_NODE, default the host name */
	char run[SP_PATH_MAX];		/* SPACE_RUN, default /run/space */
	char virt_type[16];		/* SPACE_VIRT_TYPE: auto | kvm | qemu */
	char retain[256];		/* SPACE_RETAIN: snapshot tiers */
	char kms[SP_PATH_MAX];		/* SPACE_KMS: key service of tenants
					 * without one of their own */
};
/* Reads SPACE_CONF (default /etc/space/space.conf) when it exists, then the
 * environment; every value is validated. */
int sp_conf_load(struct sp_conf *c, struct sp_err *e);

/* ---- retain: which snapshots the retention tiers keep (design.md) ---- */
/* KIND:PERIOD:KEEP, separated by spaces or commas: in each of the KEEP
 * newest PERIODs (s, m, h, d, w) that hold a snapshot of KIND (disk|full),
 * the newest snapshot is kept.  A snapshot any tier keeps is kept. */
#define SP_RETAIN_DEFAULT "disk:5m:12 disk:1h:24 disk:1d:7 full:1h:3"
#define SP_TIERS_MAX 16
struct sp_tier {
	char kind[8];
	int64_t period_s;
	int keep;
};
/* Parses spec into t[0..max) (*n of them); t may be NULL to only check. */
int sp_retain_parse(const char *spec, struct sp_tier *t, int max, int *n,
    struct sp_err *e);
struct sp_retain_item {
	const char *kind;
	int64_t taken;		/* unix seconds */
	int tagged;		/* kept until removed */
	int keep;		/* out: 1 when some tier (or the tag) keeps it */
};
/* Marks keep on each of items[0..n), in any order. */
void sp_retain_select(const struct sp_tier *t, int nt,
    struct sp_retain_item *items, size_t n);

/* ---- id: sandbox ids and user-supplied names ---- */
#define SP_ID_LEN	12	/* lowercase base32: a-z 2-7 */
#define SP_NAME_MAX	64
#define SP_LABEL_MAX	256
int sp_id_new(char out[SP_ID_LEN + 1], struct sp_err *e);
int sp_id_valid(const char *s);			/* 1 or 0 */
/* bad-input unless id is a well-formed sandbox id. */
int sp_id_check(const char *s, struct sp_err *e);
/* A name: 1..SP_NAME_MAX bytes of [A-Za-z0-9._-], not starting with '.' or '-'. */
int sp_name_check(const char *what, const char *s, struct sp_err *e);
/* A label "k=v": k a name, v valid UTF-8 without control chars, bounded. */
int sp_label_check(const char *kv, struct sp_err *e);
int sp_utf8_valid(const char *s, size_t n);	/* 1 or 0 */

/* ---- state: the lifecycle state machine (design.md), one table ---- */
enum sp_state {
	SP_ST_CREATING,
	SP_ST_RUNNING,
	SP_ST_PAUSED,
	SP_ST_STOPPED,
	SP_ST_SUSPENDING,
	SP_ST_SUSPENDED,
	SP_ST_RESTORING,
	SP_ST_FAILED,
	SP_ST_RECOVERING,
	SP_ST_DESTROYED,
	SP_ST__COUNT
};
const char *sp_state_name(enum sp_state s);
int sp_state_parse(const char *name);		/* enum value or -1 */
int sp_state_can(enum sp_state from, enum sp_state to);	/* 1 or 0 */

/* ---- db: the state DB (SQLite), schema with versioned migrations ---- */
struct sp_db;
struct sp_sandbox_row {
	char id[SP_ID_LEN + 1];
	enum sp_state state;
	int64_t gen;			/* bumped by every transition */
	char template[2 * SP_NAME_MAX + 2];	/* name@digest */
	char node[64];
	int64_t created;		/* unix seconds */
	int memory_mib;
	int vcpus;
	char *labels;			/* JSON object text; owned, free with sp_db_row_release */
	int pod;			/* 1: a warm-pool pod, nobody's sandbox yet */
	char *env;			/* JSON array of "K=V"; owned like labels */
	char *recovered;		/* JSON object or NULL; owned like labels */
};
void sp_db_row_release(struct sp_sandbox_row *r);
int sp_db_open(struct sp_db **db, const struct sp_conf *c, struct sp_err *e);
void sp_db_close(struct sp_db *db);
/* Commits of this command leave the WAL's checkpoint to a later command
 * unless the WAL is far over its bound: for a caller's critical path. */
void sp_db_checkpoint_later(struct sp_db *db);
int sp_db_schema_version(struct sp_db *db);
int sp_db_sandbox_insert(struct sp_db *db, const struct sp_sandbox_row *r,
    struct sp_err *e);
/* What a rollback or a recovery did to a sandbox, as a JSON object. */
int sp_db_sandbox_set_recovered(struct sp_db *db, const char *id,
    const char *json, struct sp_err *e);
/* A snapshot (design.md): state "taking" until it is whole, then "ready". */
struct sp_snap_row {
	char id[SP_ID_LEN + 1];
	char snap[SP_ID_LEN + 1];
	char kind[8];			/* disk | full */
	int64_t taken;			/* unix seconds */
	char tag[SP_NAME_MAX + 1];	/* "" when none */
	char state[16];
	int64_t ms, paused_ms;		/* paused_ms -1 for disk snapshots */
	char remote[16];		/* "", "uploading" or "restorable" */
};
int sp_db_snap_insert(struct sp_db *db, const struct sp_snap_row *r,
    struct sp_err *e);
int sp_db_snap_ready(struct sp_db *db, const struct sp_snap_row *r,
    struct sp_err *e);
int sp_db_snap_delete(struct sp_db *db, const char *id, const char *snap,
    struct sp_err *e);
int sp_db_snap_get(struct sp_db *db, const char *id, const char *snap,
    struct sp_snap_row *r, struct sp_err *e);	/* not-found */
/* Deletes the rows of id's snapshots that are not in the object store. */
int sp_db_snap_drop_local(struct sp_db *db, const char *id, struct sp_err *e);
/* Where a snapshot's upload is: NULL, "uploading", "restorable". */
int sp_db_snap_set_remote(struct sp_db *db, const char *id, const char *snap,
    const char *remote, struct sp_err *e);
/* Puts a sandbox on node, with what that node is to do (want, may be NULL:
 * nothing; "running": restore it). */
int sp_db_sandbox_place(struct sp_db *db, const char *id, const char *node,
    const char *want, struct sp_err *e);
int sp_db_sandbox_want(struct sp_db *db, const char *id, char *out, size_t n,
    struct sp_err *e);
/* The key service each tenant's data keys are wrapped by (space-key). */
int sp_db_tenant_key_set(struct sp_db *db, const char *tenant,
    const char *keyref, struct sp_err *e);
int sp_db_tenant_key_get(struct sp_db *db, const char *tenant, char *out,
    size_t n, struct sp_err *e);	/* not-found */
int sp_db_tenant_key_each(struct sp_db *db,
    int (*fn)(const char *tenant, const char *keyref, int64_t updated, void *),
    void *arg, struct sp_err *e);
/* A sandbox's snapshots (all when id is NULL; only those of sandboxes of
 * node when it is not NULL), oldest first. */
int sp_db_snap_each(struct sp_db *db, const char *id, const char *node,
    int (*fn)(const struct sp_snap_row *, void *), void *arg,
    struct sp_err *e);
int sp_db_sandbox_get(struct sp_db *db, const char *id,
    struct sp_sandbox_row *r, struct sp_err *e);	/* not-found */
/* Calls fn for each row (state filter ignored when < 0); warm-pool pods
 * are left out unless state is SP_DB_WITH_PODS. */
#define SP_DB_WITH_PODS	(-2)
int sp_db_sandbox_each(struct sp_db *db, int state,
    int (*fn)(const struct sp_sandbox_row *, void *), void *arg,
    struct sp_err *e);
int sp_db_sandbox_delete(struct sp_db *db, const char *id, struct sp_err *e);
/* The compare-and-set every lifecycle change goes through: in one IMMEDIATE
 * transaction, read the row, check sp_state_can(state, to) and, when
 * expect_gen >= 0, that gen == expect_gen; then set state=to, gen=gen+1.
 * bad-state when the table forbids it or another writer won.  On success
 * *out (may be NULL) holds the new row. */
int sp_db_transition(struct sp_db *db, const char *id, enum sp_state to,
    int64_t expect_gen, struct sp_sandbox_row *out, struct sp_err *e);
struct sp_template_row {
	char name[SP_NAME_MAX + 1];
	char digest[65];		/* sha256 hex */
	int64_t created;
	int64_t disk_bytes;
};
int sp_db_template_insert(struct sp_db *db, const struct sp_template_row *t,
    struct sp_err *e);
/* The newest template of that name (name or name@digest). not-found. */
int sp_db_template_get(struct sp_db *db, const char *ref,
    struct sp_template_row *t, struct sp_err *e);
int sp_db_template_each(struct sp_db *db,
    int (*fn)(const struct sp_template_row *, void *), void *arg,
    struct sp_err *e);
int sp_db_template_delete(struct sp_db *db, const char *name,
    const char *digest, struct sp_err *e);
/* The warm pool: per template, how many pods to keep. */
struct sp_pool_row {
	char template[SP_NAME_MAX + 1];
	int size, memory_mib, vcpus;
	int ready;			/* pods waiting now */
};
int sp_db_pool_set(struct sp_db *db, const char *template, int size,
    int memory_mib, int vcpus, struct sp_err *e);
/* Deletes the pool's row if its size is 0 (a pool whose template is gone). */
int sp_db_pool_drop(struct sp_db *db, const char *template, struct sp_err *e);
int sp_db_pool_each(struct sp_db *db,
    int (*fn)(const struct sp_pool_row *, void *), void *arg,
    struct sp_err *e);
/* Makes a sandbox a pod of pool (or, with NULL, no pod). */
int sp_db_pod_mark(struct sp_db *db, const char *id, const char *pool,
    struct sp_err *e);
/* Claims a ready pod of pool for template (name@digest), memory and vcpus
 * in one statement: it becomes a sandbox with labels, in state creating
 * until the caller has woken it.  1 and *id, 0 when none is ready. */
int sp_db_pod_claim(struct sp_db *db, const char *pool, const char *template,
    int memory_mib, int vcpus, const char *labels, const char *env,
    char id[SP_ID_LEN + 1], struct sp_err *e);
int sp_db_pods_each(struct sp_db *db, const char *pool,
    int (*fn)(const struct sp_sandbox_row *, void *), void *arg,
    struct sp_err *e);
/* Where a template comes from: a path or an http(s) URL for each part. */
struct sp_source_row {
	char name[SP_NAME_MAX + 1];
	char rootfs[SP_PATH_MAX], kernel[SP_PATH_MAX], initrd[SP_PATH_MAX];
};
int sp_db_source_set(struct sp_db *db, const struct sp_source_row *r,
    struct sp_err *e);
int sp_db_source_get(struct sp_db *db, const char *name,
    struct sp_source_row *r, struct sp_err *e);
int sp_db_node_upsert(struct sp_db *db, const char *node, const char *root,
    struct sp_err *e);

/* ---- subvol: btrfs through libbtrfsutil ---- */
int sp_subvol_is_btrfs(const char *path);			/* 1 or 0 */
int sp_subvol_create(const char *path, struct sp_err *e);
/* A snapshot of src at dst; readonly 1 or 0.  exists when dst is there. */
int sp_subvol_snapshot(const char *src, const char *dst, int readonly,
    struct sp_err *e);
/* Deletes a subvolume (and subvolumes below it); absent is not an error. */
int sp_subvol_delete(const char *path, struct sp_err *e);
int sp_subvol_set_readonly(const char *path, int readonly, struct sp_err *e);
int sp_subvol_exists(const char *path);				/* 1 or 0 */
int sp_subvol_readonly(const char *path);			/* 1 or 0 */
/* Bytes of data extents under path that no other file or subvolume shares
 * (FIEMAP, as `btrfs filesystem du` counts "exclusive"). */
int sp_subvol_exclusive_bytes(const char *path, uint64_t *out,
    struct sp_err *e);
/* The UUID a send stream against this subvolume names: its received_uuid
 * when it was received (*received 1), else its own UUID. */
int sp_subvol_lineage(const char *path, char out[37], int *received,
    struct sp_err *e);

/* ---- virt: libvirt ---- */
struct sp_virt;
struct sp_vm_spec {
	const char *name;		/* sp-<id> */
	int memory_mib;
	int vcpus;
	const char *kernel, *initrd;
	const char *cmdline;		/* NULL or "": SP_VIRT_CMDLINE, or
					 * SP_VIRT_CMDLINE_TCG for qemu */
	const char *disk;		/* raw image */
	const char *chan_dir;		/* /run/space/<id>: space.N.sock, console.log */
	int nports;			/* virtio-serial ports space.0 .. space.N-1 */
	const char *virt_type;		/* "kvm" or "qemu" */
	const char *uuid;		/* NULL: libvirt picks one */
	int shared_vectors;		/* 1: libvirt's default virtio-serial
					 * controller (31 ports, every queue on
					 * one interrupt vector), as VMs saved
					 * before 2026-12 have it; 0: ports for
					 * ours alone, a vector per queue */
	int no_egress;			/* 1: no egress port (VMs saved before
					 * 2026-11-30 have none) */
};
#define SP_PORTS_DEFAULT	8
#define SP_PORTS_MAX		31	/* one virtio-serial controller's */
/* The devices a saved VM must find again when it is restored: QEMU loads
 * its state only into the virtio-serial layout it was saved with. */
struct sp_vm_layout {
	int shared_vectors;		/* as in sp_vm_spec */
	int nports;			/* space.0 .. space.N-1 */
	int egress;			/* has the egress port */
};
/* What a VM booted, not restored, gets: this build's layout, unless
 * SPACE_VM_LAYOUT says "shared" (the controller of VMs saved before
 * 2026-12) or "pre-egress" (that, and no egress port: VMs saved before
 * 2026-11-30) — to test what restoring those needs, or to go back. */
void sp_virt_boot_layout(struct sp_vm_layout *l);
/* 1 when l is this build's layout (either controller), else 0: a template
 * checkpoint of another is stale, its guest made by an older build. */
int sp_vm_layout_current(const struct sp_vm_layout *l);
/* Where the daemon writes the sandbox's id, host name and labels for the
 * workload (the identity op). */
#define SP_GUEST_IDENTITY_FILE	"/run/space/identity.json"
/* QEMU's own monitor socket in the run directory (sp_qmp.c). */
#define SP_QMP_SOCK	"qmp.sock"
/* A session on it: connected at open, command mode asked for with the first
 * commands (one write); commands without arguments ("cont", "query-kvm");
 * *ret (when not NULL) takes the answer's "return".  Errors: not-running (no
 * monitor there), timeout, qemu, protocol. */
struct sp_qmp;
int sp_qmp_open(struct sp_qmp **q, const char *run_dir, int timeout_ms,
    struct sp_err *e);
int sp_qmp_cmd(struct sp_qmp *q, const char *cmd, json_t **ret,
    struct sp_err *e);
/* n commands in one write, answered in order; rets (may be NULL) has room
 * for n answers. */
int sp_qmp_cmds(struct sp_qmp *q, const char *const cmds[], size_t n,
    json_t *rets[], struct sp_err *e);
void sp_qmp_close(struct sp_qmp *q);
#define SP_VIRT_CMDLINE	"console=ttyS0 root=/dev/vda panic=-1 quiet"
/*
 * What a guest under TCG (virt type qemu) gets after it, by default: 5-9% less
 * of the guest's CPU per call (guests of each, side by side), and with the
 * last three 7% less again.  TCG runs no guest instruction speculatively, so
 * the Spectre mitigations guard nothing there; the guest kernel need not
 * zero each allocation for itself, count pressure stalls, watch its TSC or
 * its lockups, check its own copies to and from user memory or move its
 * stack on every system call; and of the security modules only Landlock
 * stays, which programs in the sandbox may use to confine themselves.  The
 * sandbox's boundary is the VM, none of these.  Nor is its memory limit a
 * cgroup in the guest: the VM's size is the limit, and without the memory
 * controller the guest's kernel charges no page it hands out.  Nor does it
 * compact its memory ahead of need (kcompactd looked twice a second, waking
 * an idle guest): it still compacts when an allocation asks.
 */
#define SP_VIRT_CMDLINE_TCG	SP_VIRT_CMDLINE " mitigations=off " \
	"init_on_alloc=0 psi=0 tsc=reliable nowatchdog lsm=landlock " \
	"cgroup_disable=memory hardened_usercopy=off randomize_kstack_offset=off " \
	"sysctl.vm.compaction_proactiveness=0"
/* The guest kernel's command line of a VM booted here, when its spec names
 * none: SPACE_VM_CMDLINE when set, else SP_VIRT_CMDLINE_TCG for virt type
 * "qemu" and SP_VIRT_CMDLINE for "kvm".  A template checkpoint booted with
 * another is stale (sp_ckpt_current). */
const char *sp_virt_boot_cmdline(const char *virt_type);
/* Opens the connection with a quiet error handler. */
int sp_virt_open(struct sp_virt **v, const char *uri, struct sp_err *e);
void sp_virt_close(struct sp_virt *v);
/* "kvm" when /dev/kvm exists and libvirt offers kvm, else "qemu"; want is
 * "auto", "kvm" or "qemu". */
int sp_virt_pick_type(struct sp_virt *v, const char *want, char out[16],
    struct sp_err *e);
/* The domain XML of a spec; the caller frees *xml. */
int sp_virt_domain_xml(const struct sp_vm_spec *s, char **xml, struct sp_err *e);
int sp_virt_define(struct sp_virt *v, const char *xml, struct sp_err *e);
int sp_virt_start(struct sp_virt *v, const char *name, struct sp_err *e);
/* destroy and undefine: absent (or not running) is not an error. */
int sp_virt_destroy(struct sp_virt *v, const char *name, struct sp_err *e);
int sp_virt_undefine(struct sp_virt *v, const char *name, struct sp_err *e);
int sp_virt_pause(struct sp_virt *v, const char *name, struct sp_err *e);
int sp_virt_resume(struct sp_virt *v, const char *name, struct sp_err *e);
int sp_virt_save(struct sp_virt *v, const char *name, const char *path,
    struct sp_err *e);
/* The memory state to path, the domain left as it was (running or paused). */
int sp_virt_save_memory(struct sp_virt *v, const char *name, const char *path,
    struct sp_err *e);
/* The domain's UUID as text. */
int sp_virt_uuid(struct sp_virt *v, const char *name, char out[37],
    struct sp_err *e);
/* Restores a save image (xml, may be NULL, replaces its domain XML, e.g.
 * for other paths); with name, the domain named is made to run also when
 * the image was saved paused. */
int sp_virt_restore(struct sp_virt *v, const char *path, const char *xml,
    const char *name, struct sp_err *e);
/* Every domain's name, to fn; a non-zero return from fn stops. */
int sp_virt_list(struct sp_virt *v, int (*fn)(const char *, void *),
    void *arg, struct sp_err *e);
/* The domain's XML as libvirt has it; the caller frees *xml. */
int sp_virt_xml(struct sp_virt *v, const char *name, char **xml,
    struct sp_err *e);
/* libvirt's version and the hypervisor's, e.g. "libvirt 9.0.0, QEMU 7.2.0". */
int sp_virt_version(struct sp_virt *v, char *out, size_t n, struct sp_err *e);
/* "running", "paused", "shutoff", "crashed", "absent", ... */
int sp_virt_state(struct sp_virt *v, const char *name, char out[16],
    struct sp_err *e);

/* ---- proto: the host<->guest frame format (design.md), both sides ---- */
/* A frame on the wire: u32 length (big endian) of what follows, u8 type,
 * u32 stream (big endian), payload.  length = 5 + payload length. */
#define SP_PROTO_VERSION	1
#define SP_FRAME_MAX		(1024 * 1024)	/* payload bound */
#define SP_JSON_MAX		(64 * 1024)	/* control message bound */
#define SP_FRAME_HDR		9
#define SP_FRAME_CHUNK		(64 * 1024)	/* data frame and read size */
enum sp_frame_type {
	SP_FR_HELLO = 1,	/* host->guest {"op":"hello","nonce":s}; guest->host
				   {"version":n,"boot_id":s,"nonce":s} */
	SP_FR_REQ = 2,		/* host->guest JSON request, e.g. {"op":"exec",...} */
	SP_FR_STDIN = 3,	/* host->guest data; empty payload = EOF */
	SP_FR_STDOUT = 4,	/* guest->host data */
	SP_FR_STDERR = 5,	/* guest->host data */
	SP_FR_EXIT = 6,		/* guest->host {"status":n} or {"signal":n} */
	SP_FR_ERROR = 7,	/* either way {"error":token,"msg":s} */
	/* The egress port only (space.egress; see "egress tunnel" below). */
	SP_FR_OPEN = 8,		/* guest->host JSON: a new stream */
	SP_FR_DATA = 9,		/* either way: bytes; empty payload = EOF */
	SP_FR_WINDOW = 10,	/* either way: u32 (big endian) more bytes */
	SP_FR_CLOSE = 11,	/* either way: the stream is over; empty */
	SP_FR_ANSWER = 12,	/* host->guest JSON: the answer to a dns OPEN */
	SP_FR__MAX = 12
};
struct sp_frame {
	uint8_t type;
	uint32_t stream;
	uint32_t len;
	unsigned char *data;	/* points into the decoder's buffer */
};
/* Incremental decoder: feed bytes, take frames; strict and bounded.  Take
 * every frame (sp_frame_dec_next until 0) before feeding again: a feed may
 * move the buffer, and the decoder holds at most one frame plus one feed of
 * up to SP_FRAME_CHUNK bytes.  After an error, release and init it again. */
struct sp_frame_dec {
	unsigned char *buf;
	size_t len, cap, off;
};
void sp_frame_dec_init(struct sp_frame_dec *d);
void sp_frame_dec_release(struct sp_frame_dec *d);
int sp_frame_dec_feed(struct sp_frame_dec *d, const void *p, size_t n,
    struct sp_err *e);
/* 1 and a frame, 0 when more bytes are needed, -1 on a protocol error
 * (oversize, unknown type, JSON frame over SP_JSON_MAX). */
int sp_frame_dec_next(struct sp_frame_dec *d, struct sp_frame *f,
    struct sp_err *e);
/* The header of a frame of n payload bytes (n <= SP_FRAME_MAX), for callers
 * that queue frames themselves on nonblocking descriptors. */
void sp_frame_hdr(unsigned char h[SP_FRAME_HDR], uint8_t type,
    uint32_t stream, size_t n);
/* Writes one whole frame to fd (blocking fd, EINTR-safe). */
int sp_frame_write(int fd, uint8_t type, uint32_t stream, const void *p,
    size_t n, struct sp_err *e);
int sp_frame_write_json(int fd, uint8_t type, uint32_t stream,
    const json_t *j, struct sp_err *e);
/* Parses a JSON frame payload strictly (object, bounded); caller decrefs. */
int sp_frame_json(const struct sp_frame *f, json_t **out, struct sp_err *e);

/*
 * ---- the egress tunnel (design.md) ----
 * The port named space.egress (host socket RUN/ID/egress.sock, served by
 * QEMU; space-gatewayd connects to it) carries every network connection of
 * the guest as a stream of frames.  The host sends HELLO {"op":"hello",
 * "nonce":s} when it connects, the guest answers HELLO {"version":n,
 * "boot_id":s,"nonce":s,"egress":1}; every stream of an earlier host
 * connection is gone then, on both sides.
 *
 * Streams are opened by the guest only, with an id of its choosing (not 0,
 * not one open now):
 *	OPEN {"kind":"tcp","host":H,"port":P}	a TCP connection to H:P (a DNS
 *		name, or an IPv4 address in dotted form): what the guest's
 *		transparent redirect caught
 *	OPEN {"kind":"proxy"}	a client of the guest's HTTP proxy: the
 *		host reads the HTTP request (CONNECT or absolute form) itself
 *	OPEN {"kind":"dns","name":N}	may N be resolved?  The host answers
 *		ANSWER {"name":N,"allow":true} or {"name":N,"allow":false,
 *		"reason":R} (N exactly as asked), and the stream is over; a
 *		guest that waited too long (3 s) sends CLOSE for it instead.
 * A tcp or proxy stream then carries DATA both ways.  Each side may have
 * SP_EGRESS_WINDOW bytes of DATA payload unacknowledged; the receiver sends
 * WINDOW (4 bytes: how many more) as it hands data on.  DATA payloads are
 * 1..SP_FRAME_CHUNK bytes, or empty for EOF (nothing more from that side;
 * the other may still send).  A stream is over for a side once it has sent
 * and received EOF, or sent or received CLOSE (an abort: what arrives for it
 * afterwards is dropped).  A refusal is an HTTP 403 response in DATA, then
 * EOF.  Frames for a stream that is not open are dropped; an OPEN of an id
 * in use, a DATA over the window or any other frame breaks the connection
 * (the guest says so with ERROR {"error":"protocol"} on stream 0 and waits
 * for the next HELLO; the host connects again).  The host closes (CLOSE)
 * what is over SP_EGRESS_STREAMS_MAX.  Each side sends WINDOW once it has
 * handed on SP_EGRESS_WINDOW_BATCH bytes not yet announced: a side that has
 * handed on all it got leaves the other at least the window less that to
 * send, so a stream never stalls on it, and a small request and its answer
 * cost no WINDOW frame either way (each is a virtio buffer, an interrupt
 * and a wake-up in the guest).
 */
#define SP_EGRESS_PORT_NAME	"space.egress"
#define SP_EGRESS_SOCK		"egress.sock"
#define SP_EGRESS_WINDOW	(256 * 1024)
#define SP_EGRESS_WINDOW_BATCH	(32 * 1024)
#define SP_EGRESS_STREAMS_MAX	1024
/* In the guest: the HTTP proxy the workload's HTTP_PROXY names, the port the
 * transparent redirect sends other TCP to, and where names resolve. */
#define SP_EGRESS_PROXY_PORT	3128
#define SP_EGRESS_REDIRECT_PORT	3129
#define SP_EGRESS_FAKE_NET	"198.18.0.0"	/* /15: answers to lookups */

/* ---- chan: the host end of a sandbox's channel ---- */
struct sp_chan;
struct sp_ctx;
/* Takes a free port of the sandbox (flock on run/<id>/space.N.lock, waiting
 * up to timeout_ms for one), connects and exchanges hello. */
int sp_chan_open(struct sp_chan **c, const char *run, const char *id,
    int timeout_ms, struct sp_err *e);
/* As sp_chan_open, with req (a REQ frame, on the stream put in *stream) in
 * the same write as the hello: its answer (sp_chan_recv) comes a turn of
 * the guest sooner.  Only for a request that may run twice: when the hello
 * is not answered in time and must be said again on a new connection, req
 * is sent again too, and the first may still run. */
int sp_chan_open_req(struct sp_chan **c, const char *run, const char *id,
    int timeout_ms, const json_t *req, uint32_t *stream, struct sp_err *e);
struct sp_exec;
/* As sp_chan_open_req, with first's exec request (after_identity) and its
 * stdin's end, when that is at hand, in the same write as the hello and
 * req: the guest goes from the hello to the op to the command in one turn.
 * The daemon must know after_identity (a claim knows it from the pod's
 * record).  Never sent twice: an unanswered hello is waited on until
 * timeout_ms, then an error.  *sent says whether any of it went (the guest
 * may run it); the next sp_chan_exec, with the same x, goes on with it. */
int sp_chan_open_req_first(struct sp_chan **c, const char *run,
    const char *id, int timeout_ms, const json_t *req, uint32_t *stream,
    const struct sp_exec *first, int *sent, struct sp_err *e);
void sp_chan_close(struct sp_chan *c);
/* The guest's hello ({"version","boot_id",...}); borrowed reference. */
json_t *sp_chan_hello(struct sp_chan *c);
/* Waits until the guest daemon answers hello on the sandbox's port 0. */
int sp_chan_wait_ready(const char *run, const char *id, int timeout_ms,
    struct sp_err *e);
/* Connects to a unix socket QEMU listens on (a channel port, its monitor),
 * non-blocking; waits out a full backlog (QEMU takes one client at a time)
 * until deadline (ms of sp_clock_ms, -1 none).  not-running when nothing
 * listens there. */
int sp_qemu_connect(const char *path, int64_t deadline, int *fd,
    struct sp_err *e);
struct sp_exec {
	char *const *argv;
	char *const *env;	/* "K=V", NULL-terminated, may be NULL */
	const char *cwd;	/* may be NULL */
	int in_fd, out_fd, err_fd;	/* in_fd -1: no stdin */
	/* Zero (as in `= { 0 }`) means the default for each of these. */
	const char *user;	/* a name or a decimal uid in the guest */
	int tty;		/* 1: a pty of rows x cols; out_fd carries it */
	int rows, cols;
	int timeout_ms;		/* > 0: SIGKILL after it, code "timed-out" */
	int ctl_fd;		/* > 0: struct sp_exec_ctl records to forward */
};
/* What a caller (a signal handler, say) writes whole to ctl_fd while the
 * call runs: sig > 0 sends that signal to the command's process group,
 * sig 0 sets its pty's size to rows x cols. */
struct sp_exec_ctl {
	int sig, rows, cols;
};
/* Runs a command; *status is the wait status style result: exit code, or
 * 128+signal.  Platform failures are -1 with e set; "exec-failed" when the
 * command could not start, "timed-out" when timeout_ms passed. */
int sp_chan_exec(struct sp_chan *c, const struct sp_exec *x, int *status,
    struct sp_err *e);
/* Sends x's exec request now, on a channel whose open carried an identity
 * op (sp_chan_open_req), before that op is answered: the guest runs it once
 * the identity is set and refuses it when the identity failed, and so goes
 * from one to the other without waiting for the host.  The next
 * sp_chan_exec, with the same x, goes on with that call.  0 sent; 1 when
 * nothing was sent (the guest's daemon is an older one, or the request
 * could not be made: the plain sp_chan_exec says why); -1 when sending
 * failed, and the guest may have it. */
int sp_chan_exec_ahead(struct sp_chan *c, const struct sp_exec *x,
    struct sp_err *e);
/* For a command-line caller of sp_chan_exec: SIGINT, SIGTERM, SIGHUP and
 * SIGQUIT (and SIGWINCH, for the size of stdin's terminal, with tty) become
 * sp_exec_ctl records on the fd returned, the call's ctl_fd; -1 on error. */
int sp_exec_forward_signals(int tty, struct sp_err *e);
/* Says on stderr why a command in sandbox id failed, and returns the exit
 * status a shell would: 127 when it could not start, 124 when it timed out
 * (as timeout(1)), the platform's code otherwise. */
int sp_exec_fail_status(const char *id, const struct sp_err *e);
/* Starts a detached command (in_fd, out_fd, err_fd, timeout_ms and ctl_fd
 * unused): it outlives the call, its output kept in the guest's ring
 * buffer; *pid is its pid in the guest. */
int sp_chan_detach(struct sp_chan *c, const struct sp_exec *x, pid_t *pid,
    struct sp_err *e);
/* The guest daemon's processes: fn gets each as a checked object
 * {"pid","argv","state":"running"|"exited","started","detached","tty",
 * "status"|"signal"} (borrowed); a non-zero return from fn stops. */
int sp_chan_ps(struct sp_chan *c, int (*fn)(json_t *, void *), void *arg,
    struct sp_err *e);
/* Writes a detached process's kept output to fd; with follow, what comes
 * after too, until it exits.  *running (may be NULL) is 1 when it still
 * runs; not-found for a pid the daemon did not detach. */
int sp_chan_logs(struct sp_chan *c, pid_t pid, int follow, int fd,
    int *running, struct sp_err *e);
/* Sends sig to the process group of a running process the daemon started;
 * not-found for any other pid, bad-state when it has exited. */
int sp_chan_kill(struct sp_chan *c, pid_t pid, int sig, struct sp_err *e);
/* sp_chan_open on a sandbox the state DB says is running. */
int sp_chan_open_running(struct sp_ctx *x, const char *id,
    struct sp_chan **c, int timeout_ms, struct sp_err *e);

/* The generic exchange other call types are built on.  A stream number per
 * call; sends queue one frame (payload <= SP_FRAME_CHUNK) and wait until it is
 * written; recv returns the next frame, valid until the next recv.  A timeout
 * or protocol error closes the channel (timeout_ms < 0: no timeout). */
uint32_t sp_chan_stream_new(struct sp_chan *c);
int sp_chan_send(struct sp_chan *c, uint8_t type, uint32_t stream,
    const void *p, size_t n, int timeout_ms, struct sp_err *e);
int sp_chan_send_json(struct sp_chan *c, uint8_t type, uint32_t stream,
    const json_t *j, int timeout_ms, struct sp_err *e);
int sp_chan_recv(struct sp_chan *c, struct sp_frame *f, int timeout_ms,
    struct sp_err *e);
/* Turns a guest's ERROR frame into e (its token when well-formed, else
 * "guest"; the message sanitized).  Always returns -1. */
int sp_chan_error_frame(const struct sp_frame *f, struct sp_err *e);

/* ---- fs: files and trees in a sandbox, through its guest daemon ---- */
/* Every call waits at most SP_FS_TIMEOUT_MS for each frame of the guest;
 * memory stays a frame whatever the size of the data.  Guest paths are
 * absolute, without NUL, under SP_PATH_MAX bytes.  After a call failed
 * mid-stream the channel may be closed (sp_chan_* says so): open another. */
#define SP_FS_TIMEOUT_MS	30000
#define SP_FS_LIST_MAX		100000
int sp_fs_path_check(const char *path, struct sp_err *e);
/* The file's bytes to out_fd; *size (may be NULL) gets their count. */
int sp_fs_read(struct sp_chan *c, const char *path, int out_fd,
    uint64_t *size, struct sp_err *e);
/* in_fd's bytes to the file until EOF: an atomic replace, or appended when
 * append; mode < 0 keeps the old file's (0644 for a new one). */
int sp_fs_write(struct sp_chan *c, const char *path, int in_fd, int mode,
    int append, uint64_t *size, struct sp_err *e);
/* *out: {"type","size","mode","uid","gid","mtime"[,"target"]}; caller
 * decrefs.  follow: stat the symlink's target. */
int sp_fs_stat(struct sp_chan *c, const char *path, int follow,
    json_t **out, struct sp_err *e);
/* fn gets each entry ({"name",...the stat fields}, borrowed) and may stop
 * the walk by returning -1; *truncated (may be NULL) says whether the guest
 * cut the list at SP_FS_LIST_MAX. */
int sp_fs_list(struct sp_chan *c, const char *path,
    int (*fn)(json_t *ent, void *arg), void *arg, int *truncated,
    struct sp_err *e);
int sp_fs_mkdir(struct sp_chan *c, const char *path, int parents, int mode,
    struct sp_err *e);
int sp_fs_remove(struct sp_chan *c, const char *path, int recursive,
    struct sp_err *e);
int sp_fs_rename(struct sp_chan *c, const char *from, const char *to,
    struct sp_err *e);
/* Raw tar streams: the guest's path packed (pax) to out_fd, its top entry
 * named name (NULL: path's last component); in_fd's tar unpacked into the
 * guest's directory dir. */
int sp_fs_tar_out(struct sp_chan *c, const char *path, const char *name,
    int out_fd, struct sp_err *e);
int sp_fs_tar_in(struct sp_chan *c, const char *dir, int in_fd,
    struct sp_err *e);
/* Copies a host path into the guest's directory dir under name (NULL: the
 * last component of src); symlinks are copied as symlinks. */
int sp_fs_put(struct sp_chan *c, const char *src, const char *dir,
    const char *name, struct sp_err *e);
/* Copies the guest's path into the host directory dir under name (NULL:
 * the last component of path).  The guest's stream is hostile: entries
 * outside name, absolute, with "..", or through symlinks are refused. */
int sp_fs_get(struct sp_chan *c, const char *path, const char *dir,
    const char *name, struct sp_err *e);
/* Unpacks a tar stream from in_fd into the host directory dir with the same
 * checks (top: the one top-level name allowed, NULL: any). */
int sp_fs_untar(int in_fd, const char *dir, const char *top,
    struct sp_err *e);

/* ---- template: build templates from root filesystems ---- */
struct sp_template_src {
	const char *name;
	const char *rootfs;		/* tarball (any libarchive format) or dir */
	const char *kernel, *initrd;	/* required */
	uint64_t disk_extra_bytes;	/* free space in the ext4 image */
};
/* Builds templates/<name>@<digest>/ (read-only subvolume with disk.raw,
 * vmlinuz, initrd.img, template.json) under root; concurrent builds of the
 * same digest are coalesced by a lock.  Rejects archive entries that would
 * escape the root (bad-input).  Fills *t.  Returns 0 when this call built
 * the template, 1 when it existed already (an earlier or concurrent import
 * of the same inputs built it), -1 on error.  The digest covers the rootfs
 * (archive bytes, or a canonical walk of a directory), kernel, initrd and
 * disk_extra_bytes. */
int sp_template_import(const char *root, const struct sp_template_src *src,
    struct sp_template_row *t, struct sp_err *e);
/* templates/<name>@<digest> under root. */
int sp_template_path(const char *root, const struct sp_template_row *t,
    char *out, size_t n, struct sp_err *e);

/* ---- dl: a library loaded on first use (sp_dl.c) ---- */
struct sp_dl {
	const char *soname;	/* "libcurl.so.4" */
	const char *name;	/* for messages: "libcurl" */
	enum sp_code code;	/* the sp_err code of a failure */
	pthread_mutex_t mu;
	int loaded;
};
#define SP_DL_INIT(soname, name, code) \
	{ soname, name, code, PTHREAD_MUTEX_INITIALIZER, 0 }
/* Counts a table's entries: 0 LIST(SP_DL_ONE) is their number. */
#define SP_DL_ONE(...)	+ 1
/* Loads dl's library once and puts names[i] into slots[i], under dl's
 * mutex; -1 (nothing marked loaded) when the library or a name is not
 * there. */
int sp_dl_load(struct sp_dl *dl, const char *const names[], void *slots[],
    size_t n, struct sp_err *e);
/* A table is a union u of typed pointers and the void *slot[] they cover,
 * filled by a names[] array: one name per slot, checked at compile time
 * (at file scope), and loaded with sp_dl_load_table. */
#define SP_DL_TABLE_CHECK(names, u) \
	_Static_assert(sizeof (names) / sizeof (names)[0] == \
	    sizeof (u).slot / sizeof (u).slot[0], "a slot per name"); \
	_Static_assert(sizeof (u) == sizeof (u).slot, "slots cover it")
#define sp_dl_load_table(dl, names, u, e) \
	sp_dl_load((dl), (names), (u).slot, \
	    sizeof (names) / sizeof (names)[0], (e))

/* ---- path: building paths without silent truncation ---- */
int sp_path_fmt(char *out, size_t n, struct sp_err *e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* mkdir -p with mode for the directories it creates. */
int sp_path_mkdirs(const char *path, mode_t mode, struct sp_err *e);
/* rm -rf of a directory tree on this filesystem; absent is not an error. */
int sp_path_remove_tree(const char *path, struct sp_err *e);

/* flock(LOCK_EX) on fd, waiting (wait 1) or not: busy (temp) when taken. */
int sp_flock(int fd, int wait, struct sp_err *e);
#define sp_flock_wait(fd, e) sp_flock((fd), 1, (e))

/* A size like 512, 64K, 256M, 8G or 1T (powers of 1024). */
int sp_size_parse(const char *s, uint64_t *out, struct sp_err *e);

/* Milliseconds of CLOCK_MONOTONIC: for deadlines and durations. */
int64_t sp_clock_ms(void);

/* Crash injection for tests: when SPACE_CRASH_AT names this point, the
 * process dies here by SIGKILL, as a kill -9 would take it. */
void sp_crashpoint(const char *name);

/* ---- proc: running the few external programs we need (no shell) ---- */
/* Runs argv[0] (PATH search) and waits; a non-zero exit is an error whose
 * message carries the tail of its stderr. */
int sp_proc_run(char *const argv[], struct sp_err *e);
/* argv with stdin from in, stdout to out (-1: /dev/null), stderr appended
 * to err_path (NULL: /dev/null); then sp_proc_wait, whose error carries the
 * tail of err_path. */
int sp_proc_spawn(char *const argv[], int in, int out, const char *err_path,
    pid_t *pid, struct sp_err *e);
int sp_proc_wait(pid_t pid, const char *what, const char *err_path,
    struct sp_err *e);
/*
 * Runs argv in a process group of its own: in (inlen bytes) on its stdin,
 * its stdout into out (at most max bytes, *outn of them; more is the error
 * too-long; out NULL: thrown away), the printable tail of its stderr into
 * tail; all within ms.  Returns its exit status, or -1: it could not run
 * (internal), took longer (timed-out; its whole group killed), was killed
 * by a signal (killed) or printed too much.  Reaped either way; out is
 * wiped on -1.  For the key and secret programs (sp_crypt, sp_cred).
 */
/* The milliseconds in environment variable name (1..3600000), else def. */
int sp_env_ms(const char *name, int def, int *ms, struct sp_err *e);
#define SP_PROC_TAIL	200
int sp_proc_talk(char *const argv[], const void *in, size_t inlen,
    unsigned char *out, size_t max, size_t *outn, char tail[SP_PROC_TAIL + 1],
    int ms, struct sp_err *e);

/* ---- node: this node's storage and services ---- */
struct sp_node_info {
	char fs[16];		/* "btrfs" */
	int loop;		/* 1 when root is a loop-backed image we made */
	int kvm;		/* 1 when VMs use KVM */
	char virt_type[16];
	char libvirt[64];	/* libvirt version, or "" when it does not answer */
};
/* Makes root a btrfs filesystem (a loop-backed image of loop_bytes when it is
 * not and loop_bytes > 0), creates the layout, migrates the DB, checks that
 * libvirt answers.  Idempotent. */
int sp_node_init(const struct sp_conf *c, uint64_t loop_bytes,
    struct sp_node_info *info, struct sp_err *e);

/* ---- sandbox: the lifecycle operations, composed from the modules above ---- */
struct sp_ctx {
	struct sp_conf conf;
	struct sp_db *db;
	struct sp_virt *virt;	/* NULL until needed */
	void (*virt_close)(struct sp_virt *);	/* set with virt */
	char virt_type[16];
};
/* Loads the config, opens the DB and, when with_virt, libvirt. */
int sp_ctx_open(struct sp_ctx *x, int with_virt, struct sp_err *e);
/* The config and the DB only: what a command that never needs libvirt opens,
 * so that it does not link libvirt (sp_ctx.c). */
int sp_ctx_open_db(struct sp_ctx *x, struct sp_err *e);
void sp_ctx_close(struct sp_ctx *x);
int sp_ctx_virt(struct sp_ctx *x, struct sp_err *e);	/* opens libvirt lazily */
/* sp_boost.c: a claim's VM at ten times the CPU weight of the node's other
 * sandboxes until its create is done. */
struct sp_boost {
	int fd;			/* the VM cgroup's weight file, or -1 */
	int markfd;		/* run/ID/boost, locked while boosted */
	char old[24];		/* the weight to put back */
	size_t oldlen;
	char mark[SP_PATH_MAX];
};
void sp_boost_init(struct sp_boost *b);
/* Boosts the VM of sandbox id whose vCPU thread is tid; -1 (nothing
 * changed, best effort) when its cgroup cannot be found or written. */
int sp_boost_start(struct sp_boost *b, const char *run_dir, const char *id,
    pid_t tid);
/* The same with the weight file found before (sp_boost_weight_file). */
int sp_boost_start_file(struct sp_boost *b, const char *run_dir,
    const char *id, const char *file);
/* The writable weight file of sandbox id's VM whose vCPU thread is tid. */
int sp_boost_weight_file(pid_t tid, const char *id, char *out, size_t n);
/* Puts the weight back; async-signal-safe, and may be called again. */
void sp_boost_restore(const struct sp_boost *b);
/* Puts it back and forgets it (sp_boost_init). */
void sp_boost_end(struct sp_boost *b);
/* Puts back what a booster that died left: 1 when it did, 0 when there was
 * nothing to do (none, or its booster is alive), -1 on error. */
int sp_boost_repair(const char *run_dir, const char *id, struct sp_err *e);
/* The weight file of sandbox id's VM (cpu.shares under cgroup v1, cpu.weight
 * under v2: the topmost directory of the thread's cgroup whose name holds
 * the domain's), from the texts of a vCPU thread's /proc/TID/cgroup and of
 * /proc/self/mountinfo, both changed in place; -1 when none is found. */
int sp_boost_weight_path(char *cgroup, char *mountinfo, const char *id,
    char *out, size_t n);
struct sp_create_req {
	const char *template;	/* name or name@digest */
	int memory_mib, vcpus;
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
};
/* Creates and boots one sandbox; *out gets {"id","state","template",
 * "create_ms",...}.  On failure everything it made is removed. */
int sp_sandbox_create(struct sp_ctx *x, const struct sp_create_req *r,
    json_t **out, struct sp_err *e);
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
	json_t *labels, *env;	/* borrowed; may be NULL */
	const char *pool;	/* a pod of this pool, or NULL */
	int ready_timeout_ms;
	/* With pool: run on the ready guest before it is paused. */
	void (*prepare)(struct sp_ctx *x, const char *id);
};
int sp_sandbox_make(struct sp_ctx *x, const struct sp_make *m,
    char id[SP_ID_LEN + 1], struct sp_err *e);
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
/* Asks the guest to power off, waits up to timeout_ms, then forces it. */
int sp_sandbox_stop(struct sp_ctx *x, const char *id, int timeout_ms,
    int *changed, int *forced, struct sp_err *e);
/* Cold boot from the sandbox's own disk; returns when the daemon answers. */
int sp_sandbox_start(struct sp_ctx *x, const char *id, int ready_timeout_ms,
    int *changed, struct sp_err *e);

/* ---- ckpt: a template's booted checkpoint ---- */
struct sp_ckpt_info {
	char id[SP_ID_LEN + 1];		/* the id it was booted under */
	char uuid[37];
	int memory_mib, vcpus;		/* what it was booted with */
};
/* templates/<name>@<digest>.ckpt under root. */
int sp_ckpt_path(const char *root, const struct sp_template_row *t,
    char *out, size_t n, struct sp_err *e);
int sp_ckpt_read(const char *ckpt, struct sp_ckpt_info *ci, struct sp_err *e);
int sp_ckpt_uuid_new(char out[37], struct sp_err *e);
/* The layout of the VM saved at path (a libvirt save image), read from its
 * header: what a restore with a fresh XML must give it again. */
int sp_ckpt_layout(const char *path, struct sp_vm_layout *l, struct sp_err *e);
/* 1 when the template checkpoint ckpt (a directory) has this build's layout
 * (sp_vm_layout_current) and was booted with the command line a VM of its
 * virt type boots with now (sp_virt_boot_cmdline), 0 when it is stale, -1
 * when it cannot be read. */
int sp_ckpt_current(const char *ckpt, struct sp_err *e);
/* Rewrites name and uuid (same lengths) in a libvirt save image's header. */
int sp_ckpt_reidentify(const char *path, const char *old_name,
    const char *new_name, const char *old_uuid, const char *new_uuid,
    struct sp_err *e);
/* Boots the template once and keeps its saved memory state beside it; a
 * second warm-up (or a concurrent one) finds it made ("reused"). */
int sp_template_warm(struct sp_ctx *x, const char *ref, int memory_mib,
    int vcpus, json_t **out, struct sp_err *e);

/* ---- snap: snapshots, rollback, fork, retention (design.md) ---- */
/* A disk snapshot, or with full a checkpoint of disk and memory; *out gets
 * its JSON line.  Tag (may be NULL) keeps it from space-gc. */
int sp_snap_take(struct sp_ctx *x, const char *id, int full, const char *tag,
    json_t **out, struct sp_err *e);
/* The same, the sandbox's lock held by the caller; r gets the row. */
int sp_snap_take_locked(struct sp_ctx *x, const char *id, int full,
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

/* ---- source: templates built on first use from where they come from ---- */
/* Copies a path or an http(s) URL (libcurl; HTTP errors are errors) to dst. */
int sp_fetch(const char *src, const char *dst, struct sp_err *e);
/* The template ref, materialized from its registered source when it is not
 * here yet: concurrent calls for one name fetch and build it once (a lock
 * per name), the others wait and use it.  *built says who built it. */
int sp_template_materialize(struct sp_ctx *x, const char *ref,
    struct sp_template_row *t, int *built, struct sp_err *e);

/* The per-sandbox lock (<root>/locks/sandbox-<id>.lock) every command that
 * acts on a sandbox holds while it does, so space-reconcile can tell a
 * command at work from one that died halfway.  wait 0: busy when taken. */
int sp_sandbox_lock(const struct sp_ctx *x, const char *id, int wait,
    int *fd, struct sp_err *e);
void sp_sandbox_unlock(int fd);

/* One pass of the node-local reconcile loop: every sandbox of this node
 * whose record and VM disagree, or that a dead command left in a transient
 * state, is brought to a legal state; orphan domains and subvolumes of this
 * root are removed.  fn is told each action as a JSON object (stolen). */
int sp_reconcile_once(struct sp_ctx *x, int (*fn)(json_t *, void *),
    void *arg, struct sp_err *e);

/* The record space-ls prints for a row: DB joined with libvirt and btrfs. */
int sp_sandbox_describe(struct sp_ctx *x, const struct sp_sandbox_row *r,
    json_t **out, struct sp_err *e);
/* <root>/sandboxes/<id>, <run>/<id>, sp-<id>. */
int sp_sandbox_dir(const struct sp_ctx *x, const char *id, char *out, size_t n,
    struct sp_err *e);
int sp_sandbox_run_dir(const struct sp_ctx *x, const char *id, char *out,
    size_t n, struct sp_err *e);
void sp_sandbox_domain(const char *id, char out[SP_ID_LEN + 4]);
/* Tells a booted guest its id (and host name), labels, environment (for
 * calls that bring none) and a fresh seed for its random generator (copies
 * of one checkpoint would share it).  labels and env may be NULL. */
/* Hands the guest its identity (sp_sandbox_make.c): with keep, the channel
 * stays open in *keep for a call after it; with first too, that call is
 * sent ahead (in the hello's own write with with_hello), and *sent says
 * whether it went. */
int sp_sandbox_identify(struct sp_ctx *x, const char *id, json_t *labels,
    json_t *env, struct sp_chan **keep, const struct sp_exec *first,
    int with_hello, int *sent, struct sp_err *e);
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
int sp_sandbox_make_run_dir(const char *dir, struct sp_err *e);

/* ---- remote: moving things to and from the object store (design.md) ---- */
struct sp_store;
/* $SPACE_ROOT/tmp/name (the directory made). */
int sp_remote_tmp(const struct sp_ctx *x, const char *name, char *out,
    size_t n, struct sp_err *e);
/* SHA-256 (hex) and size of a file. */
int sp_remote_hash(const char *path, char hex[65], uint64_t *size,
    struct sp_err *e);
/* A JSON object to key (stolen) / from key (bounded to 64 KiB, "corrupt"
 * when it is not one). */
int sp_remote_put_json(struct sp_store *s, const struct sp_ctx *x,
    const char *key, json_t *j, struct sp_err *e);
int sp_remote_get_json(struct sp_store *s, const struct sp_ctx *x,
    const char *key, json_t **out, struct sp_err *e);
/* The key service of a sandbox's tenant (its label "tenant", else
 * "default"): the tenant's row of space-key, else SPACE_KMS, whose default
 * key file is made on first use. */
int sp_remote_keyref(struct sp_ctx *x, const struct sp_sandbox_row *sb,
    char tenant[SP_NAME_MAX + 1], char *keyref, size_t n, struct sp_err *e);
/* `btrfs send [-p parent] subvol` | zstd [| encrypted with key] > out_path. */
int sp_remote_send(const struct sp_ctx *x, const char *parent,
    const char *subvol, const unsigned char *key, const char *out_path,
    struct sp_err *e);
/* in_path [| decrypted with key] | unzstd | `btrfs receive dir`. */
int sp_remote_receive(const struct sp_ctx *x, const char *in_path,
    const unsigned char *key, const char *dir, struct sp_err *e);
/* A file up, with its size and SHA-256; down, checked against them
 * ("corrupt" when it differs). */
int sp_remote_upload(struct sp_store *s, const char *path, const char *key,
    uint64_t *size, char hex[65], struct sp_err *e);
int sp_remote_download(struct sp_store *s, const char *key, const char *path,
    uint64_t size, const char *hex, struct sp_err *e);
/* This node gets template t of the given lineage if it lacks it; base gets
 * the subvolume that deltas of that lineage are received onto. */
int sp_remote_lineage(struct sp_ctx *x, struct sp_store *s,
    const struct sp_template_row *t, const char *lineage, char *base,
    size_t nbase, int *pulled, uint64_t *bytes, struct sp_err *e);
/* space-template push NAME / pull NAME@DIGEST: full send streams. */
int sp_template_push(struct sp_ctx *x, struct sp_store *s, const char *ref,
    json_t **out, struct sp_err *e);
int sp_template_pull(struct sp_ctx *x, struct sp_store *s, const char *ref,
    json_t **out, struct sp_err *e);

/* ---- suspend: sandboxes to the object store and back (design.md) ---- */
int sp_suspend(struct sp_ctx *x, const char *id, int keep_local, json_t **out,
    struct sp_err *e);
/* node NULL or this node: restore here; else ask that node (its reconcile). */
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

/* Object store and encryption (design.md), egress policy and credentials
 * (§9), in headers of their own. */
#include "sp_store.h"
#include "sp_crypt.h"
#include "sp_egress.h"
#include "sp_cred.h"
#include "sp_tls.h"
#include "sp_http.h"
#include "sp_gateway.h"

#endif
