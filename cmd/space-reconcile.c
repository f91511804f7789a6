/*
 * space-reconcile: bring this node's sandboxes to legal states: finish or roll
 * back what a dead command left halfway, drive each VM to its record, remove
 * orphans, carry out the lifetimes that ran out (--ttl, space-ttl) and the
 * wishes other nodes recorded for this node's sandboxes.  Each pass first
 * renews this node's lease (space-node beat).
 * --once makes one pass (what a timer runs); without it, a pass every
 * --interval seconds; with --listen, wishes are also carried out the moment
 * they are recorded (the DB wakes it: LISTEN/NOTIFY on PostgreSQL).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-reconcile [--once | --interval SECONDS [--listen]]\n");
	sp_usage_exit();
}

static int
print(json_t *o, void *arg)
{
	(void)arg;
	return sp_out_json(o);
}

/*
 * A node that cannot renew its lease (the DB is out of its reach) pauses
 * what it runs once the lease has run out by its own clock, before the
 * scheduler, later still, may restore it elsewhere: nothing runs twice.
 * No DB is needed for it: the configuration and libvirt.
 */
static void
fence_if_lapsed(void)
{
	struct sp_ctx x;
	struct sp_err e;

	memset(&x, 0, sizeof x);
	if (sp_conf_load(&x.conf, &e) == -1 || !sp_node_lease_lapsed(&x.conf))
		return;
	if (sp_reconcile_fence(&x, print, NULL, &e) == -1)
		sp_out_fail(NULL, &e);
	sp_ctx_close(&x);
}

static int
pass_open(struct sp_ctx *x)
{
	struct sp_err e;
	int lease, rc = 0;

	/* A node that cannot beat still reconciles what it has. */
	if ((lease = sp_node_lease_s(&e)) == -1 ||
	    sp_node_beat(x, lease, NULL, &e) == -1) {
		rc = sp_out_fail(NULL, &e);
		if (e.code == SP_E_DB)
			fence_if_lapsed();
	}
	if (sp_reconcile_once(x, print, NULL, &e) == -1)
		rc = sp_err_exit(&e);
	return rc;
}

static int
pass(void)
{
	struct sp_ctx x;
	struct sp_err e;
	int rc;

	if (sp_ctx_open(&x, 1, &e) == -1) {
		rc = sp_out_fail(NULL, &e);
		if (e.code == SP_E_DB)
			fence_if_lapsed();
		return rc;
	}
	rc = pass_open(&x);
	sp_ctx_close(&x);
	return rc;
}

/*
 * A pass every interval s, and between them the wishes the moment the DB
 * says something changed.  One connection throughout; when the DB goes
 * away it is opened again at the next pass.
 */
static _Noreturn void
listen_loop(int interval)
{
	struct sp_ctx x;
	struct sp_err e;
	int64_t next = 0;
	int w, open_ = 0;

	for (;;) {
		if (!open_) {
			if (sp_ctx_open(&x, 1, &e) == -1) {
				sp_out_fail(NULL, &e);
				if (e.code == SP_E_DB)
					fence_if_lapsed();
				sleep((unsigned)interval);
				continue;
			}
			if (sp_db_listen(x.db, &e) == -1) {
				sp_out_fail(NULL, &e);
				sp_ctx_close(&x);
				sleep((unsigned)interval);
				continue;
			}
			open_ = 1;
			next = 0;
		}
		if (sp_clock_ms() >= next) {
			pass_open(&x);
			next = sp_clock_ms() + (int64_t)interval * 1000;
		}
		w = sp_db_wait(x.db, (int)(next - sp_clock_ms()), &e);
		if (w == 1 && sp_reconcile_wishes(&x, 0, print, NULL, &e) == -1 &&
		    e.code == SP_E_DB)
			w = -1;
		if (w == -1) {
			sp_out_fail(NULL, &e);
			sp_ctx_close(&x);
			open_ = 0;
		}
	}
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "once", no_argument, NULL, 'o' },
		{ "interval", required_argument, NULL, 'i' },
		{ "listen", no_argument, NULL, 'l' },
		{ NULL, 0, NULL, 0 },
	};
	int ch, once = 0, listen = 0, interval = 10;
	char *end;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'o':
			once = 1;
			break;
		case 'l':
			listen = 1;
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
	if (optind != argc || (once && listen))
		usage();
	if (once)
		return pass();
	if (listen)
		listen_loop(interval);
	for (;;) {
		pass();
		sleep((unsigned)interval);
	}
}
