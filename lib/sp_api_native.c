/*
 * sp_api_native.c: this project's own API, /v1/...: the commands' verbs as
 * JSON over HTTP, with the commands' error tokens ({"ok":false,"error":
 * TOKEN,"msg":...}).  docs/api.yaml is its OpenAPI document.
 *
 * exec answers with a stream of JSON lines: {"pid":N} first, then
 * {"stdout":BASE64} and {"stderr":BASE64} as the command writes, and last
 * {"exit":N} (or {"signal":N}, or {"error":TOKEN,"msg":S}).  Its stdin is
 * "stdin" of the request, or with "keep_stdin" what .../processes/PID/stdin
 * sends later (?eof=1 ends it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sp_api.h"
#include "sp_api_int.h"


static int
fail(struct sp_api_call *c, const struct sp_err *e)
{
	return sp_api_fail(c, e);
}

static int
ok(struct sp_api_call *c, int status, json_t *extra)
{
	json_t *o = json_pack("{s:b}", "ok", 1);

	if (extra != NULL) {
		json_object_update(o, extra);
		json_decref(extra);
	}
	return sp_api_json(c, status, o);
}

/* The sandbox of the route, the caller's; with here, on this node. */
static int
own(struct sp_api_call *c, int here, struct sp_sandbox_row *row,
    struct sp_err *e)
{
	return here ? sp_api_sandbox_here(c, c->route.id, row, e) :
	    sp_api_sandbox(c, c->route.id, row, e);
}

static json_t *
describe(struct sp_api_call *c, const struct sp_sandbox_row *r)
{
	json_t *o = NULL, *l;
	struct sp_err e;

	if (sp_sandbox_describe(c->x, r, &o, &e) == -1)
		o = json_pack("{s:s, s:s, s:s}", "id", r->id, "state",
		    sp_state_name(r->state), "template", r->template);
	if (o != NULL && (l = json_object_get(o, "labels")) != NULL)
		json_object_del(l, "tenant");
	return o;
}

/* ---- create, list, get, remove ---- */

static int
create(struct sp_api_call *c)
{
	struct sp_create_req r = { .memory_mib = 256, .vcpus = 1,
	    .ready_timeout_ms = 180000 };
	json_t *body = NULL, *labels = NULL, *env = NULL, *out = NULL, *v;
	const char *k;
	char kv[1024];
	struct sp_err e;
	const char *ttl = NULL;
	double cpus = 0;
	size_t i;

	sp_err_clear(&e);
	if (c->admin) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "an admin key has no tenant to "
		    "create for: use a tenant's key");
		goto out;
	}
	if (sp_api_body_json(c->body, c->body_len, &body, &e) == -1)
		goto out;
	if (json_unpack_ex(body, NULL, JSON_STRICT, "{s:s, s?i, s?i, s?i, s?F, "
	    "s?s, s?s, s?o, s?o, s?s, s?s}", "template", &r.template,
	    "memory_mib", &r.memory_mib, "vcpus", &r.vcpus, "disk_gb",
	    &r.disk_gb, "cpu_quota", &cpus, "ttl", &ttl, "on_expiry",
	    &r.on_expiry, "labels", &v, "env", &env, "name", &r.name,
	    "request_id", &r.request_id) == -1 || r.memory_mib < 64 ||
	    r.memory_mib > 65536 || r.vcpus < 1 || r.vcpus > 64 ||
	    r.disk_gb < 0 || r.disk_gb > SP_DISK_GB_MAX || (cpus != 0 &&
	    (r.cpu_pct = sp_cpu_quota_pct(cpus)) == -1) ||
	    (ttl != NULL && sp_period_parse(ttl, &r.ttl_s) == -1) ||
	    (r.on_expiry != NULL && (ttl == NULL ||
	    !sp_on_expiry_ok(r.on_expiry)))) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "want {\"template\":NAME, "
		    "\"memory_mib\":64..65536, \"vcpus\":1..64, \"disk_gb\":"
		    "0..16384, \"cpu_quota\":0.01..1024, \"ttl\":DURATION, "
		    "\"on_expiry\":\"kill|pause|suspend\" (with ttl), "
		    "\"labels\":{}, \"env\":[\"NAME=VALUE\"], \"name\":NAME, "
		    "\"request_id\":KEY} and nothing else");
		env = NULL;
		goto out;
	}
	if ((r.name != NULL && sp_handle_check(r.name, &e) == -1) ||
	    (r.request_id != NULL &&
	    sp_request_id_check(r.request_id, &e) == -1)) {
		env = NULL;
		goto out;
	}
	labels = json_pack("{s:s}", "tenant", c->tenant);
	v = json_object_get(body, "labels");
	if (v != NULL && (!json_is_object(v) || json_object_size(v) > 64)) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "labels: an object of at most "
		    "64 strings");
		env = NULL;
		goto out;
	}
	json_object_foreach(v, k, out) {
		snprintf(kv, sizeof kv, "%s=%s", k, json_string_value(out) ?
		    json_string_value(out) : "");
		if (!json_is_string(out) || strcmp(k, "tenant") == 0 ||
		    sp_label_check(kv, &e) == -1) {
			if (e.code == SP_E_NONE)
				sp_err_set(&e, SP_E_BAD_INPUT, 0, "label %.64s: "
				    "a string, and not tenant", k);
			env = out = NULL;
			goto out;
		}
		json_object_set(labels, k, out);
	}
	out = NULL;
	env = json_object_get(body, "env");
	if (env != NULL && (!json_is_array(env) || json_array_size(env) > 64)) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "env: an array of at most 64 "
		    "NAME=VALUE");
		env = NULL;
		goto out;
	}
	json_array_foreach(env, i, v) {
		const char *s = json_string_value(v), *eq;
		char name[257];

		if (s == NULL || (eq = strchr(s, '=')) == NULL || eq - s > 256) {
			sp_err_set(&e, SP_E_BAD_INPUT, 0, "env: NAME=VALUE");
			env = NULL;
			goto out;
		}
		snprintf(name, sizeof name, "%.*s", (int)(eq - s), s);
		if (sp_api_env_check(name, eq + 1, &e) == -1) {
			env = NULL;
			goto out;
		}
	}
	r.labels = labels;
	r.env = json_array_size(env) > 0 ? env : NULL;
	env = NULL;
	if (sp_api_template_ok(c, r.template, &e) == -1 ||
	    sp_sandbox_create(c->x, &r, &out, &e) == -1)
		goto out;
	if ((k = json_string_value(json_object_get(out, "id"))) != NULL)
		snprintf(c->sandbox, sizeof c->sandbox, "%s", k);
	/* A retry of a request id: what the first made, as it is now. */
	ok(c, json_is_true(json_object_get(out, "existing")) ? 200 : 201, out);
	out = NULL;
	/* What it met and got over on the way is not a failure. */
	sp_err_clear(&e);
out:
	if (e.code != SP_E_NONE)
		fail(c, &e);
	json_decref(body);
	json_decref(labels);
	json_decref(out);
	return 0;
}

struct list {
	struct sp_api_call *c;
	json_t *arr;
};

static int
list1(const struct sp_sandbox_row *r, void *arg)
{
	struct list *l = arg;
	char t[SP_NAME_MAX + 1];

	sp_api_row_tenant(r, t);
	if (r->pod || (!l->c->admin && strcmp(t, l->c->tenant) != 0))
		return 0;
	json_array_append_new(l->arr, describe(l->c, r));
	return 0;
}

static int
list(struct sp_api_call *c)
{
	struct list l = { c, json_array() };
	struct sp_err e;

	if (sp_db_sandbox_each(c->x->db, -1, list1, &l, &e) == -1) {
		json_decref(l.arr);
		return fail(c, &e);
	}
	return ok(c, 200, json_pack("{s:o}", "sandboxes", l.arr));
}

static int
get(struct sp_api_call *c)
{
	struct sp_sandbox_row row;
	struct sp_err e;

	if (own(c, 0, &row, &e) == -1)
		return fail(c, &e);
	ok(c, 200, describe(c, &row));
	sp_db_row_release(&row);
	return 0;
}

/* The verbs that move a sandbox of this node. */
static int
verb(struct sp_api_call *c)
{
	const char *n = c->route.name;
	struct sp_sandbox_row row;
	json_t *out = NULL;
	struct sp_err e;
	int changed = 0, rc;

	if (own(c, strcmp(n, "restore") != 0, &row, &e) == -1)
		return fail(c, &e);
	sp_db_row_release(&row);
	if (strcmp(n, "remove") == 0)
		rc = sp_sandbox_remove(c->x, c->route.id, &changed, &e);
	else if (strcmp(n, "pause") == 0)
		rc = sp_sandbox_pause(c->x, c->route.id, &changed, &e);
	else if (strcmp(n, "resume") == 0)
		rc = sp_sandbox_resume(c->x, c->route.id, &changed, &e);
	else if (strcmp(n, "stop") == 0)
		rc = sp_sandbox_stop(c->x, c->route.id, 30000, &changed, NULL,
		    &e);
	else if (strcmp(n, "start") == 0)
		rc = sp_sandbox_start(c->x, c->route.id, 180000, &changed, &e);
	else if (strcmp(n, "suspend") == 0)
		rc = (changed = 1, sp_suspend(c->x, c->route.id, 0, &out, &e));
	else
		rc = (changed = 1, sp_restore(c->x, c->route.id, NULL, &out,
		    &e));
	if (rc == -1) {
		json_decref(out);
		return fail(c, &e);
	}
	if (out == NULL)
		out = json_object();
	json_object_set_new(out, "id", json_string(c->route.id));
	json_object_set_new(out, "changed", json_boolean(changed));
	return ok(c, 200, out);
}

/* ---- snapshots ---- */

static int
snap1(json_t *o, void *arg)
{
	json_array_append(arg, o);
	return 0;
}

static int
snapshots(struct sp_api_call *c)
{
	const char *n = c->route.name, *tag = NULL, *snap = NULL;
	struct sp_sandbox_row row;
	json_t *body = NULL, *arr, *out = NULL;
	struct sp_err e;
	int full = 0, rc;

	if (own(c, strcmp(n, "snapshots") != 0, &row, &e) == -1)
		return fail(c, &e);
	sp_db_row_release(&row);
	if (strcmp(n, "snapshots") == 0) {
		arr = json_array();
		if (sp_snap_list(c->x, c->route.id, snap1, arr, &e) == -1) {
			json_decref(arr);
			return fail(c, &e);
		}
		return ok(c, 200, json_pack("{s:o}", "snapshots", arr));
	}
	if (strcmp(n, "snapshot.remove") == 0) {
		if (sp_snap_remove(c->x, c->route.id, c->route.arg, &full,
		    &e) == -1)
			return fail(c, &e);
		return ok(c, 200, json_pack("{s:s, s:b}", "snap", c->route.arg,
		    "removed", 1));
	}
	if (c->body_len > 0 && (sp_api_body_json(c->body, c->body_len, &body,
	    &e) == -1 || json_unpack_ex(body, NULL, JSON_STRICT,
	    "{s?b, s?s, s?s}", "full", &full, "tag", &tag, "snapshot",
	    &snap) == -1)) {
		if (body != NULL)
			sp_err_set(&e, SP_E_BAD_INPUT, 0, "want {\"full\":BOOL, "
			    "\"tag\":NAME} or {\"snapshot\":ID}");
		json_decref(body);
		return fail(c, &e);
	}
	if (strcmp(n, "snapshot") == 0)
		rc = sp_snap_take(c->x, c->route.id, full, tag, &out, &e);
	else if (snap == NULL && strcmp(n, "rollback") == 0)
		rc = sp_err_set(&e, SP_E_BAD_INPUT, 0, "snapshot is needed");
	else if (strcmp(n, "rollback") == 0)
		rc = sp_snap_rollback(c->x, c->route.id, snap, &out, &e);
	else {
		out = json_array();
		rc = sp_snap_fork(c->x, c->route.id, snap, 1, snap1, out, &e);
		if (rc == 0)
			out = json_pack("{s:o}", "forks", out);
	}
	json_decref(body);
	if (rc == -1)
		return fail(c, &e);
	return ok(c, strcmp(n, "rollback") == 0 ? 200 : 201, out);
}

/* ---- exec ---- */

static void
ln_start(struct sp_api_pstream *s, pid_t pid)
{
	sp_api_pstream_json(s, 0, json_pack("{s:i}", "pid", (int)pid), 1);
}

static void
ln_data(struct sp_api_pstream *s, int which, const char *p, size_t n)
{
	sp_api_pstream_json(s, 0, json_pack("{s:o}", which == 1 ? "stdout" :
	    "stderr", sp_api_b64(p, n)), 1);
}

static void
ln_keepalive(struct sp_api_pstream *s)
{
	sp_api_pstream_json(s, 0, json_object(), 1);
}

static void
ln_end(struct sp_api_pstream *s, int status, int signaled)
{
	sp_api_pstream_json(s, 0, json_pack("{s:i}", signaled ? "signal" :
	    "exit", signaled ? status - 128 : status), 1);
}

static void
ln_fail(struct sp_api_pstream *s, const struct sp_err *e)
{
	sp_api_pstream_json(s, 0, json_pack("{s:s, s:s}", "error",
	    sp_code_name(e->code), "msg", e->msg), 1);
}

static const struct sp_api_pstream_ops line_ops = {
	ln_start, ln_data, ln_keepalive, ln_end, ln_fail
};

static int
strings(json_t *a, size_t max, char ***out)
{
	json_t *v;
	size_t i;

	*out = NULL;
	if (a == NULL)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > max ||
	    (*out = calloc(json_array_size(a) + 1, sizeof **out)) == NULL)
		return -1;
	json_array_foreach(a, i, v) {
		if (!json_is_string(v))
			return -1;
		(*out)[i] = (char *)json_string_value(v);
	}
	return 0;
}

static int
exec(struct sp_api_call *c)
{
	struct sp_api_start st;
	struct sp_sandbox_row row;
	struct sp_api_proc *p = NULL;
	pid_t pid;
	json_t *body = NULL, *argv = NULL, *env = NULL;
	const char *in = NULL, *cwd = NULL, *user = NULL;
	char **av = NULL, **ev = NULL;
	struct sp_err e;
	int keep = 0, tty = 0, rows = 0, cols = 0;
	size_t i;

	memset(&st, 0, sizeof st);
	sp_err_clear(&e);
	if (own(c, 1, &row, &e) == -1)
		goto out;
	sp_db_row_release(&row);
	if (sp_api_body_json(c->body, c->body_len, &body, &e) == -1)
		goto out;
	if (json_unpack_ex(body, NULL, JSON_STRICT, "{s:o, s?o, s?s, s?s, "
	    "s?s, s?b, s?b, s?i, s?i}", "argv", &argv, "env", &env, "cwd", &cwd,
	    "user", &user, "stdin", &in, "keep_stdin", &keep, "tty", &tty,
	    "rows", &rows, "cols", &cols) == -1 ||
	    strings(argv, 4096, &av) == -1 || av == NULL || av[0] == NULL ||
	    strings(env, 256, &ev) == -1) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "want {\"argv\":[...], \"env\":"
		    "[\"NAME=VALUE\"], \"cwd\":PATH, \"user\":NAME, \"stdin\":TEXT, "
		    "\"keep_stdin\":BOOL, \"tty\":BOOL, \"rows\":N, \"cols\":N}");
		goto out;
	}
	for (i = 0; ev != NULL && ev[i] != NULL; i++)
		if (strchr(ev[i], '=') == NULL || ev[i][0] == '=') {
			sp_err_set(&e, SP_E_BAD_INPUT, 0, "env: NAME=VALUE");
			goto out;
		}
	st.id = c->route.id;
	st.argv = av;
	st.env = ev;
	st.cwd = cwd;
	st.user = user;
	st.tty = tty;
	st.rows = tty ? (rows > 0 ? rows : 24) : 0;
	st.cols = tty ? (cols > 0 ? cols : 80) : 0;
	st.keep_stdin = keep || in != NULL;
	st.config = json_pack("{s:O}", "argv", argv);
	if (sp_api_proc_start(c->x, &st, &p, &e) == -1)
		goto out;
	/* The request's stdin now, and its end unless more is to come. */
	if (in != NULL && (pid = sp_api_proc_pid(p, &e)) > 0) {
		if (*in != '\0')
			sp_api_proc_input(c->route.id, pid, in, strlen(in), &e);
		if (!keep)
			sp_api_proc_close_input(c->route.id, pid, &e);
	}
	sp_err_clear(&e);
	sp_api_pstream_answer(c, p, &line_ops, "application/x-ndjson", &e);
out:
	if (e.code != SP_E_NONE)
		fail(c, &e);
	free(av);
	free(ev);
	json_decref(st.config);
	json_decref(body);
	return 0;
}

static void
proc1(pid_t pid, const char *tag, json_t *config, void *arg)
{
	json_t *o = json_pack("{s:i}", "pid", (int)pid);

	json_object_update(o, config);
	json_array_append_new(arg, o);
}

static int
processes(struct sp_api_call *c)
{
	struct sp_sandbox_row row;
	const char *n = c->route.name, *eof;
	json_t *body = NULL, *arr;
	struct sp_err e;
	pid_t pid = (pid_t)atoi(c->route.arg);
	int sig = 0, rc = 0;

	if (own(c, 1, &row, &e) == -1)
		return fail(c, &e);
	sp_db_row_release(&row);
	if (strcmp(n, "processes") == 0) {
		arr = json_array();
		sp_api_proc_each(c->route.id, proc1, arr);
		return ok(c, 200, json_pack("{s:o}", "processes", arr));
	}
	if (strcmp(n, "stdin") == 0) {
		eof = c->query(c, "eof");
		if (c->body_len > 0)
			rc = sp_api_proc_input(c->route.id, pid, c->body,
			    c->body_len, &e);
		if (rc == 0 && eof != NULL && strcmp(eof, "1") == 0)
			rc = sp_api_proc_close_input(c->route.id, pid, &e);
	} else {
		if (sp_api_body_json(c->body, c->body_len, &body, &e) == -1 ||
		    json_unpack_ex(body, NULL, JSON_STRICT, "{s:i}", "signal",
		    &sig) == -1) {
			if (body != NULL)
				sp_err_set(&e, SP_E_BAD_INPUT, 0, "want "
				    "{\"signal\":N}");
			json_decref(body);
			return fail(c, &e);
		}
		json_decref(body);
		rc = sp_api_proc_signal(c->route.id, pid, sig, &e);
	}
	if (rc == -1)
		return fail(c, &e);
	return ok(c, 200, json_pack("{s:i}", "pid", (int)pid));
}

/* ---- files ---- */

static int
dir1(json_t *ent, void *arg)
{
	json_array_append(arg, ent);
	return 0;
}

static int
files(struct sp_api_call *c)
{
	const char *n = c->route.name;
	char path[SP_PATH_MAX];
	struct sp_sandbox_row row;
	struct sp_chan *ch = NULL;
	json_t *arr;
	struct sp_err e;
	int fd, trunc = 0, rc;

	if (own(c, 1, &row, &e) == -1)
		return fail(c, &e);
	sp_db_row_release(&row);
	if (sp_api_guest_path(c->query(c, strcmp(n, "tar.in") == 0 ? "dir" :
	    "path"), "/root", path, sizeof path, &e) == -1 ||
	    sp_sandbox_chan(c->x, c->route.id, &ch, &e) == -1)
		return fail(c, &e);
	if (strcmp(n, "dir") == 0) {
		arr = json_array();
		if (sp_fs_list(ch, path, dir1, arr, &trunc, &e) == -1) {
			json_decref(arr);
			sp_chan_close(ch);
			return fail(c, &e);
		}
		sp_chan_close(ch);
		return ok(c, 200, json_pack("{s:s, s:o, s:b}", "path", path,
		    "entries", arr, "truncated", trunc));
	}
	if (strcmp(n, "file.write") == 0 || strcmp(n, "tar.in") == 0) {
		if ((fd = memfd_create("upload", MFD_CLOEXEC)) == -1 ||
		    (c->body_len > 0 && sp_write_all(fd, c->body,
		    c->body_len) == -1)) {
			sp_err_sys(&e, SP_E_IO, "memfd");
			if (fd >= 0)
				close(fd);
			sp_chan_close(ch);
			return fail(c, &e);
		}
		lseek(fd, 0, SEEK_SET);
		rc = strcmp(n, "tar.in") == 0 ? sp_fs_tar_in(ch, path, fd, &e) :
		    sp_fs_write(ch, path, fd, -1, 0, NULL, &e);
		close(fd);
		sp_chan_close(ch);
		if (rc == -1)
			return fail(c, &e);
		return ok(c, 200, json_pack("{s:s, s:I}", "path", path,
		    "bytes", (json_int_t)c->body_len));
	}
	/* A file or a tar stream out: streamed from a thread's pipe. */
	if (sp_api_file_stream(c, ch, path, strcmp(n, "tar.out") == 0,
	    &e) == -1)
		return fail(c, &e);
	return 0;
}

/* ---- egress, templates, quota ---- */

/* {"allow":[RULE...],"deny":[RULE...]}: the rules space-egress takes. */
static int
policy_of(json_t *body, struct sp_egress_policy *p, struct sp_err *e)
{
	json_t *a, *v;
	size_t i;
	int k;

	if (json_unpack_ex(body, NULL, JSON_STRICT, "{s?o, s?o}", "allow", &v,
	    "deny", &v) == -1)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "want {\"allow\":[RULE],"
		    " \"deny\":[RULE]}");
	for (k = 0; k < 2; k++) {
		a = json_object_get(body, k == 0 ? "allow" : "deny");
		if (a != NULL && (!json_is_array(a) || json_array_size(a) > 1024))
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "allow and deny "
			    "are arrays of at most 1024 rules");
		json_array_foreach(a, i, v)
			if (!json_is_string(v) || sp_egress_rules_add(k == 0 ?
			    &p->allow : &p->deny, json_string_value(v), e) == -1)
				return e->code != SP_E_NONE ? -1 :
				    sp_err_set(e, SP_E_BAD_INPUT, 0, "a rule is a "
				    "string");
	}
	return 0;
}

static int
egress(struct sp_api_call *c)
{
	const char *n = c->route.name;
	struct sp_sandbox_row row;
	struct sp_egress_policy p;
	json_t *body = NULL, *o;
	struct sp_err e;
	int removed = 0, rc;

	if (own(c, 0, &row, &e) == -1)
		return fail(c, &e);
	sp_db_row_release(&row);
	sp_err_clear(&e);
	sp_egress_policy_init(&p);
	if (strcmp(n, "egress.get") == 0) {
		rc = sp_egress_policy_read(c->x->conf.root, SP_EGRESS_SANDBOX,
		    c->route.id, &p, &e);
		o = rc == 0 ? sp_egress_policy_json(&p) : NULL;
	} else if (strcmp(n, "egress.remove") == 0) {
		rc = sp_egress_policy_remove(c->x->conf.root, SP_EGRESS_SANDBOX,
		    c->route.id, &removed, &e);
		o = json_pack("{s:b}", "removed", removed);
	} else {
		rc = sp_api_body_json(c->body, c->body_len, &body, &e) == -1 ||
		    policy_of(body, &p, &e) == -1 ||
		    sp_egress_policy_write(c->x->conf.root, SP_EGRESS_SANDBOX,
		    c->route.id, &p, &e) == -1 ? -1 : 0;
		o = rc == 0 ? sp_egress_policy_json(&p) : NULL;
	}
	sp_egress_policy_release(&p);
	json_decref(body);
	if (rc == -1)
		return fail(c, &e);
	json_object_set_new(o, "id", json_string(c->route.id));
	return ok(c, 200, o);
}

/* The tenant's own default policy (a sandbox without one of its own). */
static int
tenant_egress(struct sp_api_call *c)
{
	const char *n = c->route.name;
	struct sp_egress_policy p;
	json_t *body = NULL, *o;
	struct sp_err e;
	int removed = 0, rc;

	if (c->admin) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "an admin key has no tenant: "
		    "space-egress sets any policy");
		return fail(c, &e);
	}
	sp_err_clear(&e);
	sp_egress_policy_init(&p);
	if (strcmp(n, "tenant.egress.get") == 0) {
		rc = sp_egress_policy_read(c->x->conf.root, SP_EGRESS_TENANT,
		    c->tenant, &p, &e);
		o = rc == 0 ? sp_egress_policy_json(&p) : NULL;
	} else if (strcmp(n, "tenant.egress.remove") == 0) {
		rc = sp_egress_policy_remove(c->x->conf.root, SP_EGRESS_TENANT,
		    c->tenant, &removed, &e);
		o = json_pack("{s:b}", "removed", removed);
	} else {
		rc = sp_api_body_json(c->body, c->body_len, &body, &e) == -1 ||
		    policy_of(body, &p, &e) == -1 ||
		    sp_egress_policy_write(c->x->conf.root, SP_EGRESS_TENANT,
		    c->tenant, &p, &e) == -1 ? -1 : 0;
		o = rc == 0 ? sp_egress_policy_json(&p) : NULL;
	}
	sp_egress_policy_release(&p);
	json_decref(body);
	if (rc == -1)
		return fail(c, &e);
	json_object_set_new(o, "tenant", json_string(c->tenant));
	return ok(c, 200, o);
}

/* ---- credentials: the tenant's, and its sandboxes' ---- */

/* A scope as the client says it ("tenant", "project/P", "sandbox/ID";
 * an admin any scope space-cred takes) into the store's, when the caller
 * may touch it; not-found for another tenant's sandbox. */
static int
cred_scope(struct sp_api_call *c, const char *in, char *out, size_t n,
    struct sp_err *e)
{
	struct sp_sandbox_row row;

	if (in == NULL)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "scope is tenant, "
		    "project/P or sandbox/ID");
	if (c->admin)
		snprintf(out, n, "%s", in);
	else if (strcmp(in, "tenant") == 0)
		snprintf(out, n, "tenant/%s", c->tenant);
	else if (strncmp(in, "project/", 8) == 0) {
		if (sp_name_check("project", in + 8, e) == -1)
			return -1;
		snprintf(out, n, "project/%s/%s", c->tenant, in + 8);
	} else if (strncmp(in, "sandbox/", 8) == 0) {
		if (sp_api_sandbox(c, in + 8, &row, e) == -1)
			return -1;
		sp_db_row_release(&row);
		snprintf(out, n, "%s", in);
	} else
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "scope is tenant, "
		    "project/P or sandbox/ID");
	return sp_cred_scope_check(out, e);
}

/* 1 when the caller may see a credential of scope. */
static int
cred_visible(struct sp_api_call *c, const char *scope)
{
	char t[SP_NAME_MAX + 16], saved[SP_ID_LEN + 1];
	struct sp_sandbox_row row;
	struct sp_err e;
	int visible;

	if (c->admin)
		return 1;
	snprintf(t, sizeof t, "tenant/%s", c->tenant);
	if (strcmp(scope, t) == 0)
		return 1;
	snprintf(t, sizeof t, "project/%s/", c->tenant);
	if (strncmp(scope, t, strlen(t)) == 0)
		return 1;
	if (strncmp(scope, "sandbox/", 8) == 0) {
		/* Asked for nothing: the audit's sandbox stays as it was. */
		snprintf(saved, sizeof saved, "%s", c->sandbox);
		visible = sp_api_sandbox(c, scope + 8, &row, &e) == 0;
		if (visible)
			sp_db_row_release(&row);
		snprintf(c->sandbox, sizeof c->sandbox, "%s", saved);
		return visible;
	}
	return 0;
}

struct creds {
	struct sp_api_call *c;
	json_t *arr;
};

static int
cred1(const struct sp_cred *cr, const struct sp_err *bad, void *arg)
{
	struct creds *l = arg;

	if (bad == NULL && cred_visible(l->c, cr->scope))
		json_array_append_new(l->arr, sp_cred_json(cr));
	return 0;
}

static int
creds(struct sp_api_call *c)
{
	const char *n = c->route.name, *name = NULL, *scope = NULL,
	    *hosts = NULL, *inject = NULL, *secret = NULL, *rate = NULL;
	char sc[SP_CRED_SCOPE_MAX + 1];
	struct creds l = { c, NULL };
	struct sp_cred cr;
	struct sp_cred_spec spec;
	json_t *body = NULL;
	json_int_t expires = 0;
	struct sp_err e;
	int removed = 0, rc;

	if (strcmp(n, "creds") == 0) {
		l.arr = json_array();
		if (sp_cred_each(c->x->conf.root, cred1, &l, &e) == -1) {
			json_decref(l.arr);
			return fail(c, &e);
		}
		return ok(c, 200, json_pack("{s:o}", "credentials", l.arr));
	}
	if (strcmp(n, "cred.remove") == 0) {
		if (cred_scope(c, c->query(c, "scope"), sc, sizeof sc, &e) == -1 ||
		    sp_cred_remove(c->x->conf.root, c->route.cred, sc, time(NULL),
		    &removed, NULL, &e) == -1)
			return fail(c, &e);
		if (!removed) {
			sp_err_set(&e, SP_E_NOT_FOUND, 0, "no credential %s in %s",
			    c->route.cred, sc);
			return fail(c, &e);
		}
		return ok(c, 200, json_pack("{s:s, s:s, s:b}", "name",
		    c->route.cred, "scope", sc, "removed", 1));
	}
	if (sp_api_body_json(c->body, c->body_len, &body, &e) == -1)
		return fail(c, &e);
	if (json_unpack_ex(body, NULL, JSON_STRICT, "{s?s, s:s, s?s, s?s, s:s, "
	    "s?I, s?s}", "name", &name, "scope", &scope, "hosts", &hosts,
	    "inject", &inject, "secret", &secret, "expires", &expires, "rate",
	    &rate) == -1) {
		json_decref(body);
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "want {\"name\":N, \"scope\":S, "
		    "\"hosts\":\"H,...\", \"inject\":M, \"secret\":S, "
		    "\"expires\":T, \"rate\":\"N/P\"} (hosts, inject and name to "
		    "add; scope and secret to rotate)");
		return fail(c, &e);
	}
	rc = cred_scope(c, scope, sc, sizeof sc, &e);
	if (rc == 0 && strcmp(n, "cred.add") == 0) {
		memset(&spec, 0, sizeof spec);
		spec.name = name;
		spec.scope = sc;
		spec.hosts = hosts;
		spec.inject = inject;
		spec.expires = expires;
		spec.rate = rate;
		rc = name == NULL || hosts == NULL || inject == NULL ?
		    sp_err_set(&e, SP_E_BAD_INPUT, 0, "name, hosts and inject are "
		    "needed") : sp_name_check("credential", name, &e) == -1 ? -1 :
		    sp_cred_add(c->x->conf.root, &spec, secret, strlen(secret),
		    time(NULL), &cr, &e);
	} else if (rc == 0)
		rc = sp_cred_rotate(c->x->conf.root, c->route.cred, sc, secret,
		    strlen(secret), expires, time(NULL), &cr, &e);
	sodium_memzero((char *)secret, strlen(secret));
	json_decref(body);
	if (rc == -1)
		return fail(c, &e);
	return ok(c, strcmp(n, "cred.add") == 0 ? 201 : 200, sp_cred_json(&cr));
}

struct tpl_list {
	json_t *arr;
	const struct sp_tenant_row *t;	/* NULL: an admin's, every one */
};

static int
template1(const struct sp_template_row *t, void *arg)
{
	struct tpl_list *l = arg;

	if (l->t == NULL || sp_tenant_template_ok(l->t, t->name))
		json_array_append_new(l->arr, json_pack("{s:s, s:s}", "name",
		    t->name, "digest", t->digest));
	return 0;
}

static int
templates(struct sp_api_call *c)
{
	struct sp_tenant_row t;
	struct tpl_list l = { json_array(), NULL };
	struct sp_err e;

	if (!c->admin) {
		if (sp_db_tenant_get(c->x->db, c->tenant, &t, &e) == -1) {
			json_decref(l.arr);
			return fail(c, &e);
		}
		l.t = &t;
	}
	if (sp_db_template_each(c->x->db, template1, &l, &e) == -1) {
		json_decref(l.arr);
		return fail(c, &e);
	}
	return ok(c, 200, json_pack("{s:o}", "templates", l.arr));
}

static int
quota(struct sp_api_call *c)
{
	struct sp_tenant_usage u;
	struct sp_tenant_row t;
	struct sp_err e;

	if (c->admin) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "an admin key has no quota");
		return fail(c, &e);
	}
	if (sp_db_tenant_get(c->x->db, c->tenant, &t, &e) == -1 ||
	    sp_db_tenant_usage(c->x->db, c->tenant, &u, &e) == -1)
		return fail(c, &e);
	return ok(c, 200, json_pack("{s:s, s:{s:i, s:i, s:i, s:i}, s:{s:i, "
	    "s:i, s:i, s:i, s:I}}", "tenant", t.name, "quota", "running",
	    t.max_running, "vcpus", t.max_vcpus, "memory_mib",
	    t.max_memory_mib, "disk_gb", t.max_disk_gb, "uses", "sandboxes",
	    u.sandboxes, "running", u.running, "vcpus", u.vcpus, "memory_mib",
	    u.memory_mib, "disk_bytes", (json_int_t)u.disk_bytes));
}

int
sp_api_native(struct sp_api_call *c)
{
	const char *n = c->route.name;

	if (strcmp(n, "create") == 0)
		return create(c);
	if (strcmp(n, "list") == 0)
		return list(c);
	if (strcmp(n, "get") == 0)
		return get(c);
	if (strcmp(n, "snapshots") == 0 || strcmp(n, "snapshot") == 0 ||
	    strcmp(n, "snapshot.remove") == 0 || strcmp(n, "rollback") == 0 ||
	    strcmp(n, "fork") == 0)
		return snapshots(c);
	if (strcmp(n, "exec") == 0)
		return exec(c);
	if (strcmp(n, "processes") == 0 || strcmp(n, "stdin") == 0 ||
	    strcmp(n, "signal") == 0)
		return processes(c);
	if (strncmp(n, "file.", 5) == 0 || strcmp(n, "dir") == 0 ||
	    strncmp(n, "tar.", 4) == 0)
		return files(c);
	if (strncmp(n, "egress.", 7) == 0)
		return egress(c);
	if (strncmp(n, "tenant.egress.", 14) == 0)
		return tenant_egress(c);
	if (strcmp(n, "creds") == 0 || strncmp(n, "cred.", 5) == 0)
		return creds(c);
	if (strcmp(n, "templates") == 0)
		return templates(c);
	if (strcmp(n, "quota") == 0)
		return quota(c);
	return verb(c);
}
