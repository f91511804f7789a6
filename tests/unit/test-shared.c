/*
 * test-shared: what a cluster's nodes share besides sandboxes.  On both
 * backends: the documents, the rate buckets (compare-and-set under racing
 * processes: no use lost) and the audit rows.  On a PostgreSQL server of the
 * test's own (tests/pg-server), two node roots A and B with SPACE_DB on it:
 * a credential added on A is seen, used, rate-limited, audited, rotated and
 * removed from B, an egress policy set on A holds on B, nothing of either is
 * left as a file under a root, and the file vault is refused.
 */
#include <dirent.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sp.h"
#include "tap.h"
#include "pg.h"

static struct sp_conf conf;
static const char *backend = "sqlite";

static struct sp_db *
open_db(void)
{
	struct sp_db *db;
	struct sp_err e;

	if (sp_db_open(&db, &conf, &e) == -1) {
		fprintf(stderr, "open %s: %s\n", conf.db, e.msg);
		exit(2);
	}
	return db;
}

static int
count1(const char *scope, const char *name, const char *body, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

static int
stop_at_first(const char *scope, const char *name, const char *body, void *arg)
{
	(*(int *)arg)++;
	return 7;
}

static void
test_docs(void)
{
	struct sp_db *db = open_db();
	struct sp_err e;
	char *body = NULL;
	int n = 0, removed = -1, rc;

	tap_okf(sp_code_name(e.code), e.msg,
	    sp_db_doc_put(db, "t", "s1", "a", "{\"v\":1}", 0, &e) == 0 &&
	    sp_db_doc_put(db, "t", "s1", "b", "{\"v\":2}", 0, &e) == 0 &&
	    sp_db_doc_put(db, "t", "s2", "a", "{\"v\":3}", 0, &e) == 0,
	    "%s: documents are added", backend);
	rc = sp_db_doc_put(db, "t", "s1", "a", "{\"v\":9}", 0, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == -1 && e.code == SP_E_EXISTS,
	    "%s: adding one that is there is exists", backend);
	rc = sp_db_doc_get(db, "t", "s1", "a", &body, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && strcmp(body,
	    "{\"v\":1}") == 0, "%s: ... and leaves it as it was", backend);
	free(body);
	rc = sp_db_doc_put(db, "t", "s1", "a", "{\"v\":4}", 1, &e) == 0 ?
	    sp_db_doc_get(db, "t", "s1", "a", &body, &e) : -1;
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && strcmp(body,
	    "{\"v\":4}") == 0, "%s: replacing one changes it", backend);
	free(body);
	rc = sp_db_doc_each(db, "t", NULL, NULL, count1, &n, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && n == 3,
	    "%s: every document of a kind (3)", backend);
	n = 0;
	rc = sp_db_doc_each(db, "t", "s1", NULL, count1, &n, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && n == 2,
	    "%s: those of one scope (2)", backend);
	n = 0;
	rc = sp_db_doc_each(db, "t", NULL, "a", count1, &n, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && n == 2,
	    "%s: those of one name (2)", backend);
	n = 0;
	rc = sp_db_doc_each(db, "t", NULL, NULL, stop_at_first, &n, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 7 && n == 1,
	    "%s: a walk stops where its function says", backend);
	n = 0;
	rc = sp_db_doc_each(db, "other", NULL, NULL, count1, &n, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && n == 0,
	    "%s: kinds are apart", backend);
	rc = sp_db_doc_delete(db, "t", "s1", "b", &removed, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && removed == 1 &&
	    sp_db_doc_get(db, "t", "s1", "b", &body, &e) == -1 &&
	    e.code == SP_E_NOT_FOUND, "%s: a removed one is not-found", backend);
	rc = sp_db_doc_delete(db, "t", "s1", "b", &removed, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && removed == 0,
	    "%s: removing it again removes nothing, and is no error", backend);
	sp_db_close(db);
}

/* Adds one token: a counter, to see no update is lost. */
static int
add_one(int64_t *tokens, int64_t *last, int fresh, void *arg)
{
	*tokens += 1;
	*last = fresh ? 1 : *last + 1;
	return 1;
}

/* Reads the bucket's tokens into *arg, writing them back as they were. */
static int
peek(int64_t *tokens, int64_t *last, int fresh, void *arg)
{
	*(int64_t *)arg = fresh ? -1 : *tokens;
	return 1;
}

static int
line1(const char *line, void *arg)
{
	char *out = arg;
	size_t l = strlen(out);

	snprintf(out + l, 64 - l, "%s,", line);
	return 0;
}

static void
test_rates_audit(void)
{
	enum { KIDS = 4, EACH = 50 };
	struct sp_db *db;
	struct sp_err e;
	pid_t kids[KIDS];
	char got[64] = "";
	int64_t seen = -1;
	int k, i, status, bad = 0;

	for (k = 0; k < KIDS; k++) {
		if ((kids[k] = fork()) == 0) {
			db = open_db();
			for (i = 0; i < EACH; i++)
				if (sp_db_rate_update(db, "c", "sb", add_one, NULL,
				    &e) != 1) {
					fprintf(stderr, "rate: %s\n", e.msg);
					_exit(1);
				}
			sp_db_close(db);
			_exit(0);
		}
	}
	for (k = 0; k < KIDS; k++)
		if (waitpid(kids[k], &status, 0) == -1 || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			bad++;
	db = open_db();
	if (sp_db_rate_update(db, "c", "sb", peek, &seen, &e) == -1)
		bad++;
	tap_okf("", "", bad == 0 && seen == KIDS * EACH,
	    "%s: %d processes adding %d each to one bucket by compare-and-set: "
	    "%lld, none lost", backend, KIDS, EACH, (long long)seen);
	tap_okf(sp_code_name(e.code), e.msg, sp_db_rate_forget(db, NULL, "sb",
	    &e) == 0 && sp_db_rate_update(db, "c", "sb", add_one, NULL,
	    &e) == 1, "%s: a sandbox's buckets forgotten start afresh", backend);
	tap_okf(sp_code_name(e.code), e.msg,
	    sp_db_audit_add(db, 100, "{\"a\":1}", &e) == 0 &&
	    sp_db_audit_add(db, 50, "{\"b\":2}", &e) == 0 &&
	    sp_db_audit_add(db, 200, "{\"c\":3}", &e) == 0 &&
	    sp_db_audit_each(db, 60, line1, got, &e) == 0 &&
	    strcmp(got, "{\"a\":1},{\"c\":3},") == 0,
	    "%s: audit records since a time, in the order written", backend);
	sp_db_close(db);
}

static int
count_cred(const struct sp_cred *c, const struct sp_err *bad, void *arg)
{
	char *order = arg;
	size_t l = strlen(order);

	snprintf(order + l, 256 - l, "%s:%s,", c->scope, c->name);
	return 0;
}

struct uses {
	int allowed, limited, added;
};

static int
audit1(json_t *rec, void *arg)
{
	struct uses *u = arg;
	const char *op = json_string_value(json_object_get(rec, "op"));
	const char *d = json_string_value(json_object_get(rec, "decision"));

	if (op != NULL && d != NULL && strcmp(op, "use") == 0)
		u->allowed += strcmp(d, "allowed") == 0,
		u->limited += strcmp(d, "rate-limited") == 0;
	else if (op != NULL && strcmp(op, "add") == 0)
		u->added++;
	json_decref(rec);
	return 0;
}

/* One use of gh by sandbox SB from root; its decision's code. */
static int
use(const char *root, struct sp_cred_grant *g, char *buf, struct sp_err *e)
{
	if (sp_cred_use(root, "sbsbsbsbsbsb", "acme", NULL, "api.github.com",
	    time(NULL), g, buf, SP_CRED_OUT_MAX, e) == 0)
		return SP_E_NONE;
	return e->code;
}

/* A file or directory under root/sub: 1 when there is one. */
static int
under(const char *root, const char *sub)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof p, "%s/%s", root, sub);
	return stat(p, &st) == 0;
}

/* Node roots a and b rotate gh 10 times each, at once; then the secrets
 * the vault holds (its files but calls.log), or -1. */
static int
rotations_race(const char *a, const char *b, const char *vdir)
{
	const char *roots[2] = { a, b };
	struct sp_err e;
	struct dirent *d;
	pid_t kids[2];
	int k, i, n = 0, st, bad = 0;
	DIR *dp;

	for (k = 0; k < 2; k++)
		if ((kids[k] = fork()) == 0) {
			/* A loser is told to try again: not an error here. */
			for (i = 0; i < 10; i++)
				sp_cred_rotate(roots[k], "gh", "tenant/acme", "r0t",
				    3, 0, time(NULL), NULL, &e);
			_exit(0);
		}
	for (k = 0; k < 2; k++)
		bad += waitpid(kids[k], &st, 0) == -1 || !WIFEXITED(st);
	if (bad || (dp = opendir(vdir)) == NULL)
		return -1;
	while ((d = readdir(dp)) != NULL)
		n += d->d_name[0] != '.' && strcmp(d->d_name, "calls.log") != 0;
	closedir(dp);
	return n;
}

static void
test_cluster_store(const char *dir, const char *vault_test)
{
	static char buf[SP_CRED_OUT_MAX];
	char a[300], b[300], vdir[300], order[256] = "", env[600];
	struct sp_cred_spec s = { "gh", "tenant/acme", "api.github.com",
	    "header:Authorization:Bearer {}", 0, "2/h", NULL };
	struct sp_egress_policy p, q;
	struct sp_cred_grant g;
	struct sp_cred c;
	struct uses u = { 0 };
	struct sp_err e;
	int64_t now = time(NULL);
	int rc, removed;

	snprintf(a, sizeof a, "%s/a", dir);
	snprintf(b, sizeof b, "%s/b", dir);
	snprintf(vdir, sizeof vdir, "%s/vault", dir);
	if (mkdir(a, 0700) == -1 || mkdir(b, 0700) == -1 ||
	    mkdir(vdir, 0700) == -1)
		exit(2);
	/* sp_db_shared_take reads the configuration once, from here on. */
	setenv("SPACE_DB", conf.db, 1);
	setenv("VAULT_TEST_DIR", vdir, 1);
	unsetenv("SPACE_CRED_VAULT");

	rc = sp_cred_add(a, &s, "t0ken", 5, now, NULL, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == -1 &&
	    e.code == SP_E_BAD_INPUT && strstr(e.msg, "cmd:") != NULL,
	    "shared: the file vault is refused, and the message says what to "
	    "use");
	snprintf(env, sizeof env, "cmd:%s", vault_test);
	setenv("SPACE_CRED_VAULT", env, 1);
	rc = sp_cred_add(a, &s, "t0ken", 5, now, NULL, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 &&
	    sp_cred_get(b, "gh", NULL, &c, &e) == 0 && c.version == 1 &&
	    strcmp(c.scope, "tenant/acme") == 0,
	    "shared: a credential added on node A is there on node B");
	tap_ok(!under(a, "creds/scopes") && !under(b, "creds/scopes") &&
	    !under(a, "creds/audit.log") && !under(a, "creds/vault"),
	    "shared: ... and no metadata, audit or file vault under either "
	    "root");
	rc = sp_cred_add(b, &s, "other", 5, now, NULL, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == -1 && e.code == SP_E_EXISTS,
	    "shared: adding it again on B is exists");
	s.name = "zz";
	s.scope = "global";
	rc = sp_cred_add(b, &s, "g", 1, now, NULL, &e);
	s.scope = "sandbox/sbsbsbsbsbsb";
	rc = rc == 0 ? sp_cred_add(a, &s, "x", 1, now, NULL, &e) : -1;
	rc = rc == 0 ? sp_cred_each(a, count_cred, order, &e) : -1;
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && strcmp(order,
	    "global:zz,tenant/acme:gh,sandbox/sbsbsbsbsbsb:zz,") == 0,
	    "shared: the walk goes scope by scope, in order (%s)", order);
	rc = sp_cred_remove(b, "zz", "sandbox/sbsbsbsbsbsb", now, &removed,
	    NULL, &e);

	rc = use(b, &g, buf, &e);
	tap_okf(sp_code_name(rc), e.msg, rc == SP_E_NONE &&
	    strcmp(buf, "Authorization: Bearer t0ken") == 0,
	    "shared: B injects the secret A put in the shared vault");
	sodium_memzero(buf, sizeof buf);
	rc = use(a, &g, buf, &e);
	tap_okf(sp_code_name(rc), e.msg, rc == SP_E_NONE,
	    "shared: A takes the second use of 2/h");
	rc = use(b, &g, buf, &e);
	tap_okf(sp_code_name(rc), e.msg, rc == SP_E_RATE_LIMITED &&
	    g.retry_after > 0, "shared: the third, on B, is rate-limited: "
	    "one bucket for the cluster (retry after %lld s)",
	    (long long)g.retry_after);
	rc = sp_cred_audit_each(a, now, audit1, &u, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && u.added == 3 &&
	    u.allowed == 2 && u.limited == 1,
	    "shared: A's audit has every add and use of both nodes (%d adds, "
	    "%d allowed, %d limited)", u.added, u.allowed, u.limited);
	rc = sp_cred_forget_sandbox(a, "sbsbsbsbsbsb", now, &e) == 0 ?
	    use(b, &g, buf, &e) : -1;
	tap_okf(sp_code_name(rc), e.msg, rc == SP_E_NONE,
	    "shared: a removed sandbox's buckets go with it");
	rc = sp_cred_rotate(b, "gh", NULL, "n3w", 3, 0, now, NULL, &e);
	rc = rc == 0 ? use(a, &g, buf, &e) : -1;
	tap_okf(sp_code_name(rc), e.msg, rc == SP_E_NONE && g.version == 2 &&
	    strcmp(buf, "Authorization: Bearer n3w") == 0,
	    "shared: rotated on B, A injects the new secret (version 2)");
	sodium_memzero(buf, sizeof buf);
	rc = rotations_race(a, b, vdir);
	tap_okf("", "", rc == 2, "shared: two nodes rotating one credential 10 "
	    "times each at once leave no secret behind in the vault (%d for 2 "
	    "credentials)", rc);
	rc = sp_cred_remove(a, "gh", NULL, now, &removed, NULL, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && removed == 1 &&
	    sp_cred_get(b, "gh", NULL, &c, &e) == -1 &&
	    e.code == SP_E_NOT_FOUND,
	    "shared: removed on A, it is gone on B");

	sp_egress_policy_init(&p);
	sp_egress_policy_init(&q);
	rc = sp_egress_rules_add(&p.allow, "*.github.com:443, pypi.org", &e);
	rc = rc == 0 ? sp_egress_rules_add(&p.deny, "evil.github.com", &e) : -1;
	rc = rc == 0 ? sp_egress_policy_write(a, SP_EGRESS_TENANT, "acme", &p,
	    &e) : -1;
	rc = rc == 0 ? sp_egress_policy_load(b, "sbsbsbsbsbsb", "acme", NULL,
	    &q, &e) : -1;
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 &&
	    q.source == SP_EGRESS_TENANT && q.allow.n == 2 && q.deny.n == 1 &&
	    !under(a, "egress"),
	    "shared: a tenant's egress policy set on A is the one B loads, and "
	    "it is no file");
	rc = sp_egress_policy_remove(b, SP_EGRESS_TENANT, "acme", &removed, &e);
	rc = rc == 0 ? sp_egress_policy_load(a, "sbsbsbsbsbsb", "acme", NULL,
	    &q, &e) : -1;
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && removed == 1 &&
	    q.source == SP_EGRESS_NONE,
	    "shared: removed on B, A has no policy for it");
	sp_egress_policy_release(&p);
	sp_egress_policy_release(&q);
}

int
main(int argc, char *argv[])
{
	char dir[] = "/tmp/sp-shared-XXXXXX", pgdir[] = "/tmp/sp-pg-XXXXXX";
	char vault_test[512], cmd[128], *self;

	(void)argc;
	if (sodium_init() < 0 || mkdtemp(dir) == NULL || mkdtemp(pgdir) == NULL)
		return 2;
	/* The test secret manager is built beside this program, or beside
	 * its build without the sanitizers (build/tests, build/asan/tests). */
	if ((self = realpath(argv[0], NULL)) == NULL)
		return 2;
	snprintf(vault_test, sizeof vault_test, "%s/vault-test", dirname(self));
	if (access(vault_test, X_OK) == -1)
		snprintf(vault_test, sizeof vault_test, "%s/../../tests/vault-test",
		    self);
	memset(&conf, 0, sizeof conf);
	snprintf(conf.db, sizeof conf.db, "sqlite:%s/space.db", dir);
	test_docs();
	test_rates_audit();
	backend = "postgresql";
	if (system("tests/pg-server there") != 0)
		tap_ok(1, "postgresql: the same tests, and two nodes sharing "
		    "one # skip no PostgreSQL server here (tests/run-all "
		    "installs one)");
	else if (pg_server("start", pgdir, conf.db, sizeof conf.db) == -1)
		tap_ok(0, "postgresql: tests/pg-server starts a server");
	else {
		test_docs();
		test_rates_audit();
		test_cluster_store(dir, vault_test);
		pg_server("stop", pgdir, NULL, 0);
	}
	free(self);
	snprintf(cmd, sizeof cmd, "rm -rf %s %s", dir, pgdir);
	if (system(cmd) != 0)
		return 2;
	return tap_done();
}
