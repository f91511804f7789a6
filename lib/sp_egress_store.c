/*
 * sp_egress_store: where egress policies are kept (sp_egress.h): a small
 * file each under the node's root, or, when nodes share a DB
 * (sp_db_shared_take), a row each there, so that a policy set on one node
 * holds on every node.  Reading is strict either way.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sp_net.h"
#include "sp_egress.h"

static int
scope_name_check(enum sp_egress_scope scope, const char *name,
    struct sp_err *e)
{
	switch (scope) {
	case SP_EGRESS_SANDBOX:
		return sp_id_check(name, e);
	case SP_EGRESS_TENANT:
		return sp_name_check("tenant", name, e);
	case SP_EGRESS_TEMPLATE:
		return sp_name_check("template", name, e);
	default:
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "no policy scope");
	}
}

int
sp_egress_path(const char *root, enum sp_egress_scope scope, const char *name,
    char *out, size_t n, struct sp_err *e)
{
	if (scope_name_check(scope, name, e) == -1)
		return -1;
	return sp_path_fmt(out, n, e, "%s/egress/%s%s.json", root,
	    scope == SP_EGRESS_TENANT ? "tenant-" :
	    scope == SP_EGRESS_TEMPLATE ? "template-" : "", name);
}

static int
sync_dir(const char *dir, struct sp_err *e)
{
	int fd, rc = 0;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_IO, "open %s", dir);
	if (fsync(fd) == -1)
		rc = sp_err_sys(e, SP_E_IO, "fsync %s", dir);
	close(fd);
	return rc;
}

int
sp_egress_policy_write(const char *root, enum sp_egress_scope scope,
    const char *name, const struct sp_egress_policy *p, struct sp_err *e)
{
	char dir[SP_PATH_MAX], path[SP_PATH_MAX], tmp[SP_PATH_MAX];
	struct sp_db *db = NULL;
	json_t *j = NULL;
	char *text = NULL;
	int fd = -1, rc = -1;

	tmp[0] = '\0';
	if (sp_egress_path(root, scope, name, path, sizeof path, e) == -1 ||
	    sp_path_fmt(dir, sizeof dir, e, "%s/egress", root) == -1 ||
	    sp_path_fmt(tmp, sizeof tmp, e, "%s/.%s.XXXXXX",
	    dir, strrchr(path, '/') + 1) == -1)
		return -1;
	j = json_pack("{s:i, s:o, s:o, s:I}", "version", 1,
	    "allow", sp_egress_rules_json(&p->allow),
	    "deny", sp_egress_rules_json(&p->deny),
	    "updated", (json_int_t)time(NULL));
	if (j == NULL || (text = json_dumps(j, JSON_COMPACT |
	    JSON_PRESERVE_ORDER)) == NULL) {
		sp_err_set(e, SP_E_NOMEM, 1, "egress policy: no memory");
		goto out;
	}
	if (sp_db_shared_take(&db, e) == -1)
		goto out;
	if (db != NULL) {
		rc = sp_db_doc_put(db, "egress", sp_egress_scope_name(scope),
		    name, text, 1, e);
		goto out;
	}
	/* Root's alone: a VM's jail must not read another's policy. */
	if (sp_path_mkdirs(dir, 0700, e) == -1)
		goto out;
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1) {
		sp_err_sys(e, SP_E_IO, "create %s", tmp);
		tmp[0] = '\0';
		goto out;
	}
	if (sp_path_adopt(fd, tmp, e) == -1)
		goto out;
	if (fchmod(fd, 0600) == -1 || sp_write_all(fd, text, strlen(text)) == -1 ||
	    sp_write_all(fd, "\n", 1) == -1 || fsync(fd) == -1) {
		sp_err_sys(e, SP_E_IO, "write %s", tmp);
		goto out;
	}
	if (close(fd) == -1) {
		fd = -1;
		sp_err_sys(e, SP_E_IO, "close %s", tmp);
		goto out;
	}
	fd = -1;
	sp_crashpoint("egress-before-rename");
	if (rename(tmp, path) == -1) {
		sp_err_sys(e, SP_E_IO, "rename to %s", path);
		goto out;
	}
	tmp[0] = '\0';
	if (sync_dir(dir, e) == -1)
		goto out;
	rc = 0;
out:
	if (fd != -1)
		close(fd);
	if (tmp[0] != '\0')
		unlink(tmp);
	sp_db_shared_give(db);
	free(text);
	json_decref(j);
	return rc;
}

static int
corrupt(struct sp_err *e, const char *path, const char *why)
{
	return sp_err_set(e, SP_E_CORRUPT, 0, "%s: %s", path, why);
}

/* The rules of a JSON array of strings into rs. */
static int
rules_from_json(json_t *a, struct sp_egress_rules *rs, const char *path,
    struct sp_err *e)
{
	char msg[sizeof e->msg];
	struct sp_egress_rule r;
	json_t *v;
	size_t i;

	if (!json_is_array(a) || json_array_size(a) > SP_EGRESS_RULES_MAX)
		return corrupt(e, path, "allow and deny are arrays of at most "
		    "256 rules");
	json_array_foreach(a, i, v) {
		if (!json_is_string(v))
			return corrupt(e, path, "a rule is a string");
		if (sp_egress_rule_parse(json_string_value(v),
		    json_string_length(v), &r, e) == -1 ||
		    sp_egress_rules_push(rs, &r, 0, e) == -1) {
			snprintf(msg, sizeof msg, "%s", e->msg);
			return sp_err_set(e, SP_E_CORRUPT, 0, "%s: %.400s", path,
			    msg);
		}
	}
	return 0;
}

/* A policy from buf[0..n), strictly; where names it in messages. */
static int
policy_parse(const char *buf, size_t n, const char *where,
    struct sp_egress_policy *p, struct sp_err *e)
{
	json_error_t je;
	json_t *j, *v;
	const char *k;
	int rc = -1;

	if (n > SP_EGRESS_FILE_MAX)
		return corrupt(e, where, "over 256 KiB");
	if ((j = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je)) == NULL ||
	    !json_is_object(j)) {
		corrupt(e, where, "not a JSON object");
		goto out;
	}
	json_object_foreach(j, k, v) {
		if (strcmp(k, "version") == 0) {
			if (!json_is_integer(v) || json_integer_value(v) != 1) {
				corrupt(e, where, "version is not 1");
				goto out;
			}
		} else if (strcmp(k, "updated") == 0) {
			if (!json_is_integer(v) || json_integer_value(v) < 0) {
				corrupt(e, where, "updated is not unix seconds");
				goto out;
			}
			p->updated = json_integer_value(v);
		} else if (strcmp(k, "allow") == 0 || strcmp(k, "deny") == 0) {
			if (rules_from_json(v, k[0] == 'a' ? &p->allow : &p->deny,
			    where, e) == -1)
				goto out;
		} else {
			corrupt(e, where, "an unknown field");
			goto out;
		}
	}
	if (json_object_get(j, "version") == NULL ||
	    json_object_get(j, "allow") == NULL ||
	    json_object_get(j, "deny") == NULL) {
		corrupt(e, where, "version, allow or deny missing");
		goto out;
	}
	rc = 0;
out:
	json_decref(j);
	return rc;
}

/* The policy file at path, whole, into *buf (malloc'd) and *n. */
static int
policy_file(const char *path, char **buf, size_t *n, struct sp_err *e)
{
	struct stat st;
	size_t got = 0, size;
	ssize_t r;
	int fd, rc = -1;

	*buf = NULL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) == -1) {
		if (errno == ENOENT)
			return sp_err_set(e, SP_E_NOT_FOUND, 0, "no policy %s", path);
		if (errno == ELOOP)
			return corrupt(e, path, "a symlink");
		return sp_err_sys(e, SP_E_IO, "open %s", path);
	}
	if (fstat(fd, &st) == -1) {
		sp_err_sys(e, SP_E_IO, "stat %s", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > SP_EGRESS_FILE_MAX) {
		corrupt(e, path, "not a regular file of at most 256 KiB");
		goto out;
	}
	/* A buffer of the file's size, and a byte to see it did not grow:
	 * writers replace the file, they never write into it. */
	size = (size_t)st.st_size;
	if ((*buf = malloc(size + 1)) == NULL) {
		sp_err_set(e, SP_E_NOMEM, 1, "%s: no memory", path);
		goto out;
	}
	while (got <= size) {
		r = read(fd, *buf + got, size + 1 - got);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			sp_err_sys(e, SP_E_IO, "read %s", path);
			goto out;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	if (got != size) {
		corrupt(e, path, "changed while it was read");
		goto out;
	}
	*n = got;
	rc = 0;
out:
	if (rc == -1) {
		free(*buf);
		*buf = NULL;
	}
	close(fd);
	return rc;
}

int
sp_egress_policy_read(const char *root, enum sp_egress_scope scope,
    const char *name, struct sp_egress_policy *p, struct sp_err *e)
{
	char where[SP_PATH_MAX];
	struct sp_db *db;
	char *buf = NULL;
	size_t n = 0;
	int rc;

	p->allow.n = p->deny.n = 0;
	p->source = SP_EGRESS_NONE;
	p->source_name[0] = '\0';
	p->updated = 0;
	if (sp_egress_path(root, scope, name, where, sizeof where, e) == -1 ||
	    sp_db_shared_take(&db, e) == -1)
		return -1;
	if (db != NULL) {
		snprintf(where, sizeof where, "egress policy row %s/%s",
		    sp_egress_scope_name(scope), name);
		rc = sp_db_doc_get(db, "egress", sp_egress_scope_name(scope),
		    name, &buf, e);
		sp_db_shared_give(db);
		if (rc == 0)
			n = strlen(buf);
	} else
		rc = policy_file(where, &buf, &n, e);
	if (rc == 0)
		rc = policy_parse(buf, n, where, p, e);
	free(buf);
	if (rc == -1) {
		p->allow.n = p->deny.n = 0;
		return -1;
	}
	p->source = scope;
	snprintf(p->source_name, sizeof p->source_name, "%s", name);
	return 0;
}

int
sp_egress_policy_remove(const char *root, enum sp_egress_scope scope,
    const char *name, int *removed, struct sp_err *e)
{
	char path[SP_PATH_MAX], dir[SP_PATH_MAX];
	struct sp_db *db;
	int rc;

	*removed = 0;
	if (sp_egress_path(root, scope, name, path, sizeof path, e) == -1 ||
	    sp_path_fmt(dir, sizeof dir, e, "%s/egress", root) == -1 ||
	    sp_db_shared_take(&db, e) == -1)
		return -1;
	if (db != NULL) {
		rc = sp_db_doc_delete(db, "egress", sp_egress_scope_name(scope),
		    name, removed, e);
		sp_db_shared_give(db);
		return rc;
	}
	if (unlink(path) == -1) {
		if (errno == ENOENT)
			return 0;
		return sp_err_sys(e, SP_E_IO, "remove %s", path);
	}
	*removed = 1;
	return sync_dir(dir, e);
}

int
sp_egress_policy_load(const char *root, const char *id, const char *tenant,
    const char *template, struct sp_egress_policy *p, struct sp_err *e)
{
	char tname[SP_NAME_MAX + 1];
	struct {
		enum sp_egress_scope scope;
		const char *name;
	} lv[3];
	size_t i, n;

	lv[0].scope = SP_EGRESS_SANDBOX;
	lv[0].name = id;
	lv[1].scope = SP_EGRESS_TENANT;
	lv[1].name = tenant != NULL && sp_name_check("tenant", tenant, NULL) == 0 ?
	    tenant : NULL;
	lv[2].scope = SP_EGRESS_TEMPLATE;
	lv[2].name = NULL;
	if (template != NULL) {
		n = strcspn(template, "@");
		if (n <= SP_NAME_MAX) {
			memcpy(tname, template, n);
			tname[n] = '\0';
			if (sp_name_check("template", tname, NULL) == 0)
				lv[2].name = tname;
		}
	}
	if (id != NULL && sp_id_check(id, e) == -1)
		return -1;
	for (i = 0; i < 3; i++) {
		if (lv[i].name == NULL)
			continue;
		if (sp_egress_policy_read(root, lv[i].scope, lv[i].name, p, e) == 0)
			return 0;
		if (e->code != SP_E_NOT_FOUND)
			return -1;
	}
	p->allow.n = p->deny.n = 0;
	p->source = SP_EGRESS_NONE;
	p->source_name[0] = '\0';
	p->updated = 0;
	return 0;
}
