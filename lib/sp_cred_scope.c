/*
 * sp_cred_scope: where credentials live on disk (one NAME.json of
 * metadata per credential under its scope's directory), reading and
 * writing that metadata, and walking the scopes in their order.
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

/* ---- paths and files ---- */

int
cred_dir(const char *root, struct sp_err *e)
{
	char p[SP_PATH_MAX];

	if (sp_path_fmt(p, sizeof p, e, "%s/creds", root) == -1)
		return -1;
	if (mkdir(p, 0700) == -1 && errno != EEXIST)
		return sp_err_sys(e, SP_E_IO, "mkdir %s", p);
	return 0;
}

int
cred_meta_path(const char *root, const char *scope, const char *name, char *out,
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
int
cred_file_read(const char *path, void *buf, size_t max, size_t *n,
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
			return sp_err_set(e, SP_E_NOT_FOUND, 0, "%s is gone", path);
		return sp_err_sys(e, SP_E_IO, "open %s", path);
	}
	if (fstat(fd, &st) == -1) {
		sp_err_sys(e, SP_E_IO, "stat %s", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		sp_err_set(e, SP_E_CORRUPT, 0, "%s is not a file of at most %zu "
		    "bytes", path, max);
		goto out;
	}
	/* Until its size, or EOF should it have shrunk: one read, mostly. */
	while (got < (size_t)st.st_size &&
	    (r = read(fd, (char *)buf + got, max - got)) != 0) {
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			sp_err_sys(e, SP_E_IO, "read %s", path);
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
int
cred_file_replace(const char *path, const void *buf, size_t n, struct sp_err *e)
{
	char tmp[SP_PATH_MAX], dir[SP_PATH_MAX], *slash;
	int fd, rc = -1;

	if (sp_path_fmt(dir, sizeof dir, e, "%s", path) == -1)
		return -1;
	if ((slash = strrchr(dir, '/')) == NULL)
		return sp_err_set(e, SP_E_INTERNAL, 0, "%s: no directory", path);
	*slash = '\0';
	if (sp_path_fmt(tmp, sizeof tmp, e, "%s/.tmp-XXXXXX", dir) == -1)
		return -1;
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_IO, "create %s", tmp);
	if (sp_path_adopt(fd, tmp, e) == -1)
		goto out;
	if (fchmod(fd, 0600) == -1 || sp_write_all(fd, buf, n) == -1 ||
	    fsync(fd) == -1) {
		sp_err_sys(e, SP_E_IO, "write %s", tmp);
		goto out;
	}
	if (rename(tmp, path) == -1) {
		sp_err_sys(e, SP_E_IO, "rename %s", path);
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
	cred_rate_text(c, rate);
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
	struct sp_err why = { SP_E_NONE, 0, "" };
	const char *k, *bad = NULL;
	char h[SP_CRED_HOST_MAX + 1];
	json_t *v, *hosts;
	size_t i;
	int ki;

	memset(c, 0, sizeof *c);
	if (!json_is_object(j))
		return sp_err_set(e, SP_E_CORRUPT, 0, "%s: not a JSON object", path);
	json_object_foreach(j, k, v) {
		for (ki = 0; known[ki] != NULL; ki++)
			if (strcmp(k, known[ki]) == 0)
				break;
		if (known[ki] == NULL)
			return sp_err_set(e, SP_E_CORRUPT, 0, "%s: unknown field",
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
	    !cred_ref_ok(c->ref))
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
	return sp_err_set(e, SP_E_CORRUPT, 0, "%s: bad %s%s%s", path, bad,
	    why.msg[0] ? ": " : "", why.msg);
}

/* The metadata in buf[0..n), from where (a path, or a row's name). */
static int
meta_parse(const char *buf, size_t n, const char *where, struct sp_cred *c,
    struct sp_err *e)
{
	json_error_t jerr;
	json_t *j;
	int rc;

	if (n > META_MAX)
		return sp_err_set(e, SP_E_CORRUPT, 0, "%s: over %d bytes", where,
		    META_MAX);
	if ((j = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &jerr)) == NULL)
		return sp_err_set(e, SP_E_CORRUPT, 0, "%s: not JSON: %s", where,
		    jerr.text);
	rc = cred_from_json(j, where, c, e);
	json_decref(j);
	return rc;
}

/* What a row of the shared DB is called in messages. */
static void
row_name(const char *scope, const char *name, char *out, size_t n)
{
	snprintf(out, n, "credential row %s/%s", scope, name);
}

/* The metadata of name in scope, checked against where it lies. */
int
cred_meta_load(const char *root, const char *scope, const char *name,
    struct sp_cred *c, struct sp_err *e)
{
	char p[SP_PATH_MAX], buf[META_MAX], *body;
	struct sp_db *db;
	size_t n;
	int rc;

	if (sp_db_shared_take(&db, e) == -1)
		return -1;
	if (db != NULL) {
		row_name(scope, name, p, sizeof p);
		rc = sp_db_doc_get(db, "cred", scope, name, &body, e);
		sp_db_shared_give(db);
		if (rc == -1)
			return -1;
		rc = meta_parse(body, strlen(body), p, c, e);
		free(body);
	} else if ((rc = cred_meta_path(root, scope, name, p, sizeof p,
	    e)) == 0 && (rc = cred_file_read(p, buf, sizeof buf, &n, e)) == 0)
		rc = meta_parse(buf, n, p, c, e);
	if (rc == -1)
		return -1;
	if (strcmp(c->name, name) != 0 || strcmp(c->scope, scope) != 0)
		return sp_err_set(e, SP_E_CORRUPT, 0, "%s holds %s of %s", p,
		    c->name, c->scope);
	return 0;
}

int
cred_meta_exists(const char *root, const char *scope, const char *name,
    int *found, struct sp_err *e)
{
	char p[SP_PATH_MAX], *body;
	struct sp_db *db;
	int rc;

	if (sp_db_shared_take(&db, e) == -1)
		return -1;
	if (db == NULL) {
		if (cred_meta_path(root, scope, name, p, sizeof p, e) == -1)
			return -1;
		*found = access(p, F_OK) == 0;
		return 0;
	}
	rc = sp_db_doc_get(db, "cred", scope, name, &body, e);
	sp_db_shared_give(db);
	free(body);
	*found = rc == 0;
	return rc == -1 && e->code != SP_E_NOT_FOUND ? -1 : 0;
}

/* The metadata's text, as a file or a row holds it (no newline). */
static char *
meta_text(const struct sp_cred *c)
{
	json_t *o = sp_cred_json(c);
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

	json_decref(o);
	return s;
}

int
cred_meta_write(const char *root, const struct sp_cred *c,
    const struct sp_cred *was, struct sp_err *e)
{
	char p[SP_PATH_MAX], dir[SP_PATH_MAX], *s, *old = NULL, *line;
	struct sp_db *db;
	size_t n;
	int rc;

	if (sp_db_shared_take(&db, e) == -1)
		return -1;
	if (db == NULL && (sp_path_fmt(dir, sizeof dir, e, "%s/creds/scopes/%s",
	    root, c->scope) == -1 || cred_meta_path(root, c->scope, c->name, p,
	    sizeof p, e) == -1 || cred_dir(root, e) == -1 ||
	    sp_path_mkdirs(dir, 0700, e) == -1))
		return -1;
	if ((s = meta_text(c)) == NULL ||
	    (db != NULL && was != NULL && (old = meta_text(was)) == NULL)) {
		free(s);
		sp_db_shared_give(db);
		return sp_err_set(e, SP_E_NOMEM, 1, "metadata of %s", c->name);
	}
	if (db != NULL) {
		/* Another node's add or rotation may be at it too: an add
		 * takes a name that is free, a rotation replaces what it
		 * read, or each fails. */
		rc = was == NULL ?
		    sp_db_doc_put(db, "cred", c->scope, c->name, s, 0, e) :
		    sp_db_doc_swap(db, "cred", c->scope, c->name, old, s, e);
		sp_db_shared_give(db);
		free(s);
		free(old);
		if (rc == -1 && e->code == SP_E_EXISTS)
			sp_err_set(e, SP_E_EXISTS, 0, "credential %s is in %s "
			    "already: rotate it, or rm it first", c->name,
			    c->scope);
		return rc;
	}
	/* One line, newline-terminated, for the humans who look. */
	n = strlen(s);
	if ((line = realloc(s, n + 2)) == NULL) {
		free(s);
		return sp_err_set(e, SP_E_NOMEM, 1, "metadata of %s", c->name);
	}
	line[n++] = '\n';
	line[n] = '\0';
	rc = cred_file_replace(p, line, n, e);
	free(line);
	return rc;
}

/* The credential key of rate/: its scope with '+' for '/', '+', its name. */
void
cred_rate_key(const struct sp_cred *c, char out[SP_CRED_SCOPE_MAX + SP_NAME_MAX + 2])
{
	char *p;

	snprintf(out, SP_CRED_SCOPE_MAX + SP_NAME_MAX + 2, "%s+%s", c->scope,
	    c->name);
	for (p = out; *p != '\0'; p++)
		if (*p == '/')
			*p = '+';
}

int
cred_meta_remove(const char *root, const struct sp_cred *c, struct sp_err *e)
{
	char key[SP_CRED_SCOPE_MAX + SP_NAME_MAX + 2];
	char p[SP_PATH_MAX], top[SP_PATH_MAX], *slash;
	struct sp_err ign;
	struct sp_db *db;
	int rc;

	cred_rate_key(c, key);
	if (sp_db_shared_take(&db, e) == -1)
		return -1;
	if (db != NULL) {
		rc = sp_db_doc_delete(db, "cred", c->scope, c->name, NULL, e);
		if (rc == 0)
			rc = sp_db_rate_forget(db, key, NULL, e);
		sp_db_shared_give(db);
		return rc;
	}
	if (cred_meta_path(root, c->scope, c->name, p, sizeof p, e) == -1)
		return -1;
	if (unlink(p) == -1)
		return sp_err_sys(e, SP_E_IO, "remove %s", p);
	/* Empty scope directories go too (rmdir refuses the others). */
	if (sp_path_fmt(top, sizeof top, e, "%s/creds/scopes", root) == -1)
		return -1;
	while ((slash = strrchr(p, '/')) != NULL) {
		*slash = '\0';
		if (strlen(p) <= strlen(top) || rmdir(p) == -1)
			break;
	}
	if (sp_path_fmt(p, sizeof p, e, "%s/creds/rate/%s", root, key) == 0)
		sp_path_remove_tree(p, &ign);
	return 0;
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
		return sp_err_sys(e, SP_E_IO, "list %s", dir);
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

/* ---- the rows of a shared DB, in the order of the directories ---- */

struct listed {
	char scope[SP_CRED_SCOPE_MAX + 1];
	char name[SP_NAME_MAX + 1];
};
struct list {
	struct listed *v;
	size_t n, cap;
	int nomem;
};

static int
list1(const char *scope, const char *name, const char *body, void *arg)
{
	struct list *l = arg;
	struct listed *v;

	(void)body;
	/* Rows that could not be files are not credentials either. */
	if (sp_cred_scope_check(scope, NULL) == -1 ||
	    sp_name_check("name", name, NULL) == -1)
		return 0;
	if (l->n == l->cap) {
		if ((v = realloc(l->v, (l->cap * 2 + 16) * sizeof *v)) == NULL) {
			l->nomem = 1;
			return 1;
		}
		l->v = v;
		l->cap = l->cap * 2 + 16;
	}
	snprintf(l->v[l->n].scope, sizeof l->v[0].scope, "%s", scope);
	snprintf(l->v[l->n].name, sizeof l->v[0].name, "%s", name);
	l->n++;
	return 0;
}

static int
scope_rank(const char *s)
{
	return strcmp(s, "global") == 0 ? 0 : strncmp(s, "tenant/", 7) == 0 ?
	    1 : strncmp(s, "project/", 8) == 0 ? 2 : 3;
}

static int
listed_cmp(const void *a, const void *b)
{
	const struct listed *x = a, *y = b;
	int r;

	if ((r = scope_rank(x->scope) - scope_rank(y->scope)) != 0)
		return r;
	if ((r = strcmp(x->scope, y->scope)) != 0)
		return r;
	return strcmp(x->name, y->name);
}

/* The credentials of scope (NULL: all), in the walk's order, when they
 * are rows of a shared DB; *files set (nothing listed) when the store is
 * files under the root. */
static int
shared_list(const char *scope, struct list *l, int *files, struct sp_err *e)
{
	struct sp_db *db;
	int rc;

	memset(l, 0, sizeof *l);
	*files = 0;
	if (sp_db_shared_take(&db, e) == -1)
		return -1;
	if (db == NULL) {
		*files = 1;
		return 0;
	}
	rc = sp_db_doc_each(db, "cred", scope, NULL, list1, l, e);
	sp_db_shared_give(db);
	if (rc != -1 && l->nomem)
		rc = sp_err_set(e, SP_E_NOMEM, 1, "listing credentials: no "
		    "memory");
	if (rc == -1) {
		free(l->v);
		return -1;
	}
	if (l->n > 1)
		qsort(l->v, l->n, sizeof *l->v, listed_cmp);
	return 0;
}

/* fn for each credential name of scope, as scope_names, when they are
 * rows of a shared DB (*files as shared_list). */
static int
shared_names(const char *scope, int (*fn)(const char *name, void *),
    void *arg, int *files, struct sp_err *e)
{
	struct list l;
	size_t i;
	int rc;

	if (shared_list(scope, &l, files, e) == -1)
		return -1;
	for (i = 0, rc = 0; rc == 0 && i < l.n; i++)
		rc = fn(l.v[i].name, arg);
	free(l.v);
	return rc;
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
	struct list l;
	size_t i;
	int rc, files;

	if (shared_list(NULL, &l, &files, e) == -1)
		return -1;
	if (!files) {
		for (i = 0, rc = 0; rc == 0 && i < l.n; i++)
			if (i == 0 || strcmp(l.v[i].scope, l.v[i - 1].scope) != 0)
				rc = fn(l.v[i].scope, arg);
		free(l.v);
		return rc;
	}
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
	int rc, files;

	if ((rc = shared_names(scope, fn, arg, &files, e)) != 0 || !files)
		return rc;
	if (sp_path_fmt(dir, sizeof dir, e, "%s/creds/scopes/%s", root,
	    scope) == -1)
		return -1;
	return dir_each(dir, names1, &nm, e);
}

/* The same in directory order, for the gateway's path: no sort, no
 * allocation per entry. */
int
cred_scope_names_fast(const char *root, const char *scope,
    int (*fn)(const char *name, void *), void *arg, struct sp_err *e)
{
	struct names nm = { root, scope, fn, arg };
	char dir[SP_PATH_MAX];
	struct dirent *d;
	DIR *dp;
	int rc, files;

	if ((rc = shared_names(scope, fn, arg, &files, e)) != 0 || !files)
		return rc;
	if (sp_path_fmt(dir, sizeof dir, e, "%s/creds/scopes/%s", root,
	    scope) == -1)
		return -1;
	if ((dp = opendir(dir)) == NULL) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return sp_err_sys(e, SP_E_IO, "list %s", dir);
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

	if (cred_meta_load(x->root, x->scope, name, &c, &bad) == 0)
		return x->fn(&c, NULL, x->arg) != 0 ? 1 : 0;
	if (bad.code == SP_E_NOT_FOUND)
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
	size_t l = strlen(f->list);
	int found;

	if (cred_meta_exists(f->root, scope, f->name, &found, f->e) == -1)
		return -1;
	if (!found)
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
int
cred_scope_of(const char *root, const char *name, const char *scope,
    char out[SP_CRED_SCOPE_MAX + 1], int *found, struct sp_err *e)
{
	struct find f;

	if (sp_name_check("name", name, e) == -1)
		return -1;
	if (scope != NULL) {
		if (sp_cred_scope_check(scope, e) == -1 ||
		    cred_meta_exists(root, scope, name, found, e) == -1)
			return -1;
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
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "credential %s is in %d "
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

	if (cred_scope_of(root, name, scope, where, &found, e) == -1)
		return -1;
	if (!found)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no credential %s%s%s",
		    name, scope ? " in " : "", scope ? scope : "");
	return cred_meta_load(root, where, name, out, e);
}
