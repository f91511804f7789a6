/*
 * space-gatewayd: the network gateway of a node (design.md).  It serves the
 * egress port of every sandbox under SPACE_RUN -- looking for new ones every
 * SCAN milliseconds -- deciding, relaying and adding credentials to each
 * connection, and appends every decision to $SPACE_ROOT/egress/decisions.log.
 * It also listens on the sandboxes' inbound ports (space-port), and wakes
 * a paused sandbox that idle tiers steer when a connection comes for it.
 * Started as root, it becomes the user space once it has what only root
 * may read (the node CA's key) and before it serves anything: a guest
 * that breaks it holds space's rights, not root's (design.md, "What an
 * attacker must break").
 * SIGHUP reloads the never-list; SIGTERM and SIGINT stop it.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sp.h"

static volatile sig_atomic_t stop, reload;

static void
on_signal(int sig)
{
	if (sig == SIGHUP)
		reload = 1;
	else
		stop = 1;
}

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-gatewayd [--scan-ms MS]\n");
	sp_usage_exit();
}

/* An inbound connection found id paused: the wake-up a call would give
 * (sp_sandbox_wake), with a context of its own (this is any thread). */
static int
wake(const char *id, void *arg)
{
	struct sp_ctx x;
	struct sp_err e;
	int rc;

	(void)arg;
	if (sp_ctx_open(&x, 0, &e) == -1) {
		sp_warn("waking %s: %s", id, e.msg);
		return -1;
	}
	if ((rc = sp_sandbox_wake(&x, id, &e)) == -1 &&
	    e.code != SP_E_BAD_STATE)
		sp_warn("waking %s: %s", id, e.msg);
	sp_ctx_close(&x);
	return rc;
}

static int
open_log(const char *root, struct sp_err *e)
{
	char dir[SP_PATH_MAX], path[SP_PATH_MAX];
	int fd;

	if (snprintf(dir, sizeof dir, "%s/egress", root) >= (int)sizeof dir ||
	    snprintf(path, sizeof path, "%s/decisions.log", dir) >=
	    (int)sizeof path)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_ROOT too long");
	if (sp_path_mkdirs(dir, 0700, e) == -1)
		return -1;
	if ((fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
	    0600)) == -1)
		return sp_err_sys(e, SP_E_IO, "opening '%s'", path);
	/* space's, as the store it is in (space-egress reads it). */
	if (sp_path_adopt(fd, path, e) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Whether space-init gave this root's stores to the user space (its egress
 * policies stand for them all): else, on a root made by hand, the gateway
 * stays root's, as becoming space would leave it unable to read them. */
static int
stores_are_spaces(const char *root)
{
	char p[SP_PATH_MAX];
	struct stat st;
	uid_t uid;

	return sp_space_ids(&uid, NULL) &&
	    snprintf(p, sizeof p, "%s/egress", root) < (int)sizeof p &&
	    stat(p, &st) == 0 && st.st_uid == uid;
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "scan-ms", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	struct sp_gateway_opts o;
	struct sp_gateway *g = NULL;
	struct sp_conf conf;
	struct sp_err e;
	struct sigaction sa;
	struct timespec ts;
	long scan_ms = 250;
	int ch, n, tunnels, streams;
	long rounds = 0;
	int ports_warned = 0;
	char *end;

	sp_cli_init(argc, argv, usage);
	/* A stream's buffers (its window, its chunks) are mapped and given
	 * back whole when it ends, whatever glibc's heuristics would do; and
	 * a thread per stream does not get an arena each. */
	mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	mallopt(M_ARENA_MAX, 4);
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1)
		switch (ch) {
		case 's':
			scan_ms = strtol(optarg, &end, 10);
			if (*end != '\0' || scan_ms < 10 || scan_ms > 60000)
				usage();
			break;
		default:
			usage();
		}
	if (optind != argc)
		usage();
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (sp_conf_load(&conf, &e) == -1)
		return sp_out_fail(NULL, &e);
	memset(&o, 0, sizeof o);
	o.conf = &conf;
	o.upstream_ca = getenv("SPACE_GATEWAY_UPSTREAM_CA");
	o.hosts = getenv("SPACE_GATEWAY_HOSTS");
	o.wake = wake;
	if ((o.log_fd = open_log(conf.root, &e)) == -1 ||
	    sp_gateway_run_dirs(conf.run, &e) == -1 ||
	    sp_gateway_new(&g, &o, &e) == -1)
		return sp_out_fail(NULL, &e);
	if (geteuid() == 0 && !stores_are_spaces(conf.root))
		sp_warn("%s/egress is not %s's (space-init did not prepare "
		    "this root): serving as root", conf.root, SP_USER);
	else if (sp_become_space(1, &e) == -1)
		return sp_out_fail(NULL, &e);
	sp_out_json(json_pack("{s:s, s:s, s:I, s:I}", "gateway", "serving",
	    "run", conf.run, "pid", (json_int_t)getpid(), "uid",
	    (json_int_t)getuid()));
	while (!stop) {
		if (reload) {
			reload = 0;
			if (sp_gateway_reload(g, &e) == -1)
				sp_warn("reloading the never-list: %s", e.msg);
		}
		if (sp_gateway_scan(g, &n, &e) == -1)
			sp_warn("%s", e.msg);
		if (sp_gateway_ports(g, &e) == -1 && !ports_warned++)
			sp_warn("inbound ports: %s", e.msg);
		/* What ended streams freed goes back to the system now and
		 * then: a burst of connections must not keep the node's
		 * memory. */
		if (++rounds % (5000 / scan_ms + 1) == 0)
			malloc_trim(0);
		ts.tv_sec = scan_ms / 1000;
		ts.tv_nsec = scan_ms % 1000 * 1000000;
		nanosleep(&ts, NULL);
	}
	sp_gateway_counts(g, &tunnels, &streams);
	sp_out_json(json_pack("{s:s, s:i, s:i}", "gateway", "stopped",
	    "sandboxes", tunnels, "streams", streams));
	sp_gateway_free(g);
	close(o.log_fd);
	return 0;
}
