/* space-stop: shut sandboxes down (the guest first, then by force). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "sp.h"

struct stop {
	struct sp_ctx x;
	int timeout_ms;
};

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-stop [--timeout SECONDS] [ID...]\n");
	sp_usage_exit();
}

static int
stop1(const char *id, json_t *rec, void *ctx)
{
	struct stop *s = ctx;
	struct sp_err e;
	int64_t t0 = sp_clock_ms();
	int changed, forced;

	if (sp_sandbox_stop(&s->x, id, s->timeout_ms, &changed, &forced, &e) == -1)
		return sp_out_fail(id, &e);
	return sp_out_ok(id, json_pack("{s:s, s:b, s:b, s:I}", "state", "stopped",
	    "changed", changed, "forced", forced, "ms",
	    (json_int_t)(sp_clock_ms() - t0)));
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	struct stop s = { .timeout_ms = 30000 };
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
	return sp_each_sandbox(argc - optind, argv + optind, &s.x, 1, stop1, &s);
}
