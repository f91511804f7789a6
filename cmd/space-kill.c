/*
 * space-kill: send a signal to a process a sandbox's guest daemon started
 * (a detached one, or a running call); the daemon refuses any other pid.
 */
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-kill ID PID [-s SIG]\n");
	sp_usage_exit();
}

/* A number, or a name with or without SIG (KILL, SIGTERM, ...). */
static int
sig_parse(const char *s)
{
	const char *name;
	char *end;
	long n;
	int i;

	if (isdigit((unsigned char)s[0])) {
		n = strtol(s, &end, 10);
		return *end == '\0' && n >= 0 && n <= 64 ? (int)n : -1;
	}
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (i = 1; i < NSIG; i++)
		if ((name = sigabbrev_np(i)) != NULL && strcasecmp(name, s) == 0)
			return i;
	return -1;
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
	int ch, sig = SIGTERM, rc;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt(argc, argv, "s:")) != -1)
		switch (ch) {
		case 's':
			if ((sig = sig_parse(optarg)) < 0) {
				sp_warn("-s: no signal '%.32s'", optarg);
				return SP_EXIT_USAGE;
			}
			break;
		default:
			usage();
		}
	sp_cli_id_pid(argc - optind, argv + optind, usage, &id, &pid);
	if (sp_ctx_open_ref(&x, &id, idbuf, &e) == -1)
		return sp_out_fail(id, &e);
	if (sp_sandbox_chan(&x, id, &c, &e) == -1 ||
	    sp_chan_kill(c, pid, sig, &e) == -1)
		rc = sp_out_fail(id, &e);
	else
		rc = sp_out_ok(id, json_pack("{s:i,s:i}", "pid", (int)pid,
		    "signal", sig));
	sp_chan_close(c);
	sp_ctx_close(&x);
	return rc;
}
