/*
 * sp_cred: the credential store of DESIGN §9, host side: credentials by
 * scope, their secrets in a vault (a sealed file per secret, or an external
 * secret manager), resolution for a sandbox and a host, and the one call
 * the gateway makes per request, with its expiry, rate limit and audit
 * record.  Formats and error codes are described in sp_cred.h.
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

#include "sp.h"
#include "sp_cred.h"


#define META_MAX	(16 * 1024)	/* one metadata file: ~7 KiB at most */
#define TIME_MAX	((int64_t)253402300799)	/* 9999-12-31 */
#define B64		sodium_base64_VARIANT_ORIGINAL
#define BOX_MAGIC	"spcred1\n"
#define BOX_MAGIC_LEN	8
#define BOX_PT_MAX	(SP_CRED_REF_MAX + 1 + SP_CRED_SECRET_MAX)
#define BOX_HDR		(BOX_MAGIC_LEN + crypto_secretbox_NONCEBYTES)
#define BOX_FILE_MAX	(BOX_HDR + crypto_secretbox_MACBYTES + BOX_PT_MAX)
#define TAIL_MAX	SP_PROC_TAIL	/* of a vault program's stderr */
#define VAULT_NOT_FOUND	2	/* a vault program's exit: no such REF */

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
	return sp_err_set(e, "bad-input", 0, "scope '%s' is not global, "
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
		return sp_err_set(e, "bad-input", 0, "host '%s' must be 1 to "
		    "%d characters", quote(host, q), SP_CRED_HOST_MAX);
	for (i = 0; i < len; i++)
		buf[i] = host[i] >= 'A' && host[i] <= 'Z' ? host[i] + 32 :
		    host[i];
	buf[len] = '\0';
	star = strncmp(buf, "*.", 2) == 0;
	if (star && !wildcard)
		return sp_err_set(e, "bad-input", 0, "host '%s': a wildcard "
		    "is not a host", quote(host, q));
	if (!dns_ok(buf + 2 * star, &labels))
		return sp_err_set(e, "bad-input", 0, "host '%s' is not a DNS "
		    "name%s (labels of 1 to 63 letters, digits or '-')",
		    quote(host, q), wildcard ? " or *.SUFFIX" : "");
	if (star && labels < 2)
		return sp_err_set(e, "bad-input", 0, "host '%s': a wildcard's "
		    "suffix has two labels or more", quote(host, q));
	if (len + 1 > n)
		return sp_err_set(e, "bad-input", 0, "no room for host '%s'",
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
		return sp_err_set(e, "bad-input", 0, "inject method must be 1 "
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
			return sp_err_set(e, "bad-input", 0, "inject '%s': "
			    "PARAM is 1 to 64 of A-Z a-z 0-9 - . _ ~",
			    quote(inject, q));
		return 0;
	}
	if (strncmp(inject, "header:", 7) != 0)
		return sp_err_set(e, "bad-input", 0, "inject '%s' is not "
		    "header:NAME:FORMAT, basic or query:PARAM", quote(inject, q));
	name = inject + 7;
	if ((colon = strchr(name, ':')) == NULL ||
	    !token_ok(name, colon - name))
		return sp_err_set(e, "bad-input", 0, "inject '%s': NAME is an "
		    "HTTP header name, then ':FORMAT'", quote(inject, q));
	if (header_framing(name, colon - name))
		return sp_err_set(e, "bad-input", 0, "inject '%s': header "
		    "%.*s frames the request; it cannot carry a credential",
		    quote(inject, q), (int)(colon - name), name);
	fmt = colon + 1;
	for (p = fmt; *p != '\0'; p++)
		if (*p < 0x20 || *p > 0x7e)
			return sp_err_set(e, "bad-input", 0, "inject '%s': "
			    "FORMAT is printable ASCII", quote(inject, q));
	if ((hole = strstr(fmt, "{}")) == NULL ||
	    strstr(hole + 2, "{}") != NULL)
		return sp_err_set(e, "bad-input", 0, "inject '%s': FORMAT "
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
	return sp_err_set(e, "bad-input", 0, "rate '%s' is not N/PERIOD (N 1 "
	    "to %d, PERIOD s, m, h or d)", quote(s, q), SP_CRED_RATE_MAX);
}

static void
rate_text(const struct sp_cred *c, char out[32])
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
		return sp_err_set(e, "bad-input", 0, "the secret is empty");
	if (n > SP_CRED_SECRET_MAX)
		return sp_err_set(e, "bad-input", 0, "the secret is over %d "
		    "bytes", SP_CRED_SECRET_MAX);
	/* Never a byte of the secret in a message: only where. */
	for (i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] == 0x7f)
			return sp_err_set(e, "bad-input", 0, "the secret holds "
			    "a control character at byte %zu", i + 1);
	if (inject != NULL && strcmp(inject, "basic") == 0 &&
	    memchr(s, ':', n) == NULL)
		return sp_err_set(e, "bad-input", 0, "a basic secret is "
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
		return sp_err_set(e, "bad-input", 0, "vault '%s' is not file "
		    "or cmd:PROGRAM", quote(vault, q));
	for (p = vault + 4; *p != '\0'; p++)
		if (*p <= 0x20 || *p > 0x7e)
			return sp_err_set(e, "bad-input", 0, "vault '%s': "
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
static int
ref_ok(const char *ref)
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
static int
hosts_parse(const char *list, struct sp_cred *c, struct sp_err *e)
{
	char buf[SP_CRED_HOSTS_MAX * (SP_CRED_HOST_MAX + 2)];
	char h[SP_CRED_HOST_MAX + 1];
	char *tok, *p;
	int i;

	c->nhosts = 0;
	if (list == NULL || *list == '\0')
		return sp_err_set(e, "bad-input", 0, "a credential needs a host");
	if (strnlen(list, sizeof buf) == sizeof buf)
		return sp_err_set(e, "bad-input", 0, "host list too long");
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
				return sp_err_set(e, "bad-input", 0, "at most "
				    "%d hosts", SP_CRED_HOSTS_MAX);
			strcpy(c->hosts[c->nhosts++], h);
		}
		if (p == NULL)
			return 0;
	}
}

/* ---- paths and files ---- */

static int
creds_dir(const char *root, struct sp_err *e)
{
	char p[SP_PATH_MAX];

	if (sp_path_fmt(p, sizeof p, e, "%s/creds", root) == -1)
		return -1;
	if (mkdir(p, 0700) == -1 && errno != EEXIST)
		return sp_err_sys(e, "io", "mkdir %s", p);
	return 0;
}

static int
meta_path(const char *root, const char *scope, const char *name, char *out,
    size_t n, struct sp_err *e)
{
	return sp_path_fmt(out, n, e, "%s/creds/scopes/%s/%s.json", root, scope,
	    name);
}

static void
fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd != -1) {
		fsync(fd);
		close(fd);
	}
}

/* Reads a whole regular file of at most max bytes: not-found, io, corrupt. */
static int
file_read(const char *path, void *buf, size_t max, size_t *n,
    struct sp_err *e)
{
	struct stat st;
	size_t got = 0;
	ssize_t r;
	int fd, rc = -1;

	/* O_NONBLOCK: a FIFO put there does not hang us. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
	    O_NONBLOCK)) == -1) {
		if (errno == ENOENT)
			return sp_err_set(e, "not-found", 0, "%s is gone", path);
		return sp_err_sys(e, "io", "open %s", path);
	}
	if (fstat(fd, &st) == -1) {
		sp_err_sys(e, "io", "stat %s", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		sp_err_set(e, "corrupt", 0, "%s is not a file of at most %zu "
		    "bytes", path, max);
		goto out;
	}
	/* Until its size, or EOF should it have shrunk: one read, mostly. */
	while (got < (size_t)st.st_size &&
	    (r = read(fd, (char *)buf + got, max - got)) != 0) {
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			sp_err_sys(e, "io", "read %s", path);
			goto out;
		}
		got += r;
	}
	*n = got;
	rc = 0;
out:
	close(fd);
	return rc;
}

/* Writes buf as path, whole or not at all: a temporary file in the same
 * directory, fsync'd, renamed over it. */
static int
file_replace(const char *path, const void *buf, size_t n, struct sp_err *e)
{
	char tmp[SP_PATH_MAX], dir[SP_PATH_MAX], *slash;
	int fd, rc = -1;

	if (sp_path_fmt(dir, sizeof dir, e, "%s", path) == -1)
		return -1;
	if ((slash = strrchr(dir, '/')) == NULL)
		return sp_err_set(e, "internal", 0, "%s: no directory", path);
	*slash = '\0';
	if (sp_path_fmt(tmp, sizeof tmp, e, "%s/.tmp-XXXXXX", dir) == -1)
		return -1;
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1)
		return sp_err_sys(e, "io", "create %s", tmp);
	if (fchmod(fd, 0600) == -1 || sp_write_all(fd, buf, n) == -1 ||
	    fsync(fd) == -1) {
		sp_err_sys(e, "io", "write %s", tmp);
		goto out;
	}
	if (rename(tmp, path) == -1) {
		sp_err_sys(e, "io", "rename %s", path);
		goto out;
	}
	fsync_dir(dir);
	rc = 0;
out:
	close(fd);
	if (rc == -1)
		unlink(tmp);
	return rc;
}

/* ---- metadata ---- */

json_t *
sp_cred_json(const struct sp_cred *c)
{
	json_t *o, *hosts;
	char rate[32];
	int i;

	hosts = json_array();
	for (i = 0; i < c->nhosts; i++)
		json_array_append_new(hosts, json_string(c->hosts[i]));
	rate_text(c, rate);
	o = json_pack("{s:s, s:s, s:o, s:s}", "name", c->name, "scope",
	    c->scope, "hosts", hosts, "inject", c->inject);
	if (o == NULL)
		return NULL;
	json_object_set_new(o, "expires", c->expires > 0 ?
	    json_integer(c->expires) : json_null());
	json_object_set_new(o, "rate", c->rate_n > 0 ? json_string(rate) :
	    json_null());
	json_object_set_new(o, "version", json_integer(c->version));
	json_object_set_new(o, "created", json_integer(c->created));
	json_object_set_new(o, "rotated", json_integer(c->rotated));
	json_object_set_new(o, "vault", json_string(c->vault));
	json_object_set_new(o, "ref", json_string(c->ref));
	return o;
}

static int
int_field(json_t *j, const char *k, int64_t lo, int64_t *out)
{
	json_t *v = json_object_get(j, k);

	if (!json_is_integer(v) || json_integer_value(v) < lo ||
	    json_integer_value(v) > TIME_MAX)
		return -1;
	*out = json_integer_value(v);
	return 0;
}

static int
str_field(json_t *j, const char *k, char *out, size_t n)
{
	json_t *v = json_object_get(j, k);

	if (!json_is_string(v) || json_string_length(v) >= n ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return -1;
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

/* The metadata of a file, strictly: every field known, well formed and
 * checked again as when it was added, for nobody but root wrote it. */
static int
cred_from_json(json_t *j, const char *path, struct sp_cred *c,
    struct sp_err *e)
{
	static const char *const known[] = { "name", "scope", "hosts",
	    "inject", "expires", "rate", "created", "rotated", "version",
	    "vault", "ref", NULL };
	struct sp_err why = { "", 0, "" };
	const char *k, *bad = NULL;
	char h[SP_CRED_HOST_MAX + 1];
	json_t *v, *hosts;
	size_t i;
	int ki;

	memset(c, 0, sizeof *c);
	if (!json_is_object(j))
		return sp_err_set(e, "corrupt", 0, "%s: not a JSON object", path);
	json_object_foreach(j, k, v) {
		for (ki = 0; known[ki] != NULL; ki++)
			if (strcmp(k, known[ki]) == 0)
				break;
		if (known[ki] == NULL)
			return sp_err_set(e, "corrupt", 0, "%s: unknown field",
			    path);
	}
	if (str_field(j, "name", c->name, sizeof c->name) == -1 ||
	    sp_name_check("name", c->name, &why) == -1)
		bad = "name";
	else if (str_field(j, "scope", c->scope, sizeof c->scope) == -1 ||
	    sp_cred_scope_check(c->scope, &why) == -1)
		bad = "scope";
	else if (str_field(j, "inject", c->inject, sizeof c->inject) == -1 ||
	    sp_cred_inject_check(c->inject, &why) == -1)
		bad = "inject";
	else if (str_field(j, "vault", c->vault, sizeof c->vault) == -1 ||
	    sp_cred_vault_check(c->vault, &why) == -1)
		bad = "vault";
	else if (str_field(j, "ref", c->ref, sizeof c->ref) == -1 ||
	    !ref_ok(c->ref))
		bad = "ref";
	else if (int_field(j, "created", 0, &c->created) == -1 ||
	    int_field(j, "rotated", 0, &c->rotated) == -1 ||
	    int_field(j, "version", 1, &c->version) == -1)
		bad = "times or version";
	if (bad != NULL)
		goto bad;
	v = json_object_get(j, "expires");
	if (!json_is_null(v) && int_field(j, "expires", 1, &c->expires) == -1) {
		bad = "expires";
		goto bad;
	}
	v = json_object_get(j, "rate");
	if (!json_is_null(v) && (!json_is_string(v) || sp_cred_rate_parse(
	    json_string_value(v), &c->rate_n, &c->rate_period, &why) == -1)) {
		bad = "rate";
		goto bad;
	}
	hosts = json_object_get(j, "hosts");
	if (!json_is_array(hosts) || json_array_size(hosts) == 0 ||
	    json_array_size(hosts) > SP_CRED_HOSTS_MAX) {
		bad = "hosts";
		goto bad;
	}
	json_array_foreach(hosts, i, v) {
		if (!json_is_string(v) || sp_cred_host_norm(json_string_value(v),
		    1, h, sizeof h, &why) == -1 || strcmp(h,
		    json_string_value(v)) != 0) {
			bad = "hosts";
			goto bad;
		}
		strcpy(c->hosts[c->nhosts++], h);
	}
	return 0;
bad:
	return sp_err_set(e, "corrupt", 0, "%s: bad %s%s%s", path, bad,
	    why.msg[0] ? ": " : "", why.msg);
}

static int
meta_read(const char *path, struct sp_cred *c, struct sp_err *e)
{
	char buf[META_MAX];
	json_error_t jerr;
	json_t *j;
	size_t n;
	int rc;

	if (file_read(path, buf, sizeof buf, &n, e) == -1)
		return -1;
	if ((j = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &jerr)) == NULL)
		return sp_err_set(e, "corrupt", 0, "%s: not JSON: %s", path,
		    jerr.text);
	rc = cred_from_json(j, path, c, e);
	json_decref(j);
	return rc;
}

/* The metadata of name in scope, checked against where it lies. */
static int
meta_load(const char *root, const char *scope, const char *name,
    struct sp_cred *c, struct sp_err *e)
{
	char p[SP_PATH_MAX];

	if (meta_path(root, scope, name, p, sizeof p, e) == -1 ||
	    meta_read(p, c, e) == -1)
		return -1;
	if (strcmp(c->name, name) != 0 || strcmp(c->scope, scope) != 0)
		return sp_err_set(e, "corrupt", 0, "%s holds %s of %s", p,
		    c->name, c->scope);
	return 0;
}

static int
meta_write(const char *root, const struct sp_cred *c, struct sp_err *e)
{
	char p[SP_PATH_MAX], dir[SP_PATH_MAX], *s, *line;
	json_t *o;
	size_t n;
	int rc;

	if (sp_path_fmt(dir, sizeof dir, e, "%s/creds/scopes/%s", root,
	    c->scope) == -1 || meta_path(root, c->scope, c->name, p, sizeof p,
	    e) == -1 || creds_dir(root, e) == -1 ||
	    sp_path_mkdirs(dir, 0700, e) == -1)
		return -1;
	if ((o = sp_cred_json(c)) == NULL ||
	    (s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER)) == NULL) {
		json_decref(o);
		return sp_err_set(e, "nomem", 1, "metadata of %s", c->name);
	}
	json_decref(o);
	/* One line, newline-terminated, for the humans who look. */
	n = strlen(s);
	if ((line = realloc(s, n + 2)) == NULL) {
		free(s);
		return sp_err_set(e, "nomem", 1, "metadata of %s", c->name);
	}
	line[n++] = '\n';
	line[n] = '\0';
	rc = file_replace(p, line, n, e);
	free(line);
	return rc;
}

/* ---- walking the scopes ---- */

static int
not_hidden(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

/* The entries of dir (hidden ones left out) to fn until it returns
 * non-zero; an absent dir has none. */
static int
dir_each(const char *dir, int (*fn)(const char *name, void *), void *arg,
    struct sp_err *e)
{
	struct dirent **ents;
	int i, n, rc = 0;

	if ((n = scandir(dir, &ents, not_hidden, alphasort)) == -1) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return sp_err_sys(e, "io", "list %s", dir);
	}
	for (i = 0; i < n; i++) {
		if (rc == 0)
			rc = fn(ents[i]->d_name, arg);
		free(ents[i]);
	}
	free(ents);
	return rc;
}

struct walk {
	const char *root;
	int (*fn)(const char *scope, void *);
	void *arg;
	struct sp_err *e;
	char tenant[SP_NAME_MAX + 1];
	int rc;
};

static int
walk_project(const char *name, void *arg)
{
	struct walk *w = arg;
	char scope[SP_CRED_SCOPE_MAX + 1];

	if (sp_name_check("project", name, NULL) == -1)
		return 0;
	snprintf(scope, sizeof scope, "project/%s/%s", w->tenant, name);
	return w->fn(scope, w->arg);
}

static int
walk_tenant(const char *name, void *arg)
{
	struct walk *w = arg;
	char scope[SP_CRED_SCOPE_MAX + 1];

	if (sp_name_check("tenant", name, NULL) == -1)
		return 0;
	snprintf(scope, sizeof scope, "tenant/%s", name);
	return w->fn(scope, w->arg);
}

static int
walk_project_tenant(const char *name, void *arg)
{
	struct walk *w = arg;
	char dir[SP_PATH_MAX];

	if (sp_name_check("tenant", name, NULL) == -1)
		return 0;
	snprintf(w->tenant, sizeof w->tenant, "%s", name);
	if (sp_path_fmt(dir, sizeof dir, w->e, "%s/creds/scopes/project/%s",
	    w->root, name) == -1)
		return -1;
	return dir_each(dir, walk_project, w, w->e);
}

static int
walk_sandbox(const char *name, void *arg)
{
	struct walk *w = arg;
	char scope[SP_CRED_SCOPE_MAX + 1];

	if (!sp_id_valid(name))
		return 0;
	snprintf(scope, sizeof scope, "sandbox/%s", name);
	return w->fn(scope, w->arg);
}

/* fn for every scope that has a directory: global, the tenants, the
 * projects, the sandboxes, each in byte order.  Stops at fn's first
 * non-zero return and returns it. */
static int
scopes_each(const char *root, int (*fn)(const char *scope, void *),
    void *arg, struct sp_err *e)
{
	struct walk w = { root, fn, arg, e, "", 0 };
	char dir[SP_PATH_MAX];
	struct stat st;
	int rc;

	if (sp_path_fmt(dir, sizeof dir, e, "%s/creds/scopes/global", root) == -1)
		return -1;
	if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode) &&
	    (rc = fn("global", arg)) != 0)
		return rc;
	if (sp_path_fmt(dir, sizeof dir, e, "%s/creds/scopes/tenant", root) == -1 ||
	    (rc = dir_each(dir, walk_tenant, &w, e)) != 0)
		return rc;
	if (sp_path_fmt(dir, sizeof dir, e, "%s/creds/scopes/project", root) == -1 ||
	    (rc = dir_each(dir, walk_project_tenant, &w, e)) != 0)
		return rc;
	if (sp_path_fmt(dir, sizeof dir, e, "%s/creds/scopes/sandbox", root) == -1)
		return -1;
	return dir_each(dir, walk_sandbox, &w, e);
}

/* The credential names of one scope, from its NAME.json files. */
struct names {
	const char *root, *scope;
	int (*fn)(const char *name, void *);
	void *arg;
};

static int
names1(const char *file, void *arg)
{
	struct names *nm = arg;
	char name[SP_NAME_MAX + 1];
	size_t len = strlen(file);

	if (len <= 5 || len - 5 > SP_NAME_MAX ||
	    strcmp(file + len - 5, ".json") != 0)
		return 0;
	memcpy(name, file, len - 5);
	name[len - 5] = '\0';
	if (sp_name_check("name", name, NULL) == -1)
		return 0;
	return nm->fn(name, nm->arg);
}

static int
scope_names(const char *root, const char *scope,
    int (*fn)(const char *name, void *), void *arg, struct sp_err *e)
{
	struct names nm = { root, scope, fn, arg };
	char dir[SP_PATH_MAX];

	if (sp_path_fmt(dir, sizeof dir, e, "%s/creds/scopes/%s", root,
	    scope) == -1)
		return -1;
	return dir_each(dir, names1, &nm, e);
}

/* The same in directory order, for the gateway's path: no sort, no
 * allocation per entry. */
static int
scope_names_fast(const char *root, const char *scope,
    int (*fn)(const char *name, void *), void *arg, struct sp_err *e)
{
	struct names nm = { root, scope, fn, arg };
	char dir[SP_PATH_MAX];
	struct dirent *d;
	DIR *dp;
	int rc = 0;

	if (sp_path_fmt(dir, sizeof dir, e, "%s/creds/scopes/%s", root,
	    scope) == -1)
		return -1;
	if ((dp = opendir(dir)) == NULL) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return sp_err_sys(e, "io", "list %s", dir);
	}
	while (rc == 0 && (d = readdir(dp)) != NULL)
		if (d->d_name[0] != '.')
			rc = names1(d->d_name, &nm);
	closedir(dp);
	return rc;
}

struct each {
	const char *root;
	int (*fn)(const struct sp_cred *, const struct sp_err *, void *);
	void *arg;
	const char *scope;
	struct sp_err *e;
};

static int
each_name(const char *name, void *arg)
{
	struct each *x = arg;
	struct sp_cred c;
	struct sp_err bad;

	if (meta_load(x->root, x->scope, name, &c, &bad) == 0)
		return x->fn(&c, NULL, x->arg) != 0 ? 1 : 0;
	if (strcmp(bad.code, "not-found") == 0)
		return 0;	/* removed while we walked */
	memset(&c, 0, sizeof c);
	snprintf(c.name, sizeof c.name, "%s", name);
	snprintf(c.scope, sizeof c.scope, "%s", x->scope);
	return x->fn(&c, &bad, x->arg) != 0 ? 1 : 0;
}

static int
each_scope(const char *scope, void *arg)
{
	struct each *x = arg;

	x->scope = scope;
	return scope_names(x->root, scope, each_name, x, x->e);
}

int
sp_cred_each(const char *root,
    int (*fn)(const struct sp_cred *, const struct sp_err *, void *),
    void *arg, struct sp_err *e)
{
	struct each x = { root, fn, arg, NULL, e };

	return scopes_each(root, each_scope, &x, e) == -1 ? -1 : 0;
}

/* Which scopes hold name: the first in *where, how many in n. */
struct find {
	const char *root, *name;
	char where[SP_CRED_SCOPE_MAX + 1];
	char list[256];
	int n;
	struct sp_err *e;
};

static int
find_scope(const char *scope, void *arg)
{
	struct find *f = arg;
	char p[SP_PATH_MAX];
	size_t l = strlen(f->list);

	if (meta_path(f->root, scope, f->name, p, sizeof p, f->e) == -1)
		return -1;
	if (access(p, F_OK) != 0)
		return 0;
	if (f->n++ == 0)
		snprintf(f->where, sizeof f->where, "%s", scope);
	if (l < sizeof f->list - 1)
		snprintf(f->list + l, sizeof f->list - l, "%s%s", l ? ", " : "",
		    scope);
	return 0;
}

/* The scope of name: scope itself when given (checked), else the one that
 * holds it.  *found 0 when none does. */
static int
scope_of(const char *root, const char *name, const char *scope,
    char out[SP_CRED_SCOPE_MAX + 1], int *found, struct sp_err *e)
{
	struct find f;
	char p[SP_PATH_MAX];

	if (sp_name_check("name", name, e) == -1)
		return -1;
	if (scope != NULL) {
		if (sp_cred_scope_check(scope, e) == -1 ||
		    meta_path(root, scope, name, p, sizeof p, e) == -1)
			return -1;
		*found = access(p, F_OK) == 0;
		snprintf(out, SP_CRED_SCOPE_MAX + 1, "%s", scope);
		return 0;
	}
	memset(&f, 0, sizeof f);
	f.root = root;
	f.name = name;
	f.e = e;
	if (scopes_each(root, find_scope, &f, e) == -1)
		return -1;
	if (f.n > 1)
		return sp_err_set(e, "bad-input", 0, "credential %s is in %d "
		    "scopes (%s): say which with a scope", name, f.n, f.list);
	*found = f.n == 1;
	snprintf(out, SP_CRED_SCOPE_MAX + 1, "%s", f.where);
	return 0;
}

int
sp_cred_get(const char *root, const char *name, const char *scope,
    struct sp_cred *out, struct sp_err *e)
{
	char where[SP_CRED_SCOPE_MAX + 1];
	int found;

	if (scope_of(root, name, scope, where, &found, e) == -1)
		return -1;
	if (!found)
		return sp_err_set(e, "not-found", 0, "no credential %s%s%s",
		    name, scope ? " in " : "", scope ? scope : "");
	return meta_load(root, where, name, out, e);
}

/* ---- the file vault ---- */

static int
vault_key(const char *root, int create, unsigned char key[32],
    struct sp_err *e)
{
	char p[SP_PATH_MAX];
	struct stat st;
	ssize_t r;
	int fd, rc = -1;

	if (sp_path_fmt(p, sizeof p, e, "%s/creds/vault.key", root) == -1)
		return -1;
	if (create && access(p, F_OK) != 0 && (creds_dir(root, e) == -1 ||
	    (sp_crypt_key_create(p, e) == -1 && strcmp(e->code, "exists") != 0)))
		return -1;
	if ((fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		if (errno == ENOENT)
			return sp_err_set(e, "vault", 0, "the vault key %s is "
			    "gone: no secret of the file vault opens", p);
		return sp_err_sys(e, "vault", "open %s", p);
	}
	if (fstat(fd, &st) == -1) {
		sp_err_sys(e, "vault", "stat %s", p);
		goto out;
	}
	/* Root-only, or it is not a key to trust with every secret. */
	if (!S_ISREG(st.st_mode) || st.st_size != 32 ||
	    (st.st_mode & 077) != 0 || st.st_uid != geteuid()) {
		sp_err_set(e, "vault", 0, "the vault key %s must be 32 bytes, "
		    "mode 0600, owned by uid %d", p, (int)geteuid());
		goto out;
	}
	while ((r = read(fd, key, 32)) == -1 && errno == EINTR)
		;
	if (r != 32) {
		sp_err_sys(e, "vault", "read %s", p);
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

/* The box binds the secret to its REF: a file moved under another name
 * does not open as that one. */
static int
fvault_put(const char *root, const char *ref, const unsigned char *s,
    size_t n, struct sp_err *e)
{
	unsigned char key[32], pt[BOX_PT_MAX], box[BOX_FILE_MAX];
	size_t rl = strlen(ref), pn = rl + 1 + n;
	char p[SP_PATH_MAX];
	int rc = -1;

	sodium_mlock(key, sizeof key);
	sodium_mlock(pt, sizeof pt);
	if (sp_path_fmt(p, sizeof p, e, "%s/creds/vault", root) == -1 ||
	    vault_key(root, 1, key, e) == -1 || sp_path_mkdirs(p, 0700, e) == -1 ||
	    sp_path_fmt(p, sizeof p, e, "%s/creds/vault/%s", root, ref) == -1)
		goto out;
	memcpy(pt, ref, rl + 1);
	memcpy(pt + rl + 1, s, n);
	memcpy(box, BOX_MAGIC, BOX_MAGIC_LEN);
	randombytes_buf(box + BOX_MAGIC_LEN, crypto_secretbox_NONCEBYTES);
	crypto_secretbox_easy(box + BOX_HDR, pt, pn, box + BOX_MAGIC_LEN, key);
	rc = file_replace(p, box, BOX_HDR + crypto_secretbox_MACBYTES + pn, e);
out:
	sodium_munlock(pt, sizeof pt);
	sodium_munlock(key, sizeof key);
	return rc;
}

static int
fvault_get(const char *root, const char *ref, unsigned char *out,
    size_t *n, struct sp_err *e)
{
	unsigned char key[32], pt[BOX_PT_MAX], box[BOX_FILE_MAX];
	size_t rl = strlen(ref), got, pn;
	char p[SP_PATH_MAX];
	int rc = -1;

	sodium_mlock(key, sizeof key);
	sodium_mlock(pt, sizeof pt);
	if (sp_path_fmt(p, sizeof p, e, "%s/creds/vault/%s", root, ref) == -1 ||
	    file_read(p, box, sizeof box, &got, e) == -1 ||
	    vault_key(root, 0, key, e) == -1)
		goto out;
	if (got < BOX_HDR + crypto_secretbox_MACBYTES + rl + 2 ||
	    memcmp(box, BOX_MAGIC, BOX_MAGIC_LEN) != 0) {
		sp_err_set(e, "corrupt", 0, "%s is not a sealed secret", p);
		goto out;
	}
	pn = got - BOX_HDR - crypto_secretbox_MACBYTES;
	if (crypto_secretbox_open_easy(pt, box + BOX_HDR, got - BOX_HDR,
	    box + BOX_MAGIC_LEN, key) != 0 || memcmp(pt, ref, rl + 1) != 0) {
		sp_err_set(e, "corrupt", 0, "%s does not open with the vault "
		    "key as %s", p, ref);
		goto out;
	}
	*n = pn - rl - 1;
	memcpy(out, pt + rl + 1, *n);
	rc = 0;
out:
	sodium_munlock(pt, sizeof pt);
	sodium_munlock(key, sizeof key);
	return rc;
}

static int
fvault_rm(const char *root, const char *ref, struct sp_err *e)
{
	char p[SP_PATH_MAX];

	if (sp_path_fmt(p, sizeof p, e, "%s/creds/vault/%s", root, ref) == -1)
		return -1;
	if (unlink(p) == -1 && errno != ENOENT)
		return sp_err_sys(e, "vault", "remove %s", p);
	return 0;
}

/* ---- the cmd: vault ---- */

/*
 * Runs PROGRAM op ref, in (inlen bytes) on its stdin, its stdout into out
 * (at most max bytes; out NULL: thrown away), the tail of its stderr into
 * tail; all within the timeout (sp_proc_talk).  Returns its exit status, or
 * -1 (it could not run, timed out, was killed by a signal or printed too
 * much); the child is reaped either way.
 */
static int
vcmd_run(const char *prog, const char *op, const char *ref, const void *in,
    size_t inlen, unsigned char *out, size_t max, size_t *outn,
    char tail[TAIL_MAX + 1], struct sp_err *e)
{
	char *argv[] = { (char *)prog, (char *)op, (char *)ref, NULL };
	int ms, rc;

	tail[0] = '\0';
	if (sp_env_ms("SPACE_CRED_VAULT_TIMEOUT_MS", SP_CRED_VAULT_TIMEOUT_MS,
	    &ms, e) == -1)
		return -1;
	rc = sp_proc_talk(argv, in, inlen, out, max, outn, tail, ms, e);
	/* A timeout says so; any other failure of the program is the
	 * vault's, retryable when it was killed. */
	if (rc == -1 && strcmp(e->code, "timed-out") != 0) {
		e->temp = strcmp(e->code, "killed") == 0;
		snprintf(e->code, sizeof e->code, "vault");
	}
	return rc;
}

/* A vault program's exit status as an error. */
static int
vcmd_status(const char *prog, const char *op, const char *ref, int status,
    const char *tail, struct sp_err *e)
{
	if (status == 0)
		return 0;
	if (status == VAULT_NOT_FOUND)
		return sp_err_set(e, "not-found", 0, "vault program %s has no "
		    "secret %s", prog, ref);
	return sp_err_set(e, "vault", 1, "vault program %s %s %s exited %d%s%s",
	    prog, op, ref, status, *tail ? ": " : "", tail);
}

/* ---- the vault of a credential ---- */

static int
vault_put(const char *root, const struct sp_cred *c, const void *s,
    size_t n, struct sp_err *e)
{
	char tail[TAIL_MAX + 1];
	int st;

	if (strcmp(c->vault, "file") == 0)
		return fvault_put(root, c->ref, s, n, e);
	if ((st = vcmd_run(c->vault + 4, "put", c->ref, s, n, NULL, 0, NULL,
	    tail, e)) == -1)
		return -1;
	if (st == VAULT_NOT_FOUND)
		st = 1;		/* put has no "not found" */
	return vcmd_status(c->vault + 4, "put", c->ref, st, tail, e);
}

/* The secret into out (room for SP_CRED_SECRET_MAX + 1), checked. */
static int
vault_get(const char *root, const struct sp_cred *c, unsigned char *out,
    size_t *n, struct sp_err *e)
{
	char tail[TAIL_MAX + 1];
	struct sp_err why;
	int st;

	if (strcmp(c->vault, "file") == 0) {
		if (fvault_get(root, c->ref, out, n, e) == -1)
			return -1;
	} else {
		if ((st = vcmd_run(c->vault + 4, "get", c->ref, NULL, 0, out,
		    SP_CRED_SECRET_MAX + 1, n, tail, e)) == -1 ||
		    vcmd_status(c->vault + 4, "get", c->ref, st, tail, e) == -1)
			return -1;
		if (*n > 0 && out[*n - 1] == '\n')
			(*n)--;
	}
	if (sp_cred_secret_check(c->inject, out, *n, &why) == -1) {
		sodium_memzero(out, SP_CRED_SECRET_MAX + 1);
		return sp_err_set(e, "vault", 0, "the vault's secret %s is not "
		    "one for %s: %s", c->ref, c->inject, why.msg);
	}
	return 0;
}

static int
vault_rm(const char *root, const struct sp_cred *c, struct sp_err *e)
{
	char tail[TAIL_MAX + 1];
	int st;

	if (strcmp(c->vault, "file") == 0)
		return fvault_rm(root, c->ref, e);
	if ((st = vcmd_run(c->vault + 4, "rm", c->ref, NULL, 0, NULL, 0, NULL,
	    tail, e)) == -1)
		return -1;
	if (st == VAULT_NOT_FOUND)
		return 0;
	return vcmd_status(c->vault + 4, "rm", c->ref, st, tail, e);
}

/* ---- the audit log ---- */

struct audit {
	int64_t time;
	const char *op, *sandbox, *tenant, *project, *host;
	const struct sp_cred *c;	/* NULL: none */
	const char *decision, *error;
	int64_t retry_after;
};

static int
audit_append(const char *root, const struct audit *a, struct sp_err *e)
{
	char p[SP_PATH_MAX], line[SP_CRED_AUDIT_LINE_MAX];
	json_t *o;
	size_t n;
	int fd, rc = -1;

	o = json_pack("{s:I, s:s}", "time", (json_int_t)a->time, "op", a->op);
	if (o == NULL)
		return sp_err_set(e, "audit", 1, "audit record: no memory");
	if (a->sandbox != NULL)
		json_object_set_new(o, "sandbox", json_string(a->sandbox));
	if (a->tenant != NULL)
		json_object_set_new(o, "tenant", json_string(a->tenant));
	if (a->project != NULL)
		json_object_set_new(o, "project", json_string(a->project));
	if (a->host != NULL)
		json_object_set_new(o, "host", json_string(a->host));
	if (a->c != NULL) {
		json_object_set_new(o, "cred", json_string(a->c->name));
		json_object_set_new(o, "scope", json_string(a->c->scope));
		json_object_set_new(o, "version", json_integer(a->c->version));
	}
	json_object_set_new(o, "decision", json_string(a->decision));
	if (a->error != NULL)
		json_object_set_new(o, "error", json_string(a->error));
	if (a->retry_after > 0)
		json_object_set_new(o, "retry_after",
		    json_integer(a->retry_after));
	/* Every field is a checked name, id, host or token: it fits. */
	n = json_dumpb(o, line, sizeof line - 1, JSON_COMPACT |
	    JSON_PRESERVE_ORDER);
	json_decref(o);
	if (n == 0 || n > sizeof line - 1)
		return sp_err_set(e, "audit", 1, "audit record over %d bytes",
		    SP_CRED_AUDIT_LINE_MAX);
	line[n++] = '\n';
	if (creds_dir(root, e) == -1 ||
	    sp_path_fmt(p, sizeof p, e, "%s/creds/audit.log", root) == -1)
		goto fail;
	if ((fd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
	    O_NOFOLLOW, 0600)) == -1) {
		sp_err_sys(e, "audit", "open %s", p);
		goto fail;
	}
	/* One write per line: O_APPEND keeps concurrent lines whole. */
	if (write(fd, line, n) != (ssize_t)n)
		sp_err_sys(e, "audit", "append to %s", p);
	else
		rc = 0;
	close(fd);
	if (rc == 0)
		return 0;
fail:
	e->temp = 1;
	snprintf(e->code, sizeof e->code, "audit");
	return -1;
}

/* After a change made: the record, or an error that says it was made. */
static int
audit_change(const char *root, const char *op, const struct sp_cred *c,
    int64_t now, struct sp_err *e)
{
	struct audit a = { now, op, NULL, NULL, NULL, NULL, c, "done", NULL, 0 };
	char msg[sizeof e->msg];

	if (audit_append(root, &a, e) == 0)
		return 0;
	snprintf(msg, sizeof msg, "%s", e->msg);
	return sp_err_set(e, "audit", 1, "%s %s of %s done, but not audited: "
	    "%s", op, c->name, c->scope, msg);
}

int
sp_cred_audit_each(const char *root, int64_t since,
    int (*fn)(json_t *rec, void *arg), void *arg, struct sp_err *e)
{
	char p[SP_PATH_MAX], line[SP_CRED_AUDIT_LINE_MAX + 2];
	json_t *rec, *t;
	int skipping = 0, rc = 0;
	FILE *f;

	if (sp_path_fmt(p, sizeof p, e, "%s/creds/audit.log", root) == -1)
		return -1;
	if ((f = fopen(p, "re")) == NULL) {
		if (errno == ENOENT)
			return 0;
		return sp_err_sys(e, "io", "open %s", p);
	}
	while (rc == 0 && fgets(line, sizeof line, f) != NULL) {
		/* A line over the bound was not written by us: skip it. */
		if (strchr(line, '\n') == NULL && !feof(f)) {
			skipping = 1;
			continue;
		}
		if (skipping) {
			skipping = 0;
			continue;
		}
		rec = json_loads(line, JSON_REJECT_DUPLICATES, NULL);
		t = json_object_get(rec, "time");
		if (json_is_integer(t) && json_integer_value(t) >= since)
			rc = fn(rec, arg) != 0;
		else
			json_decref(rec);
	}
	if (ferror(f)) {
		fclose(f);
		return sp_err_sys(e, "io", "read %s", p);
	}
	fclose(f);
	return 0;
}

/* ---- the store ---- */

static int
wlock(const char *root, int *fd, struct sp_err *e)
{
	char p[SP_PATH_MAX];

	if (creds_dir(root, e) == -1 ||
	    sp_path_fmt(p, sizeof p, e, "%s/creds/lock", root) == -1)
		return -1;
	if ((*fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) == -1)
		return sp_err_sys(e, "io", "open %s", p);
	if (sp_flock_wait(*fd, e) == -1) {
		close(*fd);
		*fd = -1;
		return -1;
	}
	return 0;
}

static int
ref_new(const char *name, char out[SP_CRED_REF_MAX + 1], struct sp_err *e)
{
	char id[SP_ID_LEN + 1];

	if (sp_id_new(id, e) == -1)
		return -1;
	snprintf(out, SP_CRED_REF_MAX + 1, "%s.%s", name, id);
	return 0;
}

static int
expires_check(int64_t expires, int64_t now, struct sp_err *e)
{
	if (expires < 0 || expires > TIME_MAX)
		return sp_err_set(e, "bad-input", 0, "expires is unix seconds "
		    "up to %lld", (long long)TIME_MAX);
	if (expires > 0 && expires <= now)
		return sp_err_set(e, "bad-input", 0, "expires %lld is not in "
		    "the future", (long long)expires);
	return 0;
}

static int
count1(const char *name, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

int
sp_cred_add(const char *root, const struct sp_cred_spec *s,
    const void *secret, size_t n, int64_t now, struct sp_cred *out,
    struct sp_err *e)
{
	struct sp_cred c;
	struct sp_err ign;
	char p[SP_PATH_MAX];
	int lfd = -1, count = 0, rc = -1;

	memset(&c, 0, sizeof c);
	if (sp_name_check("name", s->name, e) == -1 ||
	    sp_cred_scope_check(s->scope, e) == -1 ||
	    hosts_parse(s->hosts, &c, e) == -1 ||
	    sp_cred_inject_check(s->inject, e) == -1 ||
	    sp_cred_secret_check(s->inject, secret, n, e) == -1 ||
	    expires_check(s->expires, now, e) == -1 ||
	    (s->rate != NULL && sp_cred_rate_parse(s->rate, &c.rate_n,
	    &c.rate_period, e) == -1))
		return -1;
	if (s->vault != NULL) {
		if (sp_cred_vault_check(s->vault, e) == -1)
			return -1;
		snprintf(c.vault, sizeof c.vault, "%s", s->vault);
	} else if (sp_cred_vault_default(c.vault, e) == -1)
		return -1;
	snprintf(c.name, sizeof c.name, "%s", s->name);
	snprintf(c.scope, sizeof c.scope, "%s", s->scope);
	snprintf(c.inject, sizeof c.inject, "%s", s->inject);
	c.expires = s->expires;
	c.created = c.rotated = now;
	c.version = 1;
	if (ref_new(c.name, c.ref, e) == -1 || wlock(root, &lfd, e) == -1 ||
	    meta_path(root, c.scope, c.name, p, sizeof p, e) == -1)
		goto out;
	if (access(p, F_OK) == 0) {
		sp_err_set(e, "exists", 0, "credential %s is in %s already: "
		    "rotate it, or rm it first", c.name, c.scope);
		goto out;
	}
	if (scope_names_fast(root, c.scope, count1, &count, e) == -1)
		goto out;
	if (count >= SP_CRED_PER_SCOPE) {
		sp_err_set(e, "full", 0, "scope %s holds %d credentials, the "
		    "most there may be", c.scope, count);
		goto out;
	}
	if (vault_put(root, &c, secret, n, e) == -1)
		goto out;
	if (meta_write(root, &c, e) == -1) {
		vault_rm(root, &c, &ign);
		goto out;
	}
	if (out != NULL)
		*out = c;
	rc = audit_change(root, "add", &c, now, e);
out:
	if (lfd != -1)
		close(lfd);
	return rc;
}

int
sp_cred_rotate(const char *root, const char *name, const char *scope,
    const void *secret, size_t n, int64_t expires, int64_t now,
    struct sp_cred *out, struct sp_err *e)
{
	struct sp_cred c, old;
	struct sp_err ign;
	int lfd = -1, rc = -1;

	if (expires_check(expires, now, e) == -1 ||
	    wlock(root, &lfd, e) == -1 ||
	    sp_cred_get(root, name, scope, &c, e) == -1 ||
	    sp_cred_secret_check(c.inject, secret, n, e) == -1)
		goto out;
	old = c;
	c.version++;
	c.rotated = now;
	if (expires > 0)
		c.expires = expires;
	/* The new secret under a new REF, the metadata switched to it in one
	 * rename, then the old one forgotten: a reader sees either pair. */
	if (ref_new(c.name, c.ref, e) == -1 || vault_put(root, &c, secret, n,
	    e) == -1)
		goto out;
	if (meta_write(root, &c, e) == -1) {
		vault_rm(root, &c, &ign);
		goto out;
	}
	vault_rm(root, &old, &ign);
	if (out != NULL)
		*out = c;
	rc = audit_change(root, "rotate", &c, now, e);
out:
	if (lfd != -1)
		close(lfd);
	return rc;
}

/* The credential key of rate/: its scope with '+' for '/', '+', its name. */
static void
rate_key(const struct sp_cred *c, char out[SP_CRED_SCOPE_MAX + SP_NAME_MAX + 2])
{
	char *p;

	snprintf(out, SP_CRED_SCOPE_MAX + SP_NAME_MAX + 2, "%s+%s", c->scope,
	    c->name);
	for (p = out; *p != '\0'; p++)
		if (*p == '/')
			*p = '+';
}

int
sp_cred_remove(const char *root, const char *name, const char *scope,
    int64_t now, int *removed, struct sp_cred *out, struct sp_err *e)
{
	char where[SP_CRED_SCOPE_MAX + 1], key[SP_CRED_SCOPE_MAX + SP_NAME_MAX + 2];
	char p[SP_PATH_MAX], top[SP_PATH_MAX], *slash;
	struct sp_cred c;
	struct sp_err ign;
	int lfd = -1, found, rc = -1;

	*removed = 0;
	if (scope_of(root, name, scope, where, &found, e) == -1)
		return -1;
	if (!found)
		return 0;
	if (wlock(root, &lfd, e) == -1)
		return -1;
	if (meta_load(root, where, name, &c, e) == -1) {
		if (strcmp(e->code, "not-found") == 0)
			rc = 0;		/* another rm was first */
		goto out;
	}
	/* The secret first: metadata left behind lets rm run again. */
	if (vault_rm(root, &c, e) == -1 ||
	    meta_path(root, where, name, p, sizeof p, e) == -1)
		goto out;
	if (unlink(p) == -1) {
		sp_err_sys(e, "io", "remove %s", p);
		goto out;
	}
	/* Empty scope directories go too (rmdir refuses the others). */
	if (sp_path_fmt(top, sizeof top, e, "%s/creds/scopes", root) == -1)
		goto out;
	while ((slash = strrchr(p, '/')) != NULL) {
		*slash = '\0';
		if (strlen(p) <= strlen(top) || rmdir(p) == -1)
			break;
	}
	rate_key(&c, key);
	if (sp_path_fmt(p, sizeof p, e, "%s/creds/rate/%s", root, key) == 0)
		sp_path_remove_tree(p, &ign);
	*removed = 1;
	if (out != NULL)
		*out = c;
	rc = audit_change(root, "rm", &c, now, e);
out:
	close(lfd);
	return rc;
}

/* What space-rm leaves of a sandbox here: its own credentials, and its
 * rate state of every other one. */
struct forget {
	const char *root, *scope;
	int64_t now;
	int failed;
	struct sp_err *e;
};

static int
forget_one(const struct sp_cred *c, const struct sp_err *bad, void *arg)
{
	struct forget *f = arg;
	int removed;

	if (strcmp(c->scope, f->scope) != 0)
		return 0;
	if (sp_cred_remove(f->root, c->name, c->scope, f->now, &removed, NULL,
	    f->e) == -1)
		f->failed = 1;
	return 0;
}

int
sp_cred_forget_sandbox(const char *root, const char *id, int64_t now,
    struct sp_err *e)
{
	char scope[SP_CRED_SCOPE_MAX + 1], dir[SP_PATH_MAX], p[SP_PATH_MAX];
	struct forget f = { root, scope, now, 0, e };
	struct sp_err ign;
	struct dirent *de;
	DIR *d;

	if (sp_id_check(id, e) == -1)
		return -1;
	snprintf(scope, sizeof scope, "sandbox/%s", id);
	if (sp_cred_each(root, forget_one, &f, e) == -1 || f.failed)
		return -1;
	if (sp_path_fmt(dir, sizeof dir, e, "%s/creds/rate", root) == -1)
		return -1;
	if ((d = opendir(dir)) == NULL)
		return errno == ENOENT ? 0 :
		    sp_err_sys(e, "io", "reading '%s'", dir);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (sp_path_fmt(p, sizeof p, &ign, "%s/%s/%s", dir,
		    de->d_name, id) == 0)
			unlink(p);
	}
	closedir(d);
	return 0;
}

/* ---- resolution ---- */

/* How well c's hosts match host: 0 not at all, SP_CRED_HOST_MAX + 1 for
 * an exact name, else the length of the longest wildcard suffix. */
static int
host_rank(const struct sp_cred *c, const char *host)
{
	size_t hl = strlen(host), sl;
	int i, best = 0;

	for (i = 0; i < c->nhosts; i++) {
		if (strcmp(c->hosts[i], host) == 0)
			return SP_CRED_HOST_MAX + 1;
		if (strncmp(c->hosts[i], "*.", 2) != 0)
			continue;
		sl = strlen(c->hosts[i] + 1);	/* ".SUFFIX" */
		if (hl > sl && strcmp(host + hl - sl, c->hosts[i] + 1) == 0 &&
		    (int)sl > best)
			best = sl;
	}
	return best;
}

struct best {
	const char *root, *scope, *host;
	struct sp_cred cur, *out;
	int rank;
	struct sp_err *e;
};

static int
best1(const char *name, void *arg)
{
	struct best *b = arg;
	int rank;

	if (meta_load(b->root, b->scope, name, &b->cur, b->e) == -1)
		return strcmp(b->e->code, "not-found") == 0 ? 0 : -1;
	if ((rank = host_rank(&b->cur, b->host)) == 0)
		return 0;
	/* Ties: the newest, then the first name in byte order. */
	if (rank > b->rank || (rank == b->rank &&
	    (b->cur.created > b->out->created ||
	    (b->cur.created == b->out->created &&
	    strcmp(b->cur.name, b->out->name) < 0)))) {
		*b->out = b->cur;
		b->rank = rank;
	}
	return 0;
}

/* The checked inputs of a resolution. */
struct who {
	char host[SP_CRED_HOST_MAX + 1];
	const char *sandbox, *tenant, *project;
};

static int
who_check(const char *sandbox, const char *tenant, const char *project,
    const char *host, struct who *w, struct sp_err *e)
{
	memset(w, 0, sizeof *w);
	if (tenant != NULL && *tenant == '\0')
		tenant = NULL;
	if (project != NULL && *project == '\0')
		project = NULL;
	if (sp_id_check(sandbox, e) == -1)
		return -1;
	w->sandbox = sandbox;
	if (tenant != NULL && sp_name_check("tenant", tenant, e) == -1)
		return -1;
	w->tenant = tenant;
	if (project != NULL && sp_name_check("project", project, e) == -1)
		return -1;
	w->project = project;
	return sp_cred_host_norm(host, 0, w->host, sizeof w->host, e);
}

static int
resolve(const char *root, const struct who *w, struct sp_cred *out,
    struct sp_err *e)
{
	char scopes[4][SP_CRED_SCOPE_MAX + 1];
	struct best *b;
	int i, ns = 0, rc = -1;

	snprintf(scopes[ns++], sizeof scopes[0], "sandbox/%s", w->sandbox);
	if (w->tenant != NULL && w->project != NULL)
		snprintf(scopes[ns++], sizeof scopes[0], "project/%s/%s",
		    w->tenant, w->project);
	if (w->tenant != NULL)
		snprintf(scopes[ns++], sizeof scopes[0], "tenant/%s", w->tenant);
	snprintf(scopes[ns++], sizeof scopes[0], "global");
	if ((b = calloc(1, sizeof *b)) == NULL)
		return sp_err_sys(e, "nomem", "resolve");
	for (i = 0; i < ns; i++) {
		b->root = root;
		b->scope = scopes[i];
		b->host = w->host;
		b->out = out;
		b->e = e;
		if (scope_names_fast(root, scopes[i], best1, b, e) == -1)
			goto out;
		if (b->rank > 0) {
			rc = 0;
			goto out;
		}
	}
	sp_err_set(e, "not-found", 0, "no credential for %s in the scopes of "
	    "sandbox %s", w->host, w->sandbox);
out:
	free(b);
	return rc;
}

int
sp_cred_resolve(const char *root, const char *sandbox, const char *tenant,
    const char *project, const char *host, struct sp_cred *out,
    struct sp_err *e)
{
	struct who w;

	if (who_check(sandbox, tenant, project, host, &w, e) == -1)
		return -1;
	return resolve(root, &w, out, e);
}

/* ---- use ---- */

/* Takes one use of c for sandbox from its token bucket: rate_n tokens,
 * refilled at rate_n per rate_period, counted in 1/rate_period units so
 * that all of it is exact integer arithmetic.  1: granted, 0: limited
 * (*retry: seconds until a token), -1: error. */
static int
rate_take(const char *root, const struct sp_cred *c, const char *sandbox,
    int64_t now, int64_t *retry, struct sp_err *e)
{
	char key[SP_CRED_SCOPE_MAX + SP_NAME_MAX + 2], p[SP_PATH_MAX], b[64];
	int64_t cap = c->rate_n * c->rate_period, tok, last, el;
	long long t0, l0;
	int fd, len, rc = -1;
	ssize_t r;
	char end;

	if (c->rate_n == 0)
		return 1;
	rate_key(c, key);
	if (sp_path_fmt(p, sizeof p, e, "%s/creds/rate/%s/%s", root, key,
	    sandbox) == -1)
		return -1;
	/* Its directory is made the first time only. */
	if ((fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
	    0600)) == -1 && errno == ENOENT) {
		*strrchr(p, '/') = '\0';
		if (creds_dir(root, e) == -1 || sp_path_mkdirs(p, 0700, e) == -1)
			return -1;
		p[strlen(p)] = '/';
		fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	if (fd == -1)
		return sp_err_sys(e, "io", "open %s", p);
	if (sp_flock_wait(fd, e) == -1)
		goto out;
	while ((r = pread(fd, b, sizeof b - 1, 0)) == -1 && errno == EINTR)
		;
	if (r == -1) {
		sp_err_sys(e, "io", "read %s", p);
		goto out;
	}
	b[r] = '\0';
	/* A new or damaged state is a full bucket. */
	if (sscanf(b, "%lld %lld%c", &t0, &l0, &end) == 3 && end == '\n' &&
	    t0 >= 0 && l0 >= 0 && l0 <= TIME_MAX) {
		tok = t0 < cap ? t0 : cap;
		last = l0;
	} else {
		tok = cap;
		last = now;
	}
	/* A clock that went back refills nothing. */
	if (now > last) {
		el = now - last < c->rate_period ? now - last : c->rate_period;
		tok = tok + el * c->rate_n < cap ? tok + el * c->rate_n : cap;
		last = now;
	}
	if (tok >= c->rate_period) {
		tok -= c->rate_period;
		rc = 1;
	} else {
		*retry = (c->rate_period - tok + c->rate_n - 1) / c->rate_n;
		rc = 0;
	}
	len = snprintf(b, sizeof b, "%lld %lld\n", (long long)tok,
	    (long long)last);
	if (pwrite(fd, b, len, 0) != len || ftruncate(fd, len) == -1) {
		sp_err_sys(e, "io", "write %s", p);
		rc = -1;
	}
out:
	close(fd);
	return rc;
}

/* What c injects with secret s, into buf. */
static int
inject_format(const struct sp_cred *c, const unsigned char *s, size_t sn,
    struct sp_cred_grant *g, char *buf, size_t n, struct sp_err *e)
{
	static const char hex[] = "0123456789ABCDEF";
	const char *name, *fmt, *hole;
	size_t need, i, o;

	if (strcmp(c->inject, "basic") == 0) {
		need = 15 + 6 + sodium_base64_ENCODED_LEN(sn, B64);
		if (need > n)
			goto small;
		memcpy(buf, "Authorization: Basic ", 21);
		sodium_bin2base64(buf + 21, n - 21, s, sn, B64);
		g->how = SP_CRED_HEADER;
		g->key_len = 13;
		g->value_off = 15;
	} else if (strncmp(c->inject, "query:", 6) == 0) {
		name = c->inject + 6;
		need = strlen(name) + 1 + 3 * sn + 1;
		if (need > n)
			goto small;
		o = strlen(name);
		memcpy(buf, name, o);
		buf[o++] = '=';
		g->how = SP_CRED_QUERY;
		g->key_len = o - 1;
		g->value_off = o;
		for (i = 0; i < sn; i++) {
			if ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' &&
			    s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
			    s[i] == '-' || s[i] == '.' || s[i] == '_' ||
			    s[i] == '~') {
				buf[o++] = s[i];
			} else {
				buf[o++] = '%';
				buf[o++] = hex[s[i] >> 4];
				buf[o++] = hex[s[i] & 15];
			}
		}
		buf[o] = '\0';
	} else {
		name = c->inject + 7;
		fmt = strchr(name, ':') + 1;
		hole = strstr(fmt, "{}");
		need = (fmt - 1 - name) + 2 + strlen(fmt) - 2 + sn + 1;
		if (need > n)
			goto small;
		o = fmt - 1 - name;
		memcpy(buf, name, o);
		g->how = SP_CRED_HEADER;
		g->key_len = o;
		memcpy(buf + o, ": ", 2);
		o += 2;
		g->value_off = o;
		memcpy(buf + o, fmt, hole - fmt);
		o += hole - fmt;
		memcpy(buf + o, s, sn);
		o += sn;
		strcpy(buf + o, hole + 2);
	}
	g->len = strlen(buf);
	return 0;
small:
	return sp_err_set(e, "bad-input", 0, "the buffer for %s is %zu bytes, "
	    "under the %zu it needs", c->name, n, need);
}

/* The decision of a use that was not allowed: its code, as the audit log
 * says it. */
static const char *
decision_of(const char *code)
{
	static const char *const kept[] = { "not-found", "expired",
	    "rate-limited", NULL };
	int i;

	for (i = 0; kept[i] != NULL; i++)
		if (strcmp(code, kept[i]) == 0)
			return kept[i];
	return "error";
}

int
sp_cred_use(const char *root, const char *sandbox, const char *tenant,
    const char *project, const char *host, int64_t now,
    struct sp_cred_grant *g, char *buf, size_t n, struct sp_err *e)
{
	unsigned char secret[SP_CRED_SECRET_MAX + 1];
	struct audit a = { now, "use", NULL, NULL, NULL, NULL, NULL, NULL,
	    NULL, 0 };
	char id[SP_NAME_MAX + SP_CRED_SCOPE_MAX + 2], first[sizeof id];
	char msg[sizeof e->msg];
	struct sp_cred *c;
	struct sp_err ae;
	struct who w;
	size_t sn = 0;
	int rc = -1, r, tries;

	memset(g, 0, sizeof *g);
	if (n > 0)
		buf[0] = '\0';
	sodium_mlock(secret, sizeof secret);
	if ((c = calloc(1, sizeof *c)) == NULL) {
		sp_err_sys(e, "nomem", "use");
		goto audit;
	}
	if (who_check(sandbox, tenant, project, host, &w, e) == -1) {
		/* What is checked goes in the record; the rest stays out. */
		a.sandbox = w.sandbox;
		a.tenant = w.tenant;
		a.project = w.project;
		goto audit;
	}
	a.sandbox = w.sandbox;
	a.tenant = w.tenant;
	a.project = w.project;
	a.host = w.host;
	for (tries = 0;; tries++) {
		if (resolve(root, &w, c, e) == -1) {
			a.c = NULL;
			goto audit;
		}
		a.c = c;
		snprintf(g->name, sizeof g->name, "%s", c->name);
		snprintf(g->scope, sizeof g->scope, "%s", c->scope);
		g->version = c->version;
		if (c->expires > 0 && now >= c->expires) {
			sp_err_set(e, "expired", 0, "credential %s of %s expired "
			    "at %lld", c->name, c->scope, (long long)c->expires);
			goto audit;
		}
		/* A second look is the same use: one token, unless it found
		 * another credential. */
		snprintf(id, sizeof id, "%s@%s", c->name, c->scope);
		if (tries == 0 || strcmp(id, first) != 0) {
			r = rate_take(root, c, w.sandbox, now, &g->retry_after, e);
			if (r == 0) {
				a.retry_after = g->retry_after;
				sp_err_set(e, "rate-limited", 0, "credential %s of "
				    "%s: over %lld uses per %lld s; next in %lld s",
				    c->name, c->scope, (long long)c->rate_n,
				    (long long)c->rate_period,
				    (long long)g->retry_after);
			}
			if (r != 1)
				goto audit;
		}
		if (vault_get(root, c, secret, &sn, e) == 0)
			break;
		if (strcmp(e->code, "not-found") != 0)
			goto audit;
		/* Gone from its vault: a rotation between resolving and
		 * fetching removed it.  Look again, once. */
		if (tries == 1) {
			sp_err_set(e, "vault", 0, "the secret %s of %s is "
			    "missing from its vault", c->ref, c->name);
			goto audit;
		}
		snprintf(first, sizeof first, "%s", id);
	}
	if (inject_format(c, secret, sn, g, buf, n, e) == -1)
		goto audit;
	rc = 0;
audit:
	a.decision = rc == 0 ? "allowed" : decision_of(e->code);
	a.error = strcmp(a.decision, "error") == 0 ? e->code : NULL;
	if (audit_append(root, &a, &ae) == -1) {
		if (rc == 0) {
			*e = ae;	/* nothing unaudited goes out */
			rc = -1;
		} else {
			snprintf(msg, sizeof msg, "%s", e->msg);
			snprintf(e->msg, sizeof e->msg, "%.300s (and not "
			    "audited: %.180s)", msg, ae.msg);
		}
	}
	if (rc == -1 && n > 0)
		sodium_memzero(buf, n);
	sodium_munlock(secret, sizeof secret);
	free(c);
	return rc;
}
