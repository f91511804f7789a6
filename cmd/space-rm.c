/* space-rm: destroy sandboxes: their VM, subvolumes, run dir and DB rows. */
#include <stdio.h>
#include <unistd.h>

#include "sp.h"

static int
rm1(const char *id, json_t *rec, void *ctx)
{
	struct sp_err e;
	int existed;

	if (sp_sandbox_remove(ctx, id, &existed, &e) == -1)
		return sp_out_fail(id, &e);
	/* Removing what is already gone is success: it says so. */
	return sp_out_ok(id, json_pack("{s:b}", "removed", existed));
}

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-rm [ID...]   (or ids on stdin)\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	struct sp_ctx x;

	sp_cli_init(argc, argv, usage);
	if (getopt(argc, argv, "") != -1)
		usage();
	return sp_each_sandbox(argc - optind, argv + optind, &x, 1, rm1, &x);
}
