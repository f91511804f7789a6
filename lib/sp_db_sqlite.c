/*
 * sp_db_sqlite: the state DB in one node's SQLite file (sp_db_int.h).  The
 * commands of many processes share it: a writer waits for another's lock
 * (busy_wait), and the WAL is kept small (wal_bound).
 */
#include <errno.h>
#include <libgen.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "sp_core.h"
#include "sp_db_int.h"

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

	if (pages > (db->checkpoint_later ? WAL_PAGES_LATER : WAL_PAGES)) {
		sqlite3_busy_handler(h, NULL, NULL);
		sqlite3_wal_checkpoint_v2(h, name, SQLITE_CHECKPOINT_TRUNCATE,
		    NULL, NULL);
		sqlite3_busy_handler(h, busy_wait, arg);
	}
	return SQLITE_OK;
}

static int
db_err(struct sp_db *db, struct sp_err *e, const char *what)
{
	int rc = sqlite3_extended_errcode(db->h);

	if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY)
		return sp_err_set(e, SP_E_EXISTS, 0, "%s: %s", what,
		    sqlite3_errmsg(db->h));
	rc &= 0xff;
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

#define SKIP_LOCKED " FOR UPDATE SKIP LOCKED"

static int
q_run(struct sp_db_q *q, const char *what, const char *sql, const char *types,
    va_list ap, struct sp_err *e)
{
	struct sp_db *db = q->db;
	sqlite3_stmt *st = NULL;
	const char *lock;
	char *copy = NULL, name[16];
	int i, at, rc;

	/* One writer at a time: a row lock has nothing to add here. */
	if ((lock = strstr(sql, SKIP_LOCKED)) != NULL) {
		if ((copy = strdup(sql)) == NULL)
			return sp_err_sys(e, SP_E_INTERNAL, "out of memory");
		memmove(copy + (lock - sql), lock + strlen(SKIP_LOCKED),
		    strlen(lock + strlen(SKIP_LOCKED)) + 1);
		sql = copy;
	}
	rc = sqlite3_prepare_v2(db->h, sql, -1, &st, NULL);
	free(copy);
	if (rc != SQLITE_OK)
		return db_err(db, e, what);
	db->round_trips++;
	for (i = 0; types[i] != '\0'; i++) {
		snprintf(name, sizeof name, "$%d", i + 1);
		at = sqlite3_bind_parameter_index(st, name);
		switch (types[i]) {
		case 's': {
			const char *s = va_arg(ap, const char *);

			if (at > 0)
				sqlite3_bind_text(st, at, s, -1, SQLITE_TRANSIENT);
			break;
		}
		case 'i': {
			int v = va_arg(ap, int);

			if (at > 0)
				sqlite3_bind_int(st, at, v);
			break;
		}
		case 'I': {
			int64_t v = va_arg(ap, int64_t);

			if (at > 0)
				sqlite3_bind_int64(st, at, v);
			break;
		}
		}
	}
	q->h = st;
	return 0;
}

static int
q_step(struct sp_db_q *q, const char *what, struct sp_err *e)
{
	switch (sqlite3_step(q->h)) {
	case SQLITE_ROW:
		return 1;
	case SQLITE_DONE:
		q->changes = sqlite3_changes(q->db->h);
		return 0;
	default:
		return db_err(q->db, e, what);
	}
}

static const char *
q_text(struct sp_db_q *q, int col)
{
	return (const char *)sqlite3_column_text(q->h, col);
}

static void
q_end(struct sp_db_q *q)
{
	sqlite3_finalize(q->h);
	q->h = NULL;
}

static int
version(struct sp_db *db)
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
migrate(struct sp_db *db, const char *const migrations[], int n,
    struct sp_err *e)
{
	char pragma[64];
	int v;

	/* Read first, without the write lock: every command opens the DB,
	 * and 16 commands at once would otherwise take turns at it only to
	 * learn that the schema is current.  Under the lock, read again. */
	if (version(db) == n)
		return 0;
	if (exec_sql(db, "BEGIN IMMEDIATE", e) == -1)
		return -1;
	v = version(db);
	if (v < 0 || v > n) {
		sp_err_set(e, SP_E_DB, 0, "schema version %d is not one this build knows "
		    "(0..%d)", v, n);
		goto fail;
	}
	for (; v < n; v++) {
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

/* space_now(): the DB's clock, which on one node's file is this node's. */
static void
space_now(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	sqlite3_result_int64(ctx, (sqlite3_int64)time(NULL));
}

/*
 * 1 when the file at path is there and its WAL is not, in a directory this
 * process may not write: one not root cannot make the WAL again in root's
 * SPACE_ROOT (the WAL stays once made, but a sqlite3 run as root takes it
 * on its way out), and every write would fail as "readonly".  Root's open
 * makes it again, its owner the file's.
 */
static int
wal_gone(const char *path)
{
	char wal[4096], dir[4096];
	struct stat st;

	if (geteuid() == 0 || stat(path, &st) == -1 ||
	    snprintf(wal, sizeof wal, "%s-wal", path) >= (int)sizeof wal ||
	    stat(wal, &st) == 0 || errno != ENOENT ||
	    snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
		return 0;
	return access(dirname(dir), W_OK) == -1;
}

static int
db_open(struct sp_db *db, const char *path, struct sp_err *e)
{
	sqlite3 *h = NULL;
	int persist = 1;

	if (wal_gone(path))
		return sp_err_set(e, SP_E_DB, 0, "%s: its WAL (%s-wal) is gone, "
		    "and only root may make it again there (a sqlite3 run as "
		    "root takes it on its way out): run space-init", path, path);

	db->inotify = -1;
	if ((db->path = strdup(path)) == NULL)
		return sp_err_sys(e, SP_E_INTERNAL, "out of memory");
	if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		sp_err_set(e, SP_E_DB, 1, "open %s: %s", path,
		    h ? sqlite3_errmsg(h) : "out of memory");
		sqlite3_close_v2(h);
		return -1;
	}
	db->h = h;
	/* Commands of many processes share the file: wait for each other. */
	sqlite3_busy_handler(h, busy_wait, db);
	/* The WAL stays when the last command closes: else each command
	 * makes it anew (a sync of the file and of the directory) and
	 * deletes it on the way out.  Nor does the last command checkpoint
	 * it on the way out (two syncs for every writing command):
	 * wal_bound does, after a commit that leaves it over the bound
	 * (WAL_PAGES, or WAL_PAGES_LATER after sp_db_checkpoint_later). */
	sqlite3_file_control(h, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
	sqlite3_db_config(h, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	sqlite3_wal_hook(h, wal_bound, db);
	if (sqlite3_create_function_v2(h, "space_now", 0, SQLITE_UTF8, NULL,
	    space_now, NULL, NULL, NULL) != SQLITE_OK)
		return db_err(db, e, "space_now");
	return exec_sql(db, "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON;"
	    "PRAGMA synchronous = NORMAL", e);
}

/*
 * Wake-ups on one node's file: every commit writes the WAL (or the file),
 * so a write to either, by any process, wakes the waiter, which reads
 * again.  Its own writes wake it too, for nothing worse than a read.
 */
static int
listen_(struct sp_db *db, struct sp_err *e)
{
	char *dir;

	if (db->inotify >= 0)
		return 0;
	if ((dir = strdup(db->path)) == NULL)
		return sp_err_sys(e, SP_E_INTERNAL, "out of memory");
	db->inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (db->inotify == -1 || inotify_add_watch(db->inotify, dirname(dir),
	    IN_MODIFY | IN_CREATE | IN_MOVED_TO) == -1) {
		free(dir);
		return sp_err_sys(e, SP_E_IO, "inotify on %s", db->path);
	}
	free(dir);
	return 0;
}

static int
wait_(struct sp_db *db, int timeout_ms, struct sp_err *e)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	const struct inotify_event *ev;
	const char *base = strrchr(db->path, '/');
	struct pollfd pfd = { .fd = db->inotify, .events = POLLIN };
	int64_t deadline = sp_clock_ms() + timeout_ms;
	ssize_t n;
	char *p;
	int rc;

	base = base ? base + 1 : db->path;
	for (;;) {
		rc = poll(&pfd, 1, (int)(deadline - sp_clock_ms() > 0 ?
		    deadline - sp_clock_ms() : 0));
		if (rc == -1)
			return errno == EINTR ? 0 : sp_err_sys(e, SP_E_IO, "poll");
		if (rc == 0)
			return 0;
		while ((n = read(db->inotify, buf, sizeof buf)) > 0)
			for (p = buf; p < buf + n; p += sizeof *ev + ev->len) {
				ev = (const struct inotify_event *)p;
				if (ev->len > 0 && strncmp(ev->name, base,
				    strlen(base)) == 0)
					rc = 2;
			}
		if (rc == 2)
			return 1;
	}
}

static void
db_close(struct sp_db *db)
{
	sqlite3_close_v2(db->h);
	if (db->inotify >= 0)
		close(db->inotify);
	free(db->path);
}

const struct sp_db_ops sp_db_sqlite_ops = {
	.name = "sqlite",
	.begin = "BEGIN IMMEDIATE",
	.open = db_open,
	.close = db_close,
	.run = q_run,
	.step = q_step,
	.text = q_text,
	.end = q_end,
	.version = version,
	.migrate = migrate,
	.listen = listen_,
	.wait = wait_,
};
