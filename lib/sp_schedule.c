/*
 * sp_schedule: one pass of the scheduler (design.md).  It gives a node to
 * each sandbox that has none and is wished somewhere (space-create
 * --anywhere, space-restore --anywhere): the nodes that fit it (a live
 * lease, ready, free memory and vCPUs), then the one with its template on
 * disk, then the one with the fewest sandboxes, then the most free memory.
 * The node's space-reconcile carries the wish out.  Every placement says
 * why.  First, a node whose lease lapsed long enough ago is lost: its
 * sandboxes become lost, and those backed up to the store are placed anew
 * (a policy: --no-recover turns it off).  Safe on every node at once: the rows a pass takes are locked for it
 * (FOR UPDATE SKIP LOCKED), and it holds them only while it decides.
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

static int
has_template(const struct cand *c, const char *ref)
{
	size_t i;

	for (i = 0; i < json_array_size(c->templates); i++)
		if (strcmp(json_string_value(json_array_get(c->templates, i)),
		    ref) == 0)
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
		t = has_template(c, r->template);
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
	    "%.0f MiB free", fit, p->nc, bt ? "the template is there" :
	    "the template is not on any that fits, pulled from the store",
	    (long long)best->sandboxes, best->free_mib);
	return best;
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
	size_t i;

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
	return 0;
}

int
sp_schedule_pass(struct sp_ctx *x, const struct sp_sched_opts *o,
    int (*fn)(json_t *, void *), void *arg, int *placed, struct sp_err *e)
{
	struct pass p = { .o = o };
	struct sp_sandbox_row *r;
	char why[256], *text;
	struct cand *c;
	json_t *line, *lines;
	size_t i;
	int there, rc = -1;

	*placed = 0;
	/* Told once the pass is committed: a rollback places nothing. */
	if ((lines = json_array()) == NULL)
		return sp_err_sys(e, SP_E_INTERNAL, "out of memory");
	if (sp_db_begin(x->db, e) == -1) {
		json_decref(lines);
		return -1;
	}
	if (sp_db_node_each(x->db, add_node, &p, e) == -1 ||
	    lose(x, &p, lines, e) == -1 ||
	    sp_db_unplaced_each(x->db, o->limit, add_row, &p, e) == -1)
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
		line = json_pack("{s:s, s:s, s:b, s:I, s:I}", "node", c->name,
		    "why", why, "template_there", there, "sandboxes",
		    (json_int_t)c->sandboxes, "free_memory_mib",
		    (json_int_t)c->free_mib);
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
	for (i = 0; i < p.nc; i++)
		json_decref(p.c[i].templates);
	free(p.c);
	free(p.rows);
	return rc;
}
