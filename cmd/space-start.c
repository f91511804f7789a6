/* space-start: boot stopped sandboxes from their own disks. */
#include <stdio.h>

#include "sp.h"

static int
start1(struct sp_ctx *x, const char *id, int timeout_ms, int *changed,
    int *forced, struct sp_err *e)
{
	return sp_sandbox_start(x, id, timeout_ms, changed, e);
}

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-start [--timeout SECONDS] [ID...]\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	static const struct sp_verb v = { "running", 180000, start1 };

	return sp_verb_main(argc, argv, &v, usage);
}
