/*
 * sp_gateway: the tunnels of the network gateway.  A tunnel is one
 * sandbox's egress port (lib/sp_vm.h, "the egress tunnel"): a reader thread
 * takes its frames, opens a stream (and a worker thread, sp_gw_conn.c) per
 * OPEN, answers DNS questions itself, and keeps each stream's windows; the
 * workers write their frames under the tunnel's write lock.  Every byte
 * from the guest is hostile: frames are decoded strictly, a stream never
 * holds more than the window it was given, and a guest that breaks the
 * protocol loses its tunnel (the gateway connects again on its next scan).
 */
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_net.h"
#include "sp_gw.h"

#define SEND_TIMEOUT_S	30	/* a guest that reads nothing loses its tunnel */
#define WORKER_STACK	(256 * 1024)

/* ---- frames in ---- */

static struct gw_stream *
find_locked(struct gw_tunnel *t, uint32_t id)
{
	struct gw_stream *s;

	for (s = t->streams; s != NULL; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

static int
answer_dns(struct gw_tunnel *t, uint32_t id, json_t *req, struct sp_err *e)
{
	char reason[64];
	const char *name;
	json_t *a;
	char *text;
	int rc;

	name = json_string_value(json_object_get(req, "name"));
	if (name == NULL || strlen(name) > SP_EGRESS_NAME_MAX)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "dns OPEN without a name");
	if (gw_dns_allow(t, name, reason, sizeof reason))
		a = json_pack("{s:s, s:b}", "name", name, "allow", 1);
	else
		a = json_pack("{s:s, s:b, s:s}", "name", name, "allow", 0,
		    "reason", reason);
	if (a == NULL || (text = json_dumps(a, JSON_COMPACT)) == NULL) {
		json_decref(a);
		return sp_err_set(e, SP_E_NOMEM, 1, "dns answer");
	}
	rc = gw_send_frame(t, SP_FR_ANSWER, id, text, strlen(text));
	free(text);
	json_decref(a);
	return rc == -1 ? sp_err_set(e, SP_E_IO, 1, "the guest went") : 0;
}

/* A pending connection taken whose stream could not be made. */
static void
refuse_pending(struct sp_gateway *g, struct gw_pending *p)
{
	pthread_mutex_lock(&g->mu);
	p->refused = 1;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

static int
open_stream(struct gw_tunnel *t, uint32_t id, json_t *req, struct sp_err *e)
{
	struct sp_gateway *g = t->g;
	const char *kind, *host = NULL;
	struct gw_stream *s;
	pthread_attr_t a;
	pthread_t th;
	json_int_t port = 0;
	struct gw_pending *p = NULL;
	json_t *ref;

	kind = json_string_value(json_object_get(req, "kind"));
	if (kind == NULL)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "OPEN without a kind");
	if (strcmp(kind, "dns") == 0)
		return answer_dns(t, id, req, e);
	if (strcmp(kind, "inbound") == 0) {
		/* The answer to a connection we asked for: nobody asked for
		 * one that is not waiting any more (or never was). */
		ref = json_object_get(req, "ref");
		if (!json_is_integer(ref) || json_integer_value(ref) < 1)
			return sp_err_set(e, SP_E_PROTOCOL, 0,
			    "inbound OPEN without a ref");
		pthread_mutex_lock(&g->mu);
		p = gw_pending_take_locked(t, (uint64_t)json_integer_value(ref));
		if (p != NULL && json_object_get(req, "error") != NULL) {
			p->refused = 1;
			pthread_cond_broadcast(&g->cv);
			pthread_mutex_unlock(&g->mu);
			return 0;
		}
		pthread_mutex_unlock(&g->mu);
		if (json_object_get(req, "error") != NULL)
			return 0;
		if (p == NULL) {
			gw_send_frame(t, SP_FR_CLOSE, id, NULL, 0);
			return 0;
		}
	} else if (strcmp(kind, "tcp") == 0) {
		host = json_string_value(json_object_get(req, "host"));
		port = json_integer_value(json_object_get(req, "port"));
		if (host == NULL || strlen(host) == 0 ||
		    strlen(host) > SP_EGRESS_NAME_MAX || port < 1 ||
		    port > 65535)
			return sp_err_set(e, SP_E_PROTOCOL, 0,
			    "tcp OPEN without a host and port");
	} else if (strcmp(kind, "proxy") != 0)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "OPEN of kind '%.32s'",
		    kind);
	pthread_mutex_lock(&g->mu);
	if (id == 0 || find_locked(t, id) != NULL) {
		pthread_mutex_unlock(&g->mu);
		if (p != NULL)
			refuse_pending(g, p);
		return sp_err_set(e, SP_E_PROTOCOL, 0, "OPEN of stream %u in use",
		    id);
	}
	/* One sandbox may not take more than its share, nor all of them
	 * together the node: each stream is a thread and two windows. */
	if (t->nstreams >= SP_EGRESS_STREAMS_MAX ||
	    g->nstreams >= SP_GATEWAY_STREAMS_MAX) {
		pthread_mutex_unlock(&g->mu);
		if (p != NULL)
			refuse_pending(g, p);
		gw_send_frame(t, SP_FR_CLOSE, id, NULL, 0);
		return 0;
	}
	pthread_mutex_unlock(&g->mu);
	if ((s = calloc(1, sizeof *s)) == NULL ||
	    (s->in = malloc(SP_EGRESS_WINDOW)) == NULL ||
	    (s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1) {
		if (s != NULL)
			free(s->in);
		free(s);
		if (p != NULL)
			refuse_pending(g, p);
		gw_send_frame(t, SP_FR_CLOSE, id, NULL, 0);
		return 0;
	}
	s->t = t;
	s->id = id;
	s->inbound = p != NULL;
	s->proxy = host == NULL && p == NULL;
	if (host != NULL)
		snprintf(s->host, sizeof s->host, "%s", host);
	s->port = (int)port;
	s->credit = SP_EGRESS_WINDOW;
	s->refs = 2;		/* the table's and the worker's */
	pthread_mutex_lock(&g->mu);
	s->next = t->streams;
	t->streams = s;
	t->nstreams++;
	t->refs++;
	g->nstreams++;
	if (p != NULL) {
		/* Its worker is the thread that waits for it. */
		p->s = s;
		pthread_cond_broadcast(&g->cv);
		pthread_mutex_unlock(&g->mu);
		return 0;
	}
	pthread_mutex_unlock(&g->mu);
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, WORKER_STACK);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &a, gw_conn_main, s) != 0) {
		pthread_mutex_lock(&g->mu);
		s->refs--;		/* no worker */
		gw_unlink_locked(s);
		pthread_mutex_unlock(&g->mu);
		gw_send_frame(t, SP_FR_CLOSE, id, NULL, 0);
	}
	pthread_attr_destroy(&a);
	return 0;
}

static int
stream_data(struct gw_tunnel *t, const struct sp_frame *f, struct sp_err *e)
{
	struct sp_gateway *g = t->g;
	struct gw_stream *s;
	size_t at, first;

	pthread_mutex_lock(&g->mu);
	if ((s = find_locked(t, f->stream)) == NULL || s->closed) {
		pthread_mutex_unlock(&g->mu);
		return 0;
	}
	if (f->len == 0)
		s->in_eof = 1;
	else if (s->in_eof || f->len > SP_FRAME_CHUNK ||
	    s->in_len + f->len > SP_EGRESS_WINDOW) {
		pthread_mutex_unlock(&g->mu);
		return sp_err_set(e, SP_E_PROTOCOL, 0, "stream %u: %u bytes of "
		    "DATA over its window or after its EOF", f->stream,
		    f->len);
	} else {
		at = (s->in_off + s->in_len) % SP_EGRESS_WINDOW;
		first = SP_EGRESS_WINDOW - at;
		if (first > f->len)
			first = f->len;
		memcpy(s->in + at, f->data, first);
		memcpy(s->in, f->data + first, f->len - first);
		s->in_len += f->len;
	}
	gw_kick(s);
	pthread_mutex_unlock(&g->mu);
	return 0;
}

static int
stream_window(struct gw_tunnel *t, const struct sp_frame *f,
    struct sp_err *e)
{
	struct sp_gateway *g = t->g;
	struct gw_stream *s;

	if (f->len != 4)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "WINDOW of %u bytes",
		    f->len);
	pthread_mutex_lock(&g->mu);
	if ((s = find_locked(t, f->stream)) != NULL) {
		s->credit += sp_be32_get(f->data);
		/* A guest may not grant more than it could hold. */
		if (s->credit > 4 * (int64_t)SP_EGRESS_WINDOW)
			s->credit = 4 * (int64_t)SP_EGRESS_WINDOW;
		gw_kick(s);
	}
	pthread_mutex_unlock(&g->mu);
	return 0;
}

static int
handle_frame(struct gw_tunnel *t, const struct sp_frame *f, struct sp_err *e)
{
	struct sp_gateway *g = t->g;
	struct gw_stream *s;
	json_t *j;
	int rc;

	switch (f->type) {
	case SP_FR_HELLO:
		if (sp_frame_json(f, &j, e) == -1)
			return -1;
		pthread_mutex_lock(&g->mu);
		t->hello = 1;
		t->inbound = json_integer_value(json_object_get(j,
		    "inbound")) == 1;
		pthread_mutex_unlock(&g->mu);
		json_decref(j);
		return 0;
	case SP_FR_OPEN:
		if (sp_frame_json(f, &j, e) == -1)
			return -1;
		rc = open_stream(t, f->stream, j, e);
		json_decref(j);
		return rc;
	case SP_FR_DATA:
		return stream_data(t, f, e);
	case SP_FR_WINDOW:
		return stream_window(t, f, e);
	case SP_FR_CLOSE:
		pthread_mutex_lock(&g->mu);
		if ((s = find_locked(t, f->stream)) != NULL)
			gw_unlink_locked(s);
		pthread_mutex_unlock(&g->mu);
		return 0;
	default:
		return sp_err_set(e, SP_E_PROTOCOL, 0, "frame of type %u on the "
		    "egress port", f->type);
	}
}

static void
tunnel_end(struct gw_tunnel *t, const struct sp_err *why)
{
	struct sp_gateway *g = t->g;

	if (why != NULL && why->msg[0] != '\0')
		sp_warn("%s: %s", t->id, why->msg);
	shutdown(t->fd, SHUT_RDWR);
	pthread_mutex_lock(&g->mu);
	t->dead = 1;
	while (t->streams != NULL)
		gw_unlink_locked(t->streams);
	pthread_cond_broadcast(&g->cv);	/* inbound connections waiting */
	gw_tunnel_put_locked(t);		/* the reader's */
	pthread_mutex_unlock(&g->mu);
}

static void *
reader_main(void *arg)
{
	struct gw_tunnel *t = arg;
	struct sp_frame_dec dec;
	struct sp_frame f;
	struct sp_err e;
	unsigned char *buf;
	ssize_t n;
	int r;

	memset(&e, 0, sizeof e);
	sp_frame_dec_init(&dec);
	if ((buf = malloc(SP_FRAME_CHUNK)) == NULL)
		goto out;
	for (;;) {
		n = read(t->fd, buf, SP_FRAME_CHUNK);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (sp_frame_dec_feed(&dec, buf, (size_t)n, &e) == -1)
			goto out;
		while ((r = sp_frame_dec_next(&dec, &f, &e)) == 1)
			if (handle_frame(t, &f, &e) == -1)
				goto out;
		if (r == -1)
			goto out;
	}
out:
	free(buf);
	sp_frame_dec_release(&dec);
	tunnel_end(t, &e);
	return NULL;
}

/* ---- the gateway ---- */

int
sp_gateway_run_dirs(const char *run, struct sp_err *e)
{
	static const char *const dirs[] = { SP_GATEWAY_DIR,
	    SP_GATEWAY_COUNTS_DIR };
	char p[SP_PATH_MAX];
	size_t i;

	for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
		if (sp_path_fmt(p, sizeof p, e, "%s/%s", run, dirs[i]) == -1 ||
		    sp_path_space_dir(p, 0755, e) == -1)
			return -1;
	return 0;
}

int
sp_gateway_new(struct sp_gateway **out, const struct sp_gateway_opts *o,
    struct sp_err *e)
{
	struct sp_gateway *g;
	pthread_condattr_t ca;
	struct sp_err e2;

	*out = NULL;
	if ((g = calloc(1, sizeof *g)) == NULL)
		return sp_err_sys(e, SP_E_NOMEM, "gateway");
	g->o = *o;
	snprintf(g->root, sizeof g->root, "%s", o->conf->root);
	snprintf(g->run, sizeof g->run, "%s", o->conf->run);
	snprintf(g->upstream_ca, sizeof g->upstream_ca, "%s",
	    o->upstream_ca != NULL ? o->upstream_ca : "");
	snprintf(g->hosts, sizeof g->hosts, "%s",
	    o->hosts != NULL ? o->hosts : "");
	if (g->o.connect_timeout_ms <= 0)
		g->o.connect_timeout_ms = 10000;
	pthread_mutex_init(&g->mu, NULL);
	/* Inbound connections wait on it with monotonic deadlines. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cv, &ca);
	pthread_condattr_destroy(&ca);
	g->ports_status_due = 1;
	sp_egress_never_init(&g->never);
	if (sp_egress_never_load(&g->never, e) == -1)
		goto fail;
	if ((g->client = sp_tls_client_ctx(g->upstream_ca, e)) == NULL)
		goto fail;
	/* Without a node CA the gateway still relays; it cannot add a
	 * credential to TLS, and says so per request. */
	if (sp_tls_ca_load(g->root, &g->ca, &e2) == -1) {
		g->ca = NULL;
		sp_warn("no node CA (%s): credentials go only into plain "
		    "HTTP", e2.msg);
	}
	*out = g;
	return 0;
fail:
	sp_gateway_free(g);
	return -1;
}

void
sp_gateway_free(struct sp_gateway *g)
{
	struct gw_tunnel *t;

	if (g == NULL)
		return;
	gw_ports_stop(g);
	pthread_mutex_lock(&g->mu);
	g->stopping = 1;
	for (t = g->tunnels; t != NULL; t = t->next)
		shutdown(t->fd, SHUT_RDWR);
	while (g->ntunnels > 0 || g->ninbound > 0)
		pthread_cond_wait(&g->cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
	sp_egress_never_release(&g->never);
	if (g->client != NULL)
		SSL_CTX_free(g->client);
	sp_tls_ca_free(g->ca);
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->cv);
	free(g);
}

int
sp_gateway_reload(struct sp_gateway *g, struct sp_err *e)
{
	struct sp_egress_never nv;

	sp_egress_never_init(&nv);
	if (sp_egress_never_load(&nv, e) == -1) {
		sp_egress_never_release(&nv);
		return -1;
	}
	pthread_mutex_lock(&g->mu);
	sp_egress_never_release(&g->never);
	g->never = nv;
	pthread_mutex_unlock(&g->mu);
	return 0;
}

void
sp_gateway_counts(struct sp_gateway *g, int *tunnels, int *streams)
{
	pthread_mutex_lock(&g->mu);
	*tunnels = g->ntunnels;
	*streams = g->nstreams;
	pthread_mutex_unlock(&g->mu);
}

/* The sandbox's tenant, project and template, for policy and credentials.
 * A sandbox the database does not know gets its own policy only. */
static void
tunnel_labels(struct gw_tunnel *t)
{
	struct sp_sandbox_row r;
	struct sp_db *db = NULL;
	struct sp_err e;
	json_t *l;

	memset(&r, 0, sizeof r);
	if (sp_db_open(&db, t->g->o.conf, &e) == -1 ||
	    sp_db_sandbox_get(db, t->id, &r, &e) == -1)
		goto out;
	snprintf(t->template, sizeof t->template, "%s", r.template);
	if (r.labels != NULL &&
	    (l = json_loads(r.labels, JSON_REJECT_DUPLICATES, NULL)) != NULL) {
		snprintf(t->tenant, sizeof t->tenant, "%s",
		    json_string_value(json_object_get(l, "tenant")) ?
		    json_string_value(json_object_get(l, "tenant")) : "");
		snprintf(t->project, sizeof t->project, "%s",
		    json_string_value(json_object_get(l, "project")) ?
		    json_string_value(json_object_get(l, "project")) : "");
		json_decref(l);
	}
out:
	sp_db_row_release(&r);
	sp_db_close(db);
}

int
sp_gateway_attach(struct sp_gateway *g, const char *id, const char *sock,
    struct sp_err *e)
{
	struct sockaddr_un sa;
	struct timeval tv = { .tv_sec = SEND_TIMEOUT_S };
	struct gw_tunnel *t;
	pthread_attr_t a;
	pthread_t th;
	char hello[96];
	int fd, rc;

	if (strlen(sock) >= sizeof sa.sun_path)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "socket path too long");
	if ((t = calloc(1, sizeof *t)) == NULL)
		return sp_err_sys(e, SP_E_NOMEM, "tunnel");
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, sock);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof sa) == -1) {
		sp_err_sys(e, SP_E_IO, "connecting to '%s'", sock);
		if (fd >= 0)
			close(fd);
		free(t);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	t->g = g;
	t->fd = fd;
	snprintf(t->id, sizeof t->id, "%s", id);
	pthread_mutex_init(&t->wmu, NULL);
	pthread_mutex_init(&t->wake_mu, NULL);
	tunnel_labels(t);
	t->refs = 1;		/* the reader's */
	snprintf(hello, sizeof hello, "{\"op\":\"hello\",\"nonce\":\"gw-%ld\"}",
	    (long)getpid());
	pthread_mutex_lock(&g->mu);
	t->next = g->tunnels;
	g->tunnels = t;
	g->ntunnels++;
	pthread_mutex_unlock(&g->mu);
	gw_send_frame(t, SP_FR_HELLO, 0, hello, strlen(hello));
	/* Detached from the start: the reader may end and free t before
	 * pthread_create returns (a guest that breaks the protocol at once),
	 * so nothing of t is touched after. */
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &a, reader_main, t);
	pthread_attr_destroy(&a);
	if (rc != 0) {
		errno = rc;
		sp_err_sys(e, SP_E_IO, "starting a tunnel");
		tunnel_end(t, NULL);
		return -1;
	}
	return 0;
}

static int
served(struct sp_gateway *g, const char *id)
{
	struct gw_tunnel *t;
	int yes = 0;

	pthread_mutex_lock(&g->mu);
	for (t = g->tunnels; t != NULL && !yes; t = t->next)
		yes = !t->dead && strcmp(t->id, id) == 0;
	pthread_mutex_unlock(&g->mu);
	return yes;
}

int
sp_gateway_scan(struct sp_gateway *g, int *attached, struct sp_err *e)
{
	char sock[SP_PATH_MAX];
	struct dirent *de;
	struct stat st;
	struct sp_err e2;
	DIR *d;

	if (attached != NULL)
		*attached = 0;
	if ((d = opendir(g->run)) == NULL)
		return errno == ENOENT ? 0 :
		    sp_err_sys(e, SP_E_IO, "reading '%s'", g->run);
	while ((de = readdir(d)) != NULL) {
		if (sp_id_check(de->d_name, &e2) == -1 ||
		    served(g, de->d_name))
			continue;
		if (snprintf(sock, sizeof sock, "%s/%s/" SP_EGRESS_SOCK,
		    g->run, de->d_name) >= (int)sizeof sock ||
		    stat(sock, &st) == -1 || !S_ISSOCK(st.st_mode))
			continue;
		if (sp_gateway_attach(g, de->d_name, sock, &e2) == 0 &&
		    attached != NULL)
			(*attached)++;
	}
	closedir(d);
	return 0;
}
