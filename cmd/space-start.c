/* space-start: boot stopped sandboxes from their own disks. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "sp.h"

struct start {
	struct sp_ctx x;
	int timeout_ms;
};

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-start [--timeout SECONDS] [ID...]\n");
	sp_usage_exit();
}

static int
start1(const char *id, json_t *rec, void *ctx)
{
	struct start *s = ctx;
	struct sp_err e;
	int64_t t0 = sp_clock_ms();
	int changed;

	if (sp_sandbox_start(&s->x, id, s->timeout_ms, &changed, &e) == -1)
		return sp_out_fail(id, &e);
	return sp_out_ok(id, json_pack("{s:s, s:b, s:I}", "state", "running",
	    "changed", changed, "ms", (json_int_t)(sp_clock_ms() - t0)));
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	struct start s = { .timeout_ms = 180000 };
	char *end;
	long v;
	int ch;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch != 't')
			usage();
		v = strtol(optarg, &end, 10);
		if (*optarg == '\0' || *end != '\0' || v < 0 || v > 3600)
			usage();
		s.timeout_ms = (int)v * 1000;
	}
	return sp_each_sandbox(argc - optind, argv + optind, &s.x, 1, start1, &s);
}
