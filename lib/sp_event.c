/*
 * sp_event: the event log, one table of what was done to sandboxes, only
 * ever appended to (and cut from its old end by retention):
 *   - every change of a sandbox's state (sp_db.c, as it writes it);
 *   - every verb a command ran on a sandbox: the line it printed for the
 *     sandbox (sp_out.c), or what space-exec says of its command;
 *   - every call of the HTTP API (sp_apid.c), and every repair of the
 *     reconcile pass.
 * A row says when (ms), who (uid:N, or tenant:NAME and admin:KEY for the
 * API), through which program, what, to which sandbox, on which node, how
 * it ended (ok, or error and its token), how long it took and what else
 * (a JSON object).  Its rowid is its sequence number, which space-events
 * prints and follows.
 *
 * Recording is best effort: a verb that did its work is not failed by a
 * log that could not take its line; the first such miss is said on stderr.
 * The one writer of rows (sp_event_add, sp_event_note) is sp_db.c's, which
 * writes the state events itself; this is the commands' side of the log,
 * and its reading and retention.
 */
#include <stdlib.h>
#include <string.h>

#include "sp_core.h"
#include "sp_db_int.h"

/* The commands whose lines are verbs on sandboxes. */
static const char *const verbs[] = {
	"create", "rm", "start", "stop", "pause", "resume", "suspend",
	"restore", "snap", "rollback", "fork", "exec", "fs", "cp", "ps",
	"logs", "kill", "ttl", "port", "volume",
};

static struct {
	struct sp_db *db;	/* a verb command's DB, while it is open */
	int64_t t0;		/* when the item now done began (monotonic) */
	char action[32];	/* what it is called, when not the command */
	char done[SP_ID_LEN + 1];	/* the item's sandbox, recorded */
} cli;

/* The command's verb ("pause" of space-pause), or NULL. */
static const char *
verb_of_prog(void)
{
	const char *p = sp_out_prog();
	size_t i;

	if (p == NULL || strncmp(p, "space-", 6) != 0)
		return NULL;
	for (i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
		if (strcmp(p + 6, verbs[i]) == 0)
			return verbs[i];
	return NULL;
}

void
sp_event_open(struct sp_db *db)
{
	if (verb_of_prog() == NULL)
		return;
	cli.db = db;
	if (cli.t0 == 0)
		cli.t0 = sp_clock_ms();
}

void
sp_event_close(struct sp_db *db)
{
	if (cli.db == db)
		cli.db = NULL;
}

void
sp_event_begin(void)
{
	cli.t0 = sp_clock_ms();
	cli.done[0] = '\0';
}

void
sp_event_action(const char *action)
{
	snprintf(cli.action, sizeof cli.action, "%s", action);
}

/*
 * The item's event, once: for its sandbox id, or "" for a failure that names
 * none (a create refused before it had an id, a line that is no id).  The next item's time counts
 * from here, for commands that make many in one (space-create -n).
 */
static void
cli_note(const char *id, const char *error, json_t *detail)
{
	const char *verb = verb_of_prog();

	/* What is not an id is not written as one. */
	if (id[0] != '\0' && !sp_id_valid(id))
		id = "";
	if (cli.db == NULL || verb == NULL || (id[0] != '\0' ?
	    strcmp(id, cli.done) == 0 : cli.done[0] != '\0')) {
		json_decref(detail);
		return;
	}
	snprintf(cli.done, sizeof cli.done, "%s", id[0] ? id : "-");
	sp_event_note(cli.db, cli.action[0] ? cli.action : verb, id, error,
	    sp_clock_ms() - cli.t0, detail);
	cli.t0 = sp_clock_ms();
}

/* The verb and what it ran on, from a command's line for one sandbox. */
void
sp_event_line(json_t *line)
{
	const char *id, *error = NULL;
	json_t *detail;
	size_t i;
	static const char *const kept[] = { "state", "snap", "path", "msg",
	    "exit", "port", "volume", "ro" };

	if (cli.db == NULL || !json_is_object(line))
		return;
	if (json_is_false(json_object_get(line, "ok")) &&
	    (error = json_string_value(json_object_get(line, "error"))) ==
	    NULL)
		error = "internal";
	if ((id = json_string_value(json_object_get(line, "id"))) == NULL) {
		if (error == NULL)
			return;
		id = "";
	}
	detail = json_object();
	for (i = 0; i < sizeof kept / sizeof kept[0]; i++)
		if (json_object_get(line, kept[i]) != NULL)
			json_object_set(detail, kept[i], json_object_get(line,
			    kept[i]));
	cli_note(id, error, detail);
}

void
sp_event_cli(const char *id, const struct sp_err *err, json_t *detail)
{
	if (id == NULL) {
		json_decref(detail);
		return;
	}
	cli_note(id, err != NULL ? sp_code_name(err->code != SP_E_NONE ?
	    err->code : SP_E_INTERNAL) : NULL, detail);
}

/* ---- reading ---- */

static json_t *
event_from(struct sp_db_q *q)
{
	const char *s;
	json_t *o, *d;

	o = json_pack("{s:I, s:I, s:s, s:s, s:s}", "seq",
	    (json_int_t)sp_db_q_int(q, 0), "time_ms",
	    (json_int_t)sp_db_q_int(q, 1), "actor", sp_db_q_text(q, 2) ?
	    sp_db_q_text(q, 2) : "", "via", sp_db_q_text(q, 3) ?
	    sp_db_q_text(q, 3) : "", "action", sp_db_q_text(q, 4) ?
	    sp_db_q_text(q, 4) : "");
	if (o == NULL)
		return NULL;
	if ((s = sp_db_q_text(q, 5)) != NULL)
		json_object_set_new(o, "id", json_string(s));
	json_object_set_new(o, "node", json_string(sp_db_q_text(q, 6) ?
	    sp_db_q_text(q, 6) : ""));
	s = sp_db_q_text(q, 7);
	json_object_set_new(o, "ok", json_boolean(s != NULL &&
	    strcmp(s, "ok") == 0));
	if ((s = sp_db_q_text(q, 8)) != NULL)
		json_object_set_new(o, "error", json_string(s));
	if (sp_db_q_text(q, 9) != NULL)
		json_object_set_new(o, "ms", json_integer(sp_db_q_int(q, 9)));
	if ((s = sp_db_q_text(q, 10)) != NULL &&
	    (d = json_loads(s, 0, NULL)) != NULL) {
		if (json_is_object(d))
			json_object_update(o, d);
		json_decref(d);
	}
	return o;
}

int
sp_db_event_each(struct sp_db *db, const struct sp_event_query *w,
    int (*fn)(int64_t seq, json_t *ev, void *), void *arg, struct sp_err *e)
{
	struct sp_db_q q;
	json_t *o;
	int rc;

	if (sp_db_q_start(db, &q, "read events", "SELECT rowid, time, actor,"
	    " via, action, sandbox, node, outcome, error, ms, detail FROM events"
	    " WHERE rowid > $1 AND time >= $2 AND ($3 = '' OR sandbox = $3)"
	    " ORDER BY rowid LIMIT $4", e, "IIsI", w->after, w->since_ms,
	    w->sandbox ? w->sandbox : "", (int64_t)(w->max > 0 ? w->max :
	    1000)) == -1)
		return -1;
	while ((rc = sp_db_q_step(&q, "read events", e)) == 1) {
		if ((o = event_from(&q)) == NULL) {
			rc = sp_err_sys(e, SP_E_INTERNAL, "out of memory");
			break;
		}
		if ((rc = fn(sp_db_q_int(&q, 0), o, arg)) != 0)
			break;
	}
	sp_db_q_end(&q);
	return rc == -1 ? -1 : 0;
}

int
sp_db_event_last(struct sp_db *db, int64_t *seq, struct sp_err *e)
{
	struct sp_db_q q;
	int rc;

	*seq = 0;
	if (sp_db_q_start(db, &q, "last event", "SELECT COALESCE(max(rowid), 0)"
	    " FROM events", e, "") == -1)
		return -1;
	if ((rc = sp_db_q_step(&q, "last event", e)) == 1)
		*seq = sp_db_q_int(&q, 0);
	sp_db_q_end(&q);
	return rc == -1 ? -1 : 0;
}

int64_t
sp_db_event_prune(struct sp_db *db, int64_t before_ms, struct sp_err *e)
{
	/* The newest row stays, whatever its age: SQLite numbers a row one
	 * past the largest there, and a follower must never see a number
	 * again. */
	return sp_db_q_write(db, "prune events", "DELETE FROM events WHERE"
	    " time < $1 AND rowid < (SELECT max(rowid) FROM events)", e, "I",
	    before_ms);
}

int
sp_event_prune(struct sp_db *db, const char *keep, int64_t *gone,
    struct sp_err *e)
{
	int64_t period, now;

	*gone = 0;
	if (sp_period_parse(keep, &period) == -1)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_EVENTS_KEEP must "
		    "be a period such as 30d, not '%s'", keep);
	if (sp_now(&now, e) == -1)
		return -1;
	if ((*gone = sp_db_event_prune(db, (now - period) * 1000, e)) < 0)
		return -1;
	return 0;
}
