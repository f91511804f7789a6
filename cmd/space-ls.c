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
	    "[--idle-due pause|suspend|rm]\n"
	    "                [--pods] [--node NODE | --here] [ID...]\n");
	sp_usage_exit();
}

struct ls {
	struct sp_ctx x;
	const char *state;	/* observed state filter, or NULL */
	long long idle_over;	/* -1, or only those idle at least that long */
	const char *idle_due;	/* only those whose idle tier due is this */
	int64_t now;
	int pods;		/* also the warm pool's pods */
	const char *node;	/* only that node's, or NULL */
	int rc;
};

/* Whether r's idle tier due is the one asked for: its own tiers or the
 * node's; a running one idle as its daemon says, any other since its last
 * transition (when it was paused, stopped or suspended).  A sandbox with
 * tiers of its own that do not parse is never due. */
static int
due(const struct ls *l, const struct sp_sandbox_row *r, json_t *o)
{
	const char *state = json_string_value(json_object_get(o, "state"));
	json_t *idle_s = json_object_get(o, "idle_s");
	struct sp_idle p;
	const char *tier;
	int64_t idle;
	struct sp_err e;

	if (sp_idle_of(r->idle, l->x.conf.idle, &p, &e) == -1)
		return 0;
	if (strcmp(state, "running") == 0)
		idle = json_is_integer(idle_s) ? json_integer_value(idle_s) : -1;
	else
		idle = l->now - r->updated;
	tier = sp_idle_due(&p, state, idle);
	return tier != NULL && strcmp(tier, l->idle_due) == 0;
}

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
	if (l->idle_due != NULL && !due(l, r, o)) {
		json_decref(o);
		return 0;
	}
	sp_out_json(o);
	return 0;
}

static int
one(const char *ref, json_t *rec, void *arg)
{
	struct ls *l = arg;
	struct sp_sandbox_row r;
	char id[SP_ID_LEN + 1];
	struct sp_err e;

	if (sp_sandbox_ref(&l->x, ref, id, &e) == -1 ||
	    sp_db_sandbox_get(l->x.db, id, &r, &e) == -1)
		return sp_out_fail(ref, &e);
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
		{ "idle-due", required_argument, NULL, 'D' },
		{ "pods", no_argument, NULL, 'p' },
		{ "node", required_argument, NULL, 'n' },
		{ "here", no_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ls l = { .idle_over = -1 };
	struct sp_idle node_idle;
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
		case 'D':
			if (strcmp(optarg, "pause") != 0 &&
			    strcmp(optarg, "suspend") != 0 &&
			    strcmp(optarg, "rm") != 0) {
				sp_warn("--idle-due: pause, suspend or rm, not "
				    "'%.16s'", optarg);
				return SP_EXIT_USAGE;
			}
			l.idle_due = optarg;
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
	/* The node's tiers are checked here, by the one command they steer. */
	if (l.idle_due != NULL && (sp_now(&l.now, &e) == -1 ||
	    sp_idle_parse(l.x.conf.idle, &node_idle, &e) == -1)) {
		sp_warn("SPACE_IDLE: %s", e.msg);
		sp_ctx_close(&l.x);
		return SP_EXIT_USAGE;
	}
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
