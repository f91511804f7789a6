/*
 * space-exec: run a command in a sandbox through its guest daemon.  Its
 * stdout and stderr pass through; the exit status is the command's, and a
 * platform failure is 111 (temporary) or 1 with a message on stderr.  With
 * -t the command gets a pty and the local terminal is raw meanwhile; with
 * -d it is detached and its pid printed as a JSON line.
 */
#include <sys/ioctl.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "sp.h"

#define MAX_ENV		256

static struct termios saved_tio;
static int raw_on;

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-exec ID [-t] [-d] [-e KEY=VALUE]... "
	    "[-w DIR] [-u USER] [--timeout S] -- CMD [ARG...]\n");
	sp_usage_exit();
}

static void
raw_restore(void)
{
	if (raw_on)
		tcsetattr(0, TCSADRAIN, &saved_tio);
	raw_on = 0;
}

/* The keys go to the pty in the guest as they are typed: ^C included. */
static int
raw_enter(void)
{
	struct termios t;

	if (tcgetattr(0, &saved_tio) == -1)
		return -1;
	t = saved_tio;
	cfmakeraw(&t);
	if (tcsetattr(0, TCSADRAIN, &t) == -1)
		return -1;
	raw_on = 1;
	atexit(raw_restore);
	return 0;
}

static int
detach(struct sp_chan *c, const char *id, const struct sp_exec *xr)
{
	struct sp_err e;
	pid_t pid;

	if (sp_chan_detach(c, xr, &pid, &e) == -1)
		return sp_exec_fail_status(id, &e);
	sp_out_json(json_pack("{s:s,s:i}", "id", id, "pid", (int)pid));
	return 0;
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 'T' },
		{ NULL, 0, NULL, 0 },
	};
	char *env[MAX_ENV + 1], *end;
	struct sp_exec xr = { 0 };
	struct sp_chan *c = NULL;
	struct winsize ws;
	struct sp_ctx x;
	struct sp_err e;
	const char *id;
	char idbuf[SP_ID_LEN + 1];
	double secs;
	int ch, nenv = 0, status, rc, tty = 0, det = 0;

	sp_cli_init(argc, argv, usage);
	/* A reader that went away must not kill us mid-call. */
	signal(SIGPIPE, SIG_IGN);
	/* Options may stand before or after the id; "--" ends them, and
	 * what follows is the guest's command, options of its own and all. */
	while ((ch = getopt_long(argc, argv, "tde:w:u:", opts, NULL)) != -1) {
		switch (ch) {
		case 't':
			tty = 1;
			break;
		case 'd':
			det = 1;
			break;
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
		case 'u':
			xr.user = optarg;
			break;
		case 'T':
			secs = strtod(optarg, &end);
			if (*end != '\0' || end == optarg || !(secs > 0) ||
			    secs > 86400 * 365) {
				sp_warn("--timeout: need a number of seconds");
				return SP_EXIT_USAGE;
			}
			xr.timeout_ms = secs * 1000 < 1 ? 1 : (int)(secs * 1000);
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 2)
		usage();
	id = *argv++;
	argc--;
	env[nenv] = NULL;
	if (sp_ctx_open_ref(&x, &id, idbuf, &e) == -1)
		return sp_exec_fail_status(id, &e);
	if (sp_sandbox_chan(&x, id, &c, &e) == -1) {
		rc = sp_exec_fail_status(id, &e);
		goto out;
	}
	xr.argv = argv;
	xr.env = nenv > 0 ? env : NULL;
	xr.tty = tty;
	if (tty && isatty(0) && ioctl(0, TIOCGWINSZ, &ws) == 0) {
		xr.rows = ws.ws_row;
		xr.cols = ws.ws_col;
	}
	if (det) {
		rc = detach(c, id, &xr);
		goto out;
	}
	xr.in_fd = isatty(0) && !tty ? -1 : 0;
	xr.out_fd = 1;
	xr.err_fd = 2;
	if ((xr.ctl_fd = sp_exec_forward_signals(tty, &e)) == -1) {
		rc = sp_exec_fail_status(id, &e);
		goto out;
	}
	if (tty && isatty(0) && raw_enter() == -1) {
		sp_err_sys(&e, SP_E_IO, "raw terminal mode");
		rc = sp_exec_fail_status(id, &e);
		goto out;
	}
	rc = sp_chan_exec(c, &xr, &status, &e);
	raw_restore();
	if (rc == 0)
		sp_event_cli(id, NULL, json_pack("{s:i}", "exit", status));
	rc = rc == -1 ? sp_exec_fail_status(id, &e) : status;
out:
	sp_chan_close(c);
	sp_ctx_close(&x);
	return rc;
}
