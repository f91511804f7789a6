/*
 * sp_cred_audit: the audit log of the credential store: one bounded
 * JSON line per change and per use, appended under a lock, and read back.
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

/* ---- the audit log ---- */

int
cred_audit_append(const char *root, const struct audit *a, struct sp_err *e)
{
	char p[SP_PATH_MAX], line[SP_CRED_AUDIT_LINE_MAX];
	struct sp_db *db;
	json_t *o;
	size_t n;
	int fd, rc = -1;

	o = json_pack("{s:I, s:s}", "time", (json_int_t)a->time, "op", a->op);
	if (o == NULL)
		return sp_err_set(e, SP_E_AUDIT, 1, "audit record: no memory");
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
		return sp_err_set(e, SP_E_AUDIT, 1, "audit record over %d bytes",
		    SP_CRED_AUDIT_LINE_MAX);
	line[n] = '\0';
	if (sp_db_shared_take(&db, e) == -1)
		goto fail;
	if (db != NULL) {
		rc = sp_db_audit_add(db, a->time, line, e);
		sp_db_shared_give(db);
		if (rc == 0)
			return 0;
		goto fail;
	}
	line[n++] = '\n';
	if (cred_dir(root, e) == -1 ||
	    sp_path_fmt(p, sizeof p, e, "%s/creds/audit.log", root) == -1)
		goto fail;
	if ((fd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
	    O_NOFOLLOW, 0600)) == -1) {
		sp_err_sys(e, SP_E_AUDIT, "open %s", p);
		goto fail;
	}
	/* One write per line: O_APPEND keeps concurrent lines whole. */
	if (sp_path_adopt(fd, p, e) == -1)
		;
	else if (write(fd, line, n) != (ssize_t)n)
		sp_err_sys(e, SP_E_AUDIT, "append to %s", p);
	else
		rc = 0;
	close(fd);
	if (rc == 0)
		return 0;
fail:
	e->temp = 1;
	e->code = SP_E_AUDIT;
	return -1;
}

/* After a change made: the record, or an error that says it was made. */
int
cred_audit_change(const char *root, const char *op, const struct sp_cred *c,
    int64_t now, struct sp_err *e)
{
	struct audit a = { now, op, NULL, NULL, NULL, NULL, c, "done", NULL, 0 };
	char msg[sizeof e->msg];

	if (cred_audit_append(root, &a, e) == 0)
		return 0;
	snprintf(msg, sizeof msg, "%s", e->msg);
	return sp_err_set(e, SP_E_AUDIT, 1, "%s %s of %s done, but not audited: "
	    "%s", op, c->name, c->scope, msg);
}

struct audit_each {
	int64_t since;
	int (*fn)(json_t *rec, void *arg);
	void *arg;
};

/* One record, given to fn when it parses and is of time since or later;
 * 1 when fn said stop. */
static int
audit_line(const char *line, void *arg)
{
	struct audit_each *x = arg;
	json_t *rec, *t;

	rec = json_loads(line, JSON_REJECT_DUPLICATES, NULL);
	t = json_object_get(rec, "time");
	if (json_is_integer(t) && json_integer_value(t) >= x->since)
		return x->fn(rec, x->arg) != 0;
	json_decref(rec);
	return 0;
}

int
sp_cred_audit_each(const char *root, int64_t since,
    int (*fn)(json_t *rec, void *arg), void *arg, struct sp_err *e)
{
	char p[SP_PATH_MAX], line[SP_CRED_AUDIT_LINE_MAX + 2];
	struct audit_each x = { since, fn, arg };
	struct sp_db *db;
	int skipping = 0, rc = 0;
	FILE *f;

	if (sp_db_shared_take(&db, e) == -1)
		return -1;
	if (db != NULL) {
		rc = sp_db_audit_each(db, since, audit_line, &x, e);
		sp_db_shared_give(db);
		return rc == -1 ? -1 : 0;
	}
	if (sp_path_fmt(p, sizeof p, e, "%s/creds/audit.log", root) == -1)
		return -1;
	if ((f = fopen(p, "re")) == NULL) {
		if (errno == ENOENT)
			return 0;
		return sp_err_sys(e, SP_E_IO, "open %s", p);
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
		rc = audit_line(line, &x);
	}
	if (ferror(f)) {
		fclose(f);
		return sp_err_sys(e, SP_E_IO, "read %s", p);
	}
	fclose(f);
	return 0;
}
