/*
 * sp_schedule: one pass of the scheduler (design.md).  It gives a node to
 * each sandbox that has none and is wished somewhere (space-create
 * --anywhere, space-restore --anywhere): the nodes that fit it (a live
 * lease, ready, free memory and vCPUs), then the one where a warm pod of
 * its template waits (a create's own pass claims that pod for it), then
 * the one with its template on disk, then the one with the fewest
 * sandboxes, then the most free memory.  The node's space-reconcile
 * carries the wish out.  Every placement says why.  First, a node whose
 * lease lapsed long enough ago is lost: its sandboxes become lost, and
 * those backed up to the store are placed anew (a policy: --no-recover
 * turns it off).  Safe on every node at once: passes take turns (each
 * first updates the one row of the table scheduler, which holds off the
 * next until it commits), the rows a pass takes are locked for it (FOR
 * UPDATE SKIP LOCKED), and it holds them only while it decides.
 */
#include <stdlib.h>
#include <string.h>

#include "sp_sandbox.h"

struct cand {
	char name[64];
	int alive, ready, lost;
	double free_mib, free_vcpus;
	int64_t sandboxes;
	json_t *templates;
	json_t *pods;		/* {"TEMPLATE/MiB/vCPUs": ready pods} */
};

struct pass {
	const struct sp_sched_opts *o;
	struct cand *c;
	size_t nc, capc;
	struct sp_sandbox_row *rows;
	size_t nr, capr;
};

static int
grow(void **v, size_t *cap, size_t n, size_t size)
{
	void *nv;

	if (n < *cap)
		return 0;
	*cap = *cap ? 2 * *cap : 16;
	if ((nv = realloc(*v, *cap * size)) == NULL)
		return -1;
	*v = nv;
	return 0;
}

static int
add_node(const struct sp_node_row *n, void *arg)
{
	struct pass *p = arg;
	struct cand *c;

	if (grow((void **)&p->c, &p->capc, p->nc, sizeof *p->c) == -1)
		return -1;
	c = &p->c[p->nc++];
	memset(c, 0, sizeof *c);
	snprintf(c->name, sizeof c->name, "%s", n->name);
	c->alive = n->lease_left > 0;
	c->lost = n->lease_left <= -(int64_t)p->o->lost_after_s;
	c->ready = strcmp(n->state, "ready") == 0;
	c->free_mib = (double)n->memory_mib * p->o->memory_ratio -
	    (double)n->memory_used_mib;
	c->free_vcpus = (double)n->vcpus * p->o->vcpu_ratio -
	    (double)n->vcpus_used;
	c->sandboxes = n->sandboxes;
	c->templates = json_loads(n->templates, 0, NULL);
	return 0;
}

static int
add_row(const struct sp_sandbox_row *r, void *arg)
{
	struct pass *p = arg;
	struct sp_sandbox_row *d;

	if (grow((void **)&p->rows, &p->capr, p->nr, sizeof *p->rows) == -1)
		return -1;
	d = &p->rows[p->nr++];
	*d = *r;
	/* Only the fixed fields are kept: the strings go with r. */
	d->labels = d->env = d->recovered = d->placed = NULL;
	return 0;
}

/* The key of c->pods a row of template, memory and vCPUs would claim. */
static void
pod_key(const char *template, int memory_mib, int vcpus, char *out, size_t n)
{
	snprintf(out, n, "%s/%d/%d", template, memory_mib, vcpus);
}

static int
add_pods(const char *node, const char *template, int memory_mib, int vcpus,
    int64_t ready, void *arg)
{
	struct pass *p = arg;
	char key[2 * SP_NAME_MAX + 40];
	size_t i;

	pod_key(template, memory_mib, vcpus, key, sizeof key);
	for (i = 0; i < p->nc; i++)
		if (strcmp(p->c[i].name, node) == 0)
			return json_object_set_new(p->c[i].pods, key,
			    json_integer(ready));
	return 0;
}

/* The pool a row of template ref would claim from: the template's name. */
static void
pool_of(const char *ref, char out[SP_NAME_MAX + 1])
{
	size_t n = strcspn(ref, "@");

	snprintf(out, SP_NAME_MAX + 1, "%.*s", (int)(n > SP_NAME_MAX ?
	    SP_NAME_MAX : n), ref);
}

/* How near c is to what r needs: 2 a pod of its template waits there
 * (for a create), 1 its template is on its disk, 0 neither. */
static int
locality(const struct cand *c, const struct sp_sandbox_row *r)
{
	char key[2 * SP_NAME_MAX + 40];
	size_t i;

	pod_key(r->template, r->memory_mib, r->vcpus, key, sizeof key);
	/* A pod has its template's disk and the node's CPU quota: not one
	 * for a larger disk or a quota of its own. */
	if (r->state == SP_ST_CREATING && r->disk_gb == 0 && r->cpu_pct == 0 &&
	    json_integer_value(json_object_get(c->pods, key)) > 0)
		return 2;
	for (i = 0; i < json_array_size(c->templates); i++)
		if (strcmp(json_string_value(json_array_get(c->templates, i)),
		    r->template) == 0)
			return 1;
	return 0;
}

/* 1 when a is the better of two nodes that fit. */
static int
better(const struct cand *a, int at, const struct cand *b, int bt)
{
	if (at != bt)
		return at > bt;
	if (a->sandboxes != b->sandboxes)
		return a->sandboxes < b->sandboxes;
	if (a->free_mib != b->free_mib)
		return a->free_mib > b->free_mib;
	return strcmp(a->name, b->name) < 0;
}

/* Picks r's node; NULL when none fits, with why saying so. */
static struct cand *
pick(struct pass *p, const struct sp_sandbox_row *r, char *why, size_t n,
    int *there)
{
	struct cand *best = NULL, *c;
	int fit = 0, dead = 0, draining = 0, full = 0, t, bt = 0;
	size_t i;

	for (i = 0; i < p->nc; i++) {
		c = &p->c[i];
		if (!c->alive) {
			dead++;
			continue;
		}
		if (!c->ready) {
			draining++;
			continue;
		}
		if (c->free_mib < r->memory_mib || c->free_vcpus < r->vcpus) {
			full++;
			continue;
		}
		fit++;
		t = locality(c, r);
		if (best == NULL || better(c, t, best, bt)) {
			best = c;
			bt = t;
		}
	}
	if (best == NULL) {
		snprintf(why, n, "no node fits %d MiB and %d vCPUs: %zu nodes, "
		    "%d full, %d draining, %d without a lease", r->memory_mib,
		    r->vcpus, p->nc, full, draining, dead);
		return NULL;
	}
	*there = bt;
	snprintf(why, n, "fits %d of %zu nodes; %s; %lld sandboxes there, "
	    "%.0f MiB free", fit, p->nc, bt == 2 ? "a pod of the template "
	    "waits there" : bt == 1 ? "the template is there" :
	    "the template is not on any that fits, pulled from the store",
	    (long long)best->sandboxes, best->free_mib);
	return best;
}

/* Where id is in o's claim_ids, or -1. */
static int
claimable(const struct sp_sched_opts *o, const char *id)
{
	size_t i;

	for (i = 0; i < o->nclaim; i++)
		if (strcmp(o->claim_ids[i], id) == 0)
			return (int)i;
	return -1;
}

/* Claims for r (a create's row) a pod waiting on c, in the pass's
 * transaction: the pod takes r's labels and environment and is wished
 * running with placed as why; r's row is dropped.  1 with pod set, 0 when
 * none was there after all (claimed meanwhile). */
static int
take_pod(struct sp_ctx *x, const struct sp_sandbox_row *r, struct cand *c,
    const char *placed, char pod[SP_ID_LEN + 1], struct sp_err *e)
{
	char pool[SP_NAME_MAX + 1], key[2 * SP_NAME_MAX + 40];
	struct sp_sandbox_row full;
	int got;

	pool_of(r->template, pool);
	pod_key(r->template, r->memory_mib, r->vcpus, key, sizeof key);
	if (sp_db_sandbox_get(x->db, r->id, &full, e) == -1)
		return -1;
	/* Its handles go to the pod (they are unique): taken from the row
	 * first, given back if no pod was there after all. */
	got = full.name[0] != '\0' || full.request_id[0] != '\0' ?
	    sp_db_sandbox_handles_set(x->db, r->id, NULL, NULL, e) : 0;
	if (got == 0)
		got = sp_db_pod_claim(x->db, c->name, pool, r->template,
		    r->memory_mib, r->vcpus, full.labels, full.env, full.name,
		    full.request_id, 0, pod, e);
	if (got == 0 && (full.name[0] != '\0' || full.request_id[0] != '\0') &&
	    sp_db_sandbox_handles_set(x->db, r->id, full.name,
	    full.request_id, e) == -1)
		got = -1;
	sp_db_row_release(&full);
	/* One fewer waits there; none, if the count was out of date. */
	json_object_set_new(c->pods, key, json_integer(got != 1 ? 0 :
	    json_integer_value(json_object_get(c->pods, key)) - 1));
	if (got != 1)
		return got;
	return sp_db_pod_taken_for(x->db, pod, r->id, placed, e) == -1 ? -1 : 1;
}

struct told {
	json_t *lines;
	const char *action, *node;
};

static int
tell_id(const char *id, void *arg)
{
	struct told *t = arg;

	return json_array_append_new(t->lines, json_pack("{s:s, s:b, s:s, s:s}",
	    "id", id, "ok", 1, "action", t->action, "node", t->node));
}

/* The sandboxes of lost nodes become lost; with o->recover, those that can
 * be restored are unplaced, for the placement below. */
static int
lose(struct sp_ctx *x, struct pass *p, json_t *lines, struct sp_err *e)
{
	struct told t = { lines, NULL, NULL };
	size_t i, j, from = json_array_size(lines);
	json_t *l;

	for (i = 0; i < p->nc; i++) {
		if (!p->c[i].lost)
			continue;
		t.node = p->c[i].name;
		t.action = "lost";
		if (sp_db_node_lose(x->db, t.node, tell_id, &t, e) == -1)
			return -1;
		t.action = "recovering";
		if (p->o->recover &&
		    sp_db_lost_recover(x->db, t.node, tell_id, &t, e) == -1)
			return -1;
	}
	/* Events once the rows are written (sp_event.c): lost is a state,
	 * recovering a wish to restore it elsewhere. */
	for (j = from; j < json_array_size(lines); j++) {
		l = json_array_get(lines, j);
		if (strcmp(json_string_value(json_object_get(l, "action")),
		    "lost") == 0)
			sp_event_note(x->db, "state", json_string_value(
			    json_object_get(l, "id")), NULL, -1, json_pack(
			    "{s:s, s:O}", "to", "lost", "node",
			    json_object_get(l, "node")));
		else
			sp_event_note(x->db, "recover", json_string_value(
			    json_object_get(l, "id")), NULL, -1, json_pack(
			    "{s:O}", "node", json_object_get(l, "node")));
	}
	return 0;
}

int
sp_schedule_pass(struct sp_ctx *x, const struct sp_sched_opts *o,
    int (*fn)(json_t *, void *), void *arg, int *placed, struct sp_err *e)
{
	struct pass p = { .o = o };
	struct sp_sandbox_row *r;
	char why[256], pod[SP_ID_LEN + 1], *text;
	struct cand *c;
	json_t *line, *lines;
	size_t i;
	int there, k, took, rc = -1;

	*placed = 0;
	/* Told once the pass is committed: a rollback places nothing. */
	if ((lines = json_array()) == NULL)
		return sp_err_sys(e, SP_E_INTERNAL, "out of memory");
	if (sp_db_begin(x->db, e) == -1) {
		json_decref(lines);
		return -1;
	}
	if (sp_db_schedule_turn(x->db, e) == -1 ||
	    sp_db_node_each(x->db, add_node, &p, e) == -1 ||
	    lose(x, &p, lines, e) == -1 ||
	    sp_db_unplaced_each(x->db, o->limit, add_row, &p, e) == -1)
		goto out;
	for (i = 0; i < p.nc; i++)
		if ((p.c[i].pods = json_object()) == NULL) {
			sp_err_sys(e, SP_E_INTERNAL, "out of memory");
			goto out;
		}
	if (sp_db_pod_kinds_each(x->db, add_pods, &p, e) == -1)
		goto out;
	for (i = 0; i < p.nr; i++) {
		r = &p.rows[i];
		if ((c = pick(&p, r, why, sizeof why, &there)) == NULL) {
			json_array_append_new(lines, json_pack("{s:s, s:b, s:s, "
			    "s:s, s:s}", "id", r->id, "ok", 0, "action",
			    "unplaced", "error", sp_code_name(SP_E_FULL), "why",
			    why));
			continue;
		}
		line = json_pack("{s:s, s:s, s:b, s:b, s:I, s:I}", "node",
		    c->name, "why", why, "template_there", there > 0,
		    "pod_waiting", there == 2, "sandboxes",
		    (json_int_t)c->sandboxes, "free_memory_mib",
		    (json_int_t)c->free_mib);
		/* A create's own row may take the pod itself. */
		took = 0;
		if (line != NULL && there == 2 &&
		    (k = claimable(o, r->id)) >= 0) {
			json_object_set_new(line, "claimed", json_true());
			text = json_dumps(line, JSON_COMPACT);
			took = text == NULL ? -1 : take_pod(x, r, c, text, pod, e);
			free(text);
			if (took == -1) {
				json_decref(line);
				goto out;
			}
			if (took == 1) {
				json_object_set_new(line, "for", json_string(r->id));
				json_object_set_new(line, "id", json_string(pod));
				json_object_set_new(line, "ok", json_true());
				json_object_set_new(line, "action",
				    json_string("claimed"));
				json_array_append_new(lines, line);
				snprintf(o->claim_ids[k], SP_ID_LEN + 1, "%s", pod);
				(*placed)++;
				continue;
			}
			/* None there after all (claimed meanwhile): that
			 * node has no pod to offer now, so pick again. */
			json_decref(line);
			i--;
			continue;
		}
		text = line ? json_dumps(line, JSON_COMPACT) : NULL;
		if (text == NULL ||
		    sp_db_sandbox_place_by(x->db, r->id, c->name, text, e) == -1) {
			free(text);
			json_decref(line);
			goto out;
		}
		free(text);
		/* What this pass placed counts for the next row. */
		c->free_mib -= r->memory_mib;
		c->free_vcpus -= r->vcpus;
		c->sandboxes++;
		(*placed)++;
		json_object_set_new(line, "id", json_string(r->id));
		json_object_set_new(line, "ok", json_true());
		json_object_set_new(line, "action", json_string("placed"));
		json_array_append_new(lines, line);
	}
	rc = sp_db_commit(x->db, e);
out:
	if (rc == -1) {
		sp_db_rollback(x->db);
		*placed = 0;
	} else
		for (i = 0; fn != NULL && i < json_array_size(lines); i++)
			fn(json_incref(json_array_get(lines, i)), arg);
	json_decref(lines);
	for (i = 0; i < p.nc; i++) {
		json_decref(p.c[i].templates);
		json_decref(p.c[i].pods);
	}
	free(p.c);
	free(p.rows);
	return rc;
}
