/*
 * space-ttl: set, extend or clear sandboxes' lifetimes.  DURATION counts from
 * now, +DURATION from the expiry a sandbox has (from now when it has none),
 * none clears it.  --on-expiry changes what happens then.  Only the row
 * changes: the reconcile pass of the sandbox's node carries it out.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "sp.h"

struct ttl {
	struct sp_ctx x;
	const char *spec;
	const char *on_expiry;	/* NULL: the one it has */
	int64_t now;
};

static int
ttl1(const char *id, json_t *rec, void *arg)
{
	struct ttl *t = arg;
	struct sp_sandbox_row r;
	struct sp_err e;
	int64_t expires;
	json_t *o;

	(void)rec;
	if (sp_id_check(id, &e) == -1 ||
	    sp_db_sandbox_get(t->x.db, id, &r, &e) == -1)
		return sp_out_fail(id, &e);
	sp_db_row_release(&r);
	if (r.pod) {
		sp_err_set(&e, SP_E_NOT_FOUND, 0, "no such sandbox");
		return sp_out_fail(id, &e);
	}
	if (sp_expiry_parse(t->spec, t->now, r.expires, &expires, &e) == -1 ||
	    sp_db_sandbox_expiry_set(t->x.db, id, expires, t->on_expiry ?
	    t->on_expiry : "", &e) == -1)
		return sp_out_fail(id, &e);
	o = json_pack("{s:o, s:s}", "expires", expires > 0 ?
	    json_integer((json_int_t)expires) : json_null(), "on_expiry",
	    t->on_expiry ? t->on_expiry : r.on_expiry[0] ? r.on_expiry : "kill");
	return sp_out_ok(id, o);
}

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-ttl [--on-expiry kill|pause|suspend] [ID...] "
	    "DURATION|+DURATION|none\n"
	    "       (with no ID, ids on stdin)\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "on-expiry", required_argument, NULL, 'X' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ttl t = { .on_expiry = NULL };
	struct sp_err e;
	int64_t check;
	int ch;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (ch != 'X')
			usage();
		if (!sp_on_expiry_ok(optarg)) {
			sp_warn("--on-expiry: kill, pause or suspend, not "
			    "'%.16s'", optarg);
			return SP_EXIT_USAGE;
		}
		t.on_expiry = optarg;
	}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		usage();
	t.spec = argv[argc - 1];
	/* A bad lifetime is refused before any sandbox is touched. */
	if (sp_now(&t.now, &e) == -1 ||
	    sp_expiry_parse(t.spec, t.now, 0, &check, &e) == -1) {
		sp_warn("%s", e.msg);
		return SP_EXIT_USAGE;
	}
	return sp_each_sandbox(argc - 1, argv, &t.x, 0, ttl1, &t);
}
