/*
 * sp_core.h: the core of libspace: errors and exit statuses, bytes and paths,
 * configuration, ids, the state machine, the state DB (with the rows of
 * every part), retention tiers, child programs and libraries loaded on first
 * use.  It uses no other part of the library.
 */
#ifndef SP_CORE_H
#define SP_CORE_H

#include <stddef.h>
#include <stdio.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>

struct sp_ctx;
struct sp_store;
struct sp_chan;

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
	SP_E_QUOTA_EXCEEDED,
	SP_E_RATE_LIMITED,
	SP_E_RESEED_FAILED,
	SP_E_STOPPED,
	SP_E_TIMED_OUT,
	SP_E_TLS,
	SP_E_TOO_BIG,
	SP_E_UNAUTHORIZED,
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
/* A short, printable rendering of hostile bytes for messages: what is not
 * printable ASCII as \xNN, cut with "..." to fit out (n >= 12). */
const char *sp_quote(const char *s, char *out, size_t n);

/* ---- io: byte-level helpers both sides share (sp_io.c) ---- */
/* All of buf to fd, again after EINTR; -1 with errno on error. */
int sp_write_all(int fd, const void *buf, size_t n);
uint32_t sp_be32_get(const unsigned char *p);
void sp_be32_put(unsigned char *p, uint32_t v);

/* ---- conf: /etc/space/space.conf + SPACE_* environment ---- */
#define SP_PATH_MAX	4096
struct sp_conf {
	char root[SP_PATH_MAX];		/* SPACE_ROOT, default /var/lib/space */
	char db[SP_PATH_MAX];		/* SPACE_DB, default sqlite:$root/space.db */
	char store[SP_PATH_MAX];	/* SPACE_STORE, default file://$root/objects */
	char libvirt_uri[256];		/* SPACE_LIBVIRT_URI, default qemu:///system */
	int libvirt_uri_default;	/* 1 when SPACE_LIBVIRT_URI was not set */
	char node[64];			/* SPACE_NODE, default the host name */
	char run[SP_PATH_MAX];		/* SPACE_RUN, default /run/space */
	char virt_type[16];		/* SPACE_VIRT_TYPE: auto | kvm | qemu */
	char retain[256];		/* SPACE_RETAIN: snapshot tiers */
	char idle[128];			/* SPACE_IDLE: idle tiers, "" none */
	char events_keep[16];		/* SPACE_EVENTS_KEEP: a period */
	char kms[SP_PATH_MAX];		/* SPACE_KMS: key service of tenants
					 * without one of their own */
	char guest[SP_PATH_MAX];	/* SPACE_GUEST: the guest image's
					 * vmlinuz, initrd.img, space-daemon;
					 * default PREFIX/lib/space */
	/* The jail and limits of each VM (sp_jail.c), checked at load. */
	char jail[8];			/* SPACE_JAIL: on | off */
	char jail_uids[32];		/* SPACE_JAIL_UIDS: FIRST-LAST */
	char mem_overhead[16];		/* SPACE_MEM_OVERHEAD_MIB: auto | N | 0 */
	char pids_max[16];		/* SPACE_PIDS_MAX: N | 0 */
	char cpu_quota[16];		/* SPACE_CPU_QUOTA: CPUs, "" none */
	char io_weight[16];		/* SPACE_IO_WEIGHT: 10..1000, "" none */
	/* Pages shared between VMs (sp_node.c, sp_jail.c), checked at
	 * load. */
	char ksm[8];			/* SPACE_KSM: off | on */
	char ksm_rate[16];		/* SPACE_KSM_RATE: pages a second */
	int ksm_on;
	long ksm_pages_per_s;
	struct {			/* the jail's, parsed and checked */
		int on;
		unsigned long first, count;	/* uids first .. first+count-1 */
		long mem_overhead_mib;		/* -1: auto */
		long pids_max, cpu_quota_pct, io_weight;	/* 0: none */
	} lim;
};
/* Uids no distribution hands out: above systemd's container range. */
#define SP_JAIL_UIDS_DEFAULT	"1900000000-1900065535"
/* The host ids a template's files are owned by while one not root unpacks
 * it in a user namespace (sp_noded_userns.c): nobody else's, and never a
 * jail's. */
#define SP_IMPORT_IDS_FIRST	1800000000UL
#define SP_IMPORT_IDS		65536UL
#define SP_PIDS_MAX_DEFAULT	"512"
/* KSM's scan when SPACE_KSM is on: pages a second (docs/benchmarks.md,
 * "Density"). */
#define SP_KSM_RATE_DEFAULT	"50000"
#define SP_JAIL_PROBES		64	/* uids a sandbox's hash may try */
/* Reads SPACE_CONF (default /etc/space/space.conf) when it exists, then the
 * environment; every value is validated. */
int sp_conf_load(struct sp_conf *c, struct sp_err *e);
/* A CPU quota given in CPUs ("0.5", "2"): *pct gets hundredths of a CPU;
 * bad-input naming what it is for anything but 0.01 to SP_CPU_QUOTA_MAX. */
#define SP_CPU_QUOTA_MAX 1024
int sp_cpu_quota_parse(const char *what, const char *s, int *pct,
    struct sp_err *e);
/* CPUs as hundredths of a CPU, or -1 outside 0.01..SP_CPU_QUOTA_MAX (NaN
 * included). */
int sp_cpu_quota_pct(double cpus);

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
/* A period: a positive count (at most 100000) and a unit, s, m, h, d or w,
 * as "90s", "30m", "7d"; in seconds.  -1 when it is not one. */
int sp_period_parse(const char *s, int64_t *out);
/* A lifetime's spec: DURATION from now, +DURATION from the expiry cur
 * (from now when cur is 0 or past), or none (0). */
int sp_expiry_parse(const char *spec, int64_t now, int64_t cur, int64_t *out,
    struct sp_err *e);
/* kill, pause or suspend: what a sandbox's expiry may do. */
int sp_on_expiry_ok(const char *action);
int sp_retain_parse(const char *spec, struct sp_tier *t, int max, int *n,
    struct sp_err *e);
/* Idle tiers (SPACE_IDLE, space-create --idle): "pause:15m suspend:12h
 * rm:30d", each tier at most once and later than those before it in that
 * order, any of them left out; "none" or "" for no tiers.  0: a tier not
 * there. */
struct sp_idle {
	int64_t pause_s, suspend_s, rm_s;
};
int sp_idle_parse(const char *spec, struct sp_idle *out, struct sp_err *e);
/* The tiers that steer a sandbox: its own (own, "" for none of its own),
 * else the node's (SPACE_IDLE). */
int sp_idle_of(const char *own, const char *node, struct sp_idle *out,
    struct sp_err *e);
/* The tier due for a sandbox in state (running, paused, stopped,
 * suspended) idle for idle_s seconds (-1: not known): "pause", "suspend",
 * "rm", or NULL.  The furthest due tier wins: a sandbox idle past rm is
 * removed, not paused first. */
const char *sp_idle_due(const struct sp_idle *p, const char *state,
    int64_t idle_s);
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
/* A sandbox's name (space-create --name), usable wherever its id is: 1 to
 * SP_HANDLE_MAX of [a-z0-9-], a letter or digit at each end (a DNS label),
 * and never a well-formed id, so an operand is one or the other. */
#define SP_HANDLE_MAX	63
int sp_handle_valid(const char *s);		/* 1 or 0 */
int sp_handle_check(const char *s, struct sp_err *e);
/* A create's request id (--request-id): 1 to SP_REQUEST_ID_MAX of
 * [A-Za-z0-9._:-], so a UUID or a client's own key. */
#define SP_REQUEST_ID_MAX	128
int sp_request_id_check(const char *s, struct sp_err *e);
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
	SP_ST_LOST,		/* its node's lease lapsed (space-schedule) */
	SP_ST__COUNT
};
const char *sp_state_name(enum sp_state s);
int sp_state_parse(const char *name);		/* enum value or -1 */
int sp_state_can(enum sp_state from, enum sp_state to);	/* 1 or 0 */

/* ---- db: the state DB (SQLite or PostgreSQL), versioned migrations ---- */
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
	char want[16];			/* the state asked of it, "" for none */
	char want_error[256];		/* why its node could not, or "" */
	char *placed;			/* JSON: why the scheduler chose its node,
					 * or NULL; owned like labels */
	int disk_gb;			/* its disk in GiB, 0: its template's */
	int cpu_pct;			/* its CPU quota in hundredths of a
					 * CPU, 0: the node's */
	int64_t expires;		/* unix seconds, 0: never */
	char on_expiry[16];		/* kill, pause, suspend; "" (kill) */
	char idle[128];			/* its idle tiers, "" the node's */
	int64_t updated;		/* unix seconds of its last transition */
	char name[SP_HANDLE_MAX + 1];	/* its name, "" for none */
	char request_id[SP_REQUEST_ID_MAX + 1];	/* the create's, or "" */
};
void sp_db_row_release(struct sp_sandbox_row *r);
int sp_db_open(struct sp_db **db, const struct sp_conf *c, struct sp_err *e);
void sp_db_close(struct sp_db *db);
/* Commits of this command leave the WAL's checkpoint to a later command
 * unless the WAL is far over its bound: for a caller's critical path. */
void sp_db_checkpoint_later(struct sp_db *db);
int sp_db_schema_version(struct sp_db *db);
/* "sqlite" or "postgresql"; and the statements run so far (each one round
 * trip to a server).  With SPACE_DB_COUNT=FILE, closing a handle appends
 * "BACKEND N" to FILE (bench/cluster). */
const char *sp_db_backend(const struct sp_db *db);
int64_t sp_db_round_trips(const struct sp_db *db);
int sp_db_sandbox_insert(struct sp_db *db, const struct sp_sandbox_row *r,
    struct sp_err *e);
/* The sandbox of a name (request 0) or a create's request id (1), in
 * tenant ("" for none; NULL: any, and two tenants' is bad-input). */
int sp_db_sandbox_by_handle(struct sp_db *db, const char *tenant,
    int request, const char *handle, char id[SP_ID_LEN + 1],
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
/* Every restorable snapshot of id but keep (NULL: all) becomes superseded:
 * a restore takes the newest state only. */
int sp_db_snap_supersede(struct sp_db *db, const char *id, const char *keep,
    struct sp_err *e);
/* Where a snapshot's upload is: NULL, "uploading", "restorable". */
int sp_db_snap_set_remote(struct sp_db *db, const char *id, const char *snap,
    const char *remote, struct sp_err *e);
/* Puts a sandbox on node, with what that node is to do (want, may be NULL:
 * nothing; "running": restore it). */
int sp_db_sandbox_place(struct sp_db *db, const char *id, const char *node,
    const char *want, struct sp_err *e);
/* The key service each tenant's data keys are wrapped by (space-key). */
int sp_db_tenant_key_set(struct sp_db *db, const char *tenant,
    const char *keyref, struct sp_err *e);
int sp_db_tenant_key_get(struct sp_db *db, const char *tenant, char *out,
    size_t n, struct sp_err *e);	/* not-found */
int sp_db_tenant_key_each(struct sp_db *db,
    int (*fn)(const char *tenant, const char *keyref, int64_t updated, void *),
    void *arg, struct sp_err *e);
/* Volumes (sp_db_volume.c): a disk that sandboxes mount, apart from them.
 * tenant "" is none; mounts and snaps are JSON array text, owned (free with
 * sp_db_volume_release). */
struct sp_volume_row {
	char id[SP_ID_LEN + 1];
	char name[SP_HANDLE_MAX + 1];
	char tenant[SP_NAME_MAX + 1];
	char node[64];
	int64_t bytes, created;
	int64_t gen;			/* bumped by every change */
	char origin[SP_HANDLE_MAX + SP_NAME_MAX + 2];	/* NAME@SNAP, or "" */
	char *mounts;			/* [{"sandbox":ID,"path":P,"ro":B}] */
	char *snaps;			/* [{"snap":NAME,"created":T}] */
	char writer[SP_ID_LEN + 1];	/* the last to mount it read-write */
	int64_t epoch;			/* bumped when the writer changes */
};
void sp_db_volume_release(struct sp_volume_row *v);
/* exists when the tenant has a volume of the name. */
int sp_db_volume_insert(struct sp_db *db, const struct sp_volume_row *v,
    struct sp_err *e);
/* The volume of id or name ref in tenant ("" none; NULL any, and two
 * tenants' is bad-input). */
int sp_db_volume_get(struct sp_db *db, const char *tenant, const char *ref,
    struct sp_volume_row *v, struct sp_err *e);
/* Writes mounts, snaps, node and v's writer and epoch if v->gen is still
 * the row's (busy, temp, when not). */
int sp_db_volume_set(struct sp_db *db, const struct sp_volume_row *v,
    const char *mounts, const char *snaps, const char *node,
    struct sp_err *e);
/* Deletes v if unchanged and mounted nowhere (busy when not). */
int sp_db_volume_delete(struct sp_db *db, const struct sp_volume_row *v,
    struct sp_err *e);
/* Each volume of node and tenant (NULL: any), by tenant and name. */
int sp_db_volume_each(struct sp_db *db, const char *node, const char *tenant,
    int (*fn)(const struct sp_volume_row *, void *), void *arg,
    struct sp_err *e);

/* The tenants of the HTTP API (sp_db_tenant.c): quotas, 0 for none. */
#define SP_TENANT_TEMPLATES_MAX	64
struct sp_tenant_row {
	char name[SP_NAME_MAX + 1];
	int64_t created;
	int max_running, max_vcpus, max_memory_mib, max_disk_gb;
	/* The template names it may use, a JSON array; "" for every one. */
	char templates[SP_TENANT_TEMPLATES_MAX * (SP_NAME_MAX + 3) + 3];
};
/* 1 when tenant t may create from template ref (NAME or NAME@DIGEST). */
int sp_tenant_template_ok(const struct sp_tenant_row *t, const char *ref);
/* What a tenant's sandboxes take now, counted as the quotas count them:
 * running (and vcpus) of those whose VM runs, memory of those paused too,
 * disk of every one (its template's disk size). */
struct sp_tenant_usage {
	int sandboxes, running, vcpus, memory_mib;
	int64_t disk_bytes;
};
int sp_db_tenant_add(struct sp_db *db, const struct sp_tenant_row *t,
    struct sp_err *e);				/* exists */
int sp_db_tenant_set(struct sp_db *db, const struct sp_tenant_row *t,
    struct sp_err *e);				/* its quotas; not-found */
int sp_db_tenant_get(struct sp_db *db, const char *name,
    struct sp_tenant_row *t, struct sp_err *e);	/* not-found */
int sp_db_tenant_each(struct sp_db *db,
    int (*fn)(const struct sp_tenant_row *, void *), void *arg,
    struct sp_err *e);
/* With its keys; in-use while it has sandboxes. */
int sp_db_tenant_remove(struct sp_db *db, const char *name, struct sp_err *e);
int sp_db_tenant_usage(struct sp_db *db, const char *name,
    struct sp_tenant_usage *u, struct sp_err *e);
/* An API key's row: the key is "spk_" ID "_" SECRET, of which the row keeps
 * the BLAKE2b hash of SECRET (sp_apikey.c).  An admin key has no tenant. */
#define SP_APIKEY_ID_LEN	16
struct sp_apikey_row {
	char id[SP_APIKEY_ID_LEN + 1];
	char tenant[SP_NAME_MAX + 1];
	int admin;
	char hash[65];
	int rate;			/* requests a minute; 0: no limit */
	int64_t created;
};
int sp_db_apikey_add(struct sp_db *db, const struct sp_apikey_row *k,
    struct sp_err *e);		/* not-found for a tenant that is not */
int sp_db_apikey_get(struct sp_db *db, const char *id,
    struct sp_apikey_row *k, struct sp_err *e);	/* not-found */
/* tenant NULL: every key. */
int sp_db_apikey_each(struct sp_db *db, const char *tenant,
    int (*fn)(const struct sp_apikey_row *, void *), void *arg,
    struct sp_err *e);
int sp_db_apikey_remove(struct sp_db *db, const char *id, struct sp_err *e);
/* A sandbox's columns the API keeps: its tenant (from its label), when it
 * expires (unix seconds, 0: never) and what then ("kill", "pause"), and
 * the token its guest's API is called with ("" none). */
struct sp_sandbox_api {
	char tenant[SP_NAME_MAX + 1];
	int64_t expires;
	char on_expiry[16];
	char token[80];
};
int sp_db_sandbox_api_get(struct sp_db *db, const char *id,
    struct sp_sandbox_api *a, struct sp_err *e);	/* not-found */
/* Sets expires, on_expiry and token (tenant is the label's). */
int sp_db_sandbox_api_set(struct sp_db *db, const char *id,
    const struct sp_sandbox_api *a, struct sp_err *e);
/* A sandbox's lifetime: expires (unix seconds, 0: never) and on_expiry
 * ("" keeps the one it has).  Not-found for a pod or no such sandbox. */
int sp_db_sandbox_expiry_set(struct sp_db *db, const char *id,
    int64_t expires, const char *on_expiry, struct sp_err *e);
/* A sandbox's own idle tiers (a spec sp_idle_parse takes; "" the
 * node's).  Not-found for a pod or no such sandbox. */
int sp_db_sandbox_idle_set(struct sp_db *db, const char *id,
    const char *idle, struct sp_err *e);
/* The sandboxes of node whose expiry is at or before now, soonest first,
 * at most max of them: fn(id, expires, action) for each. */
int sp_db_sandbox_expiry_due(struct sp_db *db, const char *node, int64_t now,
    int max, int (*fn)(const char *id, int64_t expires, const char *action,
    void *arg), void *arg, struct sp_err *e);
/* Clears id's expiry once its action is done: 1 when it was still
 * expires (not moved by space-ttl meanwhile), else 0. */
int sp_db_sandbox_expiry_clear(struct sp_db *db, const char *id,
    int64_t expires, struct sp_err *e);
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
/* ready counts the pods of node (of every node, with NULL). */
int sp_db_pool_each(struct sp_db *db, const char *node,
    int (*fn)(const struct sp_pool_row *, void *), void *arg,
    struct sp_err *e);
/* Makes a sandbox a pod of pool (or, with NULL, no pod). */
int sp_db_pod_mark(struct sp_db *db, const char *id, const char *pool,
    struct sp_err *e);
/* Claims a ready pod of pool for template (name@digest), memory and vcpus
 * in one statement: it becomes a sandbox with labels, in state creating
 * until the caller has woken it.  1 and *id, 0 when none is ready.  With
 * quota, the tenant labels name must be under its quotas with one more
 * sandbox, in the same statement (quota-exceeded); without, the caller
 * counted it already (a row placed by the scheduler). */
int sp_db_pod_claim(struct sp_db *db, const char *node, const char *pool,
    const char *template, int memory_mib, int vcpus, const char *labels,
    const char *env, const char *name, const char *request_id, int quota,
    char id[SP_ID_LEN + 1], struct sp_err *e);
/* Sets a sandbox's handles (NULL or "": none), as a create gave them. */
int sp_db_sandbox_handles_set(struct sp_db *db, const char *id,
    const char *name, const char *request_id, struct sp_err *e);
/* The pods of pool on node (on every node, with NULL). */
int sp_db_pods_each(struct sp_db *db, const char *pool, const char *node,
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
/* A node of the cluster as the DB knows it.  Times are the DB's clock. */
struct sp_node_row {
	char name[64];
	char root[SP_PATH_MAX];
	char state[16];			/* ready | draining */
	int64_t memory_mib, vcpus, disk_free;	/* what it has (disk: bytes) */
	char virt[16];			/* kvm | qemu */
	char *templates;		/* JSON array of the name@digest it has;
					 * owned, free with sp_db_node_release */
	int64_t lease_left;		/* seconds its lease has left; <= 0: lapsed */
	int64_t seen;			/* its last beat, unix seconds */
	int64_t sandboxes;		/* its rows that hold a VM (not suspended) */
	int64_t memory_used_mib, vcpus_used;	/* what those ask for */
};
void sp_db_node_release(struct sp_node_row *n);
/* Registers n (all but state and the counts) and renews its lease to
 * lease_s seconds from now on the DB's clock. */
int sp_db_node_beat(struct sp_db *db, const struct sp_node_row *n, int lease_s,
    struct sp_err *e);
int sp_db_node_get(struct sp_db *db, const char *name, struct sp_node_row *n,
    struct sp_err *e);
int sp_db_node_each(struct sp_db *db, int (*fn)(const struct sp_node_row *, void *),
    void *arg, struct sp_err *e);
/* ready or draining; not-found when there is no such node. */
int sp_db_node_set_state(struct sp_db *db, const char *name, const char *state,
    struct sp_err *e);
/* Drops a node's row: only once its lease has lapsed and it holds no
 * sandbox row (bad-state says which it is). */
int sp_db_node_forget(struct sp_db *db, const char *name, struct sp_err *e);
/* Desired state: want is recorded for the sandbox's node to carry out
 * (not-found when there is no such sandbox); that node reports it done
 * (error NULL: want is cleared) or failed (want_error is set), only while
 * want is still what it carried out. */
int sp_db_sandbox_wish(struct sp_db *db, const char *id, const char *want,
    struct sp_err *e);
int sp_db_sandbox_wish_done(struct sp_db *db, const char *id, const char *want,
    const char *error, struct sp_err *e);
/* node's sandboxes with a wish not carried out (and, with failed_too,
 * those whose node could not). */
int sp_db_wishes_each(struct sp_db *db, const char *node, int failed_too,
    int (*fn)(const struct sp_sandbox_row *, void *), void *arg,
    struct sp_err *e);
/* Change wake-ups: after sp_db_listen, sp_db_wait returns 1 once a sandbox
 * row may have changed (PostgreSQL: a NOTIFY from the server; SQLite: a
 * write to the DB's files), 0 at timeout_ms, -1 on an error. */
int sp_db_listen(struct sp_db *db, struct sp_err *e);
int sp_db_wait(struct sp_db *db, int timeout_ms, struct sp_err *e);
/* A transaction, for the scheduler's pass (nothing else holds one). */
int sp_db_begin(struct sp_db *db, struct sp_err *e);
int sp_db_commit(struct sp_db *db, struct sp_err *e);
void sp_db_rollback(struct sp_db *db);
/* Up to limit sandboxes no node has yet (node '') with a wish, oldest
 * first, each locked against other schedulers till the transaction ends
 * (PostgreSQL: FOR UPDATE SKIP LOCKED; SQLite has one writer). */
int sp_db_unplaced_each(struct sp_db *db, int limit,
    int (*fn)(const struct sp_sandbox_row *, void *), void *arg,
    struct sp_err *e);
/* In a scheduler pass's transaction, first: waits for any other pass to
 * commit (the one row they all update), so that passes take turns. */
int sp_db_schedule_turn(struct sp_db *db, struct sp_err *e);
/* Gives an unplaced sandbox its node, and why (JSON); bad-state when it
 * has one already. */
int sp_db_sandbox_place_by(struct sp_db *db, const char *id, const char *node,
    const char *placed, struct sp_err *e);
/* A pod claimed (sp_db_pod_claim) for the unplaced row of a create: the
 * pod is wished running, with why (JSON), and the row is dropped. */
int sp_db_pod_taken_for(struct sp_db *db, const char *pod, const char *row,
    const char *placed, struct sp_err *e);
/* A node whose lease lapsed: its pods' rows go, and each sandbox that holds
 * a VM there, or was on the way to or from one, becomes lost (its
 * generation bumped: what the node does with it if it comes back loses the
 * compare-and-set); fn gets each id.  Then lost_recover unplaces those with
 * a restorable snapshot (a backup, or a suspend), wished running, for the
 * scheduler to restore elsewhere. */
int sp_db_node_lose(struct sp_db *db, const char *node,
    int (*fn)(const char *id, void *), void *arg, struct sp_err *e);
int sp_db_lost_recover(struct sp_db *db, const char *node,
    int (*fn)(const char *id, void *), void *arg, struct sp_err *e);
/* 0 when node takes new sandboxes (it is ready, or not registered yet);
 * bad-state when it is draining. */
int sp_db_node_takes(struct sp_db *db, const char *name, struct sp_err *e);
/* The warm pods waiting on every node, by template, memory and vCPUs: what
 * a claim (sp_db_pod_claim) must match. */
int sp_db_pod_kinds_each(struct sp_db *db, int (*fn)(const char *node,
    const char *template, int memory_mib, int vcpus, int64_t ready, void *),
    void *arg, struct sp_err *e);
/* The warm pods waiting on node, by pool. */
int sp_db_node_pods_each(struct sp_db *db, const char *node,
    int (*fn)(const char *template, int64_t ready, void *), void *arg,
    struct sp_err *e);


/*
 * ---- documents, rates and the audit ----
 * What the credential store and the egress policies keep in a DB that
 * nodes share (PostgreSQL); on one node's SQLite they stay files under its
 * root.  A document is one JSON text by kind ("cred", "egress"), scope and
 * name.
 */
/* *body (malloc'd, the caller frees it) or not-found. */
int sp_db_doc_get(struct sp_db *db, const char *kind, const char *scope,
    const char *name, char **body, struct sp_err *e);
/* replace 0: exists when it is there already. */
int sp_db_doc_put(struct sp_db *db, const char *kind, const char *scope,
    const char *name, const char *body, int replace, struct sp_err *e);
/* Replaces it only while it is still was: bad-state (temporary) when
 * another writer was first. */
int sp_db_doc_swap(struct sp_db *db, const char *kind, const char *scope,
    const char *name, const char *was, const char *body, struct sp_err *e);
int sp_db_doc_delete(struct sp_db *db, const char *kind, const char *scope,
    const char *name, int *removed, struct sp_err *e);
/* The documents of kind in scope (NULL: every scope) named name (NULL:
 * every name), in no order; fn returning non-zero stops it, and that is
 * what this returns. */
int sp_db_doc_each(struct sp_db *db, const char *kind, const char *scope,
    const char *name, int (*fn)(const char *scope, const char *name,
    const char *body, void *), void *arg, struct sp_err *e);
/* One credential's token bucket for one sandbox, changed by compare-and-
 * set: fn gets it (fresh: there was none; both 0) and sets what it
 * becomes; its return is this one's once the write took (else it runs
 * again on what was written in between). */
int sp_db_rate_update(struct sp_db *db, const char *cred, const char *sandbox,
    int (*fn)(int64_t *tokens, int64_t *last, int fresh, void *), void *arg,
    struct sp_err *e);
/* Drops the buckets of cred (NULL: any) for sandbox (NULL: any). */
int sp_db_rate_forget(struct sp_db *db, const char *cred, const char *sandbox,
    struct sp_err *e);
int sp_db_audit_add(struct sp_db *db, int64_t time, const char *line,
    struct sp_err *e);
/* The records of time >= since, oldest first; fn as in sp_db_doc_each. */
int sp_db_audit_each(struct sp_db *db, int64_t since,
    int (*fn)(const char *line, void *), void *arg, struct sp_err *e);
/*
 * The shared DB for the parts of the library that take a root only (the
 * credential store, the egress policies): sp_db_shared_take gives a handle
 * when the configuration's SPACE_DB is PostgreSQL, *db NULL (and 0) when
 * it is SQLite.  Give it back after use; handles are kept for the next
 * taker, from any thread.
 */
int sp_db_shared_take(struct sp_db **db, struct sp_err *e);
void sp_db_shared_give(struct sp_db *db);

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
/* Run as root, what root makes at path (fd, or path itself when fd is
 * -1) in a directory the user space owns is space's (its uid and gid), so
 * that the unprivileged manager goes on using its stores whoever wrote
 * last; anywhere else (root's, a VM jail's) nothing changes. */
int sp_path_adopt(int fd, const char *path, struct sp_err *e);
/* mkdir -p with mode for the directories it creates (sp_path_adopt'ed). */
int sp_path_mkdirs(const char *path, mode_t mode, struct sp_err *e);
/* The same, and run as root, path itself the user space's with mode
 * whoever made it (a directory of $SPACE_RUN space's processes write in). */
int sp_path_space_dir(const char *path, mode_t mode, struct sp_err *e);
/* The part of abs after root and a slash, or NULL when abs is not
 * beneath root (space-noded takes paths relative to SPACE_ROOT). */
const char *sp_path_beneath(const char *root, const char *abs);
/* rm -rf of a directory tree on this filesystem; absent is not an error. */
int sp_path_remove_tree(const char *path, struct sp_err *e);
/* text written to the existing file path in one write (a kernel's file:
 * sysfs, cgroupfs). */
int sp_path_write_text(const char *path, const char *text, struct sp_err *e);
/* text as the new file path (0644, this process's, sp_path_adopt'ed):
 * what was there is removed first, as a copy that came with a snapshot
 * may be another user's (root's, in a directory the user space made). */
int sp_path_replace_text(const char *path, const char *text,
    struct sp_err *e);

/* flock(LOCK_EX) on fd, waiting (wait 1) or not: busy (temp) when taken. */
int sp_flock(int fd, int wait, struct sp_err *e);
#define sp_flock_wait(fd, e) sp_flock((fd), 1, (e))
/* The lock file at path (made when missing) in *fd, held as sp_flock
 * holds it.  Open read-only, all flock needs, and readable by all: a lock
 * file a command run as root made, a command run as space takes as well
 * (the locks/ directory is space's alone, space-init). */
int sp_lock_path(const char *path, int wait, int *fd, struct sp_err *e);

/* A size like 512, 64K, 256M, 8G or 1T (powers of 1024). */
int sp_size_parse(const char *s, uint64_t *out, struct sp_err *e);

/* Unix seconds: SPACE_NOW when set (tests of lifetimes and retention),
 * else the real clock. */
int sp_now(int64_t *out, struct sp_err *e);
/* Unix milliseconds of the real clock (events' times). */
int64_t sp_wall_ms(void);
/* Milliseconds of CLOCK_MONOTONIC: for deadlines and durations. */
int64_t sp_clock_ms(void);

/* Crash injection for tests: when SPACE_CRASH_AT names this point, the
 * process dies here by SIGKILL, as a kill -9 would take it; when
 * SPACE_STOP_AT does, it stops (SIGSTOP) until sent SIGCONT. */
void sp_crashpoint(const char *name);

/* ---- the user of the node's unprivileged side (space-init makes it) ---- */
#define SP_USER			"space"	/* the user and its group */
/* 1 with its uid and group's gid (either may be NULL), 0 when there is no
 * such user; thread-safe (getpwnam_r), as the API server's threads ask;
 * found once, kept for the process's life. */
int sp_space_ids(uid_t *uid, gid_t *gid);
/* Run as root with the user space there: becomes it for good (uid, gid,
 * no other groups), keeping CAP_NET_BIND_SERVICE alone when low_ports,
 * and not dumpable (space's other processes may not ptrace it nor read its
 * memory).  1 when it did, 0 when not root or no such user, -1 on error.
 * Only while the process has one thread. */
int sp_become_space(int low_ports, struct sp_err *e);
/* 1 with the group name's gid, 0 when there is none; thread-safe. */
int sp_group_id(const char *name, gid_t *gid);

/* ---- proc: running the few external programs we need (no shell) ---- */
/* Runs argv[0] (PATH search) and waits; a non-zero exit is an error whose
 * message carries the tail of its stderr. */
int sp_proc_run(char *const argv[], struct sp_err *e);
/* A memory file for programs' stderr (close-on-exec): never full, one a
 * call. */
int sp_proc_errfd(struct sp_err *e);
/* argv with stdin from in, stdout to out (-1: /dev/null), stderr to err
 * (sp_proc_errfd; -1: /dev/null); then sp_proc_wait, whose error carries the
 * tail of err. */
int sp_proc_spawn(char *const argv[], int in, int out, int err, pid_t *pid,
    struct sp_err *e);
/* The same, and fds[0..nfds) as its descriptors 3, 4, ... (for a path
 * /proc/self/fd/N to what the caller opened). */
#define SP_PROC_FDS_MAX	4
int sp_proc_spawn_fds(char *const argv[], int in, int out, int err,
    const int *fds, int nfds, pid_t *pid, struct sp_err *e);
int sp_proc_wait(pid_t pid, const char *what, int err, struct sp_err *e);
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

/* ---- ca path: where the node CA's certificate is (sp_path.c) ---- */
/* root/ca/ca.crt, for templates to trust; "not-found" when absent. */
int sp_tls_ca_cert_path(const char *root, char *out, size_t n,
    struct sp_err *e);

/* ---- log: the program's name and human lines on stderr (sp_log.c) ---- */
/* The name sp_warn and progress lines give, from argv[0]. */
void sp_out_init(const char *prog);
const char *sp_out_prog(void);
/* "prog: message" on stderr. */
void sp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- event: the event log of what was done to sandboxes (sp_event.c) ---- */
struct sp_event {
	const char *actor;	/* NULL: the API's caller, else uid:N */
	const char *action;	/* "pause", "state", "e2b.create", ... */
	const char *sandbox;	/* NULL: none */
	const char *error;	/* NULL: it went well; else the token */
	int64_t ms;		/* how long it took; -1: not said */
	json_t *detail;		/* NULL, or an object of the rest */
};
struct sp_event_query {
	int64_t after;		/* rowids past this one */
	int64_t since_ms;	/* from this time on (Unix ms) */
	const char *sandbox;	/* NULL or "": every one */
	int max;		/* rows at most (0: 1000) */
};
/* Appends ev (now, this node, this program) to the log. */
int sp_event_add(struct sp_db *db, const struct sp_event *ev,
    struct sp_err *e);
/* The same, best effort: a miss is said once on stderr.  Takes detail. */
void sp_event_note(struct sp_db *db, const char *action, const char *sandbox,
    const char *error, int64_t ms, json_t *detail);
/* A command's events: sp_ctx opens and closes its DB for them, sp_each
 * begins each item, sp_out_json gives each line (the first for a sandbox
 * of an item is its event), and a command whose subcommand is the verb
 * names it ("snap.ls"); sp_event_cli records one outright (space-exec). */
void sp_event_open(struct sp_db *db);
void sp_event_close(struct sp_db *db);
void sp_event_begin(void);
void sp_event_action(const char *action);
void sp_event_line(json_t *line);
void sp_event_cli(const char *id, const struct sp_err *err, json_t *detail);
/* The actor of this thread's events (the API's caller); NULL clears it. */
void sp_event_actor(const char *actor);
/* Rows of the log as w says, in order, each given to fn as seq and a JSON
 * object that fn takes; fn returns non-zero to stop. */
int sp_db_event_each(struct sp_db *db, const struct sp_event_query *w,
    int (*fn)(int64_t seq, json_t *ev, void *), void *arg, struct sp_err *e);
/* The sequence number of the newest row (0: none). */
int sp_db_event_last(struct sp_db *db, int64_t *seq, struct sp_err *e);
/* Deletes the rows older than before_ms but the newest; how many, or -1. */
int64_t sp_db_event_prune(struct sp_db *db, int64_t before_ms,
    struct sp_err *e);
/* Deletes what keep (SPACE_EVENTS_KEEP, a period) no longer keeps, by
 * SPACE_NOW's clock; *gone says how many rows. */
int sp_event_prune(struct sp_db *db, const char *keep, int64_t *gone,
    struct sp_err *e);

#endif
