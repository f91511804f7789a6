/*
 * space-rollback: puts a sandbox back on one of its snapshots.  What it was
 * just before is kept as a snapshot first (its id is "saved"), so a rollback
 * can be rolled back.
 */
#include <stdio.h>
#include <unistd.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-rollback ID SNAP\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	struct sp_ctx x;
	struct sp_err e;
	char id[SP_ID_LEN + 1];
	json_t *o;
	int rc;

	sp_cli_init(argc, argv, usage);
	if (getopt(argc, argv, "") != -1 || argc - optind != 2)
		usage();
	if (sp_ctx_open(&x, 1, &e) == -1)
		return sp_out_fail(NULL, &e);
	rc = sp_sandbox_ref(&x, argv[optind], id, &e) == -1 ||
	    sp_snap_rollback(&x, id, argv[optind + 1], &o, &e) == -1 ?
	    sp_out_fail(argv[optind], &e) : sp_out_json(o);
	sp_ctx_close(&x);
	return rc;
}
