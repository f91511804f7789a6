/*
 * test-state: the transition table for every pair of states; on both
 * backends (SQLite, and a PostgreSQL server of the test's own when this
 * machine has one), the DB's migrations, the compare-and-set under two racing
 * processes, pods claimed by racing processes and by a create's scheduler
 * pass; on SQLite, a wait for another process's write lock and the WAL's
 * bound with and without a reader in the way; on PostgreSQL, a server that
 * goes away and comes back.
 */
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sp.h"
#include "tap.h"
#include "pg.h"

/*
 * The expected matrix, written out by hand from design.md rather than derived
 * from the library's table, so a slip in either shows.  Row = from, column =
 * to, in enum order: creating running paused stopped suspending suspended
 * restoring failed recovering destroyed lost.  A rollback (space-rollback)
 * goes through recovering too, from running, paused or stopped.  A node's
 * lapsed lease makes lost what holds a VM or is on the way to or from one.
 */
static const char *const expect[SP_ST__COUNT] = {
	/*            crpSsuRfvdl */
	[SP_ST_CREATING]   = "01100001011",
	[SP_ST_RUNNING]    = "00111001111",
	[SP_ST_PAUSED]     = "01011001111",
	[SP_ST_STOPPED]    = "01000000111",
	[SP_ST_SUSPENDING] = "01100101011",
	[SP_ST_SUSPENDED]  = "00000010010",
	[SP_ST_RESTORING]  = "01000100011",
	[SP_ST_FAILED]     = "00010000111",
	[SP_ST_RECOVERING] = "01000001011",
	[SP_ST_DESTROYED]  = "00000000000",
	[SP_ST_LOST]       = "01110011010",
};

static void
test_table(void)
{
	char name[96];
	int from, to, bad = 0;

	for (from = 0; from < SP_ST__COUNT; from++)
		for (to = 0; to < SP_ST__COUNT; to++) {
			int want = expect[from][to] == '1';

			if (sp_state_can(from, to) != want) {
				snprintf(name, sizeof name, "%s -> %s should be %s",
				    sp_state_name(from), sp_state_name(to),
				    want ? "legal" : "illegal");
				tap_ok(0, name);
				bad++;
			}
		}
	tap_ok(bad == 0, "all 121 state pairs match design.md");
	tap_ok(!sp_state_can(SP_ST__COUNT, SP_ST_RUNNING) &&
	    !sp_state_can(SP_ST_RUNNING, -1), "out-of-range states are illegal");
	for (from = 0; from < SP_ST__COUNT; from++)
		if (sp_state_parse(sp_state_name(from)) != from)
			bad++;
	tap_ok(bad == 0, "every state name parses back");
	tap_ok(sp_state_parse("runnin") == -1 && sp_state_parse(NULL) == -1,
	    "unknown names do not parse");
}

static struct sp_conf conf;
static const char *backend = "sqlite";	/* in each test's name */
#define SCHEMA_VERSION 17

static struct sp_db *
open_db(void)
{
	struct sp_db *db;
	struct sp_err e;

	if (sp_db_open(&db, &conf, &e) == -1) {
		fprintf(stderr, "open db: %s\n", e.msg);
		exit(2);
	}
	return db;
}

/* A row of the minimal template on node n1, of this id and state. */
static struct sp_sandbox_row
row_of(const char *id, enum sp_state s)
{
	struct sp_sandbox_row r = { 0 };

	snprintf(r.id, sizeof r.id, "%s", id);
	r.state = s;
	snprintf(r.template, sizeof r.template, "minimal@abcd");
	snprintf(r.node, sizeof r.node, "n1");
	r.created = time(NULL);
	r.memory_mib = 256;
	r.vcpus = 1;
	return r;
}

static void
insert(struct sp_db *db, const char *id, enum sp_state s)
{
	struct sp_sandbox_row r = row_of(id, s);
	struct sp_err e;

	if (sp_db_sandbox_insert(db, &r, &e) == -1) {
		fprintf(stderr, "insert: %s\n", e.msg);
		exit(2);
	}
}

static void
test_db(void)
{
	struct sp_sandbox_row r;
	struct sp_db *db;
	struct sp_err e;
	int from, to, bad = 0;
	char id[SP_ID_LEN + 1];

	db = open_db();
	tap_okf("", "", sp_db_schema_version(db) == SCHEMA_VERSION &&
	    strcmp(sp_db_backend(db), backend) == 0,
	    "%s: fresh DB migrated to version %d", backend, SCHEMA_VERSION);
	sp_db_close(db);
	db = open_db();
	tap_okf("", "", sp_db_schema_version(db) == SCHEMA_VERSION,
	    "%s: reopening keeps the version", backend);

	insert(db, "aaaaaaaaaaaa", SP_ST_RUNNING);
	tap_okf(sp_code_name(e.code), e.msg, sp_db_sandbox_insert(db,
	    &(struct sp_sandbox_row){ .id = "aaaaaaaaaaaa", .template = "t",
	    .node = "n" }, &e) == -1 && e.code == SP_E_EXISTS &&
	    strstr(e.msg, "aaaaaaaaaaaa exists") != NULL,
	    "%s: duplicate id refused", backend);
	tap_okf(sp_code_name(e.code), e.msg, sp_db_sandbox_get(db,
	    "bbbbbbbbbbbb", &r, &e) == -1 && e.code == SP_E_NOT_FOUND,
	    "%s: unknown id is not-found", backend);
	tap_okf(sp_code_name(e.code), e.msg, sp_db_transition(db,
	    "bbbbbbbbbbbb", SP_ST_PAUSED, -1, NULL, &e) == -1 &&
	    e.code == SP_E_NOT_FOUND, "%s: transition of unknown id is not-found",
	    backend);

	/* Every pair through the DB: legal ones move, illegal ones change nothing. */
	for (from = 0; from < SP_ST__COUNT; from++)
		for (to = 0; to < SP_ST__COUNT; to++) {
			int64_t gen;
			int rc;

			sp_id_new(id, &e);
			insert(db, id, from);
			sp_db_sandbox_get(db, id, &r, &e);
			gen = r.gen;
			sp_db_row_release(&r);
			rc = sp_db_transition(db, id, to, -1, NULL, &e);
			sp_db_sandbox_get(db, id, &r, &e);
			if (sp_state_can(from, to)) {
				if (rc != 0 || r.state != (enum sp_state)to ||
				    r.gen != gen + 1)
					bad++;
			} else if (rc != -1 || e.code != SP_E_BAD_STATE ||
			    r.state != (enum sp_state)from || r.gen != gen)
				bad++;
			sp_db_row_release(&r);
			sp_db_sandbox_delete(db, id, &e);
		}
	tap_okf("", "", bad == 0, "%s: every pair through the DB: legal moves, "
	    "illegal is bad-state and changes nothing", backend);

	sp_db_sandbox_get(db, "aaaaaaaaaaaa", &r, &e);
	tap_okf("", "", sp_db_transition(db, "aaaaaaaaaaaa", SP_ST_PAUSED,
	    r.gen + 5, NULL, &e) == -1 && e.code == SP_E_BAD_STATE,
	    "%s: a stale generation loses the compare-and-set", backend);
	tap_okf(sp_code_name(e.code), e.msg, sp_db_transition(db,
	    "aaaaaaaaaaaa", SP_ST_PAUSED, r.gen, NULL, &e) == 0,
	    "%s: the current generation wins", backend);
	sp_db_row_release(&r);

	/* Templates: by name the newest, by a unique digest prefix, and an
	 * ambiguous prefix refused; a second import of one digest is kept. */
	{
		struct sp_template_row t = { .name = "tpl", .created = 100 }, g;

		memset(t.digest, 'a', 64);
		sp_db_template_insert(db, &t, &e);
		memset(t.digest, 'b', 64);
		t.digest[3] = 'c';
		t.created = 200;
		sp_db_template_insert(db, &t, &e);
		memset(t.digest + 4, 'b', 60);
		t.digest[3] = 'd';
		sp_db_template_insert(db, &t, &e);
		t.created = 300;
		tap_okf(sp_code_name(e.code), e.msg,
		    sp_db_template_insert(db, &t, &e) == 0 &&
		    sp_db_template_get(db, "tpl", &g, &e) == 0 &&
		    g.digest[3] == 'd' && g.created == 200,
		    "%s: a template by name is its newest; a second import "
		    "keeps the first row", backend);
		tap_okf(sp_code_name(e.code), e.msg,
		    sp_db_template_get(db, "tpl@aaaa", &g, &e) == 0 &&
		    g.digest[0] == 'a' && sp_db_template_get(db, "tpl@bbbc", &g,
		    &e) == 0 && g.digest[3] == 'c',
		    "%s: a template by a unique digest prefix", backend);
		tap_okf(sp_code_name(e.code), e.msg,
		    sp_db_template_get(db, "tpl@bbb", &g, &e) == -1 &&
		    e.code == SP_E_BAD_INPUT && sp_db_template_get(db, "nope",
		    &g, &e) == -1 && e.code == SP_E_NOT_FOUND,
		    "%s: an ambiguous prefix is bad-input, an unknown name "
		    "not-found", backend);
	}
	sp_db_close(db);
}

/*
 * Two processes take the same transition at the same instant (released by one
 * byte on a pipe): exactly one may win, the other must see bad-state.
 */
static void
test_race(void)
{
	int round, wins_ok = 0, rounds = 40;

	for (round = 0; round < rounds; round++) {
		char id[SP_ID_LEN + 1];
		struct sp_db *db;
		struct sp_err e;
		int go[2], res[2], k, wins = 0, lost = 0;
		pid_t kids[2];

		sp_id_new(id, &e);
		db = open_db();
		insert(db, id, SP_ST_RUNNING);
		sp_db_close(db);
		if (pipe(go) == -1 || pipe(res) == -1)
			exit(2);
		for (k = 0; k < 2; k++) {
			if ((kids[k] = fork()) == 0) {
				char b, out;

				close(go[1]);
				db = open_db();
				if (read(go[0], &b, 1) != 1)
					_exit(2);
				if (sp_db_transition(db, id, SP_ST_PAUSED, -1, NULL, &e) == 0)
					out = 'w';
				else
					out = e.code == SP_E_BAD_STATE ? 'l' : 'x';
				sp_db_close(db);
				if (write(res[1], &out, 1) != 1)
					_exit(2);
				_exit(0);
			}
		}
		close(go[0]);
		close(res[1]);
		if (write(go[1], "gg", 2) != 2)
			exit(2);
		close(go[1]);
		for (k = 0; k < 2; k++) {
			char out = '?';

			if (read(res[0], &out, 1) != 1)
				out = '?';
			wins += out == 'w';
			lost += out == 'l';
		}
		close(res[0]);
		for (k = 0; k < 2; k++)
			waitpid(kids[k], NULL, 0);
		if (wins == 1 && lost == 1)
			wins_ok++;
	}
	tap_okf("", "", wins_ok == rounds, "%s: racing pause: exactly one winner, "
	    "one bad-state, every round (%d of %d)", backend, wins_ok, rounds);
}

/*
 * Four processes claim pods from one pool of 20 at once, each until it
 * finds none: every pod is claimed once, by one of them.
 */
static void
test_claim_race(void)
{
	enum { PODS = 20, KIDS = 4 };
	char ids[PODS][SP_ID_LEN + 1], got[PODS * 2][SP_ID_LEN + 1];
	struct sp_db *db;
	struct sp_err e;
	int res[2], i, j, k, n = 0, dup = 0, known = 0;
	pid_t kids[KIDS];

	db = open_db();
	for (i = 0; i < PODS; i++) {
		sp_id_new(ids[i], &e);
		insert(db, ids[i], SP_ST_PAUSED);
		if (sp_db_pod_mark(db, ids[i], "race", &e) == -1)
			exit(2);
	}
	sp_db_close(db);
	if (pipe(res) == -1)
		exit(2);
	for (k = 0; k < KIDS; k++)
		if ((kids[k] = fork()) == 0) {
			char id[SP_ID_LEN + 1], line[SP_ID_LEN + 1];

			db = open_db();
			while (sp_db_pod_claim(db, "n1", "race", "minimal@abcd",
			    256, 1, NULL, NULL, NULL, NULL, 1, id, &e) == 1) {
				memcpy(line, id, SP_ID_LEN);
				line[SP_ID_LEN] = '\n';
				if (write(res[1], line, sizeof line) != sizeof line)
					_exit(2);
			}
			_exit(0);
		}
	close(res[1]);
	while (n < PODS * 2 && read(res[0], got[n], SP_ID_LEN + 1) ==
	    SP_ID_LEN + 1) {
		got[n][SP_ID_LEN] = '\0';
		n++;
	}
	close(res[0]);
	for (k = 0; k < KIDS; k++)
		waitpid(kids[k], NULL, 0);
	for (i = 0; i < n; i++) {
		for (j = 0; j < i; j++)
			dup += strcmp(got[i], got[j]) == 0;
		for (j = 0; j < PODS; j++)
			known += strcmp(got[i], ids[j]) == 0;
	}
	tap_okf("", "", n == PODS && dup == 0 && known == PODS,
	    "%s: %d processes racing for %d pods claim each once (%d claims, "
	    "%d twice)", backend, KIDS, PODS, n, dup);

	/* A pod is a VM on its node: another node neither claims nor counts
	 * it. */
	{
		char id[SP_ID_LEN + 1], got1[SP_ID_LEN + 1] = "";
		int c2, c1;

		db = open_db();
		sp_id_new(id, &e);
		insert(db, id, SP_ST_PAUSED);
		sp_db_pod_mark(db, id, "race", &e);
		c2 = sp_db_pod_claim(db, "n2", "race", "minimal@abcd", 256, 1,
		    NULL, NULL, NULL, NULL, 1, got1, &e);
		c1 = sp_db_pod_claim(db, "n1", "race", "minimal@abcd", 256, 1,
		    NULL, NULL, NULL, NULL, 1, got1, &e);
		tap_okf(sp_code_name(e.code), e.msg, c2 == 0 && c1 == 1 &&
		    strcmp(got1, id) == 0, "%s: a pod of node n1 is not "
		    "claimed by n2, and is by n1", backend);
		sp_db_close(db);
	}
}

/* A row as a create writes it, with handles and a tenant's label. */
static int
insert_handled(struct sp_db *db, const char *id, const char *tenant,
    const char *name, const char *request_id, struct sp_err *e)
{
	struct sp_sandbox_row r = row_of(id, SP_ST_CREATING);
	char labels[128];

	snprintf(labels, sizeof labels, tenant ? "{\"tenant\":\"%s\"}" : "{}",
	    tenant);
	r.labels = labels;
	snprintf(r.name, sizeof r.name, "%s", name ? name : "");
	snprintf(r.request_id, sizeof r.request_id, "%s", request_id ?
	    request_id : "");
	return sp_db_sandbox_insert(db, &r, e);
}

/* Names and request ids: unique in a tenant, found by the handle, and a
 * claim that would take a handle another has leaves the pod a pod. */
static void
test_handles(void)
{
	char a[SP_ID_LEN + 1], b[SP_ID_LEN + 1], c[SP_ID_LEN + 1];
	char pod[SP_ID_LEN + 1], got[SP_ID_LEN + 1] = "", found[SP_ID_LEN + 1];
	struct sp_sandbox_row r;
	struct sp_db *db = open_db();
	struct sp_err e;
	int rc;

	sp_id_new(a, &e);
	sp_id_new(b, &e);
	sp_id_new(c, &e);
	rc = insert_handled(db, a, NULL, "web", "key-1", &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 &&
	    sp_db_sandbox_get(db, a, &r, &e) == 0 && strcmp(r.name, "web") == 0 &&
	    strcmp(r.request_id, "key-1") == 0, "%s: a row keeps its name and "
	    "request id", backend);
	sp_db_row_release(&r);
	rc = insert_handled(db, b, NULL, "web", NULL, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == -1 && e.code == SP_E_EXISTS &&
	    strstr(e.msg, "named 'web'") != NULL && sp_db_sandbox_get(db, b, &r,
	    &e) == -1, "%s: a second of the name in a tenant is refused and not "
	    "written", backend);
	rc = insert_handled(db, b, NULL, NULL, "key-1", &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == -1 && e.code == SP_E_EXISTS,
	    "%s: a second of the request id in a tenant is refused", backend);
	rc = insert_handled(db, b, "acme", "web", "key-1", &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && insert_handled(db, c,
	    NULL, NULL, NULL, &e) == 0, "%s: another tenant may use both; "
	    "rows without handles are many", backend);
	tap_okf("", "", sp_db_sandbox_by_handle(db, "acme", 0, "web", found,
	    &e) == 0 && strcmp(found, b) == 0 && sp_db_sandbox_by_handle(db, "",
	    0, "web", found, &e) == 0 && strcmp(found, a) == 0 &&
	    sp_db_sandbox_by_handle(db, "", 1, "key-1", found, &e) == 0 &&
	    strcmp(found, a) == 0, "%s: each tenant's name and key find its own",
	    backend);
	rc = sp_db_sandbox_by_handle(db, NULL, 0, "web", found, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == -1 && e.code ==
	    SP_E_BAD_INPUT, "%s: a name in two tenants is ambiguous to one "
	    "who asks of any", backend);
	rc = sp_db_sandbox_by_handle(db, "beta", 0, "web", found, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == -1 && e.code ==
	    SP_E_NOT_FOUND, "%s: another tenant does not find it", backend);
	/* A pod claimed with a name that is taken: refused, still a pod. */
	sp_id_new(pod, &e);
	insert(db, pod, SP_ST_PAUSED);
	sp_db_pod_mark(db, pod, "handles", &e);
	rc = sp_db_pod_claim(db, "n1", "handles", "minimal@abcd", 256, 1, NULL,
	    NULL, "web", NULL, 1, got, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == -1 && e.code == SP_E_EXISTS &&
	    sp_db_sandbox_get(db, pod, &r, &e) == 0 && r.pod &&
	    r.state == SP_ST_PAUSED && r.name[0] == '\0', "%s: a claim with a "
	    "name taken fails and leaves the pod waiting", backend);
	sp_db_row_release(&r);
	rc = sp_db_pod_claim(db, "n1", "handles", "minimal@abcd", 256, 1, NULL,
	    NULL, "api", "key-2", 1, got, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 1 && strcmp(got, pod) == 0 &&
	    sp_db_sandbox_by_handle(db, "", 0, "api", found, &e) == 0 &&
	    strcmp(found, pod) == 0 && sp_db_sandbox_by_handle(db, "", 1,
	    "key-2", found, &e) == 0, "%s: a claim gives the pod its handles",
	    backend);
	/* Handles move (the scheduler's claim for a placed row). */
	tap_okf(sp_code_name(e.code), e.msg, sp_db_sandbox_handles_set(db, pod,
	    NULL, NULL, &e) == 0 && sp_db_sandbox_handles_set(db, c, "api",
	    "key-2", &e) == 0 && sp_db_sandbox_by_handle(db, "", 0, "api", found,
	    &e) == 0 && strcmp(found, c) == 0, "%s: handles cleared on one row "
	    "may be set on another", backend);
	/* A removed sandbox's handles are free. */
	rc = sp_db_sandbox_delete(db, a, &e) == 0 ? insert_handled(db, a, NULL,
	    "web", "key-1", &e) : -1;
	tap_okf(sp_code_name(e.code), e.msg, rc == 0, "%s: a removed row's "
	    "name and request id are free again", backend);
	sp_db_sandbox_delete(db, a, &e);
	sp_db_sandbox_delete(db, b, &e);
	sp_db_sandbox_delete(db, c, &e);
	sp_db_sandbox_delete(db, pod, &e);
	sp_db_close(db);
}

/* What a scheduler pass placed, one id per line, to a pipe. */
static int
placed_line(json_t *o, void *arg)
{
	const char *id = json_string_value(json_object_get(o, "id"));
	char line[SP_ID_LEN + 1];
	int *fd = arg;

	if (json_is_true(json_object_get(o, "ok")) && id != NULL &&
	    strlen(id) == SP_ID_LEN) {
		memcpy(line, id, SP_ID_LEN);
		line[SP_ID_LEN] = '\n';
		if (write(*fd, line, sizeof line) != sizeof line)
			_exit(2);
	}
	json_decref(o);
	return 0;
}

/*
 * Two schedulers race over 1,000 unplaced sandboxes on three nodes, each
 * pass taking up to 100: every one is placed once, by one of them, on a
 * node that is alive and ready; none on the draining node.
 */
/* Registers node name with a lease of 600 s and this much room. */
static void
node_up(struct sp_db *db, const char *name, int memory_mib, int vcpus)
{
	struct sp_node_row nr = { .memory_mib = memory_mib, .vcpus = vcpus };
	struct sp_err e;

	snprintf(nr.name, sizeof nr.name, "%s", name);
	snprintf(nr.root, sizeof nr.root, "/nowhere");
	snprintf(nr.virt, sizeof nr.virt, "qemu");
	if (sp_db_node_beat(db, &nr, 600, &e) == -1) {
		fprintf(stderr, "node %s: %s\n", name, e.msg);
		exit(2);
	}
}

static void
test_schedule_race(void)
{
	enum { ROWS = 1000, KIDS = 2 };
	static char got[ROWS * 2][SP_ID_LEN + 1];
	struct sp_sched_opts so = { 100, 1000.0, 1.0, 60, 1, NULL, 0 };
	struct sp_sandbox_row r = { 0 };
	char node[32];
	int64_t t0, ms;
	struct sp_db *db;
	struct sp_err e;
	int res[2], i, k, n = 0, dup = 0, bad = 0, placed;
	pid_t kids[KIDS];
	char name[160];

	db = open_db();
	/* Three nodes: two ready, one draining. */
	for (i = 0; i < 3; i++) {
		snprintf(node, sizeof node, "sched-%d", i);
		node_up(db, node, 1 << 20, 64);
	}
	sp_db_node_set_state(db, "sched-2", "draining", &e);
	snprintf(r.template, sizeof r.template, "minimal@abcd");
	snprintf(r.want, sizeof r.want, "running");
	r.state = SP_ST_CREATING;
	r.memory_mib = 256;
	r.vcpus = 1;
	for (i = 0; i < ROWS; i++) {
		sp_id_new(r.id, &e);
		if (sp_db_sandbox_insert(db, &r, &e) == -1)
			exit(2);
	}
	sp_db_close(db);
	if (pipe(res) == -1)
		exit(2);
	t0 = sp_clock_ms();
	for (k = 0; k < KIDS; k++)
		if ((kids[k] = fork()) == 0) {
			struct sp_ctx x = { .db = open_db() };

			snprintf(x.conf.node, sizeof x.conf.node, "sched-%d", k);
			do {
				if (sp_schedule_pass(&x, &so, placed_line, &res[1],
				    &placed, &e) == -1)
					_exit(3);
			} while (placed > 0);
			_exit(0);
		}
	close(res[1]);
	while (n < ROWS * 2 && read(res[0], got[n], SP_ID_LEN + 1) ==
	    SP_ID_LEN + 1) {
		got[n][SP_ID_LEN] = '\0';
		n++;
	}
	close(res[0]);
	for (k = 0; k < KIDS; k++) {
		int st;

		waitpid(kids[k], &st, 0);
		bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	ms = sp_clock_ms() - t0;
	/* Sorted, a twice-placed id sits next to itself. */
	qsort(got, (size_t)n, sizeof got[0], (int (*)(const void *,
	    const void *))strcmp);
	for (i = 1; i < n; i++)
		dup += strcmp(got[i], got[i - 1]) == 0;
	db = open_db();
	for (i = 0; i < n; i++) {
		struct sp_sandbox_row g;

		if (sp_db_sandbox_get(db, got[i], &g, &e) == -1 ||
		    (strcmp(g.node, "sched-0") != 0 &&
		    strcmp(g.node, "sched-1") != 0) || g.placed == NULL)
			bad++;
		else
			sp_db_row_release(&g);
	}
	sp_db_close(db);
	snprintf(name, sizeof name, "%s: two schedulers racing over %d unplaced "
	    "sandboxes place each once, on a ready node (%d placed, %d twice; "
	    "%lld rows/s)", backend, ROWS, n, dup, ms > 0 ?
	    (long long)ROWS * 1000 / ms : 0);
	tap_okf("", "", n == ROWS && dup == 0 && bad == 0, "%s", name);
}

/*
 * Two schedulers racing to fill the one node that takes sandboxes: passes
 * take turns, so together they place on it no more than it has room for.
 */
static void
test_schedule_fill(void)
{
	enum { ROWS = 40, ROOM = 10, KIDS = 2 };
	struct sp_sched_opts so = { 20, 1000.0, 1.0, 60, 1, NULL, 0 };
	struct sp_sandbox_row r = { 0 }, g;
	char ids[ROWS][SP_ID_LEN + 1];
	struct sp_db *db;
	struct sp_err e;
	pid_t kids[KIDS];
	int i, k, on = 0, bad = 0, placed;

	db = open_db();
	for (i = 0; i < 4; i++) {
		static const char *const others[] = { "sched-0", "sched-1",
		    "claim-0", "claim-1" };

		sp_db_node_set_state(db, others[i], "draining", &e);
	}
	node_up(db, "fill-0", ROOM * 256, 64);
	snprintf(r.template, sizeof r.template, "fill@abcd");
	snprintf(r.want, sizeof r.want, "running");
	r.state = SP_ST_CREATING;
	r.memory_mib = 256;
	r.vcpus = 1;
	for (i = 0; i < ROWS; i++) {
		sp_id_new(r.id, &e);
		memcpy(ids[i], r.id, sizeof ids[i]);
		if (sp_db_sandbox_insert(db, &r, &e) == -1)
			exit(2);
	}
	sp_db_close(db);
	for (k = 0; k < KIDS; k++)
		if ((kids[k] = fork()) == 0) {
			struct sp_ctx x = { .db = open_db() };
			int rounds = 0;

			do {
				if (sp_schedule_pass(&x, &so, NULL, NULL, &placed,
				    &e) == -1)
					_exit(3);
			} while (placed > 0 || ++rounds < 3);
			_exit(0);
		}
	for (k = 0; k < KIDS; k++) {
		int st;

		waitpid(kids[k], &st, 0);
		bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	db = open_db();
	for (i = 0; i < ROWS; i++)
		if (sp_db_sandbox_get(db, ids[i], &g, &e) == 0) {
			on += strcmp(g.node, "fill-0") == 0;
			sp_db_row_release(&g);
		}
	sp_db_close(db);
	tap_okf("", "", bad == 0 && on == ROOM, "%s: two schedulers racing to "
	    "fill a node with room for %d place %d there", backend, ROOM, on);
}

/*
 * A create's own pass claims a pod waiting on the node it places a row on:
 * the pod takes the row's labels, environment and wish, the row goes, and
 * the caller's id becomes the pod's.  A row of another size takes none.
 */
static void
test_schedule_claim(void)
{
	struct sp_sched_opts so = SP_SCHED_DEFAULTS;
	struct sp_sandbox_row r = { 0 }, g;
	char ids[2][SP_ID_LEN + 1], x0[SP_ID_LEN + 1], pod[SP_ID_LEN + 1];
	struct sp_ctx x = { 0 };
	struct sp_err e;
	int i, placed, ok;

	x.db = open_db();
	node_up(x.db, "claim-0", 1 << 20, 64);
	node_up(x.db, "claim-1", 1 << 20, 64);
	snprintf(r.template, sizeof r.template, "claimed@abcd");
	r.memory_mib = 256;
	r.vcpus = 1;
	sp_id_new(pod, &e);
	snprintf(r.id, sizeof r.id, "%s", pod);
	snprintf(r.node, sizeof r.node, "claim-1");
	r.state = SP_ST_PAUSED;
	if (sp_db_sandbox_insert(x.db, &r, &e) == -1 ||
	    sp_db_pod_mark(x.db, pod, "claimed", &e) == -1)
		exit(2);
	r.node[0] = '\0';
	r.state = SP_ST_CREATING;
	snprintf(r.want, sizeof r.want, "running");
	r.labels = "{\"who\":\"far\"}";
	r.env = "[\"G=h\"]";
	for (i = 0; i < 2; i++) {
		sp_id_new(ids[i], &e);
		snprintf(r.id, sizeof r.id, "%s", ids[i]);
		r.memory_mib = i == 0 ? 256 : 512;
		if (sp_db_sandbox_insert(x.db, &r, &e) == -1)
			exit(2);
	}
	snprintf(x0, sizeof x0, "%s", ids[0]);
	so.claim_ids = ids;
	so.nclaim = 2;
	ok = sp_schedule_pass(&x, &so, NULL, NULL, &placed, &e) == 0 &&
	    placed == 2 && strcmp(ids[0], pod) == 0 &&
	    sp_db_sandbox_get(x.db, pod, &g, &e) == 0;
	if (ok) {
		ok = g.state == SP_ST_CREATING && !g.pod &&
		    strcmp(g.want, "running") == 0 && g.placed != NULL &&
		    strstr(g.placed, "\"claimed\":true") != NULL &&
		    strcmp(g.node, "claim-1") == 0 && g.labels != NULL &&
		    strstr(g.labels, "far") != NULL && g.env != NULL &&
		    strstr(g.env, "G=h") != NULL;
		sp_db_row_release(&g);
	}
	tap_okf(sp_code_name(e.code), e.msg, ok && sp_db_sandbox_get(x.db, x0,
	    &g, &e) == -1 && e.code == SP_E_NOT_FOUND, "%s: a create's pass "
	    "claims the pod waiting where it places the row: the pod takes its "
	    "labels, environment and wish, and its id", backend);
	ok = sp_db_sandbox_get(x.db, ids[1], &g, &e) == 0;
	if (ok) {
		ok = g.node[0] != '\0' && g.placed != NULL &&
		    strstr(g.placed, "claimed") == NULL;
		sp_db_row_release(&g);
	}
	tap_okf(sp_code_name(e.code), e.msg, ok, "%s: a row of another size "
	    "takes no pod, and is placed as any other", backend);
	sp_db_close(x.db);
}

/*
 * Another process holds the write lock for 300 ms: a transition waits for
 * it and then goes through (the busy handler must not give up early).  The
 * holder writes a byte just before its COMMIT, so the byte is there once
 * the transition has the lock.
 */
static void
test_busy_wait(void)
{
	char id[SP_ID_LEN + 1], b;
	int held[2], done[2], ok, got;
	struct sp_db *db;
	struct sp_err e;
	sqlite3 *h;
	pid_t kid;

	sp_id_new(id, &e);
	db = open_db();
	insert(db, id, SP_ST_RUNNING);
	if (pipe(held) == -1 || pipe(done) == -1)
		exit(2);
	if ((kid = fork()) == 0) {
		if (sqlite3_open(conf.db + 7, &h) != SQLITE_OK ||
		    sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL) !=
		    SQLITE_OK || write(held[1], "h", 1) != 1)
			_exit(2);
		usleep(300000);
		if (write(done[1], "d", 1) != 1)
			_exit(2);
		sqlite3_exec(h, "COMMIT", NULL, NULL, NULL);
		sqlite3_close(h);
		_exit(0);
	}
	close(held[1]);
	close(done[1]);
	if (read(held[0], &b, 1) != 1)
		exit(2);
	ok = sp_db_transition(db, id, SP_ST_PAUSED, -1, NULL, &e) == 0;
	fcntl(done[0], F_SETFL, O_NONBLOCK);
	got = read(done[0], &b, 1) == 1;
	tap_ok(ok && got, "a transition waits out another process's write lock "
	    "(held 300 ms), then goes through");
	waitpid(kid, NULL, 0);
	close(held[0]);
	close(done[0]);
	sp_db_close(db);
}

/* Rows a reader that is not one of ours sees, -1 when it cannot read. */
static int
count_rows(void)
{
	sqlite3_stmt *q;
	sqlite3 *h;
	int rows = -1;

	if (sqlite3_open(conf.db + 7, &h) != SQLITE_OK)
		exit(2);
	if (sqlite3_prepare_v2(h, "SELECT count(*) FROM sandboxes", -1, &q,
	    NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
		rows = sqlite3_column_int(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(h);
	return rows;
}

/* Closes that wrote the DB file (a checkpoint: the WAL's pages copied into
 * it), and closes that found the WAL not empty, over the last
 * commands_write. */
static int close_wrote, close_kept;

/*
 * n commands that each open the DB, insert a row and close it (with later,
 * each calls sp_db_checkpoint_later first).  Returns the WAL's largest size
 * after any of them; *last is its size after the last.  Whether a commit
 * empties the WAL (past its bound) depends on the pages the random ids
 * take; a close must never.
 */
static off_t
commands_write(int n, int later, off_t *last)
{
	char id[SP_ID_LEN + 1], wal[sizeof conf.db + 8];
	struct sp_db *db;
	struct sp_err e;
	struct stat st, before, file0, file1;
	off_t most = 0;
	int i;

	if (snprintf(wal, sizeof wal, "%s-wal", conf.db + 7) >= (int)sizeof wal)
		exit(2);
	close_wrote = close_kept = 0;
	for (i = 0; i < n; i++) {
		sp_id_new(id, &e);
		db = open_db();
		if (later)
			sp_db_checkpoint_later(db);
		insert(db, id, SP_ST_RUNNING);
		if (stat(wal, &before) == -1 || stat(conf.db + 7, &file0) == -1)
			exit(2);
		sp_db_close(db);
		if (stat(wal, &st) == -1 || stat(conf.db + 7, &file1) == -1)
			exit(2);
		close_wrote += file1.st_mtim.tv_sec != file0.st_mtim.tv_sec ||
		    file1.st_mtim.tv_nsec != file0.st_mtim.tv_nsec ||
		    file1.st_size != file0.st_size;
		close_kept += before.st_size > 0 && st.st_size == before.st_size;
		if (st.st_size > most)
			most = st.st_size;
	}
	*last = st.st_size;
	return most;
}

/*
 * Commands open the DB, write a little and close it; the last to close
 * does not checkpoint the WAL (that is a commit's work past 64 pages).
 * Over 300 such commands the WAL stays under 80 pages, the last close
 * leaves it to the next command, and every row is there for a reader that
 * is not one of ours.
 */
static void
test_wal_bound(void)
{
	char name[192];
	int before = count_rows();
	off_t most, last;

	most = commands_write(300, 0, &last);
	snprintf(name, sizeof name, "300 commands that each write: the WAL "
	    "stays under 80 pages (at most %lld bytes)", (long long)most);
	tap_ok(most <= 80 * (4096 + 24) + 32, name);
	snprintf(name, sizeof name, "a close leaves the WAL to the next command "
	    "(no checkpoint on the way out: %d of 300 closes wrote the DB file, "
	    "%d left the WAL as it was)", close_wrote, close_kept);
	tap_ok(close_wrote == 0 && close_kept > 200 && last >= 0, name);
	tap_ok(before >= 0 && count_rows() == before + 300,
	    "another reader sees all 300 new rows");
}

/*
 * A reader that holds its snapshot (a slow command) keeps the WAL from
 * being emptied: commits go on without waiting for it (the busy wait
 * would be 10 s each), and once it is gone the next commit empties it.
 */
static void
test_wal_reader(void)
{
	char name[160];
	int64_t t0, slowest = 0;
	sqlite3 *h;
	off_t most = 0, size, last;
	int i;

	if (sqlite3_open(conf.db + 7, &h) != SQLITE_OK ||
	    sqlite3_exec(h, "BEGIN; SELECT count(*) FROM sandboxes", NULL, NULL,
	    NULL) != SQLITE_OK)
		exit(2);
	for (i = 0; i < 100; i++) {
		t0 = sp_clock_ms();
		size = commands_write(1, 0, &last);
		if (sp_clock_ms() - t0 > slowest)
			slowest = sp_clock_ms() - t0;
		if (size > most)
			most = size;
	}
	snprintf(name, sizeof name, "with a reader holding its snapshot, 100 "
	    "commands do not wait for it (slowest %lld ms; the WAL grew to "
	    "%lld bytes)", (long long)slowest, (long long)most);
	tap_ok(slowest < 3000 && most > 80 * (4096 + 24), name);
	sqlite3_exec(h, "COMMIT", NULL, NULL, NULL);
	sqlite3_close(h);
	commands_write(1, 0, &last);
	tap_ok(last <= 80 * (4096 + 24),
	    "once the reader is gone, the next commit empties the WAL");
}

/*
 * A command on a caller's critical path (sp_db_checkpoint_later) leaves
 * the checkpoint to others: over 300 such commands the WAL grows past the
 * ordinary bound but not past 512 pages, and the next ordinary command's
 * commit empties it.
 */
static void
test_wal_later(void)
{
	char name[160];
	off_t most, last;

	most = commands_write(300, 1, &last);
	snprintf(name, sizeof name, "300 commands that checkpoint later: "
	    "the WAL grows past 80 pages, not past 520 (at most %lld bytes)",
	    (long long)most);
	tap_ok(most > 80 * (4096 + 24) + 32 && most <= 520 * (4096 + 24) + 32,
	    name);
	commands_write(1, 0, &last);
	tap_ok(last <= 80 * (4096 + 24),
	    "the next ordinary command's commit empties the WAL");
}

/*
 * The server stops under an open handle, and a new one: every call is a
 * temporary db error (exit 111), nothing is written half; once it is back
 * the same handle goes on.  Then a crash (as a power cut would) loses no
 * committed row.
 */
static void
test_pg_gone(const char *dir)
{
	struct sp_sandbox_row r;
	char id[SP_ID_LEN + 1];
	struct sp_db *db, *db2;
	struct sp_err e;
	int got;

	sp_id_new(id, &e);
	db = open_db();
	insert(db, id, SP_ST_RUNNING);
	if (pg_server("stop", dir, NULL, 0) == -1)
		exit(2);
	got = sp_db_sandbox_get(db, id, &r, &e);
	tap_okf(sp_code_name(e.code), e.msg, got == -1 && e.code == SP_E_DB &&
	    e.temp && sp_err_exit(&e) == 111,
	    "postgresql: a read with the server gone is db, exit 111");
	got = sp_db_transition(db, id, SP_ST_PAUSED, -1, NULL, &e);
	tap_okf(sp_code_name(e.code), e.msg, got == -1 && e.code == SP_E_DB &&
	    e.temp, "postgresql: so is a transition");
	got = sp_db_open(&db2, &conf, &e);
	tap_okf(sp_code_name(e.code), e.msg, got == -1 && e.code == SP_E_DB &&
	    e.temp && strstr(e.msg, "PostgreSQL") != NULL,
	    "postgresql: so is an open, and it says what it could not reach");
	if (pg_server("restart", dir, NULL, 0) == -1)
		exit(2);
	/* The first statement after finds the connection gone (111). */
	if (sp_db_sandbox_get(db, id, &r, &e) == 0)
		sp_db_row_release(&r);
	got = sp_db_sandbox_get(db, id, &r, &e);
	tap_okf(sp_code_name(e.code), e.msg, got == 0 &&
	    r.state == SP_ST_RUNNING && r.gen == 0,
	    "postgresql: once it is back, the same handle reads the row, "
	    "unchanged");
	if (got == 0)
		sp_db_row_release(&r);
	got = sp_db_transition(db, id, SP_ST_PAUSED, -1, NULL, &e);
	if (pg_server("crash", dir, NULL, 0) == -1 ||
	    pg_server("restart", dir, NULL, 0) == -1)
		exit(2);
	sp_db_close(db);
	db = open_db();
	got = got == 0 ? sp_db_sandbox_get(db, id, &r, &e) : -1;
	tap_okf(sp_code_name(e.code), e.msg, got == 0 &&
	    r.state == SP_ST_PAUSED && r.gen == 1,
	    "postgresql: a committed transition outlives a crash of the server");
	if (got == 0)
		sp_db_row_release(&r);

	/* A listener whose server went away listens again once connected
	 * again: another handle's change still wakes it. */
	if (sp_db_listen(db, &e) == -1 || pg_server("stop", dir, NULL, 0) == -1 ||
	    pg_server("restart", dir, NULL, 0) == -1)
		exit(2);
	if (sp_db_sandbox_get(db, id, &r, &e) == 0)
		sp_db_row_release(&r);
	if (sp_db_sandbox_get(db, id, &r, &e) == 0)
		sp_db_row_release(&r);
	db2 = open_db();
	got = sp_db_transition(db2, id, SP_ST_RUNNING, -1, NULL, &e) == 0 ?
	    sp_db_wait(db, 5000, &e) : -1;
	sp_db_close(db2);
	tap_okf(sp_code_name(e.code), e.msg, got == 1,
	    "postgresql: a listener connected again is woken by a change");
	sp_db_close(db);
}

struct evs {
	int n;
	int64_t seq[8];
	json_t *ev[8];
};

static int
ev_take(int64_t seq, json_t *ev, void *arg)
{
	struct evs *a = arg;

	if (a->n == 8) {
		json_decref(ev);
		return 1;
	}
	a->seq[a->n] = seq;
	a->ev[a->n++] = ev;
	return 0;
}

static void
evs_free(struct evs *a)
{
	while (a->n > 0)
		json_decref(a->ev[--a->n]);
}

/* The event log (sp_event.c): what sp_db writes of states, what is added,
 * read back in order and by sandbox, and retention keeping the newest. */
static void
test_events(void)
{
	struct sp_event ev = { .action = "exec", .sandbox = "eeeeeeeeeeee",
	    .error = "timed-out", .ms = 12 };
	struct sp_event_query w = { 0 };
	struct evs a = { 0 };
	struct sp_db *db = open_db();
	struct sp_err e;
	int64_t base, last, gone;

	tap_okf(sp_code_name(e.code), e.msg, sp_db_event_last(db, &base, &e) ==
	    0, "%s: the newest event's number", backend);
	insert(db, "eeeeeeeeeeee", SP_ST_RUNNING);
	sp_db_transition(db, "eeeeeeeeeeee", SP_ST_PAUSED, -1, NULL, &e);
	ev.detail = json_pack("{s:i}", "exit", 3);
	tap_okf(sp_code_name(e.code), e.msg, sp_event_add(db, &ev, &e) == 0,
	    "%s: an event is added", backend);
	json_decref(ev.detail);
	ev = (struct sp_event){ .action = "pause", .sandbox = "ffffffffffff",
	    .ms = -1, .actor = "tenant:acme" };
	sp_event_add(db, &ev, &e);
	w.after = base;
	w.sandbox = "eeeeeeeeeeee";
	tap_okf(sp_code_name(e.code), e.msg, sp_db_event_each(db, &w, ev_take,
	    &a, &e) == 0 && a.n == 3 && a.seq[0] > base && a.seq[0] < a.seq[1] &&
	    a.seq[1] < a.seq[2], "%s: a sandbox's events, in order", backend);
	tap_okf("", "", a.n == 3 && strcmp(json_string_value(json_object_get(
	    a.ev[0], "to")), "running") == 0 && json_object_get(a.ev[0],
	    "from") == NULL && strcmp(json_string_value(json_object_get(
	    a.ev[1], "from")), "running") == 0 && strcmp(json_string_value(
	    json_object_get(a.ev[1], "to")), "paused") == 0 && json_is_true(
	    json_object_get(a.ev[1], "ok")), "%s: its insert and its "
	    "transition are state events", backend);
	tap_okf("", "", a.n == 3 && json_is_false(json_object_get(a.ev[2],
	    "ok")) && strcmp(json_string_value(json_object_get(a.ev[2],
	    "error")), "timed-out") == 0 && json_integer_value(json_object_get(
	    a.ev[2], "ms")) == 12 && json_integer_value(json_object_get(a.ev[2],
	    "exit")) == 3 && strncmp(json_string_value(json_object_get(a.ev[2],
	    "actor")), "uid:", 4) == 0, "%s: an event says its outcome, error, "
	    "time taken, detail and actor", backend);
	evs_free(&a);
	w.sandbox = NULL;
	w.after = base + 2;
	sp_db_event_each(db, &w, ev_take, &a, &e);
	tap_okf("", "", a.n == 2 && a.seq[0] == base + 3 && json_object_get(
	    a.ev[1], "ms") == NULL && strcmp(json_string_value(json_object_get(
	    a.ev[1], "actor")), "tenant:acme") == 0, "%s: --after and every "
	    "sandbox's", backend);
	evs_free(&a);
	sp_db_event_last(db, &last, &e);
	tap_okf(sp_code_name(e.code), e.msg, sp_db_event_prune(db,
	    INT64_MAX / 2, &e) >= 4 && sp_db_event_last(db, &base, &e) == 0 &&
	    base == last, "%s: pruning everything keeps the newest", backend);
	w.after = 0;
	sp_db_event_each(db, &w, ev_take, &a, &e);
	tap_okf("", "", a.n == 1 && a.seq[0] == last, "%s: and only it",
	    backend);
	evs_free(&a);
	sp_event_add(db, &ev, &e);
	sp_db_event_last(db, &base, &e);
	tap_okf("", "", base == last + 1, "%s: the next number follows it",
	    backend);
	tap_okf(sp_code_name(e.code), e.msg, sp_event_prune(db, "30d", &gone,
	    &e) == 0 && gone == 0, "%s: SPACE_EVENTS_KEEP 30d keeps today's",
	    backend);
	tap_okf(sp_code_name(e.code), e.msg, sp_event_prune(db, "forever",
	    &gone, &e) == -1 && e.code == SP_E_BAD_INPUT, "%s: a bad "
	    "SPACE_EVENTS_KEEP is refused", backend);
	sp_db_close(db);
}

/* A volume's row as space-volume create writes it. */
static int
insert_volume(struct sp_db *db, char id[SP_ID_LEN + 1], const char *name,
    const char *tenant, struct sp_err *e)
{
	struct sp_volume_row v;

	memset(&v, 0, sizeof v);
	sp_id_new(id, e);
	memcpy(v.id, id, SP_ID_LEN + 1);
	snprintf(v.name, sizeof v.name, "%s", name);
	snprintf(v.tenant, sizeof v.tenant, "%s", tenant);
	snprintf(v.node, sizeof v.node, "n1");
	v.bytes = 1 << 24;
	v.created = 1;
	return sp_db_volume_insert(db, &v, e);
}

static int
count_volume(const struct sp_volume_row *v, void *arg)
{
	(void)v;
	(*(int *)arg)++;
	return 0;
}

/* The rules of volumes' rows: a name unique in its tenant, lookups, and
 * every change a compare-and-set on the generation. */
static void
test_volumes(void)
{
	char a[SP_ID_LEN + 1], b[SP_ID_LEN + 1], c[SP_ID_LEN + 1];
	struct sp_volume_row v, w;
	struct sp_db *db = open_db();
	struct sp_err e;
	int rc, n = 0;

	rc = insert_volume(db, a, "work", "", &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && sp_db_volume_get(db, "",
	    "work", &v, &e) == 0 && strcmp(v.id, a) == 0 && v.gen == 0 &&
	    strcmp(v.mounts, "[]") == 0 && strcmp(v.snaps, "[]") == 0 &&
	    v.tenant[0] == '\0', "%s: a volume's row, found by its name",
	    backend);
	sp_db_volume_release(&v);
	rc = insert_volume(db, b, "work", "", &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == -1 && e.code == SP_E_EXISTS &&
	    sp_db_volume_get(db, NULL, b, &v, &e) == -1 && e.code ==
	    SP_E_NOT_FOUND, "%s: a second of the name in a tenant is refused "
	    "and not written", backend);
	rc = insert_volume(db, c, "work", "acme", &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && sp_db_volume_get(db,
	    "acme", "work", &v, &e) == 0 && strcmp(v.id, c) == 0 &&
	    strcmp(v.tenant, "acme") == 0, "%s: another tenant's of the name is "
	    "its own", backend);
	sp_db_volume_release(&v);
	rc = sp_db_volume_get(db, NULL, "work", &v, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == -1 && e.code == SP_E_BAD_INPUT
	    && sp_db_volume_get(db, NULL, c, &v, &e) == 0, "%s: two tenants' of "
	    "a name are ambiguous without a tenant; the id is not", backend);
	sp_db_volume_release(&v);
	/* Two changes from one read: the second sees the first. */
	sp_db_volume_get(db, "", a, &v, &e);
	sp_db_volume_get(db, "", a, &w, &e);
	snprintf(v.writer, sizeof v.writer, "%s", a);
	v.epoch = 3;
	rc = sp_db_volume_set(db, &v, "[{\"sandbox\":\"x\"}]", "[]", "n1", &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && sp_db_volume_set(db, &w,
	    "[]", "[]", "n2", &e) == -1 && e.code == SP_E_BUSY && e.temp,
	    "%s: a change on a stale generation is busy and writes nothing",
	    backend);
	sp_db_volume_release(&w);
	rc = sp_db_volume_get(db, "", a, &w, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && w.gen == 1 &&
	    strcmp(w.node, "n1") == 0 && strstr(w.mounts, "\"x\"") != NULL &&
	    strcmp(w.writer, a) == 0 && w.epoch == 3 &&
	    sp_db_volume_delete(db, &w, &e) == -1 && e.code == SP_E_BUSY,
	    "%s: a mounted volume's row is not deleted", backend);
	sp_db_volume_release(&v);
	sp_db_volume_set(db, &w, "[]", "[]", "n1", &e);
	sp_db_volume_release(&w);
	sp_db_volume_get(db, "", a, &w, &e);
	rc = sp_db_volume_delete(db, &w, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && sp_db_volume_get(db, "",
	    "work", &v, &e) == -1 && e.code == SP_E_NOT_FOUND &&
	    insert_volume(db, b, "work", "", &e) == 0, "%s: deleted when mounted "
	    "nowhere, and the name is free", backend);
	sp_db_volume_release(&w);
	rc = sp_db_volume_each(db, "n1", NULL, count_volume, &n, &e);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && n == 2 &&
	    sp_db_volume_each(db, "n2", NULL, count_volume, &n, &e) == 0 &&
	    n == 2 && sp_db_volume_each(db, NULL, "acme", count_volume, &n,
	    &e) == 0 && n == 3, "%s: listed by node and by tenant", backend);
	sp_db_close(db);
}

int
main(void)
{
	char dir[] = "/tmp/sp-state-XXXXXX", pgdir[] = "/tmp/sp-pg-XXXXXX";
	char cmd[128];

	if (mkdtemp(dir) == NULL || mkdtemp(pgdir) == NULL)
		return 2;
	memset(&conf, 0, sizeof conf);
	snprintf(conf.db, sizeof conf.db, "sqlite:%s/space.db", dir);
	test_table();
	test_db();
	test_handles();
	test_volumes();
	test_events();
	test_race();
	test_claim_race();
	test_schedule_race();
	test_schedule_claim();
	test_schedule_fill();
	test_busy_wait();
	test_wal_bound();
	test_wal_reader();
	test_wal_later();
	backend = "postgresql";
	if (system("tests/pg-server there") != 0)
		tap_ok(1, "postgresql: the same tests # skip no PostgreSQL server "
		    "here (tests/run-all installs one)");
	else if (pg_server("start", pgdir, conf.db, sizeof conf.db) == -1)
		tap_ok(0, "postgresql: tests/pg-server starts a server");
	else {
		test_db();
		test_handles();
		test_volumes();
		test_events();
		test_race();
		test_claim_race();
		test_schedule_race();
		test_schedule_claim();
		test_schedule_fill();
		test_pg_gone(pgdir);
		pg_server("stop", pgdir, NULL, 0);
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s %s", dir, pgdir);
	if (system(cmd) != 0)
		return 2;
	return tap_done();
}
