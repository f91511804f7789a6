/*
 * space-schedule: one pass of the scheduler.  Every sandbox that is wished
 * somewhere and has no node yet (space-create --anywhere, space-restore
 * --anywhere) gets one, by fit, then locality, then spread, and its line
 * says why; the node's space-reconcile makes or restores it.  First the
 * sandboxes of a node whose lease lapsed --lost-after seconds ago become
 * lost, and those backed up are placed anew.  A timer runs it on every
 * node: two passes at once never place one sandbox twice.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-schedule [--limit N] [--vcpu-ratio R] [--memory-ratio R]\n"
	    "                      [--lost-after SECONDS] [--no-recover]\n");
	sp_usage_exit();
}

static double
ratio(const char *s, double lo, double hi)
{
	char *end;
	double v = strtod(s, &end);

	if (*s == '\0' || *end != '\0' || !(v >= lo && v <= hi))
		usage();
	return v;
}

static int
print(json_t *o, void *arg)
{
	(void)arg;
	return sp_out_json(o);
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "limit", required_argument, NULL, 'l' },
		{ "vcpu-ratio", required_argument, NULL, 'v' },
		{ "memory-ratio", required_argument, NULL, 'm' },
		{ "lost-after", required_argument, NULL, 'L' },
		{ "no-recover", no_argument, NULL, 'R' },
		{ NULL, 0, NULL, 0 },
	};
	struct sp_sched_opts o = SP_SCHED_DEFAULTS;
	struct sp_ctx x;
	struct sp_err e;
	int ch, placed, rc = 0;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'l':
			o.limit = (int)ratio(optarg, 1, 100000);
			break;
		case 'v':
			o.vcpu_ratio = ratio(optarg, 0.1, 1000);
			break;
		case 'm':
			o.memory_ratio = ratio(optarg, 0.1, 10);
			break;
		case 'L':
			o.lost_after_s = (int)ratio(optarg, 0, 86400);
			break;
		case 'R':
			o.recover = 0;
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	if (sp_ctx_open(&x, 0, &e) == -1)
		return sp_out_fail(NULL, &e);
	if (sp_schedule_pass(&x, &o, print, NULL, &placed, &e) == -1)
		rc = sp_out_fail(NULL, &e);
	sp_ctx_close(&x);
	return rc;
}
