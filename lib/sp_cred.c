/*
 * sp_cred: the credential store of design.md, host side: credentials by
 * scope, their secrets in a vault (a sealed file per secret, or an external
 * secret manager), resolution for a sandbox and a host, and the one call
 * the gateway makes per request, with its expiry, rate limit and audit
 * record.  Formats and error codes are described in sp_cred.h.  This file
 * holds the store's changes (add, rotate, remove), resolution and use;
 * the checks, the files and scopes, the vaults and the audit log are in
 * sp_cred_check.c, sp_cred_scope.c, sp_cred_vault.c and sp_cred_audit.c.
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

/* ---- the store ---- */

static int
wlock(const char *root, int *fd, struct sp_err *e)
{
	char p[SP_PATH_MAX];

	if (cred_dir(root, e) == -1 ||
	    sp_path_fmt(p, sizeof p, e, "%s/creds/lock", root) == -1)
		return -1;
	if ((*fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) == -1)
		return sp_err_sys(e, SP_E_IO, "open %s", p);
	if (sp_path_adopt(*fd, p, e) == -1 || sp_flock_wait(*fd, e) == -1) {
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
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "expires is unix seconds "
		    "up to %lld", (long long)TIME_MAX);
	if (expires > 0 && expires <= now)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "expires %lld is not in "
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
	struct sp_db *db;
	int lfd = -1, count = 0, found, rc = -1;

	memset(&c, 0, sizeof c);
	if (sp_name_check("name", s->name, e) == -1 ||
	    sp_cred_scope_check(s->scope, e) == -1 ||
	    cred_hosts_parse(s->hosts, &c, e) == -1 ||
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
	if (sp_db_shared_take(&db, e) == -1)
		return -1;
	sp_db_shared_give(db);
	/* The file vault is this node's disk, which other nodes never see. */
	if (db != NULL && strcmp(c.vault, "file") == 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "the file vault keeps "
		    "secrets on this node, where the other nodes of a shared "
		    "database cannot read them: set SPACE_CRED_VAULT=cmd:PROGRAM, "
		    "a secret manager every node reaches");
	if (ref_new(c.name, c.ref, e) == -1 || wlock(root, &lfd, e) == -1 ||
	    cred_meta_exists(root, c.scope, c.name, &found, e) == -1)
		goto out;
	if (found) {
		sp_err_set(e, SP_E_EXISTS, 0, "credential %s is in %s already: "
		    "rotate it, or rm it first", c.name, c.scope);
		goto out;
	}
	if (cred_scope_names_fast(root, c.scope, count1, &count, e) == -1)
		goto out;
	if (count >= SP_CRED_PER_SCOPE) {
		sp_err_set(e, SP_E_FULL, 0, "scope %s holds %d credentials, the "
		    "most there may be", c.scope, count);
		goto out;
	}
	if (cred_vault_put(root, &c, secret, n, e) == -1)
		goto out;
	if (cred_meta_write(root, &c, NULL, e) == -1) {
		cred_vault_rm(root, &c, &ign);
		goto out;
	}
	if (out != NULL)
		*out = c;
	rc = cred_audit_change(root, "add", &c, now, e);
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
	if (ref_new(c.name, c.ref, e) == -1 || cred_vault_put(root, &c, secret, n,
	    e) == -1)
		goto out;
	if (cred_meta_write(root, &c, &old, e) == -1) {
		cred_vault_rm(root, &c, &ign);
		goto out;
	}
	cred_vault_rm(root, &old, &ign);
	if (out != NULL)
		*out = c;
	rc = cred_audit_change(root, "rotate", &c, now, e);
out:
	if (lfd != -1)
		close(lfd);
	return rc;
}

int
sp_cred_remove(const char *root, const char *name, const char *scope,
    int64_t now, int *removed, struct sp_cred *out, struct sp_err *e)
{
	char where[SP_CRED_SCOPE_MAX + 1];
	struct sp_cred c;
	int lfd = -1, found, rc = -1;

	*removed = 0;
	if (cred_scope_of(root, name, scope, where, &found, e) == -1)
		return -1;
	if (!found)
		return 0;
	if (wlock(root, &lfd, e) == -1)
		return -1;
	if (cred_meta_load(root, where, name, &c, e) == -1) {
		if (e->code == SP_E_NOT_FOUND)
			rc = 0;		/* another rm was first */
		goto out;
	}
	/* The secret first: metadata left behind lets rm run again. */
	if (cred_vault_rm(root, &c, e) == -1 ||
	    cred_meta_remove(root, &c, e) == -1)
		goto out;
	*removed = 1;
	if (out != NULL)
		*out = c;
	rc = cred_audit_change(root, "rm", &c, now, e);
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
	struct sp_db *db;
	int rc;
	DIR *d;

	if (sp_id_check(id, e) == -1)
		return -1;
	snprintf(scope, sizeof scope, "sandbox/%s", id);
	if (sp_cred_each(root, forget_one, &f, e) == -1 || f.failed ||
	    sp_db_shared_take(&db, e) == -1)
		return -1;
	if (db != NULL) {
		rc = sp_db_rate_forget(db, NULL, id, e);
		sp_db_shared_give(db);
		return rc;
	}
	if (sp_path_fmt(dir, sizeof dir, e, "%s/creds/rate", root) == -1)
		return -1;
	if ((d = opendir(dir)) == NULL)
		return errno == ENOENT ? 0 :
		    sp_err_sys(e, SP_E_IO, "reading '%s'", dir);
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

	if (cred_meta_load(b->root, b->scope, name, &b->cur, b->e) == -1)
		return b->e->code == SP_E_NOT_FOUND ? 0 : -1;
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
		return sp_err_sys(e, SP_E_NOMEM, "resolve");
	for (i = 0; i < ns; i++) {
		b->root = root;
		b->scope = scopes[i];
		b->host = w->host;
		b->out = out;
		b->e = e;
		if (cred_scope_names_fast(root, scopes[i], best1, b, e) == -1)
			goto out;
		if (b->rank > 0) {
			rc = 0;
			goto out;
		}
	}
	sp_err_set(e, SP_E_NOT_FOUND, 0, "no credential for %s in the scopes of "
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

/* One use of c from a token bucket of rate_n tokens, refilled at rate_n
 * per rate_period, counted in 1/rate_period units so that all of it is
 * exact integer arithmetic.  *tok and *last are the bucket, fresh when
 * there was none (or it was damaged): then it is full.  1: granted, 0:
 * limited (*retry: seconds until a token). */
static int
bucket_take(const struct sp_cred *c, int64_t now, int64_t *tok,
    int64_t *last, int fresh, int64_t *retry)
{
	int64_t cap = c->rate_n * c->rate_period, el;

	if (fresh || *tok < 0 || *last < 0 || *last > TIME_MAX) {
		*tok = cap;
		*last = now;
	} else if (*tok > cap)
		*tok = cap;
	/* A clock that went back refills nothing. */
	if (now > *last) {
		el = now - *last < c->rate_period ? now - *last : c->rate_period;
		*tok = *tok + el * c->rate_n < cap ? *tok + el * c->rate_n : cap;
		*last = now;
	}
	if (*tok >= c->rate_period) {
		*tok -= c->rate_period;
		return 1;
	}
	*retry = (c->rate_period - *tok + c->rate_n - 1) / c->rate_n;
	return 0;
}

struct take {
	const struct sp_cred *c;
	int64_t now, *retry;
};

static int
take_row(int64_t *tok, int64_t *last, int fresh, void *arg)
{
	struct take *t = arg;

	return bucket_take(t->c, t->now, tok, last, fresh, t->retry);
}

/* Takes one use of c for sandbox: from its row in a shared DB, or from
 * its file under root, flock'd.  As bucket_take, or -1. */
static int
rate_take(const char *root, const struct sp_cred *c, const char *sandbox,
    int64_t now, int64_t *retry, struct sp_err *e)
{
	char key[SP_CRED_SCOPE_MAX + SP_NAME_MAX + 2], p[SP_PATH_MAX], b[64];
	struct take t = { c, now, retry };
	int64_t tok, last;
	long long t0, l0;
	struct sp_db *db;
	int fd, len, fresh, rc = -1;
	ssize_t r;
	char end;

	if (c->rate_n == 0)
		return 1;
	cred_rate_key(c, key);
	if (sp_db_shared_take(&db, e) == -1)
		return -1;
	if (db != NULL) {
		rc = sp_db_rate_update(db, key, sandbox, take_row, &t, e);
		sp_db_shared_give(db);
		return rc;
	}
	if (sp_path_fmt(p, sizeof p, e, "%s/creds/rate/%s/%s", root, key,
	    sandbox) == -1)
		return -1;
	/* Its directory is made the first time only. */
	if ((fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
	    0600)) == -1 && errno == ENOENT) {
		*strrchr(p, '/') = '\0';
		if (cred_dir(root, e) == -1 || sp_path_mkdirs(p, 0700, e) == -1)
			return -1;
		p[strlen(p)] = '/';
		fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	if (fd == -1)
		return sp_err_sys(e, SP_E_IO, "open %s", p);
	if (sp_path_adopt(fd, p, e) == -1 || sp_flock_wait(fd, e) == -1)
		goto out;
	while ((r = pread(fd, b, sizeof b - 1, 0)) == -1 && errno == EINTR)
		;
	if (r == -1) {
		sp_err_sys(e, SP_E_IO, "read %s", p);
		goto out;
	}
	b[r] = '\0';
	/* A new or damaged state is a full bucket. */
	fresh = !(sscanf(b, "%lld %lld%c", &t0, &l0, &end) == 3 && end == '\n');
	tok = fresh ? 0 : t0;
	last = fresh ? 0 : l0;
	rc = bucket_take(c, now, &tok, &last, fresh, retry);
	len = snprintf(b, sizeof b, "%lld %lld\n", (long long)tok,
	    (long long)last);
	if (pwrite(fd, b, len, 0) != len || ftruncate(fd, len) == -1) {
		sp_err_sys(e, SP_E_IO, "write %s", p);
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
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "the buffer for %s is %zu bytes, "
	    "under the %zu it needs", c->name, n, need);
}

/* The decision of a use that was not allowed: its code, as the audit log
 * says it. */
static const char *
decision_of(enum sp_code code)
{
	switch (code) {
	case SP_E_NOT_FOUND:
	case SP_E_EXPIRED:
	case SP_E_RATE_LIMITED:
		return sp_code_name(code);
	default:
		return "error";
	}
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
		sp_err_sys(e, SP_E_NOMEM, "use");
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
			sp_err_set(e, SP_E_EXPIRED, 0, "credential %s of %s expired "
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
				sp_err_set(e, SP_E_RATE_LIMITED, 0, "credential %s of "
				    "%s: over %lld uses per %lld s; next in %lld s",
				    c->name, c->scope, (long long)c->rate_n,
				    (long long)c->rate_period,
				    (long long)g->retry_after);
			}
			if (r != 1)
				goto audit;
		}
		if (cred_vault_get(root, c, secret, &sn, e) == 0)
			break;
		if (e->code != SP_E_NOT_FOUND)
			goto audit;
		/* Gone from its vault: a rotation between resolving and
		 * fetching removed it.  Look again, once. */
		if (tries == 1) {
			sp_err_set(e, SP_E_VAULT, 0, "the secret %s of %s is "
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
	a.error = strcmp(a.decision, "error") == 0 ?
	    sp_code_name(e->code) : NULL;
	if (cred_audit_append(root, &a, &ae) == -1) {
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
