/*
 * space-restore: a suspended sandbox back from the object store, on this node,
 * or (--node N) on node N, or (--anywhere) on the node the scheduler picks,
 * whose reconcile pass does it.  Its processes go on where they were.
 */
#include <getopt.h>
#include <stdio.h>

#include "sp.h"

struct restore {
	struct sp_ctx x;
	const char *node;
	int wait_ms;		/* -1: --wait not given */
	int listening;
};

static int
restore1(const char *id, json_t *rec, void *arg)
{
	struct sp_sched_opts so = SP_SCHED_DEFAULTS;
	struct restore *r = arg;
	struct sp_sandbox_row row;
	int64_t t0 = sp_clock_ms();
	struct sp_err e;
	json_t *out;
	int placed;

	/* Listening before the wish is recorded, no wake-up is missed. */
	if (r->wait_ms >= 0 && !r->listening) {
		if (sp_db_listen(r->x.db, &e) == -1)
			return sp_out_fail(id, &e);
		r->listening = 1;
	}
	if (sp_restore(&r->x, id, r->node, &out, &e) == -1)
		return sp_out_fail(id, &e);
	if (r->node != NULL && r->node[0] == '\0' &&
	    sp_schedule_pass(&r->x, &so, NULL, NULL, &placed, &e) == -1)
		sp_warn("%s: scheduling: %s (space-schedule places it later)", id,
		    e.msg);
	if (r->wait_ms < 0 || !json_is_true(json_object_get(out, "queued")))
		return sp_out_json(out);
	json_decref(out);
	if (sp_sandbox_wait(&r->x, id, "running", r->wait_ms, &row, &e) == -1)
		return sp_out_fail(id, &e);
	out = json_pack("{s:s, s:s, s:s, s:o, s:I}", "state", "running", "node",
	    row.node, "template", row.template, "placed", row.placed ?
	    json_loads(row.placed, 0, NULL) : json_null(), "waited_ms",
	    (json_int_t)(sp_clock_ms() - t0));
	sp_db_row_release(&row);
	return sp_out_ok(id, out);
}

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-restore [--node NODE | "
	    "--anywhere] [--wait [SECONDS]]\n           [ID...]   (or ids on "
	    "stdin)\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "node", required_argument, NULL, 'n' },
		{ "anywhere", no_argument, NULL, 'a' },
		{ "wait", optional_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	struct restore r = { .node = NULL, .wait_ms = -1 };
	const char *wait = NULL;
	int ch, waits = 0, anywhere = 0, n;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'n':
			r.node = optarg;
			break;
		case 'a':
			anywhere = 1;
			break;
		case 'w':
			waits = 1;
			wait = optarg;
			break;
		default:
			usage();
		}
	}
	n = argc - optind;
	if ((anywhere && r.node != NULL) ||
	    (waits && sp_cli_wait_opt(wait, &n, argv + optind, &r.wait_ms) == -1))
		usage();
	if (anywhere)
		r.node = "";
	return sp_each_sandbox(n, argv + optind, &r.x, 1, restore1, &r);
}
