/*
 * sp_api_e2b.c: E2B's REST API, as its SDK (the npm package e2b, 2.x)
 * calls it: create, list, get, kill, timeout, pause, connect.  A sandbox's
 * metadata is its labels (but "tenant", which is the API's); its timeout
 * is its expiry (the reaper of sp_apid.c kills or pauses it then).  What
 * E2B has and this server does not answers 501 in E2B's error shape.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sp_api.h"
#include "sp_api_int.h"

/* The envd version the SDK is told: the features of that version are the
 * ones sp_api_envd.c serves (octet-stream uploads, closing stdin). */
#define ENVD_VERSION		"0.5.7"
#define TIMEOUT_DEFAULT_S	300
#define TIMEOUT_MAX_S		(30 * 24 * 3600)
#define E2B_MEMORY_MIB		256
#define E2B_VCPUS		1

static void
iso_time(int64_t t, char out[32])
{
	struct tm tm;
	time_t tt = (time_t)t;

	gmtime_r(&tt, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* A row's labels without the API's own: E2B's metadata. */
static json_t *
metadata(const struct sp_sandbox_row *r)
{
	json_t *l = json_loads(r->labels ? r->labels : "{}", 0, NULL);

	if (l == NULL)
		l = json_object();
	json_object_del(l, "tenant");
	return l;
}

/* E2B's state of a row: "running" or "paused" (a suspended sandbox is
 * E2B's paused one kept in storage); NULL for states E2B has none of. */
static const char *
e2b_state(enum sp_state s)
{
	switch (s) {
	case SP_ST_RUNNING:
	case SP_ST_CREATING:
	case SP_ST_RESTORING:
		return "running";
	case SP_ST_PAUSED:
	case SP_ST_SUSPENDING:
	case SP_ST_SUSPENDED:
		return "paused";
	default:
		return NULL;
	}
}

static json_t *
template_id(const struct sp_sandbox_row *r)
{
	const char *at = strchr(r->template, '@');

	return json_stringn(r->template, at ? (size_t)(at - r->template) :
	    strlen(r->template));
}

static json_t *
listed(struct sp_api_call *c, const struct sp_sandbox_row *r, int detail)
{
	char started[32], end[32];
	struct sp_sandbox_api a;
	struct sp_err e;
	const char *st = e2b_state(r->state);
	json_t *o;

	if (sp_db_sandbox_api_get(c->x->db, r->id, &a, &e) == -1)
		memset(&a, 0, sizeof a);
	iso_time(r->created, started);
	iso_time(a.expires > 0 ? a.expires : r->created + TIMEOUT_MAX_S, end);
	o = json_pack("{s:o, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:o, s:s, s:s,"
	    " s:[]}", "templateID", template_id(r), "sandboxID", r->id,
	    "clientID", "space", "startedAt", started, "endAt", end,
	    "cpuCount", r->vcpus, "memoryMB", r->memory_mib, "diskSizeMB", 0,
	    "metadata", metadata(r), "state", st ? st : "paused",
	    "envdVersion", ENVD_VERSION, "volumeMounts");
	if (o != NULL && detail && a.token[0] != '\0')
		json_object_set_new(o, "envdAccessToken", json_string(a.token));
	if (o != NULL && detail)
		json_object_set_new(o, "lifecycle", json_pack("{s:s, s:b}",
		    "onTimeout", strcmp(a.on_expiry, "pause") == 0 ? "pause" :
		    "kill", "autoResume", 0));
	return o;
}

static int
unsupported(struct sp_api_call *c, const char *what)
{
	struct sp_err e;

	sp_err_set(&e, SP_E_BAD_INPUT, 0, "%s is not supported by this server "
	    "(space-apid)", what);
	c->err = e;
	return sp_api_json(c, 501, NULL);
}

static int
fail(struct sp_api_call *c, const struct sp_err *e)
{
	return sp_api_fail(c, e);
}

/* The "timeout" of a body: seconds, default def; -1 when it is not one. */
static int
timeout_of(json_t *body, const char *key, int def, struct sp_err *e)
{
	json_t *v = body ? json_object_get(body, key) : NULL;

	if (v == NULL || json_is_null(v))
		return def;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > TIMEOUT_MAX_S)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s is a number of seconds "
		    "from 0 to %d", key, TIMEOUT_MAX_S);
	return (int)json_integer_value(v);
}

/* Sets id's expiry timeout_s from now (and its action and token, when not
 * NULL). */
static int
set_expiry(struct sp_api_call *c, const char *id, int timeout_s,
    const char *action, const char *token, struct sp_err *e)
{
	struct sp_sandbox_api a;

	if (sp_db_sandbox_api_get(c->x->db, id, &a, e) == -1)
		return -1;
	a.expires = (int64_t)time(NULL) + timeout_s;
	if (action != NULL)
		snprintf(a.on_expiry, sizeof a.on_expiry, "%s", action);
	if (token != NULL)
		snprintf(a.token, sizeof a.token, "%s", token);
	return sp_db_sandbox_api_set(c->x->db, id, &a, e);
}

static json_t *
created_json(const struct sp_sandbox_row *r, const char *token)
{
	return json_pack("{s:o, s:s, s:s, s:s, s:s, s:n}", "templateID",
	    template_id(r), "sandboxID", r->id, "clientID", "space",
	    "envdVersion", ENVD_VERSION, "envdAccessToken", token, "domain");
}

/* metadata -> labels (each a valid KEY=VALUE, never "tenant"), envVars ->
 * "K=V", checked as space-create checks its options. */
static int
labels_env(json_t *body, const char *tenant, json_t **labels, json_t **env,
    struct sp_err *e)
{
	json_t *m = json_object_get(body, "metadata"),
	    *v = json_object_get(body, "envVars"), *val;
	char kv[1024];
	const char *k;

	*labels = json_pack("{s:s}", "tenant", tenant);
	*env = json_array();
	if (m != NULL && !json_is_null(m)) {
		if (!json_is_object(m) || json_object_size(m) > 64)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "metadata is an "
			    "object of at most 64 strings");
		json_object_foreach(m, k, val) {
			if (!json_is_string(val) || strcmp(k, "tenant") == 0)
				return sp_err_set(e, SP_E_BAD_INPUT, 0, "metadata "
				    "'%.64s': a string value, and not 'tenant'", k);
			snprintf(kv, sizeof kv, "%s=%s", k, json_string_value(val));
			if (sp_label_check(kv, e) == -1)
				return -1;
			json_object_set(*labels, k, val);
		}
	}
	if (v != NULL && !json_is_null(v)) {
		if (!json_is_object(v) || json_object_size(v) > 64)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "envVars is an "
			    "object of at most 64 strings");
		json_object_foreach(v, k, val) {
			if (!json_is_string(val) || sp_api_env_check(k,
			    json_string_value(val), e) == -1)
				return sp_err_set(e, SP_E_BAD_INPUT, 0, "envVars "
				    "'%.64s': a name of letters, digits and _, a "
				    "string value of valid UTF-8", k);
			snprintf(kv, sizeof kv, "%s=%s", k, json_string_value(val));
			json_array_append_new(*env, json_string(kv));
		}
	}
	return 0;
}

static int
create(struct sp_api_call *c)
{
	struct sp_create_req r = { .memory_mib = E2B_MEMORY_MIB,
	    .vcpus = E2B_VCPUS, .ready_timeout_ms = 180000 };
	char token[65], tpl[2 * SP_NAME_MAX + 2];
	struct sp_sandbox_row row;
	json_t *body = NULL, *labels = NULL, *env = NULL, *out = NULL;
	const char *id;
	struct sp_err e;
	int timeout_s, auto_pause;

	if (c->admin) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "an admin key has no tenant to "
		    "create for: use a tenant's key");
		return fail(c, &e);
	}
	sp_err_clear(&e);
	if (sp_api_body_json(c->body, c->body_len, &body, &e) == -1)
		goto out;
	if (!json_is_string(json_object_get(body, "templateID"))) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "templateID must name a "
		    "template");
		goto out;
	}
	if ((timeout_s = timeout_of(body, "timeout", TIMEOUT_DEFAULT_S,
	    &e)) < 0 || labels_env(body, c->tenant, &labels, &env, &e) == -1)
		goto out;
	/* E2B's default template "base" is this node's minimal one. */
	snprintf(tpl, sizeof tpl, "%s", json_string_value(json_object_get(body,
	    "templateID")));
	if (strcmp(tpl, "base") == 0)
		snprintf(tpl, sizeof tpl, "minimal");
	auto_pause = json_is_true(json_object_get(body, "autoPause"));
	r.template = tpl;
	r.labels = labels;
	r.env = json_array_size(env) > 0 ? env : NULL;
	if (sp_api_template_ok(c, tpl, &e) == -1 ||
	    sp_sandbox_create(c->x, &r, &out, &e) == -1)
		goto out;
	id = json_string_value(json_object_get(out, "id"));
	snprintf(c->sandbox, sizeof c->sandbox, "%s", id ? id : "");
	if (id == NULL || sp_api_token_new(token, &e) == -1 ||
	    set_expiry(c, id, timeout_s, auto_pause ? "pause" : "kill", token,
	    &e) == -1 || sp_db_sandbox_get(c->x->db, id, &row, &e) == -1) {
		int existed;
		struct sp_err ignored;

		/* Never a sandbox the client was not told of. */
		if (id != NULL)
			sp_sandbox_remove(c->x, id, &existed, &ignored);
		goto out;
	}
	sp_api_json(c, 201, created_json(&row, token));
	sp_db_row_release(&row);
	e.code = SP_E_NONE;
out:
	if (e.code != SP_E_NONE)
		fail(c, &e);
	json_decref(body);
	json_decref(labels);
	json_decref(env);
	json_decref(out);
	return 0;
}

struct list {
	struct sp_api_call *c;
	json_t *arr;
	int running, paused;
	json_t *match;		/* metadata that must be there */
};

static int
list1(const struct sp_sandbox_row *r, void *arg)
{
	struct list *l = arg;
	char t[SP_NAME_MAX + 1];
	const char *st = e2b_state(r->state), *k;
	json_t *md, *v;

	sp_api_row_tenant(r, t);
	if (r->pod || st == NULL || (!l->c->admin && strcmp(t, l->c->tenant)))
		return 0;
	if ((strcmp(st, "running") == 0 && !l->running) ||
	    (strcmp(st, "paused") == 0 && !l->paused))
		return 0;
	md = metadata(r);
	json_object_foreach(l->match, k, v)
		if (!json_equal(json_object_get(md, k), v)) {
			json_decref(md);
			return 0;
		}
	json_decref(md);
	json_array_append_new(l->arr, listed(l->c, r, 0));
	return 0;
}

/* ?metadata=k1%3Dv1%26k2%3Dv2 (the SDK encodes the pairs, then the whole):
 * arrives here decoded once. */
static int
parse_match(const char *q, json_t *match, struct sp_err *e)
{
	char buf[2048], *p, *pair, *eq;
	char k[512], v[512];

	if (q == NULL)
		return 0;
	if (strlen(q) >= sizeof buf)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "metadata query too long");
	snprintf(buf, sizeof buf, "%s", q);
	for (p = buf; (pair = strsep(&p, "&")) != NULL;) {
		if (*pair == '\0')
			continue;
		if ((eq = strchr(pair, '=')) == NULL)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "metadata query: "
			    "KEY=VALUE pairs");
		*eq = '\0';
		if (sp_api_url_decode(pair, k, sizeof k) == -1 ||
		    sp_api_url_decode(eq + 1, v, sizeof v) == -1)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "metadata query: "
			    "bad encoding");
		json_object_set_new(match, k, json_string(v));
	}
	return 0;
}

static int
list(struct sp_api_call *c)
{
	struct list l = { c, json_array(), 1, 1, json_object() };
	const char *state = c->query(c, "state");
	struct sp_err e;

	/* The first API listed running ones only. */
	if (strncmp(c->path, "/v2/", 4) != 0)
		l.paused = 0;
	if (state != NULL) {
		l.running = strstr(state, "running") != NULL;
		l.paused = strstr(state, "paused") != NULL;
	}
	if (parse_match(c->query(c, "metadata"), l.match, &e) == -1 ||
	    sp_db_sandbox_each(c->x->db, -1, list1, &l, &e) == -1) {
		json_decref(l.arr);
		json_decref(l.match);
		return fail(c, &e);
	}
	json_decref(l.match);
	return sp_api_json(c, 200, l.arr);
}

static int
get(struct sp_api_call *c)
{
	struct sp_sandbox_row row;
	struct sp_err e;

	if (sp_api_sandbox(c, c->route.id, &row, &e) == -1)
		return fail(c, &e);
	sp_api_json(c, 200, listed(c, &row, 1));
	sp_db_row_release(&row);
	return 0;
}

static int
kill_(struct sp_api_call *c)
{
	struct sp_sandbox_row row;
	struct sp_err e;
	int existed;

	if (sp_api_sandbox_here(c, c->route.id, &row, &e) == -1)
		return fail(c, &e);
	sp_db_row_release(&row);
	if (sp_sandbox_remove(c->x, c->route.id, &existed, &e) == -1)
		return fail(c, &e);
	c->status = 204;
	return 0;
}

static int
timeout(struct sp_api_call *c, const char *key)
{
	struct sp_sandbox_row row;
	json_t *body = NULL;
	struct sp_err e;
	int t;

	if (sp_api_sandbox(c, c->route.id, &row, &e) == -1)
		return fail(c, &e);
	sp_db_row_release(&row);
	if (sp_api_body_json(c->body, c->body_len, &body, &e) == -1 ||
	    (t = timeout_of(body, key, -1, &e)) < -1 ||
	    (t == -1 && sp_err_set(&e, SP_E_BAD_INPUT, 0, "%s is needed",
	    key)) || set_expiry(c, c->route.id, t, NULL, NULL, &e) == -1) {
		json_decref(body);
		return fail(c, &e);
	}
	json_decref(body);
	c->status = 204;
	return 0;
}

static int
pause_(struct sp_api_call *c)
{
	struct sp_sandbox_row row;
	struct sp_err e;
	int changed;

	if (sp_api_sandbox_here(c, c->route.id, &row, &e) == -1)
		return fail(c, &e);
	sp_db_row_release(&row);
	if (sp_sandbox_pause(c->x, c->route.id, &changed, &e) == -1)
		return fail(c, &e);
	if (!changed) {
		sp_err_set(&e, SP_E_BAD_STATE, 0, "sandbox %s is paused already",
		    c->route.id);
		return fail(c, &e);
	}
	c->status = 204;
	return 0;
}

/* Connect: a paused sandbox resumes, a suspended one is restored, and its
 * timeout starts again. */
static int
connect_(struct sp_api_call *c)
{
	struct sp_sandbox_row row;
	struct sp_sandbox_api a;
	json_t *body = NULL, *out = NULL;
	struct sp_err e;
	int t, changed = 0, status = 200;

	if (c->body_len > 0 && sp_api_body_json(c->body, c->body_len, &body,
	    &e) == -1)
		return fail(c, &e);
	t = timeout_of(body, "timeout", TIMEOUT_DEFAULT_S, &e);
	json_decref(body);
	if (t < 0 || sp_api_sandbox(c, c->route.id, &row, &e) == -1)
		return fail(c, &e);
	if (row.state == SP_ST_SUSPENDED) {
		if (sp_restore(c->x, row.id, NULL, &out, &e) == -1)
			goto fail;
		json_decref(out);
		status = 201;
	} else if (strcmp(row.node, c->x->conf.node) != 0) {
		sp_err_set(&e, SP_E_BAD_STATE, 1, "sandbox %s is on node %s",
		    row.id, row.node);
		goto fail;
	} else if (row.state == SP_ST_PAUSED) {
		if (sp_sandbox_resume(c->x, row.id, &changed, &e) == -1)
			goto fail;
		status = changed ? 201 : 200;
	} else if (row.state != SP_ST_RUNNING) {
		sp_err_set(&e, SP_E_BAD_STATE, 0, "sandbox %s is %s", row.id,
		    sp_state_name(row.state));
		goto fail;
	}
	if (set_expiry(c, row.id, t, NULL, NULL, &e) == -1 ||
	    sp_db_sandbox_api_get(c->x->db, row.id, &a, &e) == -1)
		goto fail;
	/* A sandbox made by a command has no token yet: it gets one. */
	if (a.token[0] == '\0' && (sp_api_token_new(a.token, &e) == -1 ||
	    sp_db_sandbox_api_set(c->x->db, row.id, &a, &e) == -1))
		goto fail;
	sp_api_json(c, status, created_json(&row, a.token));
	sp_db_row_release(&row);
	return 0;
fail:
	sp_db_row_release(&row);
	return fail(c, &e);
}

int
sp_api_e2b(struct sp_api_call *c)
{
	const char *n = c->route.name;

	if (strcmp(n, "e2b.create") == 0)
		return create(c);
	if (strcmp(n, "e2b.list") == 0)
		return list(c);
	if (strcmp(n, "e2b.get") == 0)
		return get(c);
	if (strcmp(n, "e2b.kill") == 0)
		return kill_(c);
	if (strcmp(n, "e2b.timeout") == 0)
		return timeout(c, "timeout");
	if (strcmp(n, "e2b.refresh") == 0)
		return timeout(c, "duration");
	if (strcmp(n, "e2b.pause") == 0)
		return pause_(c);
	if (strcmp(n, "e2b.connect") == 0)
		return connect_(c);
	return unsupported(c, c->path);
}
