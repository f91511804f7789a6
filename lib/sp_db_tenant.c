/*
 * sp_db_tenant.c: the rows of the HTTP API's tenants, their keys, what
 * they use, and the API's own columns of a sandbox (when it expires, the
 * token of its guest's API).  Written in the SQL both engines take
 * (sp_db_int.h).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sp_core.h"
#include "sp_db_int.h"

#define TENANT_COLS "name, created, max_running, max_vcpus, max_memory_mib, " \
	"max_disk_gb, COALESCE(templates, '')"

static int
tenant_from(struct sp_db_q *q, void *arg)
{
	struct sp_tenant_row *t = arg;

	memset(t, 0, sizeof *t);
	sp_db_q_copy(t->name, sizeof t->name, q, 0);
	t->created = sp_db_q_int(q, 1);
	t->max_running = (int)sp_db_q_int(q, 2);
	t->max_vcpus = (int)sp_db_q_int(q, 3);
	t->max_memory_mib = (int)sp_db_q_int(q, 4);
	t->max_disk_gb = (int)sp_db_q_int(q, 5);
	sp_db_q_copy(t->templates, sizeof t->templates, q, 6);
	return 0;
}

int
sp_tenant_template_ok(const struct sp_tenant_row *t, const char *ref)
{
	size_t n = strcspn(ref, "@"), i;
	json_t *a, *v;
	int ok = 0;

	if (t->templates[0] == '\0')
		return 1;
	if ((a = json_loads(t->templates, 0, NULL)) == NULL)
		return 0;
	json_array_foreach(a, i, v)
		if (json_is_string(v) && json_string_length(v) == n &&
		    strncmp(json_string_value(v), ref, n) == 0)
			ok = 1;
	json_decref(a);
	return ok;
}

int
sp_db_tenant_add(struct sp_db *db, const struct sp_tenant_row *t,
    struct sp_err *e)
{
	if (sp_db_q_write(db, "add tenant", "INSERT INTO tenants (name, created,"
	    " max_running, max_vcpus, max_memory_mib, max_disk_gb, templates)"
	    " VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''))", e, "sIiiiis",
	    t->name, (int64_t)time(NULL), t->max_running, t->max_vcpus,
	    t->max_memory_mib, t->max_disk_gb, t->templates) >= 0)
		return 0;
	if (e->code == SP_E_EXISTS)
		sp_err_set(e, SP_E_EXISTS, 0, "tenant %s exists", t->name);
	return -1;
}

int
sp_db_tenant_set(struct sp_db *db, const struct sp_tenant_row *t,
    struct sp_err *e)
{
	int64_t n;

	n = sp_db_q_write(db, "set tenant", "UPDATE tenants SET max_running = $2,"
	    " max_vcpus = $3, max_memory_mib = $4, max_disk_gb = $5, templates ="
	    " NULLIF($6, '') WHERE name = $1", e, "siiiis", t->name,
	    t->max_running, t->max_vcpus, t->max_memory_mib, t->max_disk_gb,
	    t->templates);
	if (n == 0)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no tenant %s", t->name);
	return n < 0 ? -1 : 0;
}

int
sp_db_tenant_get(struct sp_db *db, const char *name, struct sp_tenant_row *t,
    struct sp_err *e)
{
	char not_found[SP_NAME_MAX + 16];
	struct sp_db_q q;

	snprintf(not_found, sizeof not_found, "no tenant %s", name);
	if (sp_db_q_start(db, &q, "get tenant", "SELECT " TENANT_COLS " FROM"
	    " tenants WHERE name = $1", e, "s", name) == -1)
		return -1;
	return sp_db_q_one(&q, "get tenant", not_found, tenant_from, t, e);
}

struct each_tenant {
	int (*fn)(const struct sp_tenant_row *, void *);
	void *arg;
};

static int
one_tenant(struct sp_db_q *q, void *arg)
{
	struct each_tenant *a = arg;
	struct sp_tenant_row t;

	tenant_from(q, &t);
	return a->fn(&t, a->arg) == 0 ? 0 : -1;
}

int
sp_db_tenant_each(struct sp_db *db,
    int (*fn)(const struct sp_tenant_row *, void *), void *arg,
    struct sp_err *e)
{
	struct each_tenant a = { fn, arg };
	struct sp_db_q q;

	if (sp_db_q_start(db, &q, "list tenants", "SELECT " TENANT_COLS " FROM"
	    " tenants ORDER BY name", e, "") == -1)
		return -1;
	return sp_db_q_each(&q, "list tenants", one_tenant, &a, e);
}

int
sp_db_tenant_remove(struct sp_db *db, const char *name, struct sp_err *e)
{
	struct sp_tenant_usage u;
	int64_t n;

	if (sp_db_tenant_usage(db, name, &u, e) == -1)
		return -1;
	if (u.sandboxes > 0)
		return sp_err_set(e, SP_E_IN_USE, 0, "tenant %s has %d sandboxes: "
		    "remove them first", name, u.sandboxes);
	if (sp_db_begin(db, e) == -1)
		return -1;
	if (sp_db_q_write(db, "remove tenant's keys", "DELETE FROM api_keys"
	    " WHERE tenant = $1", e, "s", name) == -1 ||
	    (n = sp_db_q_write(db, "remove tenant", "DELETE FROM tenants WHERE"
	    " name = $1", e, "s", name)) == -1) {
		sp_db_rollback(db);
		return -1;
	}
	if (n == 0) {
		sp_db_rollback(db);
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no tenant %s", name);
	}
	return sp_db_commit(db, e);
}

int
sp_db_tenant_usage(struct sp_db *db, const char *name,
    struct sp_tenant_usage *u, struct sp_err *e)
{
	struct sp_db_q q;
	int rc;

	memset(u, 0, sizeof *u);
	/* The same states the quotas count (sp_db.c, QUOTA_LIVE and
	 * QUOTA_HELD). */
	if (sp_db_q_start(db, &q, "tenant usage", "SELECT COUNT(*), SUM(CASE"
	    " WHEN state IN ('creating', 'running', 'restoring', 'recovering')"
	    " THEN 1 ELSE 0 END), COALESCE(SUM(CASE WHEN state IN ('creating',"
	    " 'running', 'restoring', 'recovering') THEN vcpus ELSE 0 END), 0),"
	    " COALESCE(SUM(CASE WHEN state IN ('creating', 'running',"
	    " 'restoring', 'recovering', 'paused', 'suspending') THEN memory_mib"
	    " ELSE 0 END), 0) FROM sandboxes WHERE tenant = $1 AND pool IS NULL",
	    e, "s", name) == -1)
		return -1;
	if ((rc = sp_db_q_step(&q, "tenant usage", e)) == 1) {
		u->sandboxes = (int)sp_db_q_int(&q, 0);
		u->running = (int)sp_db_q_int(&q, 1);
		u->vcpus = (int)sp_db_q_int(&q, 2);
		u->memory_mib = (int)sp_db_q_int(&q, 3);
	}
	sp_db_q_end(&q);
	/* A sandbox's disk: its template's, or its own when larger (as the
	 * quota counts it, sp_db.c). */
	if (rc == -1 || sp_db_q_start(db, &q, "tenant disk", "SELECT"
	    " COALESCE(SUM(CASE WHEN CAST(s.disk_gb AS BIGINT) * 1073741824 >"
	    " d.disk_bytes THEN CAST(s.disk_gb AS BIGINT) * 1073741824 ELSE"
	    " d.disk_bytes END), 0) FROM sandboxes s JOIN templates d"
	    " ON s.template = d.name || '@' || d.digest WHERE s.tenant = $1 AND"
	    " s.pool IS NULL", e, "s", name) == -1)
		return -1;
	if ((rc = sp_db_q_step(&q, "tenant disk", e)) == 1)
		u->disk_bytes = sp_db_q_int(&q, 0);
	sp_db_q_end(&q);
	return rc == -1 ? -1 : 0;
}

/* ---- keys ---- */

#define KEY_COLS "id, COALESCE(tenant, ''), admin, hash, rate, created"

static int
key_from(struct sp_db_q *q, void *arg)
{
	struct sp_apikey_row *k = arg;

	memset(k, 0, sizeof *k);
	sp_db_q_copy(k->id, sizeof k->id, q, 0);
	sp_db_q_copy(k->tenant, sizeof k->tenant, q, 1);
	k->admin = (int)sp_db_q_int(q, 2);
	sp_db_q_copy(k->hash, sizeof k->hash, q, 3);
	k->rate = (int)sp_db_q_int(q, 4);
	k->created = sp_db_q_int(q, 5);
	return 0;
}

int
sp_db_apikey_add(struct sp_db *db, const struct sp_apikey_row *k,
    struct sp_err *e)
{
	struct sp_tenant_row t;

	if (!k->admin && sp_db_tenant_get(db, k->tenant, &t, e) == -1)
		return -1;
	return sp_db_q_write(db, "add key", "INSERT INTO api_keys (id, tenant,"
	    " admin, hash, rate, created) VALUES ($1, NULLIF($2, ''), $3, $4,"
	    " $5, $6)", e, "ssisiI", k->id, k->admin ? "" : k->tenant,
	    k->admin, k->hash, k->rate, (int64_t)time(NULL)) == -1 ? -1 : 0;
}

int
sp_db_apikey_get(struct sp_db *db, const char *id, struct sp_apikey_row *k,
    struct sp_err *e)
{
	struct sp_db_q q;

	if (sp_db_q_start(db, &q, "get key", "SELECT " KEY_COLS " FROM api_keys"
	    " WHERE id = $1", e, "s", id) == -1)
		return -1;
	return sp_db_q_one(&q, "get key", "no such key", key_from, k, e);
}

struct each_key {
	int (*fn)(const struct sp_apikey_row *, void *);
	void *arg;
};

static int
one_key(struct sp_db_q *q, void *arg)
{
	struct each_key *a = arg;
	struct sp_apikey_row k;

	key_from(q, &k);
	return a->fn(&k, a->arg) == 0 ? 0 : -1;
}

int
sp_db_apikey_each(struct sp_db *db, const char *tenant,
    int (*fn)(const struct sp_apikey_row *, void *), void *arg,
    struct sp_err *e)
{
	struct each_key a = { fn, arg };
	struct sp_db_q q;

	if (sp_db_q_start(db, &q, "list keys", "SELECT " KEY_COLS " FROM api_keys"
	    " WHERE $1 IS NULL OR tenant = $1 ORDER BY created, id", e, "s",
	    tenant) == -1)
		return -1;
	return sp_db_q_each(&q, "list keys", one_key, &a, e);
}

int
sp_db_apikey_remove(struct sp_db *db, const char *id, struct sp_err *e)
{
	int64_t n;

	n = sp_db_q_write(db, "remove key", "DELETE FROM api_keys WHERE id = $1",
	    e, "s", id);
	if (n == 0)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no key %s", id);
	return n < 0 ? -1 : 0;
}

/* ---- a sandbox's API columns ---- */

int
sp_db_sandbox_api_get(struct sp_db *db, const char *id,
    struct sp_sandbox_api *a, struct sp_err *e)
{
	struct sp_db_q q;
	int rc;

	memset(a, 0, sizeof *a);
	if (sp_db_q_start(db, &q, "get sandbox's api", "SELECT"
	    " COALESCE(tenant, ''), COALESCE(expires, 0), COALESCE(on_expiry,"
	    " ''), COALESCE(access_token, '') FROM sandboxes WHERE id = $1 AND"
	    " pool IS NULL", e, "s", id) == -1)
		return -1;
	if ((rc = sp_db_q_step(&q, "get sandbox's api", e)) == 1) {
		sp_db_q_copy(a->tenant, sizeof a->tenant, &q, 0);
		a->expires = sp_db_q_int(&q, 1);
		sp_db_q_copy(a->on_expiry, sizeof a->on_expiry, &q, 2);
		sp_db_q_copy(a->token, sizeof a->token, &q, 3);
	}
	sp_db_q_end(&q);
	if (rc == 0)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no such sandbox");
	return rc == -1 ? -1 : 0;
}

int
sp_db_sandbox_api_set(struct sp_db *db, const char *id,
    const struct sp_sandbox_api *a, struct sp_err *e)
{
	int64_t n;

	n = sp_db_q_write(db, "set sandbox's api", "UPDATE sandboxes SET"
	    " expires = NULLIF($2, 0), on_expiry = NULLIF($3, ''), access_token"
	    " = NULLIF($4, '') WHERE id = $1", e, "sIss", id, a->expires,
	    a->on_expiry, a->token);
	if (n == 0)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no such sandbox");
	return n < 0 ? -1 : 0;
}

int
sp_db_sandbox_expiry_set(struct sp_db *db, const char *id, int64_t expires,
    const char *on_expiry, struct sp_err *e)
{
	int64_t n;

	n = sp_db_q_write(db, "set sandbox's expiry", "UPDATE sandboxes SET"
	    " expires = NULLIF($2, 0), on_expiry = COALESCE(NULLIF($3, ''),"
	    " on_expiry) WHERE id = $1 AND pool IS NULL", e, "sIs", id, expires,
	    on_expiry);
	if (n == 0)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no such sandbox");
	return n < 0 ? -1 : 0;
}

int
sp_db_sandbox_idle_set(struct sp_db *db, const char *id, const char *idle,
    struct sp_err *e)
{
	int64_t n;

	n = sp_db_q_write(db, "set sandbox's idle tiers", "UPDATE sandboxes SET"
	    " idle = NULLIF($2, '') WHERE id = $1 AND pool IS NULL", e, "ss", id,
	    idle);
	if (n == 0)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no such sandbox");
	return n < 0 ? -1 : 0;
}

int
sp_db_sandbox_expiry_due(struct sp_db *db, const char *node, int64_t now,
    int max, int (*fn)(const char *, int64_t, const char *, void *),
    void *arg, struct sp_err *e)
{
	struct sp_db_q q;
	char id[SP_ID_LEN + 1], action[16];
	int rc;

	if (sp_db_q_start(db, &q, "list expired", "SELECT id, expires,"
	    " COALESCE(on_expiry, 'kill') FROM sandboxes WHERE node = $1 AND"
	    " pool IS NULL AND expires IS NOT NULL AND expires <= $2 ORDER BY"
	    " expires LIMIT $3", e, "sII", node, now, (int64_t)max) == -1)
		return -1;
	while ((rc = sp_db_q_step(&q, "list expired", e)) == 1) {
		sp_db_q_copy(id, sizeof id, &q, 0);
		sp_db_q_copy(action, sizeof action, &q, 2);
		if ((rc = fn(id, sp_db_q_int(&q, 1), action, arg)) != 0)
			break;
	}
	sp_db_q_end(&q);
	return rc == -1 ? -1 : 0;
}

int
sp_db_sandbox_expiry_clear(struct sp_db *db, const char *id, int64_t expires,
    struct sp_err *e)
{
	int64_t n;

	n = sp_db_q_write(db, "clear sandbox's expiry", "UPDATE sandboxes SET"
	    " expires = NULL WHERE id = $1 AND expires = $2", e, "sI", id,
	    expires);
	return n < 0 ? -1 : n > 0;
}
