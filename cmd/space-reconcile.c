/*
 * space-reconcile: bring this node's sandboxes to legal states: finish or roll
 * back what a dead command left halfway, drive each VM to its record, remove
 * orphans.  Each pass first renews this node's lease (space-node beat).
 * --once makes one pass (what a timer runs); without it, a pass every
 * --interval seconds.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-reconcile [--once | --interval SECONDS]\n");
	sp_usage_exit();
}

static int
print(json_t *o, void *arg)
{
	(void)arg;
	return sp_out_json(o);
}

static int
pass(void)
{
	struct sp_ctx x;
	struct sp_err e;
	int lease, rc = 0;

	if (sp_ctx_open(&x, 1, &e) == -1)
		return sp_out_fail(NULL, &e);
	/* A node that cannot beat still reconciles what it has. */
	if ((lease = sp_node_lease_s(&e)) == -1 ||
	    sp_node_beat(&x, lease, NULL, &e) == -1)
		rc = sp_out_fail(NULL, &e);
	if (sp_reconcile_once(&x, print, NULL, &e) == -1)
		rc = sp_err_exit(&e);
	sp_ctx_close(&x);
	return rc;
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "once", no_argument, NULL, 'o' },
		{ "interval", required_argument, NULL, 'i' },
		{ NULL, 0, NULL, 0 },
	};
	int ch, once = 0, interval = 10;
	char *end;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'o':
			once = 1;
			break;
		case 'i':
			interval = (int)strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || interval < 1 ||
			    interval > 86400)
				usage();
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	if (once)
		return pass();
	for (;;) {
		pass();
		sleep((unsigned)interval);
	}
}
