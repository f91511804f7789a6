/* space-resume: resume paused sandboxes. */
#include <stdio.h>

#include "sp.h"

static int
resume1(struct sp_ctx *x, const char *id, int timeout_ms, int *changed,
    int *forced, struct sp_err *e)
{
	return sp_sandbox_resume(x, id, changed, e);
}

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-resume [ID...]   (or ids on stdin)\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	static const struct sp_verb v = { "running", 0, resume1 };

	return sp_verb_main(argc, argv, &v, usage);
}
