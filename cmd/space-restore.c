/*
 * space-restore: a suspended sandbox back from the object store, on this node
 * or (--node N) on node N, whose reconcile pass does it.  Its processes go on
 * where they were.
 */
#include <getopt.h>
#include <stdio.h>

#include "sp.h"

struct restore {
	struct sp_ctx x;
	const char *node;
};

static int
restore1(const char *id, json_t *rec, void *arg)
{
	struct restore *r = arg;
	struct sp_err e;
	json_t *out;

	if (sp_restore(&r->x, id, r->node, &out, &e) == -1)
		return sp_out_fail(id, &e);
	return sp_out_json(out);
}

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-restore [--node NODE] "
	    "[ID...]   (or ids on stdin)\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "node", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	struct restore r = { .node = NULL };
	int ch;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch != 'n')
			usage();
		r.node = optarg;
	}
	return sp_each_sandbox(argc - optind, argv + optind, &r.x, 1, restore1,
	    &r);
}
