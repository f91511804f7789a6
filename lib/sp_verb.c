/*
 * sp_verb: the commands that move sandboxes to one state and report it
 * (space-pause, space-resume, space-start, space-stop) differ only in the
 * call they make, the state they name and whether they wait; this is the
 * rest of them.
 */
#include <getopt.h>
#include <stdlib.h>

#include "sp_cli.h"

struct verb_run {
	struct sp_ctx x;
	const struct sp_verb *v;
	int timeout_ms;
};

static int
verb1(const char *id, json_t *rec, void *arg)
{
	struct verb_run *r = arg;
	struct sp_err e;
	int64_t t0 = sp_clock_ms();
	int changed = 0, forced = -1;
	json_t *o;

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
		{ NULL, 0, NULL, 0 },
	};
	struct verb_run r = { .v = v, .timeout_ms = v->timeout_ms };
	char *end;
	long s;
	int ch;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "", v->timeout_ms > 0 ? opts :
	    opts + 1, NULL)) != -1) {
		if (ch != 't')
			usage();
		s = strtol(optarg, &end, 10);
		if (*optarg == '\0' || *end != '\0' || s < 0 ||
		    s > SP_VERB_TIMEOUT_MAX_S)
			usage();
		r.timeout_ms = (int)s * 1000;
	}
	return sp_each_sandbox(argc - optind, argv + optind, &r.x, 1, verb1,
	    &r);
}
