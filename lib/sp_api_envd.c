/*
 * sp_api_envd.c: E2B's guest API (envd), served on the host and carried
 * out by the sandbox's space-daemon over its channel: nothing of E2B runs
 * in the guest.  Connect RPC with the JSON codec: a unary call is a JSON
 * body both ways; a server-streaming call is one enveloped request and a
 * stream of enveloped answers, the last with the end-of-stream flag.
 * Uploads and downloads are /files.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sp_api.h"
#include "sp_api_int.h"

#define LIST_DEPTH_MAX	8

/* ---- helpers ---- */

/* A base64 string of a message into a new buffer; -1 when it is none. */
static int
unb64(json_t *v, unsigned char **out, size_t *n)
{
	const char *s = json_string_value(v);
	size_t len;

	*out = NULL;
	*n = 0;
	if (s == NULL)
		return -1;
	len = strlen(s);
	if ((*out = malloc(len / 4 * 3 + 3)) == NULL)
		return -1;
	if (sodium_base642bin(*out, len / 4 * 3 + 3, s, len, NULL, n, NULL,
	    sodium_base64_VARIANT_ORIGINAL) != 0) {
		free(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}

/* The user of Authorization: Basic base64("user:"), or NULL (the guest's
 * default). */
static int
basic_user(struct sp_api_call *c, char *out, size_t n, struct sp_err *e)
{
	const char *a = c->header(c, "Authorization");
	unsigned char buf[256];
	size_t len;
	char *colon;

	out[0] = '\0';
	if (a == NULL || strncasecmp(a, "Basic ", 6) != 0)
		return 0;
	if (sodium_base642bin(buf, sizeof buf - 1, a + 6, strlen(a + 6), NULL,
	    &len, NULL, sodium_base64_VARIANT_ORIGINAL) != 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "Authorization: Basic "
		    "USER: in base64");
	if (memchr(buf, '\0', len) != NULL)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "bad user name");
	buf[len] = '\0';
	if ((colon = strchr((char *)buf, ':')) != NULL)
		*colon = '\0';
	if (buf[0] == '\0')
		return 0;
	if (strlen((char *)buf) >= n || sp_name_check("user", (char *)buf,
	    e) == -1)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "bad user name");
	memcpy(out, buf, strlen((char *)buf) + 1);
	return 0;
}

/* The sandbox E2b-Sandbox-Id names, the caller's and running here. */
static int
sandbox_here(struct sp_api_call *c, struct sp_err *e)
{
	struct sp_sandbox_row row;
	int rc = 0;

	if (sp_api_sandbox_here(c, c->route.id, &row, e) == -1)
		return -1;
	if (row.state != SP_ST_RUNNING)
		rc = sp_err_set(e, SP_E_NOT_RUNNING, 0, "sandbox %s is %s",
		    row.id, sp_state_name(row.state));
	sp_db_row_release(&row);
	return rc;
}

static int
rpc_fail(struct sp_api_call *c, const struct sp_err *e)
{
	int st;

	sp_api_fail(c, e);
	/* Connect's HTTP status of its code. */
	st = strcmp(sp_connect_code(e), "invalid_argument") == 0 ? 400 :
	    strcmp(sp_connect_code(e), "failed_precondition") == 0 ? 412 :
	    c->status;
	c->status = st;
	return 0;
}

static int
unimplemented(struct sp_api_call *c, const char *what)
{
	struct sp_err e;

	sp_err_set(&e, SP_E_BAD_INPUT, 0, "%s is not supported by this server "
	    "(space-apid)", what);
	sp_api_json(c, 501, json_pack("{s:s, s:s}", "code", "unimplemented",
	    "message", e.msg));
	c->err = e;
	c->shaped = 1;
	return 0;
}

static int
open_chan(struct sp_api_call *c, struct sp_chan **ch, struct sp_err *e)
{
	return sp_sandbox_chan(c->x, c->route.id, ch, e);
}

/* "-rwxr-xr-x" of a mode and type. */
static void
perm_text(const char *type, int mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";
	int i;

	out[0] = strcmp(type, "dir") == 0 ? 'd' : strcmp(type, "symlink") == 0 ?
	    'l' : '-';
	for (i = 0; i < 9; i++)
		out[1 + i] = mode & (0400 >> i) ? rwx[i] : '-';
	out[10] = '\0';
}

static json_t *
id_name(json_t *v)
{
	json_int_t n = json_integer_value(v);
	char buf[24];

	if (n == 0)
		return json_string("root");
	snprintf(buf, sizeof buf, "%lld", (long long)n);
	return json_string(buf);
}

/* An EntryInfo of a stat object of the daemon's, for path. */
static json_t *
entry_info(const char *path, json_t *st)
{
	const char *type = json_string_value(json_object_get(st, "type")),
	    *base = strrchr(path, '/');
	char perm[11], mt[40];
	json_t *o, *tgt;
	struct tm tm;
	time_t t;
	int mode = (int)json_integer_value(json_object_get(st, "mode"));

	if (type == NULL)
		type = "other";
	perm_text(type, mode, perm);
	t = (time_t)json_number_value(json_object_get(st, "mtime"));
	gmtime_r(&t, &tm);
	strftime(mt, sizeof mt, "%Y-%m-%dT%H:%M:%SZ", &tm);
	o = json_pack("{s:s, s:s, s:s, s:I, s:i, s:s, s:o, s:o, s:s, s:{}}",
	    "name", base && base[1] ? base + 1 : path, "type",
	    strcmp(type, "dir") == 0 ? "FILE_TYPE_DIRECTORY" :
	    strcmp(type, "symlink") == 0 ? "FILE_TYPE_SYMLINK" :
	    strcmp(type, "file") == 0 ? "FILE_TYPE_FILE" :
	    "FILE_TYPE_UNSPECIFIED", "path", path, "size",
	    (json_int_t)json_integer_value(json_object_get(st, "size")),
	    "mode", mode & 07777, "permissions", perm, "owner",
	    id_name(json_object_get(st, "uid")), "group",
	    id_name(json_object_get(st, "gid")), "modifiedTime", mt,
	    "metadata");
	if (o != NULL && (tgt = json_object_get(st, "target")) != NULL)
		json_object_set(o, "symlinkTarget", tgt);
	return o;
}

/* The "path" of a request body as a guest path (relative to the user's
 * home: /root for root, else /home/USER). */
static int
body_path(json_t *body, const char *key, const char *user, char *out,
    size_t n, struct sp_err *e)
{
	char home[SP_NAME_MAX + 8];

	sp_api_home(user, home, sizeof home);
	return sp_api_guest_path(json_string_value(json_object_get(body, key)),
	    home, out, n, e);
}

/* ---- Filesystem ---- */

struct lister {
	json_t *arr;
	const char *dir;
	struct sp_chan *ch;
	int depth, max;
	int n;
	struct sp_err err;
	int failed;
};

static int list_dir(struct lister *l, const char *dir, int depth);

static int
list1(json_t *ent, void *arg)
{
	struct lister *l = arg;
	const char *name = json_string_value(json_object_get(ent, "name"));
	char path[SP_PATH_MAX];

	if (name == NULL || ++l->n > SP_FS_LIST_MAX)
		return -1;
	snprintf(path, sizeof path, "%s%s%s", l->dir, strcmp(l->dir, "/") ?
	    "/" : "", name);
	json_array_append_new(l->arr, entry_info(path, ent));
	return 0;
}

static int
list_dir(struct lister *l, const char *dir, int depth)
{
	json_t *arr = json_array(), *ent;
	struct lister sub = *l;
	size_t i;
	int rc;

	sub.arr = arr;
	sub.dir = dir;
	rc = sp_fs_list(l->ch, dir, list1, &sub, NULL, &l->err);
	l->n = sub.n;
	json_array_foreach(arr, i, ent) {
		json_array_append(l->arr, ent);
		if (rc == 0 && depth < l->max && strcmp(json_string_value(
		    json_object_get(ent, "type")), "FILE_TYPE_DIRECTORY") == 0 &&
		    list_dir(l, json_string_value(json_object_get(ent, "path")),
		    depth + 1) == -1)
			rc = -1;
	}
	json_decref(arr);
	return rc;
}

static int
filesystem(struct sp_api_call *c, const char *m, json_t *body,
    const char *user)
{
	char path[SP_PATH_MAX], to[SP_PATH_MAX];
	struct sp_chan *ch = NULL;
	json_t *st = NULL, *out = NULL;
	struct lister l;
	struct sp_err e;
	int rc = -1;
	json_int_t depth;

	if (body_path(body, strcmp(m, "Move") == 0 ? "source" : "path", user,
	    path, sizeof path, &e) == -1 || (strcmp(m, "Move") == 0 &&
	    body_path(body, "destination", user, to, sizeof to, &e) == -1) ||
	    open_chan(c, &ch, &e) == -1)
		goto out;
	if (strcmp(m, "Stat") == 0) {
		if (sp_fs_stat(ch, path, 0, &st, &e) == -1)
			goto out;
		out = json_pack("{s:o}", "entry", entry_info(path, st));
	} else if (strcmp(m, "MakeDir") == 0) {
		if (sp_fs_stat(ch, path, 0, &st, &e) == 0) {
			sp_err_set(&e, SP_E_EXISTS, 0, "%s exists", path);
			goto out;
		}
		if (e.code != SP_E_NOT_FOUND ||
		    sp_fs_mkdir(ch, path, 1, 0755, &e) == -1 ||
		    sp_fs_stat(ch, path, 0, &st, &e) == -1)
			goto out;
		out = json_pack("{s:o}", "entry", entry_info(path, st));
	} else if (strcmp(m, "Move") == 0) {
		if (sp_fs_rename(ch, path, to, &e) == -1 ||
		    sp_fs_stat(ch, to, 0, &st, &e) == -1)
			goto out;
		out = json_pack("{s:o}", "entry", entry_info(to, st));
	} else if (strcmp(m, "Remove") == 0) {
		if (sp_fs_remove(ch, path, 1, &e) == -1)
			goto out;
		out = json_object();
	} else {	/* ListDir */
		depth = json_integer_value(json_object_get(body, "depth"));
		if (depth < 0 || depth > LIST_DEPTH_MAX) {
			sp_err_set(&e, SP_E_BAD_INPUT, 0, "depth is 0 to %d",
			    LIST_DEPTH_MAX);
			goto out;
		}
		memset(&l, 0, sizeof l);
		l.arr = json_array();
		l.ch = ch;
		l.max = depth < 1 ? 1 : (int)depth;
		if (sp_fs_stat(ch, path, 1, &st, &e) == -1) {
			json_decref(l.arr);
			goto out;
		}
		if (strcmp(json_string_value(json_object_get(st, "type")),
		    "dir") != 0) {
			json_decref(l.arr);
			sp_err_set(&e, SP_E_BAD_INPUT, 0, "%s is not a directory",
			    path);
			goto out;
		}
		if (list_dir(&l, path, 1) == -1) {
			json_decref(l.arr);
			e = l.err;
			goto out;
		}
		out = json_pack("{s:o}", "entries", l.arr);
	}
	rc = 0;
out:
	sp_chan_close(ch);
	json_decref(st);
	if (rc == -1)
		return rpc_fail(c, &e);
	return sp_api_json(c, 200, out);
}

/* ---- Process: the unary calls ---- */

static pid_t
selector_pid(json_t *body)
{
	json_t *p = json_object_get(json_object_get(body, "process"), "pid");

	if (!json_is_integer(p) || json_integer_value(p) <= 0 ||
	    json_integer_value(p) > 0x7fffffff)
		return -1;
	return (pid_t)json_integer_value(p);
}

static int
signal_of(json_t *v)
{
	const char *s = json_string_value(v);

	if (json_is_integer(v))
		return (int)json_integer_value(v);
	if (s != NULL && strcmp(s, "SIGNAL_SIGKILL") == 0)
		return 9;
	if (s != NULL && strcmp(s, "SIGNAL_SIGTERM") == 0)
		return 15;
	return -1;
}

static void
list_proc(pid_t pid, const char *tag, json_t *config, void *arg)
{
	json_t *o = json_pack("{s:O, s:i}", "config", config, "pid", (int)pid);

	if (o != NULL && tag[0] != '\0')
		json_object_set_new(o, "tag", json_string(tag));
	json_array_append_new(arg, o);
}

static int
process_unary(struct sp_api_call *c, const char *m, json_t *body)
{
	unsigned char *data = NULL;
	struct sp_chan *ch = NULL;
	json_t *in, *pty, *arr;
	struct sp_err e;
	size_t n;
	pid_t pid = selector_pid(body);
	int rc = -1, sig;

	if (strcmp(m, "List") == 0) {
		arr = json_array();
		sp_api_proc_each(c->route.id, list_proc, arr);
		return sp_api_json(c, 200, json_pack("{s:o}", "processes", arr));
	}
	if (pid < 0) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "process.pid is needed (a tag "
		    "is not taken)");
		return rpc_fail(c, &e);
	}
	if (strcmp(m, "SendInput") == 0) {
		in = json_object_get(body, "input");
		if (unb64(json_object_get(in, json_object_get(in, "pty") ? "pty" :
		    "stdin"), &data, &n) == -1) {
			sp_err_set(&e, SP_E_BAD_INPUT, 0, "input.stdin or "
			    "input.pty: base64 bytes");
			goto out;
		}
		rc = n == 0 ? 0 : sp_api_proc_input(c->route.id, pid, data, n,
		    &e);
	} else if (strcmp(m, "CloseStdin") == 0) {
		rc = sp_api_proc_close_input(c->route.id, pid, &e);
	} else if (strcmp(m, "Update") == 0) {
		pty = json_object_get(json_object_get(body, "pty"), "size");
		rc = sp_api_proc_resize(c->route.id, pid, (int)json_integer_value(
		    json_object_get(pty, "rows")), (int)json_integer_value(
		    json_object_get(pty, "cols")), &e);
	} else {	/* SendSignal */
		if ((sig = signal_of(json_object_get(body, "signal"))) < 1 ||
		    sig > 64) {
			sp_err_set(&e, SP_E_BAD_INPUT, 0, "signal is "
			    "SIGNAL_SIGKILL or SIGNAL_SIGTERM");
			goto out;
		}
		rc = sp_api_proc_signal(c->route.id, pid, sig, &e);
		/* Not one of ours: a detached process the daemon keeps. */
		if (rc == -1 && e.code == SP_E_NOT_FOUND &&
		    open_chan(c, &ch, &e) == 0)
			rc = sp_chan_kill(ch, pid, sig, &e);
	}
out:
	free(data);
	sp_chan_close(ch);
	if (rc == -1)
		return rpc_fail(c, &e);
	return sp_api_json(c, 200, json_object());
}

/* ---- Process.Start: the stream ---- */

static void
event(struct sp_api_pstream *s, json_t *ev)
{
	sp_api_pstream_json(s, 0, json_pack("{s:o}", "event", ev), 0);
}

static void
ev_start(struct sp_api_pstream *s, pid_t pid)
{
	event(s, json_pack("{s:{s:i}}", "start", "pid", (int)pid));
}

static void
ev_data(struct sp_api_pstream *s, int which, const char *p, size_t n)
{
	event(s, json_pack("{s:{s:o}}", "data", which == 1 ? "stdout" :
	    "stderr", sp_api_b64(p, n)));
}

/* A pty's output is one stream, its own event. */
static void
ev_data_pty(struct sp_api_pstream *s, int which, const char *p, size_t n)
{
	event(s, json_pack("{s:{s:o}}", "data", "pty", sp_api_b64(p, n)));
}

static void
ev_keepalive(struct sp_api_pstream *s)
{
	event(s, json_pack("{s:{}}", "keepalive"));
}

static void
ev_end(struct sp_api_pstream *s, int status, int signaled)
{
	char st[40];

	if (signaled)
		snprintf(st, sizeof st, "signal: %s", status - 128 == 9 ?
		    "killed" : status - 128 == 15 ? "terminated" : "other");
	else
		snprintf(st, sizeof st, "exit status %d", status);
	event(s, json_pack("{s:{s:i, s:b, s:s}}", "end", "exitCode",
	    signaled ? -1 : status, "exited", !signaled, "status", st));
	sp_api_pstream_json(s, SP_CONNECT_END, json_object(), 0);
}

static void
ev_fail(struct sp_api_pstream *s, const struct sp_err *e)
{
	sp_api_pstream_json(s, SP_CONNECT_END, json_pack("{s:{s:s, s:s}}",
	    "error", "code", sp_connect_code(e), "message", e->msg), 0);
}

static const struct sp_api_pstream_ops connect_ops = {
	ev_start, ev_data, ev_keepalive, ev_end, ev_fail
};
static const struct sp_api_pstream_ops connect_pty_ops = {
	ev_start, ev_data_pty, ev_keepalive, ev_end, ev_fail
};

/* A streaming call that fails before it streams: one end envelope. */
static int
stream_fail(struct sp_api_call *c, const struct sp_err *e)
{
	char *buf = NULL;
	size_t len = 0;

	c->err = *e;
	if (sp_connect_wrap(&buf, &len, SP_CONNECT_END, json_pack("{s:{s:s, "
	    "s:s}}", "error", "code", sp_connect_code(e), "message",
	    e->msg)) == -1)
		return sp_api_fail(c, e);
	c->status = 200;
	c->raw = buf;
	c->raw_len = len;
	c->ctype = "application/connect+json";
	return 0;
}

static char **
env_vector(json_t *envs, struct sp_err *e)
{
	const char *k;
	json_t *v;
	char **vec;
	size_t i = 0, n;

	if (envs != NULL && !json_is_object(envs)) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "envs is an object of strings");
		return NULL;
	}
	if (json_object_size(envs) > 256) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "at most 256 envs");
		return NULL;
	}
	if ((vec = calloc(json_object_size(envs) + 1, sizeof *vec)) == NULL) {
		sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
		return NULL;
	}
	json_object_foreach(envs, k, v) {
		if (!json_is_string(v) ||
		    sp_api_env_check(k, json_string_value(v), e) == -1)
			goto bad;
		n = strlen(k) + json_string_length(v) + 2;
		if ((vec[i] = malloc(n)) == NULL)
			goto bad;
		snprintf(vec[i++], n, "%s=%s", k, json_string_value(v));
	}
	return vec;
bad:
	if (e->code == SP_E_NONE)
		sp_err_set(e, SP_E_BAD_INPUT, 0, "envs is an object of strings");
	for (i = 0; vec[i] != NULL; i++)
		free(vec[i]);
	free(vec);
	return NULL;
}

static int
start(struct sp_api_call *c, json_t *body, const char *user)
{
	json_t *proc = json_object_get(body, "process"), *args, *v,
	    *size = json_object_get(json_object_get(body, "pty"), "size");
	struct sp_api_start st;
	struct sp_api_proc *p = NULL;
	char cwd[SP_PATH_MAX], **argv = NULL, **env = NULL;
	struct sp_err e;
	size_t i, n;

	memset(&st, 0, sizeof st);
	sp_err_clear(&e);
	args = json_object_get(proc, "args");
	n = json_array_size(args);
	if (!json_is_string(json_object_get(proc, "cmd")) ||
	    json_string_length(json_object_get(proc, "cmd")) == 0 ||
	    (args != NULL && !json_is_array(args)) || n > 4096) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "process.cmd and its args are "
		    "needed");
		goto fail;
	}
	if ((argv = calloc(n + 2, sizeof *argv)) == NULL)
		goto nomem;
	argv[0] = (char *)json_string_value(json_object_get(proc, "cmd"));
	json_array_foreach(args, i, v) {
		if (!json_is_string(v)) {
			sp_err_set(&e, SP_E_BAD_INPUT, 0, "args are strings");
			goto fail;
		}
		argv[i + 1] = (char *)json_string_value(v);
	}
	if ((env = env_vector(json_object_get(proc, "envs"), &e)) == NULL)
		goto fail;
	if (json_object_get(proc, "cwd") != NULL) {
		if (body_path(proc, "cwd", user, cwd, sizeof cwd, &e) == -1)
			goto fail;
		st.cwd = cwd;
	}
	if (size != NULL) {
		st.tty = 1;
		st.rows = (int)json_integer_value(json_object_get(size, "rows"));
		st.cols = (int)json_integer_value(json_object_get(size, "cols"));
		if (st.rows < 1 || st.rows > 4096 || st.cols < 1 ||
		    st.cols > 4096) {
			sp_err_set(&e, SP_E_BAD_INPUT, 0, "pty.size: rows and "
			    "cols from 1 to 4096");
			goto fail;
		}
	}
	v = json_object_get(body, "tag");
	st.id = c->route.id;
	st.argv = argv;
	st.env = env;
	st.user = user[0] ? user : NULL;
	st.tag = json_string_value(v);
	st.keep_stdin = st.tty || json_is_true(json_object_get(body, "stdin"));
	st.config = json_pack("{s:O, s:O, s:O}", "cmd", json_object_get(proc,
	    "cmd"), "args", args ? args : json_array(), "envs",
	    json_object_get(proc, "envs") ? json_object_get(proc, "envs") :
	    json_object());
	if (st.cwd != NULL)
		json_object_set_new(st.config, "cwd", json_string(st.cwd));
	if (sp_api_proc_start(c->x, &st, &p, &e) == -1 ||
	    sp_api_pstream_answer(c, p, st.tty ? &connect_pty_ops :
	    &connect_ops, "application/connect+json", &e) == -1)
		goto fail;
	json_decref(st.config);
	for (i = 0; env[i] != NULL; i++)
		free(env[i]);
	free(env);
	free(argv);
	return 0;
nomem:
	sp_err_set(&e, SP_E_NOMEM, 1, "out of memory");
fail:
	json_decref(st.config);
	for (i = 0; env != NULL && env[i] != NULL; i++)
		free(env[i]);
	free(env);
	free(argv);
	return stream_fail(c, &e);
}

/* ---- /files ---- */

static int
files_get(struct sp_api_call *c, const char *user)
{
	char home[SP_NAME_MAX + 8], path[SP_PATH_MAX];
	struct sp_chan *ch;
	struct sp_err e;

	sp_api_home(user, home, sizeof home);
	if (sp_api_guest_path(c->query(c, "path"), home, path, sizeof path,
	    &e) == -1 || open_chan(c, &ch, &e) == -1 ||
	    sp_api_file_stream(c, ch, path, 0, &e) == -1)
		return sp_api_fail(c, &e);
	return 0;
}

/* One file of an upload: written whole (an atomic replace), its parent
 * made first. */
static int
put_file(struct sp_chan *ch, const char *path, const void *data, size_t n,
    json_t *out, struct sp_err *e)
{
	char dir[SP_PATH_MAX], *slash;
	int fd, rc;

	snprintf(dir, sizeof dir, "%s", path);
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (sp_fs_mkdir(ch, dir, 1, 0755, e) == -1)
			return -1;
	}
	if ((fd = memfd_create("upload", MFD_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_IO, "memfd");
	if (n > 0 && sp_write_all(fd, data, n) == -1) {
		close(fd);
		return sp_err_sys(e, SP_E_IO, "memfd");
	}
	lseek(fd, 0, SEEK_SET);
	rc = sp_fs_write(ch, path, fd, -1, 0, NULL, e);
	close(fd);
	if (rc == 0)
		json_array_append_new(out, json_pack("{s:s, s:s, s:s}", "name",
		    strrchr(path, '/') + 1, "type", "file", "path", path));
	return rc;
}

struct upload {
	struct sp_chan *ch;
	const char *path;	/* the query's, or NULL: each part's name */
	const char *home;
	json_t *out;
	struct sp_err e;
	int failed;
};

static int
upload_part(void *arg, const char *filename, const void *data, size_t n)
{
	struct upload *u = arg;
	char path[SP_PATH_MAX];

	if (u->failed)
		return -1;
	if ((u->path == NULL && sp_api_guest_path(filename, u->home, path,
	    sizeof path, &u->e) == -1) ||
	    put_file(u->ch, u->path ? u->path : path, data, n, u->out,
	    &u->e) == -1) {
		u->failed = 1;
		return -1;
	}
	return 0;
}

static int
files_post(struct sp_api_call *c, const char *user)
{
	const char *ct = c->header(c, "Content-Type"), *q = c->query(c, "path");
	char path[SP_PATH_MAX], home[SP_NAME_MAX + 8];
	struct upload u;

	memset(&u, 0, sizeof u);
	u.out = json_array();
	sp_api_home(user, home, sizeof home);
	u.home = home;
	if (c->header(c, "Content-Encoding") != NULL) {
		sp_err_set(&u.e, SP_E_BAD_INPUT, 0, "compressed uploads are not "
		    "taken");
		goto fail;
	}
	if (q != NULL) {
		if (sp_api_guest_path(q, home, path, sizeof path, &u.e) == -1)
			goto fail;
		u.path = path;
	}
	if (open_chan(c, &u.ch, &u.e) == -1)
		goto fail;
	if (ct != NULL && strncasecmp(ct, "multipart/form-data", 19) == 0) {
		if (c->multipart(c, upload_part, &u, &u.e) == -1 &&
		    !u.failed)
			goto fail;
		if (u.failed)
			goto fail;
	} else {
		if (u.path == NULL) {
			sp_err_set(&u.e, SP_E_BAD_INPUT, 0, "path is needed");
			goto fail;
		}
		if (put_file(u.ch, u.path, c->body, c->body_len, u.out,
		    &u.e) == -1)
			goto fail;
	}
	if (json_array_size(u.out) == 0) {
		sp_err_set(&u.e, SP_E_BAD_INPUT, 0, "no file in the upload");
		goto fail;
	}
	sp_chan_close(u.ch);
	return sp_api_json(c, 200, u.out);
fail:
	sp_chan_close(u.ch);
	json_decref(u.out);
	return sp_api_fail(c, &u.e);
}

/* ---- the calls ---- */

int
sp_api_envd(struct sp_api_call *c)
{
	const char *n = c->route.name, *dot;
	char user[SP_NAME_MAX + 1], name[256];
	struct sp_sandbox_row row;
	json_t *body = NULL, *env, *v;
	const char *s, *eq;
	struct sp_err e;
	size_t i;

	if (strcmp(n, "health") == 0) {
		/* 204 when it runs, 502 as E2B's proxy says for a sandbox
		 * that does not; as E2B's, it needs no token. */
		c->status = 502;
		if (c->route.id[0] != '\0' && sp_db_sandbox_get(c->x->db,
		    c->route.id, &row, &e) == 0) {
			if (!row.pod && row.state == SP_ST_RUNNING)
				c->status = 204;
			sp_db_row_release(&row);
		}
		return 0;
	}
	if (basic_user(c, user, sizeof user, &e) == -1 ||
	    sandbox_here(c, &e) == -1)
		return c->route.stream ? stream_fail(c, &e) : rpc_fail(c, &e);
	if (strcmp(n, "envs") == 0) {
		if (sp_api_sandbox(c, c->route.id, &row, &e) == -1)
			return sp_api_fail(c, &e);
		body = json_object();
		env = json_loads(row.env ? row.env : "[]", 0, NULL);
		json_array_foreach(env, i, v)
			if ((s = json_string_value(v)) != NULL &&
			    (eq = strchr(s, '=')) != NULL && eq - s < 256) {
				snprintf(name, sizeof name, "%.*s", (int)(eq - s),
				    s);
				json_object_set_new(body, name,
				    json_string(eq + 1));
			}
		json_decref(env);
		sp_db_row_release(&row);
		return sp_api_json(c, 200, body);
	}
	if (strcmp(n, "files.get") == 0)
		return files_get(c, user);
	if (strcmp(n, "files.post") == 0)
		return files_post(c, user);
	/* Connect: a streaming call's one message is enveloped. */
	if (c->route.stream) {
		if (sp_connect_unwrap(c->body, c->body_len, &body, &e) == -1)
			return stream_fail(c, &e);
	} else if (sp_api_body_json(c->body, c->body_len, &body, &e) == -1)
		return rpc_fail(c, &e);
	dot = strchr(n, '.') + 1;
	if (strcmp(n, "Process.Start") == 0)
		start(c, body, user);
	else if (strncmp(n, "Process.", 8) == 0 && (strcmp(dot, "List") == 0 ||
	    strcmp(dot, "SendInput") == 0 || strcmp(dot, "SendSignal") == 0 ||
	    strcmp(dot, "CloseStdin") == 0 || strcmp(dot, "Update") == 0))
		process_unary(c, dot, body);
	else if (strncmp(n, "Filesystem.", 11) == 0 && (strcmp(dot, "Stat") ==
	    0 || strcmp(dot, "MakeDir") == 0 || strcmp(dot, "Move") == 0 ||
	    strcmp(dot, "ListDir") == 0 || strcmp(dot, "Remove") == 0))
		filesystem(c, dot, body, user);
	else if (c->route.stream) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "%s is not supported by this "
		    "server (space-apid)", n);
		stream_fail(c, &e);
	} else
		unimplemented(c, n);
	json_decref(body);
	return 0;
}
