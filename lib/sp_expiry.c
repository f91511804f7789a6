/*
 * sp_expiry: a sandbox's lifetime (design.md).  Its row holds when it
 * expires and what then: kill, pause or suspend.  The reconcile pass (and
 * space-apid's timer) carries out what is due.  The action comes first and
 * the expiry is cleared after it, only if no one moved it meanwhile: a
 * command killed between the two leaves the expiry due, and the next pass
 * does the action again, which finds it done (each verb is idempotent).  So
 * each expiry changes its sandbox once, whatever dies when.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_sandbox.h"

#define DUE_MAX	256	/* sandboxes one pass expires; the next takes more */

struct due {
	char id[SP_ID_LEN + 1];
	int64_t expires;
	char action[16];
};

struct due_list {
	struct due v[DUE_MAX];
	int n;
};

static int
collect(const char *id, int64_t expires, const char *action, void *arg)
{
	struct due_list *l = arg;

	if (l->n == DUE_MAX)
		return 1;
	snprintf(l->v[l->n].id, sizeof l->v[l->n].id, "%s", id);
	l->v[l->n].expires = expires;
	snprintf(l->v[l->n].action, sizeof l->v[l->n].action, "%s", action);
	l->n++;
	return 0;
}

/* The action; *changed 0 when the sandbox was already so. */
static int
act(struct sp_ctx *x, const struct due *d, int *changed, struct sp_err *e)
{
	json_t *out = NULL;
	int rc;

	if (strcmp(d->action, "pause") == 0)
		return sp_sandbox_pause(x, d->id, changed, e);
	if (strcmp(d->action, "suspend") == 0) {
		rc = sp_suspend(x, d->id, 0, &out, e);
		*changed = 1;
		if (rc == 0 && json_is_false(json_object_get(out, "changed")))
			*changed = 0;
		json_decref(out);
		return rc;
	}
	return sp_sandbox_remove(x, d->id, changed, e);
}

int
sp_expiry_run(struct sp_ctx *x, int (*fn)(json_t *, void *), void *arg,
    struct sp_err *e)
{
	struct due_list *l;
	struct sp_err ae, ce;
	int64_t now;
	json_t *o;
	int i, rc, changed, failed = 0, final;

	if (sp_now(&now, e) == -1)
		return -1;
	if ((l = calloc(1, sizeof *l)) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 0, "expiry list");
	if (sp_db_sandbox_expiry_due(x->db, x->conf.node, now, DUE_MAX, collect,
	    l, e) == -1) {
		free(l);
		return -1;
	}
	for (i = 0; i < l->n; i++) {
		changed = 0;
		sp_err_clear(&ae);
		rc = act(x, &l->v[i], &changed, &ae);
		/* A sandbox gone, or in a state the action cannot leave
		 * (a stopped one to pause), is done with its expiry; any other
		 * error leaves it due for the next pass. */
		final = rc == 0 || ae.code == SP_E_NOT_FOUND ||
		    ae.code == SP_E_BAD_STATE;
		sp_crashpoint("expiry-after-act");
		if (final && sp_db_sandbox_expiry_clear(x->db, l->v[i].id,
		    l->v[i].expires, &ce) == -1 && rc == 0) {
			ae = ce;
			rc = -1;
		}
		o = json_pack("{s:s, s:b, s:s, s:s, s:I, s:b}", "id", l->v[i].id,
		    "ok", rc == 0, "action", "expired", "on_expiry",
		    l->v[i].action, "expires", (json_int_t)l->v[i].expires,
		    "changed", rc == 0 && changed);
		if (o != NULL && rc != 0) {
			json_object_set_new(o, "error",
			    json_string(sp_code_name(ae.code)));
			json_object_set_new(o, "msg", json_string(ae.msg));
			failed = 1;
		}
		if (o != NULL)
			fn(o, arg);
	}
	free(l);
	if (failed)
		return sp_err_set(e, SP_E_PARTIAL, 0, "some expiries failed");
	return 0;
}
