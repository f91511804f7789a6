/* space-pause: pause the vCPUs of running sandboxes. */
#include <stdio.h>

#include "sp.h"

static int
pause1(struct sp_ctx *x, const char *id, int timeout_ms, int *changed,
    int *forced, struct sp_err *e)
{
	return sp_sandbox_pause(x, id, changed, e);
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
	static const struct sp_verb v = { "paused", 0, pause1 };

	return sp_verb_main(argc, argv, &v, usage);
}
