/*
 * test-egress: the egress policy the gateway applies (design.md): rules
 * parsed strictly, names and wildcards, deny over allow, ports, the node's
 * never-list in every range and form, its exceptions, DNS rebinding, the
 * DNS decision, where policies are kept and in which order they are looked
 * up, atomic writes, and the decision log.  No packet is sent: addresses
 * are given, as the gateway would give what it resolved.  Examples use the
 * documentation ranges and loopback only.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "sp.h"
#include "sp_egress.h"
#include "tap.h"

static struct sp_err e;
static struct sp_egress_policy P;
static struct sp_egress_never NV;
static struct sp_egress_decision D;
static char root[512];	/* short: every path under it fits */

/* ---- helpers ---- */

static int
parse(const char *text, struct sp_egress_rule *r)
{
	memset(&e, 0, sizeof e);
	return sp_egress_rule_parse(text, strlen(text), r, &e);
}

/* The policy from two lists (NULL: empty). */
static void
policy(const char *allow, const char *deny)
{
	sp_egress_policy_release(&P);
	memset(&e, 0, sizeof e);
	if ((allow && sp_egress_rules_add(&P.allow, allow, &e) == -1) ||
	    (deny && sp_egress_rules_add(&P.deny, deny, &e) == -1)) {
		printf("# policy(%s, %s): %s\n", allow, deny, e.msg);
		abort();
	}
}

static struct sp_egress_addr
A(const char *s)
{
	struct sp_egress_addr a;

	memset(&e, 0, sizeof e);
	if (sp_egress_addr_parse(s, &a, &e) == -1) {
		printf("# bad test address %s: %s\n", s, e.msg);
		abort();
	}
	return a;
}

static const char *
fmt(const struct sp_egress_addr *a)
{
	static char buf[4][SP_EGRESS_ADDR_STRLEN];
	static int k;

	k = (k + 1) % 4;
	sp_egress_addr_format(a, buf[k]);
	return buf[k];
}

/* The default never-list, no node addresses, no exceptions. */
static void
never(const char *list, const char *except)
{
	sp_egress_never_release(&NV);
	memset(&e, 0, sizeof e);
	if (sp_egress_never_set(&NV, list, except, &e) == -1) {
		printf("# never(%s, %s): %s\n", list, except, e.msg);
		abort();
	}
}

/* decide on host:port with up to 4 resolved addresses (NULL ends). */
static int
decide(const char *host, int port, const char *a0, const char *a1,
    const char *a2, const char *a3)
{
	struct sp_egress_addr as[4];
	const char *in[4] = { a0, a1, a2, a3 };
	size_t n = 0;

	while (n < 4 && in[n] != NULL) {
		as[n] = A(in[n]);
		n++;
	}
	return sp_egress_decide(&P, &NV, host, port, as, n, &D);
}

static int
is(const char *reason)
{
	return strcmp(D.reason, reason) == 0;
}

static int
blocked(const char *addr, int port)
{
	struct sp_egress_addr a = A(addr);

	return sp_egress_never_match(&NV, &a, port, NULL, 0);
}

/* ---- parsing ---- */

static void
test_parse_good(void)
{
	static const struct {
		const char *in, *canon;
		enum sp_egress_kind kind;
		int lo, hi;
	} t[] = {
		{ "api.example.com", "api.example.com", SP_EGRESS_NAME, 1, 65535 },
		{ "API.Example.COM:443", "api.example.com:443", SP_EGRESS_NAME, 443, 443 },
		{ "api.example.com.:443", "api.example.com:443", SP_EGRESS_NAME, 443, 443 },
		{ "api.example.com:*", "api.example.com", SP_EGRESS_NAME, 1, 65535 },
		{ "localhost", "localhost", SP_EGRESS_NAME, 1, 65535 },
		{ "my_host.xn--bcher-kva.example:8080", "my_host.xn--bcher-kva.example:8080",
		    SP_EGRESS_NAME, 8080, 8080 },
		{ "0day.example", "0day.example", SP_EGRESS_NAME, 1, 65535 },
		{ "*.example.com", "*.example.com", SP_EGRESS_SUFFIX, 1, 65535 },
		{ "*.Example.com.:1-1024", "*.example.com:1-1024", SP_EGRESS_SUFFIX, 1, 1024 },
		{ "*", "*", SP_EGRESS_ANY, 1, 65535 },
		{ "*:*", "*", SP_EGRESS_ANY, 1, 65535 },
		{ "*:443", "*:443", SP_EGRESS_ANY, 443, 443 },
		{ "*:8000-8999", "*:8000-8999", SP_EGRESS_ANY, 8000, 8999 },
		{ "a:1", "a:1", SP_EGRESS_NAME, 1, 1 },
		{ "a:65535", "a:65535", SP_EGRESS_NAME, 65535, 65535 },
		{ "a:1-1", "a:1", SP_EGRESS_NAME, 1, 1 },
		{ "a:1-65535", "a", SP_EGRESS_NAME, 1, 65535 },
		{ "203.0.113.0/24:443", "203.0.113.0/24:443", SP_EGRESS_NET, 443, 443 },
		{ "203.0.113.7", "203.0.113.7", SP_EGRESS_NET, 1, 65535 },
		{ "203.0.113.7/32", "203.0.113.7", SP_EGRESS_NET, 1, 65535 },
		{ "0.0.0.0/0", "0.0.0.0/0", SP_EGRESS_NET, 1, 65535 },
		{ "198.51.100.128/25:80-81", "198.51.100.128/25:80-81", SP_EGRESS_NET, 80, 81 },
		{ "[2001:db8::]/32:443", "[2001:db8::]/32:443", SP_EGRESS_NET, 443, 443 },
		{ "[2001:DB8:0:0::1]", "[2001:db8::1]", SP_EGRESS_NET, 1, 65535 },
		{ "[2001:db8::1]/128:1-65535", "[2001:db8::1]", SP_EGRESS_NET, 1, 65535 },
		{ "[2001:db8::1]:443", "[2001:db8::1]:443", SP_EGRESS_NET, 443, 443 },
		{ "[::]/0", "[::]/0", SP_EGRESS_NET, 1, 65535 },
		{ "[::ffff:203.0.113.0]/120", "203.0.113.0/24", SP_EGRESS_NET, 1, 65535 },
		{ "[::ffff:203.0.113.9]:22", "203.0.113.9:22", SP_EGRESS_NET, 22, 22 },
	};
	struct sp_egress_rule r;
	char c[SP_EGRESS_RULE_MAX + 1];
	size_t i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		int ok = parse(t[i].in, &r) == 0;

		if (ok)
			sp_egress_rule_format(&r, c);
		tap_okf(sp_code_name(e.code), e.msg, ok && strcmp(c, t[i].canon) == 0 &&
		    r.kind == t[i].kind && r.port_lo == t[i].lo &&
		    r.port_hi == t[i].hi, "\"%s\" parses as \"%s\"", t[i].in,
		    t[i].canon);
	}
}

static void
test_parse_bad(void)
{
	static const char *bad[] = {
		"",
		"*.",
		"*.*.example.com",		/* one wildcard, in front */
		"a.*.example.com",
		"*example.com",
		"ex*ample.com",
		"**",
		"a..example.com",
		".example.com",
		"..",
		"-a.example.com",
		"a-.example.com",
		"a.example.com:0",		/* ports 1..65535 */
		"a.example.com:65536",
		"a.example.com:99999999999",
		"a.example.com:",
		"a.example.com:443-80",
		"a.example.com:+443",
		"a.example.com:-443",
		"a.example.com:0443",
		"a.example.com:1-",
		"a.example.com:1--2",
		"a.example.com:1-2-3",
		"a.example.com:**",
		"a.example.com:443:80",
		":443",				/* any host is * */
		"127.1",			/* numbers are no names */
		"0x7f.1",
		"2130706433",
		"1.2.3",
		"256.1.1.1",
		"203.0.113.01",
		"example.123",
		"203.0.113.0/33",
		"203.0.113.5/24",		/* host bits set */
		"203.0.113.0/024",
		"203.0.113.0/",
		"203.0.113.0/-1",
		"example.com/24",
		"2001:db8::/32",		/* IPv6 goes in brackets */
		"2001:db8::1",
		"::1",
		"[2001:db8::",
		"[2001:db8::]x",
		"[2001:db8::]/",
		"[2001:db8::]/129",
		"[2001:db8::1]/32",		/* host bits set */
		"[2001:db8::]:",
		"[2001:db8::]:0",
		"[192.0.2.1]",			/* brackets are for IPv6 */
		"[fe80::1%eth0]",
		"[]",
		"[example.com]",
		"\xc3\xbcnicode.example",	/* non-ASCII */
		"b\xc3\xbc" "cher.example",
		"a b.example",
		"a\tb",
		"a\x01.example",
		"a\x7f.example",
		"a/b.example",
		"a@b.example",
		"a;b",
		"http://example.com",
	};
	struct sp_egress_rule r;
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		tap_okf(sp_code_name(e.code), e.msg, parse(bad[i], &r) == -1 &&
		    e.code == SP_E_BAD_INPUT, "rule %zu \"%s\" is bad-input",
		    i, bad[i]);
	parse("a.example.com:0", &r);
	tap_okf(sp_code_name(e.code), e.msg, strstr(e.msg, "\"a.example.com:0\"") != NULL,
	    "the message quotes the rule: %s", e.msg);
	parse("bad\"quote\x01.example", &r);
	tap_okf(sp_code_name(e.code), e.msg, strchr(e.msg, '\x01') == NULL &&
	    strstr(e.msg, "bad?quote?") != NULL,
	    "hostile bytes are not copied into the message");
}

static void
test_parse_bounds(void)
{
	char label[80], name[300], rule[400];
	struct sp_egress_rule r;
	size_t n;

	memset(label, 'a', 63);
	strcpy(label + 63, ".example");
	tap_okf(sp_code_name(e.code), e.msg, parse(label, &r) == 0, "a label of 63 bytes");
	memset(label, 'a', 64);
	strcpy(label + 64, ".example");
	tap_ok(parse(label, &r) == -1, "a label of 64 bytes is bad-input");

	/* 253 bytes: 3 labels of 63, one of 61, and the dots. */
	memset(name, 'a', sizeof name);
	name[63] = name[127] = name[191] = '.';
	name[253] = '\0';
	tap_okf(sp_code_name(e.code), e.msg, parse(name, &r) == 0 && strlen(r.name) == 253,
	    "a name of 253 bytes");
	name[251] = name[252] = '.';
	name[253] = '\0';
	tap_ok(parse(name, &r) == -1 && strstr(e.msg, "empty label") != NULL,
	    "a name ending in \"..\": an empty label");
	name[251] = name[252] = 'a';
	name[253] = '.';
	name[254] = '\0';
	tap_okf(sp_code_name(e.code), e.msg, parse(name, &r) == 0,
	    "253 bytes and the final dot");
	name[253] = 'a';
	name[254] = '\0';
	tap_ok(parse(name, &r) == -1, "a name of 254 bytes is bad-input");

	/* The text: 300 bytes at most; within them the name's own limits. */
	memset(rule, 0, sizeof rule);
	for (n = 0; n < 300; n++)
		rule[n] = (n % 50 == 49) ? '.' : 'a';
	tap_ok(parse(rule, &r) == -1 && strstr(e.msg, "253 bytes") != NULL,
	    "a 300-byte name: the name's limit speaks");
	rule[300] = 'a';
	tap_ok(parse(rule, &r) == -1 && strstr(e.msg, "longer than 300") != NULL,
	    "a rule of 301 bytes is too long");
	name[253] = '\0';
	snprintf(rule, sizeof rule, "*.%s:10000-20000", name);
	tap_okf(sp_code_name(e.code), e.msg, parse(rule, &r) == 0 && strlen(rule) == 267,
	    "the longest wildcard with a port range fits (%zu bytes)",
	    strlen(rule));
	tap_ok(sp_egress_rule_parse("example.com:443", 11, &r, &e) == 0 &&
	    r.port_lo == 1 && strcmp(r.name, "example.com") == 0,
	    "only len bytes of the text are read");
}

static void
test_rules_add(void)
{
	struct sp_egress_rules rs = { 0 };
	char list[8192], *p;
	int i;

	memset(&e, 0, sizeof e);
	tap_okf(sp_code_name(e.code), e.msg, sp_egress_rules_add(&rs, " a.example, b.example\t"
	    "c.example\n,,203.0.113.0/24 ", &e) == 0 && rs.n == 4,
	    "commas, spaces, tabs and newlines separate rules");
	tap_ok(sp_egress_rules_add(&rs, "A.example. b.example:*", &e) == 0 &&
	    rs.n == 4, "a rule already there (in any spelling) is not added twice");
	tap_ok(sp_egress_rules_add(&rs, "d.example bad..example e.example", &e) ==
	    -1 && rs.n == 4, "one bad rule: nothing of the list is added");
	tap_ok(sp_egress_rules_add(&rs, "", &e) == 0 && rs.n == 4,
	    "an empty list adds nothing");
	sp_egress_rules_release(&rs);

	p = list;
	for (i = 0; i < SP_EGRESS_RULES_MAX; i++)
		p += sprintf(p, "h%d.example ", i);
	tap_okf(sp_code_name(e.code), e.msg, sp_egress_rules_add(&rs, list, &e) == 0 &&
	    rs.n == SP_EGRESS_RULES_MAX, "%d rules fit", SP_EGRESS_RULES_MAX);
	tap_ok(sp_egress_rules_add(&rs, "one.more.example", &e) == -1 &&
	    e.code == SP_E_BAD_INPUT && rs.n == SP_EGRESS_RULES_MAX,
	    "one more is bad-input");
	sp_egress_rules_release(&rs);
}

/* ---- decisions on names ---- */

static void
test_wildcards(void)
{
	static const struct {
		const char *host;
		int allow;
	} t[] = {
		{ "a.example.com", 1 },
		{ "a.b.c.example.com", 1 },
		{ "A.Example.COM", 1 },
		{ "a.example.com.", 1 },
		{ "example.com", 0 },		/* subdomains only */
		{ "example.com.", 0 },
		{ "badexample.com", 0 },
		{ "a.badexample.com", 0 },
		{ "a.example.com.evil.example", 0 },
		{ "example.com.evil.example", 0 },
		{ "a.example.co", 0 },
		{ "com", 0 },
	};
	size_t i;

	never(NULL, NULL);
	policy("*.example.com", NULL);
	for (i = 0; i < sizeof t / sizeof t[0]; i++)
		tap_okf("", D.reason, sp_egress_decide_name(&P, t[i].host, 443,
		    &D) == t[i].allow && is(t[i].allow ? "resolve" : "not-allowed"),
		    "*.example.com %s %s", t[i].allow ? "matches" : "does not match",
		    t[i].host);
	policy("api.example.com", NULL);
	tap_ok(sp_egress_decide_name(&P, "API.EXAMPLE.COM.", 443, &D) &&
	    strcmp(D.rule, "api.example.com") == 0,
	    "an exact name matches in any case, with a final dot");
	tap_ok(!sp_egress_decide_name(&P, "x.api.example.com", 443, &D) &&
	    !sp_egress_decide_name(&P, "example.com", 443, &D),
	    "an exact name matches neither below nor above it");
	policy("*", NULL);
	tap_ok(sp_egress_decide_name(&P, "anything.example", 1, &D) &&
	    decide("198.51.100.1", 65535, NULL, NULL, NULL, NULL),
	    "* matches any name and any address");
}

static void
test_deny_wins(void)
{
	never(NULL, NULL);
	policy("*.example.com", "bad.example.com");
	tap_ok(!decide("bad.example.com", 443, "203.0.113.5", NULL, NULL, NULL) &&
	    is("denied-by-rule") && strcmp(D.rule, "bad.example.com") == 0 &&
	    D.naddrs == 0, "an exact deny beats a wildcard allow");
	tap_ok(!decide("BAD.Example.com.", 443, "203.0.113.5", NULL, NULL, NULL) &&
	    is("denied-by-rule"), "in any case and with a final dot too");
	tap_ok(decide("good.example.com", 443, "203.0.113.5", NULL, NULL, NULL) &&
	    is("allowed") && D.naddrs == 1, "a name beside it is allowed");
	tap_ok(decide("x.bad.example.com", 443, "203.0.113.5", NULL, NULL, NULL),
	    "an exact deny does not reach below the name");
	policy("bad.example.com", "*.example.com bad.example.com");
	tap_ok(!decide("bad.example.com", 443, "203.0.113.5", NULL, NULL, NULL) &&
	    is("denied-by-rule"), "whatever the order of the lists");
	policy("*", "*.example.com:25");
	tap_ok(!decide("mail.example.com", 25, "203.0.113.5", NULL, NULL, NULL) &&
	    decide("mail.example.com", 587, "203.0.113.5", NULL, NULL, NULL),
	    "a deny with a port denies that port only");
	policy("*:443", "*");
	tap_ok(!decide("api.example.com", 443, "203.0.113.5", NULL, NULL, NULL) &&
	    !decide("203.0.113.5", 443, NULL, NULL, NULL, NULL),
	    "deny * denies everything");

	/* A deny for a network meets the addresses a name resolves to. */
	policy("api.example.com", "203.0.113.0/24");
	tap_ok(decide("api.example.com", 443, "203.0.113.5", "198.51.100.5", NULL,
	    NULL) && D.naddrs == 1 &&
	    strcmp(fmt(&D.addrs[0]), "198.51.100.5") == 0,
	    "a denied network's address is not offered");
	tap_ok(!decide("api.example.com", 443, "203.0.113.5", "203.0.113.6", NULL,
	    NULL) && is("denied-by-rule") && strcmp(D.rule, "203.0.113.0/24") == 0,
	    "all of them denied: denied-by-rule, naming the rule");
	policy("203.0.113.0/24", "203.0.113.128/25");
	tap_ok(decide("203.0.113.5", 443, NULL, NULL, NULL, NULL) &&
	    !decide("203.0.113.200", 443, NULL, NULL, NULL, NULL) &&
	    is("denied-by-rule"), "a denied subnet of an allowed network");
	policy("[2001:db8::]/32", "[2001:db8:bad::]/48");
	tap_ok(decide("2001:db8:1::1", 443, NULL, NULL, NULL, NULL) &&
	    !decide("[2001:db8:bad::1]", 443, NULL, NULL, NULL, NULL),
	    "likewise in IPv6, bare or in brackets");
	policy(NULL, NULL);
	tap_ok(!decide("api.example.com", 443, "203.0.113.5", NULL, NULL, NULL) &&
	    is("not-allowed") && !decide("203.0.113.5", 443, NULL, NULL, NULL,
	    NULL) && is("not-allowed"), "no rule: denied (default deny)");
}

static void
test_ports(void)
{
	never(NULL, NULL);
	policy("api.example.com:8000-8999 *:443", NULL);
	tap_ok(!sp_egress_decide_name(&P, "api.example.com", 7999, &D) &&
	    sp_egress_decide_name(&P, "api.example.com", 8000, &D) &&
	    sp_egress_decide_name(&P, "api.example.com", 8999, &D) &&
	    !sp_egress_decide_name(&P, "api.example.com", 9000, &D),
	    "a range holds its ends, and no more");
	tap_ok(sp_egress_decide_name(&P, "other.example", 443, &D) &&
	    strcmp(D.rule, "*:443") == 0 &&
	    !sp_egress_decide_name(&P, "other.example", 80, &D),
	    "*:443: any host, on 443 only");
	tap_ok(!sp_egress_decide_name(&P, "api.example.com", 0, &D) &&
	    is("bad-port") && !sp_egress_decide_name(&P, "api.example.com",
	    65536, &D) && is("bad-port") && !decide("api.example.com", -1,
	    "203.0.113.5", NULL, NULL, NULL) && is("bad-port"),
	    "ports 0, 65536 and -1 are bad-port");
	policy("api.example.com", NULL);
	tap_ok(sp_egress_decide_name(&P, "api.example.com", 1, &D) &&
	    sp_egress_decide_name(&P, "api.example.com", 65535, &D),
	    "without a port: every port");
	policy("203.0.113.0/24:22", NULL);
	tap_ok(decide("203.0.113.1", 22, NULL, NULL, NULL, NULL) &&
	    !decide("203.0.113.1", 23, NULL, NULL, NULL, NULL) &&
	    is("not-allowed"), "a network with a port");
}

static void
test_names_and_addresses(void)
{
	never(NULL, NULL);
	policy("203.0.113.0/24 [2001:db8::]/32", NULL);
	tap_ok(!sp_egress_decide_name(&P, "www.example.com", 443, &D) &&
	    is("not-allowed") && !decide("www.example.com", 443, "203.0.113.5",
	    NULL, NULL, NULL) && is("not-allowed"),
	    "a network allows no name, even one resolving into it");
	tap_ok(decide("203.0.113.5", 443, NULL, NULL, NULL, NULL) &&
	    D.naddrs == 1 && strcmp(fmt(&D.addrs[0]), "203.0.113.5") == 0 &&
	    strcmp(D.rule, "203.0.113.0/24") == 0,
	    "an address in it is allowed and is what is connected to");
	tap_ok(decide("::ffff:203.0.113.5", 443, NULL, NULL, NULL, NULL) &&
	    decide("[::ffff:203.0.113.5]", 443, NULL, NULL, NULL, NULL) &&
	    strcmp(fmt(&D.addrs[0]), "203.0.113.5") == 0,
	    "the IPv4-mapped IPv6 form is the same address");
	tap_ok(decide("2001:db8::7", 443, NULL, NULL, NULL, NULL) &&
	    decide("[2001:DB8::7]", 443, NULL, NULL, NULL, NULL) &&
	    !decide("2001:db9::7", 443, NULL, NULL, NULL, NULL),
	    "IPv6 addresses, bare or in brackets");
	tap_ok(decide("203.0.113.5", 443, "198.51.100.1", "10.0.0.1", NULL, NULL) &&
	    D.naddrs == 1 && strcmp(fmt(&D.addrs[0]), "203.0.113.5") == 0,
	    "an address host: the addresses given are ignored");
	policy("api.example.com", NULL);
	tap_ok(!decide("203.0.113.5", 443, NULL, NULL, NULL, NULL) &&
	    is("not-allowed"), "a name rule allows no address");
	tap_ok(!sp_egress_decide_name(&P, "", 443, &D) && is("bad-host") &&
	    !sp_egress_decide_name(&P, NULL, 443, &D) && is("bad-host") &&
	    !sp_egress_decide_name(&P, "a..example", 443, &D) && is("bad-host") &&
	    !sp_egress_decide_name(&P, "api.example.com:443", 443, &D) &&
	    is("bad-host") && !sp_egress_decide_name(&P, "127.1", 443, &D) &&
	    is("bad-host") && !sp_egress_decide_name(&P, "2130706433", 443, &D) &&
	    !sp_egress_decide_name(&P, "[::1", 443, &D) &&
	    !sp_egress_decide_name(&P, "[192.0.2.1]", 443, &D) &&
	    !sp_egress_decide_name(&P, "fe80::1%eth0", 443, &D) &&
	    !sp_egress_decide_name(&P, "\xc3\xa9.example", 443, &D) &&
	    is("bad-host"), "malformed hosts are bad-host");
	{
		char longhost[400];

		memset(longhost, 'a', sizeof longhost - 1);
		longhost[sizeof longhost - 1] = '\0';
		tap_ok(!sp_egress_decide_name(&P, longhost, 443, &D) &&
		    is("bad-host"), "an overlong host is bad-host");
	}
}

/* ---- the never-list ---- */

static void
test_never_default(void)
{
	/* For each default range: its first and last address, and (when
	 * there is one) the addresses just outside. */
	static const struct {
		const char *in1, *in2, *out1, *out2;
	} v4[] = {
		{ "0.0.0.0", "0.255.255.255", NULL, "1.0.0.0" },
		{ "10.0.0.0", "10.255.255.255", "9.255.255.255", "11.0.0.0" },
		{ "100.64.0.0", "100.127.255.255", "100.63.255.255", "100.128.0.0" },
		{ "127.0.0.1", "127.255.255.255", "126.255.255.255", "128.0.0.0" },
		{ "169.254.0.0", "169.254.255.255", "169.253.255.255", "169.255.0.0" },
		{ "169.254.169.254", "169.254.169.254", NULL, NULL },
		{ "172.16.0.0", "172.31.255.255", "172.15.255.255", "172.32.0.0" },
		{ "192.0.0.0", "192.0.0.255", "191.255.255.255", "192.0.1.0" },
		{ "192.168.0.0", "192.168.255.255", "192.167.255.255", "192.169.0.0" },
		{ "198.18.0.0", "198.19.255.255", "198.17.255.255", "198.20.0.0" },
		{ "224.0.0.1", "239.255.255.255", "223.255.255.255", NULL },
		{ "240.0.0.0", "255.255.255.255", NULL, NULL },
	};
	static const char *v6in[] = {
		"::", "::1", "::7f00:1", "::c000:201",	/* ::/96 */
		"::ffff:0:7f00:1",			/* IPv4-translated */
		"64:ff9b:1::1",				/* local-use NAT64 */
		"100::1", "100::ffff:ffff:ffff:ffff",	/* discard-only */
		"fc00::1", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
		"fe80::1", "febf:ffff::1",		/* link-local */
		"fec0::1", "feff::1",			/* site-local */
		"ff02::1", "ff0e::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe",	/* NAT64 of never */
		"2002:7f00:1::1", "2002:a00:1::",	/* 6to4 of never */
	};
	static const char *v6out[] = {
		"2001:db8::1", "2001:db8:ffff::1", "::1:0:0:1", "100:0:0:1::",
		"fbff::1", "fe7f::1", "64:ff9b::c633:6405", "2002:c000:201::1",
		"2001:4860::8888",
	};
	char mapped[64];
	size_t i;
	int bad = 0;

	never(NULL, NULL);
	tap_ok(NV.except.n == 0 && NV.nnode == 0,
	    "the default: no exceptions (and no node addresses until asked)");
	for (i = 0; i < sizeof v4 / sizeof v4[0]; i++) {
		const char *in[2] = { v4[i].in1, v4[i].in2 };
		const char *out[2] = { v4[i].out1, v4[i].out2 };
		int k;

		for (k = 0; k < 2; k++) {
			snprintf(mapped, sizeof mapped, "::ffff:%s", in[k]);
			tap_okf("", "", blocked(in[k], 443) && blocked(mapped, 443) &&
			    blocked(in[k], 1), "never: %s and %s", in[k], mapped);
			if (out[k] == NULL)
				continue;
			snprintf(mapped, sizeof mapped, "[::ffff:%s]", out[k]);
			tap_okf("", "", !blocked(out[k], 443) && !blocked(mapped, 443),
			    "not never: %s and %s", out[k], mapped);
		}
	}
	for (i = 0; i < sizeof v6in / sizeof v6in[0]; i++)
		tap_okf("", "", blocked(v6in[i], 443), "never: %s", v6in[i]);
	for (i = 0; i < sizeof v6out / sizeof v6out[0]; i++)
		tap_okf("", "", !blocked(v6out[i], 443), "not never: %s", v6out[i]);
	/* The documentation ranges the examples use are public here. */
	for (i = 0; i < 256; i++) {
		snprintf(mapped, sizeof mapped, "192.0.2.%zu", i);
		bad += blocked(mapped, 443);
		snprintf(mapped, sizeof mapped, "198.51.100.%zu", i);
		bad += blocked(mapped, 443);
		snprintf(mapped, sizeof mapped, "203.0.113.%zu", i);
		bad += blocked(mapped, 443);
	}
	tap_okf("", "", bad == 0, "192.0.2/24, 198.51.100/24, 203.0.113/24 are "
	    "not never (%d were)", bad);
	{
		struct sp_egress_addr a = A("169.254.169.254");
		char why[64];

		tap_ok(sp_egress_never_match(&NV, &a, 80, why, sizeof why) &&
		    strcmp(why, "169.254.0.0/16") == 0,
		    "why names the entry: 169.254.0.0/16");
	}
}

static void
test_never_through_decide(void)
{
	never(NULL, NULL);
	policy("*", NULL);
	tap_ok(!decide("127.0.0.1", 8443, NULL, NULL, NULL, NULL) &&
	    is("never-list") && strcmp(D.rule, "127.0.0.0/8") == 0 &&
	    D.naddrs == 0, "allow * still never reaches 127.0.0.1");
	tap_ok(!decide("169.254.169.254", 80, NULL, NULL, NULL, NULL) &&
	    is("never-list"), "nor the metadata service");
	tap_ok(!decide("[::ffff:169.254.169.254]", 80, NULL, NULL, NULL, NULL) &&
	    !decide("::ffff:10.1.2.3", 80, NULL, NULL, NULL, NULL) &&
	    !decide("[::1]", 80, NULL, NULL, NULL, NULL) &&
	    !decide("64:ff9b::a9fe:a9fe", 80, NULL, NULL, NULL, NULL) &&
	    is("never-list"), "nor their IPv6 forms");
	policy("0.0.0.0/0 [::]/0", NULL);
	tap_ok(!decide("10.0.0.1", 443, NULL, NULL, NULL, NULL) &&
	    is("never-list") && decide("198.51.100.1", 443, NULL, NULL, NULL,
	    NULL), "allowing every address allows none of the never-list");
	tap_ok(!sp_egress_decide(&P, NULL, "198.51.100.1", 443, NULL, 0, &D) &&
	    is("never-list"), "no never-list given: nothing passes");
}

static void
test_never_config(void)
{
	struct sp_egress_addr a;
	char why[64];
	int ok;

	never("192.0.2.0/24", NULL);
	tap_ok(blocked("192.0.2.9", 443) && !blocked("10.0.0.1", 443) &&
	    !blocked("127.0.0.1", 443), "a list of its own replaces the default");
	never("default 192.0.2.0/24:25", NULL);
	tap_ok(blocked("192.0.2.9", 25) && !blocked("192.0.2.9", 443) &&
	    blocked("10.0.0.1", 443), "\"default\" stands for the default list; "
	    "entries may have ports");
	never("none", NULL);
	tap_ok(NV.never.n == 0 && !blocked("127.0.0.1", 443), "\"none\": empty");
	sp_egress_never_release(&NV);
	memset(&e, 0, sizeof e);
	tap_ok(sp_egress_never_set(&NV, "none 10.0.0.0/8", NULL, &e) == -1 &&
	    e.code == SP_E_BAD_INPUT, "\"none\" stands alone");
	tap_ok(sp_egress_never_set(&NV, "internal.example", NULL, &e) == -1 &&
	    strstr(e.msg, "not names") != NULL, "names are not for the never-list");
	tap_ok(sp_egress_never_set(&NV, NULL, "*.example", &e) == -1 &&
	    sp_egress_never_set(&NV, NULL, "*:8443", &e) == -1,
	    "nor for its exceptions");
	tap_ok(sp_egress_never_set(&NV, "10.0.0.0/33", NULL, &e) == -1 &&
	    e.code == SP_E_BAD_INPUT, "a bad entry is bad-input");

	/* Node addresses: always added, whatever the list. */
	never("none", NULL);
	a = A("198.51.100.77");
	tap_ok(sp_egress_never_add_addr(&NV, &a, &e) == 0 &&
	    sp_egress_never_add_addr(&NV, &a, &e) == 0 && NV.nnode == 1,
	    "a node address is added once");
	tap_ok(sp_egress_never_match(&NV, &a, 1, why, sizeof why) &&
	    strcmp(why, "node-address") == 0 && blocked("::ffff:198.51.100.77", 9),
	    "a node address is never, on every port, in either form");
	tap_ok(!blocked("198.51.100.78", 443), "its neighbour is not");
	never("none", NULL);
	ok = sp_egress_never_add_node(&NV, &e) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok && blocked("127.0.0.1", 443), "getifaddrs: the "
	    "node's own 127.0.0.1 (%zu addresses)", NV.nnode);
	never("none", NULL);
	a = A("198.51.100.77");
	sp_egress_never_add_addr(&NV, &a, &e);
	tap_ok(sp_egress_never_set(&NV, "192.0.2.0/24", NULL, &e) == 0 &&
	    NV.nnode == 1 && blocked("198.51.100.77", 443) &&
	    blocked("192.0.2.1", 443), "setting the list keeps node addresses");
	sp_egress_never_release(&NV);
	never(NULL, NULL);
	ok = sp_egress_never_add_node(&NV, &e) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok && blocked("127.0.0.1", 443), "with the default list, loopback is "
	    "covered by 127.0.0.0/8 (%zu node addresses beside it)", NV.nnode);

	/* The environment. */
	setenv("SPACE_EGRESS_NEVER", "198.51.100.0/24", 1);
	setenv("SPACE_EGRESS_ALLOW_NEVER", "", 1);
	sp_egress_never_release(&NV);
	tap_okf(sp_code_name(e.code), e.msg, sp_egress_never_load(&NV, &e) == 0 &&
	    blocked("198.51.100.1", 443) && !blocked("10.0.0.1", 443) &&
	    NV.except.n == 0, "SPACE_EGRESS_NEVER replaces the list");
	setenv("SPACE_EGRESS_NEVER", "", 1);
	setenv("SPACE_EGRESS_ALLOW_NEVER", "127.0.0.1:8443", 1);
	sp_egress_never_release(&NV);
	tap_okf(sp_code_name(e.code), e.msg, sp_egress_never_load(&NV, &e) == 0 &&
	    blocked("10.0.0.1", 443) && !blocked("127.0.0.1", 8443) &&
	    blocked("127.0.0.1", 8444), "empty is unset; SPACE_EGRESS_ALLOW_NEVER "
	    "adds exceptions");
	setenv("SPACE_EGRESS_ALLOW_NEVER", "localhost:8443", 1);
	sp_egress_never_release(&NV);
	tap_ok(sp_egress_never_load(&NV, &e) == -1 &&
	    e.code == SP_E_BAD_INPUT &&
	    strstr(e.msg, "SPACE_EGRESS_ALLOW_NEVER") != NULL,
	    "a bad variable is bad-input, naming the variables");
	unsetenv("SPACE_EGRESS_NEVER");
	unsetenv("SPACE_EGRESS_ALLOW_NEVER");
	sp_egress_never_release(&NV);
	tap_okf(sp_code_name(e.code), e.msg, sp_egress_never_load(&NV, &e) == 0 &&
	    NV.except.n == 0 && blocked("127.0.0.1", 8443),
	    "unset: the default list, no exceptions");
}

static void
test_never_exceptions(void)
{
	never(NULL, "127.0.0.1:8443 [::1]:8443 10.9.0.0/16");
	policy("*", NULL);
	tap_ok(decide("127.0.0.1", 8443, NULL, NULL, NULL, NULL) && is("allowed"),
	    "127.0.0.1:8443 is excepted");
	tap_ok(!decide("127.0.0.1", 8444, NULL, NULL, NULL, NULL) &&
	    is("never-list") && !decide("127.0.0.2", 8443, NULL, NULL, NULL,
	    NULL), "its neighbours, by port or by address, are not");
	tap_ok(decide("::ffff:127.0.0.1", 8443, NULL, NULL, NULL, NULL) &&
	    decide("[::1]", 8443, NULL, NULL, NULL, NULL) &&
	    !decide("[::1]", 80, NULL, NULL, NULL, NULL),
	    "the mapped form is the same address; ::1 has its own");
	tap_ok(decide("10.9.1.1", 22, NULL, NULL, NULL, NULL) &&
	    !decide("10.8.1.1", 22, NULL, NULL, NULL, NULL),
	    "a network excepted, every port");
	tap_ok(decide("localhost", 8443, "127.0.0.1", NULL, NULL, NULL) &&
	    strcmp(fmt(&D.addrs[0]), "127.0.0.1") == 0,
	    "a name resolving to an excepted address");
	policy("api.example.com", NULL);
	tap_ok(!decide("127.0.0.1", 8443, NULL, NULL, NULL, NULL) &&
	    is("not-allowed"), "an exception lifts the never-list, it allows "
	    "nothing by itself");
}

/* ---- DNS rebinding ---- */

static void
test_rebinding(void)
{
	struct sp_egress_addr many[40];
	size_t i;

	never(NULL, NULL);
	policy("api.example.com:443", NULL);
	tap_ok(decide("api.example.com", 443, "203.0.113.5", "10.0.0.5", NULL,
	    NULL) && D.naddrs == 1 && strcmp(fmt(&D.addrs[0]), "203.0.113.5") == 0,
	    "one public and one private address: only the public one is offered");
	tap_ok(decide("api.example.com", 443, "127.0.0.1", "198.51.100.7",
	    "169.254.169.254", "2001:db8::5") && D.naddrs == 2 &&
	    strcmp(fmt(&D.addrs[0]), "198.51.100.7") == 0 &&
	    strcmp(fmt(&D.addrs[1]), "2001:db8::5") == 0,
	    "the public ones, in the order given");
	tap_ok(!decide("api.example.com", 443, "10.0.0.5", "192.168.1.1", "::1",
	    "169.254.169.254") && is("never-list") && D.naddrs == 0 &&
	    strcmp(D.rule, "10.0.0.0/8") == 0,
	    "all private: never-list, nothing offered");
	tap_ok(!decide("api.example.com", 443, "::ffff:127.0.0.1", "fe80::1",
	    NULL, NULL) && is("never-list"), "IPv6 forms of them too");
	tap_ok(!decide("api.example.com", 443, NULL, NULL, NULL, NULL) &&
	    is("no-address"), "no address: no-address");
	tap_ok(!decide("api.example.com", 80, "203.0.113.5", NULL, NULL, NULL) &&
	    is("not-allowed"), "the rule's port still holds");
	for (i = 0; i < 40; i++)
		many[i] = A("10.0.0.1");
	many[39] = A("203.0.113.5");
	tap_ok(!sp_egress_decide(&P, &NV, "api.example.com", 443, many, 40, &D) &&
	    is("never-list"), "beyond the first 32 addresses nothing is looked at");
	many[31] = A("203.0.113.6");
	tap_ok(sp_egress_decide(&P, &NV, "api.example.com", 443, many, 40, &D) &&
	    D.naddrs == 1 && strcmp(fmt(&D.addrs[0]), "203.0.113.6") == 0,
	    "the 32nd is");
	for (i = 0; i < 40; i++)
		many[i] = A("198.51.100.9");
	tap_ok(sp_egress_decide(&P, &NV, "api.example.com", 443, many, 40, &D) &&
	    D.naddrs == SP_EGRESS_ADDRS_MAX, "at most 32 are offered");
}

/* ---- DNS lookups from the guest ---- */

static void
test_dns(void)
{
	policy("api.example.com:443 *.cdn.example 203.0.113.0/24",
	    "bad.cdn.example evil.cdn.example:80");
	tap_ok(sp_egress_decide_dns(&P, "api.example.com", &D) && is("allowed") &&
	    strcmp(D.rule, "api.example.com:443") == 0,
	    "an allowed name resolves (the rule's port aside)");
	tap_ok(sp_egress_decide_dns(&P, "API.example.com.", &D),
	    "in any case, with a final dot");
	tap_ok(sp_egress_decide_dns(&P, "img.cdn.example", &D) &&
	    !sp_egress_decide_dns(&P, "cdn.example", &D) && is("not-allowed"),
	    "a wildcard resolves its subdomains only");
	tap_ok(!sp_egress_decide_dns(&P, "other.example", &D) && is("not-allowed"),
	    "a name no rule allows does not resolve at all");
	tap_ok(!sp_egress_decide_dns(&P, "exfil-4a6f686e.other.example", &D),
	    "so data in a name goes nowhere");
	tap_ok(!sp_egress_decide_dns(&P, "bad.cdn.example", &D) &&
	    is("denied-by-rule"), "a denied name does not resolve");
	tap_ok(sp_egress_decide_dns(&P, "evil.cdn.example", &D),
	    "a name denied on one port still resolves (other ports are allowed)");
	tap_ok(!sp_egress_decide_dns(&P, "203.0.113.5", &D) && is("bad-host") &&
	    !sp_egress_decide_dns(&P, "a..b", &D) && is("bad-host") &&
	    !sp_egress_decide_dns(&P, "", &D) && is("bad-host"),
	    "addresses and malformed names are bad-host");
	policy("203.0.113.0/24", NULL);
	tap_ok(!sp_egress_decide_dns(&P, "www.example.com", &D),
	    "a network rule resolves no name");
	policy("*", NULL);
	tap_ok(sp_egress_decide_dns(&P, "anything.example", &D), "* resolves all");
	policy(NULL, NULL);
	tap_ok(!sp_egress_decide_dns(&P, "api.example.com", &D),
	    "no policy: nothing resolves");
}

/* ---- storage ---- */

static int
write_text(const char *name, const char *text)
{
	char p[SP_PATH_MAX];
	FILE *f;

	snprintf(p, sizeof p, "%s/egress/%s", root, name);
	if ((f = fopen(p, "w")) == NULL)
		return -1;
	fputs(text, f);
	return fclose(f);
}

static int
read_as(enum sp_egress_scope s, const char *name)
{
	sp_egress_policy_release(&P);
	memset(&e, 0, sizeof e);
	return sp_egress_policy_read(root, s, name, &P, &e);
}

static int
load(const char *id, const char *tenant, const char *template)
{
	sp_egress_policy_release(&P);
	memset(&e, 0, sizeof e);
	return sp_egress_policy_load(root, id, tenant, template, &P, &e);
}

static int
first_allow(const char *want)
{
	char t[SP_EGRESS_RULE_MAX + 1];

	if (P.allow.n == 0)
		return want == NULL;
	sp_egress_rule_format(&P.allow.r[0], t);
	return want != NULL && strcmp(t, want) == 0;
}

static void
put(enum sp_egress_scope s, const char *name, const char *allow,
    const char *deny)
{
	policy(allow, deny);
	if (sp_egress_policy_write(root, s, name, &P, &e) == -1) {
		printf("# write %s: %s\n", name, e.msg);
		abort();
	}
}

static void
test_storage(void)
{
	static const char id[] = "k3j5x7aa2mqd", other[] = "b6yq4fh2ntza";
	char path[SP_PATH_MAX];
	struct stat st;
	int removed;
	json_t *j;

	memset(&e, 0, sizeof e);
	tap_ok(sp_egress_path(root, SP_EGRESS_SANDBOX, id, path, sizeof path, &e)
	    == 0 && strstr(path, "/egress/k3j5x7aa2mqd.json") != NULL &&
	    sp_egress_path(root, SP_EGRESS_TENANT, "acme", path, sizeof path, &e)
	    == 0 && strstr(path, "/egress/tenant-acme.json") != NULL &&
	    sp_egress_path(root, SP_EGRESS_TEMPLATE, "base", path, sizeof path, &e)
	    == 0 && strstr(path, "/egress/template-base.json") != NULL,
	    "the paths: <id>.json, tenant-<T>.json, template-<NAME>.json");
	tap_ok(sp_egress_path(root, SP_EGRESS_SANDBOX, "../etc", path,
	    sizeof path, &e) == -1 && e.code == SP_E_BAD_INPUT &&
	    sp_egress_path(root, SP_EGRESS_TENANT, "a/b", path, sizeof path, &e)
	    == -1 && sp_egress_path(root, SP_EGRESS_TEMPLATE, "..", path,
	    sizeof path, &e) == -1, "ids and names are checked: no path tricks");

	put(SP_EGRESS_SANDBOX, id, "API.example.com:443 203.0.113.0/24",
	    "bad.example.com");
	tap_okf(sp_code_name(e.code), e.msg, read_as(SP_EGRESS_SANDBOX, id) == 0 &&
	    P.allow.n == 2 && P.deny.n == 1 && first_allow("api.example.com:443") &&
	    P.source == SP_EGRESS_SANDBOX && strcmp(P.source_name, id) == 0 &&
	    P.updated > 1700000000, "written and read back, canonical");
	sp_egress_path(root, SP_EGRESS_SANDBOX, id, path, sizeof path, &e);
	j = json_load_file(path, 0, NULL);
	tap_ok(j != NULL && json_integer_value(json_object_get(j, "version")) == 1 &&
	    strcmp(json_string_value(json_array_get(json_object_get(j, "allow"),
	    0)), "api.example.com:443") == 0 && json_array_size(json_object_get(j,
	    "deny")) == 1 && json_is_integer(json_object_get(j, "updated")),
	    "the file: {version, allow, deny, updated}");
	json_decref(j);
	tap_ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600,
	    "mode 0600: root's (the gateway's) alone, no VM's jail reads it");
	tap_ok(read_as(SP_EGRESS_SANDBOX, other) == -1 &&
	    e.code == SP_E_NOT_FOUND, "a policy not there is not-found");

	/* Precedence: sandbox > tenant > template > none. */
	put(SP_EGRESS_TENANT, "acme", "tenant.example", NULL);
	put(SP_EGRESS_TEMPLATE, "base", "template.example", NULL);
	tap_okf(sp_code_name(e.code), e.msg, load(id, "acme", "base@0123abcd") == 0 &&
	    P.source == SP_EGRESS_SANDBOX && first_allow("api.example.com:443"),
	    "the sandbox's own policy first");
	tap_okf(sp_code_name(e.code), e.msg, load(other, "acme", "base@0123abcd") == 0 &&
	    P.source == SP_EGRESS_TENANT && strcmp(P.source_name, "acme") == 0 &&
	    first_allow("tenant.example"), "then its tenant's");
	tap_okf(sp_code_name(e.code), e.msg, load(other, "globex", "base@0123abcd") == 0 &&
	    P.source == SP_EGRESS_TEMPLATE && strcmp(P.source_name, "base") == 0 &&
	    first_allow("template.example"), "then its template's (name@digest)");
	tap_okf(sp_code_name(e.code), e.msg, load(other, "globex", "base") == 0 &&
	    P.source == SP_EGRESS_TEMPLATE, "or a template by name alone");
	tap_okf(sp_code_name(e.code), e.msg, load(other, "globex", "minimal") == 0 &&
	    P.source == SP_EGRESS_NONE && P.allow.n == 0 && P.deny.n == 0,
	    "else none: deny all");
	tap_okf(sp_code_name(e.code), e.msg, load(other, "not a/tenant", "base") == 0 &&
	    P.source == SP_EGRESS_TEMPLATE, "a tenant that is no name is passed over");
	tap_okf(sp_code_name(e.code), e.msg, load(NULL, "acme", NULL) == 0 &&
	    P.source == SP_EGRESS_TENANT, "id may be NULL");
	tap_ok(load("Not-An-Id", "acme", NULL) == -1 &&
	    e.code == SP_E_BAD_INPUT, "a bad id is bad-input");
	tap_ok(sp_egress_policy_remove(root, SP_EGRESS_SANDBOX, id, &removed, &e)
	    == 0 && removed == 1 && load(id, "acme", "base") == 0 &&
	    P.source == SP_EGRESS_TENANT, "cleared: the tenant's applies at once");
	tap_ok(sp_egress_policy_remove(root, SP_EGRESS_SANDBOX, id, &removed, &e)
	    == 0 && removed == 0, "clearing again: removed false");
	tap_ok(sp_egress_policy_remove(root, SP_EGRESS_TENANT, "acme", &removed,
	    &e) == 0 && removed && load(id, "acme", "base") == 0 &&
	    P.source == SP_EGRESS_TEMPLATE, "then the template's");

	/* An empty policy is a policy: it denies all, the defaults aside. */
	put(SP_EGRESS_SANDBOX, id, NULL, NULL);
	tap_ok(load(id, "acme", "base") == 0 && P.source == SP_EGRESS_SANDBOX &&
	    P.allow.n == 0, "an empty sandbox policy hides the defaults");

	/* A policy that does not read fails; it never falls back. */
	write_text("k3j5x7aa2mqd.json", "{\"version\":1,\"allow\":[\"*\"");
	tap_ok(load(id, "acme", "base") == -1 && e.code == SP_E_CORRUPT &&
	    P.allow.n == 0, "a broken sandbox policy: corrupt, not the template's");
}

static void
test_storage_strict(void)
{
	static const struct {
		const char *text, *why;
	} t[] = {
		{ "", "empty" },
		{ "[]", "not an object" },
		{ "{\"version\":1,\"allow\":[],\"deny\":[],\"extra\":1}", "unknown field" },
		{ "{\"version\":2,\"allow\":[],\"deny\":[]}", "version 2" },
		{ "{\"version\":1,\"allow\":[]}", "deny missing" },
		{ "{\"allow\":[],\"deny\":[]}", "version missing" },
		{ "{\"version\":1,\"allow\":\"*\",\"deny\":[]}", "allow not an array" },
		{ "{\"version\":1,\"allow\":[1],\"deny\":[]}", "a rule not a string" },
		{ "{\"version\":1,\"allow\":[\"a..b\"],\"deny\":[]}", "a bad rule" },
		{ "{\"version\":1,\"allow\":[],\"allow\":[\"*\"],\"deny\":[]}",
		    "duplicate keys" },
		{ "{\"version\":1,\"allow\":[],\"deny\":[],\"updated\":-1}",
		    "negative time" },
		{ "{\"version\":1,\"allow\":[\"a\\u0000b\"],\"deny\":[]}", "a NUL" },
	};
	char p[SP_PATH_MAX], *big;
	size_t i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		write_text("tenant-strict.json", t[i].text);
		tap_okf(sp_code_name(e.code), e.msg, read_as(SP_EGRESS_TENANT, "strict") == -1 &&
		    e.code == SP_E_CORRUPT, "corrupt: %s", t[i].why);
	}
	write_text("tenant-strict.json", "{\"version\":1,\"allow\":[\"a..b\"],"
	    "\"deny\":[]}");
	read_as(SP_EGRESS_TENANT, "strict");
	tap_okf(sp_code_name(e.code), e.msg, strstr(e.msg, "tenant-strict.json") != NULL &&
	    strstr(e.msg, "\"a..b\"") != NULL, "the message names file and rule");

	big = malloc(SP_EGRESS_FILE_MAX + 100);
	memset(big, ' ', SP_EGRESS_FILE_MAX + 99);
	big[SP_EGRESS_FILE_MAX + 99] = '\0';
	memcpy(big, "{\"version\":1,\"allow\":[],\"deny\":[]}", 34);
	write_text("tenant-strict.json", big);
	tap_ok(read_as(SP_EGRESS_TENANT, "strict") == -1 &&
	    e.code == SP_E_CORRUPT, "a file over 256 KiB is corrupt");
	big[SP_EGRESS_FILE_MAX] = '\0';
	write_text("tenant-strict.json", big);
	tap_okf(sp_code_name(e.code), e.msg, read_as(SP_EGRESS_TENANT, "strict") == 0,
	    "256 KiB exactly is read");
	free(big);

	snprintf(p, sizeof p, "%s/egress/tenant-link.json", root);
	unlink(p);
	tap_ok(symlink("tenant-strict.json", p) == 0 &&
	    read_as(SP_EGRESS_TENANT, "link") == -1 &&
	    e.code == SP_E_CORRUPT, "a symlink is not followed");
	snprintf(p, sizeof p, "%s/egress/tenant-dir.json", root);
	tap_ok(mkdir(p, 0755) == 0 && read_as(SP_EGRESS_TENANT, "dir") == -1 &&
	    e.code == SP_E_CORRUPT, "a directory is not a policy");
	snprintf(p, sizeof p, "%s/egress/tenant-fifo.json", root);
	tap_ok(mkfifo(p, 0644) == 0 && read_as(SP_EGRESS_TENANT, "fifo") == -1 &&
	    e.code == SP_E_CORRUPT, "nor is a FIFO (and it does not hang)");
}

/* The directory holds no temporary file once a write is done. */
static int
leftovers(void)
{
	char p[SP_PATH_MAX];
	struct dirent *d;
	DIR *dir;
	int n = 0;

	snprintf(p, sizeof p, "%s/egress", root);
	if ((dir = opendir(p)) == NULL)
		return -1;
	while ((d = readdir(dir)) != NULL)
		if (d->d_name[0] == '.' && strcmp(d->d_name, ".") != 0 &&
		    strcmp(d->d_name, "..") != 0)
			n++;
	closedir(dir);
	return n;
}

static void
test_atomic(void)
{
	static const char id[] = "atomicatomic";
	char big[6000], *p = big;
	pid_t pid;
	int i, st, torn = 0, a = 0, b = 0;
	struct timespec t0, t1;
	double us;

	/* B is long, so that a torn read could not pass for A. */
	for (i = 0; i < 200; i++)
		p += sprintf(p, "h%d.example ", i);
	put(SP_EGRESS_SANDBOX, id, "a.example", NULL);
	tap_ok(leftovers() == 0, "no temporary file is left");
	if ((pid = fork()) == 0) {
		for (i = 0; i < 400; i++) {
			if (i % 2)
				policy("a.example", NULL);
			else
				policy(big, NULL);
			if (sp_egress_policy_write(root, SP_EGRESS_SANDBOX, id, &P,
			    &e) == -1)
				_exit(1);
		}
		_exit(0);
	}
	for (i = 0; i < 2000; i++) {
		if (read_as(SP_EGRESS_SANDBOX, id) == -1)
			torn++;
		else if (P.allow.n == 1)
			a++;
		else if (P.allow.n == 200)
			b++;
		else
			torn++;
	}
	waitpid(pid, &st, 0);
	tap_okf("", "", WIFEXITED(st) && WEXITSTATUS(st) == 0 && torn == 0,
	    "2000 reads during 400 rewrites: each whole (%d old, %d new, %d torn)",
	    a, b, torn);
	tap_ok(leftovers() == 0, "and no temporary file is left");

	/* Reading is cheap enough to do per connection. */
	put(SP_EGRESS_SANDBOX, id, big, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < 1000; i++)
		load(id, "acme", "base");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / 1000;
	/* The bound is loose (ASan, a busy machine): it is there to catch
	 * something gone quadratic or a read of far more than the file. */
	tap_okf("", "", us < 10000, "a load of a 200-rule policy takes %.1f us "
	    "(bound 10 ms)", us);

	/* A writer killed before its rename leaves the old policy whole. */
	put(SP_EGRESS_SANDBOX, id, "old.example", NULL);
	if ((pid = fork()) == 0) {
		setenv("SPACE_CRASH_AT", "egress-before-rename", 1);
		policy("new.example", NULL);
		sp_egress_policy_write(root, SP_EGRESS_SANDBOX, id, &P, &e);
		_exit(0);
	}
	waitpid(pid, &st, 0);
	tap_ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL &&
	    read_as(SP_EGRESS_SANDBOX, id) == 0 && first_allow("old.example"),
	    "killed before the rename: the old policy, whole");
}

/* ---- the decision log ---- */

static json_t *
next_line(FILE *f, char *buf, size_t n, size_t *len)
{
	if (fgets(buf, (int)n, f) == NULL)
		return NULL;
	*len = strlen(buf);
	return json_loads(buf, JSON_REJECT_DUPLICATES, NULL);
}

static int
str_is(json_t *j, const char *k, const char *v)
{
	json_t *s = json_object_get(j, k);

	return json_is_string(s) && strcmp(json_string_value(s), v) == 0;
}

static void
test_log(void)
{
	char path[SP_PATH_MAX], buf[8192], host[600];
	struct sp_egress_decision d;
	json_t *j;
	FILE *f;
	size_t len;
	int fd, i, k, st, lines = 0, good = 0;
	pid_t pid;

	snprintf(path, sizeof path, "%s/decisions.log", root);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0644);
	never(NULL, NULL);
	policy("api.example.com:443", NULL);
	P.source = SP_EGRESS_TENANT;
	decide("api.example.com", 443, "10.0.0.1", "203.0.113.5", NULL, NULL);
	tap_okf(sp_code_name(e.code), e.msg, sp_egress_log(fd, "k3j5x7aa2mqd", "connect",
	    "api.example.com", 443, &D, &e) == 0, "an allow is logged");
	decide("api.example.com", 443, "10.0.0.1", NULL, NULL, NULL);
	sp_egress_log(fd, "k3j5x7aa2mqd", "connect", "api.example.com", 443, &D, &e);
	sp_egress_decide_dns(&P, "other.example", &D);
	sp_egress_log(fd, "k3j5x7aa2mqd", "dns", "other.example", 0, &D, &e);
	memset(&d, 0, sizeof d);
	sp_egress_decision_deny(&d, "policy-error", NULL);
	sp_egress_log(fd, "k3j5x7aa2mqd", "connect", "x.example", 80, &d, &e);
	/* The guest chooses the host: quotes, control bytes, non-ASCII, length. */
	memset(host, 'h', sizeof host - 1);
	host[sizeof host - 1] = '\0';
	memcpy(host, "\"}\n\x01\xff\\", 6);
	sp_egress_decide_name(&P, host, 443, &D);
	tap_okf(sp_code_name(e.code), e.msg, sp_egress_log(fd, "k3j5x7aa2mqd", "connect", host,
	    443, &D, &e) == 0, "a hostile host is logged");
	close(fd);

	f = fopen(path, "r");
	j = next_line(f, buf, sizeof buf, &len);
	tap_ok(j != NULL && str_is(j, "sandbox", "k3j5x7aa2mqd") &&
	    str_is(j, "kind", "connect") && str_is(j, "host", "api.example.com") &&
	    json_integer_value(json_object_get(j, "port")) == 443 &&
	    str_is(j, "decision", "allow") && str_is(j, "reason", "allowed") &&
	    str_is(j, "rule", "api.example.com:443") && str_is(j, "policy", "tenant") &&
	    str_is(j, "addr", "203.0.113.5"), "the allow line: every field");
	tap_ok(j != NULL && json_is_string(json_object_get(j, "time")) &&
	    strlen(json_string_value(json_object_get(j, "time"))) == 24 &&
	    json_string_value(json_object_get(j, "time"))[23] == 'Z' &&
	    json_string_value(json_object_get(j, "time"))[10] == 'T' &&
	    strncmp(buf, "{\"time\":", 8) == 0 && buf[len - 1] == '\n',
	    "time first, RFC 3339 UTC with milliseconds; one line");
	json_decref(j);
	j = next_line(f, buf, sizeof buf, &len);
	tap_ok(j != NULL && str_is(j, "decision", "deny") &&
	    str_is(j, "reason", "never-list") && str_is(j, "rule", "10.0.0.0/8") &&
	    json_object_get(j, "addr") == NULL, "the never-list line: no addr");
	json_decref(j);
	j = next_line(f, buf, sizeof buf, &len);
	tap_ok(j != NULL && str_is(j, "kind", "dns") &&
	    json_object_get(j, "port") == NULL && str_is(j, "reason", "not-allowed") &&
	    json_object_get(j, "rule") == NULL, "the dns line: no port, no rule");
	json_decref(j);
	j = next_line(f, buf, sizeof buf, &len);
	tap_ok(j != NULL && str_is(j, "reason", "policy-error") &&
	    str_is(j, "policy", "none"), "a deny the caller decided");
	json_decref(j);
	j = next_line(f, buf, sizeof buf, &len);
	tap_ok(j != NULL && str_is(j, "reason", "bad-host") &&
	    strlen(json_string_value(json_object_get(j, "host"))) == 255 &&
	    strncmp(json_string_value(json_object_get(j, "host")), "\"}???\\", 6)
	    == 0 && len <= SP_EGRESS_LOG_MAX, "the hostile host: cut to 255 bytes, "
	    "made printable, still one JSON line");
	json_decref(j);
	tap_ok(next_line(f, buf, sizeof buf, &len) == NULL, "and nothing else");
	fclose(f);

	/* Many writers, one file: every line whole. */
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0644);
	decide("api.example.com", 443, "203.0.113.5", NULL, NULL, NULL);
	for (k = 0; k < 8; k++)
		if ((pid = fork()) == 0) {
			for (i = 0; i < 250; i++)
				if (sp_egress_log(fd, "k3j5x7aa2mqd", "connect",
				    host + 6, 443, &D, &e) == -1)
					_exit(1);
			_exit(0);
		}
	for (k = 0; k < 8; k++) {
		wait(&st);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			good = -100000;
	}
	close(fd);
	f = fopen(path, "r");
	while ((j = next_line(f, buf, sizeof buf, &len)) != NULL || !feof(f)) {
		lines++;
		if (j != NULL && str_is(j, "decision", "allow") &&
		    buf[len - 1] == '\n')
			good++;
		json_decref(j);
	}
	fclose(f);
	tap_okf("", "", lines == 2000 && good == 2000,
	    "8 writers x 250 lines: %d lines, %d whole", lines, good);
}

static void
test_addr_helpers(void)
{
	struct sockaddr_storage ss;
	struct sp_egress_addr a, b;
	socklen_t len;

	a = A("203.0.113.5");
	sp_egress_addr_to_sockaddr(&a, 443, &ss, &len);
	tap_ok(ss.ss_family == AF_INET && len == sizeof(struct sockaddr_in) &&
	    ntohs(((struct sockaddr_in *)&ss)->sin_port) == 443 &&
	    sp_egress_addr_from_sockaddr((struct sockaddr *)&ss, &b) == 0 &&
	    memcmp(&a, &b, sizeof a) == 0, "IPv4: AF_INET, and back");
	a = A("::ffff:203.0.113.5");
	sp_egress_addr_to_sockaddr(&a, 443, &ss, &len);
	tap_ok(ss.ss_family == AF_INET, "a mapped address is connected to as IPv4");
	a = A("[2001:db8::5]");
	sp_egress_addr_to_sockaddr(&a, 8443, &ss, &len);
	tap_ok(ss.ss_family == AF_INET6 && len == sizeof(struct sockaddr_in6) &&
	    ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) == 8443 &&
	    sp_egress_addr_from_sockaddr((struct sockaddr *)&ss, &b) == 0 &&
	    memcmp(&a, &b, sizeof a) == 0 && strcmp(fmt(&b), "2001:db8::5") == 0,
	    "IPv6: AF_INET6, and back");
	ss.ss_family = AF_UNIX;
	tap_ok(sp_egress_addr_from_sockaddr((struct sockaddr *)&ss, &b) == -1 &&
	    sp_egress_addr_from_sockaddr(NULL, &b) == -1, "other families: -1");
	memset(&e, 0, sizeof e);
	tap_ok(sp_egress_addr_parse("203.0.113", &a, &e) == -1 &&
	    e.code == SP_E_BAD_INPUT &&
	    sp_egress_addr_parse("[203.0.113.5]", &a, &e) == -1 &&
	    sp_egress_addr_parse("example.com", &a, &e) == -1 &&
	    sp_egress_addr_parse("fe80::1%lo", &a, &e) == -1 &&
	    sp_egress_addr_parse("", &a, &e) == -1, "bad addresses are bad-input");
}

int
main(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(root, sizeof root, "%s/test-egress.XXXXXX", base && *base ?
	    base : "/tmp");
	if (mkdtemp(root) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	unsetenv("SPACE_EGRESS_NEVER");
	unsetenv("SPACE_EGRESS_ALLOW_NEVER");
	unsetenv("SPACE_CRASH_AT");
	sp_egress_policy_init(&P);
	sp_egress_never_init(&NV);
	test_parse_good();
	test_parse_bad();
	test_parse_bounds();
	test_rules_add();
	test_wildcards();
	test_deny_wins();
	test_ports();
	test_names_and_addresses();
	test_never_default();
	test_never_through_decide();
	test_never_config();
	test_never_exceptions();
	test_rebinding();
	test_dns();
	test_storage();
	test_storage_strict();
	test_atomic();
	test_log();
	test_addr_helpers();
	sp_egress_policy_release(&P);
	sp_egress_never_release(&NV);
	sp_path_remove_tree(root, &e);
	return tap_done();
}
