/*
 * sp_verb: the commands that move sandboxes to one state and report it
 * (space-pause, space-resume, space-start, space-stop) differ only in the
 * call they make, the state they name and whether they wait; this is the
 * rest of them.  A sandbox of another node is not acted on here: the
 * state is recorded as its wish, for its node to carry out, and --wait
 * waits for that (sp_cli_elsewhere, which space-rm and space-suspend use
 * too).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "sp_cli.h"

int
sp_cli_wait_opt(const char *arg, int *n, char **ops, int *wait_ms)
{
	const char *secs = arg;
	char *end;
	long s;
	int i, j;

	/* "--wait 30" leaves 30 among the operands: no id is that short. */
	for (i = 0; secs == NULL && i < *n; i++)
		if (strlen(ops[i]) <= 6 && strspn(ops[i], "0123456789") ==
		    strlen(ops[i])) {
			secs = ops[i];
			for (j = i; j + 1 < *n; j++)
				ops[j] = ops[j + 1];
			(*n)--;
		}
	if (secs == NULL) {
		*wait_ms = SP_WAIT_DEFAULT_S * 1000;
		return 0;
	}
	s = strtol(secs, &end, 10);
	if (*secs == '\0' || *end != '\0' || s < 0 || s > SP_VERB_TIMEOUT_MAX_S)
		return -1;
	*wait_ms = (int)s * 1000;
	return 0;
}

int
sp_cli_elsewhere(struct sp_ctx *x, const char *id, const char *want,
    int wait_ms, json_t **out, struct sp_err *e)
{
	struct sp_sandbox_row r;
	int64_t t0 = sp_clock_ms();
	char node[sizeof r.node];
	enum sp_state state;
	int here, pending;

	*out = NULL;
	if (sp_id_check(id, e) == -1 || sp_db_sandbox_get(x->db, id, &r, e) == -1)
		return -1;
	/* One that no node has yet has no VM to take apart: removed here. */
	here = r.pod || strcmp(r.node, x->conf.node) == 0 ||
	    (r.node[0] == '\0' && strcmp(want, "destroyed") == 0);
	state = r.state;
	pending = r.want[0] != '\0';
	snprintf(node, sizeof node, "%s", r.node);
	sp_db_row_release(&r);
	if (here)
		return 0;
	/* Already there, and nothing else asked of it: nothing to ask. */
	if (!pending && strcmp(sp_state_name(state), want) == 0) {
		*out = json_pack("{s:s, s:s, s:b}", "state", want, "node", node,
		    "changed", 0);
		return 1;
	}
	/* Listening before the wish is recorded, no wake-up is missed. */
	if ((wait_ms >= 0 && sp_db_listen(x->db, e) == -1) ||
	    sp_db_sandbox_wish(x->db, id, want, e) == -1)
		return -1;
	if (wait_ms < 0) {
		*out = json_pack("{s:s, s:s, s:s, s:b, s:b}", "state",
		    sp_state_name(state), "want", want, "node", node, "queued", 1,
		    "changed", 0);
		return 1;
	}
	if (sp_sandbox_wait(x, id, want, wait_ms, &r, e) == -1)
		return -1;
	*out = json_pack("{s:s, s:s, s:b, s:I}", "state", sp_state_name(r.state),
	    "node", r.node, "changed", 1, "waited_ms",
	    (json_int_t)(sp_clock_ms() - t0));
	sp_db_row_release(&r);
	return 1;
}

struct verb_run {
	struct sp_ctx x;
	const struct sp_verb *v;
	int timeout_ms;
	int wait_ms;		/* -1: --wait not given */
};

static int
verb1(const char *id, json_t *rec, void *arg)
{
	struct verb_run *r = arg;
	struct sp_err e;
	int64_t t0 = sp_clock_ms();
	int changed = 0, forced = -1, c;
	json_t *o;

	if ((c = sp_cli_elsewhere(&r->x, id, r->v->state, r->wait_ms, &o,
	    &e)) != 0)
		return c == -1 ? sp_out_fail(id, &e) : sp_out_ok(id, o);
	if (r->v->act(&r->x, id, r->timeout_ms, &changed, &forced, &e) == -1)
		return sp_out_fail(id, &e);
	o = json_pack("{s:s, s:b}", "state", r->v->state, "changed", changed);
	if (o != NULL && forced >= 0)
		json_object_set_new(o, "forced", json_boolean(forced));
	if (o != NULL)
		json_object_set_new(o, "ms",
		    json_integer((json_int_t)(sp_clock_ms() - t0)));
	return sp_out_ok(id, o);
}

int
sp_verb_main(int argc, char *argv[], const struct sp_verb *v,
    void (*usage)(void))
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ "wait", optional_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	struct verb_run r = { .v = v, .timeout_ms = v->timeout_ms,
	    .wait_ms = -1 };
	const char *wait = NULL;
	char *end;
	long s;
	int ch, waits = 0, n;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "", v->timeout_ms > 0 ? opts :
	    opts + 1, NULL)) != -1) {
		if (ch == 'w') {
			waits = 1;
			wait = optarg;
			continue;
		}
		if (ch != 't')
			usage();
		s = strtol(optarg, &end, 10);
		if (*optarg == '\0' || *end != '\0' || s < 0 ||
		    s > SP_VERB_TIMEOUT_MAX_S)
			usage();
		r.timeout_ms = (int)s * 1000;
	}
	n = argc - optind;
	if (waits && sp_cli_wait_opt(wait, &n, argv + optind, &r.wait_ms) == -1)
		usage();
	return sp_each_sandbox(n, argv + optind, &r.x, 1, verb1, &r);
}
