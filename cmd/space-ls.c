/*
 * space-ls: list sandboxes, the DB joined with what libvirt and btrfs say
 * (for this node's; another node's from their record alone).  --node NODE
 * and --here list only one node's.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-ls [--state STATE] [--idle-over SECONDS] "
	    "[--pods] [--node NODE | --here] [ID...]\n");
	sp_usage_exit();
}

struct ls {
	struct sp_ctx x;
	const char *state;	/* observed state filter, or NULL */
	long long idle_over;	/* -1, or only those idle at least that long */
	int pods;		/* also the warm pool's pods */
	const char *node;	/* only that node's, or NULL */
	int rc;
};

static int
show(const struct sp_sandbox_row *r, void *arg)
{
	struct ls *l = arg;
	struct sp_err e;
	json_t *o;
	int rc;

	if (l->node != NULL && strcmp(r->node, l->node) != 0)
		return 0;
	if (sp_sandbox_describe(&l->x, r, &o, &e) == -1) {
		/* The worst status of the items listed, as sp_each gives. */
		rc = sp_out_fail(r->id, &e);
		if (rc > l->rc)
			l->rc = rc;
		return 0;
	}
	if (l->state != NULL &&
	    strcmp(json_string_value(json_object_get(o, "state")), l->state) != 0) {
		json_decref(o);
		return 0;
	}
	/* Unknown idleness (a daemon that does not answer) is not idleness. */
	if (l->idle_over >= 0 && (!json_is_integer(json_object_get(o, "idle_s")) ||
	    json_integer_value(json_object_get(o, "idle_s")) < l->idle_over)) {
		json_decref(o);
		return 0;
	}
	sp_out_json(o);
	return 0;
}

static int
one(const char *id, json_t *rec, void *arg)
{
	struct ls *l = arg;
	struct sp_sandbox_row r;
	struct sp_err e;

	if (sp_id_check(id, &e) == -1 || sp_db_sandbox_get(l->x.db, id, &r, &e) == -1)
		return sp_out_fail(id, &e);
	l->rc = 0;
	show(&r, l);
	sp_db_row_release(&r);
	return l->rc;
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "state", required_argument, NULL, 's' },
		{ "idle-over", required_argument, NULL, 'i' },
		{ "pods", no_argument, NULL, 'p' },
		{ "node", required_argument, NULL, 'n' },
		{ "here", no_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ls l = { .idle_over = -1 };
	struct sp_err e;
	char *end;
	int ch, rc, here = 0;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			if (sp_state_parse(optarg) < 0) {
				sp_warn("--state: unknown state '%.32s'", optarg);
				return SP_EXIT_USAGE;
			}
			l.state = optarg;
			break;
		case 'p':
			l.pods = 1;
			break;
		case 'n':
			if (sp_name_check("--node", optarg, &e) == -1) {
				sp_warn("%s", e.msg);
				return SP_EXIT_USAGE;
			}
			l.node = optarg;
			break;
		case 'H':
			here = 1;
			break;
		case 'i':
			l.idle_over = strtoll(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || l.idle_over < 0) {
				sp_warn("--idle-over: need a number of seconds");
				return SP_EXIT_USAGE;
			}
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (here && l.node != NULL)
		usage();
	if (sp_ctx_open(&l.x, 1, &e) == -1)
		return sp_out_fail(NULL, &e);
	/* The node's own timers pipe --here into commands that act here. */
	if (here)
		l.node = l.x.conf.node;
	if (argc > 0)
		rc = sp_each(argc, argv, one, &l);
	else if (sp_db_sandbox_each(l.x.db, l.pods ? SP_DB_WITH_PODS : -1, show,
	    &l, &e) == -1)
		rc = sp_out_fail(NULL, &e);
	else
		rc = l.rc;
	sp_ctx_close(&l.x);
	return rc;
}
