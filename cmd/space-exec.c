/*
 * space-exec: run a command in a sandbox through its guest daemon.  Its
 * stdout and stderr pass through; the exit status is the command's, and a
 * platform failure is 111 (temporary) or 1 with a message on stderr.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"

#define MAX_ENV 256

static void
usage(void)
{
	fprintf(stderr, "usage: space-exec ID [-e KEY=VALUE]... [-w DIR] "
	    "-- CMD [ARG...]\n");
	exit(SP_EXIT_USAGE);
}

static int
fail(const char *id, const struct sp_err *e)
{
	sp_warn("%s: %s", id, e->msg);
	/* As a shell says: the command could not be started. */
	if (strcmp(e->code, "exec-failed") == 0)
		return 127;
	return sp_err_exit(e);
}

int
main(int argc, char *argv[])
{
	char *env[MAX_ENV + 1];
	struct sp_sandbox_row row;
	struct sp_exec xr = { 0 };
	struct sp_chan *c = NULL;
	struct sp_ctx x;
	struct sp_err e;
	const char *id;
	int ch, nenv = 0, status, rc;

	sp_out_init(argv[0]);
	/* A reader that went away must not kill us mid-call. */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2 || argv[1][0] == '-')
		usage();
	id = argv[1];
	argc--;
	argv++;
	while ((ch = getopt(argc, argv, "+e:w:")) != -1) {
		switch (ch) {
		case 'e':
			if (nenv == MAX_ENV || strchr(optarg, '=') == NULL ||
			    optarg[0] == '=') {
				sp_warn("-e: need KEY=VALUE (at most %d)", MAX_ENV);
				return SP_EXIT_USAGE;
			}
			env[nenv++] = optarg;
			break;
		case 'w':
			xr.cwd = optarg;
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		usage();
	env[nenv] = NULL;
	if (sp_id_check(id, &e) == -1)
		return fail(id, &e);
	if (sp_ctx_open(&x, 0, &e) == -1)
		return fail(id, &e);
	if (sp_db_sandbox_get(x.db, id, &row, &e) == -1) {
		rc = fail(id, &e);
		goto out;
	}
	if (row.state != SP_ST_RUNNING) {
		sp_err_set(&e, "bad-state", 0, "sandbox is %s, not running",
		    sp_state_name(row.state));
		sp_db_row_release(&row);
		rc = fail(id, &e);
		goto out;
	}
	sp_db_row_release(&row);
	if (sp_chan_open(&c, x.conf.run, id, 30000, &e) == -1) {
		rc = fail(id, &e);
		goto out;
	}
	xr.argv = argv;
	xr.env = nenv > 0 ? env : NULL;
	xr.in_fd = isatty(0) ? -1 : 0;
	xr.out_fd = 1;
	xr.err_fd = 2;
	if (sp_chan_exec(c, &xr, &status, &e) == -1)
		rc = fail(id, &e);
	else
		rc = status;
out:
	sp_chan_close(c);
	sp_ctx_close(&x);
	return rc;
}
