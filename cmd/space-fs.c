/*
 * space-fs: single file operations in a sandbox through its guest daemon.
 * ls, stat, mkdir, rm, mv and write print JSON lines; cat moves the file's
 * raw bytes to stdout and write takes them from stdin.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-fs ID ls|stat|cat PATH\n"
	    "       space-fs ID write [-a] [-m MODE] PATH\n"
	    "       space-fs ID mkdir [-p] [-m MODE] PATH\n"
	    "       space-fs ID rm [-r] PATH\n"
	    "       space-fs ID mv PATH NEWPATH\n");
	sp_usage_exit();
}

/* A channel into a running sandbox. */
static int
open_chan(struct sp_ctx *x, const char **id, char buf[SP_ID_LEN + 1],
    struct sp_chan **c, struct sp_err *e)
{
	/* sp_chan_open_running wakes a sandbox idle tiers paused.  A name
	 * becomes its id (*id then points to buf). */
	if (sp_ctx_open_ref(x, id, buf, e) == -1)
		return -1;
	return sp_sandbox_chan(x, *id, c, e);
}

struct ls {
	const char *id;
};

static int
ls1(json_t *ent, void *arg)
{
	struct ls *l = arg;

	/* What the guest says must not pass for our own fields. */
	json_object_del(ent, "id");
	json_object_del(ent, "ok");
	sp_out_ok(l->id, json_incref(ent));
	return 0;
}

static int
parse_mode(const char *s, int *mode)
{
	char *end;
	long v;

	v = strtol(s, &end, 8);
	if (*s == '\0' || *end != '\0' || v < 0 || v > 07777) {
		sp_warn("-m: need an octal mode, not \"%s\"", s);
		return -1;
	}
	*mode = (int)v;
	return 0;
}

int
main(int argc, char *argv[])
{
	struct sp_ctx x = { 0 };
	struct sp_chan *c = NULL;
	struct sp_err e;
	const char *id, *verb, *path;
	char idbuf[SP_ID_LEN + 1];
	char action[16];
	json_t *st;
	struct ls l;
	uint64_t size;
	int ch, append = 0, parents = 0, recursive = 0, mode = -1, trunc = 0;
	int raw, rc;

	sp_cli_init(argc, argv, usage);
	signal(SIGPIPE, SIG_IGN);
	while ((ch = getopt(argc, argv, "apm:r")) != -1) {
		switch (ch) {
		case 'a':
			append = 1;
			break;
		case 'p':
			parents = 1;
			break;
		case 'r':
			recursive = 1;
			break;
		case 'm':
			if (parse_mode(optarg, &mode) == -1)
				return SP_EXIT_USAGE;
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 3)
		usage();
	id = argv[0];
	verb = argv[1];
	argc -= 2;
	argv += 2;
	if (argc != (strcmp(verb, "mv") == 0 ? 2 : 1))
		usage();
	path = argv[0];
	if (strcmp(verb, "ls") != 0 && strcmp(verb, "stat") != 0 &&
	    strcmp(verb, "cat") != 0 && strcmp(verb, "write") != 0 &&
	    strcmp(verb, "mkdir") != 0 && strcmp(verb, "rm") != 0 &&
	    strcmp(verb, "mv") != 0)
		usage();
	snprintf(action, sizeof action, "fs.%s", verb);
	sp_event_action(action);
	/* cat's stdout is the file: its failures go to stderr alone. */
	raw = strcmp(verb, "cat") == 0;
	if (sp_fs_path_check(path, &e) == -1 ||
	    (argc == 2 && sp_fs_path_check(argv[1], &e) == -1) ||
	    open_chan(&x, &id, idbuf, &c, &e) == -1)
		goto fail;
	if (strcmp(verb, "ls") == 0) {
		l.id = id;
		if (sp_fs_list(c, path, ls1, &l, &trunc, &e) == -1)
			goto fail;
		if (trunc)
			sp_warn("%s: %s: listing cut at %d entries", id, path,
			    SP_FS_LIST_MAX);
		rc = 0;
	} else if (strcmp(verb, "stat") == 0) {
		if (sp_fs_stat(c, path, 0, &st, &e) == -1)
			goto fail;
		json_object_del(st, "id");
		json_object_del(st, "ok");
		json_object_set_new(st, "path", json_string(path));
		rc = sp_out_ok(id, st);
	} else if (strcmp(verb, "cat") == 0) {
		if (sp_fs_read(c, path, 1, &size, &e) == -1)
			goto fail;
		rc = 0;
	} else if (strcmp(verb, "write") == 0) {
		if (sp_fs_write(c, path, 0, mode, append, &size, &e) == -1)
			goto fail;
		rc = sp_out_ok(id, json_pack("{s:s,s:I}", "path", path, "size",
		    (json_int_t)size));
	} else if (strcmp(verb, "mkdir") == 0) {
		if (sp_fs_mkdir(c, path, parents, mode, &e) == -1)
			goto fail;
		rc = sp_out_ok(id, json_pack("{s:s}", "path", path));
	} else if (strcmp(verb, "rm") == 0) {
		if (sp_fs_remove(c, path, recursive, &e) == -1)
			goto fail;
		rc = sp_out_ok(id, json_pack("{s:s}", "path", path));
	} else {
		if (sp_fs_rename(c, path, argv[1], &e) == -1)
			goto fail;
		rc = sp_out_ok(id, json_pack("{s:s,s:s}", "path", path, "to",
		    argv[1]));
	}
	/* The event of a cat, or of an empty ls (sp_event.c). */
	sp_event_cli(id, NULL, json_pack("{s:s}", "path", path));
	goto out;
fail:
	if (raw) {
		sp_event_cli(id, &e, json_pack("{s:s}", "path", path));
		sp_warn("%s: %s", id, e.msg);
		rc = sp_err_exit(&e);
	} else
		rc = sp_out_fail(id, &e);
out:
	sp_chan_close(c);
	if (x.db != NULL)
		sp_ctx_close(&x);
	return rc;
}
