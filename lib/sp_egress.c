/*
 * sp_egress: what a sandbox may reach (design.md).  Rules are parsed
 * strictly, policies are kept one small file (or row) per sandbox, tenant or
 * template, and the gateway asks here, per connection and per DNS lookup,
 * what to do.  The decisions are pure; only storage, the node's addresses
 * and the log touch the system.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sp_net.h"
#include "sp_egress.h"

#define SEPS	", \t\r\n"

static const unsigned char v4mapped[12] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
};

/* A short, printable copy of hostile text for messages. */
static void
quote(const char *s, size_t len, char *out, size_t n)
{
	size_t i, j = 0;

	for (i = 0; i < len && j + 4 < n && i < 80; i++) {
		unsigned char c = (unsigned char)s[i];

		out[j++] = (c >= 0x20 && c < 0x7f && c != '"') ? (char)c : '?';
	}
	if (i < len && j + 4 <= n) {
		memcpy(out + j, "...", 3);
		j += 3;
	}
	out[j] = '\0';
}

static int
bad_rule(struct sp_err *e, const char *text, size_t len, const char *why)
{
	char q[100];

	quote(text, len, q, sizeof q);
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "egress rule \"%s\": %s", q, why);
}

/* ---- addresses ---- */

static void
addr_from_v4(const void *v4, struct sp_egress_addr *a)
{
	memcpy(a->a, v4mapped, sizeof v4mapped);
	memcpy(a->a + 12, v4, 4);
}

int
sp_egress_addr_is_v4(const struct sp_egress_addr *a)
{
	return memcmp(a->a, v4mapped, sizeof v4mapped) == 0;
}

/* s[0..len): a bare address, no brackets.  1 when it is one. */
static int
addr_parse_bare(const char *s, size_t len, struct sp_egress_addr *a)
{
	char buf[SP_EGRESS_ADDR_STRLEN];
	struct in_addr in4;

	if (len == 0 || len >= sizeof buf)
		return 0;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (inet_pton(AF_INET, buf, &in4) == 1) {
		addr_from_v4(&in4, a);
		return 1;
	}
	return inet_pton(AF_INET6, buf, a->a) == 1;
}

int
sp_egress_addr_parse(const char *s, struct sp_egress_addr *a, struct sp_err *e)
{
	size_t n = strnlen(s, SP_EGRESS_ADDR_STRLEN + 2);
	char q[100];

	if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
		if (memchr(s + 1, ':', n - 2) != NULL &&
		    addr_parse_bare(s + 1, n - 2, a))
			return 0;
	} else if (addr_parse_bare(s, n, a))
		return 0;
	quote(s, n, q, sizeof q);
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "\"%s\" is not an IPv4 or IPv6 "
	    "address", q);
}

void
sp_egress_addr_format(const struct sp_egress_addr *a,
    char out[SP_EGRESS_ADDR_STRLEN])
{
	if (sp_egress_addr_is_v4(a))
		inet_ntop(AF_INET, a->a + 12, out, SP_EGRESS_ADDR_STRLEN);
	else
		inet_ntop(AF_INET6, a->a, out, SP_EGRESS_ADDR_STRLEN);
}

int
sp_egress_addr_from_sockaddr(const struct sockaddr *sa,
    struct sp_egress_addr *a)
{
	if (sa == NULL)
		return -1;
	if (sa->sa_family == AF_INET) {
		addr_from_v4(&((const struct sockaddr_in *)sa)->sin_addr, a);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		memcpy(a->a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		return 0;
	}
	return -1;
}

void
sp_egress_addr_to_sockaddr(const struct sp_egress_addr *a, int port,
    struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof *ss);
	if (sp_egress_addr_is_v4(a)) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		memcpy(&s4->sin_addr, a->a + 12, 4);
		*len = sizeof *s4;
	} else {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		memcpy(&s6->sin6_addr, a->a, 16);
		*len = sizeof *s6;
	}
}

static int
in_net(const struct sp_egress_addr *a, const struct sp_egress_addr *net,
    int prefix)
{
	int full = prefix / 8, rem = prefix % 8;
	unsigned char mask;

	if (memcmp(a->a, net->a, (size_t)full) != 0)
		return 0;
	if (rem == 0)
		return 1;
	mask = (unsigned char)(0xff << (8 - rem));
	return (a->a[full] & mask) == (net->a[full] & mask);
}

static int
host_bits_clear(const struct sp_egress_addr *net, int prefix)
{
	int i;

	for (i = prefix; i < 128; i++)
		if (net->a[i / 8] & (0x80 >> (i % 8)))
			return 0;
	return 1;
}

/* The IPv4 address a NAT64 (64:ff9b::/96) or 6to4 (2002::/16) address
 * carries: a translator or relay on the path would take it there. */
static int
embedded_v4(const struct sp_egress_addr *a, struct sp_egress_addr *v4)
{
	static const unsigned char nat64[12] = { 0, 0x64, 0xff, 0x9b };

	if (memcmp(a->a, nat64, sizeof nat64) == 0) {
		addr_from_v4(a->a + 12, v4);
		return 1;
	}
	if (a->a[0] == 0x20 && a->a[1] == 0x02) {
		addr_from_v4(a->a + 2, v4);
		return 1;
	}
	return 0;
}

/* ---- rules ---- */

/* 1..65535 in decimal, no sign, no leading zero. */
static int
parse_port(const char *s, size_t n, int *out)
{
	size_t i;
	int v = 0;

	if (n == 0 || n > 5 || s[0] == '0')
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	if (v > 65535)
		return -1;
	*out = v;
	return 0;
}

static int
parse_ports(const char *s, size_t n, struct sp_egress_rule *r)
{
	const char *dash;

	if (n == 1 && s[0] == '*') {
		r->port_lo = 1;
		r->port_hi = 65535;
		return 0;
	}
	if ((dash = memchr(s, '-', n)) == NULL) {
		if (parse_port(s, n, &r->port_lo) == -1)
			return -1;
		r->port_hi = r->port_lo;
		return 0;
	}
	if (parse_port(s, (size_t)(dash - s), &r->port_lo) == -1 ||
	    parse_port(dash + 1, n - (size_t)(dash - s) - 1, &r->port_hi) == -1 ||
	    r->port_lo > r->port_hi)
		return -1;
	return 0;
}

/* A prefix length 0..max in decimal, no leading zero. */
static int
parse_prefix(const char *s, size_t n, int max, int *out)
{
	size_t i;
	int v = 0;

	if (n == 0 || n > 3 || (s[0] == '0' && n > 1))
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

/*
 * A DNS name from s[0..n): folded to lower case into out, one final '.'
 * dropped; labels of 1..63 letters, digits, '-' (not first or last) and
 * '_'; the last label begins with a letter, so that no name reads as a
 * number ("127.1", "0x7f.1" and "2130706433" are no names).
 */
static int
name_parse(const char *s, size_t n, char out[SP_EGRESS_NAME_MAX + 1],
    const char **why)
{
	size_t i, label = 0, last = 0;

	if (n > 0 && s[n - 1] == '.')
		n--;
	if (n == 0)
		return *why = "an empty name", -1;
	if (n > SP_EGRESS_NAME_MAX)
		return *why = "a name is at most 253 bytes", -1;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 0x80)
			return *why = "not ASCII (write an IDNA name as xn--...)", -1;
		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c - 'A' + 'a');
		if (c == '.') {
			if (label == 0)
				return *why = "an empty label", -1;
			if (out[i - 1] == '-')
				return *why = "a label ends with '-'", -1;
			label = 0;
			last = i + 1;
		} else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_') {
			if (label == 0 && c == '-')
				return *why = "a label begins with '-'", -1;
			if (++label > 63)
				return *why = "a label is at most 63 bytes", -1;
		} else
			return *why = "a name holds only letters, digits, '-', "
			    "'_' and '.'", -1;
		out[i] = (char)c;
	}
	if (label == 0)
		return *why = "an empty label", -1;
	if (out[n - 1] == '-')
		return *why = "a label ends with '-'", -1;
	if (out[last] < 'a' || out[last] > 'z')
		return *why = "not a name (its last label must begin with a "
		    "letter) nor an address", -1;
	out[n] = '\0';
	return 0;
}

int
sp_egress_rule_parse(const char *text, size_t len, struct sp_egress_rule *r,
    struct sp_err *e)
{
	const char *host, *ports = NULL, *slash, *why = NULL, *end;
	size_t hlen, plen = 0, i;

	memset(r, 0, sizeof *r);
	r->port_lo = 1;
	r->port_hi = 65535;
	if (len == 0)
		return bad_rule(e, text, len, "an empty rule");
	if (len > SP_EGRESS_RULE_MAX)
		return bad_rule(e, text, len, "longer than 300 bytes");
	for (i = 0; i < len; i++) {
		if ((unsigned char)text[i] >= 0x80)
			return bad_rule(e, text, len, "not ASCII (write an IDNA "
			    "name as xn--...)");
		if ((unsigned char)text[i] <= 0x20 || text[i] == 0x7f)
			return bad_rule(e, text, len, "holds a space or a "
			    "control character");
	}
	host = text;
	end = text + len;
	if (text[0] == '[') {
		/* [IPV6][/LEN][:PORTS] */
		const char *close = memchr(text, ']', len);
		const char *after;

		if (close == NULL)
			return bad_rule(e, text, len, "no ']' after the IPv6 "
			    "address");
		r->kind = SP_EGRESS_NET;
		/* The ':' keeps "[192.0.2.1]" out: brackets are for IPv6. */
		if (memchr(text + 1, ':', (size_t)(close - text - 1)) == NULL ||
		    !addr_parse_bare(text + 1, (size_t)(close - text - 1), &r->net))
			return bad_rule(e, text, len, "not an IPv6 address in "
			    "brackets");
		after = close + 1;
		r->prefix = 128;
		if (after < end && *after == '/') {
			slash = after + 1;
			for (after = slash; after < end && *after != ':'; after++)
				;
			if (parse_prefix(slash, (size_t)(after - slash), 128,
			    &r->prefix) == -1)
				return bad_rule(e, text, len, "an IPv6 prefix is "
				    "0 to 128");
		}
		if (after < end) {
			if (*after != ':')
				return bad_rule(e, text, len, "after ']' come "
				    "only /LEN and :PORTS");
			ports = after + 1;
			plen = (size_t)(end - ports);
		}
		if (!host_bits_clear(&r->net, r->prefix))
			return bad_rule(e, text, len, "host bits set after the "
			    "prefix");
		goto ports;
	}
	if ((ports = memchr(text, ':', len)) != NULL) {
		hlen = (size_t)(ports - text);
		ports++;
		plen = (size_t)(end - ports);
		if (memchr(ports, ':', plen) != NULL)
			return bad_rule(e, text, len, "an IPv6 address goes in "
			    "brackets, as [2001:db8::]/32:443");
	} else
		hlen = len;
	if (hlen == 0)
		return bad_rule(e, text, len, "no host (any host is *)");
	if (hlen == 1 && host[0] == '*') {
		r->kind = SP_EGRESS_ANY;
	} else if (hlen >= 2 && host[0] == '*' && host[1] == '.') {
		r->kind = SP_EGRESS_SUFFIX;
		if (name_parse(host + 2, hlen - 2, r->name, &why) == -1)
			return bad_rule(e, text, len, why);
	} else if ((slash = memchr(host, '/', hlen)) != NULL ||
	    addr_parse_bare(host, hlen, &r->net)) {
		r->kind = SP_EGRESS_NET;
		r->prefix = 32;
		if (slash != NULL) {
			if (!addr_parse_bare(host, (size_t)(slash - host), &r->net) ||
			    !sp_egress_addr_is_v4(&r->net))
				return bad_rule(e, text, len, "not an IPv4 "
				    "network (A.B.C.D/LEN; IPv6 goes in brackets)");
			if (parse_prefix(slash + 1, hlen - (size_t)(slash - host) - 1,
			    32, &r->prefix) == -1)
				return bad_rule(e, text, len, "an IPv4 prefix is "
				    "0 to 32");
		}
		r->prefix += 96;
		if (!host_bits_clear(&r->net, r->prefix))
			return bad_rule(e, text, len, "host bits set after the "
			    "prefix");
	} else {
		if (memchr(host, '*', hlen) != NULL)
			return bad_rule(e, text, len, "'*' stands alone or "
			    "begins \"*.\"");
		r->kind = SP_EGRESS_NAME;
		if (name_parse(host, hlen, r->name, &why) == -1)
			return bad_rule(e, text, len, why);
	}
ports:
	if (ports != NULL && parse_ports(ports, plen, r) == -1)
		return bad_rule(e, text, len, "ports are N, N-M (N <= M) or *, "
		    "from 1 to 65535");
	return 0;
}

void
sp_egress_rule_format(const struct sp_egress_rule *r,
    char out[SP_EGRESS_RULE_MAX + 1])
{
	char a[SP_EGRESS_ADDR_STRLEN], host[SP_EGRESS_NAME_MAX + 4];

	switch (r->kind) {
	case SP_EGRESS_ANY:
		strcpy(host, "*");
		break;
	case SP_EGRESS_NAME:
		snprintf(host, sizeof host, "%s", r->name);
		break;
	case SP_EGRESS_SUFFIX:
		snprintf(host, sizeof host, "*.%s", r->name);
		break;
	case SP_EGRESS_NET:
		sp_egress_addr_format(&r->net, a);
		/* A network of mapped addresses is an IPv4 one. */
		if (sp_egress_addr_is_v4(&r->net) && r->prefix >= 96) {
			if (r->prefix == 128)
				snprintf(host, sizeof host, "%s", a);
			else
				snprintf(host, sizeof host, "%s/%d", a,
				    r->prefix - 96);
		} else {
			inet_ntop(AF_INET6, r->net.a, a, sizeof a);
			if (r->prefix == 128)
				snprintf(host, sizeof host, "[%s]", a);
			else
				snprintf(host, sizeof host, "[%s]/%d", a, r->prefix);
		}
		break;
	}
	/* At most 255 + 12 bytes: it fits. */
	if (r->port_lo == 1 && r->port_hi == 65535)
		snprintf(out, SP_EGRESS_RULE_MAX + 1, "%s", host);
	else if (r->port_lo == r->port_hi)
		snprintf(out, SP_EGRESS_RULE_MAX + 1, "%s:%d", host, r->port_lo);
	else
		snprintf(out, SP_EGRESS_RULE_MAX + 1, "%s:%d-%d", host,
		    r->port_lo, r->port_hi);
}

static int
rule_same(const struct sp_egress_rule *a, const struct sp_egress_rule *b)
{
	return a->kind == b->kind && a->port_lo == b->port_lo &&
	    a->port_hi == b->port_hi && strcmp(a->name, b->name) == 0 &&
	    a->prefix == b->prefix && memcmp(&a->net, &b->net, sizeof a->net) == 0;
}

/* dedup 0: the writer did it already (and twice the same rule would do no
 * harm): a file is read per connection, and checking is quadratic. */
int
sp_egress_rules_push(struct sp_egress_rules *rs, const struct sp_egress_rule *r,
    int dedup, struct sp_err *e)
{
	struct sp_egress_rule *nr;
	size_t i, cap;

	for (i = 0; dedup && i < rs->n; i++)
		if (rule_same(&rs->r[i], r))
			return 0;
	if (rs->n == SP_EGRESS_RULES_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "at most %d rules in a "
		    "list", SP_EGRESS_RULES_MAX);
	if (rs->n == rs->cap) {
		cap = rs->cap ? rs->cap * 2 : 8;
		if (cap > SP_EGRESS_RULES_MAX)
			cap = SP_EGRESS_RULES_MAX;
		if ((nr = realloc(rs->r, cap * sizeof *nr)) == NULL)
			return sp_err_set(e, SP_E_NOMEM, 1, "egress rules: no memory");
		rs->r = nr;
		rs->cap = cap;
	}
	rs->r[rs->n++] = *r;
	return 0;
}

/* The next token of *s (separated by SEPS); 0 at the end. */
static size_t
next_token(const char **s, const char **tok)
{
	size_t n;

	*s += strspn(*s, SEPS);
	*tok = *s;
	n = strcspn(*s, SEPS);
	*s += n;
	return n;
}

/* addr_only: the never-list and its exceptions hold networks only. */
static int
rules_add(struct sp_egress_rules *rs, const char *list, int addr_only,
    struct sp_err *e)
{
	struct sp_egress_rule r;
	const char *s = list, *tok;
	size_t n0 = rs->n, len;

	while ((len = next_token(&s, &tok)) > 0) {
		if (sp_egress_rule_parse(tok, len, &r, e) == -1)
			goto fail;
		if (addr_only && r.kind != SP_EGRESS_NET) {
			bad_rule(e, tok, len, "the never-list and its exceptions "
			    "hold addresses and networks, not names");
			goto fail;
		}
		if (sp_egress_rules_push(rs, &r, 1, e) == -1)
			goto fail;
	}
	return 0;
fail:
	rs->n = n0;
	return -1;
}

int
sp_egress_rules_add(struct sp_egress_rules *rs, const char *list,
    struct sp_err *e)
{
	return rules_add(rs, list, 0, e);
}

void
sp_egress_rules_release(struct sp_egress_rules *rs)
{
	free(rs->r);
	memset(rs, 0, sizeof *rs);
}

/* ---- policies ---- */

void
sp_egress_policy_init(struct sp_egress_policy *p)
{
	memset(p, 0, sizeof *p);
}

void
sp_egress_policy_release(struct sp_egress_policy *p)
{
	sp_egress_rules_release(&p->allow);
	sp_egress_rules_release(&p->deny);
	sp_egress_policy_init(p);
}

const char *
sp_egress_scope_name(enum sp_egress_scope s)
{
	switch (s) {
	case SP_EGRESS_SANDBOX: return "sandbox";
	case SP_EGRESS_TENANT: return "tenant";
	case SP_EGRESS_TEMPLATE: return "template";
	default: return "none";
	}
}

json_t *
sp_egress_rules_json(const struct sp_egress_rules *rs)
{
	char t[SP_EGRESS_RULE_MAX + 1];
	json_t *a = json_array();
	size_t i;

	for (i = 0; a != NULL && i < rs->n; i++) {
		sp_egress_rule_format(&rs->r[i], t);
		json_array_append_new(a, json_string(t));
	}
	return a;
}

json_t *
sp_egress_policy_json(const struct sp_egress_policy *p)
{
	return json_pack("{s:o, s:o}", "allow",
	    sp_egress_rules_json(&p->allow), "deny",
	    sp_egress_rules_json(&p->deny));
}

/* ---- the never-list ---- */

void
sp_egress_never_init(struct sp_egress_never *nv)
{
	memset(nv, 0, sizeof *nv);
}

void
sp_egress_never_release(struct sp_egress_never *nv)
{
	sp_egress_rules_release(&nv->never);
	sp_egress_rules_release(&nv->except);
	free(nv->node);
	sp_egress_never_init(nv);
}

/* The list is the one word "none". */
static int
only_none(const char *s)
{
	const char *tok;

	return next_token(&s, &tok) == 4 && memcmp(tok, "none", 4) == 0 &&
	    next_token(&s, &tok) == 0;
}

int
sp_egress_never_set(struct sp_egress_never *nv, const char *never,
    const char *except, struct sp_err *e)
{
	struct sp_egress_rules nr = { 0 }, er = { 0 };
	const char *s, *tok;
	char one[SP_EGRESS_RULE_MAX + 1];
	size_t len;
	int none = 0, count = 0;

	for (s = never ? never : "default"; (len = next_token(&s, &tok)) > 0;
	    count++) {
		if (len == 4 && memcmp(tok, "none", 4) == 0) {
			none = 1;
			continue;
		}
		if (len == 7 && memcmp(tok, "default", 7) == 0) {
			if (rules_add(&nr, SP_EGRESS_NEVER_DEFAULT, 1, e) == -1)
				goto fail;
			continue;
		}
		if (len > SP_EGRESS_RULE_MAX) {
			bad_rule(e, tok, len, "longer than 300 bytes");
			goto fail;
		}
		memcpy(one, tok, len);
		one[len] = '\0';
		if (rules_add(&nr, one, 1, e) == -1)
			goto fail;
	}
	if (none && count > 1) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_EGRESS_NEVER: \"none\" "
		    "stands alone");
		goto fail;
	}
	if (except != NULL && !only_none(except) &&
	    rules_add(&er, except, 1, e) == -1)
		goto fail;
	sp_egress_rules_release(&nv->never);
	sp_egress_rules_release(&nv->except);
	nv->never = nr;
	nv->except = er;
	return 0;
fail:
	sp_egress_rules_release(&nr);
	sp_egress_rules_release(&er);
	return -1;
}

static int
never_rules_cover(const struct sp_egress_never *nv,
    const struct sp_egress_addr *a)
{
	size_t i;

	for (i = 0; i < nv->never.n; i++)
		if (nv->never.r[i].port_lo == 1 && nv->never.r[i].port_hi == 65535 &&
		    in_net(a, &nv->never.r[i].net, nv->never.r[i].prefix))
			return 1;
	return 0;
}

int
sp_egress_never_add_addr(struct sp_egress_never *nv,
    const struct sp_egress_addr *a, struct sp_err *e)
{
	struct sp_egress_addr *na;
	size_t i;

	for (i = 0; i < nv->nnode; i++)
		if (memcmp(&nv->node[i], a, sizeof *a) == 0)
			return 0;
	if (nv->nnode == SP_EGRESS_NODE_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "the node has more than %d "
		    "addresses the never-list does not cover", SP_EGRESS_NODE_MAX);
	if ((na = realloc(nv->node, (nv->nnode + 1) * sizeof *na)) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "never-list: no memory");
	nv->node = na;
	nv->node[nv->nnode++] = *a;
	return 0;
}

int
sp_egress_never_add_node(struct sp_egress_never *nv, struct sp_err *e)
{
	struct ifaddrs *ifs, *i;
	struct sp_egress_addr a;
	int rc = 0;

	if (getifaddrs(&ifs) == -1)
		return sp_err_sys(e, SP_E_IO, "getifaddrs");
	for (i = ifs; i != NULL && rc == 0; i = i->ifa_next)
		if (sp_egress_addr_from_sockaddr(i->ifa_addr, &a) == 0 &&
		    !never_rules_cover(nv, &a))
			rc = sp_egress_never_add_addr(nv, &a, e);
	freeifaddrs(ifs);
	return rc;
}

int
sp_egress_never_load(struct sp_egress_never *nv, struct sp_err *e)
{
	const char *never = getenv("SPACE_EGRESS_NEVER");
	const char *except = getenv("SPACE_EGRESS_ALLOW_NEVER");
	char msg[sizeof e->msg];

	if (sp_egress_never_set(nv, never && *never ? never : NULL,
	    except && *except ? except : NULL, e) == -1) {
		snprintf(msg, sizeof msg, "%s", e->msg);
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_EGRESS_NEVER or "
		    "SPACE_EGRESS_ALLOW_NEVER: %.400s", msg);
	}
	return sp_egress_never_add_node(nv, e);
}

static int
port_in(const struct sp_egress_rule *r, int port)
{
	return port >= r->port_lo && port <= r->port_hi;
}

int
sp_egress_never_match(const struct sp_egress_never *nv,
    const struct sp_egress_addr *a, int port, char *why, size_t n)
{
	struct sp_egress_addr c[2];
	char t[SP_EGRESS_RULE_MAX + 1];
	size_t i, k, m = 1;
	int hit = 0;

	c[0] = *a;
	if (embedded_v4(a, &c[1]))
		m = 2;
	for (k = 0; k < m && !hit; k++) {
		for (i = 0; i < nv->never.n && !hit; i++)
			if (port_in(&nv->never.r[i], port) &&
			    in_net(&c[k], &nv->never.r[i].net, nv->never.r[i].prefix)) {
				sp_egress_rule_format(&nv->never.r[i], t);
				hit = 1;
			}
		for (i = 0; i < nv->nnode && !hit; i++)
			if (memcmp(&c[k], &nv->node[i], sizeof c[k]) == 0) {
				strcpy(t, "node-address");
				hit = 1;
			}
	}
	if (!hit)
		return 0;
	for (i = 0; i < nv->except.n; i++)
		if (port_in(&nv->except.r[i], port) &&
		    in_net(a, &nv->except.r[i].net, nv->except.r[i].prefix))
			return 0;
	if (why != NULL && n > 0)
		snprintf(why, n, "%s", t);
	return 1;
}

/* ---- decisions ---- */

/* A requested host: an address (bare or in brackets) or a name. */
static int
host_parse(const char *host, char name[SP_EGRESS_NAME_MAX + 1],
    struct sp_egress_addr *a, int *is_addr)
{
	const char *why;
	size_t n;

	if (host == NULL)
		return -1;
	n = strnlen(host, SP_EGRESS_NAME_MAX + 2);
	if (n > SP_EGRESS_NAME_MAX + 1)
		return -1;
	*is_addr = 1;
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']')
		return memchr(host, ':', n) != NULL &&
		    addr_parse_bare(host + 1, n - 2, a) ? 0 : -1;
	if (addr_parse_bare(host, n, a))
		return 0;
	*is_addr = 0;
	return name_parse(host, n, name, &why);
}

static int
name_match(const struct sp_egress_rule *r, const char *name)
{
	size_t n, s;

	switch (r->kind) {
	case SP_EGRESS_ANY:
		return 1;
	case SP_EGRESS_NAME:
		return strcmp(r->name, name) == 0;
	case SP_EGRESS_SUFFIX:
		n = strlen(name);
		s = strlen(r->name);
		return n > s + 1 && name[n - s - 1] == '.' &&
		    strcmp(name + n - s, r->name) == 0;
	default:
		return 0;
	}
}

static int
addr_match(const struct sp_egress_rule *r, const struct sp_egress_addr *a)
{
	return r->kind == SP_EGRESS_ANY ||
	    (r->kind == SP_EGRESS_NET && in_net(a, &r->net, r->prefix));
}

/* The first rule of rs for the host (port 0: any port matches). */
static const struct sp_egress_rule *
first_match(const struct sp_egress_rules *rs, const char *name,
    const struct sp_egress_addr *a, int port)
{
	size_t i;

	for (i = 0; i < rs->n; i++) {
		if (port > 0 && !port_in(&rs->r[i], port))
			continue;
		if (name != NULL ? name_match(&rs->r[i], name) :
		    addr_match(&rs->r[i], a))
			return &rs->r[i];
	}
	return NULL;
}

static void
decision_start(struct sp_egress_decision *d, const struct sp_egress_policy *p)
{
	memset(d, 0, sizeof *d);
	d->source = sp_egress_scope_name(p->source);
}

static int
decision_set(struct sp_egress_decision *d, int allow, const char *reason,
    const struct sp_egress_rule *r)
{
	d->allow = allow;
	snprintf(d->reason, sizeof d->reason, "%s", reason);
	if (r != NULL)
		sp_egress_rule_format(r, d->rule);
	else
		d->rule[0] = '\0';
	return allow;
}

void
sp_egress_decision_deny(struct sp_egress_decision *d, const char *reason,
    const char *rule)
{
	d->allow = 0;
	d->naddrs = 0;
	snprintf(d->reason, sizeof d->reason, "%s", reason);
	snprintf(d->rule, sizeof d->rule, "%s", rule ? rule : "");
	if (d->source == NULL)
		d->source = "none";
}

/* The rules' verdict on host:port; *allow_rule gets the rule that allows. */
static int
rules_decide(const struct sp_egress_policy *p, const char *name,
    const struct sp_egress_addr *a, int port, struct sp_egress_decision *d,
    const struct sp_egress_rule **allow_rule)
{
	const struct sp_egress_rule *r;

	if ((r = first_match(&p->deny, name, a, port)) != NULL)
		return decision_set(d, 0, "denied-by-rule", r);
	if ((*allow_rule = first_match(&p->allow, name, a, port)) == NULL)
		return decision_set(d, 0, "not-allowed", NULL);
	return decision_set(d, 1, "resolve", *allow_rule);
}

int
sp_egress_decide_name(const struct sp_egress_policy *p, const char *host,
    int port, struct sp_egress_decision *d)
{
	char name[SP_EGRESS_NAME_MAX + 1];
	const struct sp_egress_rule *allow;
	struct sp_egress_addr a;
	int is_addr;

	decision_start(d, p);
	if (port < 1 || port > 65535)
		return decision_set(d, 0, "bad-port", NULL);
	if (host_parse(host, name, &a, &is_addr) == -1)
		return decision_set(d, 0, "bad-host", NULL);
	return rules_decide(p, is_addr ? NULL : name, &a, port, d, &allow);
}

int
sp_egress_decide(const struct sp_egress_policy *p,
    const struct sp_egress_never *nv, const char *host, int port,
    const struct sp_egress_addr *addrs, size_t n,
    struct sp_egress_decision *d)
{
	char name[SP_EGRESS_NAME_MAX + 1], first_why[SP_EGRESS_RULE_MAX + 1];
	char why[SP_EGRESS_RULE_MAX + 1];
	const char *first_reason = NULL;
	const struct sp_egress_rule *allow, *r;
	struct sp_egress_addr lit;
	size_t i;
	int is_addr;

	decision_start(d, p);
	if (port < 1 || port > 65535)
		return decision_set(d, 0, "bad-port", NULL);
	if (host_parse(host, name, &lit, &is_addr) == -1)
		return decision_set(d, 0, "bad-host", NULL);
	if (!rules_decide(p, is_addr ? NULL : name, &lit, port, d, &allow))
		return 0;
	if (is_addr) {
		addrs = &lit;
		n = 1;
	}
	if (n > SP_EGRESS_ADDRS_MAX)
		n = SP_EGRESS_ADDRS_MAX;
	for (i = 0; i < n; i++) {
		/* A name's addresses meet the deny rules for networks too. */
		if (!is_addr && (r = first_match(&p->deny, NULL, &addrs[i],
		    port)) != NULL) {
			if (first_reason == NULL) {
				first_reason = "denied-by-rule";
				sp_egress_rule_format(r, first_why);
			}
			continue;
		}
		if (nv == NULL || sp_egress_never_match(nv, &addrs[i], port, why,
		    sizeof why)) {
			if (first_reason == NULL) {
				first_reason = "never-list";
				snprintf(first_why, sizeof first_why, "%s",
				    nv == NULL ? "no never-list" : why);
			}
			continue;
		}
		d->addrs[d->naddrs++] = addrs[i];
	}
	if (d->naddrs > 0)
		return decision_set(d, 1, "allowed", allow);
	if (first_reason == NULL)
		return decision_set(d, 0, "no-address", NULL);
	decision_set(d, 0, first_reason, NULL);
	snprintf(d->rule, sizeof d->rule, "%s", first_why);
	return 0;
}

int
sp_egress_decide_dns(const struct sp_egress_policy *p, const char *name,
    struct sp_egress_decision *d)
{
	char n[SP_EGRESS_NAME_MAX + 1];
	const struct sp_egress_rule *r;
	struct sp_egress_addr a;
	size_t i;
	int is_addr;

	decision_start(d, p);
	if (host_parse(name, n, &a, &is_addr) == -1 || is_addr)
		return decision_set(d, 0, "bad-host", NULL);
	/* Only a deny for every port keeps a name from resolving: another
	 * port of it may still be allowed. */
	for (i = 0; i < p->deny.n; i++)
		if (p->deny.r[i].port_lo == 1 && p->deny.r[i].port_hi == 65535 &&
		    name_match(&p->deny.r[i], n))
			return decision_set(d, 0, "denied-by-rule", &p->deny.r[i]);
	if ((r = first_match(&p->allow, n, NULL, 0)) == NULL)
		return decision_set(d, 0, "not-allowed", NULL);
	return decision_set(d, 1, "allowed", r);
}

/* ---- the decision log ---- */

/* Text from the guest, made safe and short for a log line. */
static void
log_text(const char *s, char out[256])
{
	size_t i;

	for (i = 0; s != NULL && s[i] != '\0' && i < 255; i++)
		out[i] = (unsigned char)s[i] >= 0x20 &&
		    (unsigned char)s[i] < 0x7f ? s[i] : '?';
	out[i] = '\0';
}

int
sp_egress_log(int fd, const char *sandbox, const char *kind,
    const char *host, int port, const struct sp_egress_decision *d,
    struct sp_err *e)
{
	char when[40], sb[256], k[256], h[256], a[SP_EGRESS_ADDR_STRLEN];
	char line[SP_EGRESS_LOG_MAX];
	struct timespec ts;
	struct tm tm;
	json_t *j;
	size_t n;
	ssize_t w;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
	n = strlen(when);
	snprintf(when + n, sizeof when - n, ".%03ldZ", ts.tv_nsec / 1000000);
	log_text(sandbox, sb);
	log_text(kind, k);
	log_text(host, h);
	j = json_pack("{s:s, s:s, s:s, s:s}", "time", when, "sandbox", sb,
	    "kind", k, "host", h);
	if (j == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "egress log: no memory");
	if (port > 0)
		json_object_set_new(j, "port", json_integer(port));
	json_object_set_new(j, "decision", json_string(d->allow ? "allow" : "deny"));
	log_text(d->reason, k);
	json_object_set_new(j, "reason", json_string(k));
	if (d->rule[0] != '\0') {
		log_text(d->rule, k);
		json_object_set_new(j, "rule", json_string(k));
	}
	log_text(d->source ? d->source : "none", k);
	json_object_set_new(j, "policy", json_string(k));
	if (d->allow && d->naddrs > 0) {
		sp_egress_addr_format(&d->addrs[0], a);
		json_object_set_new(j, "addr", json_string(a));
	}
	n = json_dumpb(j, line, sizeof line - 1, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(j);
	if (n == 0 || n > sizeof line - 1)
		return sp_err_set(e, SP_E_INTERNAL, 0, "egress log: a line over %d "
		    "bytes", SP_EGRESS_LOG_MAX);
	line[n++] = '\n';
	/* One write: lines of writers sharing the file never interleave. */
	do
		w = write(fd, line, n);
	while (w == -1 && errno == EINTR);
	if (w == -1)
		return sp_err_sys(e, SP_E_IO, "egress log");
	if ((size_t)w != n)
		return sp_err_set(e, SP_E_IO, 1, "egress log: short write");
	return 0;
}
