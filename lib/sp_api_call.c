/*
 * sp_api_call.c: what every handler of the HTTP API answers with, and who
 * may see which sandbox and template: the layer under the handlers and
 * the server's glue (sp_apid.c), which calls them.
 */
#include <stdlib.h>
#include <string.h>

#include "sp_api.h"
#include "sp_api_int.h"

/* ---- answers ---- */

int
sp_api_status_of(const struct sp_err *e)
{
	switch (e->code) {
	case SP_E_BAD_INPUT:
	case SP_E_EXEC_FAILED:
		return 400;
	case SP_E_UNAUTHORIZED:
		return 401;
	case SP_E_NOT_FOUND:
		return 404;
	case SP_E_EXISTS:
	case SP_E_BAD_STATE:
	case SP_E_NOT_RUNNING:
	case SP_E_STOPPED:
	case SP_E_IN_USE:
	case SP_E_NOT_EMPTY:
	case SP_E_NOT_RESTORABLE:
		return 409;
	case SP_E_TOO_BIG:
		return 413;
	case SP_E_QUOTA_EXCEEDED:
	case SP_E_RATE_LIMITED:
		return 429;
	case SP_E_TIMED_OUT:
		return 504;
	default:
		return e->temp || e->code == SP_E_BUSY ? 503 : 500;
	}
}

int
sp_api_json(struct sp_api_call *c, int status, json_t *j)
{
	json_decref(c->json);
	c->status = status;
	c->json = j != NULL ? j : json_object();
	return 0;
}

int
sp_api_fail(struct sp_api_call *c, const struct sp_err *e)
{
	c->err = *e;
	return sp_api_json(c, sp_api_status_of(e), json_pack("{s:b, s:s, s:s}",
	    "ok", 0, "error", sp_code_name(e->code), "msg", e->msg));
}

void
sp_api_row_tenant(const struct sp_sandbox_row *r, char out[SP_NAME_MAX + 1])
{
	json_t *l = r->labels ? json_loads(r->labels, 0, NULL) : NULL;
	const char *t = json_string_value(json_object_get(l, "tenant"));

	snprintf(out, SP_NAME_MAX + 1, "%s", t ? t : "");
	json_decref(l);
}

int
sp_api_sandbox(struct sp_api_call *c, const char *id,
    struct sp_sandbox_row *row, struct sp_err *e)
{
	char t[SP_NAME_MAX + 1];

	if (id == NULL || !sp_id_valid(id) ||
	    sp_db_sandbox_get(c->x->db, id, row, e) == -1) {
		if (id == NULL || !sp_id_valid(id) || e->code == SP_E_NOT_FOUND)
			return sp_err_set(e, SP_E_NOT_FOUND, 0, "no such sandbox");
		return -1;
	}
	sp_api_row_tenant(row, t);
	/* A pod is nobody's; another tenant's is not there for this one. */
	if (row->pod || (!c->admin && strcmp(t, c->tenant) != 0)) {
		sp_db_row_release(row);
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no such sandbox");
	}
	snprintf(c->sandbox, sizeof c->sandbox, "%s", id);
	return 0;
}

int
sp_api_template_ok(struct sp_api_call *c, const char *ref, struct sp_err *e)
{
	struct sp_tenant_row t;

	if (c->admin)
		return 0;
	if (sp_db_tenant_get(c->x->db, c->tenant, &t, e) == -1)
		return -1;
	/* One it may not use is one that is not there, for it. */
	if (!sp_tenant_template_ok(&t, ref))
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no template %.*s",
		    (int)strcspn(ref, "@"), ref);
	return 0;
}

int
sp_api_sandbox_here(struct sp_api_call *c, const char *id,
    struct sp_sandbox_row *row, struct sp_err *e)
{
	if (sp_api_sandbox(c, id, row, e) == -1)
		return -1;
	if (strcmp(row->node, c->x->conf.node) != 0) {
		sp_err_set(e, SP_E_BAD_STATE, 1, "sandbox %s is on node %s",
		    row->id, row->node);
		sp_db_row_release(row);
		return -1;
	}
	return 0;
}
