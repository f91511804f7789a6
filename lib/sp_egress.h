/*
 * sp_egress.h: the egress policy of sandboxes (design.md): rules, the node's
 * never-list, the decisions the network gateway takes per connection and per
 * DNS lookup, the decision log, and where policies are kept.  Included from
 * sp_net.h.
 *
 * The gateway, per connection of a sandbox to HOST:PORT:
 *	sp_egress_policy_load(root, id, tenant, template, &p, &e)
 *	    (cheap: one small file; read again for every new connection, so a
 *	    change applies to the next one; on error deny, "policy-error")
 *	sp_egress_decide_name(&p, HOST, PORT, &d)
 *	    (before any lookup: a name no rule allows is never resolved)
 *	getaddrinfo(HOST) -> addrs (sp_egress_addr_from_sockaddr)
 *	sp_egress_decide(&p, &never, HOST, PORT, addrs, n, &d)
 *	    connect to d.addrs[0] (then d.addrs[1], ...) and to nothing else:
 *	    the addresses checked are the addresses connected to, so a name
 *	    that resolves again to something else (DNS rebinding) gains nothing
 *	sp_egress_log(log_fd, id, "connect", HOST, PORT, &d, &e)
 * and per lookup from the guest: sp_egress_decide_dns (a name the policy
 * does not allow is not resolved at all: no exfiltration through DNS).
 */
#ifndef SP_EGRESS_H
#define SP_EGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <jansson.h>

#define SP_EGRESS_RULE_MAX	300	/* bytes of one rule's text */
#define SP_EGRESS_NAME_MAX	253	/* a DNS name, without the final '.' */
#define SP_EGRESS_RULES_MAX	256	/* rules in one list (allow, deny, ...) */
#define SP_EGRESS_ADDRS_MAX	32	/* addresses one decision looks at */
#define SP_EGRESS_NODE_MAX	1024	/* node addresses the never-list holds */
#define SP_EGRESS_FILE_MAX	(256 * 1024)	/* a policy file */
#define SP_EGRESS_LOG_MAX	4096	/* a log line, '\n' included: PIPE_BUF */
#define SP_EGRESS_ADDR_STRLEN	46	/* INET6_ADDRSTRLEN */

/*
 * The never-list of a node unless SPACE_EGRESS_NEVER says otherwise:
 * "this network" and 0.0.0.0, private, CGNAT, loopback, link-local (the
 * cloud metadata service 169.254.169.254 too), IETF protocol assignments,
 * benchmarking, multicast, reserved and broadcast; ::, ::1 and the
 * IPv4-compatible ::a.b.c.d, IPv4-translated, local-use NAT64, discard-only,
 * unique local, link-local, site-local and multicast.  IPv4-mapped IPv6
 * (::ffff:a.b.c.d) is the IPv4 address itself here, and the IPv4 address a
 * NAT64 (64:ff9b::/96) or 6to4 (2002::/16) address embeds is checked too.
 * The node's own addresses are always added.
 */
#define SP_EGRESS_NEVER_DEFAULT \
	"0.0.0.0/8 10.0.0.0/8 100.64.0.0/10 127.0.0.0/8 169.254.0.0/16 " \
	"172.16.0.0/12 192.0.0.0/24 192.168.0.0/16 198.18.0.0/15 " \
	"224.0.0.0/4 240.0.0.0/4 " \
	"[::]/96 [::ffff:0:0:0]/96 [64:ff9b:1::]/48 [100::]/64 [fc00::]/7 " \
	"[fe80::]/10 [fec0::]/10 [ff00::]/8"

/* An IPv4 or IPv6 address; IPv4 as ::ffff:a.b.c.d, so that the mapped
 * IPv6 form of an address is that address for every check. */
struct sp_egress_addr {
	unsigned char a[16];
};

/*
 * A rule: HOST[:PORTS].
 *   HOST   *			any host (name or address)
 *	    NAME		exactly that name (lower case, a final '.'
 *				dropped, the last label begins with a letter)
 *	    *.NAME		any name below NAME, not NAME itself
 *	    A.B.C.D[/LEN]	an IPv4 address or network
 *	    [IPV6][/LEN]	an IPv6 address or network, always in brackets
 *   PORTS  N | N-M | *		1 to 65535; without PORTS, any port
 * A network has no host bits set.  Rules are ASCII (IDNA names as xn--).
 * IPv4 addresses being ::ffff:a.b.c.d, an IPv6 network around
 * ::ffff:0:0/96 holds them too ([::]/0 is every address).
 */
enum sp_egress_kind {
	SP_EGRESS_ANY,
	SP_EGRESS_NAME,
	SP_EGRESS_SUFFIX,
	SP_EGRESS_NET
};
struct sp_egress_rule {
	enum sp_egress_kind kind;
	char name[SP_EGRESS_NAME_MAX + 1];	/* NAME; SUFFIX: what follows "*." */
	struct sp_egress_addr net;		/* NET */
	int prefix;				/* NET: bits of the 128 */
	int port_lo, port_hi;			/* 1-65535 is any port */
};
struct sp_egress_rules {
	struct sp_egress_rule *r;
	size_t n, cap;
};

/* One rule from text[0..len); bad-input quoting it. */
int sp_egress_rule_parse(const char *text, size_t len,
    struct sp_egress_rule *r, struct sp_err *e);
/* The canonical text: lower case, shortest IPv6 form, no "/32", no ":*". */
void sp_egress_rule_format(const struct sp_egress_rule *r,
    char out[SP_EGRESS_RULE_MAX + 1]);
/* Appends the rules of list (separated by ',' or white space), leaving out
 * those already there; on error the list is as it was. */
int sp_egress_rules_add(struct sp_egress_rules *rs, const char *list,
    struct sp_err *e);
void sp_egress_rules_release(struct sp_egress_rules *rs);
/* Appends one rule (dedup 1: not when the list has it already). */
int sp_egress_rules_push(struct sp_egress_rules *rs,
    const struct sp_egress_rule *r, int dedup, struct sp_err *e);
/* The rules as a JSON array of their canonical texts. */
json_t *sp_egress_rules_json(const struct sp_egress_rules *rs);

/* ---- a policy: allow and deny lists; deny wins; default deny ---- */
enum sp_egress_scope {
	SP_EGRESS_NONE,		/* no policy anywhere: everything denied */
	SP_EGRESS_TEMPLATE,
	SP_EGRESS_TENANT,
	SP_EGRESS_SANDBOX
};
struct sp_egress_policy {
	struct sp_egress_rules allow, deny;
	enum sp_egress_scope source;		/* where it was read from */
	char source_name[SP_NAME_MAX + 1];	/* the id, tenant or template */
	int64_t updated;			/* unix seconds of the write */
};
void sp_egress_policy_init(struct sp_egress_policy *p);
void sp_egress_policy_release(struct sp_egress_policy *p);
const char *sp_egress_scope_name(enum sp_egress_scope s);
/* {"allow":[...],"deny":[...]} in canonical text; the caller decrefs. */
json_t *sp_egress_policy_json(const struct sp_egress_policy *p);

/*
 * Storage (sp_egress_store.c), under root/egress/: <id>.json,
 * tenant-<T>.json and template-<NAME>.json, each {"version":1,"allow":
 * [...],"deny":[...],"updated":N}.  Written whole to a temporary file and
 * renamed: a reader sees the old policy or the new one.  When nodes share
 * a DB (SPACE_DB on PostgreSQL) the same text is the row (egress, SCOPE,
 * NAME) of its documents instead, SCOPE being sandbox, tenant or template,
 * and root is not used.  Reading is strict and bounded (corrupt
 * otherwise); a policy absent is not-found.
 */
int sp_egress_path(const char *root, enum sp_egress_scope scope,
    const char *name, char *out, size_t n, struct sp_err *e);
int sp_egress_policy_write(const char *root, enum sp_egress_scope scope,
    const char *name, const struct sp_egress_policy *p, struct sp_err *e);
int sp_egress_policy_read(const char *root, enum sp_egress_scope scope,
    const char *name, struct sp_egress_policy *p, struct sp_err *e);
/* Absent is not an error: *removed says whether there was one. */
int sp_egress_policy_remove(const char *root, enum sp_egress_scope scope,
    const char *name, int *removed, struct sp_err *e);
/* A sandbox's effective policy: its own, else its tenant's, else its
 * template's (name or name@digest), else none (deny all).  id, tenant and
 * template may be NULL; a tenant or template that is no valid name is
 * passed over.  A policy that does not read is an error, never a reason to
 * fall back to a wider one. */
int sp_egress_policy_load(const char *root, const char *id,
    const char *tenant, const char *template, struct sp_egress_policy *p,
    struct sp_err *e);

/* ---- addresses ---- */
/* A.B.C.D, or IPv6 bare or in brackets (no zone). */
int sp_egress_addr_parse(const char *s, struct sp_egress_addr *a,
    struct sp_err *e);
void sp_egress_addr_format(const struct sp_egress_addr *a,
    char out[SP_EGRESS_ADDR_STRLEN]);
int sp_egress_addr_is_v4(const struct sp_egress_addr *a);	/* 1 or 0 */
/* From an AF_INET or AF_INET6 sockaddr; -1 for other families. */
int sp_egress_addr_from_sockaddr(const struct sockaddr *sa,
    struct sp_egress_addr *a);
/* What to connect(2) to: AF_INET for an IPv4 address. */
void sp_egress_addr_to_sockaddr(const struct sp_egress_addr *a, int port,
    struct sockaddr_storage *ss, socklen_t *len);

/* ---- the node's never-list: beats every allow rule ---- */
struct sp_egress_never {
	struct sp_egress_rules never;	/* addresses only, ports allowed */
	struct sp_egress_rules except;	/* SPACE_EGRESS_ALLOW_NEVER */
	struct sp_egress_addr *node;	/* this node's addresses */
	size_t nnode;
};
void sp_egress_never_init(struct sp_egress_never *nv);
void sp_egress_never_release(struct sp_egress_never *nv);
/* never: address rules, "default" standing for SP_EGRESS_NEVER_DEFAULT,
 * or "none" alone; NULL is the default.  except: address rules or "none";
 * NULL is none.  Node addresses are kept. */
int sp_egress_never_set(struct sp_egress_never *nv, const char *never,
    const char *except, struct sp_err *e);
int sp_egress_never_add_addr(struct sp_egress_never *nv,
    const struct sp_egress_addr *a, struct sp_err *e);
/* This node's addresses now (getifaddrs), those no rule covers already. */
int sp_egress_never_add_node(struct sp_egress_never *nv, struct sp_err *e);
/* All of it from SPACE_EGRESS_NEVER and SPACE_EGRESS_ALLOW_NEVER (empty is
 * unset) and getifaddrs.  Node addresses change: load it again from time to
 * time. */
int sp_egress_never_load(struct sp_egress_never *nv, struct sp_err *e);
/* 1 when a:port is never to be reached; why gets the entry that says so. */
int sp_egress_never_match(const struct sp_egress_never *nv,
    const struct sp_egress_addr *a, int port, char *why, size_t n);

/* ---- decisions ---- */
/*
 * reason is one of
 *   allowed         allow: connect to addrs[0..naddrs), in that order
 *   resolve         allow (decide_name): the rules let it through; resolve
 *                   it and ask sp_egress_decide with the addresses
 *   not-allowed     no allow rule matches
 *   denied-by-rule  a deny rule matches (rule says which)
 *   never-list      the address is on the node's never-list (rule: the entry)
 *   no-address      the name is allowed but resolved to nothing
 *   bad-host, bad-port  the request is malformed
 * or what the caller set with sp_egress_decision_deny.
 */
struct sp_egress_decision {
	int allow;
	char reason[32];
	char rule[SP_EGRESS_RULE_MAX + 1];	/* what decided, or "" */
	const char *source;			/* the policy's scope name */
	struct sp_egress_addr addrs[SP_EGRESS_ADDRS_MAX];
	size_t naddrs;
};
/*
 * Rules match a name host by its name (NAME, SUFFIX, ANY rules) and an
 * address host by its address (NET, ANY rules); an allow rule for a network
 * never lets a name through, so no name is resolved that no rule names.
 * Deny rules for networks apply to the addresses a name resolves to as
 * well.  Names are case-insensitive; one final '.' is dropped.
 */
/* Before resolving: the rules only, no never-list. */
int sp_egress_decide_name(const struct sp_egress_policy *p, const char *host,
    int port, struct sp_egress_decision *d);
/* The decision: for an address host its address (addrs are ignored), for a
 * name the first SP_EGRESS_ADDRS_MAX of addrs, each checked against the
 * deny rules for networks and the never-list; d->addrs gets those that
 * pass.  Returns d->allow.  A gateway that answered a lookup of this
 * sandbox with an address may decide a connection to that address as the
 * name it answered, with that one address. */
int sp_egress_decide(const struct sp_egress_policy *p,
    const struct sp_egress_never *nv, const char *host, int port,
    const struct sp_egress_addr *addrs, size_t n,
    struct sp_egress_decision *d);
/* A DNS lookup from the guest: allowed when some allow rule names it (for
 * any port) and no deny rule for all ports does. */
int sp_egress_decide_dns(const struct sp_egress_policy *p, const char *name,
    struct sp_egress_decision *d);
/* A deny the caller decides (e.g. "policy-error"). */
void sp_egress_decision_deny(struct sp_egress_decision *d, const char *reason,
    const char *rule);

/* One JSON line to fd, in one write(2) of at most SP_EGRESS_LOG_MAX bytes
 * (whole even between writers appending to one file or pipe):
 * {"time":"2026-11-30T12:00:00.123Z","sandbox":ID,"kind":KIND,"host":H,
 *  "port":P,"decision":"allow"|"deny","reason":R,"rule":S,"policy":SCOPE,
 *  "addr":A}; port only when > 0, rule only when not "", addr only when
 * allowed.  Strings from the guest are cut to 255 bytes, bytes outside
 * printable ASCII become '?'. */
int sp_egress_log(int fd, const char *sandbox, const char *kind,
    const char *host, int port, const struct sp_egress_decision *d,
    struct sp_err *e);

#endif
