/*
 * sp_db_int.h: what the state DB's parts share: sp_db_sqlite.c (one node's
 * file), sp_db_pg.c (PostgreSQL, shared by many nodes) and, above them,
 * sp_db.c (the schema, its migrations and every query, written once).  Not
 * part of the library's interface.
 *
 * The queries are written in the SQL both engines take: parameters are $1,
 * $2 ... (SQLite binds them by name), no engine's own functions (COALESCE,
 * not IFNULL), integers for booleans.  Two things differ and are the
 * backends' to bridge:
 *  - SQLite runs one writer at a time, so a row lock means nothing there:
 *    its backend drops " FOR UPDATE SKIP LOCKED" from a statement;
 *  - the migrations' INTEGER is SQLite's 64-bit integer and rowid its row
 *    order: PostgreSQL's backend reads INTEGER as BIGINT and gives each
 *    table a rowid column (BIGSERIAL), so the numbered migrations and the
 *    queries that order by rowid are the same text on both;
 *  - the DB's clock is space_now(), unix seconds: the server's on
 *    PostgreSQL (a function its backend makes), the node's on SQLite (a
 *    function its backend registers), so that leases are read against
 *    one clock wherever the DB is shared.
 */
#ifndef SP_DB_INT_H
#define SP_DB_INT_H

#include <stdarg.h>

#include "sp_core.h"

/* One statement's rows, stepped through by the backend's step. */
struct sp_db_q {
	struct sp_db *db;
	void *h;		/* sqlite3_stmt, or PGresult */
	int row, rows;		/* PostgreSQL: the row step gave last, of rows */
	int64_t changes;	/* the rows a write changed, once it is done */
};

struct sp_db_ops {
	const char *name;	/* "sqlite", "postgresql" */
	/* Starts a transaction that writes: SQLite takes its write lock
	 * at once, so two never deadlock on upgrading theirs. */
	const char *begin;
	/* target is SPACE_DB without its scheme's "sqlite:" (a path), or the
	 * whole conninfo or URI for PostgreSQL. */
	int (*open)(struct sp_db *db, const char *target, struct sp_err *e);
	void (*close)(struct sp_db *db);
	/* Runs sql with the values in ap, as types says: s text (NULL binds
	 * NULL), i int, I int64_t.  A unique key broken is SP_E_EXISTS; a
	 * server or lock that is not there is SP_E_DB with temp set. */
	int (*run)(struct sp_db_q *q, const char *what, const char *sql,
	    const char *types, va_list ap, struct sp_err *e);
	/* 1: a row is there; 0: done (changes is set); -1: e says why. */
	int (*step)(struct sp_db_q *q, const char *what, struct sp_err *e);
	/* The current row's column col as text; NULL when it is NULL. */
	const char *(*text)(struct sp_db_q *q, int col);
	void (*end)(struct sp_db_q *q);
	/* The schema version, or -1; and taking it from that to n by running
	 * migrations[v..n-1], each in the same transaction as its number. */
	int (*version)(struct sp_db *db);
	int (*migrate)(struct sp_db *db, const char *const migrations[], int n,
	    struct sp_err *e);
	/* sp_db_listen and sp_db_wait (sp_core.h). */
	int (*listen)(struct sp_db *db, struct sp_err *e);
	int (*wait)(struct sp_db *db, int timeout_ms, struct sp_err *e);
};

extern const struct sp_db_ops sp_db_sqlite_ops, sp_db_pg_ops;

/* The helpers every query of sp_db*.c is written with (sp_db.c). */
/* Starts sql with its values (types as the backends' run says). */
int sp_db_q_start(struct sp_db *db, struct sp_db_q *q, const char *what,
    const char *sql, struct sp_err *e, const char *types, ...);
int sp_db_q_step(struct sp_db_q *q, const char *what, struct sp_err *e);
void sp_db_q_end(struct sp_db_q *q);
const char *sp_db_q_text(struct sp_db_q *q, int col);
int64_t sp_db_q_int(struct sp_db_q *q, int col);
void sp_db_q_copy(char *dst, size_t n, struct sp_db_q *q, int col);
/* One writing statement; the rows it changed, or -1. */
int64_t sp_db_q_write(struct sp_db *db, const char *what, const char *sql,
    struct sp_err *e, const char *types, ...);
/* Steps q to its end, each row to one (0, -1: failed, go on, -2: out of
 * memory, stop), and ends it. */
int sp_db_q_each(struct sp_db_q *q, const char *what,
    int (*one)(struct sp_db_q *, void *), void *arg, struct sp_err *e);
/* One row (or none: not-found with the message not_found) to one. */
int sp_db_q_one(struct sp_db_q *q, const char *what, const char *not_found,
    int (*one)(struct sp_db_q *, void *), void *arg, struct sp_err *e);

struct sp_db {
	const struct sp_db_ops *ops;
	void *h;		/* sqlite3, or PGconn */
	/* SQLite's: */
	int64_t busy_since;	/* when the lock we wait for was first busy */
	int checkpoint_later;	/* sp_db_checkpoint_later was called */
	char *path;		/* the DB file, for the wake-ups */
	int inotify;		/* watching its WAL, after listen; or -1 */
	/* PostgreSQL's: */
	int listening;		/* LISTEN again after a new connection (PQreset
				 * connects with the parameters it was given) */
	int64_t round_trips;	/* statements run (sent, on PostgreSQL) */
	int txn;		/* inside sp_db_begin's transaction */
	/* Both's: */
	char node[64];		/* SPACE_NODE, which events name (sp_event.c) */
	int event_warned;	/* an event could not be written: said once */
};

#endif
