/*
 * space-apid: a node's HTTP API (docs/api.md): the native API (/v1/...),
 * E2B's REST API and its guest API, for tenants' keys (space-tenant).  It
 * says {"ok":true,"listen":...} once it listens; SIGTERM and SIGINT stop
 * it.  Every request is a line of the audit log.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp.h"

static volatile int stop;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-apid [--listen ADDR:PORT] "
	    "[--advertise URL] [--tls] [--max-conns N]\n"
	    "           [--idle-timeout SECONDS] [--body-max BYTES] "
	    "[--audit FILE]\n"
	    "       space-apid --routes\n");
	sp_usage_exit();
}

static void
route1(const char *method, const char *path, enum sp_api_kind kind,
    const char *name, void *arg)
{
	sp_out_json(json_pack("{s:s, s:s, s:s, s:s}", "method", method, "path",
	    path, "api", kind == SP_API_NATIVE ? "native" : kind == SP_API_E2B ?
	    "e2b" : "envd", "name", name));
}

static long
number(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	long v;

	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
		sp_warn("%s: need a whole number from %ld to %ld", opt, lo, hi);
		exit(SP_EXIT_USAGE);
	}
	return v;
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "advertise", required_argument, NULL, 'A' },
		{ "tls", no_argument, NULL, 't' },
		{ "max-conns", required_argument, NULL, 'c' },
		{ "idle-timeout", required_argument, NULL, 'i' },
		{ "body-max", required_argument, NULL, 'b' },
		{ "audit", required_argument, NULL, 'a' },
		{ "routes", no_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	struct sp_api_opts o = { .max_conns = 256, .timeout_s = 60,
	    .body_max = 64 << 20 };
	const char *env = getenv("SPACE_API_LISTEN"), *audit = NULL;
	char dir[SP_PATH_MAX];
	struct sigaction sa;
	struct sp_conf conf;
	struct sp_err e;
	int ch;

	sp_cli_init(argc, argv, usage);
	snprintf(o.listen, sizeof o.listen, "%s", env && *env ? env :
	    SP_API_LISTEN_DEFAULT);
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'l':
			if (strlen(optarg) >= sizeof o.listen)
				usage();
			snprintf(o.listen, sizeof o.listen, "%s", optarg);
			break;
		case 'A':
			if (strlen(optarg) >= sizeof o.advertise ||
			    (strncmp(optarg, "http://", 7) != 0 &&
			    strncmp(optarg, "https://", 8) != 0))
				usage();
			snprintf(o.advertise, sizeof o.advertise, "%s", optarg);
			break;
		case 't':
			o.tls = 1;
			break;
		case 'c':
			o.max_conns = (int)number("--max-conns", optarg, 1, 10000);
			break;
		case 'i':
			o.timeout_s = (int)number("--idle-timeout", optarg, 1, 3600);
			break;
		case 'b':
			o.body_max = (size_t)number("--body-max", optarg, 1024,
			    1L << 32);
			break;
		case 'a':
			audit = optarg;
			break;
		case 'r':
			sp_api_routes_each(route1, NULL);
			return 0;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	if (sp_conf_load(&conf, &e) == -1)
		return sp_out_fail(NULL, &e);
	if (audit == NULL) {
		if (snprintf(dir, sizeof dir, "%s/api", conf.root) >=
		    (int)sizeof dir || snprintf(o.audit, sizeof o.audit,
		    "%s/audit.log", dir) >= (int)sizeof o.audit)
			usage();
		if (sp_path_mkdirs(dir, 0700, &e) == -1)
			return sp_out_fail(NULL, &e);
	} else if (strlen(audit) >= sizeof o.audit)
		usage();
	else
		snprintf(o.audit, sizeof o.audit, "%s", audit);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	o.ready = 1;
	if (sp_api_serve(&o, &stop, &e) == -1)
		return sp_out_fail(NULL, &e);
	return 0;
}
