/*
 * space-events: the event log as JSON lines, oldest first: every change of
 * a sandbox's state, every verb a command or the HTTP API ran on one and
 * every repair of the reconcile pass (sp_event.c).  --since and --id choose,
 * --after SEQ goes on from a line already seen, and -f follows: it prints
 * events as they are written until it is stopped.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sp.h"

#define POLL_MS		250	/* how often -f looks for new events */
#define GAP_WAIT_MS	2000	/* how long -f waits for a hole to fill */
#define BATCH		1000

struct show {
	const char *id;		/* only this sandbox's, or NULL */
	int64_t since_ms;
	int64_t last;		/* the last sequence number read */
	int64_t upto;		/* the one-shot read stops after this one */
	int64_t gap_since;	/* -f: when a hole before the next row was seen */
	int follow;
	int n;			/* rows of this batch */
	int full;		/* the batch stopped at a hole or at upto */
	int out_err;
};

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-events [--since WHEN] [--id ID] [--after SEQ] [-f]\n"
	    "       WHEN: now, a period ago (10m, 2h, 7d) or Unix seconds\n");
	sp_usage_exit();
}

/* One row of the one-shot read (filtered by the query). */
static int
shown(int64_t seq, json_t *ev, void *arg)
{
	struct show *s = arg;

	if (s->upto > 0 && seq > s->upto) {
		json_decref(ev);
		s->full = 1;
		return 1;
	}
	s->n++;
	s->last = seq;
	if (sp_out_json(ev) == -1) {
		s->out_err = 1;
		return 1;
	}
	return 0;
}

/*
 * One row while following (every row, filtered here): the sequence is read
 * without holes, since on PostgreSQL a later number can commit before an
 * earlier one.  A hole that stays GAP_WAIT_MS was a write that failed.
 */
static int
followed(int64_t seq, json_t *ev, void *arg)
{
	struct show *s = arg;
	int64_t now = sp_clock_ms();
	const char *id;

	if (seq != s->last + 1) {
		if (s->gap_since == 0)
			s->gap_since = now;
		if (now - s->gap_since < GAP_WAIT_MS) {
			json_decref(ev);
			s->full = 1;
			return 1;
		}
	}
	s->gap_since = 0;
	s->last = seq;
	s->n++;
	id = json_string_value(json_object_get(ev, "id"));
	if ((s->id != NULL && (id == NULL || strcmp(id, s->id) != 0)) ||
	    json_integer_value(json_object_get(ev, "time_ms")) < s->since_ms) {
		json_decref(ev);
		return 0;
	}
	if (sp_out_json(ev) == -1) {
		s->out_err = 1;
		return 1;
	}
	return 0;
}

static int
parse_since(const char *arg, int64_t *ms, struct sp_err *e)
{
	int64_t period, now;
	char *end;
	long long v;

	/* now: only what comes (with -f); the real clock, as events'. */
	if (strcmp(arg, "now") == 0) {
		*ms = sp_wall_ms();
		return 0;
	}
	if (sp_period_parse(arg, &period) == 0) {
		if (sp_now(&now, e) == -1)
			return -1;
		*ms = (now - period) * 1000;
		return 0;
	}
	errno = 0;
	v = strtoll(arg, &end, 10);
	if (*arg < '0' || *arg > '9' || *end != '\0' || errno != 0 ||
	    v > 100000000000LL)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "--since takes now, a "
		    "period ago (10m, 2h, 7d) or Unix seconds, not '%.40s'", arg);
	*ms = (int64_t)v * 1000;
	return 0;
}

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "since", required_argument, NULL, 's' },
		{ "id", required_argument, NULL, 'i' },
		{ "after", required_argument, NULL, 'a' },
		{ "follow", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct show s = { .id = NULL };
	struct sp_event_query w = { .max = BATCH };
	struct sp_ctx x;
	struct sp_err e;
	char *end, idbuf[SP_ID_LEN + 1];
	long long v;
	int ch, rc = 0;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "fh", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			if (parse_since(optarg, &s.since_ms, &e) == -1)
				return sp_out_fail(NULL, &e);
			break;
		case 'i':
			if (!sp_handle_valid(optarg) &&
			    sp_id_check(optarg, &e) == -1)
				return sp_out_fail(NULL, &e);
			s.id = optarg;
			break;
		case 'a':
			errno = 0;
			v = strtoll(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end != '\0' ||
			    errno != 0) {
				sp_err_set(&e, SP_E_BAD_INPUT, 0, "--after takes "
				    "a sequence number, not '%.40s'", optarg);
				return sp_out_fail(NULL, &e);
			}
			w.after = (int64_t)v;
			break;
		case 'f':
			s.follow = 1;
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	if (s.id != NULL && sp_handle_valid(s.id)) {
		/* A name: its sandbox's events (while it has that name). */
		if (sp_ctx_open_ref(&x, &s.id, idbuf, &e) == -1)
			return sp_out_fail(NULL, &e);
	} else if (sp_ctx_open_db(&x, &e) == -1)
		return sp_out_fail(NULL, &e);
	/* What is there now, then (-f) what comes. */
	if (sp_db_event_last(x.db, &s.upto, &e) == -1) {
		rc = sp_out_fail(NULL, &e);
		goto out;
	}
	w.since_ms = s.since_ms;
	w.sandbox = s.id;
	s.last = w.after;
	do {
		s.n = s.full = 0;
		w.after = s.last;
		if (sp_db_event_each(x.db, &w, shown, &s, &e) == -1) {
			rc = sp_out_fail(NULL, &e);
			goto out;
		}
	} while (!s.out_err && !s.full && s.n == BATCH);
	if (s.last < s.upto)
		s.last = s.upto;
	w.since_ms = 0;
	w.sandbox = NULL;
	while (s.follow && !s.out_err) {
		s.n = s.full = 0;
		w.after = s.last;
		if (sp_db_event_each(x.db, &w, followed, &s, &e) == -1) {
			rc = sp_out_fail(NULL, &e);
			goto out;
		}
		if (s.n < BATCH)
			sleep_ms(POLL_MS);
	}
out:
	sp_ctx_close(&x);
	/* A reader that went away (space-events -f | head) is no failure. */
	return rc;
}
