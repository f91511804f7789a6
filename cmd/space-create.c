/*
 * space-create: create sandboxes from a template and boot them.  With a
 * command after --, it runs in the new sandbox as space-exec would, on the
 * channel the create already holds: its output follows the JSON line, and
 * the exit status is the command's.  With --anywhere the scheduler picks the
 * node (space-schedule) and that node makes it; --wait waits for it to run.
 */
#include <sys/time.h>

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-create --template NAME[@DIGEST] [--name NAME]"
	    " [--request-id KEY]\n           [--memory MiB]"
	    " [--vcpus N] [--disk-gb N] [--cpu-quota CPUS]\n          "
	    " [--ttl DURATION [--on-expiry kill|pause|suspend]]\n"
	    "           [--idle TIERS] [--label KEY=VALUE]... [--env NAME=VALUE]...\n"
	    "           [--volume NAME:PATH[:ro]] [-n COUNT] [--timeout SECONDS]\n"
	    "           [--no-pool] [--cold] [-- CMD [ARG...]]\n"
	    "       space-create --anywhere [--wait [SECONDS]] --template NAME[@DIGEST]"
	    "\n           [--name NAME] [--request-id KEY] [--memory MiB]"
	    " [--vcpus N]\n           [--disk-gb N] [--cpu-quota CPUS]"
	    " [--ttl DURATION [--on-expiry kill|pause|suspend]]\n"
	    "           [--idle TIERS] [--label KEY=VALUE]... [--env NAME=VALUE]...\n"
	    "           [-n COUNT]\n");
	sp_usage_exit();
}

static int
number(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	long v;

	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
		sp_warn("%s: need a whole number from %ld to %ld", opt, lo, hi);
		exit(SP_EXIT_USAGE);
	}
	return (int)v;
}

/* NAME=VALUE for the guest's environment: a name of [A-Za-z0-9_] not
 * starting with a digit, a value of valid UTF-8 without control chars. */
static int
env_ok(const char *s)
{
	size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789_"), i;

	if (n == 0 || s[n] != '=' || (s[0] >= '0' && s[0] <= '9') ||
	    strlen(s) > 4096 || !sp_utf8_valid(s, strlen(s)))
		return 0;
	for (i = 0; s[i] != '\0'; i++)
		if ((unsigned char)s[i] < 0x20)
			return 0;
	return 1;
}

/*
 * A claim's boost (sp_boost.c) lasts until its first command ends, or for
 * BOOST_MS: a long first command runs at the weight of any other sandbox.
 * The timer's handler only puts the weight back (async-signal-safe).
 */
#define BOOST_MS	1000
static struct sp_boost boost;

static void
boost_over(int sig)
{
	(void)sig;
	sp_boost_restore(&boost);
}

static void
boost_timer(int ms)
{
	struct itimerval it = { { 0, 0 }, { ms / 1000, (ms % 1000) * 1000 } };
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = boost_over;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (ms > 0)
		sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
}

/* The new sandbox's first command, on the claim's channel when there is one
 * (which may have sent it already, sp_chan_exec_ahead). */
static int
first_command(struct sp_ctx *x, const char *id, struct sp_chan *c,
    struct sp_exec *xr)
{
	struct sp_err e;
	int status, rc;

	if ((c == NULL && sp_chan_open(&c, x->conf.run, id, 30000, &e) == -1) ||
	    (xr->ctl_fd = sp_exec_forward_signals(0, &e)) == -1) {
		rc = sp_exec_fail_status(id, &e);
		goto out;
	}
	if (boost.fd >= 0)
		boost_timer(BOOST_MS);
	rc = sp_chan_exec(c, xr, &status, &e) == -1 ?
	    sp_exec_fail_status(id, &e) : status;
out:
	if (boost.fd >= 0)
		boost_timer(0);
	sp_boost_end(&boost);
	sp_chan_close(c);
	return rc;
}

/*
 * --anywhere: the rows first, then a scheduler pass for them (any node's
 * space-schedule would do it too), then with --wait each waited for until
 * its node has made it.
 */
static int
anywhere_create(const struct sp_create_req *r, int count, int wait_ms)
{
	struct sp_sched_opts so = SP_SCHED_DEFAULTS;
	char (*ids)[SP_ID_LEN + 1];
	int64_t t0 = sp_clock_ms();
	struct sp_sandbox_row row;
	struct sp_ctx x;
	struct sp_err e;
	int i, n = 0, placed, rc = 0, one, existing = 0;
	json_t *o;

	if ((ids = calloc((size_t)count, sizeof *ids)) == NULL) {
		sp_warn("out of memory");
		return SP_EXIT_FAIL;
	}
	if (sp_ctx_open(&x, 0, &e) == -1 ||
	    (wait_ms >= 0 && sp_db_listen(x.db, &e) == -1)) {
		free(ids);
		return sp_out_fail(NULL, &e);
	}
	for (i = 0; i < count; i++) {
		if ((existing = sp_sandbox_request(&x, r, ids[n], &e)) == -1) {
			if ((one = sp_out_fail(NULL, &e)) > rc)
				rc = one;
			continue;
		}
		n++;
	}
	/* Its rows may take pods waiting where they are placed: ids[] then
	 * holds the pods' ids. */
	so.claim_ids = ids;
	so.nclaim = (size_t)n;
	if (n > 0 && sp_schedule_pass(&x, &so, NULL, NULL, &placed, &e) == -1)
		sp_warn("scheduling: %s (space-schedule places them later)", e.msg);
	for (i = 0; i < n; i++) {
		if (wait_ms >= 0) {
			if (sp_sandbox_wait(&x, ids[i], "running", wait_ms, &row,
			    &e) == -1) {
				if ((one = sp_out_fail(ids[i], &e)) > rc)
					rc = one;
				continue;
			}
		} else if (sp_db_sandbox_get(x.db, ids[i], &row, &e) == -1) {
			if ((one = sp_out_fail(ids[i], &e)) > rc)
				rc = one;
			continue;
		}
		o = json_pack("{s:s, s:s, s:o, s:o}", "state",
		    sp_state_name(row.state), "template", row.template, "node",
		    row.node[0] ? json_string(row.node) : json_null(), "placed",
		    row.placed ? json_loads(row.placed, 0, NULL) : json_null());
		if (row.name[0] != '\0')
			json_object_set_new(o, "name", json_string(row.name));
		if (row.request_id[0] != '\0')
			json_object_set_new(o, "request_id",
			    json_string(row.request_id));
		if (row.expires > 0) {
			json_object_set_new(o, "expires",
			    json_integer(row.expires));
			json_object_set_new(o, "on_expiry",
			    json_string(row.on_expiry));
		}
		if (existing == 1)
			json_object_set_new(o, "existing", json_true());
		if (wait_ms < 0)
			json_object_set_new(o, "queued", json_true());
		else
			json_object_set_new(o, "create_ms",
			    json_integer((json_int_t)(sp_clock_ms() - t0)));
		sp_db_row_release(&row);
		sp_out_ok(ids[i], o);
	}
	sp_ctx_close(&x);
	free(ids);
	return rc;
}

/* --volume NAME:PATH[:ro], once. */
static void
volume_opt(struct sp_create_req *r, char *arg)
{
	char *path = strchr(arg, ':'), *ro;
	struct sp_err e;
	size_t n;

	if (r->volume != NULL || path == NULL) {
		sp_warn("--volume NAME:PATH[:ro], once");
		exit(SP_EXIT_USAGE);
	}
	*path++ = '\0';
	n = strlen(path);
	if ((ro = strrchr(path, ':')) != NULL && strcmp(ro, ":ro") == 0) {
		*ro = '\0';
		r->volume_ro = 1;
	} else if (n > 3 && strcmp(path + n - 3, ":rw") == 0)
		path[n - 3] = '\0';
	if (sp_volume_path_check(path, &e) == -1) {
		sp_warn("--volume: %s", e.msg);
		exit(SP_EXIT_USAGE);
	}
	r->volume = arg;
	r->volume_path = path;
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "template", required_argument, NULL, 't' },
		{ "name", required_argument, NULL, 'N' },
		{ "request-id", required_argument, NULL, 'R' },
		{ "memory", required_argument, NULL, 'm' },
		{ "vcpus", required_argument, NULL, 'c' },
		{ "disk-gb", required_argument, NULL, 'd' },
		{ "cpu-quota", required_argument, NULL, 'q' },
		{ "ttl", required_argument, NULL, 'L' },
		{ "on-expiry", required_argument, NULL, 'X' },
		{ "idle", required_argument, NULL, 'I' },
		{ "label", required_argument, NULL, 'l' },
		{ "env", required_argument, NULL, 'e' },
		{ "count", required_argument, NULL, 'n' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "cold", no_argument, NULL, 'C' },
		{ "no-pool", no_argument, NULL, 'P' },
		{ "anywhere", no_argument, NULL, 'A' },
		{ "wait", optional_argument, NULL, 'W' },
		{ "volume", required_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sp_create_req r = { .memory_mib = 256, .vcpus = 1,
	    .ready_timeout_ms = 180000 };
	json_t *labels, *env, *out;
	struct sp_exec xr = { .out_fd = 1, .err_fd = 2 };
	struct sp_chan *c = NULL;
	char id[SP_ID_LEN + 1];
	struct sp_ctx x;
	struct sp_err e;
	struct sp_idle idle;
	char *eq;
	const char *wait = NULL;
	int anywhere = 0, waits = 0, wait_ms = -1, existing;
	int ch, i, count = 1, rc = 0, one;

	sp_cli_init(argc, argv, usage);
	labels = json_object();
	env = json_array();
	while ((ch = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
		switch (ch) {
		case 't':
			r.template = optarg;
			break;
		case 'N':
			if (sp_handle_check(optarg, &e) == -1) {
				sp_warn("--name: %s", e.msg);
				return SP_EXIT_USAGE;
			}
			r.name = optarg;
			break;
		case 'R':
			if (sp_request_id_check(optarg, &e) == -1) {
				sp_warn("--request-id: %s", e.msg);
				return SP_EXIT_USAGE;
			}
			r.request_id = optarg;
			break;
		case 'm':
			r.memory_mib = number("--memory", optarg, 64, 65536);
			break;
		case 'c':
			r.vcpus = number("--vcpus", optarg, 1, 64);
			break;
		case 'd':
			r.disk_gb = number("--disk-gb", optarg, 1, SP_DISK_GB_MAX);
			break;
		case 'q':
			if (sp_cpu_quota_parse("--cpu-quota", optarg, &r.cpu_pct,
			    &e) == -1) {
				sp_warn("%s", e.msg);
				return SP_EXIT_USAGE;
			}
			break;
		case 'L':
			if (sp_period_parse(optarg, &r.ttl_s) == -1) {
				sp_warn("--ttl: a duration such as 90s, 30m, "
				    "12h or 7d, not '%.32s'", optarg);
				return SP_EXIT_USAGE;
			}
			break;
		case 'X':
			if (!sp_on_expiry_ok(optarg)) {
				sp_warn("--on-expiry: kill, pause or suspend, "
				    "not '%.16s'", optarg);
				return SP_EXIT_USAGE;
			}
			r.on_expiry = optarg;
			break;
		case 'I':
			if (sp_idle_parse(optarg, &idle, &e) == -1) {
				sp_warn("--idle: %s", e.msg);
				return SP_EXIT_USAGE;
			}
			r.idle = optarg;
			break;
		case 'l':
			if (sp_label_check(optarg, &e) == -1) {
				sp_warn("--label: %s", e.msg);
				return SP_EXIT_USAGE;
			}
			eq = strchr(optarg, '=');
			*eq = '\0';
			json_object_set_new(labels, optarg, json_string(eq + 1));
			break;
		case 'e':
			if (!env_ok(optarg) || json_array_size(env) >= 64) {
				sp_warn("--env: need NAME=VALUE, a name of letters, "
				    "digits and _, valid UTF-8 (at most 64)");
				return SP_EXIT_USAGE;
			}
			json_array_append_new(env, json_string(optarg));
			break;
		case 'n':
			count = number("-n", optarg, 1, 1000);
			break;
		case 'C':
			r.no_checkpoint = 1;
			r.no_pool = 1;
			break;
		case 'P':
			r.no_pool = 1;
			break;
		case 'A':
			anywhere = 1;
			break;
		case 'W':
			waits = 1;
			wait = optarg;
			break;
		case 'T':
			r.ready_timeout_ms = number("--timeout", optarg, 1, 3600) * 1000;
			break;
		case 'V':
			volume_opt(&r, optarg);
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (waits && sp_cli_wait_opt(wait, &argc, argv, &wait_ms) == -1)
		usage();
	if (r.on_expiry != NULL && r.ttl_s == 0) {
		sp_warn("--on-expiry: only with --ttl");
		return SP_EXIT_USAGE;
	}
	if (count != 1 && (r.name != NULL || r.request_id != NULL)) {
		sp_warn("--name and --request-id are one sandbox's: not with -n");
		return SP_EXIT_USAGE;
	}
	if (r.template == NULL || (argc > 0 && count != 1) ||
	    (anywhere && argc > 0) || (waits && !anywhere) ||
	    (anywhere && r.volume != NULL))
		usage();
	/* With a volume the command runs once it is mounted, not sent
	 * ahead with the claim. */
	if (argc > 0 && r.volume != NULL) {
		signal(SIGPIPE, SIG_IGN);
		xr.argv = argv;
		xr.in_fd = isatty(0) ? -1 : 0;
	} else if (argc > 0) {
		/* A reader that went away must not kill us mid-call. */
		signal(SIGPIPE, SIG_IGN);
		xr.argv = argv;
		xr.in_fd = isatty(0) ? -1 : 0;
		r.chan = &c;
		r.first = &xr;
	}
	r.labels = labels;
	r.env = json_array_size(env) > 0 ? env : NULL;
	if (anywhere) {
		rc = anywhere_create(&r, count, wait_ms);
		json_decref(labels);
		json_decref(env);
		return rc;
	}
	sp_boost_init(&boost);
	r.boost = &boost;
	/* libvirt is opened only when no warm pod is there to claim. */
	if (sp_ctx_open(&x, 0, &e) == -1)
		return sp_out_fail(NULL, &e);
	sp_db_checkpoint_later(x.db);
	for (i = 0; i < count; i++) {
		if (sp_sandbox_create(&x, &r, &out, &e) == -1) {
			one = sp_out_fail(NULL, &e);
		} else {
			snprintf(id, sizeof id, "%s",
			    json_string_value(json_object_get(out, "id")));
			existing = json_is_true(json_object_get(out,
			    "existing"));
			one = sp_out_ok(NULL, out);
			/* The JSON line first, whatever the command writes. */
			fflush(stdout);
			/* A retry's sandbox ran its command the first time. */
			if (argc > 0 && !existing)
				one = first_command(&x, id, c, &xr);
		}
		sp_boost_end(&boost);
		if (one > rc)
			rc = one;
	}
	sp_ctx_close(&x);
	json_decref(labels);
	json_decref(env);
	return rc;
}
