/*
 * space-backup: running sandboxes to the object store as they are now, while
 * they go on: a full checkpoint, sent as space-suspend sends one, becomes
 * each one's restorable snapshot.  When its node is lost, the scheduler has
 * another node restore it from there (space-schedule).  What
 * space-backup.timer runs on every running sandbox of the node.
 */
#include <stdio.h>
#include <unistd.h>

#include "sp.h"

static int
backup1(const char *id, json_t *rec, void *arg)
{
	struct sp_err e;
	json_t *out;

	if (sp_backup(arg, id, &out, &e) == -1)
		return sp_out_fail(id, &e);
	return sp_out_json(out);
}

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-backup [ID...]   (or ids on stdin)\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	struct sp_ctx x;

	sp_cli_init(argc, argv, usage);
	if (getopt(argc, argv, "") != -1)
		usage();
	return sp_each_sandbox(argc - optind, argv + optind, &x, 1, backup1, &x);
}
