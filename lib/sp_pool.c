/*
 * sp_pool: the warm pool (design.md).  A pod is a sandbox made ahead of any
 * request: its clone exists, its VM booted (or restored from the template's
 * checkpoint) and its daemon answered, then its vCPUs were paused.  A create
 * claims one in a single DB statement, resumes it and tells it who it is.
 * fill keeps each pool at its size: what a timer runs, as often as it likes.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_sandbox.h"

int
sp_pool_set(struct sp_ctx *x, const char *template, int size, int memory_mib,
    int vcpus, struct sp_err *e)
{
	struct sp_template_row t;

	if (sp_name_check("template", template, e) == -1)
		return -1;
	if (size < 0 || size > 1000)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "pool size must be 0 to 1000");
	/* Size 0 needs no template: it is how a pool whose template was
	 * removed is let go. */
	if (size > 0 && sp_db_template_get(x->db, template, &t, e) == -1)
		return -1;
	return sp_db_pool_set(x->db, template, size, memory_mib, vcpus, e);
}

struct census {
	const struct sp_pool_row *p;
	const char *ref;
	char (*ready)[SP_ID_LEN + 1], (*stale)[SP_ID_LEN + 1];
	size_t nready, nstale, cap;
};

/* Sorts the pool's pods: ready ones (paused, of the current template, as
 * big as the pool asks) and stale ones; half-made ones belong to whoever is
 * making them, or to reconcile. */
static int
count_pod(const struct sp_sandbox_row *r, void *arg)
{
	struct census *c = arg;

	if (r->state == SP_ST_CREATING)
		return 0;
	if (c->nready + c->nstale == c->cap)
		return 0;
	if (r->state == SP_ST_PAUSED && strcmp(r->template, c->ref) == 0 &&
	    r->memory_mib == c->p->memory_mib && r->vcpus == c->p->vcpus)
		memcpy(c->ready[c->nready++], r->id, SP_ID_LEN + 1);
	else
		memcpy(c->stale[c->nstale++], r->id, SP_ID_LEN + 1);
	return 0;
}

static int
tell(int (*fn)(json_t *, void *), void *arg, json_t *o)
{
	return o != NULL ? fn(o, arg) : 0;
}

static int
fill1(struct sp_ctx *x, const struct sp_pool_row *p,
    int (*fn)(json_t *, void *), void *arg, struct sp_err *e)
{
	char ref[2 * SP_NAME_MAX + 2];
	struct sp_create_req req = { 0 };
	struct sp_template_row t;
	struct census c = { 0 };
	struct sp_err pe;
	json_t *made;
	int existed, gone = 0, left = 0, rc = -1;

	/* A template removed under its pool (space-template rm --force) makes
	 * every pod of it stale; a pool of size 0 is then dropped once they
	 * are gone, a bigger one fails with not-found, and the other pools
	 * fill all the same. */
	if (sp_db_template_get(x->db, p->template, &t, e) == -1) {
		if (e->code != SP_E_NOT_FOUND)
			return -1;
		gone = 1;
		ref[0] = '\0';
	} else
		snprintf(ref, sizeof ref, "%s@%s", t.name, t.digest);
	c.p = p;
	c.ref = ref;
	c.cap = 2048;
	c.ready = calloc(c.cap, sizeof *c.ready);
	c.stale = calloc(c.cap, sizeof *c.stale);
	if (c.ready == NULL || c.stale == NULL) {
		sp_err_sys(e, SP_E_INTERNAL, "calloc");
		goto out;
	}
	if (sp_db_pods_each(x->db, p->template, x->conf.node, count_pod, &c, e) == -1)
		goto out;
	/* Pods of an older template, or of another size, go; so do extras. */
	while (c.nstale > 0) {
		c.nstale--;
		if (sp_sandbox_remove(x, c.stale[c.nstale], &existed, &pe) == 0)
			tell(fn, arg, json_pack("{s:s, s:s, s:s}", "pool",
			    p->template, "action", "removed-stale", "id",
			    c.stale[c.nstale]));
		else
			left++;
	}
	while (c.nready > (size_t)p->size) {
		c.nready--;
		if (sp_sandbox_remove(x, c.ready[c.nready], &existed, &pe) == 0)
			tell(fn, arg, json_pack("{s:s, s:s, s:s}", "pool",
			    p->template, "action", "removed-extra", "id",
			    c.ready[c.nready]));
	}
	if (gone && p->size > 0)
		goto out;
	if (gone && left == 0) {
		if (sp_db_pool_drop(x->db, p->template, e) == -1)
			goto out;
		tell(fn, arg, json_pack("{s:s, s:s}", "pool", p->template,
		    "action", "dropped"));
		rc = 0;
		goto out;
	}
	req.template = ref;
	req.memory_mib = p->memory_mib;
	req.vcpus = p->vcpus;
	req.ready_timeout_ms = 180000;
	req.pod = 1;
	for (; c.nready < (size_t)p->size; c.nready++) {
		if (sp_sandbox_create(x, &req, &made, e) == -1)
			goto out;
		json_object_set_new(made, "pool", json_string(p->template));
		json_object_set_new(made, "action", json_string("made"));
		tell(fn, arg, made);
	}
	tell(fn, arg, json_pack("{s:s, s:s, s:i, s:i}", "pool", p->template,
	    "action", "full", "size", p->size, "ready", (int)c.nready));
	rc = 0;
out:
	free(c.ready);
	free(c.stale);
	return rc;
}

struct fill {
	struct sp_ctx *x;
	int (*fn)(json_t *, void *);
	void *arg;
	struct sp_pool_row *rows;
	size_t n, cap;
};

static int
collect(const struct sp_pool_row *p, void *arg)
{
	struct fill *f = arg;
	void *nv;

	if (f->n == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 8;
		if ((nv = realloc(f->rows, f->cap * sizeof *f->rows)) == NULL)
			return -1;
		f->rows = nv;
	}
	f->rows[f->n++] = *p;
	return 0;
}

int
sp_pool_fill(struct sp_ctx *x, int (*fn)(json_t *, void *), void *arg,
    struct sp_err *e)
{
	struct fill f = { x, fn, arg, NULL, 0, 0 };
	char lock[SP_PATH_MAX];
	struct sp_err pe;
	size_t i;
	int fd, rc = 0;

	if (sp_ctx_virt(x, e) == -1)
		return -1;
	/* A draining node's pools stop filling (and it takes no claims:
	 * its pods wait until it is ready again). */
	if (sp_db_node_takes(x->db, x->conf.node, &pe) == -1) {
		tell(fn, arg, json_pack("{s:s, s:s}", "node", x->conf.node,
		    "action", "draining"));
		return 0;
	}
	if (sp_db_pool_each(x->db, x->conf.node, collect, &f, e) == -1) {
		free(f.rows);
		return -1;
	}
	for (i = 0; i < f.n; i++) {
		/* One filler per pool at a time, or two would overfill it. */
		fd = -1;
		if (sp_path_fmt(lock, sizeof lock, &pe, "%s/locks/pool-%s.lock",
		    x->conf.root, f.rows[i].template) == -1 ||
		    sp_lock_path(lock, 1, &fd, &pe) == -1 ||
		    fill1(x, &f.rows[i], fn, arg, &pe) == -1) {
			tell(fn, arg, json_pack("{s:s, s:b, s:s, s:s}", "pool",
			    f.rows[i].template, "ok", 0, "error", sp_code_name(pe.code), "msg",
			    pe.msg));
			*e = pe;
			rc = -1;
		}
		if (fd != -1)
			close(fd);
	}
	free(f.rows);
	return rc;
}
