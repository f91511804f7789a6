/*
 * space-logs: the output a detached process of a sandbox left in its guest
 * daemon's ring buffer (the last MiB), as raw bytes; with -f, and what it
 * writes after, until it exits.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-logs ID PID [-f]\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	struct sp_chan *c = NULL;
	struct sp_ctx x;
	struct sp_err e;
	const char *id;
	char idbuf[SP_ID_LEN + 1];
	pid_t pid;
	int ch, follow = 0, rc = 0;

	sp_cli_init(argc, argv, usage);
	signal(SIGPIPE, SIG_IGN);
	while ((ch = getopt(argc, argv, "f")) != -1)
		switch (ch) {
		case 'f':
			follow = 1;
			break;
		default:
			usage();
		}
	sp_cli_id_pid(argc - optind, argv + optind, usage, &id, &pid);
	if (sp_ctx_open_ref(&x, &id, idbuf, &e) == -1)
		return sp_out_fail(id, &e);
	if (sp_sandbox_chan(&x, id, &c, &e) == -1 ||
	    sp_chan_logs(c, pid, follow, 1, NULL, &e) == -1) {
		/* The output is the bytes: the error goes to stderr only. */
		sp_warn("%s: %s", id, e.msg);
		rc = sp_err_exit(&e);
	}
	sp_event_cli(id, rc != 0 ? &e : NULL, NULL);
	sp_chan_close(c);
	sp_ctx_close(&x);
	return rc;
}
