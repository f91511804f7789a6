/*
 * space-gc: deletes the snapshots that fall out of every retention tier
 * (SPACE_RETAIN) and tells each one; tagged snapshots stay.
 */
#include <getopt.h>
#include <stdio.h>

#include "sp.h"

static int
print(json_t *o, void *arg)
{
	return sp_out_json(o);
}

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-gc [--dry-run]\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "dry-run", no_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	struct sp_ctx x;
	struct sp_err e;
	int ch, dry = 0, rc = 0;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch != 'n')
			usage();
		dry = 1;
	}
	if (optind != argc)
		usage();
	if (sp_ctx_open(&x, 0, &e) == -1)
		return sp_out_fail(NULL, &e);
	if (sp_snap_gc(&x, dry, print, NULL, &e) == -1) {
		sp_warn("%s", e.msg);
		rc = sp_err_exit(&e);
	}
	sp_ctx_close(&x);
	return rc;
}
