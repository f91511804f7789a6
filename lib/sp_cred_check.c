/*
 * sp_cred_check: the checks of what a credential is made of (its scope,
 * hosts, injection, rate, secret, vault), all of it input from an operator
 * or a client, and the parsing of host lists.
 */
#include <sys/file.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <sodium.h>

#include "sp_net.h"
#include "sp_cred_int.h"

/* ---- checks ---- */

/* A short, printable prefix of hostile input, for messages. */
static const char *
quote(const char *s, char out[48])
{
	size_t i;

	for (i = 0; s != NULL && s[i] != '\0' && i < 40; i++)
		out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	if (s != NULL && s[i] != '\0' && i == 40) {
		memcpy(out + i, "...", 3);
		i += 3;
	}
	out[i] = '\0';
	return out;
}

int
sp_cred_scope_check(const char *scope, struct sp_err *e)
{
	char buf[SP_CRED_SCOPE_MAX + 1], q[48], *a, *b;

	if (scope == NULL || strnlen(scope, sizeof buf) == sizeof buf)
		goto bad;
	strcpy(buf, scope);
	if (strcmp(buf, "global") == 0)
		return 0;
	if (strncmp(buf, "tenant/", 7) == 0 && strchr(buf + 7, '/') == NULL)
		return sp_name_check("tenant", buf + 7, e);
	if (strncmp(buf, "project/", 8) == 0) {
		a = buf + 8;
		if ((b = strchr(a, '/')) == NULL)
			goto bad;
		*b++ = '\0';
		if (strchr(b, '/') != NULL)
			goto bad;
		if (sp_name_check("tenant", a, e) == -1 ||
		    sp_name_check("project", b, e) == -1)
			return -1;
		return 0;
	}
	if (strncmp(buf, "sandbox/", 8) == 0)
		return sp_id_check(buf + 8, e);
bad:
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "scope '%s' is not global, "
	    "tenant/T, project/T/P or sandbox/ID", quote(scope, q));
}

/* Dot-separated labels of 1..63 of [a-z0-9-], none starting or ending
 * with '-'; *labels gets their count. */
static int
dns_ok(const char *s, int *labels)
{
	size_t len = 0;
	const char *p;

	*labels = 1;
	for (p = s;; p++) {
		if (*p == '.' || *p == '\0') {
			if (len == 0 || len > 63 || p[-1] == '-' ||
			    p[-(ptrdiff_t)len] == '-')
				return 0;
			if (*p == '\0')
				return 1;
			(*labels)++;
			len = 0;
			continue;
		}
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		    *p == '-'))
			return 0;
		len++;
	}
}

int
sp_cred_host_norm(const char *host, int wildcard, char *out, size_t n,
    struct sp_err *e)
{
	char buf[SP_CRED_HOST_MAX + 2], q[48];
	size_t len, i;
	int labels, star;

	len = host == NULL ? 0 : strnlen(host, sizeof buf);
	if (len > 0 && host[len - 1] == '.')
		len--;		/* the root label of a fully qualified name */
	if (len == 0 || len > SP_CRED_HOST_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "host '%s' must be 1 to "
		    "%d characters", quote(host, q), SP_CRED_HOST_MAX);
	for (i = 0; i < len; i++)
		buf[i] = host[i] >= 'A' && host[i] <= 'Z' ? host[i] + 32 :
		    host[i];
	buf[len] = '\0';
	star = strncmp(buf, "*.", 2) == 0;
	if (star && !wildcard)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "host '%s': a wildcard "
		    "is not a host", quote(host, q));
	if (!dns_ok(buf + 2 * star, &labels))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "host '%s' is not a DNS "
		    "name%s (labels of 1 to 63 letters, digits or '-')",
		    quote(host, q), wildcard ? " or *.SUFFIX" : "");
	if (star && labels < 2)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "host '%s': a wildcard's "
		    "suffix has two labels or more", quote(host, q));
	if (len + 1 > n)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "no room for host '%s'",
		    quote(host, q));
	memcpy(out, buf, len + 1);
	return 0;
}

/* An HTTP token (RFC 9110 tchar), 1..64 bytes. */
static int
token_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > 64)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' &&
		    s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		    strchr("!#$%&'*+-.^_`|~", s[i]) != NULL))
			return 0;
	return 1;
}

/* Headers that frame or route the message: a credential must not be able
 * to smuggle a second request or redirect one. */
static int
header_framing(const char *s, size_t n)
{
	static const char *const framing[] = { "host", "content-length",
	    "transfer-encoding", "connection", "upgrade", "te", "trailer",
	    "keep-alive", "proxy-connection", NULL };
	int i;

	for (i = 0; framing[i] != NULL; i++)
		if (strlen(framing[i]) == n && strncasecmp(s, framing[i], n) == 0)
			return 1;
	return 0;
}

int
sp_cred_inject_check(const char *inject, struct sp_err *e)
{
	const char *name, *colon, *fmt, *hole, *p;
	size_t len;
	char q[48];

	len = inject == NULL ? 0 : strnlen(inject, SP_CRED_INJECT_MAX + 1);
	if (len == 0 || len > SP_CRED_INJECT_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "inject method must be 1 "
		    "to %d characters", SP_CRED_INJECT_MAX);
	if (strcmp(inject, "basic") == 0)
		return 0;
	if (strncmp(inject, "query:", 6) == 0) {
		for (p = inject + 6; *p != '\0'; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' &&
			    *p <= 'Z') || (*p >= '0' && *p <= '9') ||
			    strchr("-._~", *p) != NULL))
				break;
		if (*p != '\0' || p == inject + 6 || p - (inject + 6) > 64)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "inject '%s': "
			    "PARAM is 1 to 64 of A-Z a-z 0-9 - . _ ~",
			    quote(inject, q));
		return 0;
	}
	if (strncmp(inject, "header:", 7) != 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "inject '%s' is not "
		    "header:NAME:FORMAT, basic or query:PARAM", quote(inject, q));
	name = inject + 7;
	if ((colon = strchr(name, ':')) == NULL ||
	    !token_ok(name, colon - name))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "inject '%s': NAME is an "
		    "HTTP header name, then ':FORMAT'", quote(inject, q));
	if (header_framing(name, colon - name))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "inject '%s': header "
		    "%.*s frames the request; it cannot carry a credential",
		    quote(inject, q), (int)(colon - name), name);
	fmt = colon + 1;
	for (p = fmt; *p != '\0'; p++)
		if (*p < 0x20 || *p > 0x7e)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "inject '%s': "
			    "FORMAT is printable ASCII", quote(inject, q));
	if ((hole = strstr(fmt, "{}")) == NULL ||
	    strstr(hole + 2, "{}") != NULL)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "inject '%s': FORMAT "
		    "holds one {} for the secret", quote(inject, q));
	return 0;
}

static const struct {
	char unit;
	int64_t s;
} units[] = { { 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 } };

int
sp_cred_rate_parse(const char *s, int64_t *n, int64_t *period,
    struct sp_err *e)
{
	char *end, q[48];
	long long v;
	size_t i;

	if (s == NULL || *s < '0' || *s > '9')
		goto bad;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || v < 1 || v > SP_CRED_RATE_MAX || *end != '/' ||
	    end[1] == '\0' || end[2] != '\0')
		goto bad;
	for (i = 0; i < sizeof units / sizeof units[0]; i++)
		if (end[1] == units[i].unit) {
			*n = v;
			*period = units[i].s;
			return 0;
		}
bad:
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "rate '%s' is not N/PERIOD (N 1 "
	    "to %d, PERIOD s, m, h or d)", quote(s, q), SP_CRED_RATE_MAX);
}

void
cred_rate_text(const struct sp_cred *c, char out[32])
{
	size_t i;

	for (i = 0; i < sizeof units / sizeof units[0]; i++)
		if (units[i].s == c->rate_period)
			break;
	snprintf(out, 32, "%lld/%c", (long long)c->rate_n,
	    i < sizeof units / sizeof units[0] ? units[i].unit : '?');
}

int
sp_cred_secret_check(const char *inject, const void *secret, size_t n,
    struct sp_err *e)
{
	const unsigned char *s = secret;
	size_t i;

	if (n == 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "the secret is empty");
	if (n > SP_CRED_SECRET_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "the secret is over %d "
		    "bytes", SP_CRED_SECRET_MAX);
	/* Never a byte of the secret in a message: only where. */
	for (i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] == 0x7f)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "the secret holds "
			    "a control character at byte %zu", i + 1);
	if (inject != NULL && strcmp(inject, "basic") == 0 &&
	    memchr(s, ':', n) == NULL)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a basic secret is "
		    "USER:PASSWORD");
	return 0;
}

int
sp_cred_vault_check(const char *vault, struct sp_err *e)
{
	const char *p;
	char q[48];

	if (vault != NULL && strcmp(vault, "file") == 0)
		return 0;
	if (vault == NULL || strncmp(vault, "cmd:", 4) != 0 ||
	    vault[4] == '\0' || strnlen(vault, SP_CRED_VAULT_MAX + 1) >
	    SP_CRED_VAULT_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "vault '%s' is not file "
		    "or cmd:PROGRAM", quote(vault, q));
	for (p = vault + 4; *p != '\0'; p++)
		if (*p <= 0x20 || *p > 0x7e)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "vault '%s': "
			    "PROGRAM is one word of printable ASCII",
			    quote(vault, q));
	return 0;
}

int
sp_cred_vault_default(char out[SP_CRED_VAULT_MAX + 1], struct sp_err *e)
{
	const char *v = getenv("SPACE_CRED_VAULT");

	if (v == NULL || *v == '\0')
		v = "file";
	if (sp_cred_vault_check(v, e) == -1) {
		snprintf(e->msg + strlen(e->msg), sizeof e->msg -
		    strlen(e->msg), " (SPACE_CRED_VAULT)");
		return -1;
	}
	snprintf(out, SP_CRED_VAULT_MAX + 1, "%s", v);
	return 0;
}

/* NAME.XXXXXXXXXXXX */
int
cred_ref_ok(const char *ref)
{
	char name[SP_NAME_MAX + 1];
	const char *dot = strrchr(ref, '.');

	if (dot == NULL || dot == ref || (size_t)(dot - ref) > SP_NAME_MAX)
		return 0;
	memcpy(name, ref, dot - ref);
	name[dot - ref] = '\0';
	return sp_name_check("name", name, NULL) == 0 && sp_id_valid(dot + 1);
}

/* "H[,H...]" into c->hosts, lowercased, without duplicates. */
int
cred_hosts_parse(const char *list, struct sp_cred *c, struct sp_err *e)
{
	char buf[SP_CRED_HOSTS_MAX * (SP_CRED_HOST_MAX + 2)];
	char h[SP_CRED_HOST_MAX + 1];
	char *tok, *p;
	int i;

	c->nhosts = 0;
	if (list == NULL || *list == '\0')
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a credential needs a host");
	if (strnlen(list, sizeof buf) == sizeof buf)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "host list too long");
	strcpy(buf, list);
	for (tok = buf;; tok = p + 1) {
		if ((p = strchr(tok, ',')) != NULL)
			*p = '\0';
		if (sp_cred_host_norm(tok, 1, h, sizeof h, e) == -1)
			return -1;
		for (i = 0; i < c->nhosts; i++)
			if (strcmp(c->hosts[i], h) == 0)
				break;
		if (i == c->nhosts) {
			if (c->nhosts == SP_CRED_HOSTS_MAX)
				return sp_err_set(e, SP_E_BAD_INPUT, 0, "at most "
				    "%d hosts", SP_CRED_HOSTS_MAX);
			strcpy(c->hosts[c->nhosts++], h);
		}
		if (p == NULL)
			return 0;
	}
}
