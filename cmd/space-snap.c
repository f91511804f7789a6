/*
 * space-snap: snapshots of sandboxes (design.md).  Without a subcommand it
 * takes one of each sandbox named (or read from stdin): a disk snapshot (of a
 * running guest frozen meanwhile, unless --crash-consistent), or with --full
 * a checkpoint of disk and memory.  ls and rm list and delete.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp.h"

struct take {
	struct sp_ctx x;
	int flags;
	const char *tag;
};

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-snap [--full | --crash-consistent] [--tag T] [ID...]   "
	    "(or ids on stdin)\n"
	    "       space-snap ls ID...\n"
	    "       space-snap rm ID SNAP...\n");
	sp_usage_exit();
}

static int
take1(const char *id, json_t *rec, void *arg)
{
	struct take *t = arg;
	struct sp_err e;
	json_t *o;

	if (sp_snap_take(&t->x, id, t->flags, t->tag, &o, &e) == -1)
		return sp_out_fail(id, &e);
	return sp_out_json(o);
}

static int
print(json_t *o, void *arg)
{
	return sp_out_json(o);
}

static int
ls1(const char *id, json_t *rec, void *arg)
{
	struct sp_err e;

	if (sp_snap_list(arg, id, print, NULL, &e) == -1)
		return sp_out_fail(id, &e);
	return 0;
}

static int
rm(struct sp_ctx *x, int argc, char *argv[])
{
	struct sp_err e;
	int i, removed, rc = 0, r;

	if (argc < 2)
		usage();
	for (i = 1; i < argc; i++) {
		if (sp_snap_remove(x, argv[0], argv[i], &removed, &e) == -1)
			r = sp_out_fail(argv[0], &e);
		else
			r = sp_out_ok(argv[0], json_pack("{s:s, s:b}", "snap",
			    argv[i], "removed", removed));
		if (r > rc)
			rc = r;
	}
	return rc;
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "full", no_argument, NULL, 'f' },
		{ "crash-consistent", no_argument, NULL, 'c' },
		{ "tag", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	struct take t = { .flags = 0, .tag = NULL };
	struct sp_err e;
	int ch, rc;

	sp_cli_init(argc, argv, usage);
	if (argc >= 2 && strcmp(argv[1], "ls") == 0) {
		if (argc < 3)
			usage();
		sp_event_action("snap.ls");
		return sp_each_sandbox(argc - 2, argv + 2, &t.x, 0, ls1, &t.x);
	}
	if (argc >= 2 && strcmp(argv[1], "rm") == 0) {
		if (argc < 4)
			usage();
		sp_event_action("snap.rm");
		if (sp_ctx_open(&t.x, 0, &e) == -1)
			return sp_out_fail(NULL, &e);
		rc = rm(&t.x, argc - 2, argv + 2);
		sp_ctx_close(&t.x);
		return rc;
	}
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'f':
			t.flags |= SP_SNAP_FULL;
			break;
		case 'c':
			t.flags |= SP_SNAP_NO_FREEZE;
			break;
		case 't':
			t.tag = optarg;
			break;
		default:
			usage();
		}
	}
	if (t.flags == (SP_SNAP_FULL | SP_SNAP_NO_FREEZE))
		usage();
	return sp_each_sandbox(argc - optind, argv + optind, &t.x,
	    t.flags & SP_SNAP_FULL, take1, &t);
}
