/*
 * space-suspend: sandboxes to the object store (SPACE_STORE).  Paused, a full
 * checkpoint, only what differs from the template sent up, encrypted with a
 * key of the tenant's; then their VM and (unless --keep-local) this node's
 * copy are released.  Running it again after a failure finishes the job.
 */
#include <getopt.h>
#include <stdio.h>

#include "sp.h"

struct suspend {
	struct sp_ctx x;
	int keep_local;
	int wait_ms;		/* -1: --wait not given */
};

static int
suspend1(const char *id, json_t *rec, void *arg)
{
	struct suspend *s = arg;
	struct sp_err e;
	json_t *out;
	int c;

	/* Another node's: that node suspends it (space-reconcile). */
	if ((c = sp_cli_elsewhere(&s->x, id, "suspended", s->wait_ms, &out,
	    &e)) != 0)
		return c == -1 ? sp_out_fail(id, &e) : sp_out_ok(id, out);
	if (sp_suspend(&s->x, id, s->keep_local, &out, &e) == -1)
		return sp_out_fail(id, &e);
	return sp_out_json(out);
}

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-suspend [--keep-local] "
	    "[--wait [SECONDS]] [ID...]   (or ids on stdin)\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "keep-local", no_argument, NULL, 'k' },
		{ "wait", optional_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	struct suspend s = { .keep_local = 0, .wait_ms = -1 };
	const char *wait = NULL;
	int ch, waits = 0, n;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch == 'k')
			s.keep_local = 1;
		else if (ch == 'w') {
			waits = 1;
			wait = optarg;
		} else
			usage();
	}
	n = argc - optind;
	if (waits && sp_cli_wait_opt(wait, &n, argv + optind, &s.wait_ms) == -1)
		usage();
	return sp_each_sandbox(n, argv + optind, &s.x, 1, suspend1, &s);
}
