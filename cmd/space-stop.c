/* space-stop: shut sandboxes down (the guest first, then by force). */
#include <stdio.h>

#include "sp.h"

static int
stop1(struct sp_ctx *x, const char *id, int timeout_ms, int *changed,
    int *forced, struct sp_err *e)
{
	return sp_sandbox_stop(x, id, timeout_ms, changed, forced, e);
}

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-stop [--timeout SECONDS] [ID...]\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	static const struct sp_verb v = { "stopped", 30000, stop1 };

	return sp_verb_main(argc, argv, &v, usage);
}
