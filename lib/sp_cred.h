/*
 * sp_cred.h: the credential manager's host side (design.md).  Credentials
 * live outside every sandbox, under $SPACE_ROOT/creds/; the network gateway
 * resolves the one a sandbox's request to a host should carry and injects it
 * there, so the secret never enters the guest.  Included from sp_net.h,
 * after the parts below it (it uses SP_NAME_MAX and SP_ID_LEN).
 *
 * A credential is a name in a scope:
 *
 *	global			every sandbox
 *	tenant/T		the sandboxes of tenant T
 *	project/T/P		the sandboxes of project P of tenant T
 *	sandbox/ID		one sandbox
 *
 * T and P are names (sp_name_check), ID a sandbox id.  One name may be in
 * several scopes: an override.  Its metadata: the hosts it may go to, how it
 * is injected, an optional expiry and rate limit, when it was created and
 * its secret last set, and a version that counts the secrets it has had.
 *
 * Hosts are DNS names (letters, digits, '-', dot-separated labels of 1..63,
 * at most 253 in all), kept lowercase; "*.SUFFIX" (SUFFIX of two labels or
 * more) matches every name that ends in ".SUFFIX", at any depth, and not
 * SUFFIX itself.  An IPv4 address in dotted form is a name like any other.
 *
 * Injection methods:
 *
 *	header:NAME:FORMAT	the header NAME (an HTTP token; never one that
 *				frames the message: Host, Content-Length,
 *				Transfer-Encoding, Connection, ...) with the
 *				value FORMAT, whose one "{}" is the secret:
 *				"header:Authorization:Bearer {}"
 *	basic			the secret is USER:PASSWORD; the header
 *				"Authorization: Basic " + base64 of it
 *	query:PARAM		the query parameter PARAM=secret, the secret
 *				percent-encoded (PARAM: 1..64 of A-Z a-z 0-9
 *				- . _ ~)
 *
 * A secret is 1..SP_CRED_SECRET_MAX bytes without control characters (so
 * never a CR or LF that could end a header); for basic it holds a ':'.
 *
 * Resolution (sp_cred_resolve): of the scopes that take the sandbox --
 * sandbox/ID, project/T/P, tenant/T, global, most specific first -- the first
 * that holds a credential matching the host decides; within it an exact host
 * beats a wildcard, a longer wildcard suffix a shorter one, then the newest
 * (created) wins, then the name first in byte order.  An expired credential
 * still wins its place: it is not injected ("expired"), and a less specific
 * one does not stand in for it.
 *
 * Vaults hold the secret bytes; the metadata never does.  The backend is
 * chosen when a credential is added (SPACE_CRED_VAULT) and recorded in its
 * metadata, which is where later uses, rotations and removals look:
 *
 *	file		(the default) $SPACE_ROOT/creds/vault/REF, sealed with
 *			crypto_secretbox under $SPACE_ROOT/creds/vault.key: 32
 *			random bytes, mode 0600, made on first use; a key file
 *			that group or others may read, or that another user
 *			owns, is refused.
 *	cmd:PROGRAM	an external secret manager.  PROGRAM (one word: looked
 *			up in PATH when it has no '/') runs without a shell,
 *			with the caller's environment, in a process group of
 *			its own, as
 *			    PROGRAM get REF	prints the secret on stdout
 *						(one trailing newline is cut)
 *			    PROGRAM put REF	reads the secret from stdin
 *			    PROGRAM rm REF	forgets it
 *			The secret travels only over stdin and stdout, never in
 *			argv or the environment.  Exit 0: done; 2: no such REF
 *			("not-found"; rm takes that as done); any other status
 *			or a signal: "vault" (temporary); after
 *			SPACE_CRED_VAULT_TIMEOUT_MS (default
 *			SP_CRED_VAULT_TIMEOUT_MS) its process group is killed:
 *			"timed-out" (temporary).
 *
 * REF is NAME.XXXXXXXXXXXX (12 random base32 characters), new for every
 * secret: a rotation puts the new secret under a new REF, switches the
 * metadata to it by a rename, then removes the old one, so a reader always
 * sees a whole pair.
 *
 * Files, all root-only (directories 0700, files 0600):
 *
 *	creds/scopes/SCOPE/NAME.json	metadata, one JSON object (below)
 *	creds/vault.key, creds/vault/REF	the file vault
 *	creds/rate/KEY/ID	the rate-limit state of a credential (KEY: its
 *				scope with '+' for '/', '+', its name) for
 *				sandbox ID: "TOKENS LAST\n", flock'd
 *	creds/audit.log		JSON lines, appended (sp_cred_use)
 *	creds/lock		held by add, rotate and rm
 *
 * When nodes share a DB (SPACE_DB on PostgreSQL; sp_db_shared_take) the
 * metadata, rate state and audit are rows of it instead: the same JSON as
 * the row (cred, SCOPE, NAME) of its documents, a token bucket per
 * credential and sandbox in cred_rates (changed by compare-and-set, so the
 * rate is one for the cluster), a line per record in cred_audit.  An add
 * takes a free name and a rotation replaces only the row it read: of two
 * nodes rotating at once one wins, the other removes its new secret from
 * the vault and fails with bad-state (temporary).  The file
 * vault, a node's disk, is refused there (bad-input): a cluster keeps its
 * secrets in a cmd: vault every node reaches.
 *
 * Metadata: {"name":s, "scope":s, "hosts":[s...], "inject":s,
 * "expires":n|null, "rate":"N/U"|null, "created":n, "rotated":n,
 * "version":n, "vault":s, "ref":s}; times in unix seconds.
 *
 * Every function that depends on the time takes it as now (unix seconds):
 * the library never reads the wall clock, so tests can give a fake one.
 */
#ifndef SP_CRED_H
#define SP_CRED_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct sp_err;

#define SP_CRED_SCOPE_MAX	(8 + 2 * SP_NAME_MAX + 1)	/* project/T/P */
#define SP_CRED_HOST_MAX	253
#define SP_CRED_HOSTS_MAX	16
#define SP_CRED_INJECT_MAX	320
#define SP_CRED_SECRET_MAX	8192
#define SP_CRED_VAULT_MAX	1024	/* "file" or "cmd:PROGRAM" */
#define SP_CRED_REF_MAX		(SP_NAME_MAX + 1 + SP_ID_LEN)
#define SP_CRED_RATE_MAX	1000000	/* N of N/PERIOD */
#define SP_CRED_PER_SCOPE	1024	/* credentials in one scope */
#define SP_CRED_AUDIT_LINE_MAX	1024	/* an audit record and its newline */
#define SP_CRED_VAULT_TIMEOUT_MS 10000
/* What sp_cred_use writes at most, NUL included: any buffer this big fits. */
#define SP_CRED_OUT_MAX		(SP_NAME_MAX + 2 + SP_CRED_INJECT_MAX + \
				    3 * SP_CRED_SECRET_MAX + 1)

struct sp_cred {
	char name[SP_NAME_MAX + 1];
	char scope[SP_CRED_SCOPE_MAX + 1];
	char hosts[SP_CRED_HOSTS_MAX][SP_CRED_HOST_MAX + 1];
	int nhosts;
	char inject[SP_CRED_INJECT_MAX + 1];
	int64_t expires;		/* 0: never */
	int64_t rate_n, rate_period;	/* rate_n per rate_period s; 0: none */
	int64_t created;
	int64_t rotated;		/* when the secret now held was set */
	int64_t version;		/* 1 when added, +1 per rotation */
	char vault[SP_CRED_VAULT_MAX + 1];
	char ref[SP_CRED_REF_MAX + 1];
};

/* ---- checks: each is bad-input with a message saying what is wrong ---- */
int sp_cred_scope_check(const char *scope, struct sp_err *e);
/* One host into out, lowercased and checked; wildcard 1 allows "*.SUFFIX". */
int sp_cred_host_norm(const char *host, int wildcard, char *out, size_t n,
    struct sp_err *e);
int sp_cred_inject_check(const char *inject, struct sp_err *e);
/* "N/PERIOD": N 1..SP_CRED_RATE_MAX, PERIOD s, m, h or d. */
int sp_cred_rate_parse(const char *s, int64_t *n, int64_t *period,
    struct sp_err *e);
/* The secret's bytes as the method needs them. */
int sp_cred_secret_check(const char *inject, const void *secret, size_t n,
    struct sp_err *e);
int sp_cred_vault_check(const char *vault, struct sp_err *e);
/* SPACE_CRED_VAULT, checked; "file" when unset. */
int sp_cred_vault_default(char out[SP_CRED_VAULT_MAX + 1], struct sp_err *e);

/* ---- the store: what space-cred does ---- */
struct sp_cred_spec {
	const char *name, *scope;
	const char *hosts;	/* "H[,H...]", at most SP_CRED_HOSTS_MAX */
	const char *inject;
	int64_t expires;	/* 0: never; else after now */
	const char *rate;	/* "N/PERIOD" or NULL */
	const char *vault;	/* NULL: sp_cred_vault_default() */
};
/* Adds a credential with its secret (secret[0..n), not NUL-terminated,
 * copied; the caller wipes its own copy); *out (may be NULL) gets it.
 * "exists" when the scope holds the name, "full" at SP_CRED_PER_SCOPE. */
int sp_cred_add(const char *root, const struct sp_cred_spec *s,
    const void *secret, size_t n, int64_t now, struct sp_cred *out,
    struct sp_err *e);
/* The credential name in scope; scope NULL: in whichever scope holds it,
 * "bad-input" when several do.  "not-found". */
int sp_cred_get(const char *root, const char *name, const char *scope,
    struct sp_cred *out, struct sp_err *e);
/* A new secret for it: version + 1, rotated = now; expires > 0 replaces
 * the expiry (it must be after now), 0 keeps it. */
int sp_cred_rotate(const char *root, const char *name, const char *scope,
    const void *secret, size_t n, int64_t expires, int64_t now,
    struct sp_cred *out, struct sp_err *e);
/* Removes it, secret, metadata and rate state; *removed is 0 when there
 * was no such credential (not an error).  out (may be NULL) gets what was
 * removed. */
int sp_cred_remove(const char *root, const char *name, const char *scope,
    int64_t now, int *removed, struct sp_cred *out, struct sp_err *e);
/* Forgets a sandbox that is removed: the credentials of scope sandbox/ID
 * and its rate state of every credential. */
int sp_cred_forget_sandbox(const char *root, const char *id, int64_t now,
    struct sp_err *e);
/* Every credential, scope by scope (global, tenants, projects, sandboxes),
 * names in byte order.  A metadata file that does not read is given to fn
 * as bad (c then holds only its name and scope) and the walk goes on; fn
 * returning non-zero stops it. */
int sp_cred_each(const char *root,
    int (*fn)(const struct sp_cred *c, const struct sp_err *bad, void *arg),
    void *arg, struct sp_err *e);
/* What space-cred prints of a credential: every field but the secret. */
json_t *sp_cred_json(const struct sp_cred *c);

/* ---- the gateway's calls ----
 *
 * sandbox is the sandbox's id; tenant and project are its labels "tenant"
 * and "project" (NULL or "": none, and then no tenant/ or project/ scope
 * takes it); host the name the request goes to, without a port (any case,
 * one trailing dot allowed).  A sketch of the gateway's use:
 *
 *	on CONNECT host:443	sp_cred_resolve(): 0 -> terminate TLS with
 *				the node CA; "not-found" -> relay as is
 *	per request		sp_cred_use() into a buffer of SP_CRED_OUT_MAX:
 *				0 -> add the header (or the query parameter),
 *				forward, wipe the buffer;
 *				"expired" -> forward without it;
 *				"rate-limited" -> 429, Retry-After
 *				g.retry_after; other errors -> 502
 */
/* The credential the request would carry, without touching its secret,
 * its rate or the audit log.  "not-found", "corrupt" (a metadata file of a
 * scope that takes the sandbox does not read: no guess is made), bad-input. */
int sp_cred_resolve(const char *root, const char *sandbox, const char *tenant,
    const char *project, const char *host, struct sp_cred *out,
    struct sp_err *e);

enum sp_cred_how {
	SP_CRED_HEADER = 1,	/* buf: "Name: value" (no CRLF) */
	SP_CRED_QUERY = 2	/* buf: "param=value", value percent-encoded */
};
struct sp_cred_grant {
	/* Which credential decided (also when expired or rate-limited). */
	char name[SP_NAME_MAX + 1];
	char scope[SP_CRED_SCOPE_MAX + 1];
	int64_t version;
	enum sp_cred_how how;
	size_t key_len;		/* buf[0..key_len): header or parameter */
	size_t value_off;	/* buf + value_off: the value, to len */
	size_t len;		/* strlen(buf) */
	int64_t retry_after;	/* rate-limited: seconds until the next use */
};
/*
 * One use of a credential: resolves it; an expired one is not injected
 * ("expired"); takes one from its rate limit for this sandbox, a token
 * bucket of rate_n tokens refilled over rate_period, shared through a
 * flock'd file by every process ("rate-limited", g->retry_after set);
 * fetches the secret and writes what to inject, NUL-terminated, into buf
 * (n bytes; SP_CRED_OUT_MAX always fits).  Every call, whatever it decides,
 * appends one line to the audit log; when that append fails nothing is
 * granted ("audit", temporary).
 *
 * The secret is in buf only: the caller owns buf and must wipe all of it
 * (sodium_memzero or explicit_bzero) as soon as the request is sent; best
 * lock it in memory too (sodium_mlock).  On -1, buf is already wiped.
 *
 * A secret found gone from its vault (a rotation between resolving and
 * fetching) makes it resolve once more; that is still one use of the rate.
 * Safe to call from several threads and processes at once.  It reads the
 * metadata of the sandbox's four scopes on every call, so its cost grows
 * with the credentials there: about 0.1 ms with a few, 15-20 us more for
 * each (file vault, on this machine).
 */
int sp_cred_use(const char *root, const char *sandbox, const char *tenant,
    const char *project, const char *host, int64_t now,
    struct sp_cred_grant *g, char *buf, size_t n, struct sp_err *e);

/*
 * The audit log: one JSON object per line, at most SP_CRED_AUDIT_LINE_MAX
 * bytes, appended with O_APPEND in a single write so that lines from
 * concurrent processes never mix.  Never a secret.
 *	{"time":n, "op":"use", "sandbox":s, "tenant":s, "project":s,
 *	 "host":s, "cred":s, "scope":s, "version":n,
 *	 "decision":"allowed"|"expired"|"rate-limited"|"not-found"|"error",
 *	 "error":s (when "error"), "retry_after":n (when rate-limited)}
 *	{"time":n, "op":"add"|"rotate"|"rm", "cred":s, "scope":s,
 *	 "version":n, "decision":"done"}
 * Fields that are not known (a sandbox id that is not one, no credential
 * found) are left out.  fn gets each record of time >= since (stolen),
 * oldest first; a line that does not parse is skipped.
 */
int sp_cred_audit_each(const char *root, int64_t since,
    int (*fn)(json_t *rec, void *arg), void *arg, struct sp_err *e);

#endif
