/*
 * sp_api_int.h: what the parts of the HTTP server share.  Bottom up:
 * sp_api_call.c (answers, who may see what), sp_api_proc.c (the commands
 * the handlers run, streams), the handlers sp_api_native.c, sp_api_e2b.c,
 * sp_api_envd.c, sp_api_forward.c (to another node), and on top sp_apid.c,
 * the glue to libmicrohttpd, which calls them.  Not part of the library's
 * interface.
 */
#ifndef SP_API_INT_H
#define SP_API_INT_H

#include "sp_api.h"

/* One request, as a handler sees it. */
struct sp_api_call {
	const struct sp_api_server *srv;
	const char *method, *path;
	const unsigned char *body;	/* the whole body (bounded) */
	size_t body_len;
	/* A request header or query argument, NULL when absent. */
	const char *(*header)(struct sp_api_call *, const char *name);
	const char *(*query)(struct sp_api_call *, const char *name);
	/* A multipart/form-data body, parsed by libmicrohttpd: part(arg,
	 * its filename ("" none), its bytes) for each file part, whole; a
	 * -1 from part stops.  bad-input for a body that is not one. */
	int (*multipart)(struct sp_api_call *, int (*part)(void *arg,
	    const char *filename, const void *data, size_t n), void *arg,
	    struct sp_err *e);
	/* The request's path and query ("/a/b?k=v&..." %-encoded again), as
	 * it is forwarded and signed; -1 when it does not fit in n. */
	int (*target)(struct sp_api_call *, char *out, size_t n);
	void *conn;			/* the glue's */
	struct sp_api_route route;
	/* Who asks: a key's row (admin, or a tenant's), or for the guest
	 * API the sandbox's token, which stands for its tenant. */
	struct sp_apikey_row key;
	char tenant[SP_NAME_MAX + 1];	/* "" for an admin */
	int admin;
	int forwarded;			/* another node's space-apid sent it */
	struct sp_ctx *x;		/* taken for the call, given back after */
	/* The answer: a status with a body (json, or raw bytes of ctype),
	 * or a stream read by reader until it returns 0 (-1: cut it). */
	int status;
	json_t *json;
	char *raw;
	size_t raw_len;
	const char *ctype;
	int ctype_owned;		/* ctype is malloc'd */
	ssize_t (*reader)(void *arg, char *buf, size_t max);
	void (*reader_free)(void *arg);
	void *reader_arg;
	/* For the audit line; shaped: json is an error in its API's shape
	 * already, which the glue keeps. */
	char sandbox[SP_ID_LEN + 1];
	struct sp_err err;
	int shaped;
};

struct sp_api_server {
	struct sp_api_opts opts;
	struct sp_conf conf;
};

/* The HTTP status an error token answers with. */
int sp_api_status_of(const struct sp_err *e);
/* A JSON answer (stolen), and one of the native API's errors. */
int sp_api_json(struct sp_api_call *c, int status, json_t *j);
int sp_api_fail(struct sp_api_call *c, const struct sp_err *e);
/* The sandbox id of the route (or of E2b-Sandbox-Id) when the caller may
 * see it: its row in *row (release it); not-found for a sandbox of
 * another tenant, as for one that is not. */
int sp_api_sandbox(struct sp_api_call *c, const char *id,
    struct sp_sandbox_row *row, struct sp_err *e);
/* sp_api_sandbox, of a sandbox on this node: bad-state (temporary)
 * naming its node otherwise. */
int sp_api_sandbox_here(struct sp_api_call *c, const char *id,
    struct sp_sandbox_row *row, struct sp_err *e);
/* 0 when the caller's tenant may create from template ref; not-found,
 * as for a template that is not, when it may not. */
int sp_api_template_ok(struct sp_api_call *c, const char *ref,
    struct sp_err *e);
/* The row's tenant, from its labels ("" none). */
void sp_api_row_tenant(const struct sp_sandbox_row *r,
    char out[SP_NAME_MAX + 1]);

/* ---- forward: to the node of the sandbox (sp_api_forward.c) ---- */
/* Says in the DB where this server listens (url) and loads the cluster's
 * secret between servers (made when there is none). */
int sp_api_forward_init(struct sp_ctx *x, const char *url, struct sp_err *e);
/* A request another server forwarded: 1 when its signature holds (the
 * call's tenant, admin and key are what it says), 0 when it is not one,
 * -1 (unauthorized) when the signature does not hold. */
int sp_api_forward_check(struct sp_api_call *c, struct sp_err *e);
/* Sends the call to node's server and answers with what it answers,
 * streamed; a forwarded call is not forwarded again (bad-state). */
int sp_api_forward(struct sp_api_call *c, const char *node, struct sp_err *e);

/* The handlers: each sets the call's answer and returns 0. */
int sp_api_native(struct sp_api_call *c);
int sp_api_e2b(struct sp_api_call *c);
int sp_api_envd(struct sp_api_call *c);

/* ---- proc: commands started through the API (sp_api_proc.c) ---- */
struct sp_api_proc;
struct sp_api_start {
	const char *id;			/* the sandbox */
	char **argv, **env;		/* env set over the sandbox's own */
	const char *cwd, *user, *tag;
	int tty, rows, cols;
	int keep_stdin;			/* else stdin is empty */
	json_t *config;			/* what Process.List says of it */
};
/* Starts the command; once it runs (or failed), *p is ready to read. */
int sp_api_proc_start(struct sp_ctx *x, const struct sp_api_start *s,
    struct sp_api_proc **p, struct sp_err *e);
/* Waits until it has started: its pid, or -1 with e (it did not start). */
pid_t sp_api_proc_pid(struct sp_api_proc *p, struct sp_err *e);
/* What comes next: 1 with data (which: 1 stdout, 2 stderr), 0 when the
 * output is over, -2 when nothing came for wait_ms; -1 on error.  */
int sp_api_proc_read(struct sp_api_proc *p, char *buf, size_t max,
    size_t *n, int *which, int wait_ms);
/* After the output is over: how it ended (status as sp_chan_exec, or -1
 * with e), and whether a signal ended it. */
int sp_api_proc_wait(struct sp_api_proc *p, int *status, int *signaled,
    struct sp_err *e);
/* The stream is done with it: forgets it (the command may still run). */
void sp_api_proc_release(struct sp_api_proc *p);
/* By sandbox and pid, for those that are running: stdin, its end, a
 * signal, a pty's size.  not-found for one that is not ours or is over. */
int sp_api_proc_input(const char *id, pid_t pid, const void *data, size_t n,
    struct sp_err *e);
int sp_api_proc_close_input(const char *id, pid_t pid, struct sp_err *e);
int sp_api_proc_signal(const char *id, pid_t pid, int sig, struct sp_err *e);
int sp_api_proc_resize(const char *id, pid_t pid, int rows, int cols,
    struct sp_err *e);
/* A command's answer, streamed: ops say each event in the API's format,
 * appending bytes with sp_api_pstream_put (or a JSON value: a Connect
 * envelope of flags, or with line a JSON line).  start comes first (or fail,
 * when it did not start); then data, and keepalive after 25 s of silence; last end (or fail).  The stream owns p from then on (and
 * releases it, even when this fails). */
#define SP_API_CHUNK	(24 * 1024)	/* output bytes an event carries */
struct sp_api_pstream;
struct sp_api_pstream_ops {
	void (*start)(struct sp_api_pstream *s, pid_t pid);
	void (*data)(struct sp_api_pstream *s, int which, const char *p,
	    size_t n);
	void (*keepalive)(struct sp_api_pstream *s);
	void (*end)(struct sp_api_pstream *s, int status, int signaled);
	void (*fail)(struct sp_api_pstream *s, const struct sp_err *e);
};
void sp_api_pstream_put(struct sp_api_pstream *s, const void *p, size_t n);
void sp_api_pstream_json(struct sp_api_pstream *s, int flags, json_t *j,
    int line);
int sp_api_pstream_answer(struct sp_api_call *c, struct sp_api_proc *p,
    const struct sp_api_pstream_ops *ops, const char *ctype,
    struct sp_err *e);

/* What the handlers share: base64 as a JSON string; a user's home in the
 * guest (/root, /home/USER); read(2) again after EINTR; and a guest file
 * (or with tar, a tree as a tar stream) as the call's answer, streamed from
 * a thread (the call owns ch then, whatever happens; a file that is not
 * there is not-found before anything is streamed). */
json_t *sp_api_b64(const void *p, size_t n);
void sp_api_home(const char *user, char *out, size_t n);
ssize_t sp_api_fd_read(int fd, char *buf, size_t max);
int sp_api_file_stream(struct sp_api_call *c, struct sp_chan *ch,
    const char *path, int tar, struct sp_err *e);
/* fn gets each running command of sandbox id: pid, tag ("" none) and its
 * config (borrowed). */
int sp_api_proc_each(const char *id,
    void (*fn)(pid_t pid, const char *tag, json_t *config, void *arg),
    void *arg);

#endif
