/*
 * sp_api.h: the HTTP API (space-apid).  Above everything else: a request
 * goes through the same library calls a command would.
 *
 *	apikey		API keys: made, hashed (BLAKE2b), checked (sp_apikey.c)
 *	api_parse	what a client sends, parsed strictly and bounded:
 *			routes, JSON bodies, Connect envelopes (sp_api_parse.c)
 *	api		the server: routes to handlers, the native API, E2B's
 *			REST and guest APIs (sp_api*.c, over libmicrohttpd)
 */
#ifndef SP_API_H
#define SP_API_H

#include "sp_cli.h"

/* ---- apikey ---- */
#define SP_APIKEY_SECRET_LEN	64	/* hex */
#define SP_APIKEY_LEN	(4 + SP_APIKEY_ID_LEN + 1 + SP_APIKEY_SECRET_LEN)
#define SP_APIKEY_RATE_DEFAULT	600	/* requests a minute */
/* A new key for tenant (or an admin key): *row to add (sp_db_apikey_add),
 * key the text to show once. */
int sp_apikey_new(const char *tenant, int admin, int rate,
    struct sp_apikey_row *row, char key[SP_APIKEY_LEN + 1], struct sp_err *e);
/* The row of key, when key is one and its secret matches; unauthorized
 * otherwise (the same message whatever was wrong). */
int sp_apikey_check(struct sp_db *db, const char *key,
    struct sp_apikey_row *row, struct sp_err *e);
/* ---- api_parse: what a client sends (sp_api_parse.c) ---- */
enum sp_api_kind {
	SP_API_NATIVE = 1,	/* /v1/...: this project's own */
	SP_API_E2B,		/* E2B's REST API: /sandboxes, /v2/sandboxes */
	SP_API_ENVD		/* E2B's guest API: /files, /process.Process/... */
};
struct sp_api_route {
	enum sp_api_kind kind;
	const char *name;		/* "create", "e2b.kill", "Process.Start" */
	int stream;			/* a Connect server-streaming call */
	char id[SP_ID_LEN + 1];		/* the path's sandbox, or "" */
	char ref[SP_HANDLE_MAX + 1];	/* a /v1 path's sandbox by its name
					 * (id "" until the caller's tenant
					 * is known to look it up in) */
	char arg[SP_ID_LEN + 1];	/* its snapshot or pid, or "" */
	char cred[SP_NAME_MAX + 1];	/* a credential's name, or "" */
};
/* The route of method and path: not-found (404) for a path that is none,
 * bad-state (405) for a method the path does not take. */
int sp_api_route(const char *method, const char *path, struct sp_api_route *r,
    struct sp_err *e);
/* Every route: method, path (parameters as "{id}"), kind and name. */
int sp_api_routes_each(void (*fn)(const char *method, const char *path,
    enum sp_api_kind kind, const char *name, void *arg), void *arg);
/* Bodies and what is in them are bounded: a JSON body is an object of at
 * most SP_API_JSON_MAX bytes and SP_API_DEPTH_MAX levels. */
#define SP_API_JSON_MAX		(1024 * 1024)
#define SP_API_DEPTH_MAX	16
int sp_api_body_json(const void *p, size_t n, json_t **out, struct sp_err *e);
/* Connect's envelope: u8 flags, u32 length (big endian), message.  One
 * message of a streaming request (flags 0) as a JSON object. */
#define SP_CONNECT_COMPRESSED	0x01
#define SP_CONNECT_END		0x02
int sp_connect_unwrap(const void *p, size_t n, json_t **out, struct sp_err *e);
/* An envelope of flags around json (steals it) appended to *buf; -1 when
 * out of memory. */
int sp_connect_wrap(char **buf, size_t *len, int flags, json_t *json);
/* Connect's code for an error token ("not_found", "invalid_argument"...). */
const char *sp_connect_code(const struct sp_err *e);
/* A guest path of a request: absolute, normalised lexically, no NUL, at
 * most SP_PATH_MAX; relative ones are taken from home. */
int sp_api_guest_path(const char *in, const char *home, char *out, size_t n,
    struct sp_err *e);

/* NAME=VALUE for a guest's environment: a name of [A-Za-z0-9_] not
 * starting with a digit, a value of valid UTF-8 without control chars. */
int sp_api_env_check(const char *name, const char *value, struct sp_err *e);
/* %XX and + decoded into out; -1 on a bad escape, a NUL or no room. */
int sp_api_url_decode(const char *in, char *out, size_t n);

/* ---- api: the server (sp_apid.c) ---- */
struct sp_api_opts {
	char listen[128];		/* ADDR:PORT, default 127.0.0.1:49982 */
	char advertise[256];		/* the URL other nodes reach it at
					 * ("": from listen) */
	int tls;			/* serve TLS with the node CA's cert */
	int max_conns;			/* connections at once */
	int timeout_s;			/* an idle connection is closed */
	size_t body_max;		/* bytes of a request body (uploads) */
	char audit[SP_PATH_MAX];	/* the audit log, JSON lines */
	int ready;			/* say {"ok":true,"listen":..} on stdout
					 * once listening */
};
#define SP_API_LISTEN_DEFAULT	"127.0.0.1:49982"
/* Serves until *stop is set (a signal handler sets it); errors before it
 * serves (the address, the certificate) are returned. */
int sp_api_serve(const struct sp_api_opts *o, volatile int *stop,
    struct sp_err *e);

/* A sandbox's guest-API token: 32 random bytes, hex. */
int sp_api_token_new(char out[65], struct sp_err *e);
/* 1 when a and b are the same text, in time that does not tell where they
 * differ. */
int sp_api_token_equal(const char *a, const char *b);

#endif
