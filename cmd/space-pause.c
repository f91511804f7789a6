/* space-pause: pause the vCPUs of running sandboxes. */
#include <stdio.h>
#include <unistd.h>

#include "sp.h"

static int
pause1(const char *id, json_t *rec, void *ctx)
{
	struct sp_err e;
	int64_t t0 = sp_clock_ms();
	int changed;

	if (sp_sandbox_pause(ctx, id, &changed, &e) == -1)
		return sp_out_fail(id, &e);
	return sp_out_ok(id, json_pack("{s:s, s:b, s:I}", "state", "paused",
	    "changed", changed, "ms", (json_int_t)(sp_clock_ms() - t0)));
}

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-pause [ID...]   (or ids on stdin)\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	struct sp_ctx x;

	sp_cli_init(argc, argv, usage);
	if (getopt(argc, argv, "") != -1)
		usage();
	return sp_each_sandbox(argc - optind, argv + optind, &x, 1, pause1, &x);
}
