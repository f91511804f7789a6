/*
 * test-cred: the credential store (lib/sp_cred.c) on a temporary root:
 * scope, host, method, rate and secret checks; resolution across the four
 * scopes and wildcards; expiry and rate limits on a fake clock, the rate
 * shared by concurrent processes; rotation; removal; the audit log; that no
 * secret is anywhere under creds/ but sealed; file modes; damaged files;
 * and the cmd: vault with the test secret manager (build/tests/vault-test
 * or $SPACE_VAULT_TEST) and its misbehaving modes.
 * TAP output; exit 1 on any failure.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "sp.h"
#include "sp_cred.h"
#include "tap.h"

#define NOW	((int64_t)1700000000)
#define SBX	"abcdefghijkl"	/* the sandboxes of the tests */
#define SBX2	"bcdefghijklm"
#define SBX3	"cdefghijklmn"
#define AUD	(NOW + 1000000)	/* after every other time of the tests */

static char root[64], vdir[96];
static struct sp_err e;
static struct sp_cred_grant g;
static char out[SP_CRED_OUT_MAX];

/* Every secret the tests hand the store, to look for afterwards. */
#define NSECRETS 64
static const char *secrets[NSECRETS];
static int nsecrets;

static void
reset(void)
{
	memset(&e, 0, sizeof e);
}

static int
is(const char *code)
{
	return strcmp(sp_code_name(e.code), code) == 0;
}

/* Only the tests' marked secrets: "p" is in every file. */
static void
remember(const char *s)
{
	if (strstr(s, "S3CR3T") != NULL && nsecrets < NSECRETS)
		secrets[nsecrets++] = s;
}

/* A form of a secret as it would leak: base64, percent-encoded. */
static void
remember_form(const char *s)
{
	if (nsecrets < NSECRETS)
		secrets[nsecrets++] = s;
}

/* s for a TAP line: control characters and non-ASCII as '?'. */
static const char *
printable(const char *s)
{
	static char buf[2][64];
	static int k;
	char *b = buf[k++ % 2];
	size_t i;

	for (i = 0; s[i] != '\0' && i < sizeof buf[0] - 1; i++)
		b[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	b[i] = '\0';
	return b;
}

static int
add(const char *name, const char *scope, const char *hosts,
    const char *inject, int64_t expires, const char *rate,
    const char *secret, int64_t now)
{
	struct sp_cred_spec s = { name, scope, hosts, inject, expires, rate,
	    NULL };

	reset();
	remember(secret);
	return sp_cred_add(root, &s, secret, strlen(secret), now, NULL, &e);
}

static int
use(const char *sbx, const char *tenant, const char *project,
    const char *host, int64_t now)
{
	reset();
	return sp_cred_use(root, sbx, tenant, project, host, now, &g, out,
	    sizeof out, &e);
}

/* The name of the credential a request would carry, or the error code. */
static const char *
which(const char *sbx, const char *tenant, const char *project,
    const char *host)
{
	static char name[SP_NAME_MAX + SP_CRED_SCOPE_MAX + 2];
	struct sp_cred c;

	reset();
	if (sp_cred_resolve(root, sbx, tenant, project, host, &c, &e) == -1)
		return sp_code_name(e.code);
	snprintf(name, sizeof name, "%s@%s", c.name, c.scope);
	return name;
}

static int
rm(const char *name, const char *scope)
{
	int removed = -1;

	reset();
	if (sp_cred_remove(root, name, scope, NOW, &removed, NULL, &e) == -1)
		return -1;
	return removed;
}

static int
path_exists(const char *fmt, const char *a)
{
	char p[SP_PATH_MAX];

	snprintf(p, sizeof p, fmt, root, a);
	return access(p, F_OK) == 0;
}

/* ---- checks ---- */

static void
test_scope_check(void)
{
	static const char *good[] = { "global", "tenant/acme",
	    "project/acme/web", "project/a.b/c_d-e", "sandbox/" SBX, NULL };
	static const char *bad[] = { "", "Global", "tenant", "tenant/",
	    "tenant/a/b", "tenant/..", "tenant/.x", "tenant/-x", "tenant/a b",
	    "project/acme", "project/acme/", "project//web", "project/a/b/c",
	    "project/../web", "sandbox/ABCDEFGHIJKL", "sandbox/abcdefghijk1",
	    "sandbox/abcdefghijklm", "sandbox/", "global/x", "globalx",
	    "tenant/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	    NULL };
	int i;

	for (i = 0; good[i] != NULL; i++) {
		reset();
		tap_okf(sp_code_name(e.code), e.msg, sp_cred_scope_check(good[i], &e) == 0,
		    "scope '%s' is good", good[i]);
	}
	for (i = 0; bad[i] != NULL; i++) {
		reset();
		tap_okf(sp_code_name(e.code), e.msg, sp_cred_scope_check(bad[i], &e) == -1 &&
		    is("bad-input"), "scope '%.40s' is bad-input", bad[i]);
	}
	reset();
	tap_ok(sp_cred_scope_check(NULL, &e) == -1 && is("bad-input"),
	    "a NULL scope is bad-input");
}

static void
test_host_norm(void)
{
	static const struct {
		const char *in, *out;
		int wild;
	} good[] = {
		{ "api.github.com", "api.github.com", 0 },
		{ "API.GitHub.COM", "api.github.com", 0 },
		{ "example.com.", "example.com", 0 },
		{ "localhost", "localhost", 0 },
		{ "127.0.0.1", "127.0.0.1", 0 },
		{ "a-b.c0", "a-b.c0", 0 },
		{ "*.example.com", "*.example.com", 1 },
		{ "*.Example.Com.", "*.example.com", 1 },
		{ "plain.example.com", "plain.example.com", 1 },
	};
	static const struct {
		const char *in;
		int wild;
	} bad[] = {
		{ "", 1 }, { ".", 1 }, { "a..b", 1 }, { ".a.b", 1 },
		{ "-a.com", 1 }, { "a-.com", 1 }, { "a_b.com", 1 },
		{ "*.com", 1 }, { "*.example.com", 0 }, { "a.*.com", 1 },
		{ "*", 1 }, { "**.a.com", 1 }, { "*a.com", 1 },
		{ "host:443", 1 }, { "exa mple.com", 1 }, { "\xc3\xbc.com", 1 },
		{ "a.com/x", 1 }, { "a.com\n", 1 }, { "[::1]", 1 },
	};
	char h[SP_CRED_HOST_MAX + 1], big[300];
	size_t i;

	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		reset();
		tap_okf(sp_code_name(e.code), e.msg, sp_cred_host_norm(good[i].in,
		    good[i].wild, h, sizeof h, &e) == 0 &&
		    strcmp(h, good[i].out) == 0, "host '%s' is '%s'", good[i].in,
		    good[i].out);
	}
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		reset();
		tap_okf(sp_code_name(e.code), e.msg, sp_cred_host_norm(bad[i].in, bad[i].wild,
		    h, sizeof h, &e) == -1 && is("bad-input"),
		    "host '%s'%s is bad-input", printable(bad[i].in),
		    bad[i].wild ? "" :
		    " (no wildcard)");
	}
	/* A label of 63 is a label; 64 is not. */
	memset(big, 'a', 63);
	strcpy(big + 63, ".com");
	reset();
	tap_ok(sp_cred_host_norm(big, 0, h, sizeof h, &e) == 0,
	    "a label of 63 characters");
	memset(big, 'a', 64);
	strcpy(big + 64, ".com");
	reset();
	tap_ok(sp_cred_host_norm(big, 0, h, sizeof h, &e) == -1,
	    "a label of 64 characters is bad-input");
	/* 253 in all is a name; 254 is not. */
	for (i = 0; i < 253; i++)
		big[i] = i % 2 ? '.' : 'a';
	big[253] = '\0';
	reset();
	tap_ok(sp_cred_host_norm(big, 0, h, sizeof h, &e) == 0,
	    "a name of 253 characters");
	strcpy(big + 253, "a");
	big[252] = 'a';
	reset();
	tap_ok(sp_cred_host_norm(big, 0, h, sizeof h, &e) == -1,
	    "a name of 254 characters is bad-input");
	reset();
	tap_ok(sp_cred_host_norm("a.example.com", 0, h, 5, &e) == -1,
	    "a short output buffer is an error, not an overflow");
}

static void
test_inject_check(void)
{
	static const char *good[] = { "basic", "query:access_token",
	    "query:a-b.c~d", "header:Authorization:Bearer {}",
	    "header:X-Api-Key:{}", "header:Cookie:s={}; theme=dark",
	    "header:Private-Token:token: {}", NULL };
	static const char *bad[] = { "", "Basic", "bearer", "header",
	    "header:Authorization", "header::{}", "header:Authorization:Bearer",
	    "header:Authorization:{}{}", "header:Authorization:{} and {}",
	    "header:Host:{}", "header:content-length:{}",
	    "header:Transfer-Encoding:{}", "header:Connection:{}",
	    "header:TE:{}", "header:X Y:{}", "header:X:a\r\nEvil: {}",
	    "header:X:\t{}", "header:X(y):{}", "query:", "query:a b",
	    "query:a&b", "query:a=b", "cookie:x", NULL };
	char big[SP_CRED_INJECT_MAX + 20];
	int i;

	for (i = 0; good[i] != NULL; i++) {
		reset();
		tap_okf(sp_code_name(e.code), e.msg, sp_cred_inject_check(good[i], &e) == 0,
		    "inject '%s' is good", good[i]);
	}
	for (i = 0; bad[i] != NULL; i++) {
		reset();
		tap_okf(sp_code_name(e.code), e.msg, sp_cred_inject_check(bad[i], &e) == -1 &&
		    is("bad-input"), "inject '%s' is bad-input",
		    printable(bad[i]));
	}
	snprintf(big, sizeof big, "header:X:{}");
	memset(big + 11, 'a', sizeof big - 12);
	big[sizeof big - 1] = '\0';
	reset();
	tap_ok(sp_cred_inject_check(big, &e) == -1 && is("bad-input"),
	    "an inject method over the bound is bad-input");
}

static void
test_rate_parse(void)
{
	static const struct {
		const char *s;
		int64_t n, p;
	} good[] = { { "10/s", 10, 1 }, { "5/m", 5, 60 }, { "100/h", 100, 3600 },
	    { "1/d", 1, 86400 }, { "1000000/s", 1000000, 1 } };
	static const char *bad[] = { "", "0/s", "-1/s", "10", "10/", "10/w",
	    "10/ss", "/s", "1000001/s", "10/S", " 10/s", "10 /s", "1e3/s",
	    "99999999999999999999/s", NULL };
	int64_t n, p;
	size_t i;

	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		reset();
		tap_okf(sp_code_name(e.code), e.msg, sp_cred_rate_parse(good[i].s, &n, &p,
		    &e) == 0 && n == good[i].n && p == good[i].p,
		    "rate '%s' is %lld per %lld s", good[i].s,
		    (long long)good[i].n, (long long)good[i].p);
	}
	for (i = 0; bad[i] != NULL; i++) {
		reset();
		tap_okf(sp_code_name(e.code), e.msg, sp_cred_rate_parse(bad[i], &n, &p, &e) ==
		    -1 && is("bad-input"), "rate '%s' is bad-input", bad[i]);
	}
}

static void
test_secret_check(void)
{
	static const char *hdr = "header:X:{}";
	char big[SP_CRED_SECRET_MAX + 2];

	reset();
	tap_ok(sp_cred_secret_check(hdr, "tok", 3, &e) == 0, "a plain secret");
	reset();
	tap_ok(sp_cred_secret_check(hdr, "t\xc3\xb6k", 4, &e) == 0,
	    "a secret with UTF-8 bytes");
	reset();
	tap_ok(sp_cred_secret_check(hdr, "", 0, &e) == -1 && is("bad-input"),
	    "an empty secret is bad-input");
	reset();
	tap_ok(sp_cred_secret_check(hdr, "a\r\nHost: evil", 13, &e) == -1 &&
	    is("bad-input") && strstr(e.msg, "evil") == NULL,
	    "a secret with CR LF is bad-input, and the message does not "
	    "quote it");
	reset();
	tap_ok(sp_cred_secret_check(hdr, "a\0b", 3, &e) == -1,
	    "a secret with a NUL is bad-input");
	reset();
	tap_ok(sp_cred_secret_check(hdr, "a\x7f", 2, &e) == -1,
	    "a secret with DEL is bad-input");
	reset();
	tap_ok(sp_cred_secret_check(hdr, "a\tb", 3, &e) == -1,
	    "a secret with a tab is bad-input");
	reset();
	tap_ok(sp_cred_secret_check("basic", "nocolon", 7, &e) == -1 &&
	    is("bad-input"), "a basic secret without ':' is bad-input");
	reset();
	tap_ok(sp_cred_secret_check("basic", "user:pa:ss", 10, &e) == 0,
	    "a basic secret USER:PASSWORD");
	memset(big, 'a', sizeof big);
	reset();
	tap_ok(sp_cred_secret_check(hdr, big, SP_CRED_SECRET_MAX, &e) == 0,
	    "a secret of SP_CRED_SECRET_MAX bytes");
	reset();
	tap_ok(sp_cred_secret_check(hdr, big, SP_CRED_SECRET_MAX + 1, &e) == -1,
	    "a secret over SP_CRED_SECRET_MAX is bad-input");
}

static void
test_vault_check(void)
{
	char v[SP_CRED_VAULT_MAX + 1];

	reset();
	tap_ok(sp_cred_vault_check("file", &e) == 0 &&
	    sp_cred_vault_check("cmd:/usr/bin/pass-wrapper", &e) == 0 &&
	    sp_cred_vault_check("cmd:vault-cli", &e) == 0, "vaults file and "
	    "cmd:PROGRAM");
	reset();
	tap_ok(sp_cred_vault_check("cmd:", &e) == -1 &&
	    sp_cred_vault_check("cmd:a b", &e) == -1 &&
	    sp_cred_vault_check("files", &e) == -1 &&
	    sp_cred_vault_check("", &e) == -1 && is("bad-input"),
	    "other vaults are bad-input");
	unsetenv("SPACE_CRED_VAULT");
	reset();
	tap_ok(sp_cred_vault_default(v, &e) == 0 && strcmp(v, "file") == 0,
	    "the default vault is file");
	setenv("SPACE_CRED_VAULT", "s3:x", 1);
	reset();
	tap_ok(sp_cred_vault_default(v, &e) == -1 && is("bad-input") &&
	    strstr(e.msg, "SPACE_CRED_VAULT") != NULL,
	    "a bad SPACE_CRED_VAULT is bad-input, named");
	unsetenv("SPACE_CRED_VAULT");
}

/* ---- the store ---- */

static int
count1(const struct sp_cred *c, const struct sp_err *bad, void *arg)
{
	int *n = arg;

	n[bad == NULL ? 0 : 1]++;
	return 0;
}

static void
test_add(void)
{
	struct sp_cred_spec s = { "gh", "global", "api.github.com",
	    "header:Authorization:Bearer {}", 0, "10/m", NULL };
	struct sp_cred c;
	int n[2] = { 0, 0 };

	reset();
	remember("S3CR3T-add-one");
	tap_okf(sp_code_name(e.code), e.msg, sp_cred_add(root, &s, "S3CR3T-add-one", 14, NOW,
	    &c, &e) == 0, "add a global credential");
	tap_ok(strcmp(c.name, "gh") == 0 && strcmp(c.scope, "global") == 0 &&
	    c.nhosts == 1 && c.version == 1 && c.created == NOW &&
	    c.rotated == NOW && c.rate_n == 10 && c.rate_period == 60 &&
	    c.expires == 0 && strcmp(c.vault, "file") == 0 &&
	    strncmp(c.ref, "gh.", 3) == 0 && strlen(c.ref) == 3 + SP_ID_LEN,
	    "its metadata: version 1, times from the clock given, a REF");
	tap_ok(add("gh", "global", "x.com", "basic", 0, NULL, "u:S3CR3T-dup",
	    NOW) == -1 && is("exists"), "the same name in the same scope: "
	    "exists");
	tap_ok(add("gh", "tenant/acme", "API.GitHub.com,*.GitHubUserContent.com,"
	    "api.github.com", "basic", NOW + 3600, "5/h", "u:S3CR3T-add-two",
	    NOW) == 0, "the same name in another scope: an override");
	reset();
	tap_okf(sp_code_name(e.code), e.msg, sp_cred_get(root, "gh", "tenant/acme", &c,
	    &e) == 0 && c.nhosts == 2 && strcmp(c.hosts[0],
	    "api.github.com") == 0 && strcmp(c.hosts[1],
	    "*.githubusercontent.com") == 0 && c.expires == NOW + 3600,
	    "hosts lowercased, duplicates dropped, expiry kept");
	reset();
	tap_ok(sp_cred_get(root, "gh", NULL, &c, &e) == -1 &&
	    is("bad-input") && strstr(e.msg, "global") != NULL &&
	    strstr(e.msg, "tenant/acme") != NULL,
	    "get without a scope of a name in two: bad-input naming both");
	reset();
	tap_ok(sp_cred_get(root, "nope", NULL, &c, &e) == -1 &&
	    is("not-found"), "get of a name nowhere: not-found");
	reset();
	tap_ok(sp_cred_get(root, "../gh", "global", &c, &e) == -1 &&
	    is("bad-input"), "get of a bad name: bad-input");

	/* Bad input changes nothing. */
	tap_ok(add("bad", "tenant/..", "a.com", "basic", 0, NULL, "u:p", NOW) ==
	    -1 && is("bad-input"), "add: bad scope");
	tap_ok(add("bad", "global", "a.com,,b.com", "basic", 0, NULL, "u:p",
	    NOW) == -1 && is("bad-input"), "add: an empty host in the list");
	tap_ok(add("bad", "global", "", "basic", 0, NULL, "u:p", NOW) == -1 &&
	    is("bad-input"), "add: no host");
	tap_ok(add("bad", "global", "a.com", "header:Host:{}", 0, NULL, "p",
	    NOW) == -1 && is("bad-input"), "add: a framing header");
	tap_ok(add("bad", "global", "a.com", "basic", NOW, NULL, "u:p", NOW) ==
	    -1 && is("bad-input"), "add: expires not after now");
	tap_ok(add("bad", "global", "a.com", "basic", 0, "5/w", "u:p", NOW) ==
	    -1 && is("bad-input"), "add: bad rate");
	tap_ok(add("bad", "global", "a.com", "basic", 0, NULL, "nocolon", NOW) ==
	    -1 && is("bad-input"), "add: a basic secret without a colon");
	tap_ok(add(".bad", "global", "a.com", "basic", 0, NULL, "u:p", NOW) ==
	    -1 && is("bad-input"), "add: bad name");
	tap_ok(add("bad", "global", "a.com,b.com,c.com,d.com,e.com,f.com,"
	    "g.com,h.com,i.com,j.com,k.com,l.com,m.com,n.com,o.com,p.com,q.com",
	    "basic", 0, NULL, "u:p", NOW) == -1 && is("bad-input"),
	    "add: more than 16 hosts");
	s.name = "bad";
	s.vault = "cmd:";
	reset();
	tap_ok(sp_cred_add(root, &s, "p", 1, NOW, NULL, &e) == -1 &&
	    is("bad-input"), "add: a bad vault");
	tap_ok(!path_exists("%s/creds/scopes/global/%s.json", "bad"),
	    "none of the bad adds left metadata");
	reset();
	tap_okf(sp_code_name(e.code), e.msg, sp_cred_each(root, count1, n, &e) == 0 &&
	    n[0] == 2 && n[1] == 0, "each: the two credentials");
	tap_ok(rm("gh", "global") == 1 && rm("gh", "tenant/acme") == 1,
	    "both removed");
}

/* Which credential a sandbox gets: four scopes, wildcards, ties. */
static void
test_resolution(void)
{
	int ok = 1;

	ok &= add("g", "global", "api.example.com", "header:X-Key:{}", 0, NULL,
	    "S3CR3T-res-g", NOW) == 0;
	ok &= add("t", "tenant/acme", "api.example.com", "header:X-Key:{}", 0,
	    NULL, "S3CR3T-res-t", NOW) == 0;
	ok &= add("p", "project/acme/web", "api.example.com", "header:X-Key:{}",
	    0, NULL, "S3CR3T-res-p", NOW) == 0;
	ok &= add("s", "sandbox/" SBX, "api.example.com", "header:X-Key:{}", 0,
	    NULL, "S3CR3T-res-s", NOW) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok, "one credential per scope for one host");
	tap_ok(strcmp(which(SBX, "acme", "web", "api.example.com"),
	    "s@sandbox/" SBX) == 0, "the sandbox's own wins over all");
	tap_ok(strcmp(which(SBX2, "acme", "web", "api.example.com"),
	    "p@project/acme/web") == 0, "another sandbox of the project: "
	    "the project's");
	tap_ok(strcmp(which(SBX2, "acme", "api", "api.example.com"),
	    "t@tenant/acme") == 0, "another project of the tenant: the "
	    "tenant's");
	tap_ok(strcmp(which(SBX2, "acme", NULL, "api.example.com"),
	    "t@tenant/acme") == 0, "no project: the tenant's");
	tap_ok(strcmp(which(SBX2, "globex", "web", "api.example.com"),
	    "g@global") == 0, "another tenant, same project name: global");
	tap_ok(strcmp(which(SBX2, NULL, "web", "api.example.com"),
	    "g@global") == 0, "a project without a tenant takes no project "
	    "scope");
	tap_ok(strcmp(which(SBX2, "", "", "api.example.com"), "g@global") == 0,
	    "empty tenant and project are none");
	tap_ok(strcmp(which(SBX, "globex", NULL, "API.Example.COM."),
	    "s@sandbox/" SBX) == 0, "the host in any case, with a trailing "
	    "dot");
	tap_ok(strcmp(which(SBX, "acme", "web", "example.com"), "not-found") ==
	    0, "another host: not-found");
	tap_ok(strcmp(which(SBX, "acme", "web", "api.example.com:443"),
	    "bad-input") == 0, "a host with a port: bad-input");
	tap_ok(strcmp(which("nope", "acme", "web", "api.example.com"),
	    "bad-input") == 0, "a bad sandbox id: bad-input");
	tap_ok(strcmp(which(SBX, "../x", NULL, "api.example.com"),
	    "bad-input") == 0, "a bad tenant: bad-input");
	tap_ok(strcmp(which(SBX, "acme", "web", "*.example.com"),
	    "bad-input") == 0, "a wildcard is not a host to resolve");

	/* Wildcards, in the tenant's scope. */
	ok = add("wide", "tenant/acme", "*.example.com", "header:X-Key:{}", 0,
	    NULL, "S3CR3T-res-wide", NOW + 50) == 0;
	ok &= add("narrow", "tenant/acme", "*.api.example.com", "header:X-Key:{}",
	    0, NULL, "S3CR3T-res-narrow", NOW) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok, "two wildcards in the tenant's scope");
	tap_ok(strcmp(which(SBX2, "acme", NULL, "api.example.com"),
	    "t@tenant/acme") == 0, "exact beats a wildcard, even a newer one");
	tap_ok(strcmp(which(SBX2, "acme", NULL, "www.example.com"),
	    "wide@tenant/acme") == 0, "a wildcard matches a subdomain");
	tap_ok(strcmp(which(SBX2, "acme", NULL, "a.b.c.example.com"),
	    "wide@tenant/acme") == 0, "a wildcard matches at any depth");
	tap_ok(strcmp(which(SBX2, "acme", NULL, "v1.api.example.com"),
	    "narrow@tenant/acme") == 0, "the longer suffix beats the shorter, "
	    "even an older one");
	tap_ok(strcmp(which(SBX2, "acme", NULL, "notexample.com"),
	    "not-found") == 0, "*.example.com does not match notexample.com");
	tap_ok(strcmp(which(SBX2, "globex", NULL, "www.example.com"),
	    "not-found") == 0, "another tenant does not see them");
	/* Scope before exactness: the project's wildcard beats the global
	 * exact name. */
	ok = add("g2", "global", "www.example.com", "header:X-Key:{}", 0, NULL,
	    "S3CR3T-res-g2", NOW) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok && strcmp(which(SBX2, "acme", NULL,
	    "www.example.com"), "wide@tenant/acme") == 0, "a more specific "
	    "scope's wildcard beats a less specific scope's exact name");
	tap_ok(strcmp(which(SBX2, "globex", NULL, "www.example.com"),
	    "g2@global") == 0, "which the others get");

	/* Ties: the newest, then the first name. */
	ok = add("old", "project/acme/tie", "tie.example.com", "header:X-Key:{}",
	    0, NULL, "S3CR3T-res-old", NOW) == 0;
	ok &= add("new", "project/acme/tie", "tie.example.com",
	    "header:X-Key:{}", 0, NULL, "S3CR3T-res-new", NOW + 10) == 0;
	ok &= add("zzz", "project/acme/tie", "tie.example.com",
	    "header:X-Key:{}", 0, NULL, "S3CR3T-res-zzz", NOW + 10) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok && strcmp(which(SBX2, "acme", "tie",
	    "tie.example.com"), "new@project/acme/tie") == 0, "of two exact "
	    "matches the newest wins; of two as new, the first name");
	tap_ok(rm("new", "project/acme/tie") == 1 && strcmp(which(SBX2, "acme",
	    "tie", "tie.example.com"), "zzz@project/acme/tie") == 0,
	    "with it removed, the next newest");
	rm("old", "project/acme/tie");
	rm("zzz", "project/acme/tie");
	rm("g", "global");
	rm("g2", "global");
	rm("t", "tenant/acme");
	rm("p", "project/acme/web");
	rm("s", "sandbox/" SBX);
	rm("wide", "tenant/acme");
	rm("narrow", "tenant/acme");
}

static void
test_inject(void)
{
	static char b64[64];
	char small[16];

	tap_ok(add("hdr", "global", "h.example.com",
	    "header:Authorization:Bearer {} x", 0, NULL, "S3CR3T-inj-hdr", NOW) ==
	    0 && use(SBX, NULL, NULL, "h.example.com", NOW) == 0 &&
	    strcmp(out, "Authorization: Bearer S3CR3T-inj-hdr x") == 0 &&
	    g.how == SP_CRED_HEADER && g.key_len == 13 && g.value_off == 15 &&
	    g.len == strlen(out) && strcmp(g.name, "hdr") == 0 &&
	    strcmp(g.scope, "global") == 0 && g.version == 1,
	    "header: the line to add, where its name and value are");
	sodium_bin2base64(b64, sizeof b64,
	    (const unsigned char *)"bob:S3CR3T-inj-b:x",
	    18, sodium_base64_VARIANT_ORIGINAL);
	remember_form(b64);
	tap_okf(sp_code_name(e.code), e.msg, add("bas", "global", "b.example.com", "basic", 0,
	    NULL, "bob:S3CR3T-inj-b:x", NOW) == 0 && use(SBX, NULL, NULL,
	    "b.example.com", NOW) == 0 && strncmp(out,
	    "Authorization: Basic ", 21) == 0 && strcmp(out + 21, b64) == 0 &&
	    g.how == SP_CRED_HEADER, "basic: Authorization: Basic base64");
	remember_form("S3CR3T%2Finj%20q%2B%C3%B6~._-");
	tap_okf(sp_code_name(e.code), e.msg, add("qry", "global", "q.example.com",
	    "query:api_key", 0, NULL, "S3CR3T/inj q+\xc3\xb6~._-", NOW) == 0 &&
	    use(SBX, NULL, NULL, "q.example.com", NOW) == 0 &&
	    strcmp(out, "api_key=S3CR3T%2Finj%20q%2B%C3%B6~._-") == 0 &&
	    g.how == SP_CRED_QUERY && g.key_len == 7 && g.value_off == 8,
	    "query: param=percent-encoded secret");
	reset();
	memset(small, 'x', sizeof small);
	tap_ok(sp_cred_use(root, SBX, NULL, NULL, "h.example.com", NOW, &g,
	    small, sizeof small, &e) == -1 && sodium_is_zero(
	    (unsigned char *)small, sizeof small), "a buffer too small: an "
	    "error, and the buffer wiped");
	sodium_memzero(out, sizeof out);
	rm("hdr", "global");
	rm("bas", "global");
	rm("qry", "global");
}

/* The audit records since t, into an array. */
static int
collect(json_t *rec, void *arg)
{
	json_array_append_new(arg, rec);
	return 0;
}

static json_t *
audit_since(int64_t since)
{
	json_t *a = json_array();

	reset();
	if (sp_cred_audit_each(root, since, collect, a, &e) == -1) {
		json_decref(a);
		return NULL;
	}
	return a;
}

/* The last audit record. */
static json_t *
audit_last(void)
{
	static json_t *last;
	json_t *a = audit_since(0);

	json_decref(last);
	last = NULL;
	if (a != NULL && json_array_size(a) > 0)
		last = json_incref(json_array_get(a, json_array_size(a) - 1));
	json_decref(a);
	return last;
}

static const char *
field(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_string(v) ? json_string_value(v) : "";
}

static void
test_expiry(void)
{
	json_t *r;

	tap_ok(add("exp", "global", "e.example.com", "header:X-Key:{}",
	    NOW + 100, NULL, "S3CR3T-exp-1", NOW) == 0, "a credential that "
	    "expires at NOW+100");
	tap_okf(sp_code_name(e.code), e.msg, use(SBX, NULL, NULL, "e.example.com", NOW + 99) ==
	    0 && strcmp(out, "X-Key: S3CR3T-exp-1") == 0, "used at NOW+99");
	tap_ok(use(SBX, NULL, NULL, "e.example.com", NOW + 100) == -1 &&
	    is("expired") && out[0] == '\0' && strcmp(g.name, "exp") == 0,
	    "at NOW+100: expired, nothing to inject, the grant says which");
	r = audit_last();
	tap_ok(r != NULL && strcmp(field(r, "decision"), "expired") == 0 &&
	    strcmp(field(r, "cred"), "exp") == 0 &&
	    json_integer_value(json_object_get(r, "time")) == NOW + 100,
	    "the audit log says expired, at the fake time");
	/* An expired override does not fall back to a broader credential. */
	tap_ok(add("exp", "sandbox/" SBX, "e.example.com", "header:X-Key:{}",
	    NOW + 10, NULL, "S3CR3T-exp-2", NOW) == 0 && add("exp", "global",
	    "e2.example.com", "header:X-Key:{}", 0, NULL, "S3CR3T-exp-3",
	    NOW) == -1 && is("exists"), "a sandbox override that expires "
	    "first");
	tap_ok(use(SBX, NULL, NULL, "e.example.com", NOW + 50) == -1 &&
	    is("expired") && strcmp(g.scope, "sandbox/" SBX) == 0,
	    "the expired override decides: no fall-back to the global one");
	tap_ok(use(SBX2, NULL, NULL, "e.example.com", NOW + 50) == 0,
	    "another sandbox still gets the global one");
	reset();
	remember("S3CR3T-exp-4");
	tap_okf(sp_code_name(e.code), e.msg, sp_cred_rotate(root, "exp", "sandbox/" SBX,
	    "S3CR3T-exp-4", 12, NOW + 1000, NOW + 60, NULL, &e) == 0 &&
	    use(SBX, NULL, NULL, "e.example.com", NOW + 60) == 0 &&
	    strcmp(out, "X-Key: S3CR3T-exp-4") == 0, "rotated with a new "
	    "expiry: used again");
	reset();
	tap_ok(sp_cred_rotate(root, "exp", "sandbox/" SBX, "x", 1, NOW + 60,
	    NOW + 60, NULL, &e) == -1 && is("bad-input"), "rotate with an "
	    "expiry not after now: bad-input");
	sodium_memzero(out, sizeof out);
	rm("exp", "global");
	rm("exp", "sandbox/" SBX);
}

static int
use_n(const char *sbx, int64_t now, int n)
{
	int i, ok = 0;

	for (i = 0; i < n; i++)
		ok += use(sbx, NULL, NULL, "r.example.com", now) == 0;
	return ok;
}

static void
test_rate(void)
{
	int i, kids = 8, per = 10, total = 0, status;
	json_t *r;
	pid_t pid;

	tap_ok(add("rl", "global", "r.example.com", "header:X-Key:{}", 0,
	    "3/m", "S3CR3T-rate", NOW) == 0, "a credential of 3 uses a minute");
	tap_ok(use_n(SBX, NOW, 3) == 3, "3 uses at once: allowed");
	tap_ok(use(SBX, NULL, NULL, "r.example.com", NOW) == -1 &&
	    is("rate-limited") && g.retry_after == 20 && out[0] == '\0',
	    "the 4th: rate-limited, retry after 20 s, nothing to inject");
	r = audit_last();
	tap_ok(r != NULL && strcmp(field(r, "decision"), "rate-limited") == 0 &&
	    json_integer_value(json_object_get(r, "retry_after")) == 20,
	    "audited as rate-limited, with retry_after");
	tap_ok(use(SBX2, NULL, NULL, "r.example.com", NOW) == 0,
	    "another sandbox has a bucket of its own");
	tap_ok(use(SBX, NULL, NULL, "r.example.com", NOW + 19) == -1 &&
	    is("rate-limited") && g.retry_after == 1, "at +19 s: still "
	    "limited, 1 s to go");
	tap_ok(use(SBX, NULL, NULL, "r.example.com", NOW + 20) == 0 &&
	    use(SBX, NULL, NULL, "r.example.com", NOW + 20) == -1,
	    "at +20 s: one token, one use");
	tap_ok(use(SBX, NULL, NULL, "r.example.com", NOW + 10) == -1 &&
	    use(SBX, NULL, NULL, "r.example.com", NOW + 39) == -1 &&
	    use(SBX, NULL, NULL, "r.example.com", NOW + 40) == 0,
	    "a clock that goes back refills nothing and loses nothing");
	tap_ok(use_n(SBX, NOW + 100000, 5) == 3, "after a long idle the "
	    "bucket is full, not fuller: 3 of 5");

	/* Processes share the bucket through the file and its lock. */
	tap_ok(add("rl2", "global", "r2.example.com", "header:X-Key:{}", 0,
	    "25/h", "S3CR3T-rate2", NOW) == 0, "a credential of 25 an hour");
	fflush(stdout);
	for (i = 0; i < kids; i++) {
		if ((pid = fork()) == 0) {
			int j, ok = 0;

			for (j = 0; j < per; j++)
				ok += sp_cred_use(root, SBX3, NULL, NULL,
				    "r2.example.com", NOW, &g, out, sizeof out,
				    &e) == 0;
			_exit(ok);
		}
	}
	while ((pid = wait(&status)) > 0)
		if (WIFEXITED(status))
			total += WEXITSTATUS(status);
	tap_okf("", "", total == 25, "%d processes x %d uses at once: %d "
	    "allowed, exactly the 25", kids, per, total);
	sodium_memzero(out, sizeof out);
	tap_ok(path_exists("%s/creds/rate/global+rl/%s", SBX),
	    "the bucket lives in creds/rate/global+rl/ID");
	rm("rl", "global");
	tap_ok(!path_exists("%s/creds/rate/%s", "global+rl"), "rm takes the "
	    "rate state with it");
	rm("rl2", "global");
}

/* Seconds of the audit records of op "use" for credential name. */
static int
audit_uses(const char *name, const char *decision)
{
	json_t *a = audit_since(0), *r;
	size_t i;
	int n = 0;

	json_array_foreach(a, i, r)
		if (strcmp(field(r, "op"), "use") == 0 && strcmp(field(r,
		    "cred"), name) == 0 && strcmp(field(r, "decision"),
		    decision) == 0)
			n++;
	json_decref(a);
	return n;
}

static void
test_rotation(void)
{
	struct sp_cred c;
	char old[SP_CRED_REF_MAX + 1];

	tap_ok(add("rot", "tenant/acme", "rot.example.com", "header:X-Key:{}",
	    0, "2/h", "S3CR3T-rot-1", NOW) == 0 && use(SBX, "acme", NULL,
	    "rot.example.com", NOW) == 0 && strcmp(out, "X-Key: S3CR3T-rot-1") ==
	    0, "a credential, used");
	reset();
	sp_cred_get(root, "rot", NULL, &c, &e);
	snprintf(old, sizeof old, "%s", c.ref);
	reset();
	remember("S3CR3T-rot-2");
	tap_okf(sp_code_name(e.code), e.msg, sp_cred_rotate(root, "rot", NULL, "S3CR3T-rot-2",
	    12, 0, NOW + 5, &c, &e) == 0 && c.version == 2 &&
	    c.rotated == NOW + 5 && c.created == NOW && strcmp(c.ref, old) != 0,
	    "rotated: version 2, rotated now, created kept, a new REF");
	tap_ok(!path_exists("%s/creds/vault/%s", old) &&
	    path_exists("%s/creds/vault/%s", c.ref),
	    "the old secret is gone from the vault, the new one is there");
	tap_ok(use(SBX, "acme", NULL, "rot.example.com", NOW + 5) == 0 &&
	    strcmp(out, "X-Key: S3CR3T-rot-2") == 0 && g.version == 2,
	    "the next use injects the new secret, version 2");
	tap_ok(use(SBX, "acme", NULL, "rot.example.com", NOW + 5) == -1 &&
	    is("rate-limited"), "the rate bucket went on through the rotation");
	reset();
	tap_ok(sp_cred_rotate(root, "rot", "tenant/acme", "a\nb", 3, 0, NOW, NULL,
	    &e) == -1 && is("bad-input"), "rotate to a bad secret: bad-input");
	reset();
	tap_ok(sp_cred_get(root, "rot", NULL, &c, &e) == 0 && c.version == 2,
	    "and the version is unchanged");
	reset();
	tap_ok(sp_cred_rotate(root, "nope", NULL, "x", 1, 0, NOW, NULL, &e) ==
	    -1 && is("not-found"), "rotate of nothing: not-found");
	tap_ok(audit_uses("rot", "allowed") == 2 &&
	    audit_uses("rot", "rate-limited") == 1, "the uses audited");
	sodium_memzero(out, sizeof out);
	rm("rot", NULL);
}

static void
test_remove(void)
{
	struct sp_cred c;
	char ref[SP_CRED_REF_MAX + 1];

	tap_ok(add("gone", "sandbox/" SBX, "g.example.com", "header:X-Key:{}",
	    0, "5/m", "S3CR3T-rm", NOW) == 0 && use(SBX, NULL, NULL,
	    "g.example.com", NOW) == 0, "a sandbox's credential, used");
	reset();
	sp_cred_get(root, "gone", NULL, &c, &e);
	snprintf(ref, sizeof ref, "%s", c.ref);
	tap_ok(rm("gone", NULL) == 1, "removed, found without a scope");
	tap_ok(!path_exists("%s/creds/vault/%s", ref) &&
	    !path_exists("%s/creds/scopes/sandbox/%s", SBX) &&
	    !path_exists("%s/creds/rate/sandbox+%s+gone", SBX),
	    "its secret, metadata, empty scope directory and rate state gone");
	tap_ok(rm("gone", NULL) == 0 && rm("gone", "sandbox/" SBX) == 0,
	    "removing it again: nothing removed, not an error");
	tap_ok(rm("gone", "sandbox/x") == -1 && is("bad-input"),
	    "rm with a bad scope: bad-input");
	tap_ok(use(SBX, NULL, NULL, "g.example.com", NOW) == -1 &&
	    is("not-found"), "its use: not-found");
	sodium_memzero(out, sizeof out);
}

static void
test_audit(void)
{
	json_t *a, *r;
	int ok = 1, since;

	tap_ok(add("aud", "global", "a.example.com", "header:X-Key:{}", 0, NULL,
	    "S3CR3T-aud", AUD) == 0, "a credential for the audit");
	use(SBX, "acme", "web", "a.example.com", AUD + 1);
	use(SBX, NULL, NULL, "unknown.example.com", AUD + 2);
	use("NOTANID", NULL, NULL, "a.example.com", AUD + 3);
	use(SBX, NULL, NULL, "evil\nhost", AUD + 4);
	sodium_memzero(out, sizeof out);
	a = audit_since(AUD);
	tap_okf(sp_code_name(e.code), e.msg, a != NULL && json_array_size(a) == 5,
	    "since: the 5 records from AUD on, none before");
	r = json_array_get(a, 0);
	tap_ok(strcmp(field(r, "op"), "add") == 0 && strcmp(field(r, "cred"),
	    "aud") == 0 && strcmp(field(r, "decision"), "done") == 0,
	    "the add");
	r = json_array_get(a, 1);
	tap_ok(strcmp(field(r, "op"), "use") == 0 &&
	    strcmp(field(r, "sandbox"), SBX) == 0 &&
	    strcmp(field(r, "tenant"), "acme") == 0 &&
	    strcmp(field(r, "project"), "web") == 0 &&
	    strcmp(field(r, "host"), "a.example.com") == 0 &&
	    strcmp(field(r, "cred"), "aud") == 0 &&
	    strcmp(field(r, "scope"), "global") == 0 &&
	    json_integer_value(json_object_get(r, "version")) == 1 &&
	    strcmp(field(r, "decision"), "allowed") == 0 &&
	    json_integer_value(json_object_get(r, "time")) == AUD + 1,
	    "an allowed use: time, sandbox, tenant, project, host, credential, "
	    "scope, version, decision");
	r = json_array_get(a, 2);
	tap_ok(strcmp(field(r, "decision"), "not-found") == 0 &&
	    strcmp(field(r, "host"), "unknown.example.com") == 0 &&
	    json_object_get(r, "cred") == NULL, "a use of nothing: not-found, "
	    "no credential");
	r = json_array_get(a, 3);
	tap_ok(strcmp(field(r, "decision"), "error") == 0 &&
	    strcmp(field(r, "error"), "bad-input") == 0 &&
	    json_object_get(r, "sandbox") == NULL, "a bad sandbox id: "
	    "audited as an error, the id left out");
	r = json_array_get(a, 4);
	tap_ok(strcmp(field(r, "decision"), "error") == 0 &&
	    strcmp(field(r, "sandbox"), SBX) == 0 &&
	    json_object_get(r, "host") == NULL, "a bad host: audited, the "
	    "host left out");
	json_decref(a);
	/* Every line of the file is whole, bounded and parses. */
	{
		char p[SP_PATH_MAX], line[4096];
		FILE *f;

		snprintf(p, sizeof p, "%s/creds/audit.log", root);
		since = 0;
		if ((f = fopen(p, "r")) == NULL)
			ok = 0;
		while (f != NULL && fgets(line, sizeof line, f) != NULL) {
			json_t *j = json_loads(line, 0, NULL);

			since++;
			if (strlen(line) > SP_CRED_AUDIT_LINE_MAX ||
			    line[strlen(line) - 1] != '\n' || !json_is_object(j))
				ok = 0;
			json_decref(j);
		}
		if (f != NULL)
			fclose(f);
		tap_okf("", "", ok && since > 20, "all %d audit lines are whole "
		    "JSON objects under %d bytes", since,
		    SP_CRED_AUDIT_LINE_MAX);
	}
	/* A foreign line over the bound, and garbage, are skipped. */
	{
		char p[SP_PATH_MAX], big[3000];
		int fd;

		snprintf(p, sizeof p, "%s/creds/audit.log", root);
		memset(big, 'x', sizeof big);
		big[sizeof big - 1] = '\n';
		fd = open(p, O_WRONLY | O_APPEND);
		ok = fd != -1 && write(fd, big, sizeof big) == sizeof big &&
		    write(fd, "not json\n", 9) == 9;
		if (fd != -1)
			close(fd);
		use(SBX, NULL, NULL, "a.example.com", AUD + 100);
		sodium_memzero(out, sizeof out);
		a = audit_since(AUD + 100);
		tap_ok(ok && a != NULL && json_array_size(a) == 1,
		    "an oversize line and garbage are skipped, the next line "
		    "read");
		json_decref(a);
	}
	rm("aud", "global");
}

/* ---- secrecy and modes ---- */

static int leaks, badmode, files;

static int
scan1(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	static char buf[1 << 20];
	ssize_t n;
	int fd, i;

	if (flag == FTW_D || flag == FTW_DP) {
		if ((st->st_mode & 0777) != 0700) {
			printf("# directory %s has mode %o\n", path,
			    st->st_mode & 0777);
			badmode++;
		}
		return 0;
	}
	if (flag != FTW_F)
		return 0;
	files++;
	if ((st->st_mode & 0777) != 0600) {
		printf("# file %s has mode %o\n", path, st->st_mode & 0777);
		badmode++;
	}
	if ((fd = open(path, O_RDONLY)) == -1)
		return 0;
	n = read(fd, buf, sizeof buf);
	close(fd);
	for (i = 0; n > 0 && i < nsecrets; i++)
		if (memmem(buf, n, secrets[i], strlen(secrets[i])) != NULL) {
			printf("# %s holds secret %d\n", path, i);
			leaks++;
		}
	return 0;
}

static void
scan(const char *when)
{
	char p[SP_PATH_MAX];

	leaks = badmode = files = 0;
	snprintf(p, sizeof p, "%s/creds", root);
	nftw(p, scan1, 16, FTW_PHYS);
	tap_okf("", "", files > 3 && leaks == 0, "%s: no secret (of %d, plain, "
	    "base64 or percent-encoded) in any of the %d files under creds/",
	    when, nsecrets, files);
	tap_okf("", "", badmode == 0, "%s: every directory under creds/ is "
	    "0700, every file 0600", when);
}

/* Credentials of every method and scope, live and used, then the scan. */
static void
test_secrecy(void)
{
	static char b64[64];
	int ok;

	sodium_bin2base64(b64, sizeof b64,
	    (const unsigned char *)"bob:S3CR3T-sec-b", 16,
	    sodium_base64_VARIANT_ORIGINAL);
	remember_form(b64);
	remember_form("S3CR3T-sec-q%2B");
	ok = add("sec-h", "global", "s.example.com", "header:X-Key:{}",
	    NOW + 10000, "100/m", "S3CR3T-sec-h", NOW) == 0;
	ok &= add("sec-b", "tenant/acme", "s.example.com", "basic", 0, "5/s",
	    "bob:S3CR3T-sec-b", NOW) == 0;
	ok &= add("sec-q", "project/acme/web", "s.example.com", "query:k", 0,
	    "9/d", "S3CR3T-sec-q+", NOW) == 0;
	ok &= add("sec-s", "sandbox/" SBX, "*.example.org", "header:X-Key:{}",
	    0, "1/h", "S3CR3T-sec-s", NOW) == 0;
	ok &= use(SBX2, NULL, NULL, "s.example.com", NOW) == 0;
	ok &= use(SBX2, "acme", NULL, "s.example.com", NOW) == 0;
	ok &= use(SBX2, "acme", "web", "s.example.com", NOW) == 0;
	ok &= use(SBX, NULL, NULL, "w.example.org", NOW) == 0;
	sodium_memzero(out, sizeof out);
	tap_okf(sp_code_name(e.code), e.msg, ok, "live credentials of every method and "
	    "scope, each used");
	scan("live");
	/* The scan itself finds what it looks for. */
	{
		char p[SP_PATH_MAX];
		int fd;

		snprintf(p, sizeof p, "%s/creds/planted", root);
		fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
		if (fd == -1 || write(fd, b64, strlen(b64)) < 0)
			abort();
		close(fd);
		leaks = 0;
		nftw(p, scan1, 16, FTW_PHYS);
		tap_ok(leaks == 1, "a planted base64 form of a secret is found");
		unlink(p);
	}
	reset();
	remember("S3CR3T-sec-h2");
	tap_okf(sp_code_name(e.code), e.msg, sp_cred_rotate(root, "sec-h", NULL,
	    "S3CR3T-sec-h2", 13, 0, NOW, NULL, &e) == 0, "one rotated");
	scan("rotated");
}

static void
test_vault_key(void)
{
	char p[SP_PATH_MAX], q[SP_PATH_MAX + 8];
	struct stat st;
	struct sp_cred c;

	snprintf(p, sizeof p, "%s/creds/vault.key", root);
	tap_ok(add("vk", "global", "vk.example.com", "header:X-Key:{}", 0,
	    NULL, "S3CR3T-vk", NOW) == 0 && stat(p, &st) == 0 &&
	    (st.st_mode & 0777) == 0600 && st.st_size == 32 &&
	    st.st_uid == geteuid(), "the vault key: 32 bytes, 0600, ours");
	chmod(p, 0640);
	tap_ok(use(SBX, NULL, NULL, "vk.example.com", NOW) == -1 &&
	    is("vault") && strstr(e.msg, "0600") != NULL, "a vault key others "
	    "may read is refused");
	chmod(p, 0600);
	snprintf(q, sizeof q, "%s.away", p);
	rename(p, q);
	tap_ok(use(SBX, NULL, NULL, "vk.example.com", NOW) == -1 &&
	    is("vault") && !e.temp, "no vault key: vault");
	rename(q, p);
	tap_ok(use(SBX, NULL, NULL, "vk.example.com", NOW) == 0,
	    "the key back: used again");
	sodium_memzero(out, sizeof out);

	/* A sealed secret under another REF does not open as it. */
	reset();
	sp_cred_get(root, "vk", "global", &c, &e);
	tap_ok(add("vk2", "global", "vk2.example.com", "header:X-Key:{}", 0,
	    NULL, "S3CR3T-vk2", NOW) == 0, "a second credential");
	snprintf(p, sizeof p, "%s/creds/vault/%s", root, c.ref);
	reset();
	sp_cred_get(root, "vk2", "global", &c, &e);
	snprintf(q, sizeof q, "%s/creds/vault/%s", root, c.ref);
	tap_ok(rename(p, q) == 0 && use(SBX, NULL, NULL, "vk2.example.com",
	    NOW) == -1 && is("corrupt") && out[0] == '\0', "vk's sealed "
	    "secret put in vk2's place: corrupt, nothing injected");
	tap_ok(rm("vk", "global") == 1 && rm("vk2", "global") == 1,
	    "both removed all the same");
}

static int
each_bad(const struct sp_cred *c, const struct sp_err *bad, void *arg)
{
	if (bad != NULL && bad->code == SP_E_CORRUPT)
		(*(int *)arg)++;
	return 0;
}

static void
test_damaged_meta(void)
{
	static const char *bodies[] = { "{", "[]", "{\"name\":\"dm\"}",
	    "{\"name\":\"dm\",\"scope\":\"global\",\"hosts\":[\"d.example.com\"],"
	    "\"inject\":\"header:Host:{}\",\"expires\":null,\"rate\":null,"
	    "\"created\":1,\"rotated\":1,\"version\":1,\"vault\":\"file\","
	    "\"ref\":\"dm.abcdefghijkl\"}",
	    "{\"name\":\"dm\",\"scope\":\"global\",\"hosts\":[\"d.example.com\"],"
	    "\"inject\":\"basic\",\"expires\":null,\"rate\":null,"
	    "\"created\":1,\"rotated\":1,\"version\":1,\"vault\":\"file\","
	    "\"ref\":\"dm.abcdefghijkl\",\"secret\":\"x\"}",
	    "{\"name\":\"other\",\"scope\":\"global\",\"hosts\":[\"d.example.com\"],"
	    "\"inject\":\"basic\",\"expires\":null,\"rate\":null,"
	    "\"created\":1,\"rotated\":1,\"version\":1,\"vault\":\"file\","
	    "\"ref\":\"other.abcdefghijkl\"}",
	    "{\"name\":\"dm\",\"scope\":\"global\",\"hosts\":[\"D.example.com\"],"
	    "\"inject\":\"basic\",\"expires\":null,\"rate\":null,"
	    "\"created\":1,\"rotated\":1,\"version\":1,\"vault\":\"file\","
	    "\"ref\":\"dm.abcdefghijkl\"}",
	    NULL };
	char p[SP_PATH_MAX];
	int i, fd, n;

	tap_ok(add("dm", "global", "d.example.com", "basic", 0, NULL,
	    "u:S3CR3T-dm", NOW) == 0, "a credential to damage");
	snprintf(p, sizeof p, "%s/creds/scopes/global/dm.json", root);
	for (i = 0; bodies[i] != NULL; i++) {
		fd = open(p, O_WRONLY | O_TRUNC);
		if (fd == -1 || write(fd, bodies[i], strlen(bodies[i])) < 0)
			abort();
		close(fd);
		tap_okf(sp_code_name(e.code), e.msg, strcmp(which(SBX, NULL, NULL,
		    "d.example.com"), "corrupt") == 0, "metadata '%.60s': "
		    "resolution says corrupt, makes no guess", bodies[i]);
	}
	n = 0;
	reset();
	tap_ok(sp_cred_each(root, each_bad, &n, &e) == 0 && n == 1,
	    "each reports it as bad and goes on");
	reset();
	tap_ok(rm("dm", "global") == -1 && is("corrupt"), "rm of damaged "
	    "metadata: corrupt (the secret's REF is unknown)");
	unlink(p);
}

/* ---- the cmd: vault ---- */

static int
file_has(const char *path, const char *needle)
{
	static char buf[1 << 20];
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY)) == -1)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	return n > 0 && memmem(buf, n, needle, strlen(needle)) != NULL;
}

static int
fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d != NULL && readdir(d) != NULL)
		n++;
	if (d != NULL)
		closedir(d);
	return n;
}

static void
test_cmd_vault(const char *prog)
{
	char v[SP_PATH_MAX + 8], p[SP_PATH_MAX], calls[SP_PATH_MAX];
	struct sp_cred c;
	int64_t t0;
	int fds = fd_count();

	snprintf(v, sizeof v, "cmd:%s", prog);
	setenv("SPACE_CRED_VAULT", v, 1);
	setenv("VAULT_TEST_DIR", vdir, 1);
	snprintf(calls, sizeof calls, "%s/calls.log", vdir);
	tap_okf(sp_code_name(e.code), e.msg, add("cv", "global", "cv.example.com",
	    "header:X-Key:{}", 0, NULL, "S3CR3T-cmd-1", NOW) == 0, "add with "
	    "the cmd: vault");
	reset();
	sp_cred_get(root, "cv", "global", &c, &e);
	snprintf(p, sizeof p, "%s/%s", vdir, c.ref);
	tap_ok(strcmp(c.vault, v) == 0 && file_has(p, "S3CR3T-cmd-1"),
	    "the metadata names the program; put gave it the secret");
	tap_ok(!path_exists("%s/creds/vault/%s", c.ref),
	    "nothing in the file vault");
	tap_okf(sp_code_name(e.code), e.msg, use(SBX, NULL, NULL, "cv.example.com", NOW) ==
	    0 && strcmp(out, "X-Key: S3CR3T-cmd-1") == 0, "use: the secret "
	    "from get, its newline cut");
	unsetenv("SPACE_CRED_VAULT");
	tap_ok(use(SBX, NULL, NULL, "cv.example.com", NOW) == 0,
	    "the vault is the one recorded, whatever SPACE_CRED_VAULT says now");
	reset();
	remember("S3CR3T-cmd-2");
	tap_okf(sp_code_name(e.code), e.msg, sp_cred_rotate(root, "cv", "global",
	    "S3CR3T-cmd-2", 12, 0, NOW, NULL, &e) == 0 && !file_has(p,
	    "S3CR3T-cmd-1") && access(p, F_OK) != 0, "rotate: put the new, "
	    "rm the old");
	tap_ok(use(SBX, NULL, NULL, "cv.example.com", NOW) == 0 &&
	    strcmp(out, "X-Key: S3CR3T-cmd-2") == 0, "use: the new secret");
	tap_ok(file_has(calls, "argv: ") && !file_has(calls, "S3CR3T-cmd"),
	    "the program's argv and environment never held a secret");

	/* Misbehaving programs: every one an error, nothing injected. */
	setenv("VAULT_TEST_MODE", "fail", 1);
	tap_ok(use(SBX, NULL, NULL, "cv.example.com", NOW) == -1 &&
	    is("vault") && e.temp && strstr(e.msg, "told to fail") != NULL &&
	    out[0] == '\0', "it exits 1: vault (temporary), its stderr in "
	    "the message");
	setenv("VAULT_TEST_MODE", "signal", 1);
	tap_ok(use(SBX, NULL, NULL, "cv.example.com", NOW) == -1 &&
	    is("vault") && strstr(e.msg, "signal") != NULL, "it is killed: "
	    "vault");
	setenv("VAULT_TEST_MODE", "flood", 1);
	tap_ok(use(SBX, NULL, NULL, "cv.example.com", NOW) == -1 &&
	    is("vault") && out[0] == '\0', "it prints 1 MiB: vault, the "
	    "read bounded");
	setenv("VAULT_TEST_MODE", "ctrl", 1);
	tap_ok(use(SBX, NULL, NULL, "cv.example.com", NOW) == -1 &&
	    is("vault") && strstr(e.msg, "control") != NULL, "it answers a "
	    "secret with an escape: vault, not injected");
	setenv("VAULT_TEST_MODE", "hang", 1);
	setenv("SPACE_CRED_VAULT_TIMEOUT_MS", "300", 1);
	t0 = sp_clock_ms();
	tap_ok(use(SBX, NULL, NULL, "cv.example.com", NOW) == -1 &&
	    is("timed-out") && e.temp && sp_clock_ms() - t0 < 3000,
	    "it hangs, a child holding its stdout: timed-out within the "
	    "timeout, its group killed");
	setenv("SPACE_CRED_VAULT_TIMEOUT_MS", "0", 1);
	tap_ok(use(SBX, NULL, NULL, "cv.example.com", NOW) == -1 &&
	    is("bad-input"), "SPACE_CRED_VAULT_TIMEOUT_MS=0: bad-input");
	unsetenv("SPACE_CRED_VAULT_TIMEOUT_MS");
	unsetenv("VAULT_TEST_MODE");
	tap_ok(audit_uses("cv", "error") == 6, "each failure audited as an "
	    "error");
	/* A secret gone between resolving and fetching (a rotation): one
	 * second look, and one token for the use. */
	setenv("SPACE_CRED_VAULT", v, 1);
	tap_okf(sp_code_name(e.code), e.msg, add("race", "global", "race.example.com",
	    "header:X-Key:{}", 0, "2/h", "S3CR3T-race", NOW) == 0,
	    "a credential of 2 uses an hour in the cmd: vault");
	unsetenv("SPACE_CRED_VAULT");
	setenv("VAULT_TEST_MODE", "once-missing", 1);
	tap_okf(sp_code_name(e.code), e.msg, use(SBX, NULL, NULL, "race.example.com", NOW) ==
	    0 && strcmp(out, "X-Key: S3CR3T-race") == 0, "the first get says "
	    "missing: looked up again, injected");
	tap_ok(use(SBX, NULL, NULL, "race.example.com", NOW) == 0 &&
	    use(SBX, NULL, NULL, "race.example.com", NOW) == -1 &&
	    is("rate-limited"), "that use took one token, not two");
	unsetenv("VAULT_TEST_MODE");
	rm("race", "global");
	/* The secret gone from the program: not-found after one retry. */
	unlink(p);
	reset();
	sp_cred_get(root, "cv", "global", &c, &e);
	snprintf(p, sizeof p, "%s/%s", vdir, c.ref);
	unlink(p);
	tap_ok(use(SBX, NULL, NULL, "cv.example.com", NOW) == -1 &&
	    is("vault") && strstr(e.msg, "missing") != NULL, "a secret the "
	    "program lost: vault, it is missing");
	tap_ok(rm("cv", "global") == 1, "rm: the program's rm of a missing "
	    "secret is done");
	setenv("SPACE_CRED_VAULT", "cmd:/nonexistent/vault", 1);
	tap_ok(add("cv", "global", "cv.example.com", "header:X-Key:{}", 0,
	    NULL, "S3CR3T-cmd-3", NOW) == -1 && is("vault") &&
	    !path_exists("%s/creds/scopes/global/%s.json", "cv"),
	    "a program that does not run: vault, nothing added");
	unsetenv("SPACE_CRED_VAULT");
	tap_ok(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD,
	    "no child left behind");
	tap_ok(fd_count() == fds, "no descriptor left open");
	sodium_memzero(out, sizeof out);
}

int
main(void)
{
	const char *prog = getenv("SPACE_VAULT_TEST");
	char abs[SP_PATH_MAX];

	snprintf(root, sizeof root, "/tmp/sp-cred-XXXXXX");
	if (mkdtemp(root) == NULL || sodium_init() < 0)
		abort();
	snprintf(vdir, sizeof vdir, "%s-vault", root);
	if (mkdir(vdir, 0700) == -1)
		abort();
	unsetenv("SPACE_CRED_VAULT");
	test_scope_check();
	test_host_norm();
	test_inject_check();
	test_rate_parse();
	test_secret_check();
	test_vault_check();
	test_add();
	test_resolution();
	test_inject();
	test_expiry();
	test_rate();
	test_rotation();
	test_remove();
	test_audit();
	test_vault_key();
	test_damaged_meta();
	if (prog == NULL || *prog == '\0')
		prog = "build/tests/vault-test";
	if (tap_ok(realpath(prog, abs) != NULL && access(abs, X_OK) == 0,
	    "the test vault program is built (build/tests/vault-test, or "
	    "SPACE_VAULT_TEST)"))
		test_cmd_vault(abs);
	test_secrecy();
	scan("at the end");
	sp_path_remove_tree(root, &e);
	sp_path_remove_tree(vdir, &e);
	return tap_done();
}
