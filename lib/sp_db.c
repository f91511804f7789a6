/*
 * sp_db: the state DB on SQLite.  The schema grows by numbered migrations
 * (PRAGMA user_version), and every lifecycle change is a compare-and-set on
 * (state, gen) inside one IMMEDIATE transaction, so two commands racing on
 * one sandbox cannot both win.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "sp_core.h"

struct sp_db {
	sqlite3 *h;
	int64_t busy_since;	/* when the lock we wait for was first busy */
	int wal_pages;		/* the WAL's bound: WAL_PAGES, or WAL_PAGES_LATER */
};

/* How long a command waits for another's write lock, and how often it
 * looks.  SQLite's own busy timeout sleeps 1, 2, 5, 10 ... 100 ms between
 * looks: a lock held for a millisecond can cost a waiter 20.  Commands hold
 * it for a few milliseconds: the first looks come after a quarter of a
 * millisecond, doubling up to 4 ms (250 looks a second while a long import
 * holds it). */
#define BUSY_WAIT_MS	10000
#define BUSY_FIRST_US	250
#define BUSY_MAX_US	4000

static int
busy_wait(void *arg, int count)
{
	struct sp_db *db = arg;
	long us = BUSY_FIRST_US << (count < 4 ? count : 4);
	struct timespec ts;

	if (count == 0)
		db->busy_since = sp_clock_ms();
	else if (sp_clock_ms() - db->busy_since >= BUSY_WAIT_MS)
		return 0;
	if (us > BUSY_MAX_US)
		us = BUSY_MAX_US;
	ts.tv_sec = 0;
	ts.tv_nsec = us * 1000;
	nanosleep(&ts, NULL);
	return 1;
}

/*
 * A command that finds no other open reads every frame in the WAL to
 * rebuild its index, and forgets which of them were
 * checkpointed already: so a checkpoint must also empty the WAL, or it
 * grows for ever.  The commit that leaves it over WAL_PAGES does that (a
 * TRUNCATE checkpoint).  It does not wait: while another command reads or
 * writes, it copies what it can and leaves the emptying to a later commit
 * (waiting for a reader could hold a create for as long as a slow command
 * reads).
 */
#define WAL_PAGES	64

/*
 * A command on a caller's critical path (space-create) lets the WAL grow to
 * WAL_PAGES_LATER before it checkpoints, since the copy and its syncs
 * would land in a claim's time (docs/benchmarks.md, "The database").  The
 * next command that is not on such a path, a pool fill (which follows
 * claims) or a removal, does it at WAL_PAGES.  The larger bound still holds
 * the WAL when only creates write (each then from a checkpoint or a cold
 * boot, which take a second), and keeps the index a lone opener rebuilds
 * small.
 */
#define WAL_PAGES_LATER	512

static int
wal_bound(void *arg, sqlite3 *h, const char *name, int pages)
{
	struct sp_db *db = arg;

	if (pages > db->wal_pages) {
		sqlite3_busy_handler(h, NULL, NULL);
		sqlite3_wal_checkpoint_v2(h, name, SQLITE_CHECKPOINT_TRUNCATE,
		    NULL, NULL);
		sqlite3_busy_handler(h, busy_wait, arg);
	}
	return SQLITE_OK;
}

void
sp_db_checkpoint_later(struct sp_db *db)
{
	db->wal_pages = WAL_PAGES_LATER;
}

/* Migration N takes the schema from version N to N+1; never edit one. */
static const char *const migrations[] = {
	"CREATE TABLE nodes ("
	"  name TEXT PRIMARY KEY,"
	"  root TEXT NOT NULL,"
	"  seen INTEGER NOT NULL);"
	"CREATE TABLE templates ("
	"  name TEXT NOT NULL,"
	"  digest TEXT NOT NULL,"
	"  created INTEGER NOT NULL,"
	"  disk_bytes INTEGER NOT NULL,"
	"  PRIMARY KEY (name, digest));"
	"CREATE TABLE sandboxes ("
	"  id TEXT PRIMARY KEY,"
	"  state TEXT NOT NULL,"
	"  gen INTEGER NOT NULL DEFAULT 0,"
	"  template TEXT NOT NULL,"
	"  node TEXT NOT NULL,"
	"  created INTEGER NOT NULL,"
	"  updated INTEGER NOT NULL,"
	"  memory_mib INTEGER NOT NULL,"
	"  vcpus INTEGER NOT NULL,"
	"  labels TEXT NOT NULL DEFAULT '{}');"
	"CREATE INDEX sandboxes_state ON sandboxes (state);"
	"CREATE TABLE snapshots ("
	"  id TEXT NOT NULL,"
	"  snap TEXT NOT NULL,"
	"  kind TEXT NOT NULL,"
	"  taken INTEGER NOT NULL,"
	"  tag TEXT,"
	"  state TEXT NOT NULL,"
	"  PRIMARY KEY (id, snap));",
	/* 2: the warm pool.  A pod is a sandbox row whose pool names the
	 * template it waits for; claiming it clears pool. */
	"ALTER TABLE sandboxes ADD COLUMN pool TEXT;"
	"CREATE INDEX sandboxes_pool ON sandboxes (pool, state);"
	"CREATE TABLE pools ("
	"  template TEXT PRIMARY KEY,"
	"  size INTEGER NOT NULL,"
	"  memory_mib INTEGER NOT NULL,"
	"  vcpus INTEGER NOT NULL);",
	/* 3: where a template comes from, so a create can materialize it. */
	"CREATE TABLE template_sources ("
	"  name TEXT PRIMARY KEY,"
	"  rootfs TEXT NOT NULL,"
	"  kernel TEXT NOT NULL,"
	"  initrd TEXT NOT NULL,"
	"  added INTEGER NOT NULL);",
	/* 4: the environment a sandbox's guest gives calls that bring none. */
	"ALTER TABLE sandboxes ADD COLUMN env TEXT NOT NULL DEFAULT '[]';",
	/* 5: snapshots say what they cost; a sandbox says when it was rolled
	 * back or recovered, and to which snapshot (a JSON object). */
	"ALTER TABLE snapshots ADD COLUMN ms INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE snapshots ADD COLUMN paused_ms INTEGER;"
	"CREATE INDEX snapshots_taken ON snapshots (id, taken);"
	"ALTER TABLE sandboxes ADD COLUMN recovered TEXT;",
	/* 6: suspend to the object store.  A snapshot's remote says where
	 * its upload is ('uploading', then 'restorable' once its manifest
	 * landed); a sandbox's want asks the node it names to restore it;
	 * a tenant's data keys are wrapped by the key service it names. */
	"ALTER TABLE snapshots ADD COLUMN remote TEXT;"
	"ALTER TABLE sandboxes ADD COLUMN want TEXT;"
	"CREATE TABLE tenant_keys ("
	"  tenant TEXT PRIMARY KEY,"
	"  keyref TEXT NOT NULL,"
	"  updated INTEGER NOT NULL);",
};
#define NMIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

static int
db_err(struct sp_db *db, struct sp_err *e, const char *what)
{
	int rc = sqlite3_errcode(db->h);

	return sp_err_set(e, SP_E_DB, rc == SQLITE_BUSY || rc == SQLITE_LOCKED,
	    "%s: %s", what, sqlite3_errmsg(db->h));
}

static int
exec_sql(struct sp_db *db, const char *sql, struct sp_err *e)
{
	if (sqlite3_exec(db->h, sql, NULL, NULL, NULL) != SQLITE_OK)
		return db_err(db, e, "sql");
	return 0;
}

/*
 * Runs one writing statement with its values bound in order, as types says:
 * s text, i int, I int64 (a NULL text binds NULL).  For the writers below,
 * which differ only in their SQL.
 */
static int
write_sql(struct sp_db *db, const char *what, const char *sql,
    struct sp_err *e, const char *types, ...)
{
	sqlite3_stmt *st = NULL;
	va_list ap;
	int i, rc = -1;

	if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK)
		return db_err(db, e, what);
	va_start(ap, types);
	for (i = 0; types[i] != '\0'; i++) {
		switch (types[i]) {
		case 's':
			sqlite3_bind_text(st, i + 1, va_arg(ap, const char *), -1,
			    SQLITE_TRANSIENT);
			break;
		case 'i':
			sqlite3_bind_int(st, i + 1, va_arg(ap, int));
			break;
		case 'I':
			sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
			break;
		}
	}
	va_end(ap);
	if (sqlite3_step(st) == SQLITE_DONE)
		rc = 0;
	else
		db_err(db, e, what);
	sqlite3_finalize(st);
	return rc;
}

int
sp_db_schema_version(struct sp_db *db)
{
	sqlite3_stmt *st;
	int v = -1;

	if (sqlite3_prepare_v2(db->h, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return v;
}

static int
migrate(struct sp_db *db, struct sp_err *e)
{
	char pragma[64];
	int v;

	/* Read first, without the write lock: every command opens the DB,
	 * and 16 commands at once would otherwise take turns at it only to
	 * learn that the schema is current.  Under the lock, read again. */
	if ((v = sp_db_schema_version(db)) == NMIGRATIONS)
		return 0;
	if (exec_sql(db, "BEGIN IMMEDIATE", e) == -1)
		return -1;
	v = sp_db_schema_version(db);
	if (v < 0 || v > NMIGRATIONS) {
		sp_err_set(e, SP_E_DB, 0, "schema version %d is not one this build knows "
		    "(0..%d)", v, NMIGRATIONS);
		goto fail;
	}
	for (; v < NMIGRATIONS; v++) {
		if (exec_sql(db, migrations[v], e) == -1)
			goto fail;
		snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", v + 1);
		if (exec_sql(db, pragma, e) == -1)
			goto fail;
	}
	return exec_sql(db, "COMMIT", e);
fail:
	sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
	return -1;
}

int
sp_db_open(struct sp_db **dbp, const struct sp_conf *c, struct sp_err *e)
{
	int persist = 1;
	struct sp_db *db;
	const char *path;

	*dbp = NULL;
	if (strncmp(c->db, "sqlite:", 7) != 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "unsupported SPACE_DB '%s'", c->db);
	path = c->db + 7;
	if ((db = calloc(1, sizeof *db)) == NULL)
		return sp_err_sys(e, SP_E_INTERNAL, "calloc");
	db->wal_pages = WAL_PAGES;
	if (sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		sp_err_set(e, SP_E_DB, 1, "open %s: %s", path,
		    db->h ? sqlite3_errmsg(db->h) : "out of memory");
		goto fail;
	}
	/* Commands of many processes share the file: wait for each other. */
	sqlite3_busy_handler(db->h, busy_wait, db);
	/* The WAL stays when the last command closes: else each command
	 * makes it anew (a sync of the file and of the directory) and
	 * deletes it on the way out.  Nor does the last command checkpoint
	 * it on the way out (two syncs for every writing command):
	 * wal_bound does, after a commit that leaves it over the bound
	 * (WAL_PAGES, or WAL_PAGES_LATER after sp_db_checkpoint_later). */
	sqlite3_file_control(db->h, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
	sqlite3_db_config(db->h, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	sqlite3_wal_hook(db->h, wal_bound, db);
	if (exec_sql(db, "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON;"
	    "PRAGMA synchronous = NORMAL", e) == -1)
		goto fail;
	if (migrate(db, e) == -1)
		goto fail;
	*dbp = db;
	return 0;
fail:
	sp_db_close(db);
	return -1;
}

void
sp_db_close(struct sp_db *db)
{
	if (db == NULL)
		return;
	sqlite3_close_v2(db->h);
	free(db);
}

void
sp_db_row_release(struct sp_sandbox_row *r)
{
	free(r->labels);
	free(r->env);
	free(r->recovered);
	r->labels = r->env = r->recovered = NULL;
}

static void
copy_col(char *dst, size_t n, sqlite3_stmt *st, int col)
{
	const unsigned char *s = sqlite3_column_text(st, col);

	snprintf(dst, n, "%s", s ? (const char *)s : "");
}

#define SANDBOX_COLS "id, state, gen, template, node, created, memory_mib, " \
	"vcpus, labels, pool IS NOT NULL, env, recovered"

static int
row_from(sqlite3_stmt *st, struct sp_sandbox_row *r)
{
	const unsigned char *labels;
	int s;

	memset(r, 0, sizeof *r);
	copy_col(r->id, sizeof r->id, st, 0);
	s = sp_state_parse((const char *)sqlite3_column_text(st, 1));
	r->state = s < 0 ? SP_ST_FAILED : (enum sp_state)s;
	r->gen = sqlite3_column_int64(st, 2);
	copy_col(r->template, sizeof r->template, st, 3);
	copy_col(r->node, sizeof r->node, st, 4);
	r->created = sqlite3_column_int64(st, 5);
	r->memory_mib = sqlite3_column_int(st, 6);
	r->vcpus = sqlite3_column_int(st, 7);
	labels = sqlite3_column_text(st, 8);
	r->pod = sqlite3_column_int(st, 9);
	r->labels = strdup(labels ? (const char *)labels : "{}");
	labels = sqlite3_column_text(st, 10);
	r->env = strdup(labels ? (const char *)labels : "[]");
	if ((labels = sqlite3_column_text(st, 11)) != NULL &&
	    (r->recovered = strdup((const char *)labels)) == NULL)
		return -1;
	return r->labels == NULL || r->env == NULL ? -1 : 0;
}

int
sp_db_sandbox_insert(struct sp_db *db, const struct sp_sandbox_row *r,
    struct sp_err *e)
{
	sqlite3_stmt *st = NULL;
	int rc = -1;

	if (sqlite3_prepare_v2(db->h, "INSERT INTO sandboxes (id, state, gen,"
	    " template, node, created, memory_mib, vcpus, labels, updated, env)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?6, ?10)", -1, &st,
	    NULL) != SQLITE_OK)
		return db_err(db, e, "insert sandbox");
	sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, sp_state_name(r->state), -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, r->gen);
	sqlite3_bind_text(st, 4, r->template, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, r->node, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 6, r->created);
	sqlite3_bind_int(st, 7, r->memory_mib);
	sqlite3_bind_int(st, 8, r->vcpus);
	sqlite3_bind_text(st, 9, r->labels ? r->labels : "{}", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 10, r->env ? r->env : "[]", -1, SQLITE_STATIC);
	switch (sqlite3_step(st)) {
	case SQLITE_DONE:
		rc = 0;
		break;
	case SQLITE_CONSTRAINT:
		sp_err_set(e, SP_E_EXISTS, 0, "sandbox %s exists", r->id);
		break;
	default:
		db_err(db, e, "insert sandbox");
	}
	sqlite3_finalize(st);
	return rc;
}

int
sp_db_sandbox_get(struct sp_db *db, const char *id, struct sp_sandbox_row *r,
    struct sp_err *e)
{
	sqlite3_stmt *st = NULL;
	int rc = -1;

	if (sqlite3_prepare_v2(db->h, "SELECT " SANDBOX_COLS
	    " FROM sandboxes WHERE id = ?1", -1, &st, NULL) != SQLITE_OK)
		return db_err(db, e, "get sandbox");
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	switch (sqlite3_step(st)) {
	case SQLITE_ROW:
		if (row_from(st, r) == -1)
			sp_err_sys(e, SP_E_INTERNAL, "out of memory");
		else
			rc = 0;
		break;
	case SQLITE_DONE:
		sp_err_set(e, SP_E_NOT_FOUND, 0, "no such sandbox");
		break;
	default:
		db_err(db, e, "get sandbox");
	}
	sqlite3_finalize(st);
	return rc;
}

/*
 * Steps st to its end, giving each row to one(st, arg), and finalizes it.
 * one returns 0, -1 when the caller's function failed (the loop goes on and
 * the result is -1), or -2 when it ran out of memory (the loop stops).
 */
static int
each_row(struct sp_db *db, sqlite3_stmt *st, const char *what,
    int (*one)(sqlite3_stmt *, void *), void *arg, struct sp_err *e)
{
	int s, r, rc = 0;

	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		if ((r = one(st, arg)) == -2) {
			rc = sp_err_sys(e, SP_E_INTERNAL, "out of memory");
			break;
		}
		if (r == -1)
			rc = -1;
	}
	if (s != SQLITE_DONE && s != SQLITE_ROW)
		rc = db_err(db, e, what);
	sqlite3_finalize(st);
	return rc;
}

struct each_sandbox {
	int (*fn)(const struct sp_sandbox_row *, void *);
	void *arg;
};

static int
one_sandbox(sqlite3_stmt *st, void *arg)
{
	struct each_sandbox *a = arg;
	struct sp_sandbox_row r;
	int rc;

	if (row_from(st, &r) == -1)
		return -2;
	rc = a->fn(&r, a->arg) == -1 ? -1 : 0;
	sp_db_row_release(&r);
	return rc;
}

int
sp_db_sandbox_each(struct sp_db *db, int state,
    int (*fn)(const struct sp_sandbox_row *, void *), void *arg,
    struct sp_err *e)
{
	struct each_sandbox a = { fn, arg };
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db->h, "SELECT " SANDBOX_COLS " FROM sandboxes"
	    " WHERE (?1 IS NULL OR state = ?1) AND (pool IS NULL OR ?2)"
	    " ORDER BY created, id", -1, &st, NULL) != SQLITE_OK)
		return db_err(db, e, "list sandboxes");
	if (state >= 0 && state != SP_DB_WITH_PODS)
		sqlite3_bind_text(st, 1, sp_state_name(state), -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, state == SP_DB_WITH_PODS);
	return each_row(db, st, "list sandboxes", one_sandbox, &a, e);
}

int
sp_db_sandbox_delete(struct sp_db *db, const char *id, struct sp_err *e)
{
	/* Its snapshots' rows go with it (their subvolumes went first). */
	if (write_sql(db, "delete snapshots", "DELETE FROM snapshots WHERE"
	    " id = ?1", e, "s", id) == -1)
		return -1;
	return write_sql(db, "delete sandbox", "DELETE FROM sandboxes WHERE"
	    " id = ?1", e, "s", id);
}

int
sp_db_transition(struct sp_db *db, const char *id, enum sp_state to,
    int64_t expect_gen, struct sp_sandbox_row *out, struct sp_err *e)
{
	struct sp_sandbox_row r = { 0 };
	sqlite3_stmt *st = NULL;
	int rc = -1;

	if (exec_sql(db, "BEGIN IMMEDIATE", e) == -1)
		return -1;
	if (sp_db_sandbox_get(db, id, &r, e) == -1)
		goto out;
	if (!sp_state_can(r.state, to)) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "cannot go from %s to %s",
		    sp_state_name(r.state), sp_state_name(to));
		goto out;
	}
	if (expect_gen >= 0 && r.gen != expect_gen) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "changed by another command "
		    "(generation %lld, expected %lld)", (long long)r.gen,
		    (long long)expect_gen);
		goto out;
	}
	if (sqlite3_prepare_v2(db->h, "UPDATE sandboxes SET state = ?1,"
	    " gen = gen + 1, updated = ?2 WHERE id = ?3 AND gen = ?4 AND state = ?5",
	    -1, &st, NULL) != SQLITE_OK) {
		db_err(db, e, "transition");
		goto out;
	}
	sqlite3_bind_text(st, 1, sp_state_name(to), -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (int64_t)time(NULL));
	sqlite3_bind_text(st, 3, id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, r.gen);
	sqlite3_bind_text(st, 5, sp_state_name(r.state), -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE) {
		db_err(db, e, "transition");
		goto out;
	}
	if (sqlite3_changes(db->h) != 1) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "changed by another command");
		goto out;
	}
	if (exec_sql(db, "COMMIT", e) == -1)
		goto out;
	r.state = to;
	r.gen++;
	rc = 0;
out:
	sqlite3_finalize(st);
	if (rc == -1)
		sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
	if (rc == 0 && out != NULL)
		*out = r;
	else
		sp_db_row_release(&r);
	return rc;
}

int
sp_db_template_insert(struct sp_db *db, const struct sp_template_row *t,
    struct sp_err *e)
{
	/* Re-importing the same bytes is the same template: keep the first row. */
	return write_sql(db, "insert template", "INSERT OR IGNORE INTO templates"
	    " (name, digest, created, disk_bytes) VALUES (?1, ?2, ?3, ?4)", e,
	    "ssII", t->name, t->digest, t->created, t->disk_bytes);
}

static void
template_from(sqlite3_stmt *st, struct sp_template_row *t)
{
	memset(t, 0, sizeof *t);
	copy_col(t->name, sizeof t->name, st, 0);
	copy_col(t->digest, sizeof t->digest, st, 1);
	t->created = sqlite3_column_int64(st, 2);
	t->disk_bytes = sqlite3_column_int64(st, 3);
}

int
sp_db_template_get(struct sp_db *db, const char *ref, struct sp_template_row *t,
    struct sp_err *e)
{
	char name[SP_NAME_MAX + 1];
	const char *at, *digest = NULL;
	sqlite3_stmt *st = NULL;
	size_t n;
	int rc = -1;

	at = strchr(ref, '@');
	n = at ? (size_t)(at - ref) : strlen(ref);
	if (n == 0 || n > SP_NAME_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "bad template reference");
	memcpy(name, ref, n);
	name[n] = '\0';
	if (sp_name_check("template", name, e) == -1)
		return -1;
	if (at != NULL) {
		digest = at + 1;
		if (strlen(digest) < 4 || strlen(digest) > 64 ||
		    strspn(digest, "0123456789abcdef") != strlen(digest))
			return sp_err_set(e, SP_E_BAD_INPUT, 0,
			    "template digest must be 4 to 64 hex digits");
	}
	/* A digest may be given by a unique prefix, as git does. */
	if (sqlite3_prepare_v2(db->h, "SELECT name, digest, created, disk_bytes"
	    " FROM templates WHERE name = ?1 AND (?2 IS NULL OR"
	    " substr(digest, 1, length(?2)) = ?2)"
	    " ORDER BY created DESC, rowid DESC LIMIT 2", -1, &st, NULL) != SQLITE_OK)
		return db_err(db, e, "get template");
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (digest != NULL)
		sqlite3_bind_text(st, 2, digest, -1, SQLITE_STATIC);
	switch (sqlite3_step(st)) {
	case SQLITE_ROW:
		template_from(st, t);
		if (digest != NULL && strlen(digest) < 64 &&
		    sqlite3_step(st) == SQLITE_ROW)
			sp_err_set(e, SP_E_BAD_INPUT, 0, "digest prefix '%s' is ambiguous",
			    digest);
		else
			rc = 0;
		break;
	case SQLITE_DONE:
		sp_err_set(e, SP_E_NOT_FOUND, 0, "no template '%s'", name);
		break;
	default:
		db_err(db, e, "get template");
	}
	sqlite3_finalize(st);
	return rc;
}

struct each_template {
	int (*fn)(const struct sp_template_row *, void *);
	void *arg;
};

static int
one_template(sqlite3_stmt *st, void *arg)
{
	struct each_template *a = arg;
	struct sp_template_row t;

	template_from(st, &t);
	return a->fn(&t, a->arg) == -1 ? -1 : 0;
}

int
sp_db_template_each(struct sp_db *db,
    int (*fn)(const struct sp_template_row *, void *), void *arg,
    struct sp_err *e)
{
	struct each_template a = { fn, arg };
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db->h, "SELECT name, digest, created, disk_bytes"
	    " FROM templates ORDER BY name, created", -1, &st, NULL) != SQLITE_OK)
		return db_err(db, e, "list templates");
	return each_row(db, st, "list templates", one_template, &a, e);
}

int
sp_db_template_delete(struct sp_db *db, const char *name, const char *digest,
    struct sp_err *e)
{
	return write_sql(db, "delete template", "DELETE FROM templates WHERE"
	    " name = ?1 AND digest = ?2", e, "ss", name, digest);
}

int
sp_db_node_upsert(struct sp_db *db, const char *node, const char *root,
    struct sp_err *e)
{
	return write_sql(db, "upsert node", "INSERT INTO nodes (name, root, seen)"
	    " VALUES (?1, ?2, ?3) ON CONFLICT (name) DO UPDATE SET root = ?2,"
	    " seen = ?3", e, "ssI", node, root, (int64_t)time(NULL));
}

int
sp_db_pool_set(struct sp_db *db, const char *template, int size,
    int memory_mib, int vcpus, struct sp_err *e)
{
	return write_sql(db, "set pool", "INSERT INTO pools (template, size,"
	    " memory_mib, vcpus) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (template)"
	    " DO UPDATE SET size = ?2, memory_mib = ?3, vcpus = ?4", e, "siii",
	    template, size, memory_mib, vcpus);
}

int
sp_db_pool_drop(struct sp_db *db, const char *template, struct sp_err *e)
{
	/* Only while it still asks for nothing: a set in between wins. */
	return write_sql(db, "drop pool", "DELETE FROM pools WHERE template = ?1"
	    " AND size = 0", e, "s", template);
}

struct each_pool {
	int (*fn)(const struct sp_pool_row *, void *);
	void *arg;
};

static int
one_pool(sqlite3_stmt *st, void *arg)
{
	struct each_pool *a = arg;
	struct sp_pool_row p;

	memset(&p, 0, sizeof p);
	copy_col(p.template, sizeof p.template, st, 0);
	p.size = sqlite3_column_int(st, 1);
	p.memory_mib = sqlite3_column_int(st, 2);
	p.vcpus = sqlite3_column_int(st, 3);
	p.ready = sqlite3_column_int(st, 4);
	return a->fn(&p, a->arg) == -1 ? -1 : 0;
}

int
sp_db_pool_each(struct sp_db *db, int (*fn)(const struct sp_pool_row *, void *),
    void *arg, struct sp_err *e)
{
	struct each_pool a = { fn, arg };
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db->h, "SELECT template, size, memory_mib, vcpus,"
	    " (SELECT count(*) FROM sandboxes WHERE pool = pools.template AND"
	    " state = 'paused') FROM pools ORDER BY template", -1, &st,
	    NULL) != SQLITE_OK)
		return db_err(db, e, "list pools");
	return each_row(db, st, "list pools", one_pool, &a, e);
}

int
sp_db_pod_mark(struct sp_db *db, const char *id, const char *pool,
    struct sp_err *e)
{
	return write_sql(db, "mark pod", "UPDATE sandboxes SET pool = ?1 WHERE"
	    " id = ?2", e, "ss", pool, id);
}

int
sp_db_pod_claim(struct sp_db *db, const char *pool, const char *template,
    int memory_mib, int vcpus, const char *labels, const char *env,
    char id[SP_ID_LEN + 1], struct sp_err *e)
{
	sqlite3_stmt *st = NULL;
	int rc = -1;

	/* One statement: of many creates racing for pods, each gets its own.
	 * It is creating until it has woken and been told who it is. */
	if (sqlite3_prepare_v2(db->h, "UPDATE sandboxes SET pool = NULL,"
	    " state = 'creating', gen = gen + 1, updated = ?6, labels = ?5,"
	    " created = ?6, env = ?7 WHERE id = (SELECT id FROM sandboxes WHERE pool = ?1"
	    " AND template = ?2 AND memory_mib = ?3 AND vcpus = ?4 AND"
	    " state = 'paused' ORDER BY created LIMIT 1) RETURNING id", -1, &st,
	    NULL) != SQLITE_OK)
		return db_err(db, e, "claim pod");
	sqlite3_bind_text(st, 1, pool, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, template, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, memory_mib);
	sqlite3_bind_int(st, 4, vcpus);
	sqlite3_bind_text(st, 5, labels ? labels : "{}", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 6, (int64_t)time(NULL));
	sqlite3_bind_text(st, 7, env ? env : "[]", -1, SQLITE_STATIC);
	switch (sqlite3_step(st)) {
	case SQLITE_ROW:
		copy_col(id, SP_ID_LEN + 1, st, 0);
		rc = 1;
		break;
	case SQLITE_DONE:
		rc = 0;
		break;
	default:
		db_err(db, e, "claim pod");
	}
	sqlite3_finalize(st);
	return rc;
}

int
sp_db_pods_each(struct sp_db *db, const char *pool,
    int (*fn)(const struct sp_sandbox_row *, void *), void *arg,
    struct sp_err *e)
{
	struct each_sandbox a = { fn, arg };
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db->h, "SELECT " SANDBOX_COLS " FROM sandboxes"
	    " WHERE pool = ?1 ORDER BY created, id", -1, &st, NULL) != SQLITE_OK)
		return db_err(db, e, "list pods");
	sqlite3_bind_text(st, 1, pool, -1, SQLITE_STATIC);
	return each_row(db, st, "list pods", one_sandbox, &a, e);
}

int
sp_db_source_set(struct sp_db *db, const struct sp_source_row *r,
    struct sp_err *e)
{
	return write_sql(db, "set source", "INSERT INTO template_sources (name,"
	    " rootfs, kernel, initrd, added) VALUES (?1, ?2, ?3, ?4, ?5) ON"
	    " CONFLICT (name) DO UPDATE SET rootfs = ?2, kernel = ?3,"
	    " initrd = ?4, added = ?5", e, "ssssI", r->name, r->rootfs, r->kernel,
	    r->initrd, (int64_t)time(NULL));
}

int
sp_db_source_get(struct sp_db *db, const char *name, struct sp_source_row *r,
    struct sp_err *e)
{
	sqlite3_stmt *st = NULL;
	int rc = -1;

	if (sqlite3_prepare_v2(db->h, "SELECT name, rootfs, kernel, initrd FROM"
	    " template_sources WHERE name = ?1", -1, &st, NULL) != SQLITE_OK)
		return db_err(db, e, "get source");
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	switch (sqlite3_step(st)) {
	case SQLITE_ROW:
		memset(r, 0, sizeof *r);
		copy_col(r->name, sizeof r->name, st, 0);
		copy_col(r->rootfs, sizeof r->rootfs, st, 1);
		copy_col(r->kernel, sizeof r->kernel, st, 2);
		copy_col(r->initrd, sizeof r->initrd, st, 3);
		rc = 0;
		break;
	case SQLITE_DONE:
		sp_err_set(e, SP_E_NOT_FOUND, 0, "no template or source '%s'", name);
		break;
	default:
		db_err(db, e, "get source");
	}
	sqlite3_finalize(st);
	return rc;
}

int
sp_db_sandbox_set_recovered(struct sp_db *db, const char *id, const char *json,
    struct sp_err *e)
{
	return write_sql(db, "set recovered", "UPDATE sandboxes SET recovered"
	    " = ?2 WHERE id = ?1", e, "ss", id, json);
}

/* ---- snapshots ---- */

#define SNAP_COLS "id, snap, kind, taken, tag, state, ms, paused_ms, " \
	"IFNULL(remote, '')"

static void
snap_from(sqlite3_stmt *st, struct sp_snap_row *r)
{
	memset(r, 0, sizeof *r);
	copy_col(r->id, sizeof r->id, st, 0);
	copy_col(r->snap, sizeof r->snap, st, 1);
	copy_col(r->kind, sizeof r->kind, st, 2);
	r->taken = sqlite3_column_int64(st, 3);
	copy_col(r->tag, sizeof r->tag, st, 4);
	copy_col(r->state, sizeof r->state, st, 5);
	r->ms = sqlite3_column_int64(st, 6);
	r->paused_ms = sqlite3_column_type(st, 7) == SQLITE_NULL ? -1 :
	    sqlite3_column_int64(st, 7);
	copy_col(r->remote, sizeof r->remote, st, 8);
}

int
sp_db_snap_insert(struct sp_db *db, const struct sp_snap_row *r,
    struct sp_err *e)
{
	return write_sql(db, "insert snapshot", "INSERT INTO snapshots (id,"
	    " snap, kind, taken, tag, state) VALUES (?1, ?2, ?3, ?4,"
	    " NULLIF(?5, ''), ?6)", e, "sssIss", r->id, r->snap, r->kind,
	    r->taken, r->tag, r->state);
}

int
sp_db_snap_ready(struct sp_db *db, const struct sp_snap_row *r,
    struct sp_err *e)
{
	return write_sql(db, "snapshot ready", "UPDATE snapshots SET state ="
	    " 'ready', ms = ?3, paused_ms = NULLIF(?4, -1) WHERE id = ?1 AND"
	    " snap = ?2", e, "ssII", r->id, r->snap, r->ms, r->paused_ms);
}

int
sp_db_snap_delete(struct sp_db *db, const char *id, const char *snap,
    struct sp_err *e)
{
	return write_sql(db, "delete snapshot", "DELETE FROM snapshots WHERE"
	    " id = ?1 AND snap = ?2", e, "ss", id, snap);
}

int
sp_db_snap_get(struct sp_db *db, const char *id, const char *snap,
    struct sp_snap_row *r, struct sp_err *e)
{
	sqlite3_stmt *st = NULL;
	int rc = -1;

	if (sqlite3_prepare_v2(db->h, "SELECT " SNAP_COLS " FROM snapshots"
	    " WHERE id = ?1 AND snap = ?2", -1, &st, NULL) != SQLITE_OK)
		return db_err(db, e, "get snapshot");
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, snap, -1, SQLITE_STATIC);
	switch (sqlite3_step(st)) {
	case SQLITE_ROW:
		snap_from(st, r);
		rc = 0;
		break;
	case SQLITE_DONE:
		sp_err_set(e, SP_E_NOT_FOUND, 0, "no snapshot %s of %s", snap, id);
		break;
	default:
		db_err(db, e, "get snapshot");
	}
	sqlite3_finalize(st);
	return rc;
}

struct each_snap {
	int (*fn)(const struct sp_snap_row *, void *);
	void *arg;
};

static int
one_snap(sqlite3_stmt *st, void *arg)
{
	struct each_snap *a = arg;
	struct sp_snap_row r;

	snap_from(st, &r);
	return a->fn(&r, a->arg) == -1 ? -1 : 0;
}

int
sp_db_snap_each(struct sp_db *db, const char *id, const char *node,
    int (*fn)(const struct sp_snap_row *, void *), void *arg, struct sp_err *e)
{
	struct each_snap a = { fn, arg };
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db->h, "SELECT " SNAP_COLS " FROM snapshots"
	    " WHERE (?1 IS NULL OR id = ?1) AND (?2 IS NULL OR id IN"
	    " (SELECT id FROM sandboxes WHERE node = ?2))"
	    " ORDER BY id, taken, rowid", -1, &st, NULL) != SQLITE_OK)
		return db_err(db, e, "list snapshots");
	if (id != NULL)
		sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	if (node != NULL)
		sqlite3_bind_text(st, 2, node, -1, SQLITE_STATIC);
	return each_row(db, st, "list snapshots", one_snap, &a, e);
}

int
sp_db_snap_set_remote(struct sp_db *db, const char *id, const char *snap,
    const char *remote, struct sp_err *e)
{
	return write_sql(db, "snapshot remote", "UPDATE snapshots SET remote ="
	    " NULLIF(?3, '') WHERE id = ?1 AND snap = ?2", e, "sss", id, snap,
	    remote ? remote : "");
}

int
sp_db_sandbox_place(struct sp_db *db, const char *id, const char *node,
    const char *want, struct sp_err *e)
{
	return write_sql(db, "place sandbox", "UPDATE sandboxes SET node = ?2,"
	    " want = NULLIF(?3, '') WHERE id = ?1", e, "sss", id, node,
	    want ? want : "");
}

int
sp_db_sandbox_want(struct sp_db *db, const char *id, char *out, size_t n,
    struct sp_err *e)
{
	sqlite3_stmt *st = NULL;
	int rc = -1;

	if (sqlite3_prepare_v2(db->h, "SELECT IFNULL(want, '') FROM sandboxes"
	    " WHERE id = ?1", -1, &st, NULL) != SQLITE_OK)
		return db_err(db, e, "get want");
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW) {
		copy_col(out, n, st, 0);
		rc = 0;
	} else
		sp_err_set(e, SP_E_NOT_FOUND, 0, "no such sandbox");
	sqlite3_finalize(st);
	return rc;
}

int
sp_db_tenant_key_set(struct sp_db *db, const char *tenant, const char *keyref,
    struct sp_err *e)
{
	return write_sql(db, "set tenant key", "INSERT INTO tenant_keys (tenant,"
	    " keyref, updated) VALUES (?1, ?2, ?3) ON CONFLICT (tenant) DO"
	    " UPDATE SET keyref = ?2, updated = ?3", e, "ssI", tenant, keyref,
	    (int64_t)time(NULL));
}

int
sp_db_tenant_key_get(struct sp_db *db, const char *tenant, char *out,
    size_t n, struct sp_err *e)
{
	sqlite3_stmt *st = NULL;
	int rc = -1;

	if (sqlite3_prepare_v2(db->h, "SELECT keyref FROM tenant_keys WHERE"
	    " tenant = ?1", -1, &st, NULL) != SQLITE_OK)
		return db_err(db, e, "get tenant key");
	sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW) {
		copy_col(out, n, st, 0);
		rc = 0;
	} else
		sp_err_set(e, SP_E_NOT_FOUND, 0, "no key for tenant %s", tenant);
	sqlite3_finalize(st);
	return rc;
}

struct each_key {
	int (*fn)(const char *, const char *, int64_t, void *);
	void *arg;
};

static int
one_key(sqlite3_stmt *st, void *arg)
{
	struct each_key *a = arg;

	return a->fn((const char *)sqlite3_column_text(st, 0),
	    (const char *)sqlite3_column_text(st, 1),
	    sqlite3_column_int64(st, 2), a->arg) == -1 ? -1 : 0;
}

int
sp_db_tenant_key_each(struct sp_db *db,
    int (*fn)(const char *tenant, const char *keyref, int64_t updated, void *),
    void *arg, struct sp_err *e)
{
	struct each_key a = { fn, arg };
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db->h, "SELECT tenant, keyref, updated FROM"
	    " tenant_keys ORDER BY tenant", -1, &st, NULL) != SQLITE_OK)
		return db_err(db, e, "list tenant keys");
	return each_row(db, st, "list tenant keys", one_key, &a, e);
}

int
sp_db_snap_drop_local(struct sp_db *db, const char *id, struct sp_err *e)
{
	return write_sql(db, "drop local snapshots", "DELETE FROM snapshots"
	    " WHERE id = ?1 AND remote IS NULL", e, "s", id);
}
