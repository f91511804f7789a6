/*
 * space-trim: running sandboxes hand their guest's free memory back to the
 * host (a restored VM holds all of its memory until then on hosts that
 * commit a page on a read).  --once skips those trimmed since their VM
 * started; space-idle.timer runs it on sandboxes idle for a while.
 */
#include <getopt.h>
#include <stdio.h>

#include "sp.h"

struct trim {
	struct sp_ctx x;
	int once;
};

static int
trim1(const char *id, json_t *rec, void *arg)
{
	struct trim *t = arg;
	struct sp_err e;
	json_t *o;

	(void)rec;
	if (sp_trim(&t->x, id, t->once, &o, &e) == -1)
		return sp_out_fail(id, &e);
	return sp_out_ok(id, o);
}

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-trim [--once] [ID...]   "
	    "(or ids on stdin)\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "once", no_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct trim t = { .once = 0 };
	int ch;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (ch != 'o')
			usage();
		t.once = 1;
	}
	return sp_each_sandbox(argc - optind, argv + optind, &t.x, 0, trim1,
	    &t);
}
