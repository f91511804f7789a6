/*
 * space-fork: new sandboxes from a sandbox's state now (a full checkpoint
 * taken for it, which carries its running processes) or from one of its
 * snapshots.  Each fork is a CoW copy with its own id, UUID and identity.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-fork ID [SNAP] [-n COUNT]\n");
	sp_usage_exit();
}

static int
print(json_t *o, void *arg)
{
	return sp_out_json(o);
}

int
main(int argc, char *argv[])
{
	struct sp_ctx x;
	struct sp_err e;
	char *end, id[SP_ID_LEN + 1];
	long count = 1;
	int ch, rc;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt(argc, argv, "n:")) != -1) {
		if (ch != 'n')
			usage();
		count = strtol(optarg, &end, 10);
		if (*optarg == '\0' || *end != '\0' || count < 1 || count > 64) {
			fprintf(stderr, "space-fork: -n: a count from 1 to 64\n");
			return SP_EXIT_USAGE;
		}
	}
	if (argc - optind < 1 || argc - optind > 2)
		usage();
	if (sp_ctx_open(&x, 1, &e) == -1)
		return sp_out_fail(NULL, &e);
	rc = sp_sandbox_ref(&x, argv[optind], id, &e) == -1 ||
	    sp_snap_fork(&x, id, argc - optind == 2 ? argv[optind + 1] : NULL,
	    (int)count, print, NULL, &e) == -1 ? sp_out_fail(argv[optind], &e) :
	    0;
	sp_ctx_close(&x);
	return rc;
}
