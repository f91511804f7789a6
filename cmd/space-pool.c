/*
 * space-pool: the warm pool.  set keeps N pods per template, fill makes them
 * (idempotent: what space-pool.timer runs), ls shows each pool.
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
	    "usage: space-pool set --template NAME --size N "
	    "[--memory MiB] [--vcpus N]\n"
	    "       space-pool fill\n"
	    "       space-pool ls\n");
	sp_usage_exit();
}

static int
number(const char *s, long lo, long hi)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < lo || v > hi)
		usage();
	return (int)v;
}

static int
set(struct sp_ctx *x, int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "template", required_argument, NULL, 't' },
		{ "size", required_argument, NULL, 's' },
		{ "memory", required_argument, NULL, 'm' },
		{ "vcpus", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	const char *template = NULL;
	int ch, size = -1, mem = 256, vcpus = 1;
	struct sp_err e;

	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 't':
			template = optarg;
			break;
		case 's':
			size = number(optarg, 0, 1000);
			break;
		case 'm':
			mem = number(optarg, 64, 65536);
			break;
		case 'c':
			vcpus = number(optarg, 1, 64);
			break;
		default:
			usage();
		}
	}
	if (template == NULL || size < 0 || optind != argc)
		usage();
	if (sp_pool_set(x, template, size, mem, vcpus, &e) == -1)
		return sp_out_fail(NULL, &e);
	return sp_out_ok(NULL, json_pack("{s:s, s:i, s:i, s:i}", "pool", template,
	    "size", size, "memory_mib", mem, "vcpus", vcpus));
}

static int
print(json_t *o, void *arg)
{
	(void)arg;
	return sp_out_json(o);
}

static int
ls1(const struct sp_pool_row *p, void *arg)
{
	(void)arg;
	return sp_out_json(json_pack("{s:s, s:i, s:i, s:i, s:i}", "pool",
	    p->template, "size", p->size, "ready", p->ready, "memory_mib",
	    p->memory_mib, "vcpus", p->vcpus));
}

int
main(int argc, char *argv[])
{
	struct sp_ctx x;
	struct sp_err e;
	int rc = 0;

	sp_cli_init(argc, argv, usage);
	if (argc < 2)
		usage();
	if (strcmp(argv[1], "set") != 0 && strcmp(argv[1], "fill") != 0 &&
	    strcmp(argv[1], "ls") != 0)
		usage();
	if (strcmp(argv[1], "set") != 0 && argc != 2)
		usage();
	if (sp_ctx_open(&x, strcmp(argv[1], "fill") == 0, &e) == -1)
		return sp_out_fail(NULL, &e);
	if (strcmp(argv[1], "set") == 0)
		rc = set(&x, argc - 1, argv + 1);
	else if (strcmp(argv[1], "fill") == 0) {
		if (sp_pool_fill(&x, print, NULL, &e) == -1)
			rc = sp_err_exit(&e);
	} else if (sp_db_pool_each(x.db, x.conf.node, ls1, NULL, &e) == -1)
		rc = sp_out_fail(NULL, &e);
	sp_ctx_close(&x);
	return rc;
}
