/*
 * test-api: the parts of the HTTP API that need no server: keys (made,
 * stored as a hash, checked, refused when changed or removed), tenants and
 * what they use and their quotas (on both backends: the quota is a
 * condition of the statement that writes the row), routes, guest paths,
 * Connect envelopes.  tests/api.bats drives the server itself.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "sp.h"
#include "tap.h"
#include "pg.h"

static struct sp_conf conf;

static void
test_keys(void)
{
	char key[SP_APIKEY_LEN + 1], bad[SP_APIKEY_LEN + 1];
	struct sp_apikey_row row, got;
	struct sp_tenant_row t = { .max_running = 2 };
	struct sp_tenant_usage u;
	struct sp_db *db;
	struct sp_err e;

	if (sp_db_open(&db, &conf, &e) == -1) {
		tap_ok(0, "open the DB");
		return;
	}
	snprintf(t.name, sizeof t.name, "acme");
	tap_okf(sp_code_name(e.code), e.msg, sp_db_tenant_add(db, &t, &e) == 0,
	    "a tenant is added");
	tap_ok(sp_db_tenant_add(db, &t, &e) == -1 && e.code == SP_E_EXISTS,
	    "the same tenant again: exists");
	tap_ok(sp_apikey_new("nobody", 0, 10, &row, key, &e) == 0 &&
	    sp_db_apikey_add(db, &row, &e) == -1 && e.code == SP_E_NOT_FOUND,
	    "a key of a tenant that is not: not-found");
	tap_ok(sp_apikey_new("acme", 0, 10, &row, key, &e) == 0 &&
	    sp_db_apikey_add(db, &row, &e) == 0, "a key is made and added");
	tap_ok(strncmp(key, "spk_", 4) == 0 && strlen(key) == SP_APIKEY_LEN &&
	    strstr(key, row.hash) == NULL && strstr(key, row.id) == key + 4,
	    "the key is spk_ID_SECRET and the row keeps a hash, not the secret");
	tap_ok(sp_apikey_check(db, key, &got, &e) == 0 &&
	    strcmp(got.tenant, "acme") == 0 && !got.admin && got.rate == 10,
	    "the key is checked: its tenant and rate");
	memcpy(bad, key, sizeof bad);
	bad[SP_APIKEY_LEN - 1] = bad[SP_APIKEY_LEN - 1] == '0' ? '1' : '0';
	tap_ok(sp_apikey_check(db, bad, &got, &e) == -1 &&
	    e.code == SP_E_UNAUTHORIZED, "one hex digit of the secret changed: "
	    "unauthorized");
	tap_ok(sp_apikey_check(db, "spk_short", &got, &e) == -1 &&
	    e.code == SP_E_UNAUTHORIZED && sp_apikey_check(db, NULL, &got,
	    &e) == -1 && e.code == SP_E_UNAUTHORIZED,
	    "a malformed key or none: unauthorized");
	tap_ok(sp_db_apikey_remove(db, row.id, &e) == 0 &&
	    sp_apikey_check(db, key, &got, &e) == -1 &&
	    e.code == SP_E_UNAUTHORIZED, "a removed key: unauthorized");
	tap_ok(sp_apikey_new(NULL, 1, 0, &row, key, &e) == 0 &&
	    sp_db_apikey_add(db, &row, &e) == 0 &&
	    sp_apikey_check(db, key, &got, &e) == 0 && got.admin &&
	    got.tenant[0] == '\0', "an admin key has no tenant");
	tap_ok(sp_db_tenant_usage(db, "acme", &u, &e) == 0 && u.sandboxes == 0 &&
	    u.running == 0, "a new tenant uses nothing");
	snprintf(t.templates, sizeof t.templates, "[\"minimal\",\"debian\"]");
	tap_ok(sp_db_tenant_set(db, &t, &e) == 0 &&
	    sp_db_tenant_get(db, "acme", &t, &e) == 0 &&
	    sp_tenant_template_ok(&t, "debian@0123") &&
	    sp_tenant_template_ok(&t, "minimal") &&
	    !sp_tenant_template_ok(&t, "mini") &&
	    !sp_tenant_template_ok(&t, "other@0123"), "a tenant's templates: "
	    "those named, by name, and no other");
	t.templates[0] = '\0';
	tap_ok(sp_db_tenant_set(db, &t, &e) == 0 &&
	    sp_db_tenant_get(db, "acme", &t, &e) == 0 &&
	    sp_tenant_template_ok(&t, "other"), "no list: every template");
	tap_ok(sp_db_tenant_remove(db, "acme", &e) == 0 &&
	    sp_db_tenant_get(db, "acme", &t, &e) == -1 &&
	    e.code == SP_E_NOT_FOUND, "a tenant with no sandboxes is removed");
	sp_db_close(db);
}

/* A sandbox row of tenant t (or a pod of no one) as a create writes it. */
static int
insert(struct sp_db *db, const char *t, const char *tpl, int mem, int vcpus,
    enum sp_state st, struct sp_err *e)
{
	struct sp_sandbox_row r;
	char labels[128];

	memset(&r, 0, sizeof r);
	if (sp_id_new(r.id, e) == -1)
		return -1;
	snprintf(labels, sizeof labels, "{\"tenant\":\"%s\"}", t);
	r.state = st;
	snprintf(r.template, sizeof r.template, "%s", tpl);
	snprintf(r.node, sizeof r.node, "n1");
	r.created = 1;
	r.memory_mib = mem;
	r.vcpus = vcpus;
	r.labels = labels;
	return sp_db_sandbox_insert(db, &r, e);
}

static void
test_quotas(void)
{
	struct sp_tenant_row t = { .max_running = 2, .max_vcpus = 3,
	    .max_memory_mib = 1024, .max_disk_gb = 2 };
	struct sp_template_row tpl = { .disk_bytes = 700LL << 20 };
	struct sp_tenant_usage u;
	struct sp_db *db;
	struct sp_err e;
	const char *ref = "small@" "0123456789abcdef0123456789abcdef"
	    "0123456789abcdef0123456789abcdef";

	if (sp_db_open(&db, &conf, &e) == -1) {
		tap_ok(0, "open the DB");
		return;
	}
	snprintf(t.name, sizeof t.name, "q");
	snprintf(tpl.name, sizeof tpl.name, "small");
	snprintf(tpl.digest, sizeof tpl.digest, "%s", ref + 6);
	tap_okf(sp_code_name(e.code), e.msg, sp_db_tenant_add(db, &t, &e) == 0 &&
	    sp_db_template_insert(db, &tpl, &e) == 0, "a tenant with quotas, a "
	    "template of 700 MiB");
	tap_okf(sp_code_name(e.code), e.msg, insert(db, "q", ref, 256, 1,
	    SP_ST_RUNNING, &e) == 0 && insert(db, "q", ref, 256, 2,
	    SP_ST_RUNNING, &e) == 0, "two running sandboxes of 3 vCPUs in all");
	tap_ok(insert(db, "q", ref, 256, 1, SP_ST_CREATING, &e) == -1 &&
	    e.code == SP_E_QUOTA_EXCEEDED, "a third: quota-exceeded (running)");
	tap_ok(insert(db, "other", ref, 256, 1, SP_ST_CREATING, &e) == 0,
	    "another tenant is not counted against it");
	tap_ok(sp_db_tenant_usage(db, "q", &u, &e) == 0 && u.running == 2 &&
	    u.vcpus == 3 && u.memory_mib == 512 && u.disk_bytes == 2 * (700LL <<
	    20), "usage: 2 running, 3 vCPUs, 512 MiB, two disks");
	t.max_running = 0;
	t.max_vcpus = 0;
	tap_ok(sp_db_tenant_set(db, &t, &e) == 0 &&
	    insert(db, "q", ref, 768, 1, SP_ST_CREATING, &e) == -1 &&
	    e.code == SP_E_QUOTA_EXCEEDED, "memory: 512 + 768 MiB over 1024: "
	    "refused");
	tap_ok(insert(db, "q", ref, 512, 1, SP_ST_CREATING, &e) == -1 &&
	    e.code == SP_E_QUOTA_EXCEEDED, "disk: a third 700 MiB disk over 2 GiB: "
	    "refused");
	t.max_disk_gb = 0;
	tap_ok(sp_db_tenant_set(db, &t, &e) == 0 &&
	    insert(db, "q", ref, 512, 1, SP_ST_CREATING, &e) == 0,
	    "with no disk quota, the same fits");
	tap_ok(sp_db_tenant_usage(db, "q", &u, &e) == 0 && u.sandboxes == 3,
	    "nothing was written by the refused creates");
	sp_db_close(db);
}

static void
test_routes(void)
{
	struct sp_api_route r;
	struct sp_err e;

	tap_ok(sp_api_route("GET", "/v1/sandboxes/abcdefgh2345", &r, &e) == 0 &&
	    r.kind == SP_API_NATIVE && strcmp(r.name, "get") == 0 &&
	    strcmp(r.id, "abcdefgh2345") == 0, "a native route and its id");
	tap_ok(sp_api_route("POST", "/v1/sandboxes/abcdefgh2345/processes/77/"
	    "stdin", &r, &e) == 0 && strcmp(r.arg, "77") == 0,
	    "a route with a pid");
	tap_ok(sp_api_route("GET", "/v1/sandboxes/ABCDEFGH2345", &r, &e) == -1 &&
	    e.code == SP_E_NOT_FOUND, "an id that is not one: not-found");
	tap_ok(sp_api_route("POST", "/v1/sandboxes/web-1/exec", &r, &e) == 0 &&
	    strcmp(r.name, "exec") == 0 && r.id[0] == '\0' &&
	    strcmp(r.ref, "web-1") == 0, "a native route names a sandbox by "
	    "its name: ref, no id yet");
	tap_ok(sp_api_route("GET", "/v1/sandboxes/Web_1", &r, &e) == -1 &&
	    e.code == SP_E_NOT_FOUND && sp_api_route("GET",
	    "/v1/sandboxes/abcdefgh2345/snapshots/web-1", &r, &e) == -1 &&
	    sp_api_route("DELETE", "/sandboxes/web-1", &r, &e) == -1,
	    "no name that is not one, no name for a snapshot, none in E2B's "
	    "paths");
	tap_ok(sp_api_route("PATCH", "/v1/sandboxes", &r, &e) == -1 &&
	    e.code == SP_E_BAD_STATE, "a method the path does not take: "
	    "bad-state (405)");
	tap_ok(sp_api_route("GET", "/v1//sandboxes", &r, &e) == -1 &&
	    sp_api_route("GET", "v1/sandboxes", &r, &e) == -1 &&
	    sp_api_route("GET", "/v1/sandboxes/abcdefgh2345/processes/0/stdin",
	    &r, &e) == -1, "empty segments, a relative path, pid 0: refused");
	tap_ok(sp_api_route("POST", "/process.Process/Start", &r, &e) == 0 &&
	    r.kind == SP_API_ENVD && r.stream, "Process.Start streams");
	tap_ok(sp_api_route("DELETE", "/templates/x", &r, &e) == 0 &&
	    strcmp(r.name, "e2b.unsupported") == 0,
	    "E2B's template paths: unsupported, in E2B's shape");
}

static void
test_parse(void)
{
	char out[SP_PATH_MAX], *buf = NULL;
	size_t len = 0;
	json_t *j = NULL;
	struct sp_err e;

	tap_ok(sp_api_guest_path("../../etc/./passwd", "/root", out, sizeof out,
	    &e) == 0 && strcmp(out, "/etc/passwd") == 0,
	    "a relative guest path: from home, normalised, never above /");
	tap_ok(sp_api_guest_path("/a//b/../c/", "/root", out, sizeof out,
	    &e) == 0 && strcmp(out, "/a/c") == 0, "an absolute one, normalised");
	tap_ok(sp_api_guest_path("", "/root", out, sizeof out, &e) == -1,
	    "an empty path: bad-input");
	tap_ok(sp_connect_wrap(&buf, &len, 0, json_pack("{s:i}", "a", 1)) == 0 &&
	    sp_connect_unwrap(buf, len, &j, &e) == 0 &&
	    json_integer_value(json_object_get(j, "a")) == 1,
	    "a Connect envelope, there and back");
	json_decref(j);
	j = NULL;
	if (buf != NULL) {
		buf[0] = SP_CONNECT_COMPRESSED;
		tap_ok(sp_connect_unwrap(buf, len, &j, &e) == -1,
		    "a compressed envelope: refused");
		buf[0] = 0;
		tap_ok(sp_connect_unwrap(buf, len - 1, &j, &e) == -1,
		    "an envelope shorter than it says: refused");
	}
	free(buf);
	tap_ok(sp_api_body_json("{\"a\":1,\"a\":2}", 13, &j, &e) == -1 &&
	    sp_api_body_json("[1]", 3, &j, &e) == -1, "a key twice, an array: "
	    "refused");
	tap_ok(sp_api_url_decode("a%3Db+c", out, sizeof out) == 0 &&
	    strcmp(out, "a=b c") == 0 && sp_api_url_decode("%00", out,
	    sizeof out) == -1 && sp_api_url_decode("%4", out, sizeof out) == -1,
	    "%-decoding, and no NUL out of it");
	tap_ok(sp_api_env_check("PATH_2", "x", &e) == 0 &&
	    sp_api_env_check("2X", "x", &e) == -1 &&
	    sp_api_env_check("A", "a\nb", &e) == -1,
	    "environment names and values");
}

int
main(void)
{
	char dir[] = "/tmp/test-api.XXXXXX", pgdir[] = "/tmp/sp-pg-XXXXXX";
	char cmd[128];

	if (sodium_init() < 0 || mkdtemp(dir) == NULL || mkdtemp(pgdir) == NULL)
		return 2;
	memset(&conf, 0, sizeof conf);
	snprintf(conf.root, sizeof conf.root, "%s", dir);
	snprintf(conf.db, sizeof conf.db, "sqlite:%s/space.db", dir);
	test_keys();
	test_quotas();
	test_routes();
	test_parse();
	if (system("tests/pg-server there") != 0)
		tap_ok(1, "postgresql: keys and quotas # skip no PostgreSQL "
		    "server here (tests/run-all installs one)");
	else if (pg_server("start", pgdir, conf.db, sizeof conf.db) == -1)
		tap_ok(0, "postgresql: tests/pg-server starts a server");
	else {
		test_keys();
		test_quotas();
		pg_server("stop", pgdir, NULL, 0);
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s %s", dir, pgdir);
	if (system(cmd) != 0)
		return 2;
	return tap_done();
}
