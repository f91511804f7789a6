/*
 * sp_sandbox: the operations on whole sandboxes: create (a pod from the
 * pool, else a new VM), remove, describe.  A sandbox is a writable btrfs
 * snapshot of its template (no bytes copied) booted as the libvirt domain
 * sp-<id>; making its VM is sp_sandbox_make.c's, the lifecycle verbs are
 * sp_lifecycle.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sp_sandbox.h"

static int remove_locked(struct sp_ctx *, const char *, int *,
    struct sp_err *);

/*
 * A template the DB knows (a node that shares it imported it) but this node
 * has not on its disk is pulled from the object store, where space-template
 * push, or a suspend of one of its sandboxes, put it.
 */
static int
template_here(struct sp_ctx *x, const struct sp_template_row *t,
    struct sp_err *e)
{
	char tpath[SP_PATH_MAX], ref[2 * SP_NAME_MAX + 2];
	struct sp_store *s = NULL;
	json_t *o = NULL;
	int rc;

	if (sp_template_path(x->conf.root, t, tpath, sizeof tpath, e) == -1)
		return -1;
	if (sp_subvol_exists(tpath))
		return 0;
	snprintf(ref, sizeof ref, "%s@%s", t->name, t->digest);
	if (sp_store_open(&s, x->conf.store, e) == -1)
		return -1;
	rc = sp_template_pull(x, s, ref, &o, e);
	json_decref(o);
	sp_store_close(s);
	if (rc == -1 && e->code == SP_E_NOT_FOUND)
		sp_err_set(e, SP_E_NOT_FOUND, 0, "template %s@%.12s is not on this "
		    "node, nor in the object store (space-template push %s on a "
		    "node that has it)", t->name, t->digest, t->name);
	return rc;
}

/* A disk asked for (--disk-gb) is no smaller than its template's. */
static int
disk_check(const struct sp_create_req *r, const struct sp_template_row *t,
    struct sp_err *e)
{
	if (r->disk_gb != 0 && (r->disk_gb < 1 || r->disk_gb > SP_DISK_GB_MAX ||
	    (int64_t)r->disk_gb * SP_GIB < (int64_t)t->disk_bytes))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "the disk must be from "
		    "the template's %lld GiB (%s's, rounded up) to %d GiB",
		    (long long)((t->disk_bytes + SP_GIB - 1) / SP_GIB), t->name,
		    SP_DISK_GB_MAX);
	return 0;
}

static int
create_one(struct sp_ctx *x, const struct sp_create_req *r, json_t **out,
    struct sp_err *e)
{
	struct sp_template_row t;
	int64_t t0 = sp_clock_ms();
	int rc, built;

	*out = NULL;
	if (r->chan != NULL)
		*r->chan = NULL;
	if (r->memory_mib < 64 || r->memory_mib > 65536)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "memory must be 64 to 65536 MiB");
	if (r->vcpus < 1 || r->vcpus > 64)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "vcpus must be 1 to 64");
	/* A draining node takes none, nor makes pods. */
	if (sp_db_node_takes(x->db, x->conf.node, e) == -1)
		return -1;
	/* Built on first use when only its source is known; once for many. */
	if (sp_template_materialize(x, r->template, &t, &built, e) == -1 ||
	    template_here(x, &t, e) == -1)
		return -1;
	if (disk_check(r, &t, e) == -1)
		return -1;
	/* A pod's disk is its template's, its CPU quota the node's. */
	if (!r->pod && !r->no_pool && r->placed_id == NULL && r->disk_gb == 0 &&
	    r->cpu_pct == 0) {
		if ((rc = sp_pool_claim(x, r, &t, t0, out, e)) != 0)
			return rc == 1 ? 0 : -1;
	}
	/* No pod: this one is made here, through libvirt. */
	return sp_sandbox_make_new(x, r, &t, t0, sp_pool_prepare, out, e);
}

/* A lifetime and idle tiers, which are set once the sandbox is made. */
static int
lifetime_check(const struct sp_create_req *r, struct sp_err *e)
{
	struct sp_idle p;

	if (r->ttl_s < 0 || (r->on_expiry != NULL &&
	    !sp_on_expiry_ok(r->on_expiry)))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a lifetime of seconds, "
		    "and on expiry kill, pause or suspend");
	if (r->idle != NULL && sp_idle_parse(r->idle, &p, e) == -1)
		return -1;
	return 0;
}

/* r's lifetime on id's row, counted from now (*expires when it has one),
 * and its idle tiers. */
static int
lifetime_set(struct sp_ctx *x, const struct sp_create_req *r, const char *id,
    int64_t *expires, struct sp_err *e)
{
	int64_t now;

	*expires = 0;
	if (r->idle != NULL && sp_db_sandbox_idle_set(x->db, id, r->idle,
	    e) == -1)
		return -1;
	if (r->ttl_s <= 0)
		return 0;
	if (sp_now(&now, e) == -1)
		return -1;
	*expires = now + r->ttl_s;
	return sp_db_sandbox_expiry_set(x->db, id, *expires, r->on_expiry ?
	    r->on_expiry : "kill", e);
}

/* The tenant r's labels name, "" for none: where its handles are unique. */
static const char *
req_tenant(const struct sp_create_req *r)
{
	const char *t = json_string_value(json_object_get(r->labels, "tenant"));

	return t != NULL ? t : "";
}

static int
handles_check(const struct sp_create_req *r, struct sp_err *e)
{
	if (r->name != NULL && sp_handle_check(r->name, e) == -1)
		return -1;
	if (r->request_id != NULL &&
	    sp_request_id_check(r->request_id, e) == -1)
		return -1;
	return 0;
}

/*
 * The sandbox an earlier create of r's request id made, in *out marked
 * "existing": 1, or 0 when there is none.  One still being made is waited
 * for, as long as this create would have waited; one that goes away
 * meanwhile (its create failed) is none.  A request id stands for one
 * create: a retry must ask for the same template and name.
 */
#define EARLIER_POLL_MS	200

/* 0 when row is what r asks for (a retry of it), else exists. */
static int
same_create(const struct sp_create_req *r, const struct sp_sandbox_row *row,
    struct sp_err *e)
{
	size_t n = strcspn(r->template, "@");

	if (strncmp(row->template, r->template, n) != 0 ||
	    row->template[n] != '@' || (r->template[n] == '@' &&
	    strcmp(row->template, r->template) != 0) ||
	    strcmp(row->name, r->name ? r->name : "") != 0)
		return sp_err_set(e, SP_E_EXISTS, 0, "request id '%s' made %s, "
		    "of template %s and name '%s': not this create",
		    r->request_id, row->id, row->template, row->name);
	return 0;
}

/* The row of r's request id in *row (the caller's to release): 1, or 0
 * when there is none. */
static int
request_row(struct sp_ctx *x, const struct sp_create_req *r,
    struct sp_sandbox_row *row, struct sp_err *e)
{
	char id[SP_ID_LEN + 1];

	if (sp_db_sandbox_by_handle(x->db, req_tenant(r), 1, r->request_id,
	    id, e) == -1 || sp_db_sandbox_get(x->db, id, row, e) == -1)
		return e->code == SP_E_NOT_FOUND ? 0 : -1;
	return 1;
}

static int
earlier_create(struct sp_ctx *x, const struct sp_create_req *r, json_t **out,
    struct sp_err *e)
{
	int64_t deadline = sp_clock_ms() + r->ready_timeout_ms;
	struct sp_sandbox_row row;
	int rc;

	if (r->request_id == NULL)
		return 0;
	for (;;) {
		if ((rc = request_row(x, r, &row, e)) != 1)
			return rc;
		if (row.state != SP_ST_CREATING || sp_clock_ms() >= deadline)
			break;
		sp_db_row_release(&row);
		if (sp_db_wait(x->db, EARLIER_POLL_MS, e) == -1)
			return -1;
	}
	if (same_create(r, &row, e) == -1)
		rc = -1;
	else if (row.state == SP_ST_CREATING)
		rc = sp_err_set(e, SP_E_TIMED_OUT, 1, "the create of request "
		    "id '%s' (%s) is still being made", r->request_id, row.id);
	else if ((*out = json_pack("{s:s, s:s, s:s, s:s, s:b}", "id", row.id,
	    "state", sp_state_name(row.state), "template", row.template,
	    "request_id", row.request_id, "existing", 1)) == NULL)
		rc = sp_err_set(e, SP_E_INTERNAL, 0, "out of memory");
	else {
		if (row.name[0] != '\0')
			json_object_set_new(*out, "name",
			    json_string(row.name));
		rc = 1;
	}
	sp_db_row_release(&row);
	return rc;
}

/* A create refused because a handle is taken: by a racer of the same
 * request id (whose sandbox is then the answer, 1), else by another of
 * the name, said plainly. */
static int
handle_taken(struct sp_ctx *x, const struct sp_create_req *r, json_t **out,
    struct sp_err *e)
{
	struct sp_err first = *e;
	char id[SP_ID_LEN + 1];
	int rc;

	if ((rc = earlier_create(x, r, out, e)) != 0)
		return rc;
	if (r->name != NULL && sp_db_sandbox_by_handle(x->db, req_tenant(r),
	    0, r->name, id, e) == 0)
		return sp_err_set(e, SP_E_EXISTS, 0, "a sandbox named '%s' "
		    "exists: %s", r->name, id);
	*e = first;
	return -1;
}

int
sp_sandbox_ref(struct sp_ctx *x, const char *ref, char id[SP_ID_LEN + 1],
    struct sp_err *e)
{
	if (sp_handle_valid(ref))
		return sp_db_sandbox_by_handle(x->db, NULL, 0, ref, id, e);
	if (sp_id_check(ref, e) == -1) {
		char why[sizeof e->msg];

		snprintf(why, sizeof why, "%s", e->msg);
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s, nor a name (1 to "
		    "%d of a-z, 0-9 and '-')", why, SP_HANDLE_MAX);
	}
	memcpy(id, ref, SP_ID_LEN + 1);
	return 0;
}

static int
mount_volume(struct sp_ctx *x, const struct sp_create_req *r, const char *id,
    struct sp_err *e)
{
	int fd, rc, changed;

	if (sp_sandbox_lock(x, id, 1, &fd, e) == -1)
		return -1;
	rc = sp_volume_attach(x, id, r->volume, r->volume_path, r->volume_ro,
	    &changed, e);
	sp_sandbox_unlock(fd);
	return rc;
}

int
sp_sandbox_create(struct sp_ctx *x, const struct sp_create_req *r, json_t **out,
    struct sp_err *e)
{
	const char *id;
	int64_t expires;
	int existed, rc;
	struct sp_err ignored;

	*out = NULL;
	if (lifetime_check(r, e) == -1 || handles_check(r, e) == -1)
		return -1;
	/* A retry: what the first try made (it may have failed since). */
	if ((rc = earlier_create(x, r, out, e)) != 0)
		return rc == 1 ? 0 : -1;
	if (create_one(x, r, out, e) == -1)
		return e->code == SP_E_EXISTS && (r->name != NULL ||
		    r->request_id != NULL) && handle_taken(x, r, out, e) == 1 ?
		    0 : -1;
	if (r->name != NULL)
		json_object_set_new(*out, "name", json_string(r->name));
	if (r->request_id != NULL)
		json_object_set_new(*out, "request_id",
		    json_string(r->request_id));
	id = json_string_value(json_object_get(*out, "id"));
	/* Its volume, or no sandbox: what it was made for needs it. */
	if (r->volume != NULL && (id == NULL || mount_volume(x, r, id,
	    e) == -1)) {
		if (id != NULL && !json_is_true(json_object_get(*out,
		    "existing")))
			(void)sp_sandbox_remove(x, id, &existed, &ignored);
		json_decref(*out);
		*out = NULL;
		return -1;
	}
	if (r->volume != NULL)
		json_object_set_new(*out, "volume", json_pack("{s:s, s:s, s:b}",
		    "volume", r->volume, "path", r->volume_path, "ro",
		    r->volume_ro));
	if (r->ttl_s <= 0 && r->idle == NULL)
		return 0;
	/* A sandbox whose lifetime could not be recorded is not left to
	 * live for ever. */
	if (id == NULL || lifetime_set(x, r, id, &expires, e) == -1) {
		if (id != NULL)
			(void)sp_sandbox_remove(x, id, &existed, &ignored);
		json_decref(*out);
		*out = NULL;
		return -1;
	}
	if (expires > 0) {
		json_object_set_new(*out, "expires",
		    json_integer((json_int_t)expires));
		json_object_set_new(*out, "on_expiry", json_string(r->on_expiry ?
		    r->on_expiry : "kill"));
	}
	if (r->idle != NULL)
		json_object_set_new(*out, "idle", json_string(r->idle));
	return 0;
}

int
sp_sandbox_remove(struct sp_ctx *x, const char *id, int *existed,
    struct sp_err *e)
{
	int fd, rc;

	*existed = 0;
	if (sp_id_check(id, e) == -1 || sp_sandbox_lock(x, id, 1, &fd, e) == -1)
		return -1;
	rc = remove_locked(x, id, existed, e);
	sp_sandbox_unlock(fd);
	return rc;
}

static int
remove_locked(struct sp_ctx *x, const char *id, int *existed,
    struct sp_err *e)
{
	char snaps[SP_PATH_MAX];
	struct sp_sandbox_row row;
	struct sp_err ge;
	int in_db;

	*existed = 0;
	if (sp_id_check(id, e) == -1)
		return -1;
	if (sp_ctx_virt(x, e) == -1)
		return -1;
	if (sp_path_fmt(snaps, sizeof snaps, e, "%s/snapshots/%s", x->conf.root,
	    id) == -1)
		return -1;
	in_db = sp_db_sandbox_get(x->db, id, &row, &ge) == 0;
	if (!in_db && ge.code != SP_E_NOT_FOUND) {
		*e = ge;
		return -1;
	}
	if (in_db) {
		*existed = 1;
		/* Marking it destroyed first makes racing commands fail cleanly. */
		if (row.state != SP_ST_DESTROYED &&
		    sp_db_transition(x->db, id, SP_ST_DESTROYED, -1, NULL, e) == -1) {
			sp_db_row_release(&row);
			return -1;
		}
		sp_db_row_release(&row);
	}
	if (sp_sandbox_teardown(x, id, existed, e) == -1)
		return -1;
	if (access(snaps, F_OK) == 0)
		*existed = 1;
	if (sp_snap_remove_all(x, id, e) == -1)
		return -1;
	/* What a suspend put in the object store goes too; when the store
	 * does not answer, the row stays destroyed and the next try (or
	 * reconcile) finishes. */
	if (in_db && sp_remote_forget(x, id, e) == -1)
		return -1;
	return sp_sandbox_forget(x, id, e);
}

/* What libvirt says, mapped to our states; a vanished VM of a live row failed. */
static const char *
observed_state(const struct sp_sandbox_row *r, const char *v)
{
	if (strcmp(v, "running") == 0 && r->state == SP_ST_RUNNING)
		return "running";
	if (strcmp(v, "paused") == 0 &&
	    (r->state == SP_ST_PAUSED || r->state == SP_ST_RUNNING))
		return "paused";
	if (r->state == SP_ST_RUNNING || r->state == SP_ST_PAUSED) {
		if (strcmp(v, "absent") == 0 || strcmp(v, "shutoff") == 0 ||
		    strcmp(v, "crashed") == 0)
			return "failed";
	}
	return sp_state_name(r->state);
}

/* What the sandbox's daemon says of its activity (sp_sandbox.h); each
 * number -1 when it does not answer in time (busy, paused, gone) or says
 * one out of bounds.  The numbers come from the guest: they are checked,
 * never trusted further than display values. */
#define IDLE_ASK_MS	2000
#define IDLE_MAX_S	(100LL * 365 * 86400)
#define CALLS_MAX	(1LL << 53)

static long long
bounded(json_t *rep, const char *key, long long max)
{
	json_t *v = json_object_get(rep, key);

	return json_is_integer(v) && json_integer_value(v) >= 0 &&
	    json_integer_value(v) <= max ? json_integer_value(v) : -1;
}

void
sp_sandbox_activity(struct sp_ctx *x, const char *id, long long *idle_s,
    long long *calls)
{
	struct sp_chan *c = NULL;
	struct sp_err e;
	json_t *rep;

	*idle_s = *calls = -1;
	if (sp_chan_open(&c, x->conf.run, id, IDLE_ASK_MS, &e) == -1)
		return;
	if (sp_chan_call(c, json_pack("{s:s}", "op", "activity"), IDLE_ASK_MS,
	    &rep, &e) == 0) {
		*idle_s = bounded(rep, "idle_s", IDLE_MAX_S);
		*calls = bounded(rep, "calls", CALLS_MAX);
		json_decref(rep);
	}
	sp_chan_close(c);
}

static long long
ask_idle(struct sp_ctx *x, const char *id)
{
	long long idle, calls;

	sp_sandbox_activity(x, id, &idle, &calls);
	return idle;
}

int
sp_sandbox_describe(struct sp_ctx *x, const struct sp_sandbox_row *r,
    json_t **out, struct sp_err *e)
{
	char dir[SP_PATH_MAX], dom[SP_ID_LEN + 4], vstate[16];
	json_t *labels, *o, *excl, *rec;
	const char *state = sp_state_name(r->state);
	int here = strcmp(r->node, x->conf.node) == 0;
	uint64_t bytes;
	struct sp_err ve;
	long long idle = -1;

	*out = NULL;
	excl = json_null();
	/* What runs on another node is seen there: here only its record. */
	if (here) {
		sp_sandbox_domain(r->id, dom);
		if (sp_ctx_virt(x, e) == -1 ||
		    sp_virt_state(x->virt, dom, vstate, e) == -1 ||
		    sp_sandbox_dir(x, r->id, dir, sizeof dir, e) == -1)
			return -1;
		/* A sandbox whose subvolume is gone lists with null bytes. */
		if (sp_subvol_exists(dir) &&
		    sp_subvol_exclusive_bytes(dir, &bytes, &ve) == 0)
			excl = json_integer((json_int_t)bytes);
		state = observed_state(r, vstate);
		if (strcmp(state, "running") == 0)
			idle = ask_idle(x, r->id);
	}
	labels = json_loads(r->labels ? r->labels : "{}", 0, NULL);
	o = json_pack("{s:s, s:s, s:o, s:s, s:I, s:s, s:i, s:i, s:o, s:o, s:o, "
	    "s:I}", "id", r->id, "state", state, "vm", here ? json_string(vstate) :
	    json_null(),
	    "template", r->template, "created", (json_int_t)r->created,
	    "node", r->node, "memory_mib", r->memory_mib, "vcpus", r->vcpus,
	    "disk_exclusive_bytes", excl, "idle_s", idle >= 0 ?
	    json_integer(idle) : json_null(), "labels", labels ? labels :
	    json_object(), "gen", (json_int_t)r->gen);
	if (o != NULL && r->pod)
		json_object_set_new(o, "pod", json_true());
	/* Its handles (space-create --name, --request-id). */
	if (o != NULL && r->name[0] != '\0')
		json_object_set_new(o, "name", json_string(r->name));
	if (o != NULL && r->request_id[0] != '\0')
		json_object_set_new(o, "request_id", json_string(r->request_id));
	/* A disk of its own size (--disk-gb), not its template's. */
	if (o != NULL && r->disk_gb > 0)
		json_object_set_new(o, "disk_gb", json_integer(r->disk_gb));
	/* A CPU quota of its own (--cpu-quota), in CPUs. */
	if (o != NULL && r->cpu_pct > 0)
		json_object_set_new(o, "cpu_quota", json_real(r->cpu_pct / 100.0));
	/* A lifetime (--ttl, space-ttl): when, and what then. */
	if (o != NULL && r->expires > 0) {
		json_object_set_new(o, "expires", json_integer(r->expires));
		json_object_set_new(o, "on_expiry", json_string(r->on_expiry[0] ?
		    r->on_expiry : "kill"));
	}
	/* Idle tiers of its own (--idle), not the node's. */
	if (o != NULL && r->idle[0] != '\0')
		json_object_set_new(o, "idle", json_string(r->idle));
	/* A wish its node has not carried out yet, or could not. */
	if (o != NULL && r->want[0] != '\0')
		json_object_set_new(o, "want", json_string(r->want));
	if (o != NULL && r->want_error[0] != '\0' &&
	    (rec = json_loads(r->want_error, 0, NULL)) != NULL)
		json_object_set_new(o, "want_error", rec);
	if (o != NULL && r->placed != NULL &&
	    (rec = json_loads(r->placed, 0, NULL)) != NULL)
		json_object_set_new(o, "placed", rec);
	/* The last rollback or recovery: {"snap","kind","at","why"}. */
	if (o != NULL && r->recovered != NULL &&
	    (rec = json_loads(r->recovered, 0, NULL)) != NULL)
		json_object_set_new(o, "recovered", rec);
	if (o == NULL)
		return sp_err_set(e, SP_E_INTERNAL, 0, "json_pack");
	*out = o;
	return 0;
}

int
sp_sandbox_wait(struct sp_ctx *x, const char *id, const char *state,
    int timeout_ms, struct sp_sandbox_row *out, struct sp_err *e)
{
	int64_t deadline = sp_clock_ms() + timeout_ms, left;
	struct sp_sandbox_row r;
	enum sp_code code;
	const char *msg;
	json_t *err;

	for (;;) {
		if (sp_db_sandbox_get(x->db, id, &r, e) == -1) {
			/* Gone: what a removal was waiting for. */
			if (e->code == SP_E_NOT_FOUND && strcmp(state,
			    "destroyed") == 0) {
				memset(out, 0, sizeof *out);
				snprintf(out->id, sizeof out->id, "%s", id);
				out->state = SP_ST_DESTROYED;
				return 0;
			}
			return -1;
		}
		if (r.want_error[0] != '\0') {
			/* {"error":TOKEN,"msg":...}, as its node wrote it. */
			err = json_loads(r.want_error, 0, NULL);
			if (sp_code_of(json_string_value(json_object_get(err,
			    "error")), &code) == -1)
				code = SP_E_INTERNAL;
			msg = json_string_value(json_object_get(err, "msg"));
			sp_err_set(e, code, 0, "node %s: %s", r.node,
			    msg ? msg : r.want_error);
			json_decref(err);
			sp_db_row_release(&r);
			return -1;
		}
		if (r.want[0] == '\0' && strcmp(sp_state_name(r.state), state) == 0) {
			*out = r;
			return 0;
		}
		sp_db_row_release(&r);
		if ((left = deadline - sp_clock_ms()) <= 0)
			return sp_err_set(e, SP_E_TIMED_OUT, 1, "%s is not %s after "
			    "%d s", id, state, timeout_ms / 1000);
		if (sp_db_wait(x->db, (int)left, e) == -1)
			return -1;
	}
}

/* For a request: the row of r's request id, 1 with its id (-1 when it is
 * not a retry of r), or 0 when there is none. */
static int
earlier_request(struct sp_ctx *x, const struct sp_create_req *r,
    char id[SP_ID_LEN + 1], struct sp_err *e)
{
	struct sp_sandbox_row row;
	int rc;

	if ((rc = request_row(x, r, &row, e)) != 1)
		return rc;
	memcpy(id, row.id, SP_ID_LEN + 1);
	rc = same_create(r, &row, e) == -1 ? -1 : 1;
	sp_db_row_release(&row);
	return rc;
}

int
sp_sandbox_request(struct sp_ctx *x, const struct sp_create_req *r,
    char id[SP_ID_LEN + 1], struct sp_err *e)
{
	struct sp_sandbox_row row = { 0 };
	struct sp_template_row t;
	struct sp_err ignored;
	char *labels, *env;
	int64_t expires;
	int rc;

	if (r->memory_mib < 64 || r->memory_mib > 65536)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "memory must be 64 to 65536 MiB");
	if (r->vcpus < 1 || r->vcpus > 64)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "vcpus must be 1 to 64");
	if (lifetime_check(r, e) == -1 || handles_check(r, e) == -1)
		return -1;
	/* Named to the digest now: the node it lands on makes that one. */
	if (sp_db_template_get(x->db, r->template, &t, e) == -1 ||
	    disk_check(r, &t, e) == -1 || sp_id_new(row.id, e) == -1)
		return -1;
	labels = r->labels ? json_dumps(r->labels, JSON_COMPACT | JSON_SORT_KEYS) :
	    NULL;
	env = r->env ? json_dumps(r->env, JSON_COMPACT) : NULL;
	row.state = SP_ST_CREATING;
	snprintf(row.template, sizeof row.template, "%s@%s", t.name, t.digest);
	row.created = (int64_t)time(NULL);
	row.memory_mib = r->memory_mib;
	row.vcpus = r->vcpus;
	row.disk_gb = r->disk_gb;
	row.cpu_pct = r->cpu_pct;
	row.labels = labels;
	row.env = env;
	snprintf(row.want, sizeof row.want, "running");
	snprintf(row.name, sizeof row.name, "%s", r->name ? r->name : "");
	snprintf(row.request_id, sizeof row.request_id, "%s", r->request_id ?
	    r->request_id : "");
	/* A retry of a request id: the row the first try wrote (or a
	 * racer's), whatever has become of it since. */
	rc = r->request_id != NULL ? earlier_request(x, r, id, e) : 0;
	if (rc == 0) {
		rc = sp_db_sandbox_insert(x->db, &row, e);
		if (rc == -1 && e->code == SP_E_EXISTS && r->request_id != NULL &&
		    (rc = earlier_request(x, r, id, e)) == 0)
			rc = sp_err_set(e, SP_E_EXISTS, 0, "a sandbox named "
			    "'%s' exists", r->name ? r->name : "");
	}
	free(labels);
	free(env);
	if (rc != 0)
		return rc;
	if (lifetime_set(x, r, row.id, &expires, e) == -1) {
		(void)sp_db_sandbox_delete(x->db, row.id, &ignored);
		return -1;
	}
	memcpy(id, row.id, SP_ID_LEN + 1);
	return 0;
}
