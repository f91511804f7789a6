/*
 * sp_gw_conn: one connection of a sandbox through the gateway, in a thread
 * of its own.  It decides where the connection may go (the sandbox's policy,
 * the node's never-list, the addresses the gateway resolved itself), then
 * relays.  When a credential is bound to the host in the sandbox's scope it
 * reads the guest's side as HTTP -- behind TLS terminated with the node CA
 * when the guest speaks TLS -- and adds the credential to each request;
 * responses always flow back untouched.  Nothing is buffered beyond one
 * chunk each way: the tunnel's windows hold the guest, the socket holds the
 * upstream.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>

#include "sp_net.h"
#include "sp_gw.h"

#define UB_CAP		(SP_HTTP_HEAD_MAX + SP_CRED_OUT_MAX + 1024)
#define REPLY_MAX	1024
#define TICK_MS		1000
#define LINGER_MS	30000	/* for the guest's EOF after a refusal */

enum { M_RAW, M_PEEK, M_HTTP };

struct conn {
	struct gw_stream *s;
	struct gw_tunnel *t;
	struct sp_gateway *g;
	int mode;
	int up;				/* upstream socket, or -1 */
	SSL *up_ssl;
	int up_want_write;
	char up_host[SP_EGRESS_NAME_MAX + 1];
	int up_port;
	SSL *g_ssl;			/* TLS toward the guest, or NULL */
	BIO *g_rbio, *g_wbio;
	unsigned char gt[SP_FRAME_CHUNK];	/* TLS bytes for the guest */
	size_t gt_len, gt_off;
	struct sp_http h;
	int tunneled;			/* a proxy stream after CONNECT */
	unsigned char gin[SP_FRAME_CHUNK];	/* guest bytes for the parser */
	size_t gin_len, gin_off;
	unsigned char *ub;		/* bytes for the upstream */
	size_t ub_len, ub_off;
	int ub_secret;			/* ub holds a credential: wipe it */
	unsigned char db[SP_FRAME_CHUNK];	/* bytes for the guest */
	size_t db_len, db_off;
	char reply[REPLY_MAX];		/* a response of the gateway's own */
	size_t reply_len;
	int g_eof, up_eof, up_shut, g_sent_eof, refused;
	char *secret;			/* SP_CRED_OUT_MAX, wiped after use */
	int had_secret;			/* ub held one: wipe it at the end */
};

/* ---- decisions ---- */

static int
policy_load(struct gw_tunnel *t, struct sp_egress_policy *p)
{
	struct sp_err e;

	sp_egress_policy_init(p);
	return sp_egress_policy_load(t->g->root, t->id,
	    t->tenant[0] ? t->tenant : NULL,
	    t->template[0] ? t->template : NULL, p, &e) == -1 ? -1 : 0;
}

static void
log_decision(struct gw_tunnel *t, const char *kind, const char *host,
    int port, const struct sp_egress_decision *d)
{
	struct sp_err e;

	if (t->g->o.log_fd >= 0)
		sp_egress_log(t->g->o.log_fd, t->id, kind, host, port, d, &e);
}

int
gw_dns_allow(struct gw_tunnel *t, const char *name, char *reason, size_t n)
{
	struct sp_egress_policy p;
	struct sp_egress_decision d;

	memset(&d, 0, sizeof d);
	if (policy_load(t, &p) == -1)
		sp_egress_decision_deny(&d, "policy-error", "");
	else
		sp_egress_decide_dns(&p, name, &d);
	sp_egress_policy_release(&p);
	log_decision(t, "dns", name, 0, &d);
	snprintf(reason, n, "%s", d.reason);
	return d.allow;
}

/* host's addresses: from the node's hosts file first, else the resolver. */
static size_t
resolve(struct sp_gateway *g, const char *host,
    struct sp_egress_addr *out, size_t max)
{
	struct addrinfo hints, *res = NULL, *ai;
	char line[1024], *tok, *save, *addr;
	struct sp_egress_addr a;
	struct sp_err e;
	size_t n = 0;
	FILE *f;

	if (g->hosts[0] != '\0' && (f = fopen(g->hosts, "re")) != NULL) {
		while (n < max && fgets(line, sizeof line, f) != NULL) {
			line[strcspn(line, "#\n")] = '\0';
			if ((addr = strtok_r(line, " \t", &save)) == NULL ||
			    sp_egress_addr_parse(addr, &a, &e) == -1)
				continue;
			while ((tok = strtok_r(NULL, " \t", &save)) != NULL)
				if (strcasecmp(tok, host) == 0 && n < max) {
					out[n++] = a;
					break;
				}
		}
		fclose(f);
		if (n > 0)
			return n;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return 0;
	for (ai = res; ai != NULL && n < max; ai = ai->ai_next)
		if (sp_egress_addr_from_sockaddr(ai->ai_addr, &out[n]) == 0)
			n++;
	freeaddrinfo(res);
	return n;
}

static int
connect_one(const struct sp_egress_addr *a, int port, int timeout_ms)
{
	struct sockaddr_storage ss;
	struct pollfd p;
	socklen_t len;
	int fd, err = 0;

	sp_egress_addr_to_sockaddr(a, port, &ss, &len);
	if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0)) == -1)
		return -1;
	/* Heads and chunks go out as they come: no waiting on Nagle. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	if (connect(fd, (struct sockaddr *)&ss, len) == 0)
		return fd;
	if (errno == EINPROGRESS) {
		p.fd = fd;
		p.events = POLLOUT;
		len = sizeof err;
		if (poll(&p, 1, timeout_ms) == 1 &&
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
		    err == 0)
			return fd;
	}
	close(fd);
	return -1;
}

/*
 * Decides host:port for the sandbox and connects; 0 with c->up set, -1
 * refused or -2 allowed but unreachable, with why (the reason the guest is
 * told).  The addresses connected to are
 * exactly those the decision checked.
 */
static int
decide_connect(struct conn *c, const char *host, int port, char *why,
    size_t n)
{
	struct sp_egress_addr addrs[SP_EGRESS_ADDRS_MAX], a;
	struct sp_egress_policy p;
	struct sp_egress_decision d;
	struct sp_err e;
	size_t na = 0, i;
	int is_addr, fd = -1;

	memset(&d, 0, sizeof d);
	if (policy_load(c->t, &p) == -1) {
		sp_egress_decision_deny(&d, "policy-error", "");
		goto decided;
	}
	if (!sp_egress_decide_name(&p, host, port, &d))
		goto decided;
	is_addr = sp_egress_addr_parse(host, &a, &e) == 0;
	if (!is_addr && (na = resolve(c->g, host, addrs,
	    SP_EGRESS_ADDRS_MAX)) == 0) {
		sp_egress_decision_deny(&d, "no-address", "");
		goto decided;
	}
	pthread_mutex_lock(&c->g->mu);
	sp_egress_decide(&p, &c->g->never, host, port, addrs, na, &d);
	pthread_mutex_unlock(&c->g->mu);
decided:
	sp_egress_policy_release(&p);
	log_decision(c->t, "connect", host, port, &d);
	if (!d.allow) {
		snprintf(why, n, "%s%s%s", d.reason, d.rule[0] ? " " : "",
		    d.rule);
		return -1;
	}
	for (i = 0; i < d.naddrs && fd == -1; i++)
		fd = connect_one(&d.addrs[i], port, c->g->o.connect_timeout_ms);
	if (fd == -1) {
		snprintf(why, n, "connect-failed");
		return -2;
	}
	c->up = fd;
	snprintf(c->up_host, sizeof c->up_host, "%s", host);
	c->up_port = port;
	return 0;
}

/* ---- the gateway's own responses ---- */

static void
respond(struct conn *c, int status, const char *text, const char *host,
    int port, const char *why, const char *extra)
{
	char body[512];
	int bn, n;

	bn = snprintf(body, sizeof body, "space-gateway: %.253s:%d: %s\n",
	    host, port, why);
	if (bn < 0 || bn >= (int)sizeof body)
		bn = (int)strlen(body);
	n = snprintf(c->reply, sizeof c->reply, "HTTP/1.1 %d %s\r\n"
	    "Content-Type: text/plain\r\nConnection: close\r\n"
	    "X-Space-Egress: %.100s\r\n%sContent-Length: %d\r\n\r\n%s",
	    status, text, why, extra ? extra : "", bn, body);
	c->reply_len = n > 0 && n < (int)sizeof c->reply ? (size_t)n : 0;
	c->refused = 1;
}

/* A decision's no (403) or an upstream that did not answer (502). */
static void
refuse(struct conn *c, int r, const char *host, int port, const char *why)
{
	if (r == -2)
		respond(c, 502, "Bad Gateway", host, port, why, NULL);
	else
		respond(c, 403, "Forbidden", host, port, why, NULL);
}

static void
up_close(struct conn *c)
{
	if (c->up_ssl != NULL) {
		SSL_free(c->up_ssl);
		c->up_ssl = NULL;
	}
	if (c->up >= 0)
		close(c->up);
	c->up = -1;
	c->up_eof = c->up_shut = 0;
}

/* ---- TLS ---- */

/* A credential for the connection's host: read it as HTTP (M_PEEK tells
 * TLS from plain text by the first byte); else relay it as it is. */
static void
choose_mode(struct conn *c)
{
	struct sp_cred cr;
	struct sp_err e;

	c->mode = sp_cred_resolve(c->g->root, c->t->id, c->t->tenant,
	    c->t->project, c->up_host, &cr, &e) == 0 ? M_PEEK : M_RAW;
}

/* TLS to the upstream, verified: the handshake happens on the first
 * read or write. */
static int
up_tls(struct conn *c)
{
	struct sp_err e;

	if ((c->up_ssl = SSL_new(c->g->client)) == NULL ||
	    sp_tls_client_host(c->up_ssl, c->up_host, &e) == -1 ||
	    SSL_set_fd(c->up_ssl, c->up) != 1) {
		if (c->up_ssl != NULL)
			SSL_free(c->up_ssl);
		c->up_ssl = NULL;
		ERR_clear_error();
		return -1;
	}
	SSL_set_mode(c->up_ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_set_connect_state(c->up_ssl);
	return 0;
}

static int
start_tls(struct conn *c)
{
	struct sp_err e;
	SSL_CTX *ctx;

	if (c->g->ca == NULL) {
		sp_warn("%s: TLS to %s needs a credential and there is no "
		    "node CA", c->t->id, c->up_host);
		return -1;
	}
	if ((ctx = sp_tls_server_ctx(c->g->ca, c->up_host, &e)) == NULL)
		goto fail;
	c->g_ssl = SSL_new(ctx);
	SSL_CTX_free(ctx);
	if (c->g_ssl == NULL)
		goto fail;
	c->g_rbio = BIO_new(BIO_s_mem());
	c->g_wbio = BIO_new(BIO_s_mem());
	if (c->g_rbio == NULL || c->g_wbio == NULL)
		goto fail;
	SSL_set_bio(c->g_ssl, c->g_rbio, c->g_wbio);
	SSL_set_accept_state(c->g_ssl);
	if (up_tls(c) == -1)
		goto fail;
	return 0;
fail:
	if (c->g_ssl == NULL) {
		BIO_free(c->g_rbio);
		BIO_free(c->g_wbio);
	}
	c->g_rbio = c->g_wbio = NULL;
	ERR_clear_error();
	return -1;
}

/* TLS bytes for the guest, within its window: -2 when it is gone. */
static int
guest_tls_flush(struct conn *c)
{
	ssize_t w;
	int r;

	for (;;) {
		if (c->gt_off == c->gt_len) {
			c->gt_off = c->gt_len = 0;
			if ((r = BIO_read(c->g_wbio, c->gt, sizeof c->gt)) <= 0)
				return 0;
			c->gt_len = (size_t)r;
		}
		w = gw_guest_write(c->s, c->gt + c->gt_off,
		    c->gt_len - c->gt_off);
		if (w < 0)
			return -2;
		if (w == 0)
			return 0;
		c->gt_off += (size_t)w;
	}
}

/* Plain bytes from the guest: >0, 0 at EOF, -1 for none yet, -2 gone. */
static ssize_t
guest_in(struct conn *c, void *buf, size_t n)
{
	unsigned char tmp[16384];
	ssize_t r = -1;
	int k, err;

	if (c->g_ssl == NULL)
		return gw_guest_read(c->s, buf, n);
	/* Only as much ciphertext as one chunk: the window is the guest's
	 * limit, this the gateway's. */
	while (BIO_pending(c->g_rbio) < SP_FRAME_CHUNK &&
	    (r = gw_guest_read(c->s, tmp, sizeof tmp)) > 0)
		BIO_write(c->g_rbio, tmp, (int)r);
	if (r == -2)
		return -2;
	if (r == 0)
		BIO_set_mem_eof_return(c->g_rbio, 0);
	k = SSL_read(c->g_ssl, buf, (int)n);
	if (guest_tls_flush(c) == -2)
		return -2;
	if (k > 0)
		return k;
	err = SSL_get_error(c->g_ssl, k);
	ERR_clear_error();
	if (err == SSL_ERROR_WANT_READ)
		return r == 0 ? 0 : -1;
	if (err == SSL_ERROR_ZERO_RETURN)
		return 0;
	return -3;
}

/* Bytes to the guest: >0 taken, 0 for later, -2 gone, -3 TLS error. */
static ssize_t
guest_out(struct conn *c, const void *buf, size_t n)
{
	int k;

	if (c->g_ssl == NULL)
		return gw_guest_write(c->s, buf, n);
	if (guest_tls_flush(c) == -2)
		return -2;
	if (c->gt_off < c->gt_len || BIO_pending(c->g_wbio) > 0)
		return 0;
	if (!SSL_is_init_finished(c->g_ssl))
		return 0;
	k = SSL_write(c->g_ssl, buf, n > 16384 ? 16384 : (int)n);
	if (k <= 0) {
		ERR_clear_error();
		return -3;
	}
	return guest_tls_flush(c) == -2 ? -2 : k;
}

/* From the upstream: >0, 0 at EOF, -1 for later, -3 error. */
static ssize_t
up_in(struct conn *c, void *buf, size_t n)
{
	ssize_t r;
	int k, err;

	if (c->up_ssl == NULL) {
		r = read(c->up, buf, n);
		if (r > 0 && !c->s->inbound)
			gw_count(c->t, 0, (size_t)r);
		if (r >= 0)
			return r;
		return errno == EAGAIN || errno == EINTR ? -1 : -3;
	}
	k = SSL_read(c->up_ssl, buf, (int)n);
	if (k > 0) {
		gw_count(c->t, 0, (size_t)k);
		return k;
	}
	err = SSL_get_error(c->up_ssl, k);
	ERR_clear_error();
	c->up_want_write = err == SSL_ERROR_WANT_WRITE;
	if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
		return -1;
	if (err == SSL_ERROR_ZERO_RETURN ||
	    (err == SSL_ERROR_SYSCALL && errno == 0))
		return 0;
	sp_warn("%s: TLS to %s:%d failed", c->t->id, c->up_host,
	    c->up_port);
	return -3;
}

/* To the upstream: >0 taken, 0 for later, -3 error. */
static ssize_t
up_out(struct conn *c, const void *buf, size_t n)
{
	ssize_t w;
	int k, err;

	if (c->up_ssl == NULL) {
		w = send(c->up, buf, n, MSG_NOSIGNAL);
		if (w > 0 && !c->s->inbound)
			gw_count(c->t, 1, (size_t)w);
		if (w >= 0)
			return w;
		return errno == EAGAIN || errno == EINTR ? 0 : -3;
	}
	k = SSL_write(c->up_ssl, buf, (int)n);
	if (k > 0) {
		gw_count(c->t, 1, (size_t)k);
		return k;
	}
	err = SSL_get_error(c->up_ssl, k);
	ERR_clear_error();
	c->up_want_write = err == SSL_ERROR_WANT_WRITE;
	return err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE ?
	    0 : -3;
}

/* ---- HTTP: heads rewritten, credentials added ---- */

static int
ub_add(struct conn *c, const void *p, size_t n)
{
	if (c->ub_len + n > UB_CAP)
		return -1;
	memcpy(c->ub + c->ub_len, p, n);
	c->ub_len += n;
	return 0;
}

static int
ub_str(struct conn *c, const char *s)
{
	return ub_add(c, s, strlen(s));
}

static int
skip_header(const char *name, size_t n, const char *injected, size_t in)
{
	static const char *const proxy_only[] = { "proxy-connection",
	    "proxy-authorization", NULL };
	int i;

	for (i = 0; proxy_only[i] != NULL; i++)
		if (n == strlen(proxy_only[i]) &&
		    strncasecmp(name, proxy_only[i], n) == 0)
			return 1;
	/* The guest's own value of the header the credential sets would
	 * otherwise travel beside it. */
	return in > 0 && n == in && strncasecmp(name, injected, n) == 0;
}

/*
 * The head for the upstream: target (origin form), the guest's headers but
 * those only a proxy reads, and the credential as its method says.
 * Returns 0, or -1 having set a response of the gateway's own.
 */
static int
write_head(struct conn *c, const char *target, size_t tlen, const char *host)
{
	struct sp_cred_grant gr;
	struct sp_cred cr;
	struct sp_err e;
	const char *name, *value;
	char line[64], retry[64];
	size_t nlen, vlen, key_len = 0;
	int i, have = 0, query = 0;

	if (sp_cred_resolve(c->g->root, c->t->id, c->t->tenant,
	    c->t->project, host, &cr, &e) == 0) {
		/* Only a stream that carries a credential holds room for
		 * one. */
		if (c->secret == NULL &&
		    (c->secret = malloc(SP_CRED_OUT_MAX)) == NULL) {
			respond(c, 502, "Bad Gateway", host, c->up_port,
			    "out-of-memory", NULL);
			return -1;
		}
		c->had_secret = 1;
		if (sp_cred_use(c->g->root, c->t->id, c->t->tenant,
		    c->t->project, host, time(NULL), &gr, c->secret,
		    SP_CRED_OUT_MAX, &e) == 0) {
			have = 1;
			query = gr.how == SP_CRED_QUERY;
			key_len = gr.key_len;
		} else if (e.code == SP_E_RATE_LIMITED) {
			snprintf(retry, sizeof retry, "Retry-After: %lld\r\n",
			    (long long)gr.retry_after);
			respond(c, 429, "Too Many Requests", host, c->up_port,
			    "rate-limited", retry);
			return -1;
		} else if (e.code != SP_E_EXPIRED &&
		    e.code != SP_E_NOT_FOUND) {
			respond(c, 502, "Bad Gateway", host, c->up_port,
			    "credential-error", NULL);
			return -1;
		}
	}
	c->ub_len = c->ub_off = 0;
	c->ub_secret = have;
	if (ub_str(c, c->h.method) || ub_str(c, " ") ||
	    ub_add(c, target, tlen))
		goto big;
	if (have && query && (ub_str(c, memchr(target, '?', tlen) ? "&" :
	    "?") || ub_str(c, c->secret)))
		goto big;
	snprintf(line, sizeof line, " HTTP/%d.%d\r\n", c->h.major,
	    c->h.minor);
	if (ub_str(c, line))
		goto big;
	for (i = 0; sp_http_header(&c->h, i, &name, &nlen, &value,
	    &vlen) == 0; i++) {
		if (skip_header(name, nlen, c->secret, have && !query ?
		    key_len : 0))
			continue;
		if (ub_add(c, name, nlen) || ub_str(c, ": ") ||
		    ub_add(c, value, vlen) || ub_str(c, "\r\n"))
			goto big;
	}
	if (have && !query && (ub_str(c, c->secret) || ub_str(c, "\r\n")))
		goto big;
	if (ub_str(c, "\r\n"))
		goto big;
	if (have)
		explicit_bzero(c->secret, SP_CRED_OUT_MAX);
	return 0;
big:
	if (have)
		explicit_bzero(c->secret, SP_CRED_OUT_MAX);
	explicit_bzero(c->ub, UB_CAP);
	c->ub_len = c->ub_off = 0;
	respond(c, 431, "Request Header Fields Too Large", host, c->up_port,
	    "head-too-big", NULL);
	return -1;
}

/* A proxy client's CONNECT host:port: the tunnel is the tcp stream to it. */
static int
head_connect(struct conn *c, const char *url, size_t n)
{
	char auth[SP_EGRESS_NAME_MAX + 16], why[SP_EGRESS_RULE_MAX + 64];
	char *colon, *end;
	long port;
	int r;

	if (n >= sizeof auth || n == 0)
		goto bad;
	memcpy(auth, url, n);
	auth[n] = '\0';
	if ((colon = strrchr(auth, ':')) == NULL)
		goto bad;
	*colon = '\0';
	port = strtol(colon + 1, &end, 10);
	if (*end != '\0' || port < 1 || port > 65535 || auth[0] == '\0')
		goto bad;
	if ((r = decide_connect(c, auth, (int)port, why, sizeof why)) < 0) {
		refuse(c, r, auth, (int)port, why);
		return -1;
	}
	c->tunneled = 1;
	memcpy(c->reply, "HTTP/1.1 200 Connection established\r\n\r\n", 39);
	c->reply_len = 39;
	return 0;
bad:
	respond(c, 400, "Bad Request", "-", 0, "bad-connect-target", NULL);
	return -1;
}

/* A proxy client's GET http://host[:port]/path: forwarded in origin form,
 * to an upstream connection for that host. */
static int
head_absolute(struct conn *c, const char *url, size_t n)
{
	char host[SP_EGRESS_NAME_MAX + 1], why[SP_EGRESS_RULE_MAX + 64];
	struct http_parser_url u;
	const char *target = "/";
	size_t tlen = 1;
	int port = 80, tls = 0, r;

	http_parser_url_init(&u);
	if (http_parser_parse_url(url, n, 0, &u) != 0 ||
	    !(u.field_set & (1 << UF_SCHEMA)) ||
	    !(u.field_set & (1 << UF_HOST)) ||
	    u.field_data[UF_HOST].len > SP_EGRESS_NAME_MAX)
		goto bad;
	/* https in absolute form (busybox wget asks so): the gateway makes
	 * the TLS connection itself. */
	if (u.field_data[UF_SCHEMA].len == 5 &&
	    strncasecmp(url + u.field_data[UF_SCHEMA].off, "https", 5) == 0) {
		tls = 1;
		port = 443;
	} else if (u.field_data[UF_SCHEMA].len != 4 ||
	    strncasecmp(url + u.field_data[UF_SCHEMA].off, "http", 4) != 0)
		goto bad;
	memcpy(host, url + u.field_data[UF_HOST].off,
	    u.field_data[UF_HOST].len);
	host[u.field_data[UF_HOST].len] = '\0';
	if (u.field_set & (1 << UF_PORT))
		port = u.port;
	if (u.field_set & (1 << UF_PATH)) {
		target = url + u.field_data[UF_PATH].off;
		tlen = n - u.field_data[UF_PATH].off;
	} else if (u.field_set & (1 << UF_QUERY)) {
		target = url + u.field_data[UF_QUERY].off - 1;
		tlen = n - u.field_data[UF_QUERY].off + 1;
	}
	/* A client that moves on to another host gets a new upstream; it
	 * has read the previous response whole before asking again. */
	if (c->up >= 0 && (strcasecmp(c->up_host, host) != 0 ||
	    c->up_port != port || (c->up_ssl != NULL) != tls))
		up_close(c);
	if (c->up < 0) {
		if ((r = decide_connect(c, host, port, why, sizeof why)) < 0) {
			refuse(c, r, host, port, why);
			return -1;
		}
		if (tls && up_tls(c) == -1) {
			respond(c, 502, "Bad Gateway", host, port, "tls-error",
			    NULL);
			return -1;
		}
	}
	return write_head(c, target, tlen, host);
bad:
	respond(c, 400, "Bad Request", "-", 0, "absolute http or https url "
	    "wanted", NULL);
	return -1;
}

static int
on_head(struct conn *c)
{
	const char *url;
	size_t n;

	url = sp_http_url(&c->h, &n);
	if (c->s->proxy && !c->tunneled) {
		if (strcmp(c->h.method, "CONNECT") == 0)
			return head_connect(c, url, n);
		return head_absolute(c, url, n);
	}
	if (n == 0 || url[0] != '/') {
		respond(c, 400, "Bad Request", c->up_host, c->up_port,
		    "origin-form request wanted", NULL);
		return -1;
	}
	return write_head(c, url, n, c->up_host);
}

/* Guest bytes through the parser into ub: -1 when the stream is to end
 * (a response of the gateway's own is set, or the request is malformed). */
static int
parse_some(struct conn *c)
{
	struct sp_err e;
	size_t used, have = c->gin_len - c->gin_off;
	const char *p = (const char *)c->gin + c->gin_off;
	int ev;

	ev = sp_http_feed(&c->h, p, have, &used, &e);
	if (ev == -1) {
		respond(c, 400, "Bad Request", c->up_host[0] ? c->up_host :
		    "-", c->up_port, e.msg, NULL);
		return -1;
	}
	c->gin_off += used;
	switch (ev) {
	case SP_HTTP_HEAD:
		return on_head(c);
	case SP_HTTP_BODY:
	case SP_HTTP_END:
		return ub_add(c, p, used);
	case SP_HTTP_UPGRADE:
		/* CONNECT: what follows is the tunnel's, read as a tcp
		 * stream is; another upgrade goes on as raw bytes. */
		if (c->tunneled && c->mode == M_HTTP && c->s->proxy &&
		    c->g_ssl == NULL && c->up_ssl == NULL) {
			c->gin_off -= used;
			choose_mode(c);
			return 0;
		}
		c->mode = M_RAW;
		return ub_add(c, p, used);
	default:
		return 0;
	}
}

/* ---- the relay ---- */

/* After the first byte from the guest: TLS (0x16, a handshake record),
 * HTTP (a method's capital letter), or another protocol, relayed as it is:
 * a credential is only ever added to HTTP. */
static int
peek_mode(struct conn *c)
{
	unsigned char first;
	int eof;

	if (c->gin_off < c->gin_len)
		first = c->gin[c->gin_off];
	else if (!gw_guest_peek(c->s, &first, &eof)) {
		if (!eof)
			return 0;
		c->mode = M_RAW;
		return 1;
	}
	if (first != 0x16 && (first < 'A' || first > 'Z')) {
		c->mode = M_RAW;
		return 1;
	}
	if (first == 0x16) {
		if (start_tls(c) == -1)
			return -1;
		/* Bytes the parser held are the start of the handshake. */
		if (c->gin_off < c->gin_len)
			BIO_write(c->g_rbio, c->gin + c->gin_off,
			    (int)(c->gin_len - c->gin_off));
		c->gin_off = c->gin_len = 0;
	}
	sp_http_release(&c->h);
	sp_http_init(&c->h);
	c->mode = M_HTTP;
	return 1;
}

/* Moves what it can; *progress says whether anything moved.  -1: the
 * stream is to be aborted. */
static int
step(struct conn *c, int *progress)
{
	ssize_t r;

	*progress = 0;
	/* The gateway's own response goes to the guest after what the
	 * upstream already sent. */
	if (c->reply_len > 0 && c->db_len == 0) {
		memcpy(c->db, c->reply, c->reply_len);
		c->db_len = c->reply_len;
		c->db_off = 0;
		c->reply_len = 0;
	}
	/* upstream -> guest */
	if (c->db_len == 0 && c->up >= 0 && !c->up_eof && !c->refused) {
		r = up_in(c, c->db, sizeof c->db);
		if (r > 0) {
			c->db_len = (size_t)r;
			c->db_off = 0;
			*progress = 1;
		} else if (r == 0) {
			c->up_eof = *progress = 1;
		} else if (r == -3)
			return -1;
	}
	if (c->db_len > 0) {
		r = guest_out(c, c->db + c->db_off, c->db_len - c->db_off);
		if (r < 0)
			return -1;
		if (r > 0) {
			c->db_off += (size_t)r;
			if (c->db_off == c->db_len)
				c->db_len = c->db_off = 0;
			*progress = 1;
		}
	}
	if (c->g_ssl != NULL && guest_tls_flush(c) == -2)
		return -1;
	if (c->db_len == 0 && c->reply_len == 0 && !c->g_sent_eof &&
	    (c->up_eof || c->refused) && (c->g_ssl == NULL ||
	    c->gt_off == c->gt_len)) {
		if (c->g_ssl != NULL) {
			SSL_shutdown(c->g_ssl);
			ERR_clear_error();
			if (guest_tls_flush(c) == -2 || c->gt_off < c->gt_len)
				return 0;
		}
		if (gw_guest_eof(c->s) == -1)
			return -1;
		c->g_sent_eof = *progress = 1;
	}
	/* guest -> upstream */
	if (c->mode == M_PEEK) {
		r = peek_mode(c);
		if (r == -1)
			return -1;
		if (r == 0)
			return 0;
		*progress = 1;
	}
	if (c->ub_len == 0 && !c->refused) {
		if (c->gin_off == c->gin_len && !c->g_eof) {
			c->gin_off = c->gin_len = 0;
			r = guest_in(c, c->gin, sizeof c->gin);
			if (r > 0) {
				c->gin_len = (size_t)r;
				*progress = 1;
			} else if (r == 0) {
				c->g_eof = *progress = 1;
			} else if (r < -1)
				return -1;
		}
		if (c->gin_off < c->gin_len) {
			if (c->mode == M_RAW) {
				ub_add(c, c->gin + c->gin_off,
				    c->gin_len - c->gin_off);
				c->gin_off = c->gin_len;
			} else if (parse_some(c) == -1) {
				up_close(c);
				c->ub_len = c->ub_off = 0;
			}
			*progress = 1;
		}
	}
	if (c->ub_len > 0 && c->up >= 0) {
		r = up_out(c, c->ub + c->ub_off, c->ub_len - c->ub_off);
		if (r < 0)
			return -1;
		if (r > 0) {
			c->ub_off += (size_t)r;
			if (c->ub_off == c->ub_len) {
				if (c->ub_secret)
					explicit_bzero(c->ub, c->ub_len);
				c->ub_len = c->ub_off = 0;
				c->ub_secret = 0;
			}
			*progress = 1;
		}
	}
	/* A proxy client that left before naming any host: nothing will
	 * come from upstream either. */
	if (c->g_eof && c->up < 0 && !c->up_eof && c->gin_off == c->gin_len) {
		c->up_eof = 1;
		*progress = 1;
	}
	if (c->g_eof && c->ub_len == 0 && c->up >= 0 && !c->up_shut &&
	    c->gin_off == c->gin_len) {
		shutdown(c->up, SHUT_WR);
		c->up_shut = *progress = 1;
	}
	return 0;
}

/* Over when EOF went both ways (design.md: a stream's clean end). */
static int
finished(const struct conn *c)
{
	return c->g_sent_eof && c->g_eof;
}

static void
relay(struct conn *c)
{
	struct timespec t0, now;
	short ev;
	int progress, idle_refused = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (gw_stream_closed(c->s))
			return;
		if (step(c, &progress) == -1) {
			gw_guest_close(c->s);
			return;
		}
		if (finished(c))
			return;
		if (c->refused && c->g_sent_eof) {
			/* Drop what the guest still sends until its EOF. */
			while (gw_guest_read(c->s, c->gin, sizeof c->gin) > 0)
				progress = 1;
			if (gw_guest_read(c->s, c->gin, 1) == 0)
				return;
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (!idle_refused)
				t0 = now;
			idle_refused = 1;
			if ((now.tv_sec - t0.tv_sec) * 1000 > LINGER_MS) {
				gw_guest_close(c->s);
				return;
			}
		}
		if (progress) {
			/* An inbound stream's bytes are not egress. */
			if (!c->s->inbound)
				gw_counts_save(c->t, 0);
			continue;
		}
		ev = 0;
		if (c->up >= 0 && !c->up_eof)
			ev |= POLLIN;
		if (c->up >= 0 && (c->ub_len > 0 || c->up_want_write))
			ev |= POLLOUT;
		gw_wait(c->s, ev ? c->up : -1, ev, TICK_MS);
	}
}

/* The first steps of a stream: where it goes, and how it is read. */
static void
conn_start(struct conn *c)
{
	char why[SP_EGRESS_RULE_MAX + 64];
	int r;

	if (c->s->proxy) {
		c->mode = M_HTTP;
		return;
	}
	if ((r = decide_connect(c, c->s->host, c->s->port, why,
	    sizeof why)) < 0) {
		refuse(c, r, c->s->host, c->s->port, why);
		return;
	}
	choose_mode(c);
}

/* A stream's worker: where it goes (an egress stream), or the client
 * connection fd it already has (inbound), then the relay. */
static void
serve(struct gw_stream *s, int fd)
{
	struct conn *c;

	if ((c = calloc(1, sizeof *c)) == NULL ||
	    (c->ub = malloc(UB_CAP)) == NULL) {
		if (c != NULL) {
			free(c->ub);
			free(c);
		}
		if (fd >= 0)
			close(fd);
		gw_guest_close(s);
		gw_stream_put(s);
		return;
	}
	c->s = s;
	c->t = s->t;
	c->g = s->t->g;
	c->up = fd;
	sp_http_init(&c->h);
	if (fd >= 0)
		c->mode = M_RAW;
	else
		conn_start(c);
	relay(c);
	/* An inbound client whose guest side aborted sees a reset, as it
	 * would from the server itself. */
	if (fd >= 0 && c->up >= 0 && !finished(c))
		setsockopt(c->up, SOL_SOCKET, SO_LINGER,
		    &(struct linger){ 1, 0 }, sizeof (struct linger));
	up_close(c);
	if (!s->inbound)
		gw_counts_save(c->t, 1);
	if (c->g_ssl != NULL)
		SSL_free(c->g_ssl);	/* frees both BIOs */
	sp_http_release(&c->h);
	if (c->secret != NULL)
		explicit_bzero(c->secret, SP_CRED_OUT_MAX);
	if (c->had_secret)
		explicit_bzero(c->ub, UB_CAP);
	free(c->secret);
	free(c->ub);
	free(c);
	/* A clean end both ways leaves it in the table until now. */
	gw_stream_end(s);
	gw_stream_put(s);
}

void *
gw_conn_main(void *arg)
{
	serve(arg, -1);
	return NULL;
}

void
gw_conn_inbound(struct gw_stream *s, int fd)
{
	serve(s, fd);
}
