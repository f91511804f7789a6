/*
 * sp_db: the state DB, on SQLite for one node (sqlite:PATH) or on a
 * PostgreSQL server that many nodes share (postgresql://..., or any libpq
 * conninfo after "postgresql:").  The schema grows by numbered migrations,
 * the same on both, and every lifecycle change is a compare-and-set on
 * (state, gen) in one UPDATE, so two commands racing on one sandbox cannot
 * both win, on one node or on two.  The queries are written once, in the
 * SQL both take (sp_db_int.h); sp_db_sqlite.c and sp_db_pg.c run them.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sp_core.h"
#include "sp_db_int.h"

/* This file's short names of the helpers sp_db_int.h shares. */
#define q_start		sp_db_q_start
#define q_step		sp_db_q_step
#define q_end		sp_db_q_end
#define col_text	sp_db_q_text
#define col_int		sp_db_q_int
#define copy_col	sp_db_q_copy
#define write_sql	sp_db_q_write
#define each_row	sp_db_q_each
#define one_row		sp_db_q_one

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
	/* 7: the nodes of a cluster: what each can hold, whether it takes new
	 * sandboxes ('ready') or not ('draining'), and a lease it renews on
	 * the DB's clock (space_now()). */
	"ALTER TABLE nodes ADD COLUMN state TEXT NOT NULL DEFAULT 'ready';"
	"ALTER TABLE nodes ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE nodes ADD COLUMN memory_mib INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE nodes ADD COLUMN vcpus INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE nodes ADD COLUMN disk_free INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE nodes ADD COLUMN virt TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE nodes ADD COLUMN templates TEXT NOT NULL DEFAULT '[]';",
	/* 8: desired state.  A sandbox's want is the state asked of it (a
	 * command on another node records it; the sandbox's node carries it
	 * out and clears it), want_error why that failed; placed says why
	 * the scheduler put it on its node.  A sandbox not placed yet has
	 * node ''. */
	"ALTER TABLE sandboxes ADD COLUMN want_error TEXT;"
	"ALTER TABLE sandboxes ADD COLUMN placed TEXT;"
	"CREATE INDEX sandboxes_node ON sandboxes (node, state);",
	/* 9: what the credential store and the egress policies keep, for a
	 * cluster whose nodes share this DB (on one node's SQLite they stay
	 * files under its root).  A document is one JSON text by kind
	 * ('cred', 'egress'), scope and name; a rate is one credential's
	 * token bucket for one sandbox; the audit is the credential store's
	 * log, one JSON line a row. */
	"CREATE TABLE documents ("
	"  kind TEXT NOT NULL,"
	"  scope TEXT NOT NULL,"
	"  name TEXT NOT NULL,"
	"  body TEXT NOT NULL,"
	"  PRIMARY KEY (kind, scope, name));"
	"CREATE INDEX documents_name ON documents (kind, name);"
	"CREATE TABLE cred_rates ("
	"  cred TEXT NOT NULL,"
	"  sandbox TEXT NOT NULL,"
	"  tokens INTEGER NOT NULL,"
	"  last INTEGER NOT NULL,"
	"  PRIMARY KEY (cred, sandbox));"
	"CREATE INDEX cred_rates_sandbox ON cred_rates (sandbox);"
	"CREATE TABLE cred_audit ("
	"  time INTEGER NOT NULL,"
	"  line TEXT NOT NULL);"
	"CREATE INDEX cred_audit_time ON cred_audit (time);",
	/* 10: one row that every scheduler pass updates first, so that
	 * passes on many nodes take turns: each sees what the one before
	 * placed, and no two fill one node past what it has. */
	"CREATE TABLE scheduler ("
	"  one INTEGER PRIMARY KEY,"
	"  passes INTEGER NOT NULL);"
	"INSERT INTO scheduler (one, passes) VALUES (1, 0);",
	/* 11: the tenants of the HTTP API (space-apid) with their quotas
	 * (0: none) and the templates they may use (a JSON array of names;
	 * NULL: every one), and their keys: an id, the BLAKE2b hash of the secret
	 * (the key itself is shown once), a rate a minute (0: none); an
	 * admin key has no tenant.  A sandbox says its tenant (its label
	 * "tenant", copied when its row is written, so a quota is counted
	 * in the statement that creates), when it expires and what then
	 * (kill, pause), and the token its guest's API is called with. */
	"CREATE TABLE tenants ("
	"  name TEXT PRIMARY KEY,"
	"  created INTEGER NOT NULL,"
	"  max_running INTEGER NOT NULL,"
	"  max_vcpus INTEGER NOT NULL,"
	"  max_memory_mib INTEGER NOT NULL,"
	"  max_disk_gb INTEGER NOT NULL,"
	"  templates TEXT);"
	"CREATE TABLE api_keys ("
	"  id TEXT PRIMARY KEY,"
	"  tenant TEXT,"
	"  admin INTEGER NOT NULL,"
	"  hash TEXT NOT NULL,"
	"  rate INTEGER NOT NULL,"
	"  created INTEGER NOT NULL);"
	"CREATE INDEX api_keys_tenant ON api_keys (tenant);"
	"ALTER TABLE sandboxes ADD COLUMN tenant TEXT;"
	"ALTER TABLE sandboxes ADD COLUMN expires INTEGER;"
	"ALTER TABLE sandboxes ADD COLUMN on_expiry TEXT;"
	"ALTER TABLE sandboxes ADD COLUMN access_token TEXT;"
	"CREATE INDEX sandboxes_tenant ON sandboxes (tenant, state);"
	"CREATE INDEX sandboxes_expires ON sandboxes (expires);",
	/* 12: a sandbox's disk when it is not its template's (space-create
	 * --disk-gb): GiB, 0 for the template's.  A tenant's disk quota
	 * counts the larger of the two. */
	"ALTER TABLE sandboxes ADD COLUMN disk_gb INTEGER NOT NULL DEFAULT 0;",
	/* 13: a sandbox's CPU quota when it is not the node's (space-create
	 * --cpu-quota): hundredths of a CPU, 0 for the node's. */
	"ALTER TABLE sandboxes ADD COLUMN cpu_pct INTEGER NOT NULL DEFAULT 0;",
	/* 14: a sandbox's idle tiers when they are not the node's
	 * (space-create --idle): "pause:15m suspend:12h", or "none". */
	"ALTER TABLE sandboxes ADD COLUMN idle TEXT;",
	/* 15: the event log (sp_event.c), appended to and read in rowid
	 * order: when (ms), who (uid:N, tenant:NAME, admin:KEY), through
	 * which program, what, to which sandbox, on which node, how it
	 * ended (ok or error, and the error's token), how long it took
	 * (ms) and what else it said (a JSON object). */
	"CREATE TABLE events ("
	"  time INTEGER NOT NULL,"
	"  actor TEXT NOT NULL,"
	"  via TEXT NOT NULL,"
	"  action TEXT NOT NULL,"
	"  sandbox TEXT,"
	"  node TEXT NOT NULL,"
	"  outcome TEXT NOT NULL,"
	"  error TEXT,"
	"  ms INTEGER,"
	"  detail TEXT);"
	"CREATE INDEX events_time ON events (time);"
	"CREATE INDEX events_sandbox ON events (sandbox);",
	/* 16: handles.  A sandbox's name (space-create --name), unique in its
	 * tenant ('' for none), stands for its id; a create's request id is
	 * unique the same way, so a retry finds what the first try made. */
	"ALTER TABLE sandboxes ADD COLUMN name TEXT;"
	"ALTER TABLE sandboxes ADD COLUMN request_id TEXT;"
	"CREATE UNIQUE INDEX sandboxes_name ON sandboxes"
	" (COALESCE(tenant, ''), name) WHERE name IS NOT NULL;"
	"CREATE UNIQUE INDEX sandboxes_request_id ON sandboxes"
	" (COALESCE(tenant, ''), request_id) WHERE request_id IS NOT NULL;",
	/* 17: volumes (sp_db_volume.c): a disk of their own that sandboxes
	 * mount, kept apart from any sandbox; its name unique in its tenant,
	 * where it is mounted and its snapshots JSON arrays under gen; the
	 * last sandbox that mounted it read-write, and an epoch counting
	 * the changes of that writer. */
	"CREATE TABLE volumes ("
	"  id TEXT PRIMARY KEY,"
	"  name TEXT NOT NULL,"
	"  tenant TEXT,"
	"  node TEXT NOT NULL,"
	"  bytes INTEGER NOT NULL,"
	"  created INTEGER NOT NULL,"
	"  gen INTEGER NOT NULL,"
	"  origin TEXT,"
	"  mounts TEXT NOT NULL,"
	"  snaps TEXT NOT NULL,"
	"  writer TEXT,"
	"  epoch INTEGER NOT NULL DEFAULT 0);"
	"CREATE UNIQUE INDEX volumes_name ON volumes (COALESCE(tenant, ''), name);"
	"CREATE INDEX volumes_node ON volumes (node);",
};

#define NMIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

/* Starts sql with its values (types as the backends' run says). */
int
q_start(struct sp_db *db, struct sp_db_q *q, const char *what,
    const char *sql, struct sp_err *e, const char *types, ...)
{
	va_list ap;
	int rc;

	memset(q, 0, sizeof *q);
	q->db = db;
	va_start(ap, types);
	rc = db->ops->run(q, what, sql, types, ap, e);
	va_end(ap);
	return rc;
}

int
q_step(struct sp_db_q *q, const char *what, struct sp_err *e)
{
	return q->db->ops->step(q, what, e);
}

void
q_end(struct sp_db_q *q)
{
	if (q->h != NULL)
		q->db->ops->end(q);
}

const char *
col_text(struct sp_db_q *q, int col)
{
	return q->db->ops->text(q, col);
}

int64_t
col_int(struct sp_db_q *q, int col)
{
	const char *s = col_text(q, col);

	return s ? strtoll(s, NULL, 10) : 0;
}

void
copy_col(char *dst, size_t n, struct sp_db_q *q, int col)
{
	const char *s = col_text(q, col);

	snprintf(dst, n, "%s", s ? s : "");
}

/*
 * Runs one writing statement with its values bound in order, as types says:
 * s text, i int, I int64 (a NULL text binds NULL).  Returns the rows it
 * changed, or -1.
 */
int64_t
write_sql(struct sp_db *db, const char *what, const char *sql,
    struct sp_err *e, const char *types, ...)
{
	struct sp_db_q q = { .db = db };
	va_list ap;
	int rc;

	va_start(ap, types);
	rc = db->ops->run(&q, what, sql, types, ap, e);
	va_end(ap);
	if (rc == -1)
		return -1;
	while ((rc = q_step(&q, what, e)) == 1)
		;
	q_end(&q);
	return rc == -1 ? -1 : q.changes;
}

/*
 * Steps q to its end, giving each row to one(q, arg), and ends it.  one
 * returns 0, -1 when the caller's function failed (the loop goes on and the
 * result is -1), or -2 when it ran out of memory (the loop stops).
 */
int
each_row(struct sp_db_q *q, const char *what,
    int (*one)(struct sp_db_q *, void *), void *arg, struct sp_err *e)
{
	int s, r, rc = 0;

	while ((s = q_step(q, what, e)) == 1) {
		if ((r = one(q, arg)) == -2) {
			rc = sp_err_sys(e, SP_E_INTERNAL, "out of memory");
			break;
		}
		if (r == -1)
			rc = -1;
	}
	if (s == -1)
		rc = -1;
	q_end(q);
	return rc;
}

int
sp_db_schema_version(struct sp_db *db)
{
	return db->ops->version(db);
}

const char *
sp_db_backend(const struct sp_db *db)
{
	return db->ops->name;
}

int64_t
sp_db_round_trips(const struct sp_db *db)
{
	return db->round_trips;
}

void
sp_db_checkpoint_later(struct sp_db *db)
{
	db->checkpoint_later = 1;
}

int
sp_db_open(struct sp_db **dbp, const struct sp_conf *c, struct sp_err *e)
{
	const struct sp_db_ops *ops;
	const char *target;
	struct sp_db *db;

	*dbp = NULL;
	if (strncmp(c->db, "sqlite:", 7) == 0) {
		ops = &sp_db_sqlite_ops;
		target = c->db + 7;
	} else if (strncmp(c->db, "postgresql://", 13) == 0 ||
	    strncmp(c->db, "postgres://", 11) == 0) {
		ops = &sp_db_pg_ops;
		target = c->db;
	} else if (strncmp(c->db, "postgresql:", 11) == 0) {
		ops = &sp_db_pg_ops;
		target = c->db + 11;
	} else
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "unsupported SPACE_DB '%s'",
		    c->db);
	if ((db = calloc(1, sizeof *db)) == NULL)
		return sp_err_sys(e, SP_E_INTERNAL, "calloc");
	db->ops = ops;
	snprintf(db->node, sizeof db->node, "%s", c->node);
	if (ops->open(db, target, e) == -1 ||
	    ops->migrate(db, migrations, NMIGRATIONS, e) == -1) {
		sp_db_close(db);
		return -1;
	}
	*dbp = db;
	return 0;
}

void
sp_db_close(struct sp_db *db)
{
	const char *count = getenv("SPACE_DB_COUNT");
	FILE *f;

	if (db == NULL)
		return;
	/* For bench/cluster: the statements this handle ran, appended. */
	if (count != NULL && *count != '\0' && (f = fopen(count, "a")) != NULL) {
		fprintf(f, "%s %lld\n", db->ops->name, (long long)db->round_trips);
		fclose(f);
	}
	db->ops->close(db);
	free(db);
}

void
sp_db_row_release(struct sp_sandbox_row *r)
{
	free(r->labels);
	free(r->env);
	free(r->recovered);
	free(r->placed);
	r->labels = r->env = r->recovered = r->placed = NULL;
}

#define SANDBOX_COLS "id, state, gen, template, node, created, memory_mib, " \
	"vcpus, labels, CASE WHEN pool IS NULL THEN 0 ELSE 1 END, env, " \
	"recovered, COALESCE(want, ''), COALESCE(want_error, ''), placed, " \
	"disk_gb, cpu_pct, COALESCE(expires, 0), COALESCE(on_expiry, ''), " \
	"COALESCE(idle, ''), updated, COALESCE(name, ''), " \
	"COALESCE(request_id, '')"

static int
row_from(struct sp_db_q *q, struct sp_sandbox_row *r)
{
	const char *s;
	int st;

	memset(r, 0, sizeof *r);
	copy_col(r->id, sizeof r->id, q, 0);
	st = sp_state_parse(col_text(q, 1));
	r->state = st < 0 ? SP_ST_FAILED : (enum sp_state)st;
	r->gen = col_int(q, 2);
	copy_col(r->template, sizeof r->template, q, 3);
	copy_col(r->node, sizeof r->node, q, 4);
	r->created = col_int(q, 5);
	r->memory_mib = (int)col_int(q, 6);
	r->vcpus = (int)col_int(q, 7);
	s = col_text(q, 8);
	r->labels = strdup(s ? s : "{}");
	r->pod = (int)col_int(q, 9);
	s = col_text(q, 10);
	r->env = strdup(s ? s : "[]");
	if ((s = col_text(q, 11)) != NULL && (r->recovered = strdup(s)) == NULL)
		return -1;
	copy_col(r->want, sizeof r->want, q, 12);
	copy_col(r->want_error, sizeof r->want_error, q, 13);
	if ((s = col_text(q, 14)) != NULL && (r->placed = strdup(s)) == NULL)
		return -1;
	r->disk_gb = (int)col_int(q, 15);
	r->cpu_pct = (int)col_int(q, 16);
	r->expires = col_int(q, 17);
	copy_col(r->on_expiry, sizeof r->on_expiry, q, 18);
	copy_col(r->idle, sizeof r->idle, q, 19);
	r->updated = col_int(q, 20);
	copy_col(r->name, sizeof r->name, q, 21);
	copy_col(r->request_id, sizeof r->request_id, q, 22);
	return r->labels == NULL || r->env == NULL ? -1 : 0;
}

/* The tenant a sandbox's labels name ("" for none). */
static void
labels_tenant(const char *labels, char out[SP_NAME_MAX + 1])
{
	json_t *j = labels ? json_loads(labels, 0, NULL) : NULL;
	const char *t = json_string_value(json_object_get(j, "tenant"));

	snprintf(out, SP_NAME_MAX + 1, "%s", t && strlen(t) <= SP_NAME_MAX ?
	    t : "");
	json_decref(j);
}

/*
 * What a statement that writes a tenant's sandbox adds to its WHERE: that
 * tenant T's quotas (0: none) still hold with one more sandbox of MEM MiB,
 * VCPUS and template TPL (name@digest).  Running counts the sandboxes whose
 * VM runs (or is being made, restored or recovered); memory counts the
 * paused ones too, whose memory stays taken; disk counts every sandbox the
 * tenant has, each its template's disk size (what its guest can fill).  A
 * tenant not in tenants has no quota.
 */
#define QUOTA_LIVE "s.tenant = t.name AND s.pool IS NULL AND s.state IN" \
	" ('creating', 'running', 'restoring', 'recovering')"
#define QUOTA_HELD "s.tenant = t.name AND s.pool IS NULL AND s.state IN" \
	" ('creating', 'running', 'restoring', 'recovering', 'paused'," \
	" 'suspending')"
#define GIB_OF(X) "CAST(" X " AS BIGINT) * 1073741824"
#define QUOTA_FITS(T, MEM, VCPUS, TPL, DISK) " NOT EXISTS (SELECT 1 FROM tenants t" \
	" WHERE t.name = " T " AND ((t.max_running > 0 AND (SELECT COUNT(*)" \
	" FROM sandboxes s WHERE " QUOTA_LIVE ") >= t.max_running) OR" \
	" (t.max_vcpus > 0 AND (SELECT COALESCE(SUM(s.vcpus), 0) FROM" \
	" sandboxes s WHERE " QUOTA_LIVE ") + " VCPUS " > t.max_vcpus) OR" \
	" (t.max_memory_mib > 0 AND (SELECT COALESCE(SUM(s.memory_mib), 0)" \
	" FROM sandboxes s WHERE " QUOTA_HELD ") + " MEM " > t.max_memory_mib)" \
	" OR (t.max_disk_gb > 0 AND (SELECT COALESCE(SUM(CASE WHEN " \
	GIB_OF("s.disk_gb") " > d.disk_bytes THEN " GIB_OF("s.disk_gb") \
	" ELSE d.disk_bytes END), 0)" \
	" FROM sandboxes s JOIN templates d ON s.template = d.name || '@' ||" \
	" d.digest WHERE s.tenant = t.name AND s.pool IS NULL) +" \
	" (SELECT CASE WHEN " GIB_OF(DISK) " > COALESCE(MAX(disk_bytes), 0)" \
	" THEN " GIB_OF(DISK) " ELSE COALESCE(MAX(disk_bytes), 0) END FROM" \
	" templates WHERE name || '@' || digest = " TPL ")" \
	" > t.max_disk_gb * 1073741824)))"

/*
 * A write that counts a tenant's quota must see every earlier one: SQLite
 * runs one writer at a time, and on PostgreSQL the tenant's row is locked
 * first (in a transaction of our own unless one is open), so the next
 * statement's snapshot holds what the last holder committed.  *own: this
 * call began the transaction, and tenant_unlock ends it.
 */
static int
tenant_lock(struct sp_db *db, const char *tenant, int *own, struct sp_err *e)
{
	*own = 0;
	if (db->ops != &sp_db_pg_ops)
		return 0;
	if (!db->txn) {
		if (sp_db_begin(db, e) == -1)
			return -1;
		*own = 1;
	}
	if (write_sql(db, "lock tenant", "SELECT 1 FROM tenants WHERE"
	    " name = $1 FOR UPDATE", e, "s", tenant) == -1) {
		if (*own)
			sp_db_rollback(db);
		*own = 0;
		return -1;
	}
	return 0;
}

static int
tenant_unlock(struct sp_db *db, int own, int ok, struct sp_err *e)
{
	if (!own)
		return ok ? 0 : -1;
	if (!ok) {
		sp_db_rollback(db);
		return -1;
	}
	return sp_db_commit(db, e);
}

static int
quota_exceeded(struct sp_db *db, const char *tenant, struct sp_err *e)
{
	return sp_err_set(e, SP_E_QUOTA_EXCEEDED, 0, "tenant %s is at its "
	    "quota (space-tenant ls shows it and what it uses)", tenant);
}

/* ---- the event log's one writer (space-events reads it: sp_event.c) ---- */

/* The API's caller, for the thread serving it. */
static _Thread_local char actor_of_thread[96];

void
sp_event_actor(const char *actor)
{
	snprintf(actor_of_thread, sizeof actor_of_thread, "%s",
	    actor != NULL ? actor : "");
}

int
sp_event_add(struct sp_db *db, const struct sp_event *ev, struct sp_err *e)
{
	char actor[sizeof actor_of_thread], ms[24];
	char *detail = NULL;
	int64_t n;

	if (ev->actor != NULL)
		snprintf(actor, sizeof actor, "%s", ev->actor);
	else if (actor_of_thread[0] != '\0')
		memcpy(actor, actor_of_thread, sizeof actor);
	else
		snprintf(actor, sizeof actor, "uid:%u", (unsigned)getuid());
	snprintf(ms, sizeof ms, "%lld", (long long)ev->ms);
	if (ev->detail != NULL && json_object_size(ev->detail) > 0 &&
	    (detail = json_dumps(ev->detail, JSON_COMPACT)) == NULL)
		return sp_err_sys(e, SP_E_INTERNAL, "out of memory");
	n = sp_db_q_write(db, "record event", "INSERT INTO events (time, actor,"
	    " via, action, sandbox, node, outcome, error, ms, detail) VALUES"
	    " ($1, $2, $3, $4, NULLIF($5, ''), $6, $7, $8, CAST($9 AS BIGINT),"
	    " $10)", e, "Isssssssss", sp_wall_ms(), actor, sp_out_prog() ?
	    sp_out_prog() : "", ev->action, ev->sandbox ? ev->sandbox : "",
	    db->node, ev->error ? "error" : "ok", ev->error, ev->ms >= 0 ? ms :
	    NULL, detail);
	free(detail);
	return n < 0 ? -1 : 0;
}

void
sp_event_note(struct sp_db *db, const char *action, const char *sandbox,
    const char *error, int64_t ms, json_t *detail)
{
	struct sp_event ev = { .action = action, .sandbox = sandbox,
	    .error = error, .ms = ms, .detail = detail };
	struct sp_err e;

	if (db != NULL && sp_event_add(db, &ev, &e) == -1 &&
	    !db->event_warned) {
		db->event_warned = 1;
		sp_warn("the event log did not take an event: %s", e.msg);
	}
	json_decref(detail);
}

/* Every change of a sandbox's state is an event (sp_event.c). */
static void
state_event(struct sp_db *db, const char *id, const char *from,
    const char *to)
{
	sp_event_note(db, "state", id, NULL, -1, from != NULL ?
	    json_pack("{s:s, s:s}", "from", from, "to", to) :
	    json_pack("{s:s}", "to", to));
}

int
sp_db_sandbox_insert(struct sp_db *db, const struct sp_sandbox_row *r,
    struct sp_err *e)
{
	char tenant[SP_NAME_MAX + 1];
	int64_t n;
	int own;

	labels_tenant(r->labels, tenant);
	if (tenant[0] == '\0' || r->pod) {
		n = write_sql(db, "insert sandbox", "INSERT INTO sandboxes"
		    " (id, state, gen, template, node, created, memory_mib,"
		    " vcpus, labels, updated, env, want, disk_gb, cpu_pct,"
		    " name, request_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8,"
		    " $9, $6, $10, NULLIF($11, ''), $12, $13, NULLIF($14, ''),"
		    " NULLIF($15, ''))", e, "ssIssIiisssiiss",
		    r->id, sp_state_name(r->state), r->gen, r->template,
		    r->node, r->created, r->memory_mib, r->vcpus,
		    r->labels ? r->labels : "{}", r->env ? r->env : "[]",
		    r->want, r->disk_gb, r->cpu_pct, r->name, r->request_id);
	} else {
		if (tenant_lock(db, tenant, &own, e) == -1)
			return -1;
		n = write_sql(db, "insert sandbox", "INSERT INTO sandboxes"
		    " (id, state, gen, template, node, created, memory_mib,"
		    " vcpus, labels, updated, env, want, tenant, disk_gb,"
		    " cpu_pct, name, request_id) SELECT $1, $2, $3, $4, $5, $6,"
		    " $7, $8, $9, $6, $10, NULLIF($11, ''), $12, $13, $14,"
		    " NULLIF($15, ''), NULLIF($16, '') WHERE"
		    QUOTA_FITS("$12", "$7", "$8", "$4", "$13"), e,
		    "ssIssIiissssiiss", r->id,
		    sp_state_name(r->state), r->gen, r->template, r->node,
		    r->created, r->memory_mib, r->vcpus, r->labels, r->env ?
		    r->env : "[]", r->want, tenant, r->disk_gb, r->cpu_pct,
		    r->name, r->request_id);
		if (n == 0)
			quota_exceeded(db, tenant, e);
		if (tenant_unlock(db, own, n > 0, e) == -1)
			n = -1;
	}
	if (n > 0) {
		state_event(db, r->id, NULL, sp_state_name(r->state));
		return 0;
	}
	if (e->code == SP_E_EXISTS && r->name[0] != '\0' &&
	    r->request_id[0] != '\0')
		sp_err_set(e, SP_E_EXISTS, 0, "a sandbox named '%s' or of "
		    "request id '%s' exists", r->name, r->request_id);
	else if (e->code == SP_E_EXISTS && r->name[0] != '\0')
		sp_err_set(e, SP_E_EXISTS, 0, "a sandbox named '%s' exists",
		    r->name);
	else if (e->code == SP_E_EXISTS && r->request_id[0] != '\0')
		sp_err_set(e, SP_E_EXISTS, 0, "a sandbox of request id '%s' "
		    "exists", r->request_id);
	else if (e->code == SP_E_EXISTS)
		sp_err_set(e, SP_E_EXISTS, 0, "sandbox %s exists", r->id);
	return -1;
}

int
sp_db_sandbox_by_handle(struct sp_db *db, const char *tenant, int request,
    const char *handle, char id[SP_ID_LEN + 1], struct sp_err *e)
{
	struct sp_db_q q;
	int rc, n = 0;

	/* Without a tenant, any tenant's: two are one too many. */
	if (q_start(db, &q, "find by handle", request ? "SELECT id, COALESCE("
	    "tenant, '') FROM sandboxes WHERE request_id = $1 AND ($2 IS NULL"
	    " OR COALESCE(tenant, '') = $2) ORDER BY id LIMIT 2" : "SELECT id,"
	    " COALESCE(tenant, '') FROM sandboxes WHERE name = $1 AND ($2 IS"
	    " NULL OR COALESCE(tenant, '') = $2) ORDER BY id LIMIT 2", e, "ss",
	    handle, tenant) == -1)
		return -1;
	while ((rc = q_step(&q, "find by handle", e)) == 1)
		if (n++ == 0)
			copy_col(id, SP_ID_LEN + 1, &q, 0);
	q_end(&q);
	if (rc == -1)
		return -1;
	if (n == 0)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no sandbox %s '%s'",
		    request ? "of request id" : "named", handle);
	if (n > 1)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "sandboxes of more than "
		    "one tenant are named '%s': name it by its id", handle);
	return 0;
}

/*
 * Runs a query of one row (or none) and gives it to one(q, arg): 0, or -1
 * with e set, to not_found when there is no row.
 */
int
one_row(struct sp_db_q *q, const char *what, const char *not_found,
    int (*one)(struct sp_db_q *, void *), void *arg, struct sp_err *e)
{
	int rc = q_step(q, what, e);

	if (rc == 1)
		rc = one(q, arg) == 0 ? 0 : sp_err_sys(e, SP_E_INTERNAL,
		    "out of memory");
	else if (rc == 0)
		rc = sp_err_set(e, SP_E_NOT_FOUND, 0, "%s", not_found);
	q_end(q);
	return rc;
}

static int
get_sandbox(struct sp_db_q *q, void *arg)
{
	return row_from(q, arg);
}

int
sp_db_sandbox_get(struct sp_db *db, const char *id, struct sp_sandbox_row *r,
    struct sp_err *e)
{
	struct sp_db_q q;

	if (q_start(db, &q, "get sandbox", "SELECT " SANDBOX_COLS " FROM"
	    " sandboxes WHERE id = $1", e, "s", id) == -1)
		return -1;
	return one_row(&q, "get sandbox", "no such sandbox", get_sandbox, r, e);
}

struct each_sandbox {
	int (*fn)(const struct sp_sandbox_row *, void *);
	void *arg;
};

static int
one_sandbox(struct sp_db_q *q, void *arg)
{
	struct each_sandbox *a = arg;
	struct sp_sandbox_row r;
	int rc;

	if (row_from(q, &r) == -1) {
		sp_db_row_release(&r);
		return -2;
	}
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
	struct sp_db_q q;
	const char *name = NULL;

	if (state >= 0 && state != SP_DB_WITH_PODS)
		name = sp_state_name(state);
	if (q_start(db, &q, "list sandboxes", "SELECT " SANDBOX_COLS " FROM"
	    " sandboxes WHERE ($1 IS NULL OR state = $1) AND (pool IS NULL OR"
	    " $2 = 1) ORDER BY created, id", e, "si", name,
	    state == SP_DB_WITH_PODS) == -1)
		return -1;
	return each_row(&q, "list sandboxes", one_sandbox, &a, e);
}

int
sp_db_sandbox_delete(struct sp_db *db, const char *id, struct sp_err *e)
{
	/* Its snapshots' rows go with it (their subvolumes went first). */
	if (write_sql(db, "delete snapshots", "DELETE FROM snapshots WHERE"
	    " id = $1", e, "s", id) == -1)
		return -1;
	if (write_sql(db, "delete sandbox", "DELETE FROM sandboxes WHERE"
	    " id = $1", e, "s", id) == -1)
		return -1;
	state_event(db, id, NULL, "removed");
	return 0;
}

int
sp_db_transition(struct sp_db *db, const char *id, enum sp_state to,
    int64_t expect_gen, struct sp_sandbox_row *out, struct sp_err *e)
{
	struct sp_sandbox_row r = { 0 };
	int64_t n;

	/* Read, check, and write only if nothing moved in between: the
	 * UPDATE is the compare-and-set, and no transaction stays open. */
	if (sp_db_sandbox_get(db, id, &r, e) == -1)
		return -1;
	if (!sp_state_can(r.state, to)) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "cannot go from %s to %s",
		    sp_state_name(r.state), sp_state_name(to));
		goto fail;
	}
	if (expect_gen >= 0 && r.gen != expect_gen) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "changed by another command "
		    "(generation %lld, expected %lld)", (long long)r.gen,
		    (long long)expect_gen);
		goto fail;
	}
	if ((n = write_sql(db, "transition", "UPDATE sandboxes SET state = $1,"
	    " gen = gen + 1, updated = $2 WHERE id = $3 AND gen = $4 AND"
	    " state = $5", e, "sIsIs", sp_state_name(to), (int64_t)time(NULL), id,
	    r.gen, sp_state_name(r.state))) == -1)
		goto fail;
	if (n != 1) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "changed by another command");
		goto fail;
	}
	state_event(db, id, sp_state_name(r.state), sp_state_name(to));
	r.state = to;
	r.gen++;
	if (out != NULL)
		*out = r;
	else
		sp_db_row_release(&r);
	return 0;
fail:
	sp_db_row_release(&r);
	return -1;
}

int
sp_db_template_insert(struct sp_db *db, const struct sp_template_row *t,
    struct sp_err *e)
{
	/* Re-importing the same bytes is the same template: keep the first row. */
	return write_sql(db, "insert template", "INSERT INTO templates (name,"
	    " digest, created, disk_bytes) VALUES ($1, $2, $3, $4)"
	    " ON CONFLICT DO NOTHING", e, "ssII", t->name, t->digest, t->created,
	    t->disk_bytes) == -1 ? -1 : 0;
}

static int
template_from(struct sp_db_q *q, void *arg)
{
	struct sp_template_row *t = arg;

	memset(t, 0, sizeof *t);
	copy_col(t->name, sizeof t->name, q, 0);
	copy_col(t->digest, sizeof t->digest, q, 1);
	t->created = col_int(q, 2);
	t->disk_bytes = col_int(q, 3);
	return 0;
}

int
sp_db_template_get(struct sp_db *db, const char *ref, struct sp_template_row *t,
    struct sp_err *e)
{
	char name[SP_NAME_MAX + 1];
	const char *at, *digest = NULL;
	struct sp_db_q q;
	size_t n;
	int rc;

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
	if (q_start(db, &q, "get template", "SELECT name, digest, created,"
	    " disk_bytes FROM templates WHERE name = $1 AND ($2 IS NULL OR"
	    " substr(digest, 1, length($2)) = $2)"
	    " ORDER BY created DESC, rowid DESC LIMIT 2", e, "ss", name,
	    digest) == -1)
		return -1;
	switch ((rc = q_step(&q, "get template", e))) {
	case 1:
		template_from(&q, t);
		rc = 0;
		if (digest != NULL && strlen(digest) < 64 &&
		    (rc = q_step(&q, "get template", e)) == 1)
			rc = sp_err_set(e, SP_E_BAD_INPUT, 0, "digest prefix '%s' "
			    "is ambiguous", digest);
		break;
	case 0:
		rc = sp_err_set(e, SP_E_NOT_FOUND, 0, "no template '%s'", name);
		break;
	}
	q_end(&q);
	return rc;
}

struct each_template {
	int (*fn)(const struct sp_template_row *, void *);
	void *arg;
};

static int
one_template(struct sp_db_q *q, void *arg)
{
	struct each_template *a = arg;
	struct sp_template_row t;

	template_from(q, &t);
	return a->fn(&t, a->arg) == -1 ? -1 : 0;
}

int
sp_db_template_each(struct sp_db *db,
    int (*fn)(const struct sp_template_row *, void *), void *arg,
    struct sp_err *e)
{
	struct each_template a = { fn, arg };
	struct sp_db_q q;

	if (q_start(db, &q, "list templates", "SELECT name, digest, created,"
	    " disk_bytes FROM templates ORDER BY name, created", e, "") == -1)
		return -1;
	return each_row(&q, "list templates", one_template, &a, e);
}

int
sp_db_template_delete(struct sp_db *db, const char *name, const char *digest,
    struct sp_err *e)
{
	return write_sql(db, "delete template", "DELETE FROM templates WHERE"
	    " name = $1 AND digest = $2", e, "ss", name, digest) == -1 ? -1 : 0;
}

int
sp_db_pool_set(struct sp_db *db, const char *template, int size,
    int memory_mib, int vcpus, struct sp_err *e)
{
	return write_sql(db, "set pool", "INSERT INTO pools (template, size,"
	    " memory_mib, vcpus) VALUES ($1, $2, $3, $4) ON CONFLICT (template)"
	    " DO UPDATE SET size = $2, memory_mib = $3, vcpus = $4", e, "siii",
	    template, size, memory_mib, vcpus) == -1 ? -1 : 0;
}

int
sp_db_pool_drop(struct sp_db *db, const char *template, struct sp_err *e)
{
	/* Only while it still asks for nothing: a set in between wins. */
	return write_sql(db, "drop pool", "DELETE FROM pools WHERE template = $1"
	    " AND size = 0", e, "s", template) == -1 ? -1 : 0;
}

struct each_pool {
	int (*fn)(const struct sp_pool_row *, void *);
	void *arg;
};

static int
one_pool(struct sp_db_q *q, void *arg)
{
	struct each_pool *a = arg;
	struct sp_pool_row p;

	memset(&p, 0, sizeof p);
	copy_col(p.template, sizeof p.template, q, 0);
	p.size = (int)col_int(q, 1);
	p.memory_mib = (int)col_int(q, 2);
	p.vcpus = (int)col_int(q, 3);
	p.ready = (int)col_int(q, 4);
	return a->fn(&p, a->arg) == -1 ? -1 : 0;
}

int
sp_db_pool_each(struct sp_db *db, const char *node,
    int (*fn)(const struct sp_pool_row *, void *), void *arg, struct sp_err *e)
{
	struct each_pool a = { fn, arg };
	struct sp_db_q q;

	if (q_start(db, &q, "list pools", "SELECT template, size, memory_mib,"
	    " vcpus, (SELECT count(*) FROM sandboxes WHERE pool = pools.template"
	    " AND state = 'paused' AND ($1 IS NULL OR node = $1)) FROM pools"
	    " ORDER BY template", e, "s", node) == -1)
		return -1;
	return each_row(&q, "list pools", one_pool, &a, e);
}

int
sp_db_pod_mark(struct sp_db *db, const char *id, const char *pool,
    struct sp_err *e)
{
	return write_sql(db, "mark pod", "UPDATE sandboxes SET pool = $1 WHERE"
	    " id = $2", e, "ss", pool, id) == -1 ? -1 : 0;
}

int
sp_db_pod_claim(struct sp_db *db, const char *node, const char *pool,
    const char *template, int memory_mib, int vcpus, const char *labels,
    const char *env, const char *name, const char *request_id, int quota,
    char id[SP_ID_LEN + 1], struct sp_err *e)
{
	char tenant[SP_NAME_MAX + 1];
	struct sp_db_q q;
	int rc, own = 0, fits;

	labels_tenant(labels, tenant);
	quota = quota && tenant[0] != '\0';
	if (quota && tenant_lock(db, tenant, &own, e) == -1)
		return -1;
	/* One statement: of many creates racing for pods, each gets its own
	 * (on PostgreSQL the pod picked is locked, and a racer picks another).
	 * Only this node's pods: a pod is a VM here.
	 * It is creating until it has woken and been told who it is. */
	if (q_start(db, &q, "claim pod", "UPDATE sandboxes SET pool = NULL,"
	    " state = 'creating', gen = gen + 1, updated = $6, labels = $5,"
	    " created = $6, env = $7, tenant = NULLIF($9, ''), name ="
	    " NULLIF($11, ''), request_id = NULLIF($12, '') WHERE id = (SELECT"
	    " id FROM sandboxes WHERE pool = $1 AND template = $2 AND"
	    " memory_mib = $3 AND vcpus = $4 AND state = 'paused' AND node = $8"
	    " ORDER BY created LIMIT 1 FOR UPDATE SKIP LOCKED) AND pool = $1 AND"
	    " state = 'paused' AND ($10 = 0 OR" QUOTA_FITS("$9", "$3", "$4", "$2",
	    "0")
	    ") RETURNING id", e, "ssiisIsssiss", pool, template, memory_mib,
	    vcpus, labels ? labels : "{}", (int64_t)time(NULL), env ? env :
	    "[]", node, tenant, quota, name ? name : "", request_id ?
	    request_id : "") == -1) {
		tenant_unlock(db, own, 0, e);
		return -1;
	}
	if ((rc = q_step(&q, "claim pod", e)) == 1)
		copy_col(id, SP_ID_LEN + 1, &q, 0);
	q_end(&q);
	if (rc == -1) {
		tenant_unlock(db, own, 0, e);
		return -1;
	}
	/* No pod taken: because of the quota?  Then a fresh create would be
	 * refused too. */
	if (rc == 0 && quota) {
		if (q_start(db, &q, "check quota", "SELECT 1 WHERE"
		    QUOTA_FITS("$1", "$2", "$3", "$4", "0"), e, "siis", tenant,
		    memory_mib, vcpus, template) == -1) {
			tenant_unlock(db, own, 0, e);
			return -1;
		}
		fits = q_step(&q, "check quota", e);
		q_end(&q);
		if (fits != 1) {
			if (fits == 0)
				quota_exceeded(db, tenant, e);
			tenant_unlock(db, own, 0, e);
			return -1;
		}
	}
	if (tenant_unlock(db, own, 1, e) == -1)
		return -1;
	if (rc == 1)
		sp_event_note(db, "state", id, NULL, -1, json_pack("{s:s, s:s,"
		    " s:s}", "from", "paused", "to", "creating", "pool", pool));
	return rc;
}

int
sp_db_sandbox_handles_set(struct sp_db *db, const char *id, const char *name,
    const char *request_id, struct sp_err *e)
{
	return write_sql(db, "set handles", "UPDATE sandboxes SET name ="
	    " NULLIF($2, ''), request_id = NULLIF($3, '') WHERE id = $1", e,
	    "sss", id, name ? name : "", request_id ? request_id : "") == -1 ?
	    -1 : 0;
}

int
sp_db_pods_each(struct sp_db *db, const char *pool, const char *node,
    int (*fn)(const struct sp_sandbox_row *, void *), void *arg,
    struct sp_err *e)
{
	struct each_sandbox a = { fn, arg };
	struct sp_db_q q;

	if (q_start(db, &q, "list pods", "SELECT " SANDBOX_COLS " FROM sandboxes"
	    " WHERE pool = $1 AND ($2 IS NULL OR node = $2) ORDER BY created, id",
	    e, "ss", pool, node) == -1)
		return -1;
	return each_row(&q, "list pods", one_sandbox, &a, e);
}

int
sp_db_source_set(struct sp_db *db, const struct sp_source_row *r,
    struct sp_err *e)
{
	return write_sql(db, "set source", "INSERT INTO template_sources (name,"
	    " rootfs, kernel, initrd, added) VALUES ($1, $2, $3, $4, $5) ON"
	    " CONFLICT (name) DO UPDATE SET rootfs = $2, kernel = $3,"
	    " initrd = $4, added = $5", e, "ssssI", r->name, r->rootfs, r->kernel,
	    r->initrd, (int64_t)time(NULL)) == -1 ? -1 : 0;
}

static int
source_from(struct sp_db_q *q, void *arg)
{
	struct sp_source_row *r = arg;

	memset(r, 0, sizeof *r);
	copy_col(r->name, sizeof r->name, q, 0);
	copy_col(r->rootfs, sizeof r->rootfs, q, 1);
	copy_col(r->kernel, sizeof r->kernel, q, 2);
	copy_col(r->initrd, sizeof r->initrd, q, 3);
	return 0;
}

int
sp_db_source_get(struct sp_db *db, const char *name, struct sp_source_row *r,
    struct sp_err *e)
{
	char not_found[SP_NAME_MAX + 40];
	struct sp_db_q q;

	snprintf(not_found, sizeof not_found, "no template or source '%s'", name);
	if (q_start(db, &q, "get source", "SELECT name, rootfs, kernel, initrd"
	    " FROM template_sources WHERE name = $1", e, "s", name) == -1)
		return -1;
	return one_row(&q, "get source", not_found, source_from, r, e);
}

int
sp_db_sandbox_set_recovered(struct sp_db *db, const char *id, const char *json,
    struct sp_err *e)
{
	return write_sql(db, "set recovered", "UPDATE sandboxes SET recovered"
	    " = $2 WHERE id = $1", e, "ss", id, json) == -1 ? -1 : 0;
}

/* ---- snapshots ---- */

#define SNAP_COLS "id, snap, kind, taken, tag, state, ms, paused_ms, " \
	"COALESCE(remote, '')"

static int
snap_from(struct sp_db_q *q, void *arg)
{
	struct sp_snap_row *r = arg;

	memset(r, 0, sizeof *r);
	copy_col(r->id, sizeof r->id, q, 0);
	copy_col(r->snap, sizeof r->snap, q, 1);
	copy_col(r->kind, sizeof r->kind, q, 2);
	r->taken = col_int(q, 3);
	copy_col(r->tag, sizeof r->tag, q, 4);
	copy_col(r->state, sizeof r->state, q, 5);
	r->ms = col_int(q, 6);
	r->paused_ms = col_text(q, 7) == NULL ? -1 : col_int(q, 7);
	copy_col(r->remote, sizeof r->remote, q, 8);
	return 0;
}

int
sp_db_snap_insert(struct sp_db *db, const struct sp_snap_row *r,
    struct sp_err *e)
{
	return write_sql(db, "insert snapshot", "INSERT INTO snapshots (id,"
	    " snap, kind, taken, tag, state) VALUES ($1, $2, $3, $4,"
	    " NULLIF($5, ''), $6)", e, "sssIss", r->id, r->snap, r->kind,
	    r->taken, r->tag, r->state) == -1 ? -1 : 0;
}

int
sp_db_snap_ready(struct sp_db *db, const struct sp_snap_row *r,
    struct sp_err *e)
{
	return write_sql(db, "snapshot ready", "UPDATE snapshots SET state ="
	    " 'ready', ms = $3, paused_ms = NULLIF($4, -1) WHERE id = $1 AND"
	    " snap = $2", e, "ssII", r->id, r->snap, r->ms, r->paused_ms) == -1 ?
	    -1 : 0;
}

int
sp_db_snap_delete(struct sp_db *db, const char *id, const char *snap,
    struct sp_err *e)
{
	return write_sql(db, "delete snapshot", "DELETE FROM snapshots WHERE"
	    " id = $1 AND snap = $2", e, "ss", id, snap) == -1 ? -1 : 0;
}

int
sp_db_snap_get(struct sp_db *db, const char *id, const char *snap,
    struct sp_snap_row *r, struct sp_err *e)
{
	char not_found[128];
	struct sp_db_q q;

	snprintf(not_found, sizeof not_found, "no snapshot %.40s of %s", snap, id);
	if (q_start(db, &q, "get snapshot", "SELECT " SNAP_COLS " FROM snapshots"
	    " WHERE id = $1 AND snap = $2", e, "ss", id, snap) == -1)
		return -1;
	return one_row(&q, "get snapshot", not_found, snap_from, r, e);
}

struct each_snap {
	int (*fn)(const struct sp_snap_row *, void *);
	void *arg;
};

static int
one_snap(struct sp_db_q *q, void *arg)
{
	struct each_snap *a = arg;
	struct sp_snap_row r;

	snap_from(q, &r);
	return a->fn(&r, a->arg) == -1 ? -1 : 0;
}

int
sp_db_snap_each(struct sp_db *db, const char *id, const char *node,
    int (*fn)(const struct sp_snap_row *, void *), void *arg, struct sp_err *e)
{
	struct each_snap a = { fn, arg };
	struct sp_db_q q;

	if (q_start(db, &q, "list snapshots", "SELECT " SNAP_COLS " FROM"
	    " snapshots WHERE ($1 IS NULL OR id = $1) AND ($2 IS NULL OR id IN"
	    " (SELECT id FROM sandboxes WHERE node = $2))"
	    " ORDER BY id, taken, rowid", e, "ss", id, node) == -1)
		return -1;
	return each_row(&q, "list snapshots", one_snap, &a, e);
}

int
sp_db_snap_set_remote(struct sp_db *db, const char *id, const char *snap,
    const char *remote, struct sp_err *e)
{
	return write_sql(db, "snapshot remote", "UPDATE snapshots SET remote ="
	    " NULLIF($3, '') WHERE id = $1 AND snap = $2", e, "sss", id, snap,
	    remote ? remote : "") == -1 ? -1 : 0;
}

int
sp_db_sandbox_place(struct sp_db *db, const char *id, const char *node,
    const char *want, struct sp_err *e)
{
	return write_sql(db, "place sandbox", "UPDATE sandboxes SET node = $2,"
	    " want = NULLIF($3, ''), want_error = NULL, placed = CASE WHEN"
	    " node = $2 THEN placed END WHERE id = $1", e, "sss", id, node,
	    want ? want : "") == -1 ? -1 : 0;
}

struct text_out {
	char *out;
	size_t n;
};

static int
text_from(struct sp_db_q *q, void *arg)
{
	struct text_out *t = arg;

	copy_col(t->out, t->n, q, 0);
	return 0;
}

int
sp_db_tenant_key_set(struct sp_db *db, const char *tenant, const char *keyref,
    struct sp_err *e)
{
	return write_sql(db, "set tenant key", "INSERT INTO tenant_keys (tenant,"
	    " keyref, updated) VALUES ($1, $2, $3) ON CONFLICT (tenant) DO"
	    " UPDATE SET keyref = $2, updated = $3", e, "ssI", tenant, keyref,
	    (int64_t)time(NULL)) == -1 ? -1 : 0;
}

int
sp_db_tenant_key_get(struct sp_db *db, const char *tenant, char *out,
    size_t n, struct sp_err *e)
{
	struct text_out t = { out, n };
	char not_found[SP_NAME_MAX + 40];
	struct sp_db_q q;

	snprintf(not_found, sizeof not_found, "no key for tenant %s", tenant);
	if (q_start(db, &q, "get tenant key", "SELECT keyref FROM tenant_keys"
	    " WHERE tenant = $1", e, "s", tenant) == -1)
		return -1;
	return one_row(&q, "get tenant key", not_found, text_from, &t, e);
}

struct each_key {
	int (*fn)(const char *, const char *, int64_t, void *);
	void *arg;
};

static int
one_key(struct sp_db_q *q, void *arg)
{
	struct each_key *a = arg;

	return a->fn(col_text(q, 0), col_text(q, 1), col_int(q, 2),
	    a->arg) == -1 ? -1 : 0;
}

int
sp_db_tenant_key_each(struct sp_db *db,
    int (*fn)(const char *tenant, const char *keyref, int64_t updated, void *),
    void *arg, struct sp_err *e)
{
	struct each_key a = { fn, arg };
	struct sp_db_q q;

	if (q_start(db, &q, "list tenant keys", "SELECT tenant, keyref, updated"
	    " FROM tenant_keys ORDER BY tenant", e, "") == -1)
		return -1;
	return each_row(&q, "list tenant keys", one_key, &a, e);
}

int
sp_db_snap_drop_local(struct sp_db *db, const char *id, struct sp_err *e)
{
	return write_sql(db, "drop local snapshots", "DELETE FROM snapshots"
	    " WHERE id = $1 AND remote IS NULL", e, "s", id) == -1 ? -1 : 0;
}

/* ---- nodes ---- */

int
sp_db_node_beat(struct sp_db *db, const struct sp_node_row *n, int lease_s,
    struct sp_err *e)
{
	/* A draining node stays draining: its beat does not touch state. */
	return write_sql(db, "node beat", "INSERT INTO nodes (name, root, seen,"
	    " lease_until, memory_mib, vcpus, disk_free, virt, templates) VALUES"
	    " ($1, $2, space_now(), space_now() + $3, $4, $5, $6, $7, $8)"
	    " ON CONFLICT (name) DO UPDATE SET root = $2, seen = space_now(),"
	    " lease_until = space_now() + $3, memory_mib = $4, vcpus = $5,"
	    " disk_free = $6, virt = $7, templates = $8", e, "ssiIIIss", n->name,
	    n->root, lease_s, n->memory_mib, n->vcpus, n->disk_free, n->virt,
	    n->templates ? n->templates : "[]") == -1 ? -1 : 0;
}

void
sp_db_node_release(struct sp_node_row *n)
{
	free(n->templates);
	n->templates = NULL;
}

/* What holds a VM (or will again): all but suspended and destroyed rows. */
#define HOLDS "state NOT IN ('suspended', 'destroyed') AND node = nodes.name"
#define NODE_COLS "name, root, state, memory_mib, vcpus, disk_free, virt," \
	" templates, lease_until - space_now(), seen," \
	" (SELECT count(*) FROM sandboxes WHERE " HOLDS ")," \
	" (SELECT COALESCE(sum(memory_mib), 0) FROM sandboxes WHERE " HOLDS ")," \
	" (SELECT COALESCE(sum(vcpus), 0) FROM sandboxes WHERE " HOLDS ")"

static int
node_from(struct sp_db_q *q, void *arg)
{
	struct sp_node_row *n = arg;
	const char *s;

	memset(n, 0, sizeof *n);
	copy_col(n->name, sizeof n->name, q, 0);
	copy_col(n->root, sizeof n->root, q, 1);
	copy_col(n->state, sizeof n->state, q, 2);
	n->memory_mib = col_int(q, 3);
	n->vcpus = col_int(q, 4);
	n->disk_free = col_int(q, 5);
	copy_col(n->virt, sizeof n->virt, q, 6);
	s = col_text(q, 7);
	n->lease_left = col_int(q, 8);
	n->seen = col_int(q, 9);
	n->sandboxes = col_int(q, 10);
	n->memory_used_mib = col_int(q, 11);
	n->vcpus_used = col_int(q, 12);
	return (n->templates = strdup(s ? s : "[]")) == NULL ? -1 : 0;
}

int
sp_db_node_get(struct sp_db *db, const char *name, struct sp_node_row *n,
    struct sp_err *e)
{
	char not_found[96];
	struct sp_db_q q;

	snprintf(not_found, sizeof not_found, "no node '%.63s'", name);
	if (q_start(db, &q, "get node", "SELECT " NODE_COLS " FROM nodes WHERE"
	    " name = $1", e, "s", name) == -1)
		return -1;
	return one_row(&q, "get node", not_found, node_from, n, e);
}

struct each_node {
	int (*fn)(const struct sp_node_row *, void *);
	void *arg;
};

static int
one_node(struct sp_db_q *q, void *arg)
{
	struct each_node *a = arg;
	struct sp_node_row n;
	int rc;

	if (node_from(q, &n) == -1)
		return -2;
	rc = a->fn(&n, a->arg) == -1 ? -1 : 0;
	sp_db_node_release(&n);
	return rc;
}

int
sp_db_node_each(struct sp_db *db, int (*fn)(const struct sp_node_row *, void *),
    void *arg, struct sp_err *e)
{
	struct each_node a = { fn, arg };
	struct sp_db_q q;

	if (q_start(db, &q, "list nodes", "SELECT " NODE_COLS " FROM nodes"
	    " ORDER BY name", e, "") == -1)
		return -1;
	return each_row(&q, "list nodes", one_node, &a, e);
}

int
sp_db_node_set_state(struct sp_db *db, const char *name, const char *state,
    struct sp_err *e)
{
	int64_t n = write_sql(db, "set node state", "UPDATE nodes SET state = $2"
	    " WHERE name = $1", e, "ss", name, state);

	if (n == 0)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no node '%.63s'", name);
	return n == -1 ? -1 : 0;
}

int
sp_db_node_forget(struct sp_db *db, const char *name, struct sp_err *e)
{
	struct sp_node_row n;
	int64_t gone;

	/* In one statement, so a node that beats or is given a sandbox in
	 * between is kept; the read after only says why. */
	gone = write_sql(db, "forget node", "DELETE FROM nodes WHERE name = $1"
	    " AND lease_until <= space_now() AND NOT EXISTS (SELECT 1 FROM"
	    " sandboxes WHERE node = $1 AND state <> 'destroyed')", e, "s", name);
	if (gone != 0)
		return gone == -1 ? -1 : 0;
	if (sp_db_node_get(db, name, &n, e) == -1)
		return -1;
	if (n.lease_left > 0)
		sp_err_set(e, SP_E_BAD_STATE, 0, "node %s is alive (its lease has "
		    "%lld s left): stop it first", name, (long long)n.lease_left);
	else
		sp_err_set(e, SP_E_BAD_STATE, 0, "node %s still has %lld "
		    "sandboxes", name, (long long)n.sandboxes);
	sp_db_node_release(&n);
	return -1;
}

struct each_pods {
	int (*fn)(const char *, int64_t, void *);
	void *arg;
};

static int
one_pods(struct sp_db_q *q, void *arg)
{
	struct each_pods *a = arg;

	return a->fn(col_text(q, 0), col_int(q, 1), a->arg) == -1 ? -1 : 0;
}

int
sp_db_node_pods_each(struct sp_db *db, const char *node,
    int (*fn)(const char *template, int64_t ready, void *), void *arg,
    struct sp_err *e)
{
	struct each_pods a = { fn, arg };
	struct sp_db_q q;

	if (q_start(db, &q, "count pods", "SELECT pool, count(*) FROM sandboxes"
	    " WHERE node = $1 AND pool IS NOT NULL AND state = 'paused'"
	    " GROUP BY pool ORDER BY pool", e, "s", node) == -1)
		return -1;
	return each_row(&q, "count pods", one_pods, &a, e);
}

struct each_kind {
	int (*fn)(const char *, const char *, int, int, int64_t, void *);
	void *arg;
};

static int
one_kind(struct sp_db_q *q, void *arg)
{
	struct each_kind *a = arg;
	const char *node = col_text(q, 0), *t = col_text(q, 1);

	return a->fn(node ? node : "", t ? t : "", (int)col_int(q, 2),
	    (int)col_int(q, 3), col_int(q, 4), a->arg) == -1 ? -1 : 0;
}

int
sp_db_pod_kinds_each(struct sp_db *db, int (*fn)(const char *node,
    const char *template, int memory_mib, int vcpus, int64_t ready, void *),
    void *arg, struct sp_err *e)
{
	struct each_kind a = { fn, arg };
	struct sp_db_q q;

	if (q_start(db, &q, "count pods", "SELECT node, template, memory_mib,"
	    " vcpus, count(*) FROM sandboxes WHERE pool IS NOT NULL AND"
	    " state = 'paused' GROUP BY node, template, memory_mib, vcpus", e,
	    "") == -1)
		return -1;
	return each_row(&q, "count pods", one_kind, &a, e);
}

int
sp_db_node_takes(struct sp_db *db, const char *name, struct sp_err *e)
{
	char state[16] = "";
	struct text_out t = { state, sizeof state };
	struct sp_db_q q;
	int rc;

	if (q_start(db, &q, "node state", "SELECT state FROM nodes WHERE"
	    " name = $1", e, "s", name) == -1)
		return -1;
	if ((rc = q_step(&q, "node state", e)) == 1)
		text_from(&q, &t);
	q_end(&q);
	if (rc == -1)
		return -1;
	if (strcmp(state, "draining") == 0)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "node %s is draining: it "
		    "takes no new sandboxes (space-node ready %s)", name, name);
	return 0;
}

/* ---- desired state ---- */

int
sp_db_sandbox_wish(struct sp_db *db, const char *id, const char *want,
    struct sp_err *e)
{
	int64_t n = write_sql(db, "record wish", "UPDATE sandboxes SET want = $2,"
	    " want_error = NULL WHERE id = $1", e, "ss", id, want);

	if (n == 0)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no such sandbox");
	return n == -1 ? -1 : 0;
}

int
sp_db_sandbox_wish_done(struct sp_db *db, const char *id, const char *want,
    const char *error, struct sp_err *e)
{
	/* Only the wish carried out: one made since stays. */
	if (error == NULL)
		return write_sql(db, "wish done", "UPDATE sandboxes SET want = NULL,"
		    " want_error = NULL WHERE id = $1 AND want = $2", e, "ss", id,
		    want) == -1 ? -1 : 0;
	return write_sql(db, "wish failed", "UPDATE sandboxes SET want_error = $3"
	    " WHERE id = $1 AND want = $2", e, "sss", id, want, error) == -1 ?
	    -1 : 0;
}

int
sp_db_wishes_each(struct sp_db *db, const char *node, int failed_too,
    int (*fn)(const struct sp_sandbox_row *, void *), void *arg,
    struct sp_err *e)
{
	struct each_sandbox a = { fn, arg };
	struct sp_db_q q;

	if (q_start(db, &q, "list wishes", "SELECT " SANDBOX_COLS " FROM"
	    " sandboxes WHERE node = $1 AND want IS NOT NULL AND (want_error IS"
	    " NULL OR $2 = 1) ORDER BY updated, id", e, "si", node,
	    failed_too) == -1)
		return -1;
	return each_row(&q, "list wishes", one_sandbox, &a, e);
}

int
sp_db_listen(struct sp_db *db, struct sp_err *e)
{
	return db->ops->listen(db, e);
}

int
sp_db_wait(struct sp_db *db, int timeout_ms, struct sp_err *e)
{
	return db->ops->wait(db, timeout_ms, e);
}

/* ---- the scheduler's ---- */

int
sp_db_begin(struct sp_db *db, struct sp_err *e)
{
	if (write_sql(db, "begin", db->ops->begin, e, "") == -1)
		return -1;
	db->txn = 1;
	return 0;
}

int
sp_db_commit(struct sp_db *db, struct sp_err *e)
{
	db->txn = 0;
	return write_sql(db, "commit", "COMMIT", e, "") == -1 ? -1 : 0;
}

void
sp_db_rollback(struct sp_db *db)
{
	struct sp_err ignored;

	db->txn = 0;
	write_sql(db, "rollback", "ROLLBACK", &ignored, "");
}

int
sp_db_schedule_turn(struct sp_db *db, struct sp_err *e)
{
	return write_sql(db, "take the scheduler's turn", "UPDATE scheduler SET"
	    " passes = passes + 1 WHERE one = 1", e, "") == -1 ? -1 : 0;
}

int
sp_db_unplaced_each(struct sp_db *db, int limit,
    int (*fn)(const struct sp_sandbox_row *, void *), void *arg,
    struct sp_err *e)
{
	struct each_sandbox a = { fn, arg };
	struct sp_db_q q;

	/* Each is locked for this transaction; another scheduler passes
	 * over it to the next. */
	if (q_start(db, &q, "list unplaced", "SELECT " SANDBOX_COLS " FROM"
	    " sandboxes WHERE node = '' AND want IS NOT NULL ORDER BY created, id"
	    " LIMIT $1 FOR UPDATE SKIP LOCKED", e, "i", limit) == -1)
		return -1;
	return each_row(&q, "list unplaced", one_sandbox, &a, e);
}

int
sp_db_sandbox_place_by(struct sp_db *db, const char *id, const char *node,
    const char *placed, struct sp_err *e)
{
	int64_t n = write_sql(db, "place", "UPDATE sandboxes SET node = $2,"
	    " placed = $3 WHERE id = $1 AND node = ''", e, "sss", id, node,
	    placed);

	if (n == 0)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "%s was placed already", id);
	return n == -1 ? -1 : 0;
}

int
sp_db_pod_taken_for(struct sp_db *db, const char *pod, const char *row,
    const char *placed, struct sp_err *e)
{
	if (write_sql(db, "wish the pod running", "UPDATE sandboxes SET want ="
	    " 'running', want_error = NULL, placed = $2 WHERE id = $1", e, "ss",
	    pod, placed) == -1)
		return -1;
	return write_sql(db, "drop the row the pod stands for", "DELETE FROM"
	    " sandboxes WHERE id = $1 AND node = ''", e, "s", row) == -1 ? -1 : 0;
}

int
sp_db_snap_supersede(struct sp_db *db, const char *id, const char *keep,
    struct sp_err *e)
{
	return write_sql(db, "supersede", "UPDATE snapshots SET remote ="
	    " 'superseded' WHERE id = $1 AND remote = 'restorable' AND snap <>"
	    " $2", e, "ss", id, keep ? keep : "") == -1 ? -1 : 0;
}

/* Each id an UPDATE ... RETURNING id gave, to fn (through each_row). */
struct each_id {
	int (*fn)(const char *, void *);
	void *arg;
};

static int
one_id(struct sp_db_q *q, void *arg)
{
	struct each_id *a = arg;

	return a->fn(col_text(q, 0), a->arg) == -1 ? -1 : 0;
}

int
sp_db_node_lose(struct sp_db *db, const char *node,
    int (*fn)(const char *id, void *), void *arg, struct sp_err *e)
{
	struct each_id a = { fn, arg };
	struct sp_db_q q;

	/* Its pods are nobody's: their rows go (the VMs, if the node comes
	 * back, are orphans there). */
	if (write_sql(db, "drop lost pods", "DELETE FROM sandboxes WHERE node = $1"
	    " AND pool IS NOT NULL", e, "s", node) == -1)
		return -1;
	if (q_start(db, &q, "mark lost", "UPDATE sandboxes SET state = 'lost',"
	    " gen = gen + 1, updated = space_now() WHERE node = $1 AND state IN"
	    " ('creating', 'running', 'paused', 'stopped', 'suspending',"
	    " 'restoring', 'failed', 'recovering') RETURNING id", e, "s",
	    node) == -1)
		return -1;
	return each_row(&q, "mark lost", one_id, &a, e);
}

int
sp_db_lost_recover(struct sp_db *db, const char *node,
    int (*fn)(const char *id, void *), void *arg, struct sp_err *e)
{
	struct each_id a = { fn, arg };
	struct sp_db_q q;

	if (q_start(db, &q, "recover lost", "UPDATE sandboxes SET node = '',"
	    " want = 'running', want_error = NULL, placed = NULL WHERE node = $1"
	    " AND state = 'lost' AND EXISTS (SELECT 1 FROM snapshots WHERE"
	    " snapshots.id = sandboxes.id AND remote = 'restorable')"
	    " RETURNING id", e, "s", node) == -1)
		return -1;
	return each_row(&q, "recover lost", one_id, &a, e);
}

/* ---- documents, rates and the audit: the credential store's and the
 * egress policies' rows, in a DB that nodes share ---- */

int
sp_db_doc_get(struct sp_db *db, const char *kind, const char *scope,
    const char *name, char **body, struct sp_err *e)
{
	struct sp_db_q q;
	const char *s;
	int r;

	*body = NULL;
	if (q_start(db, &q, "get document", "SELECT body FROM documents WHERE"
	    " kind = $1 AND scope = $2 AND name = $3", e, "sss", kind, scope,
	    name) == -1)
		return -1;
	if ((r = q_step(&q, "get document", e)) == 1) {
		s = col_text(&q, 0);
		if ((*body = strdup(s != NULL ? s : "")) == NULL)
			r = sp_err_sys(e, SP_E_NOMEM, "get document");
	} else if (r == 0)
		r = sp_err_set(e, SP_E_NOT_FOUND, 0, "no %s %s in %s", kind,
		    name, scope);
	q_end(&q);
	return r == 1 ? 0 : -1;
}

int
sp_db_doc_put(struct sp_db *db, const char *kind, const char *scope,
    const char *name, const char *body, int replace, struct sp_err *e)
{
	return write_sql(db, "put document", replace ?
	    "INSERT INTO documents (kind, scope, name, body) VALUES ($1, $2,"
	    " $3, $4) ON CONFLICT (kind, scope, name) DO UPDATE SET body = $4" :
	    "INSERT INTO documents (kind, scope, name, body) VALUES ($1, $2,"
	    " $3, $4)", e, "ssss", kind, scope, name, body) == -1 ? -1 : 0;
}

int
sp_db_doc_swap(struct sp_db *db, const char *kind, const char *scope,
    const char *name, const char *was, const char *body, struct sp_err *e)
{
	int64_t n = write_sql(db, "swap document", "UPDATE documents SET body ="
	    " $5 WHERE kind = $1 AND scope = $2 AND name = $3 AND body = $4", e,
	    "sssss", kind, scope, name, was, body);

	if (n == 0)
		return sp_err_set(e, SP_E_BAD_STATE, 1, "%s %s of %s changed or "
		    "went meanwhile", kind, name, scope);
	return n == -1 ? -1 : 0;
}

int
sp_db_doc_delete(struct sp_db *db, const char *kind, const char *scope,
    const char *name, int *removed, struct sp_err *e)
{
	int64_t n;

	n = write_sql(db, "delete document", "DELETE FROM documents WHERE"
	    " kind = $1 AND scope = $2 AND name = $3", e, "sss", kind, scope,
	    name);
	if (n == -1)
		return -1;
	if (removed != NULL)
		*removed = n > 0;
	return 0;
}

struct each_doc {
	int (*fn)(const char *, const char *, const char *, void *);
	void *arg;
	int stop;
};

static int
one_doc(struct sp_db_q *q, void *arg)
{
	struct each_doc *a = arg;
	const char *s = col_text(q, 0), *n = col_text(q, 1),
	    *b = col_text(q, 2);

	if (a->stop == 0)
		a->stop = a->fn(s ? s : "", n ? n : "", b ? b : "", a->arg);
	return 0;
}

int
sp_db_doc_each(struct sp_db *db, const char *kind, const char *scope,
    const char *name, int (*fn)(const char *scope, const char *name,
    const char *body, void *), void *arg, struct sp_err *e)
{
	struct each_doc a = { fn, arg, 0 };
	struct sp_db_q q;

	if (q_start(db, &q, "list documents", "SELECT scope, name, body FROM"
	    " documents WHERE kind = $1 AND ($2 IS NULL OR scope = $2) AND"
	    " ($3 IS NULL OR name = $3)", e, "sss", kind, scope, name) == -1 ||
	    each_row(&q, "list documents", one_doc, &a, e) == -1)
		return -1;
	return a.stop;
}

int
sp_db_rate_update(struct sp_db *db, const char *cred, const char *sandbox,
    int (*fn)(int64_t *tokens, int64_t *last, int fresh, void *), void *arg,
    struct sp_err *e)
{
	int64_t tok, last, tok0 = 0, last0 = 0, n;
	struct sp_db_q q;
	int tries, fresh, r;

	for (tries = 0; tries < 1000; tries++) {
		if (q_start(db, &q, "read rate", "SELECT tokens, last FROM"
		    " cred_rates WHERE cred = $1 AND sandbox = $2", e, "ss",
		    cred, sandbox) == -1)
			return -1;
		if ((r = q_step(&q, "read rate", e)) == 1) {
			tok0 = col_int(&q, 0);
			last0 = col_int(&q, 1);
		}
		q_end(&q);
		if (r == -1)
			return -1;
		fresh = r == 0;
		tok = fresh ? 0 : tok0;
		last = fresh ? 0 : last0;
		r = fn(&tok, &last, fresh, arg);
		/* Written only if nobody wrote in between, else again. */
		n = fresh ? write_sql(db, "add rate", "INSERT INTO cred_rates"
		    " (cred, sandbox, tokens, last) VALUES ($1, $2, $3, $4)"
		    " ON CONFLICT (cred, sandbox) DO NOTHING", e, "ssII", cred,
		    sandbox, tok, last) :
		    write_sql(db, "set rate", "UPDATE cred_rates SET tokens = $3,"
		    " last = $4 WHERE cred = $1 AND sandbox = $2 AND tokens = $5"
		    " AND last = $6", e, "ssIIII", cred, sandbox, tok, last,
		    tok0, last0);
		if (n == -1)
			return -1;
		if (n == 1)
			return r;
	}
	return sp_err_set(e, SP_E_DB, 1, "rate of %s: changed under us 1000 "
	    "times", cred);
}

int
sp_db_rate_forget(struct sp_db *db, const char *cred, const char *sandbox,
    struct sp_err *e)
{
	return write_sql(db, "forget rates", "DELETE FROM cred_rates WHERE"
	    " ($1 IS NULL OR cred = $1) AND ($2 IS NULL OR sandbox = $2)", e,
	    "ss", cred, sandbox) == -1 ? -1 : 0;
}

int
sp_db_audit_add(struct sp_db *db, int64_t time, const char *line,
    struct sp_err *e)
{
	return write_sql(db, "add audit record", "INSERT INTO cred_audit (time,"
	    " line) VALUES ($1, $2)", e, "Is", time, line) == -1 ? -1 : 0;
}

struct each_line {
	int (*fn)(const char *, void *);
	void *arg;
	int stop;
};

static int
one_line(struct sp_db_q *q, void *arg)
{
	struct each_line *a = arg;
	const char *s = col_text(q, 0);

	if (a->stop == 0 && s != NULL)
		a->stop = a->fn(s, a->arg);
	return 0;
}

int
sp_db_audit_each(struct sp_db *db, int64_t since,
    int (*fn)(const char *line, void *), void *arg, struct sp_err *e)
{
	struct each_line a = { fn, arg, 0 };
	struct sp_db_q q;

	if (q_start(db, &q, "read audit", "SELECT line FROM cred_audit WHERE"
	    " time >= $1 ORDER BY rowid", e, "I", since) == -1 ||
	    each_row(&q, "read audit", one_line, &a, e) == -1)
		return -1;
	return a.stop;
}

/* ---- the shared DB of the parts that take a root only ---- */

#define SHARED_IDLE	8	/* handles kept for the next taker */

static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static int shared_is = -1;	/* -1: not read yet; 0: SQLite; 1: shared */
static struct sp_conf shared_conf;
static struct sp_db *shared_idle[SHARED_IDLE];
static int shared_nidle;
static pid_t shared_pid;	/* whose the idle handles are */

int
sp_db_shared_take(struct sp_db **db, struct sp_err *e)
{
	*db = NULL;
	pthread_mutex_lock(&shared_mu);
	if (shared_is == -1) {
		if (sp_conf_load(&shared_conf, e) == -1) {
			pthread_mutex_unlock(&shared_mu);
			return -1;
		}
		shared_is = strncmp(shared_conf.db, "sqlite:", 7) != 0;
	}
	/* A child of fork must not talk over its parent's connections (nor
	 * close them, which would end them for the parent too): it forgets
	 * them and opens its own. */
	if (shared_pid != getpid()) {
		shared_nidle = 0;
		shared_pid = getpid();
	}
	if (shared_is && shared_nidle > 0)
		*db = shared_idle[--shared_nidle];
	pthread_mutex_unlock(&shared_mu);
	if (!shared_is || *db != NULL)
		return 0;
	return sp_db_open(db, &shared_conf, e);
}

void
sp_db_shared_give(struct sp_db *db)
{
	if (db == NULL)
		return;
	pthread_mutex_lock(&shared_mu);
	if (shared_pid == getpid() && shared_nidle < SHARED_IDLE) {
		shared_idle[shared_nidle++] = db;
		db = NULL;
	}
	pthread_mutex_unlock(&shared_mu);
	sp_db_close(db);
}
