/*
 * sp_apid.c: the HTTP server of space-apid, on libmicrohttpd: a thread per
 * connection (a slow client holds only its own), bodies bounded, every
 * request authenticated, rate-limited by key, routed to its handler with a
 * context (config, DB, libvirt) from a pool, and written to the audit log.
 * It keeps no state of its own a restart would lose: what it decides is in
 * the DB; the commands it runs live as long as their streams.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "sp_api.h"
#include "sp_api_int.h"

#define POOL_MAX	32	/* idle contexts kept */
#define RATE_SLOTS	1024	/* keys whose buckets are kept */
#define EXPIRY_TICK_MS	1000

struct req {
	struct sp_api_call c;
	struct MHD_Connection *conn;
	char *body;
	size_t len;
	int too_big;
	int64_t t0;
	char method[16];
	char path[256];
	char key_id[SP_APIKEY_ID_LEN + 1];
	int authed;		/* its caller is known: it is an event */
	int forwarded;		/* from another node's server, whose event
				 * it is */
};

static struct {
	struct sp_api_server srv;
	pthread_mutex_t mu;		/* the pool and the buckets */
	struct sp_ctx *idle[POOL_MAX];
	int nidle;
	struct {
		char id[SP_APIKEY_ID_LEN + 1];
		double tokens;
		int64_t last;		/* ms */
	} rate[RATE_SLOTS];
	int audit;
} g = { .mu = PTHREAD_MUTEX_INITIALIZER, .audit = -1 };

/* ---- contexts ---- */

static struct sp_ctx *
ctx_take(struct sp_err *e)
{
	struct sp_ctx *x = NULL;

	pthread_mutex_lock(&g.mu);
	if (g.nidle > 0)
		x = g.idle[--g.nidle];
	pthread_mutex_unlock(&g.mu);
	if (x != NULL)
		return x;
	if ((x = calloc(1, sizeof *x)) == NULL) {
		sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
		return NULL;
	}
	if (sp_ctx_open(x, 0, e) == -1) {
		free(x);
		return NULL;
	}
	return x;
}

static void
ctx_give(struct sp_ctx *x)
{
	if (x == NULL)
		return;
	pthread_mutex_lock(&g.mu);
	if (g.nidle < POOL_MAX) {
		g.idle[g.nidle++] = x;
		x = NULL;
	}
	pthread_mutex_unlock(&g.mu);
	if (x != NULL) {
		sp_ctx_close(x);
		free(x);
	}
}

/* ---- multipart bodies ---- */

struct parts {
	int (*part)(void *, const char *, const void *, size_t);
	void *arg;
	char filename[SP_PATH_MAX];
	char key[64];
	char *data;
	size_t len;
	int open, stopped;
};

static int
flush_part(struct parts *p)
{
	int rc = 0;

	if (p->open && !p->stopped && p->part(p->arg, p->filename, p->data,
	    p->len) == -1)
		p->stopped = 1, rc = -1;
	free(p->data);
	p->data = NULL;
	p->len = 0;
	p->open = 0;
	return rc;
}

static enum MHD_Result
post_iter(void *cls, enum MHD_ValueKind kind, const char *key,
    const char *filename, const char *ctype, const char *enc,
    const char *data, uint64_t off, size_t size)
{
	struct parts *p = cls;
	char *nb;

	if (filename == NULL)
		return MHD_YES;		/* a plain field: not a file */
	if (off == 0 || !p->open || strcmp(p->filename, filename) != 0) {
		if (flush_part(p) == -1)
			return MHD_NO;
		snprintf(p->filename, sizeof p->filename, "%s", filename);
		p->open = 1;
	}
	if (size > 0) {
		if ((nb = realloc(p->data, p->len + size)) == NULL)
			return MHD_NO;
		p->data = nb;
		memcpy(p->data + p->len, data, size);
		p->len += size;
	}
	return MHD_YES;
}

static int
multipart(struct sp_api_call *c,
    int (*part)(void *arg, const char *filename, const void *data, size_t n),
    void *arg, struct sp_err *e)
{
	struct parts p = { .part = part, .arg = arg };
	struct MHD_PostProcessor *pp;
	enum MHD_Result r;

	pp = MHD_create_post_processor(((struct req *)c->conn)->conn,
	    64 * 1024, post_iter, &p);
	if (pp == NULL)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a multipart/form-data "
		    "body with its boundary is needed");
	r = MHD_post_process(pp, (const char *)c->body, c->body_len);
	if (MHD_destroy_post_processor(pp) == MHD_NO || r == MHD_NO) {
		flush_part(&p);
		if (p.stopped)
			return -1;
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a malformed "
		    "multipart/form-data body");
	}
	return flush_part(&p);
}

/* ---- the request's target, for forwarding ---- */

struct target {
	char *out;
	size_t n, len;
	int first, over;
};

static void
put_encoded(struct target *t, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p;

	for (p = (const unsigned char *)s; *p != '\0' && !t->over; p++) {
		if (t->len + 4 >= t->n) {
			t->over = 1;
			break;
		}
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p) != NULL)
			t->out[t->len++] = (char)*p;
		else {
			t->out[t->len++] = '%';
			t->out[t->len++] = hex[*p >> 4];
			t->out[t->len++] = hex[*p & 15];
		}
	}
	t->out[t->len] = '\0';
}

static enum MHD_Result
put_arg(void *cls, enum MHD_ValueKind kind, const char *key,
    const char *value)
{
	struct target *t = cls;

	if (t->len + 2 >= t->n) {
		t->over = 1;
		return MHD_NO;
	}
	t->out[t->len++] = t->first ? '?' : '&';
	t->first = 0;
	put_encoded(t, key);
	if (value != NULL) {
		t->out[t->len++] = '=';
		put_encoded(t, value);
	}
	return t->over ? MHD_NO : MHD_YES;
}

static int
target(struct sp_api_call *c, char *out, size_t n)
{
	struct target t = { out, n, 0, 1, 0 };

	if (snprintf(out, n, "%s", c->path) >= (int)n)
		return -1;
	t.len = strlen(out);
	MHD_get_connection_values(((struct req *)c->conn)->conn,
	    MHD_GET_ARGUMENT_KIND, put_arg, &t);
	return t.over ? -1 : 0;
}

/* ---- who asks ---- */

static const char *
header(struct sp_api_call *c, const char *name)
{
	return MHD_lookup_connection_value(((struct req *)c->conn)->conn,
	    MHD_HEADER_KIND, name);
}

static const char *
query(struct sp_api_call *c, const char *name)
{
	return MHD_lookup_connection_value(((struct req *)c->conn)->conn,
	    MHD_GET_ARGUMENT_KIND, name);
}

/* The key of a request: X-API-KEY (E2B's SDK) or a bearer token. */
static const char *
request_key(struct sp_api_call *c)
{
	const char *k = header(c, "X-API-KEY"), *a;

	if (k != NULL)
		return k;
	a = header(c, "Authorization");
	if (a != NULL && strncasecmp(a, "Bearer ", 7) == 0)
		return a + 7;
	return NULL;
}

/* A token bucket per key, in this process: rate a minute, a tenth of a
 * minute's worth at once (at least 10). */
static int
rate_ok(const struct sp_apikey_row *k)
{
	unsigned h = 0;
	const char *p;
	int64_t now = sp_clock_ms();
	double cap, tokens;
	int ok, i;

	if (k->rate <= 0)
		return 1;
	for (p = k->id; *p != '\0'; p++)
		h = h * 31 + (unsigned char)*p;
	i = (int)(h % RATE_SLOTS);
	cap = k->rate / 10.0 < 10 ? 10 : k->rate / 10.0;
	pthread_mutex_lock(&g.mu);
	if (strcmp(g.rate[i].id, k->id) != 0) {
		snprintf(g.rate[i].id, sizeof g.rate[i].id, "%s", k->id);
		g.rate[i].tokens = cap;
		g.rate[i].last = now;
	}
	tokens = g.rate[i].tokens + (now - g.rate[i].last) * k->rate / 60000.0;
	if (tokens > cap)
		tokens = cap;
	ok = tokens >= 1;
	g.rate[i].tokens = ok ? tokens - 1 : tokens;
	g.rate[i].last = now;
	pthread_mutex_unlock(&g.mu);
	return ok;
}

/* Who the events of this call name: its tenant, or the admin key. */
static void
actor(struct req *r)
{
	char who[96];

	r->authed = 1;
	if (!r->c.admin)
		snprintf(who, sizeof who, "tenant:%s", r->c.tenant);
	else
		snprintf(who, sizeof who, "admin:%s", r->key_id[0] ?
		    r->key_id : "token");
	sp_event_actor(who);
}

static int
authenticate(struct req *r, struct sp_err *e)
{
	struct sp_api_call *c = &r->c;
	struct sp_sandbox_api a;
	const char *tok;
	int fw;

	if (c->route.kind == SP_API_ENVD && c->route.id[0] == '\0')
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "E2b-Sandbox-Id must "
		    "name a sandbox");
	/* Another node's server, which authenticated the client already. */
	if ((fw = sp_api_forward_check(c, e)) != 0) {
		if (fw == 1)
			snprintf(r->key_id, sizeof r->key_id, "%s", c->key.id);
		r->forwarded = fw == 1;
		return fw == 1 ? 0 : -1;
	}
	if (c->route.kind == SP_API_ENVD) {
		/* The guest API: E2b-Sandbox-Id names the sandbox, and its
		 * token (X-Access-Token) stands for its tenant; an API key of
		 * that tenant will do too. */
		tok = header(c, "X-Access-Token");
		if (tok != NULL) {
			if (sp_db_sandbox_api_get(c->x->db, c->route.id, &a,
			    e) == -1) {
				if (e->code != SP_E_NOT_FOUND)
					return -1;
			} else if (a.token[0] != '\0' &&
			    sp_api_token_equal(tok, a.token)) {
				snprintf(c->tenant, sizeof c->tenant, "%s",
				    a.tenant);
				c->admin = a.tenant[0] == '\0';
				return 0;
			}
			return sp_err_set(e, SP_E_UNAUTHORIZED, 0, "a valid "
			    "access token is needed");
		}
	}
	if (sp_apikey_check(c->x->db, request_key(c), &c->key, e) == -1)
		return -1;
	snprintf(r->key_id, sizeof r->key_id, "%s", c->key.id);
	c->admin = c->key.admin;
	snprintf(c->tenant, sizeof c->tenant, "%s", c->key.tenant);
	if (!rate_ok(&c->key))
		return sp_err_set(e, SP_E_RATE_LIMITED, 1, "key %s is over its "
		    "rate of %d requests a minute", c->key.id, c->key.rate);
	return 0;
}

/* ---- the answer, to libmicrohttpd ---- */

/* A streamed answer belongs to its response, which libmicrohttpd may free
 * after the request's completion: it has its own record. */
struct stream {
	ssize_t (*reader)(void *, char *, size_t);
	void (*reader_free)(void *);
	void *arg;
};

static ssize_t
read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *s = cls;
	ssize_t n = s->reader(s->arg, buf, max);

	if (n == 0)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (n < 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	return n;
}

static void
free_stream(void *cls)
{
	struct stream *s = cls;

	if (s->reader_free != NULL)
		s->reader_free(s->arg);
	free(s);
}

/* A stream no response took (the request failed after it was made). */
static void
drop_stream(struct sp_api_call *c)
{
	if (c->reader != NULL && c->reader_free != NULL)
		c->reader_free(c->reader_arg);
	c->reader = NULL;
	c->reader_free = NULL;
}

/* E2B's clients read {"code":N,"message":S}; the guest API's unary calls
 * Connect's {"code":"not_found","message":S}. */
static void
error_shape(struct sp_api_call *c)
{
	json_t *j;

	if (c->err.code == SP_E_NONE || c->status < 400 || c->shaped)
		return;
	if (c->route.kind == SP_API_E2B || c->route.kind == 0)
		j = json_pack("{s:i, s:s}", "code", c->status, "message",
		    c->err.msg);
	else if (c->route.kind == SP_API_ENVD && c->route.name != NULL &&
	    strchr(c->route.name, '.') != NULL)
		j = json_pack("{s:s, s:s}", "code", sp_connect_code(&c->err),
		    "message", c->err.msg);
	else if (c->route.kind == SP_API_ENVD)
		j = json_pack("{s:i, s:s}", "code", c->status, "message",
		    c->err.msg);
	else
		return;
	json_decref(c->json);
	c->json = j;
}

static enum MHD_Result
answer(struct req *r)
{
	struct sp_api_call *c = &r->c;
	struct MHD_Response *resp;
	struct stream *st;
	enum MHD_Result ret;
	char *text;

	error_shape(c);
	if (c->reader != NULL) {
		if ((st = malloc(sizeof *st)) == NULL)
			return MHD_NO;	/* completed drops the stream */
		st->reader = c->reader;
		st->reader_free = c->reader_free;
		st->arg = c->reader_arg;
		resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN,
		    64 * 1024, read_stream, st, free_stream);
		if (resp == NULL) {
			free(st);
			return MHD_NO;
		}
		c->reader = NULL;
		c->reader_free = NULL;
	} else if (c->raw != NULL || c->json == NULL) {
		resp = MHD_create_response_from_buffer(c->raw_len, c->raw,
		    MHD_RESPMEM_MUST_FREE);
		c->raw = NULL;
	} else {
		if ((text = json_dumps(c->json, JSON_COMPACT |
		    JSON_REAL_PRECISION(12))) == NULL)
			return MHD_NO;
		resp = MHD_create_response_from_buffer(strlen(text), text,
		    MHD_RESPMEM_MUST_FREE);
		c->ctype = "application/json";
	}
	if (resp == NULL)
		return MHD_NO;
	if (c->ctype != NULL)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
		    c->ctype);
	ret = MHD_queue_response(r->conn, c->status ? (unsigned)c->status :
	    200, resp);
	MHD_destroy_response(resp);
	return ret;
}

static void
audit(struct req *r)
{
	struct sp_api_call *c = &r->c;
	char *line;
	json_t *j;

	if (g.audit < 0)
		return;
	j = json_pack("{s:I, s:s, s:s, s:s, s:s?, s:s?, s:i, s:I}", "time",
	    (json_int_t)time(NULL), "key", r->key_id, "tenant",
	    c->admin ? "" : c->tenant, "method", r->method, "path", r->path,
	    "sandbox", c->sandbox[0] ? c->sandbox : NULL, "status",
	    c->status ? c->status : 200, "ms",
	    (json_int_t)(sp_clock_ms() - r->t0));
	if (j == NULL)
		return;
	if (c->admin)
		json_object_set_new(j, "admin", json_true());
	if (c->err.code != SP_E_NONE)
		json_object_set_new(j, "error",
		    json_string(sp_code_name(c->err.code)));
	if ((line = json_dumps(j, JSON_COMPACT)) != NULL) {
		size_t n = strlen(line);

		line[n] = '\n';
		/* One write of O_APPEND: lines of threads do not mix. */
		(void)!write(g.audit, line, n + 1);
		line[n] = '\0';
	}
	free(line);
	json_decref(j);
}

/* A call of a known caller is an event (sp_event.c); one forwarded here is
 * the event of the server it came through. */
static void
event(struct req *r)
{
	struct sp_api_call *c = &r->c;
	int status = c->status ? c->status : 200;
	char action[64];

	if (r->authed && !r->forwarded && c->x != NULL &&
	    c->route.name != NULL) {
		snprintf(action, sizeof action, "api.%s", c->route.name);
		sp_event_note(c->x->db, action, c->sandbox, status < 400 ? NULL :
		    sp_code_name(c->err.code != SP_E_NONE ? c->err.code :
		    SP_E_INTERNAL), sp_clock_ms() - r->t0, json_pack("{s:s, s:s,"
		    " s:i}", "method", r->method, "path", r->path, "status",
		    status));
	}
	sp_event_actor(NULL);
}

static void
completed(void *cls, struct MHD_Connection *conn, void **req_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct req *r = *req_cls;

	if (r == NULL)
		return;
	drop_stream(&r->c);
	audit(r);
	event(r);
	ctx_give(r->c.x);
	if (r->c.ctype_owned)
		free((char *)r->c.ctype);
	json_decref(r->c.json);
	free(r->c.raw);
	free(r->body);
	free(r);
	*req_cls = NULL;
}

static void
dispatch(struct req *r)
{
	struct sp_api_call *c = &r->c;
	struct sp_sandbox_row row;
	char node[64];
	const char *sid;
	struct sp_err e;
	int elsewhere;

	if (sp_api_route(r->method, r->path, &c->route, &e) == -1) {
		sp_api_fail(c, &e);
		if (e.code == SP_E_BAD_STATE)
			c->status = 405;
		return;
	}
	if (r->too_big) {
		sp_err_set(&e, SP_E_TOO_BIG, 0, "the body is over %zu bytes",
		    g.srv.opts.body_max);
		sp_api_fail(c, &e);
		return;
	}
	if ((c->x = ctx_take(&e)) == NULL) {
		sp_api_fail(c, &e);
		return;
	}
	c->body = (const unsigned char *)r->body;
	c->body_len = r->len;
	/* The guest API names its sandbox in a header. */
	sid = header(c, "E2b-Sandbox-Id");
	if (c->route.kind == SP_API_ENVD && sid != NULL && sp_id_valid(sid))
		snprintf(c->route.id, sizeof c->route.id, "%s", sid);
	/* The guest API's health needs no token: it says only whether the
	 * sandbox E2b-Sandbox-Id names answers. */
	if (!(c->route.kind == SP_API_ENVD && strcmp(c->route.name,
	    "health") == 0)) {
		if (authenticate(r, &e) == -1) {
			/* Never say whether a sandbox exists to one who may
			 * not. */
			sp_api_fail(c, &e);
			return;
		}
		actor(r);
	}
	/* A sandbox named by its name: the caller's tenant's of that name
	 * (an admin's: any tenant's, when only one has it). */
	if (c->route.ref[0] != '\0' && sp_db_sandbox_by_handle(c->x->db,
	    c->admin ? NULL : c->tenant, 0, c->route.ref, c->route.id,
	    &e) == -1) {
		/* Said as for an id: whether another tenant has the name is
		 * not this caller's to learn. */
		if (e.code == SP_E_NOT_FOUND)
			sp_err_set(&e, SP_E_NOT_FOUND, 0, "no such sandbox");
		sp_api_fail(c, &e);
		return;
	}
	/* The audit names the sandbox asked for, whether or not it was
	 * there for the caller. */
	snprintf(c->sandbox, sizeof c->sandbox, "%s", c->route.id);
	/* The caller's sandbox of another node: that node's server acts,
	 * as a command's wish is that node's to carry out.  A suspended one
	 * is restored where it is asked for. */
	if (c->route.id[0] != '\0' && sp_api_sandbox(c, c->route.id, &row,
	    &e) == 0) {
		elsewhere = row.node[0] != '\0' && strcmp(row.node,
		    c->x->conf.node) != 0 && !(row.state == SP_ST_SUSPENDED &&
		    (strcmp(c->route.name, "e2b.connect") == 0 ||
		    strcmp(c->route.name, "restore") == 0));
		snprintf(node, sizeof node, "%s", row.node);
		sp_db_row_release(&row);
		if (elsewhere) {
			if (sp_api_forward(c, node, &e) == -1)
				sp_api_fail(c, &e);
			return;
		}
	}
	switch (c->route.kind) {
	case SP_API_NATIVE:
		sp_api_native(c);
		break;
	case SP_API_E2B:
		sp_api_e2b(c);
		break;
	case SP_API_ENVD:
		sp_api_envd(c);
		break;
	}
}

static enum MHD_Result
access_cb(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **req_cls)
{
	struct req *r = *req_cls;
	const char *cl;
	char *nb;

	if (r == NULL) {
		if ((r = calloc(1, sizeof *r)) == NULL)
			return MHD_NO;
		r->conn = conn;
		r->t0 = sp_clock_ms();
		r->c.srv = &g.srv;
		r->c.header = header;
		r->c.query = query;
		r->c.multipart = multipart;
		r->c.target = target;
		r->c.conn = r;
		snprintf(r->method, sizeof r->method, "%s", method);
		snprintf(r->path, sizeof r->path, "%s", url);
		r->c.method = r->method;
		r->c.path = r->path;
		*req_cls = r;
		/* A length over the bound is refused before it is read. */
		cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
		    MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl != NULL && strtoull(cl, NULL, 10) > g.srv.opts.body_max) {
			r->too_big = 1;
			dispatch(r);
			return answer(r);
		}
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		if (!r->too_big && r->len + *upload_data_size <=
		    g.srv.opts.body_max) {
			if ((nb = realloc(r->body, r->len + *upload_data_size +
			    1)) == NULL)
				return MHD_NO;
			r->body = nb;
			memcpy(r->body + r->len, upload_data, *upload_data_size);
			r->len += *upload_data_size;
			r->body[r->len] = '\0';
		} else
			r->too_big = 1;
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (r->c.status != 0 || r->c.json != NULL)
		return MHD_YES;	/* answered already (too big) */
	dispatch(r);
	return answer(r);
}

/* ---- expiry: what a sandbox's timeout says, carried out here ---- */

static int
told(json_t *o, void *arg)
{
	(void)arg;
	json_decref(o);
	return 0;
}

static void *
expire(void *arg)
{
	volatile int *stop = arg;
	struct sp_ctx *x;
	struct sp_err e;

	while (!*stop) {
		usleep(EXPIRY_TICK_MS * 1000);
		if ((x = ctx_take(&e)) == NULL)
			continue;
		(void)sp_expiry_run(x, told, NULL, &e);
		ctx_give(x);
	}
	return NULL;
}

/* ---- start ---- */

static int
parse_listen(const char *s, struct sockaddr_storage *ss, struct sp_err *e)
{
	char host[128];
	const char *colon = strrchr(s, ':');
	struct addrinfo hints, *ai = NULL;

	if (colon == NULL || colon == s || (size_t)(colon - s) >= sizeof host)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "listen on ADDR:PORT, not "
		    "'%.64s'", s);
	memcpy(host, s, colon - s);
	host[colon - s] = '\0';
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, colon + 1, &hints, &ai) != 0 || ai == NULL)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "listen on ADDR:PORT (a "
		    "numeric address and port), not '%.64s'", s);
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	return 0;
}

/*
 * The leaf for host the node CA signs, as PEM texts for libmicrohttpd:
 * minted here, or by space-noded when this server goes through it (run
 * as space, the CA's key is root's alone).
 */
static int
tls_pems(const struct sp_conf *c, const char *host, char **key,
    char **cert, struct sp_err *e)
{
	char sock[SP_PATH_MAX];
	json_t *value = NULL;
	const char *k, *p;
	int via;

	*key = *cert = NULL;
	if ((via = sp_noded_for(c, sock, e)) == -1)
		return -1;
	if (via == 0)
		return sp_tls_leaf_pems(c->root, host, key, cert, e);
	if (sp_virt_noded_call(sock, json_pack("{s:s, s:s}", "op", "tls-leaf",
	    "host", host), &value, e) == -1)
		return -1;
	if ((k = json_string_value(json_object_get(value, "key"))) == NULL ||
	    (p = json_string_value(json_object_get(value, "cert"))) == NULL) {
		json_decref(value);
		return sp_err_set(e, SP_E_INTERNAL, 0, "tls-leaf: no key and "
		    "certificate");
	}
	*key = strdup(k);
	*cert = strdup(p);
	json_decref(value);
	if (*key == NULL || *cert == NULL) {
		free(*key);
		free(*cert);
		*key = *cert = NULL;
		return sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
	}
	return 0;
}

int
sp_api_serve(const struct sp_api_opts *o, volatile int *stop,
    struct sp_err *e)
{
	struct sockaddr_storage ss;
	struct MHD_Daemon *d;
	char host[128], *key = NULL, *cert = NULL, *colon, url[300];
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD |
	    MHD_USE_THREAD_PER_CONNECTION;
	pthread_t reaper;
	struct sp_ctx *x;
	int rc = 0;

	g.srv.opts = *o;
	if (sp_conf_load(&g.srv.conf, e) == -1 || parse_listen(o->listen, &ss,
	    e) == -1)
		return -1;
	/* A first context now: a DB that will not open fails here.  Other
	 * nodes' servers learn where this one listens. */
	if ((x = ctx_take(e)) == NULL)
		return -1;
	if (o->advertise[0] != '\0')
		snprintf(url, sizeof url, "%s", o->advertise);
	else
		snprintf(url, sizeof url, "%s://%s", o->tls ? "https" : "http",
		    o->listen);
	rc = sp_api_forward_init(x, url, e);
	ctx_give(x);
	if (rc == -1)
		return -1;
	if (o->audit[0] != '\0' && (g.audit = open(o->audit, O_WRONLY |
	    O_APPEND | O_CREAT | O_CLOEXEC, 0600)) == -1)
		return sp_err_sys(e, SP_E_IO, "audit log %s", o->audit);
	if (g.audit >= 0 && sp_path_adopt(g.audit, o->audit, e) == -1)
		return -1;
	if (o->tls) {
		snprintf(host, sizeof host, "%s", o->listen);
		if ((colon = strrchr(host, ':')) != NULL)
			*colon = '\0';
		if (host[0] == '[')
			memmove(host, host + 1, strlen(host)),
			    host[strlen(host) - 1] = '\0';
		if (tls_pems(&g.srv.conf, host, &key, &cert, e) == -1)
			return -1;
		flags |= MHD_USE_TLS;
	}
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* Writes to a client that went away fail; they do not kill us. */
	signal(SIGPIPE, SIG_IGN);
	d = MHD_start_daemon(flags, 0, NULL, NULL, access_cb, NULL,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_conns,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout_s,
	    MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
	    o->tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, key,
	    MHD_OPTION_HTTPS_MEM_CERT, cert,
	    MHD_OPTION_END);
	if (d == NULL) {
		free(key);
		free(cert);
		return sp_err_set(e, SP_E_IO, 0, "cannot listen on %s (in use, "
		    "or not an address of this host)", o->listen);
	}
	if (pthread_create(&reaper, NULL, expire, (void *)stop) != 0)
		rc = sp_err_set(e, SP_E_NOMEM, 1, "cannot start a thread");
	if (rc == 0 && o->ready) {
		printf("{\"ok\":true,\"listen\":\"%s\",\"tls\":%s}\n", o->listen,
		    o->tls ? "true" : "false");
		fflush(stdout);
	}
	while (rc == 0 && !*stop)
		pause();
	MHD_stop_daemon(d);
	if (rc == 0)
		pthread_join(reaper, NULL);
	free(key);
	free(cert);
	return rc;
}
