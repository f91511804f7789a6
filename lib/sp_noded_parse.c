/*
 * sp_noded_parse: what a client of space-noded sends, checked before
 * anything is touched.  A request is one line of JSON, an object with "op"
 * from a closed list and the fields that op takes, no others.  Every path
 * is relative to SPACE_ROOT: 2 to SP_NODED_DEPTH components of
 * [A-Za-z0-9._@+-], none "." or "..", the first one an area the op may
 * touch.  Whether a path exists, and that no component of it is a symlink,
 * is sp_noded.c's to find out, beneath the root.
 */
#include <string.h>

#include "sp_storage.h"

/* A part of a path: the longest is a template's NAME@DIGEST. */
#define PART_MAX	(2 * SP_NAME_MAX + 1)

static const struct {
	const char *name;
	enum sp_noded_op op;
	int src;		/* takes "src" */
	int readonly;		/* takes "readonly" */
} ops[] = {
	{ "ping", SP_NODED_PING, 0, 0 },
	{ "subvol-create", SP_NODED_CREATE, 0, 0 },
	{ "subvol-snapshot", SP_NODED_SNAPSHOT, 1, 1 },
	{ "subvol-delete", SP_NODED_DELETE, 0, 0 },
};

/* The areas of SPACE_ROOT a path may name: where subvolumes are made and
 * taken apart, and where they are snapshotted from. */
static const char *const target_areas[] = {
	"sandboxes", "snapshots", "templates", "lineages", "pool", "tmp",
};
static const char *const source_areas[] = {
	"sandboxes", "snapshots", "templates", "lineages", "tmp",
};

static int
in(const char *s, size_t n, const char *const *list, size_t count)
{
	size_t i;

	for (i = 0; i < count; i++)
		if (strlen(list[i]) == n && memcmp(list[i], s, n) == 0)
			return 1;
	return 0;
}

int
sp_noded_path_check(const char *what, const char *p, int source,
    struct sp_err *e)
{
	static const char ok[] = "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._@+-";
	const char *c = p, *slash;
	size_t n, len = strlen(p);
	int depth = 0;

	if (len == 0 || len > SP_NODED_PATH_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s must be 1 to %d bytes",
		    what, SP_NODED_PATH_MAX);
	for (;;) {
		slash = strchr(c, '/');
		n = slash != NULL ? (size_t)(slash - c) : strlen(c);
		if (n == 0 || n > PART_MAX || strspn(c, ok) < n ||
		    (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' &&
		    c[1] == '.'))
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s '%.64s': each "
			    "part 1 to %d of [A-Za-z0-9._@+-], not . or .., "
			    "relative to SPACE_ROOT", what, p, PART_MAX);
		if (depth == 0 && !(source ? in(c, n, source_areas,
		    sizeof source_areas / sizeof source_areas[0]) :
		    in(c, n, target_areas,
		    sizeof target_areas / sizeof target_areas[0])))
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s '%.64s': not "
			    "in an area space-noded %s", what, p, source ?
			    "snapshots from" : "makes subvolumes in");
		if (++depth > SP_NODED_DEPTH)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s '%.64s': more "
			    "than %d parts", what, p, SP_NODED_DEPTH);
		if (slash == NULL)
			break;
		c = slash + 1;
	}
	if (depth < 2)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s '%.64s': an area "
		    "itself is not a subvolume space-noded touches", what, p);
	return 0;
}

static int
copy_path(json_t *req, const char *key, int source, char *out,
    struct sp_err *e)
{
	json_t *v = json_object_get(req, key);
	const char *s;

	if (!json_is_string(v))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s must be a string", key);
	s = json_string_value(v);
	if (strlen(s) != json_string_length(v))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s holds a NUL", key);
	if (sp_noded_path_check(key, s, source, e) == -1)
		return -1;
	memcpy(out, s, strlen(s) + 1);
	return 0;
}

int
sp_noded_parse(const char *line, size_t n, struct sp_noded_req *r,
    struct sp_err *e)
{
	json_error_t je;
	json_t *req, *v;
	const char *key, *op;
	size_t i;
	int rc = -1;

	memset(r, 0, sizeof *r);
	if (n > SP_NODED_LINE_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a request is at most %d "
		    "bytes", SP_NODED_LINE_MAX);
	if (!sp_utf8_valid(line, n))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a request is UTF-8");
	if ((req = json_loadb(line, n, JSON_REJECT_DUPLICATES, &je)) == NULL ||
	    !json_is_object(req)) {
		json_decref(req);
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a request is one JSON "
		    "object a line");
	}
	if ((op = json_string_value(json_object_get(req, "op"))) == NULL) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "a request names its op");
		goto out;
	}
	for (i = 0; i < sizeof ops / sizeof ops[0]; i++)
		if (strcmp(ops[i].name, op) == 0)
			break;
	if (i == sizeof ops / sizeof ops[0]) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "unknown op '%.32s'", op);
		goto out;
	}
	r->op = ops[i].op;
	/* Nothing the op does not take. */
	json_object_foreach(req, key, v) {
		if (strcmp(key, "op") != 0 && !(strcmp(key, "path") == 0 &&
		    r->op != SP_NODED_PING) && !(strcmp(key, "src") == 0 &&
		    ops[i].src) && !(strcmp(key, "readonly") == 0 &&
		    ops[i].readonly)) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "%s takes no '%.32s'",
			    op, key);
			goto out;
		}
	}
	if (r->op != SP_NODED_PING &&
	    copy_path(req, "path", 0, r->path, e) == -1)
		goto out;
	if (ops[i].src && copy_path(req, "src", 1, r->src, e) == -1)
		goto out;
	if ((v = json_object_get(req, "readonly")) != NULL) {
		if (!json_is_boolean(v)) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "readonly is true or false");
			goto out;
		}
		r->readonly = json_is_true(v);
	}
	rc = 0;
out:
	json_decref(req);
	return rc;
}
