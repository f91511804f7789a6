/*
 * space-rm: destroy sandboxes: their VM, subvolumes, run dir and DB rows.  A
 * sandbox of another node is removed by that node (its wish, carried out by
 * its space-reconcile).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"

struct rm {
	struct sp_ctx x;
	int wait_ms;		/* -1: --wait not given */
};

static int
rm1(const char *id, json_t *rec, void *arg)
{
	struct rm *r = arg;
	struct sp_err e;
	json_t *out;
	int existed, c;

	/* One that is gone already is removed here, as it always was. */
	if ((c = sp_cli_elsewhere(&r->x, id, "destroyed", r->wait_ms, &out,
	    &e)) == -1 && e.code != SP_E_NOT_FOUND)
		return sp_out_fail(id, &e);
	if (c == 1)
		return sp_out_ok(id, out);
	if (sp_sandbox_remove(&r->x, id, &existed, &e) == -1)
		return sp_out_fail(id, &e);
	/* Removing what is already gone is success: it says so. */
	return sp_out_ok(id, json_pack("{s:b}", "removed", existed));
}

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-rm [--wait [SECONDS]] [ID...]   (or ids on stdin)\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "wait", optional_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	struct rm r = { .wait_ms = -1 };
	const char *wait = NULL;
	int ch, waits = 0, n;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch != 'w')
			usage();
		waits = 1;
		wait = optarg;
	}
	n = argc - optind;
	if (waits && sp_cli_wait_opt(wait, &n, argv + optind, &r.wait_ms) == -1)
		usage();
	return sp_each_sandbox(n, argv + optind, &r.x, 1, rm1, &r);
}
