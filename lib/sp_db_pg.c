/*
 * sp_db_pg: the state DB on a PostgreSQL server that many nodes share
 * (sp_db_int.h), through libpq.  libpq is loaded on first use, as libcurl
 * is: a node on SQLite never maps it.
 *
 * Every statement is one round trip (PQexecParams), and none but a
 * migration runs inside a transaction: a lifecycle change is one
 * compare-and-set UPDATE, so no lock is held while a command waits on a
 * VM, btrfs or the network.  A server that is gone is SP_E_DB with temp
 * set (exit 111); the next statement connects again.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "sp_core.h"
#include "sp_db_int.h"

#define PQ_FUNCS(F) \
	F(PQclear) \
	F(PQcmdTuples) \
	F(PQconnectdbParams) \
	F(PQconsumeInput) \
	F(PQerrorMessage) \
	F(PQexec) \
	F(PQexecParams) \
	F(PQfinish) \
	F(PQfreemem) \
	F(PQgetisnull) \
	F(PQgetvalue) \
	F(PQnotifies) \
	F(PQntuples) \
	F(PQreset) \
	F(PQresultErrorField) \
	F(PQresultErrorMessage) \
	F(PQresultStatus) \
	F(PQsetNoticeProcessor) \
	F(PQsocket) \
	F(PQstatus)

static union {
	struct {
#define PQ_PTR(n) __typeof__(n) *n;
		PQ_FUNCS(PQ_PTR)
#undef PQ_PTR
	};
	void *slot[0 PQ_FUNCS(SP_DL_ONE)];
} pq;

static const char *const names[] = {
#define PQ_NAME(n) #n,
	PQ_FUNCS(PQ_NAME)
#undef PQ_NAME
};
SP_DL_TABLE_CHECK(names, pq);

static struct sp_dl dl = SP_DL_INIT("libpq.so.5", "libpq", SP_E_DB);

/* Parameters' types (pg_type's OIDs, which are fixed): text and int8. */
#define TEXT_OID	25
#define INT8_OID	20
#define PARAMS_MAX	16

/* How long a statement waits for a lock another holds, as SQLite's
 * busy_wait does; and for a server that does not answer a connect. */
#define LOCK_TIMEOUT	"-c lock_timeout=10000"
#define CONNECT_TIMEOUT	"10"

/* Migrations run one at a time on a server: under this advisory lock. */
#define MIGRATE_LOCK	"5350414345"	/* "SPACE" */

static void
quiet(void *arg, const char *message)
{
	/* NOTICEs ("already exists, skipping") are not the user's business. */
}

/* One line of libpq's message (they end in a newline, or run on). */
static const char *
one_line(const char *msg, char *buf, size_t n)
{
	size_t len = strcspn(msg ? msg : "", "\n");

	if (msg == NULL || len == 0)
		return "the server closed the connection";
	snprintf(buf, n, "%.*s", (int)len, msg);
	return buf;
}

/*
 * An error's token: a broken unique key is SP_E_EXISTS; a connection, a
 * server shutting down, a lock not had in time, a serialization failure or
 * a deadlock is worth a retry (temp, exit 111); the rest is SP_E_DB.
 */
static int
pg_err(struct sp_db *db, PGresult *res, const char *what, struct sp_err *e)
{
	const char *state = res ? pq.PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = res ? pq.PQresultErrorMessage(res) : NULL;
	char buf[512];
	int temp;

	if (msg == NULL || *msg == '\0')
		msg = pq.PQerrorMessage(db->h);
	msg = one_line(msg, buf, sizeof buf);
	if (state != NULL && strcmp(state, "23505") == 0)
		return sp_err_set(e, SP_E_EXISTS, 0, "%s: %s", what, msg);
	temp = state == NULL || pq.PQstatus(db->h) != CONNECTION_OK ||
	    strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0 ||
	    strncmp(state, "53", 2) == 0 || strcmp(state, "40001") == 0 ||
	    strcmp(state, "40P01") == 0 || strcmp(state, "55P03") == 0;
	/* Named, since "server closed the connection" could be any server. */
	return sp_err_set(e, SP_E_DB, temp, "%s: PostgreSQL: %s", what, msg);
}

static int exec_sql(struct sp_db *, const char *, const char *,
    struct sp_err *);

/* A connection the server dropped is made again, once, before a statement;
 * a listener listens again (the server forgot it with the session). */
static int
connected(struct sp_db *db, const char *what, struct sp_err *e)
{
	if (pq.PQstatus(db->h) == CONNECTION_OK)
		return 0;
	pq.PQreset(db->h);
	if (pq.PQstatus(db->h) != CONNECTION_OK)
		return pg_err(db, NULL, what, e);
	return db->listening ? exec_sql(db, "listen", "LISTEN space_sandbox",
	    e) : 0;
}

static int
q_run(struct sp_db_q *q, const char *what, const char *sql, const char *types,
    va_list ap, struct sp_err *e)
{
	struct sp_db *db = q->db;
	const char *values[PARAMS_MAX];
	char ints[PARAMS_MAX][24];
	unsigned int oids[PARAMS_MAX];
	PGresult *res;
	int i, n = (int)strlen(types);

	if (n > PARAMS_MAX)
		return sp_err_set(e, SP_E_INTERNAL, 0, "%s: %d parameters", what, n);
	for (i = 0; i < n; i++) {
		oids[i] = types[i] == 's' ? TEXT_OID : INT8_OID;
		switch (types[i]) {
		case 's':
			values[i] = va_arg(ap, const char *);
			break;
		case 'i':
			snprintf(ints[i], sizeof ints[i], "%d", va_arg(ap, int));
			values[i] = ints[i];
			break;
		default:
			snprintf(ints[i], sizeof ints[i], "%lld",
			    (long long)va_arg(ap, int64_t));
			values[i] = ints[i];
		}
	}
	if (connected(db, what, e) == -1)
		return -1;
	db->round_trips++;
	res = pq.PQexecParams(db->h, sql, n, oids, values, NULL, NULL, 0);
	switch (pq.PQresultStatus(res)) {
	case PGRES_TUPLES_OK:
	case PGRES_COMMAND_OK:
		q->h = res;
		q->rows = pq.PQntuples(res);
		q->row = -1;
		return 0;
	default:
		pg_err(db, res, what, e);
		pq.PQclear(res);
		return -1;
	}
}

static int
q_step(struct sp_db_q *q, const char *what, struct sp_err *e)
{
	if (q->row + 1 < q->rows) {
		q->row++;
		return 1;
	}
	q->changes = strtoll(pq.PQcmdTuples(q->h), NULL, 10);
	return 0;
}

static const char *
q_text(struct sp_db_q *q, int col)
{
	if (pq.PQgetisnull(q->h, q->row, col))
		return NULL;
	return pq.PQgetvalue(q->h, q->row, col);
}

static void
q_end(struct sp_db_q *q)
{
	pq.PQclear(q->h);
	q->h = NULL;
}

/* Runs sql (one or more statements, no parameters); 0 or -1. */
static int
exec_sql(struct sp_db *db, const char *what, const char *sql, struct sp_err *e)
{
	PGresult *res;
	int rc = 0;

	db->round_trips++;
	res = pq.PQexec(db->h, sql);
	if (pq.PQresultStatus(res) != PGRES_COMMAND_OK &&
	    pq.PQresultStatus(res) != PGRES_TUPLES_OK)
		rc = pg_err(db, res, what, e);
	pq.PQclear(res);
	return rc;
}

/* The version in space_schema; 0 when there is none yet, -1 on an error. */
static int
read_version(struct sp_db *db, struct sp_err *e)
{
	PGresult *res;
	const char *state;
	int v = -1;

	db->round_trips++;
	res = pq.PQexec(db->h, "SELECT version FROM space_schema");
	if (pq.PQresultStatus(res) == PGRES_TUPLES_OK)
		v = pq.PQntuples(res) == 1 ? atoi(pq.PQgetvalue(res, 0, 0)) : 0;
	else if ((state = pq.PQresultErrorField(res, PG_DIAG_SQLSTATE)) != NULL &&
	    strcmp(state, "42P01") == 0)
		v = 0;		/* undefined table: a new database */
	else
		pg_err(db, res, "schema version", e);
	pq.PQclear(res);
	return v;
}

static int
version(struct sp_db *db)
{
	struct sp_err e;

	return read_version(db, &e);
}

/*
 * The migrations in PostgreSQL's words (sp_db_int.h): INTEGER is BIGINT,
 * and each table made gets a rowid first, numbered as rows are inserted.
 * Returns a new string, or NULL when out of memory.
 */
static char *
dialect(const char *sql)
{
	static const char rowid[] = "rowid BIGSERIAL, ";
	/* Each CREATE TABLE (13 bytes and more) adds 17: 3n is room enough. */
	size_t n = strlen(sql), cap = n * 3 + 64, o = 0;
	const char *p = sql, *paren;
	char *out;

	if ((out = malloc(cap)) == NULL)
		return NULL;
	while (*p != '\0') {
		if (strncmp(p, "INTEGER", 7) == 0) {
			memcpy(out + o, "BIGINT", 6);
			o += 6;
			p += 7;
		} else if (strncmp(p, "CREATE TABLE ", 13) == 0 &&
		    (paren = strchr(p, '(')) != NULL) {
			memcpy(out + o, p, (size_t)(paren - p) + 1);
			o += (size_t)(paren - p) + 1;
			memcpy(out + o, rowid, sizeof rowid - 1);
			o += sizeof rowid - 1;
			p = paren + 1;
		} else
			out[o++] = *p++;
	}
	out[o] = '\0';
	return out;
}

static int
migrate(struct sp_db *db, const char *const migrations[], int n,
    struct sp_err *e)
{
	char set[96], *sql;
	int v;

	/* Read first, without the lock: every command opens the DB. */
	if ((v = read_version(db, e)) == n)
		return 0;
	if (v < 0)
		return -1;
	/* space_now(): the server's clock, the one every node's lease is
	 * read against (sp_db_int.h). */
	if (exec_sql(db, "migrate", "BEGIN; SELECT pg_advisory_xact_lock("
	    MIGRATE_LOCK "); CREATE TABLE IF NOT EXISTS space_schema"
	    " (version BIGINT NOT NULL); CREATE OR REPLACE FUNCTION space_now()"
	    " RETURNS BIGINT LANGUAGE SQL STABLE AS"
	    " 'SELECT CAST(floor(extract(epoch FROM now())) AS BIGINT)'", e) == -1)
		goto fail;
	if ((v = read_version(db, e)) < 0)
		goto fail;
	if (v > n) {
		sp_err_set(e, SP_E_DB, 0, "schema version %d is not one this build knows "
		    "(0..%d)", v, n);
		goto fail;
	}
	for (; v < n; v++) {
		if ((sql = dialect(migrations[v])) == NULL) {
			sp_err_sys(e, SP_E_INTERNAL, "out of memory");
			goto fail;
		}
		snprintf(set, sizeof set, "DELETE FROM space_schema;"
		    " INSERT INTO space_schema VALUES (%d)", v + 1);
		if (exec_sql(db, "migrate", sql, e) == -1 ||
		    exec_sql(db, "migrate", set, e) == -1) {
			free(sql);
			goto fail;
		}
		free(sql);
	}
	/* Every change of a sandbox row is told to whoever listens
	 * (sp_db_listen): "NODE ID" on the channel space_sandbox. */
	if (exec_sql(db, "migrate", "CREATE OR REPLACE FUNCTION space_notify()"
	    " RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
	    " IF TG_OP = 'DELETE' THEN"
	    "  PERFORM pg_notify('space_sandbox', OLD.node || ' ' || OLD.id);"
	    " ELSE"
	    "  PERFORM pg_notify('space_sandbox', NEW.node || ' ' || NEW.id);"
	    " END IF; RETURN NULL; END $$;"
	    " CREATE OR REPLACE TRIGGER space_notify AFTER INSERT OR UPDATE OR"
	    " DELETE ON sandboxes FOR EACH ROW EXECUTE FUNCTION space_notify()",
	    e) == -1)
		goto fail;
	return exec_sql(db, "migrate", "COMMIT", e);
fail:
	exec_sql(db, "rollback", "ROLLBACK", &(struct sp_err){ 0 });
	return -1;
}

static int
db_open(struct sp_db *db, const char *conninfo, struct sp_err *e)
{
	/* The caller's conninfo comes last, so that what it says wins. */
	const char *const keys[] = { "connect_timeout", "options",
	    "application_name", "dbname", NULL };
	const char *const values[] = { CONNECT_TIMEOUT, LOCK_TIMEOUT, "space",
	    conninfo, NULL };
	char buf[512];

	if (sp_dl_load_table(&dl, names, pq, e) == -1)
		return -1;
	if ((db->h = pq.PQconnectdbParams(keys, values, 1)) == NULL)
		return sp_err_sys(e, SP_E_INTERNAL, "out of memory");
	if (pq.PQstatus(db->h) != CONNECTION_OK)
		return sp_err_set(e, SP_E_DB, 1, "connect to PostgreSQL: %s",
		    one_line(pq.PQerrorMessage(db->h), buf, sizeof buf));
	pq.PQsetNoticeProcessor(db->h, quiet, NULL);
	return 0;
}

static int
listen_(struct sp_db *db, struct sp_err *e)
{
	if (connected(db, "listen", e) == -1 ||
	    exec_sql(db, "listen", "LISTEN space_sandbox", e) == -1)
		return -1;
	db->listening = 1;
	return 0;
}

/* 1 when a notification was waiting, and takes them all. */
static int
drain(struct sp_db *db)
{
	PGnotify *n;
	int got = 0;

	while ((n = pq.PQnotifies(db->h)) != NULL) {
		pq.PQfreemem(n);
		got = 1;
	}
	return got;
}

static int
wait_(struct sp_db *db, int timeout_ms, struct sp_err *e)
{
	struct pollfd pfd;
	int rc;

	if (drain(db))
		return 1;
	pfd.fd = pq.PQsocket(db->h);
	pfd.events = POLLIN;
	if (pfd.fd < 0)
		return pg_err(db, NULL, "wait", e);
	rc = poll(&pfd, 1, timeout_ms);
	if (rc == -1)
		return errno == EINTR ? 0 : sp_err_sys(e, SP_E_IO, "poll");
	if (rc == 0)
		return 0;
	if (!pq.PQconsumeInput(db->h))
		return pg_err(db, NULL, "wait", e);
	return drain(db);
}

static void
db_close(struct sp_db *db)
{
	if (db->h != NULL)
		pq.PQfinish(db->h);
}

const struct sp_db_ops sp_db_pg_ops = {
	.name = "postgresql",
	.begin = "BEGIN",
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
