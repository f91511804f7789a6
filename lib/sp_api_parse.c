/*
 * sp_api_parse.c: what a client of the HTTP API sends, parsed strictly and
 * bounded before anything acts on it: the route of a method and path, a
 * JSON body, Connect's envelopes, a guest path.  No I/O here: the fuzz
 * harness (tests/fuzz) links this file alone.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "sp_api.h"

/*
 * The routes.  A pattern's segment ":id" is a sandbox id, ":snap" a
 * snapshot id, ":pid" a process id, ":name" a name (sp_name_check); any
 * other segment is itself.
 */
static const struct {
	const char *method, *pattern;
	enum sp_api_kind kind;
	const char *name;
	int stream;
} routes[] = {
	/* The native API: the commands' verbs, JSON over HTTP. */
	{ "GET", "/v1/sandboxes", SP_API_NATIVE, "list", 0 },
	{ "POST", "/v1/sandboxes", SP_API_NATIVE, "create", 0 },
	{ "GET", "/v1/sandboxes/:id", SP_API_NATIVE, "get", 0 },
	{ "DELETE", "/v1/sandboxes/:id", SP_API_NATIVE, "remove", 0 },
	{ "POST", "/v1/sandboxes/:id/pause", SP_API_NATIVE, "pause", 0 },
	{ "POST", "/v1/sandboxes/:id/resume", SP_API_NATIVE, "resume", 0 },
	{ "POST", "/v1/sandboxes/:id/stop", SP_API_NATIVE, "stop", 0 },
	{ "POST", "/v1/sandboxes/:id/start", SP_API_NATIVE, "start", 0 },
	{ "POST", "/v1/sandboxes/:id/suspend", SP_API_NATIVE, "suspend", 0 },
	{ "POST", "/v1/sandboxes/:id/restore", SP_API_NATIVE, "restore", 0 },
	{ "GET", "/v1/sandboxes/:id/snapshots", SP_API_NATIVE, "snapshots", 0 },
	{ "POST", "/v1/sandboxes/:id/snapshots", SP_API_NATIVE, "snapshot", 0 },
	{ "DELETE", "/v1/sandboxes/:id/snapshots/:snap", SP_API_NATIVE,
	    "snapshot.remove", 0 },
	{ "POST", "/v1/sandboxes/:id/rollback", SP_API_NATIVE, "rollback", 0 },
	{ "POST", "/v1/sandboxes/:id/fork", SP_API_NATIVE, "fork", 0 },
	{ "POST", "/v1/sandboxes/:id/exec", SP_API_NATIVE, "exec", 1 },
	{ "GET", "/v1/sandboxes/:id/processes", SP_API_NATIVE, "processes", 0 },
	{ "POST", "/v1/sandboxes/:id/processes/:pid/stdin", SP_API_NATIVE,
	    "stdin", 0 },
	{ "POST", "/v1/sandboxes/:id/processes/:pid/signal", SP_API_NATIVE,
	    "signal", 0 },
	{ "GET", "/v1/sandboxes/:id/files", SP_API_NATIVE, "file.read", 0 },
	{ "PUT", "/v1/sandboxes/:id/files", SP_API_NATIVE, "file.write", 0 },
	{ "GET", "/v1/sandboxes/:id/dir", SP_API_NATIVE, "dir", 0 },
	{ "GET", "/v1/sandboxes/:id/tar", SP_API_NATIVE, "tar.out", 0 },
	{ "PUT", "/v1/sandboxes/:id/tar", SP_API_NATIVE, "tar.in", 0 },
	{ "GET", "/v1/sandboxes/:id/egress", SP_API_NATIVE, "egress.get", 0 },
	{ "PUT", "/v1/sandboxes/:id/egress", SP_API_NATIVE, "egress.set", 0 },
	{ "DELETE", "/v1/sandboxes/:id/egress", SP_API_NATIVE, "egress.remove",
	    0 },
	{ "GET", "/v1/egress", SP_API_NATIVE, "tenant.egress.get", 0 },
	{ "PUT", "/v1/egress", SP_API_NATIVE, "tenant.egress.set", 0 },
	{ "DELETE", "/v1/egress", SP_API_NATIVE, "tenant.egress.remove", 0 },
	{ "GET", "/v1/credentials", SP_API_NATIVE, "creds", 0 },
	{ "POST", "/v1/credentials", SP_API_NATIVE, "cred.add", 0 },
	{ "PUT", "/v1/credentials/:name", SP_API_NATIVE, "cred.rotate", 0 },
	{ "DELETE", "/v1/credentials/:name", SP_API_NATIVE, "cred.remove", 0 },
	{ "GET", "/v1/templates", SP_API_NATIVE, "templates", 0 },
	{ "GET", "/v1/quota", SP_API_NATIVE, "quota", 0 },
	/* E2B's REST API, as its SDK calls it. */
	{ "POST", "/sandboxes", SP_API_E2B, "e2b.create", 0 },
	{ "POST", "/v2/sandboxes", SP_API_E2B, "e2b.create", 0 },
	{ "GET", "/sandboxes", SP_API_E2B, "e2b.list", 0 },
	{ "GET", "/v2/sandboxes", SP_API_E2B, "e2b.list", 0 },
	{ "GET", "/sandboxes/:id", SP_API_E2B, "e2b.get", 0 },
	{ "DELETE", "/sandboxes/:id", SP_API_E2B, "e2b.kill", 0 },
	{ "POST", "/sandboxes/:id/timeout", SP_API_E2B, "e2b.timeout", 0 },
	{ "POST", "/sandboxes/:id/refreshes", SP_API_E2B, "e2b.refresh", 0 },
	{ "POST", "/sandboxes/:id/pause", SP_API_E2B, "e2b.pause", 0 },
	{ "POST", "/sandboxes/:id/resume", SP_API_E2B, "e2b.connect", 0 },
	{ "POST", "/sandboxes/:id/connect", SP_API_E2B, "e2b.connect", 0 },
	{ "POST", "/v2/sandboxes/:id/connect", SP_API_E2B, "e2b.connect", 0 },
	{ "GET", "/sandboxes/:id/metrics", SP_API_E2B, "e2b.unsupported", 0 },
	{ "GET", "/sandboxes/:id/logs", SP_API_E2B, "e2b.unsupported", 0 },
	{ "GET", "/v2/sandboxes/:id/logs", SP_API_E2B, "e2b.unsupported", 0 },
	{ "POST", "/sandboxes/:id/snapshots", SP_API_E2B, "e2b.unsupported", 0 },
	{ "POST", "/sandboxes/:id/fork", SP_API_E2B, "e2b.unsupported", 0 },
	{ "PUT", "/sandboxes/:id/network", SP_API_E2B, "e2b.unsupported", 0 },
	{ "GET", "/snapshots", SP_API_E2B, "e2b.unsupported", 0 },
	/* E2B's guest API (envd), with E2b-Sandbox-Id naming the sandbox. */
	{ "GET", "/health", SP_API_ENVD, "health", 0 },
	{ "GET", "/envs", SP_API_ENVD, "envs", 0 },
	{ "GET", "/files", SP_API_ENVD, "files.get", 0 },
	{ "POST", "/files", SP_API_ENVD, "files.post", 0 },
	{ "POST", "/process.Process/Start", SP_API_ENVD, "Process.Start", 1 },
	{ "POST", "/process.Process/Connect", SP_API_ENVD, "Process.Connect", 1 },
	{ "POST", "/process.Process/List", SP_API_ENVD, "Process.List", 0 },
	{ "POST", "/process.Process/SendInput", SP_API_ENVD,
	    "Process.SendInput", 0 },
	{ "POST", "/process.Process/StreamInput", SP_API_ENVD,
	    "Process.StreamInput", 1 },
	{ "POST", "/process.Process/SendSignal", SP_API_ENVD,
	    "Process.SendSignal", 0 },
	{ "POST", "/process.Process/CloseStdin", SP_API_ENVD,
	    "Process.CloseStdin", 0 },
	{ "POST", "/process.Process/Update", SP_API_ENVD, "Process.Update", 0 },
	{ "POST", "/filesystem.Filesystem/Stat", SP_API_ENVD,
	    "Filesystem.Stat", 0 },
	{ "POST", "/filesystem.Filesystem/MakeDir", SP_API_ENVD,
	    "Filesystem.MakeDir", 0 },
	{ "POST", "/filesystem.Filesystem/Move", SP_API_ENVD,
	    "Filesystem.Move", 0 },
	{ "POST", "/filesystem.Filesystem/ListDir", SP_API_ENVD,
	    "Filesystem.ListDir", 0 },
	{ "POST", "/filesystem.Filesystem/Remove", SP_API_ENVD,
	    "Filesystem.Remove", 0 },
	{ "POST", "/filesystem.Filesystem/WatchDir", SP_API_ENVD,
	    "Filesystem.WatchDir", 1 },
	{ "POST", "/filesystem.Filesystem/CreateWatcher", SP_API_ENVD,
	    "Filesystem.CreateWatcher", 0 },
	{ "POST", "/filesystem.Filesystem/GetWatcherEvents", SP_API_ENVD,
	    "Filesystem.GetWatcherEvents", 0 },
	{ "POST", "/filesystem.Filesystem/RemoveWatcher", SP_API_ENVD,
	    "Filesystem.RemoveWatcher", 0 },
};

#define SEGS_MAX	8
#define PATH_MAX_LEN	512

/* Splits path ("/a/b") into at most SEGS_MAX segments; -1 when it is not
 * one of those (empty segments, too long, too many). */
static int
split(const char *path, char *buf, size_t n, char *seg[SEGS_MAX], int *nseg)
{
	char *p, *s;

	if (path[0] != '/' || strlen(path) >= n)
		return -1;
	memcpy(buf, path + 1, strlen(path));
	*nseg = 0;
	if (buf[0] == '\0')
		return 0;
	for (p = buf; (s = strsep(&p, "/")) != NULL;) {
		if (*s == '\0' || *nseg == SEGS_MAX)
			return -1;
		seg[(*nseg)++] = s;
	}
	return 0;
}

static int
is_pid(const char *s)
{
	char *end;
	long v;

	if (*s < '1' || *s > '9' || strlen(s) > 10)
		return 0;
	v = strtol(s, &end, 10);
	return *end == '\0' && v > 0 && v <= INT_MAX;
}

/* 1 when the segments match pattern, with its parameters put in r. */
static int
match(const char *pattern, char *seg[], int nseg, struct sp_api_route *r)
{
	char pbuf[PATH_MAX_LEN], *pseg[SEGS_MAX];
	struct sp_err ne;
	int np, i;

	if (split(pattern, pbuf, sizeof pbuf, pseg, &np) == -1 || np != nseg)
		return 0;
	r->id[0] = r->arg[0] = r->cred[0] = r->ref[0] = '\0';
	for (i = 0; i < np; i++) {
		/* This project's API names a sandbox by its id or name. */
		if (strcmp(pseg[i], ":id") == 0 && strncmp(pattern, "/v1/",
		    4) == 0 && sp_handle_valid(seg[i])) {
			snprintf(r->ref, sizeof r->ref, "%s", seg[i]);
			continue;
		}
		if (strcmp(pseg[i], ":id") == 0 || strcmp(pseg[i], ":snap") == 0) {
			if (!sp_id_valid(seg[i]))
				return 0;
			snprintf(pseg[i][1] == 'i' ? r->id : r->arg, SP_ID_LEN + 1,
			    "%s", seg[i]);
		} else if (strcmp(pseg[i], ":name") == 0) {
			if (sp_name_check("name", seg[i], &ne) == -1)
				return 0;
			snprintf(r->cred, sizeof r->cred, "%s", seg[i]);
		} else if (strcmp(pseg[i], ":pid") == 0) {
			if (!is_pid(seg[i]))
				return 0;
			snprintf(r->arg, sizeof r->arg, "%s", seg[i]);
		} else if (strcmp(pseg[i], seg[i]) != 0)
			return 0;
	}
	return 1;
}

int
sp_api_route(const char *method, const char *path, struct sp_api_route *r,
    struct sp_err *e)
{
	char buf[PATH_MAX_LEN], *seg[SEGS_MAX];
	int nseg, path_known = 0;
	size_t i;

	memset(r, 0, sizeof *r);
	if (method == NULL || path == NULL ||
	    split(path, buf, sizeof buf, seg, &nseg) == -1)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no such path");
	for (i = 0; i < sizeof routes / sizeof routes[0]; i++) {
		if (!match(routes[i].pattern, seg, nseg, r))
			continue;
		path_known = 1;
		if (strcmp(routes[i].method, method) != 0)
			continue;
		r->kind = routes[i].kind;
		r->name = routes[i].name;
		r->stream = routes[i].stream;
		return 0;
	}
	memset(r, 0, sizeof *r);
	if (path_known)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "%.16s is not a method of "
		    "this path", method);
	/* E2B's template and volume calls: answered in its error shape. */
	if (nseg > 0 && (strcmp(seg[0], "templates") == 0 ||
	    strcmp(seg[0], "volumes") == 0 || (nseg > 1 &&
	    strcmp(seg[0], "v2") == 0 && strcmp(seg[1], "templates") == 0) ||
	    (nseg > 1 && strcmp(seg[0], "v3") == 0))) {
		r->kind = SP_API_E2B;
		r->name = "e2b.unsupported";
		return 0;
	}
	return sp_err_set(e, SP_E_NOT_FOUND, 0, "no such path");
}

int
sp_api_routes_each(void (*fn)(const char *method, const char *path,
    enum sp_api_kind kind, const char *name, void *arg), void *arg)
{
	char path[PATH_MAX_LEN], *o;
	const char *p;
	size_t i;

	for (i = 0; i < sizeof routes / sizeof routes[0]; i++) {
		/* ":id" -> "{id}", as OpenAPI writes a parameter. */
		for (p = routes[i].pattern, o = path; *p != '\0' &&
		    o < path + sizeof path - 3; p++) {
			if (*p == ':') {
				*o++ = '{';
				while (p[1] != '\0' && p[1] != '/')
					*o++ = *++p;
				*o++ = '}';
			} else
				*o++ = *p;
		}
		*o = '\0';
		fn(routes[i].method, path, routes[i].kind, routes[i].name, arg);
	}
	return 0;
}

static int
depth_ok(json_t *j, int depth)
{
	const char *k;
	json_t *v;
	size_t i;

	if (depth > SP_API_DEPTH_MAX)
		return 0;
	if (json_is_object(j)) {
		json_object_foreach(j, k, v)
			if (!depth_ok(v, depth + 1))
				return 0;
	} else if (json_is_array(j)) {
		json_array_foreach(j, i, v)
			if (!depth_ok(v, depth + 1))
				return 0;
	}
	return 1;
}

int
sp_api_body_json(const void *p, size_t n, json_t **out, struct sp_err *e)
{
	json_error_t je;
	json_t *j;

	*out = NULL;
	if (n > SP_API_JSON_MAX)
		return sp_err_set(e, SP_E_TOO_BIG, 0, "a JSON body is at most %d "
		    "bytes", SP_API_JSON_MAX);
	if (n == 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a JSON object is needed");
	/* Whole, an object, no NUL inside, each key once. */
	j = json_loadb(p, n, JSON_REJECT_DUPLICATES, &je);
	if (j == NULL)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "malformed JSON at byte "
		    "%d: %.100s", je.position, je.text);
	if (!json_is_object(j) || !depth_ok(j, 0)) {
		json_decref(j);
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a JSON object of at most "
		    "%d levels is needed", SP_API_DEPTH_MAX);
	}
	*out = j;
	return 0;
}

int
sp_connect_unwrap(const void *p, size_t n, json_t **out, struct sp_err *e)
{
	const unsigned char *b = p;
	uint32_t len;

	*out = NULL;
	if (n < 5)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a Connect envelope is "
		    "needed");
	len = sp_be32_get(b + 1);
	if (b[0] & SP_CONNECT_COMPRESSED)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "compressed messages are "
		    "not taken");
	if (b[0] != 0 || (size_t)len != n - 5)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "one Connect message is "
		    "needed, of the length its envelope says");
	return sp_api_body_json(b + 5, len, out, e);
}

int
sp_connect_wrap(char **buf, size_t *len, int flags, json_t *json)
{
	size_t n;
	char *s, *nb;

	s = json_dumps(json, JSON_COMPACT);
	json_decref(json);
	if (s == NULL)
		return -1;
	n = strlen(s);
	if ((nb = realloc(*buf, *len + 5 + n)) == NULL) {
		free(s);
		return -1;
	}
	nb[*len] = (char)flags;
	nb[*len + 1] = (char)(n >> 24);
	nb[*len + 2] = (char)(n >> 16);
	nb[*len + 3] = (char)(n >> 8);
	nb[*len + 4] = (char)n;
	memcpy(nb + *len + 5, s, n);
	*buf = nb;
	*len += 5 + n;
	free(s);
	return 0;
}

const char *
sp_connect_code(const struct sp_err *e)
{
	switch (e->code) {
	case SP_E_BAD_INPUT:
	case SP_E_EXEC_FAILED:
		return "invalid_argument";
	case SP_E_NOT_FOUND:
		return "not_found";
	case SP_E_EXISTS:
		return "already_exists";
	case SP_E_UNAUTHORIZED:
		return "unauthenticated";
	case SP_E_DENIED:
		return "permission_denied";
	case SP_E_RATE_LIMITED:
	case SP_E_QUOTA_EXCEEDED:
	case SP_E_TOO_BIG:
	case SP_E_FULL:
	case SP_E_NO_SPACE:
		return "resource_exhausted";
	case SP_E_BAD_STATE:
	case SP_E_NOT_RUNNING:
	case SP_E_STOPPED:
	case SP_E_NOT_EMPTY:
	case SP_E_IN_USE:
		return "failed_precondition";
	case SP_E_BUSY:
		return "unavailable";
	case SP_E_TIMED_OUT:
		return "deadline_exceeded";
	default:
		return e->temp ? "unavailable" : "internal";
	}
}

int
sp_api_guest_path(const char *in, const char *home, char *out, size_t n,
    struct sp_err *e)
{
	char buf[SP_PATH_MAX * 2], *seg[SP_PATH_MAX / 2], *p, *s;
	size_t nseg = 0, i, len = 0;

	if (in == NULL || *in == '\0')
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a path is needed");
	if (strlen(in) >= SP_PATH_MAX || strlen(home) >= SP_PATH_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a path is at most %d "
		    "bytes", SP_PATH_MAX - 1);
	snprintf(buf, sizeof buf, "%s%s%s", in[0] == '/' ? "" : home,
	    in[0] == '/' ? "" : "/", in);
	for (p = buf; (s = strsep(&p, "/")) != NULL;) {
		if (*s == '\0' || strcmp(s, ".") == 0)
			continue;
		if (strcmp(s, "..") == 0) {
			if (nseg > 0)
				nseg--;
			continue;
		}
		if (nseg == sizeof seg / sizeof seg[0])
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "path too deep");
		seg[nseg++] = s;
	}
	if (n < 2)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "no room for the path");
	out[0] = '/';
	out[1] = '\0';
	len = nseg == 0 ? 1 : 0;
	for (i = 0; i < nseg; i++) {
		if (len + 1 + strlen(seg[i]) + 1 > n || len + 1 +
		    strlen(seg[i]) >= SP_PATH_MAX)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "path too long");
		out[len++] = '/';
		memcpy(out + len, seg[i], strlen(seg[i]) + 1);
		len += strlen(seg[i]);
	}
	return 0;
}

int
sp_api_env_check(const char *name, const char *value, struct sp_err *e)
{
	size_t n = strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789_"), i;

	if (n == 0 || name[n] != '\0' || (name[0] >= '0' && name[0] <= '9') ||
	    n > 256 || strlen(value) > 4096 ||
	    !sp_utf8_valid(value, strlen(value)))
		goto bad;
	for (i = 0; value[i] != '\0'; i++)
		if ((unsigned char)value[i] < 0x20)
			goto bad;
	return 0;
bad:
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "environment variable '%.64s': "
	    "a name of letters, digits and _, a value of valid UTF-8 without "
	    "control characters", name);
}

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
sp_api_url_decode(const char *in, char *out, size_t n)
{
	size_t o = 0;
	int h, l;

	for (; *in != '\0'; in++) {
		if (o + 1 >= n)
			return -1;
		if (*in == '%') {
			if ((h = hexval(in[1])) < 0 || (l = hexval(in[2])) < 0 ||
			    (h == 0 && l == 0))
				return -1;
			out[o++] = (char)(h * 16 + l);
			in += 2;
		} else
			out[o++] = *in == '+' ? ' ' : *in;
	}
	out[o] = '\0';
	return 0;
}
