/*
 * test-retain: the retention tiers, parsed and applied to snapshots taken at
 * given times.  The clock is fake: NOW is a constant and every snapshot's
 * time is computed from it, so the expected sets can be worked out by hand.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sp.h"
#include "tap.h"

#define MIN	((int64_t)60)
#define HOUR	((int64_t)3600)
#define DAY	((int64_t)86400)
/* Midnight UTC, 2023-11-14: a day, hour and 5-minute boundary at once. */
#define NOW	((int64_t)19675 * DAY)

/* The 3-day scenario: a disk snapshot every 5 minutes, a full one hourly. */
#define NDISK	(3 * 288)
#define NFULL	(3 * 24)
#define NALL	(NDISK + NFULL)

static struct sp_err e;

static int
parse(const char *spec, struct sp_tier *t, int *n)
{
	memset(&e, 0, sizeof e);
	return sp_retain_parse(spec, t, SP_TIERS_MAX, n, &e);
}

static int
tier_is(const struct sp_tier *t, const char *kind, int64_t period, int keep)
{
	return strcmp(t->kind, kind) == 0 && t->period_s == period &&
	    t->keep == keep;
}

static void
test_parse_default(void)
{
	struct sp_tier t[SP_TIERS_MAX];
	int n = -1;

	tap_okf(sp_code_name(e.code), e.msg, parse(SP_RETAIN_DEFAULT, t, &n) == 0 && n == 4,
	    "the default parses to 4 tiers");
	tap_ok(tier_is(&t[0], "disk", 5 * MIN, 12), "tier 1 is disk, 5m, 12");
	tap_ok(tier_is(&t[1], "disk", HOUR, 24), "tier 2 is disk, 1h, 24");
	tap_ok(tier_is(&t[2], "disk", DAY, 7), "tier 3 is disk, 1d, 7");
	tap_ok(tier_is(&t[3], "full", HOUR, 3), "tier 4 is full, 1h, 3");
	memset(&e, 0, sizeof e);
	tap_ok(sp_retain_parse(SP_RETAIN_DEFAULT, NULL, 0, NULL, &e) == 0,
	    "t and n may be NULL to only check");
}

static void
test_parse_separators(void)
{
	struct sp_tier t[SP_TIERS_MAX];
	int n = -1;

	tap_ok(parse("disk:5m:12,full:1h:3", t, &n) == 0 && n == 2 &&
	    tier_is(&t[0], "disk", 5 * MIN, 12) &&
	    tier_is(&t[1], "full", HOUR, 3), "comma separates");
	n = -1;
	tap_ok(parse("disk:5m:12 full:1h:3", t, &n) == 0 && n == 2 &&
	    tier_is(&t[1], "full", HOUR, 3), "space separates");
	n = -1;
	tap_ok(parse(" ,disk:5m:12 ,\t full:1h:3 , disk:1d:7,", t, &n) == 0 &&
	    n == 3 && tier_is(&t[0], "disk", 5 * MIN, 12) &&
	    tier_is(&t[2], "disk", DAY, 7), "runs of separators and tabs");
}

static void
test_parse_units(void)
{
	static const struct {
		const char *spec;
		int64_t period;
	} u[] = {
		{ "disk:7s:1", 7 },
		{ "disk:7m:1", 7 * 60 },
		{ "disk:7h:1", 7 * 3600 },
		{ "disk:7d:1", 7 * 86400 },
		{ "full:7w:1", 7 * 7 * 86400 },
		{ "disk:100000w:100000", (int64_t)100000 * 7 * 86400 },
	};
	struct sp_tier t[SP_TIERS_MAX];
	size_t i;
	int n;

	for (i = 0; i < sizeof u / sizeof u[0]; i++) {
		n = -1;
		tap_okf(sp_code_name(e.code), e.msg, parse(u[i].spec, t, &n) == 0 && n == 1 &&
		    t[0].period_s == u[i].period, "\"%s\" is %lld s", u[i].spec,
		    (long long)u[i].period);
	}
}

static void
test_parse_bad(void)
{
	static const char *bad[] = {
		"tape:1h:3",		/* unknown kind */
		"Disk:1h:3",		/* kinds are lower case */
		"disk",			/* missing parts */
		"disk:1h",
		"disk:1h:",
		"disk::3",
		":1h:3",
		"::",
		"disk:1h:0",		/* keep from 1 */
		"disk:1h:-1",
		"disk:1h:100001",
		"disk:1h:3x",
		"disk:1h:3:4",
		"disk:0h:3",		/* a zero period */
		"disk:-5m:3",
		"disk:100001s:3",
		"disk:1y:3",		/* unknown unit */
		"disk:1:3",		/* no unit */
		"disk:h:3",		/* no number */
		"disk:5mx:3",		/* trailing junk */
		"disk:5mm:3",
		"disk:5m:12 full",	/* a good tier does not excuse a bad one */
		"disk:5m:12;full:1h:3",	/* ';' is no separator */
		"",			/* no tier at all */
		" , \t,",
	};
	struct sp_tier t[SP_TIERS_MAX];
	size_t i;
	int n;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		n = -1;
		tap_okf(sp_code_name(e.code), e.msg, parse(bad[i], t, &n) == -1 &&
		    e.code == SP_E_BAD_INPUT && n == -1,
		    "\"%s\" is bad-input", bad[i]);
	}
	parse("disk:5mx:12", t, &n);
	tap_okf(sp_code_name(e.code), e.msg, strstr(e.msg, "\"disk:5mx:12\"") != NULL,
	    "the message quotes the whole bad tier");
	parse("disk:5m:12, full:1h:0 disk:1d:7", t, &n);
	tap_okf(sp_code_name(e.code), e.msg, strstr(e.msg, "\"full:1h:0\"") != NULL,
	    "the message quotes the bad tier, not its neighbours");
}

static void
test_parse_limits(void)
{
	struct sp_tier t[SP_TIERS_MAX + 1];
	char spec[512];
	size_t len;
	int i, n;

	spec[0] = '\0';
	for (i = 0; i < SP_TIERS_MAX; i++)
		strcat(spec, i ? " disk:1s:1" : "disk:1s:1");
	n = -1;
	tap_okf(sp_code_name(e.code), e.msg, parse(spec, t, &n) == 0 && n == SP_TIERS_MAX,
	    "%d tiers are allowed", SP_TIERS_MAX);
	strcat(spec, " disk:1s:1");
	n = -1;
	tap_ok(parse(spec, t, &n) == -1 && e.code == SP_E_BAD_INPUT &&
	    strstr(e.msg, "at most") != NULL && n == -1,
	    "one tier more is bad-input");

	/* The limit is on the text: 255 bytes fit, 256 do not. */
	strcpy(spec, "disk:1h:3");
	len = strlen(spec);
	memset(spec + len, ' ', 255 - len);
	spec[255] = '\0';
	n = -1;
	tap_okf(sp_code_name(e.code), e.msg, parse(spec, t, &n) == 0 && n == 1,
	    "a 255-byte spec is read");
	spec[255] = ' ';
	spec[256] = '\0';
	tap_ok(parse(spec, t, &n) == -1 && e.code == SP_E_BAD_INPUT,
	    "a 256-byte spec is bad-input");

	/* max bounds what is written; the rest is only checked. */
	memset(t, 0x5a, sizeof t);
	n = -1;
	memset(&e, 0, sizeof e);
	tap_ok(sp_retain_parse(SP_RETAIN_DEFAULT, t, 2, &n, &e) == 0 && n == 2 &&
	    tier_is(&t[1], "disk", HOUR, 24) && t[2].keep == 0x5a5a5a5a,
	    "max 2 fills 2 tiers and no more");
}

static int
is_disk(const struct sp_retain_item *it)
{
	return strcmp(it->kind, "disk") == 0;
}

/* Disk snapshot i (0 the newest) is taken i*5 minutes and one more minute
 * before NOW; full snapshot h (0 the newest) h hours and 30 minutes before. */
static int64_t
disk_at(int i)
{
	return NOW - MIN - 5 * MIN * i;
}

static int64_t
full_at(int h)
{
	return NOW - 30 * MIN - HOUR * h;
}

/* The inverse: which snapshot of the scenario this item is. */
static int
index_of(const struct sp_retain_item *it)
{
	return is_disk(it) ? (int)((NOW - MIN - it->taken) / (5 * MIN)) :
	    (int)((NOW - 30 * MIN - it->taken) / HOUR);
}

static void
scenario(struct sp_retain_item *it)
{
	int i;

	memset(it, 0, NALL * sizeof *it);
	for (i = 0; i < NDISK; i++) {
		it[i].kind = "disk";
		it[i].taken = disk_at(i);
		it[i].keep = -1;
	}
	for (i = 0; i < NFULL; i++) {
		it[NDISK + i].kind = "full";
		it[NDISK + i].taken = full_at(i);
		it[NDISK + i].keep = -1;
	}
}

/*
 * What the default tiers keep of the scenario, worked out by hand.  NOW is
 * on a boundary of every period, so disk snapshot i lies alone in the
 * (i+1)-th newest 5-minute period; hour k before NOW holds i = 12k..12k+11,
 * newest 12k; day d holds i = 288d..288d+287, newest 288d.  Hence:
 *   disk:5m:12	i = 0..11
 *   disk:1h:24	i = 12k, k = 0..23 (i = 0..276)
 *   disk:1d:7	i = 0, 288, 576: only 3 days hold snapshots
 *   full:1h:3	h = 0, 1, 2: each full snapshot is alone in its hour
 * With day_tier 0 the disk:1d:7 tier is left out.
 */
static int
expected(const struct sp_retain_item *it, int day_tier)
{
	int i = index_of(it);

	if (!is_disk(it))
		return i < 3;
	return i < 12 || (i % 12 == 0 && i / 12 < 24) ||
	    (day_tier && i % 288 == 0);
}

/* How many items differ from expected(), or from tagged || expected(). */
static int
wrong(const struct sp_retain_item *it, size_t n, int day_tier)
{
	size_t i;
	int bad = 0;

	for (i = 0; i < n; i++)
		if (it[i].keep != (it[i].tagged || expected(&it[i], day_tier)))
			bad++;
	return bad;
}

static void
count(const struct sp_retain_item *it, size_t n, int *disk, int *full)
{
	size_t i;

	*disk = *full = 0;
	for (i = 0; i < n; i++)
		if (it[i].keep)
			(*(is_disk(&it[i]) ? disk : full))++;
}

static void
test_select_days(void)
{
	static struct sp_retain_item it[NALL];
	static const int disk_want[] = { 12, 24, 3, 0 }, full_want[] = { 0, 0, 0, 3 };
	struct sp_tier t[SP_TIERS_MAX];
	int k, n, disk, full;

	parse(SP_RETAIN_DEFAULT, t, &n);
	for (k = 0; k < n; k++) {
		scenario(it);
		sp_retain_select(&t[k], 1, it, NALL);
		count(it, NALL, &disk, &full);
		tap_okf("", "", disk == disk_want[k] && full == full_want[k],
		    "tier %s:%llds:%d alone keeps %d disk, %d full (got %d, %d)",
		    t[k].kind, (long long)t[k].period_s, t[k].keep, disk_want[k],
		    full_want[k], disk, full);
	}

	scenario(it);
	sp_retain_select(t, n, it, NALL);
	count(it, NALL, &disk, &full);
	/* {0..11} + {0, 12, ..., 276} + {0, 288, 576}: 12 + 23 + 2 disk. */
	tap_okf("", "", disk == 37 && full == 3,
	    "3 days: 37 disk and 3 full kept (got %d, %d)", disk, full);
	tap_ok(wrong(it, NALL, 1) == 0, "3 days: exactly the expected ones");
	tap_ok(it[0].keep == 1 && it[0].taken == NOW - MIN, "the newest is kept");
	tap_ok(it[11].keep && !it[13].keep && it[12].keep && it[24].keep,
	    "5-minute tier ends at 11; the hour tier keeps 12 and 24, not 13");
	tap_ok(it[276].keep && !it[277].keep && !it[287].keep && it[288].keep,
	    "the 24th hour's newest is kept, the 25th only as a day's newest");
	tap_ok(!it[300].keep && it[576].keep && !it[NDISK - 1].keep,
	    "older hours go; the third day's newest stays; the oldest goes");
	tap_ok(it[NDISK].keep && it[NDISK + 2].keep && !it[NDISK + 3].keep &&
	    !it[NALL - 1].keep, "full: the 3 newest hours");
}

/* A small xorshift, so the shuffles are the same on every run. */
static uint32_t
next(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static void
test_select_order(void)
{
	static struct sp_retain_item it[NALL];
	struct sp_retain_item tmp;
	struct sp_tier t[SP_TIERS_MAX];
	uint32_t seed;
	size_t i, j;
	int n, round;

	parse(SP_RETAIN_DEFAULT, t, &n);
	for (round = 0; round < 4; round++) {
		scenario(it);
		if (round == 0) {
			for (i = 0; i < NALL / 2; i++) {
				tmp = it[i];
				it[i] = it[NALL - 1 - i];
				it[NALL - 1 - i] = tmp;
			}
		} else {
			seed = 2463534242u * (uint32_t)round;
			for (i = NALL - 1; i > 0; i--) {
				j = next(&seed) % (i + 1);
				tmp = it[i];
				it[i] = it[j];
				it[j] = tmp;
			}
		}
		sp_retain_select(t, n, it, NALL);
		tap_okf("", "", wrong(it, NALL, 1) == 0,
		    "%s order keeps the same ones", round ? "shuffled" : "oldest-first");
	}
}

static void
test_select_one_period(void)
{
	struct sp_retain_item it[] = {
		{ "disk", NOW - HOUR + 10, 0, -1 },	/* the hour before NOW */
		{ "disk", NOW - HOUR + 1000, 0, -1 },
		{ "disk", NOW - 1, 0, -1 },		/* its newest */
		{ "disk", NOW - 2 * HOUR + 200, 0, -1 },	/* the hour before */
		{ "disk", NOW - 2 * HOUR + 100, 0, -1 },
		{ "disk", NOW - 3 * HOUR + 50, 0, -1 },	/* a third hour */
	};
	struct sp_retain_item edge[] = {
		{ "disk", NOW - HOUR, 0, -1 },		/* first second of an hour */
		{ "disk", NOW - HOUR - 1, 0, -1 },	/* last second of the one before */
		{ "disk", NOW - HOUR + 1, 0, -1 },
	};
	struct sp_tier t[SP_TIERS_MAX];
	int n;

	parse("disk:1h:2", t, &n);
	sp_retain_select(t, n, it, 6);
	tap_ok(it[2].keep && !it[0].keep && !it[1].keep,
	    "3 in one hour: only the newest is kept");
	tap_ok(it[3].keep && !it[4].keep, "2 in the next: only the newest");
	tap_ok(!it[5].keep, "a third hour is beyond keep 2");

	parse("disk:1h:5", t, &n);
	sp_retain_select(t, n, edge, 3);
	tap_ok(edge[2].keep && !edge[0].keep && edge[1].keep,
	    "periods start on the hour: 1 s apart across it are both kept");
}

/* Periods before the epoch are floored like the ones after. */
static void
test_select_negative(void)
{
	struct sp_retain_item it[] = {
		{ "disk", 0, 0, -1 },
		{ "disk", -1, 0, -1 },
		{ "disk", -HOUR, 0, -1 },
		{ "disk", -HOUR - 1, 0, -1 },
		{ "disk", INT64_MIN + 1, 0, -1 },
		{ "disk", INT64_MIN, 0, -1 },
	};
	struct sp_tier t[SP_TIERS_MAX];
	int n;

	parse("disk:1h:10", t, &n);
	sp_retain_select(t, n, it, 6);
	tap_ok(it[0].keep && it[1].keep && !it[2].keep && it[3].keep,
	    "[-1h, 0) is one hour; 0 and -1h-1 lie in others");
	tap_ok(it[4].keep && !it[5].keep,
	    "the oldest possible times share an hour too");
}

static void
test_select_tagged(void)
{
	static struct sp_retain_item it[NALL];
	struct sp_retain_item a[] = {
		{ "disk", NOW - 100, 1, -1 },		/* tagged, newest of its hour */
		{ "disk", NOW - 200, 0, -1 },
		{ "disk", NOW - HOUR - 100, 0, -1 },
	};
	struct sp_retain_item b[] = {
		{ "disk", NOW - 100, 0, -1 },
		{ "disk", NOW - HOUR - 100, 1, -1 },	/* tagged, an older hour */
		{ "disk", NOW - 2 * HOUR - 100, 0, -1 },
	};
	struct sp_tier t[SP_TIERS_MAX];
	int i, n, disk, full;

	/*
	 * The tiers do not look at tags: a tagged snapshot still counts as the
	 * newest of its period, so an older one there is not kept for it, and
	 * its period still takes one of the tier's KEEP.  The tag only adds.
	 */
	parse("disk:1h:1", t, &n);
	sp_retain_select(t, n, a, 3);
	tap_ok(a[0].keep && !a[1].keep && !a[2].keep,
	    "a tagged newest stands for its hour; the tier keeps no other");
	parse("disk:1h:2", t, &n);
	sp_retain_select(t, n, a, 3);
	tap_ok(a[0].keep && !a[1].keep && a[2].keep,
	    "and the next hour is the tier's second");
	parse("disk:1h:1", t, &n);
	sp_retain_select(t, n, b, 3);
	tap_ok(b[0].keep && b[1].keep && !b[2].keep,
	    "a tagged one beyond the tier stays, and brings no other along");
	sp_retain_select(t, 0, b, 3);
	tap_ok(!b[0].keep && b[1].keep && !b[2].keep,
	    "with no tiers only the tagged stay");

	parse(SP_RETAIN_DEFAULT, t, &n);
	scenario(it);
	for (i = 0; i < NALL; i += 7)
		it[i].tagged = 1;
	sp_retain_select(t, n, it, NALL);
	count(it, NALL, &disk, &full);
	tap_ok(wrong(it, NALL, 1) == 0,
	    "3 days with every 7th tagged: the tiers' ones plus the tagged");
	/*
	 * Tagged disk: i = 0, 7, ..., 861, that is 124, of which 0, 7, 84, 168
	 * and 252 a tier keeps anyway: 37 + 124 - 5.  Tagged full: NDISK + h
	 * with (864 + h) % 7 == 0, h = 4, 11, ..., 67, that is 10, none of
	 * them among h = 0..2: 3 + 10.
	 */
	tap_okf("", "", disk == 156 && full == 13,
	    "156 disk and 13 full kept (got %d, %d)", disk, full);
}

static void
test_select_kind_without_tier(void)
{
	static struct sp_retain_item it[NALL];
	struct sp_tier t[SP_TIERS_MAX];
	int n, disk, full;

	parse("disk:5m:12 disk:1h:24", t, &n);
	scenario(it);
	it[NDISK + 50].tagged = 1;
	sp_retain_select(t, n, it, NALL);
	count(it, NALL, &disk, &full);
	tap_okf("", "", disk == 35 && full == 1 && it[NDISK + 50].keep,
	    "disk tiers only: no full kept but the tagged one (got %d disk, %d full)",
	    disk, full);
	tap_ok(wrong(it, NDISK, 0) == 0, "and the disk ones as without a day tier");
	parse("full:1h:3", t, &n);
	scenario(it);
	sp_retain_select(t, n, it, NALL);
	count(it, NALL, &disk, &full);
	tap_okf("", "", disk == 0 && full == 3, "full tier only: no disk kept "
	    "(got %d disk, %d full)", disk, full);
}

static void
test_select_idle(void)
{
	/* Last used 40 days before NOW: 2 hours of disk snapshots every 5
	 * minutes (i = 0..23), an hourly full one, and older stragglers. */
	struct sp_retain_item it[24 + 4];
	struct sp_tier t[SP_TIERS_MAX];
	int i, n, disk, full;

	memset(it, 0, sizeof it);
	for (i = 0; i < 24; i++) {
		it[i].kind = "disk";
		it[i].taken = disk_at(i) - 40 * DAY;
	}
	it[24] = (struct sp_retain_item){ "disk", NOW - 50 * DAY, 0, -1 };
	it[25] = (struct sp_retain_item){ "full", full_at(0) - 40 * DAY, 0, -1 };
	it[26] = (struct sp_retain_item){ "full", full_at(1) - 40 * DAY, 0, -1 };
	it[27] = (struct sp_retain_item){ "full", NOW - 45 * DAY, 0, -1 };
	parse(SP_RETAIN_DEFAULT, t, &n);
	sp_retain_select(t, n, it, 28);
	count(it, 28, &disk, &full);
	/* 5m: i = 0..11; 1h: i = 0, 12 and the 50-day one; 1d: i = 0 and it. */
	tap_okf("", "", disk == 14 && full == 3,
	    "idle 40 days: 14 disk and 3 full kept (got %d, %d)", disk, full);
	tap_ok(it[0].keep && it[11].keep && it[12].keep && !it[13].keep &&
	    !it[23].keep, "the newest ones, though weeks old, are kept");
	tap_ok(it[24].keep && it[27].keep,
	    "a 50-day-old disk and a 45-day-old full one are still among the "
	    "newest periods");
}

static void
test_select_empty(void)
{
	struct sp_retain_item one = { "disk", NOW, 0, 42 };
	struct sp_tier t[SP_TIERS_MAX];
	int n;

	parse(SP_RETAIN_DEFAULT, t, &n);
	sp_retain_select(t, n, NULL, 0);
	sp_retain_select(t, n, &one, 0);
	tap_ok(one.keep == 42, "n == 0: nothing read or written");
	sp_retain_select(t, n, &one, 1);
	tap_ok(one.keep == 1, "n == 1: the only one is kept");
}

/* A lifetime's spec (space-ttl, space-create --ttl): from now, from the
 * expiry it has, or none. */
static void
test_lifetime(void)
{
	const char *bad[] = { "", "+", "0s", "+0m", "-5m", "5", "5x", "5m5",
	    "++5m", " 5m", "5m ", "100001s", "99999999999999999999s", "nonE" };
	int64_t out, p;
	size_t i;
	int all = 1;

	tap_ok(sp_expiry_parse("30m", NOW, 0, &out, &e) == 0 &&
	    out == NOW + 30 * MIN, "30m: from now");
	tap_ok(sp_expiry_parse("30m", NOW, NOW + DAY, &out, &e) == 0 &&
	    out == NOW + 30 * MIN, "30m: from now even with a later expiry");
	tap_ok(sp_expiry_parse("+1h", NOW, NOW + 10 * MIN, &out, &e) == 0 &&
	    out == NOW + 70 * MIN, "+1h: from the expiry it has");
	tap_ok(sp_expiry_parse("+1h", NOW, 0, &out, &e) == 0 &&
	    out == NOW + HOUR, "+1h with none: from now");
	tap_ok(sp_expiry_parse("+1h", NOW, NOW - DAY, &out, &e) == 0 &&
	    out == NOW + HOUR, "+1h with one past: from now");
	tap_ok(sp_expiry_parse("none", NOW, NOW + 5, &out, &e) == 0 &&
	    out == 0, "none: 0");
	tap_ok(sp_expiry_parse("2w", NOW, 0, &out, &e) == 0 &&
	    out == NOW + 14 * DAY, "2w");
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		out = -7;
		memset(&e, 0, sizeof e);
		if (sp_expiry_parse(bad[i], NOW, NOW + 5, &out, &e) != -1 ||
		    e.code != SP_E_BAD_INPUT || out != -7)
			all = 0;
	}
	tap_ok(all, "14 bad lifetimes are bad-input, and out is untouched");
	tap_ok(sp_period_parse("100000s", &p) == 0 && p == 100000 &&
	    sp_period_parse("100001s", &p) == -1, "a period's count is at most "
	    "100000");
	tap_ok(sp_on_expiry_ok("kill") && sp_on_expiry_ok("pause") &&
	    sp_on_expiry_ok("suspend") && !sp_on_expiry_ok("stop") &&
	    !sp_on_expiry_ok("") && !sp_on_expiry_ok("Kill"),
	    "on expiry: kill, pause, suspend and nothing else");
}

/* Idle tiers: parsed, and which one is due for a sandbox. */
static void
test_idle(void)
{
	const char *bad[] = { "pause", "pause:", "pause:0s", "nap:5m",
	    "suspend:5m pause:1h", "pause:1h suspend:1h", "pause:5m pause:10m",
	    "rm:1d suspend:1h", "pause:5m,rm:-1d", "pause:5m rm:1d extra",
	    "pause: 5m" };
	struct sp_idle p;
	size_t i;
	int all = 1;

	tap_ok(sp_idle_parse("pause:15m suspend:12h rm:30d", &p, &e) == 0 &&
	    p.pause_s == 15 * MIN && p.suspend_s == 12 * HOUR &&
	    p.rm_s == 30 * DAY, "three tiers");
	tap_ok(sp_idle_parse("suspend:1h,rm:1w", &p, &e) == 0 &&
	    p.pause_s == 0 && p.suspend_s == HOUR && p.rm_s == 7 * DAY,
	    "a tier left out; commas");
	tap_ok(sp_idle_parse("none", &p, &e) == 0 && p.pause_s == 0 &&
	    p.suspend_s == 0 && p.rm_s == 0 && sp_idle_parse("", &p, &e) == 0 &&
	    p.rm_s == 0, "none and empty: no tiers");
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		memset(&e, 0, sizeof e);
		if (sp_idle_parse(bad[i], &p, &e) != -1 ||
		    e.code != SP_E_BAD_INPUT)
			all = 0;
	}
	tap_ok(all, "11 bad tiers (out of order, not longer, twice, unknown) "
	    "are bad-input");
	sp_idle_parse("pause:15m suspend:12h rm:30d", &p, &e);
	tap_ok(sp_idle_due(&p, "running", 15 * MIN - 1) == NULL &&
	    strcmp(sp_idle_due(&p, "running", 15 * MIN), "pause") == 0,
	    "running: pause at its time, not a second before");
	tap_ok(strcmp(sp_idle_due(&p, "running", 13 * HOUR), "suspend") == 0 &&
	    strcmp(sp_idle_due(&p, "running", 31 * DAY), "rm") == 0,
	    "the furthest tier due wins");
	tap_ok(sp_idle_due(&p, "running", -1) == NULL,
	    "idleness not known: nothing due");
	tap_ok(sp_idle_due(&p, "paused", HOUR) == NULL &&
	    strcmp(sp_idle_due(&p, "paused", 12 * HOUR), "suspend") == 0,
	    "paused: suspend due, never pause");
	tap_ok(sp_idle_due(&p, "suspended", 29 * DAY) == NULL &&
	    strcmp(sp_idle_due(&p, "suspended", 30 * DAY), "rm") == 0 &&
	    strcmp(sp_idle_due(&p, "stopped", 30 * DAY), "rm") == 0 &&
	    sp_idle_due(&p, "stopped", 20 * DAY) == NULL,
	    "suspended and stopped: only rm");
	tap_ok(sp_idle_due(&p, "creating", 40 * DAY) == NULL &&
	    sp_idle_due(&p, "failed", 40 * DAY) == NULL &&
	    sp_idle_due(&p, "recovering", 40 * DAY) == NULL,
	    "transient and failed states: nothing due");
	sp_idle_parse("none", &p, &e);
	tap_ok(sp_idle_due(&p, "running", 400 * DAY) == NULL, "none: never");
}

int
main(void)
{
	test_parse_default();
	test_parse_separators();
	test_parse_units();
	test_parse_bad();
	test_parse_limits();
	test_select_days();
	test_select_order();
	test_select_one_period();
	test_select_negative();
	test_select_tagged();
	test_select_kind_without_tier();
	test_select_idle();
	test_select_empty();
	test_lifetime();
	test_idle();
	return tap_done();
}
