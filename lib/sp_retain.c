/*
 * sp_retain: retention by tiers (design.md).  A tier "disk:1h:24" keeps, of a
 * sandbox's disk snapshots, the newest one in each of the 24 newest hours
 * that hold one; a snapshot that any tier keeps, or that has a tag, stays.
 * Periods count only where snapshots exist, so a sandbox that sat idle for a
 * week still has its last ones.  Pure: space-gc and the tests give the times.
 * Also the lifetimes of sandboxes (space-create --ttl, space-ttl): their
 * specs parsed to times.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_core.h"

int
sp_period_parse(const char *s, int64_t *out)
{
	char *end;
	long long v;
	int64_t unit;

	if (*s < '0' || *s > '9')
		return -1;	/* strtoll would take spaces and signs */
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || v <= 0 || v > 100000)
		return -1;
	switch (*end) {
	case 's': unit = 1; break;
	case 'm': unit = 60; break;
	case 'h': unit = 3600; break;
	case 'd': unit = 86400; break;
	case 'w': unit = 7 * 86400; break;
	default: return -1;
	}
	if (end[1] != '\0')
		return -1;
	*out = v * unit;
	return 0;
}

int
sp_retain_parse(const char *spec, struct sp_tier *t, int max, int *n,
    struct sp_err *e)
{
	char buf[256], *save = NULL, *tok, *kind, *period, *keep, *end;
	const char *orig;
	struct sp_tier one;
	int count = 0;
	long k;

	if (strlen(spec) >= sizeof buf)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_RETAIN is too long");
	strcpy(buf, spec);
	for (tok = strtok_r(buf, " ,\t", &save); tok != NULL;
	    tok = strtok_r(NULL, " ,\t", &save)) {
		kind = tok;
		if ((period = strchr(kind, ':')) == NULL ||
		    (keep = strchr(period + 1, ':')) == NULL)
			goto bad;
		*period++ = '\0';
		*keep++ = '\0';
		if (strcmp(kind, "disk") != 0 && strcmp(kind, "full") != 0)
			goto bad;
		errno = 0;
		k = strtol(keep, &end, 10);
		if (errno != 0 || end == keep || *end != '\0' || k < 1 ||
		    k > 100000 || sp_period_parse(period, &one.period_s) == -1)
			goto bad;
		if (count == SP_TIERS_MAX)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_RETAIN: at "
			    "most %d tiers", SP_TIERS_MAX);
		snprintf(one.kind, sizeof one.kind, "%s", kind);
		one.keep = (int)k;
		if (t != NULL && count < max)
			t[count] = one;
		count++;
	}
	/* No tier would leave space-gc free to delete every untagged one. */
	if (count == 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_RETAIN: no tier");
	if (n != NULL)
		*n = count < max ? count : max;
	return 0;
bad:
	/* The ':' in buf are cut by now: quote the tier from spec. */
	orig = spec + (tok - buf);
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_RETAIN: \"%.*s\" is not "
	    "KIND:PERIOD:KEEP (disk|full, a number with s/m/h/d/w, a count "
	    "from 1)", (int)strcspn(orig, " ,\t"), orig);
}

static int
newest_first(const void *a, const void *b)
{
	const struct sp_retain_item *x = *(struct sp_retain_item *const *)a;
	const struct sp_retain_item *y = *(struct sp_retain_item *const *)b;

	return (x->taken < y->taken) - (x->taken > y->taken);
}

/* Periods start at the epoch; negative times are floored, not truncated,
 * without negating taken, which overflows for the oldest times. */
static int64_t
bucket(int64_t taken, int64_t period)
{
	return taken / period - (taken % period < 0);
}

void
sp_retain_select(const struct sp_tier *t, int nt,
    struct sp_retain_item *items, size_t n)
{
	struct sp_retain_item **by;
	int64_t last;
	size_t i;
	int k, seen;

	for (i = 0; i < n; i++)
		items[i].keep = items[i].tagged;
	if (n == 0 || (by = calloc(n, sizeof *by)) == NULL) {
		/* Without memory nothing is known to be spare: keep all. */
		for (i = 0; i < n; i++)
			items[i].keep = 1;
		return;
	}
	for (i = 0; i < n; i++)
		by[i] = &items[i];
	qsort(by, n, sizeof *by, newest_first);
	for (k = 0; k < nt; k++) {
		seen = 0;
		last = 0;
		for (i = 0; i < n && seen <= t[k].keep; i++) {
			if (strcmp(by[i]->kind, t[k].kind) != 0)
				continue;
			if (seen > 0 && bucket(by[i]->taken, t[k].period_s) == last)
				continue;
			last = bucket(by[i]->taken, t[k].period_s);
			if (++seen <= t[k].keep)
				by[i]->keep = 1;
		}
	}
	free(by);
}

int
sp_on_expiry_ok(const char *action)
{
	return strcmp(action, "kill") == 0 || strcmp(action, "pause") == 0 ||
	    strcmp(action, "suspend") == 0;
}

int
sp_expiry_parse(const char *spec, int64_t now, int64_t cur, int64_t *out,
    struct sp_err *e)
{
	int64_t d;
	int extend = spec[0] == '+';

	if (strcmp(spec, "none") == 0) {
		*out = 0;
		return 0;
	}
	if (sp_period_parse(spec + extend, &d) == -1)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "'%.32s' is not a "
		    "lifetime: DURATION (such as 90s, 30m, 12h, 7d), +DURATION "
		    "or none", spec);
	/* +D: from the expiry it has, or from now when it has none. */
	*out = (extend && cur > now ? cur : now) + d;
	return 0;
}

int
sp_idle_parse(const char *spec, struct sp_idle *out, struct sp_err *e)
{
	static const char *const names[] = { "pause", "suspend", "rm" };
	char buf[128], *save = NULL, *tok, *colon;
	int64_t v[3] = { 0, 0, 0 }, last = 0;
	int i, at = -1;

	memset(out, 0, sizeof *out);
	if (strlen(spec) >= sizeof buf)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "idle tiers: too long");
	if (strcmp(spec, "none") == 0)
		return 0;
	strcpy(buf, spec);
	for (tok = strtok_r(buf, " ,\t", &save); tok != NULL;
	    tok = strtok_r(NULL, " ,\t", &save)) {
		if ((colon = strchr(tok, ':')) == NULL)
			goto bad;
		*colon = '\0';
		for (i = 0; i < 3 && strcmp(tok, names[i]) != 0; i++)
			;
		/* Each tier once, in their order, each later than the last. */
		if (i == 3 || i <= at || sp_period_parse(colon + 1, &v[i]) == -1 ||
		    v[i] <= last)
			goto bad;
		at = i;
		last = v[i];
	}
	out->pause_s = v[0];
	out->suspend_s = v[1];
	out->rm_s = v[2];
	return 0;
bad:
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "idle tiers '%.64s': want "
	    "pause:DURATION suspend:DURATION rm:DURATION, any of them, in that "
	    "order and each longer than the one before (or none)", spec);
}

int
sp_idle_of(const char *own, const char *node, struct sp_idle *out,
    struct sp_err *e)
{
	return sp_idle_parse(own[0] != '\0' ? own : node, out, e);
}

const char *
sp_idle_due(const struct sp_idle *p, const char *state, int64_t idle_s)
{
	int running = strcmp(state, "running") == 0;
	int paused = strcmp(state, "paused") == 0;

	if (idle_s < 0)
		return NULL;
	if (p->rm_s > 0 && idle_s >= p->rm_s && (running || paused ||
	    strcmp(state, "stopped") == 0 || strcmp(state, "suspended") == 0))
		return "rm";
	if (p->suspend_s > 0 && idle_s >= p->suspend_s && (running || paused))
		return "suspend";
	if (p->pause_s > 0 && idle_s >= p->pause_s && running)
		return "pause";
	return NULL;
}
