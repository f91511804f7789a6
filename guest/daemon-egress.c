/*
 * daemon-egress: the guest end of the egress tunnel (design.md; the
 * protocol is in lib/sp_vm.h, "the egress tunnel").  The guest has no NIC: its
 * programs reach the network through an HTTP proxy on 127.0.0.1:3128, a
 * transparent-redirect target on 127.0.0.1:3129 (the guest's iptables sends
 * every other TCP connection there) and a DNS server on 127.0.0.1:53.  Each
 * of their connections and lookups becomes a stream over the virtio port
 * space.egress, whose host end (space-gatewayd) applies the policy.
 *
 * One thread runs one poll loop over the port, the three sockets and every
 * client; the sockets' side is egress-listen.c, the DNS wire format dns.c,
 * the names' fake addresses fake-addr.c.  Everything is nonblocking and bounded: a stream holds at most a
 * window of the host's data, nothing is read from a client beyond the
 * host's window, and the only frame buffer toward the host is one frame, so
 * a slow port stops the reading of clients rather than filling memory.
 * The host is trusted no more than the guest: its frames are checked
 * against the protocol, and a breach drops every stream.
 */
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "dns.h"
#include "fake-addr.h"
#include "egress.h"

/* The state egress-listen.c shares (egress.h). */
struct stream eg_streams[NSLOTS];
struct stream *eg_d_head;
int eg_dnsfd = -1, eg_ndns;
int64_t eg_accept_pause_until, eg_port_look_at;

static struct sd_egress_conf conf;
static char *proxy_env[7];
static char proxy_env_buf[4][64];
static int evfd = -1;		/* SIGIO news of the host */
static int dev = -1;		/* the port, or the test mode's listening socket */
static int hostfd = -1;		/* the host's connection: dev itself, or accepted */
static int greeted;		/* the host said hello on this connection */
static int proxyfd = -1, redirfd = -1;
static struct sp_frame_dec dec;
static unsigned char ibuf[SP_FRAME_CHUNK];
static unsigned char obuf[SP_FRAME_HDR + SP_FRAME_CHUNK];
static size_t olen, ooff;
static unsigned char ctl[SP_FRAME_HDR + 1024];	/* a HELLO answer or ERROR */
static size_t ctl_len;

static uint32_t free_slots[NSLOTS];
static uint32_t nfree, seq;
/* The slots in use, in no order: each poll round goes through these, not
 * through all of streams[] (~1 MB: under TCG, after a context switch has
 * flushed QEMU's soft TLB, walking it cost a refill per page). */
static uint32_t live[NSLOTS];
static uint32_t nlive;
static struct stream *q_head, *q_tail;
static struct stream *d_tail;


int64_t
eg_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the table of fake addresses: guest/fake-addr.c ---- */

/* ---- DNS on the wire: guest/dns.c ---- */

/* Answers q (with its question when it has one), with addr as an A record
 * when not 0.  UDP may drop it: so may we, when the socket is full. */
void
eg_dns_reply(const struct query *q, int rcode, uint32_t addr)
{
	unsigned char r[SD_DNS_ANSWER_MAX];
	size_t n;

	n = sd_dns_answer(q, rcode, addr, r);
	(void)sendto(eg_dnsfd, r, n, MSG_DONTWAIT, (struct sockaddr *)&q->peer,
	    sizeof q->peer);
}

/* ---- streams ---- */

static struct stream *
stream_get(uint32_t id)
{
	struct stream *s = &eg_streams[id & (NSLOTS - 1)];

	return id != 0 && s->id == id ? s : NULL;
}

struct stream *
eg_stream_new(enum kind kind, int fd)
{
	struct stream *s;
	uint32_t slot;

	if (nfree == 0)
		return NULL;
	slot = free_slots[--nfree];
	s = &eg_streams[slot];
	memset(s, 0, sizeof *s);
	/* Ids run through a counter above the slot: one comes back only
	 * after 4 million others, long after the host forgot it. */
	if (++seq >= 1u << (32 - SLOT_BITS))
		seq = 1;
	s->id = seq << SLOT_BITS | slot;
	s->live_at = nlive;
	live[nlive++] = slot;
	s->kind = kind;
	s->fd = fd;
	s->up_avail = s->down_avail = SP_EGRESS_WINDOW;
	s->open_pending = 1;
	return s;
}

void
eg_q_push(struct stream *s)
{
	if (s->queued)
		return;
	s->queued = 1;
	s->qnext = NULL;
	s->qprev = q_tail;
	if (q_tail != NULL)
		q_tail->qnext = s;
	else
		q_head = s;
	q_tail = s;
}

static void
q_remove(struct stream *s)
{
	if (!s->queued)
		return;
	if (s->qprev != NULL)
		s->qprev->qnext = s->qnext;
	else
		q_head = s->qnext;
	if (s->qnext != NULL)
		s->qnext->qprev = s->qprev;
	else
		q_tail = s->qprev;
	s->queued = 0;
}

void
eg_d_push(struct stream *s)
{
	s->dnext = NULL;
	s->dprev = d_tail;
	if (d_tail != NULL)
		d_tail->dnext = s;
	else
		eg_d_head = s;
	d_tail = s;
	eg_ndns++;
}

static void
d_remove(struct stream *s)
{
	if (s->kind != K_DNS || s->deadline == 0)
		return;
	if (s->dprev != NULL)
		s->dprev->dnext = s->dnext;
	else
		eg_d_head = s->dnext;
	if (s->dnext != NULL)
		s->dnext->dprev = s->dprev;
	else
		d_tail = s->dprev;
	s->deadline = 0;
	eg_ndns--;
}

/* An abort: the client sees a reset rather than a clean end. */
void
eg_close_reset(int fd)
{
	struct linger lg = { 1, 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	close(fd);
}

static void
down_drop(struct stream *s)
{
	struct chunk *c;

	while ((c = s->down) != NULL) {
		s->down = c->next;
		free(c);
	}
	s->down_tail = NULL;
	s->down_len = 0;
}

void
eg_stream_free(struct stream *s)
{
	q_remove(s);
	d_remove(s);
	down_drop(s);
	if (s->fd >= 0)
		eg_close_reset(s->fd);
	s->id = 0;
	s->kind = K_FREE;
	s->fd = -1;
	live[s->live_at] = live[--nlive];
	eg_streams[live[s->live_at]].live_at = s->live_at;
	free_slots[nfree++] = s - eg_streams;
}

/* Ends a stream from our side: the client is reset, and the host told
 * with CLOSE, after which whatever it sends for the stream is dropped. */
void
eg_stream_abort(struct stream *s)
{
	if (s->fd >= 0)
		eg_close_reset(s->fd);
	s->fd = -1;
	d_remove(s);
	down_drop(s);
	if (s->open_pending) {
		/* The host never heard of it. */
		eg_stream_free(s);
		return;
	}
	s->close_pending = 1;
	s->readable = s->eof_pending = 0;
	s->win_pending = 0;
	eg_q_push(s);
}

/* Over once EOF went both ways and the client has all the host's data. */
static void
stream_maybe_done(struct stream *s)
{
	if (s->eof_sent && s->shut_wr && s->down == NULL) {
		close(s->fd);
		s->fd = -1;
		eg_stream_free(s);
	}
}

static int
win_due(const struct stream *s)
{
	return !s->host_eof && s->win_pending >= SP_EGRESS_WINDOW_BATCH;
}

/* Every stream goes: the host went, started over or broke the protocol.
 * Lookups waiting are answered SERVFAIL. */
static void
streams_reset(void)
{
	uint32_t i;

	for (i = 0; i < NSLOTS; i++) {
		if (eg_streams[i].id == 0)
			continue;
		if (eg_streams[i].kind == K_DNS && eg_streams[i].deadline != 0)
			eg_dns_reply(&eg_streams[i].q, RC_SERVFAIL, 0);
		eg_stream_free(&eg_streams[i]);
	}
}

/* Writes what the host sent to the client, as far as it takes it, and
 * tells the host how much more it may send. */
static void
down_flush(struct stream *s)
{
	struct chunk *c;
	ssize_t w;

	while ((c = s->down) != NULL) {
		w = send(s->fd, c->data + c->off, c->len - c->off,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w == -1 && errno == EINTR)
			continue;
		if (w == -1 && errno == EAGAIN)
			break;
		if (w == -1) {
			eg_stream_abort(s);
			return;
		}
		c->off += w;
		s->down_len -= w;
		s->win_pending += w;
		if (c->off == c->len) {
			s->down = c->next;
			if (s->down == NULL)
				s->down_tail = NULL;
			free(c);
		}
	}
	if (win_due(s))
		eg_q_push(s);
	if (s->host_eof && s->down == NULL && !s->shut_wr) {
		/* The client may have gone already: then its read side
		 * tells, or the host's CLOSE. */
		shutdown(s->fd, SHUT_WR);
		s->shut_wr = 1;
		stream_maybe_done(s);
	}
}

/* ---- frames to the host ---- */

static void
ctl_json(uint8_t type, json_t *j)
{
	size_t n;

	n = j != NULL ? json_dumpb(j, (char *)ctl + SP_FRAME_HDR,
	    sizeof ctl - SP_FRAME_HDR, JSON_COMPACT) : 0;
	json_decref(j);
	if (n == 0 || n > sizeof ctl - SP_FRAME_HDR) {
		ctl_len = 0;
		return;
	}
	sp_frame_hdr(ctl, type, 0, n);
	ctl_len = SP_FRAME_HDR + n;
}

static size_t
build_open(struct stream *s)
{
	json_t *j;
	size_t n;

	if (s->kind == K_PROXY)
		j = json_pack("{s:s}", "kind", "proxy");
	else if (s->kind == K_TCP)
		j = json_pack("{s:s,s:s,s:i}", "kind", "tcp", "host", s->host,
		    "port", (int)s->port);
	else if (s->kind == K_INBOUND && s->refused)
		j = json_pack("{s:s,s:I,s:s}", "kind", "inbound", "ref",
		    (json_int_t)s->ref, "error", "refused");
	else if (s->kind == K_INBOUND)
		j = json_pack("{s:s,s:I}", "kind", "inbound", "ref",
		    (json_int_t)s->ref);
	else
		j = json_pack("{s:s,s:s}", "kind", "dns", "name", s->q.name);
	n = j != NULL ? json_dumpb(j, (char *)obuf + SP_FRAME_HDR,
	    SP_FRAME_CHUNK, JSON_COMPACT) : 0;
	json_decref(j);
	return n <= SP_FRAME_CHUNK ? n : 0;
}

static void
frame(uint8_t type, uint32_t id, size_t n)
{
	sp_frame_hdr(obuf, type, id, n);
	olen = SP_FRAME_HDR + n;
	ooff = 0;
}

/* The next frame of s into obuf: 1, or 0 when it has none after all. */
static int
stream_frame(struct stream *s)
{
	ssize_t n;
	size_t m;

	if (s->close_pending) {
		frame(SP_FR_CLOSE, s->id, 0);
		eg_stream_free(s);
		return 1;
	}
	if (s->open_pending) {
		s->open_pending = 0;
		if ((m = build_open(s)) == 0) {
			eg_stream_free(s);
			return 0;
		}
		frame(SP_FR_OPEN, s->id, m);
		/* A refusal opens nothing: the id is free again. */
		if (s->kind == K_INBOUND && s->refused)
			eg_stream_free(s);
		return 1;
	}
	if (win_due(s)) {
		sp_be32_put(obuf + SP_FRAME_HDR, s->win_pending);
		s->down_avail += s->win_pending;
		s->win_pending = 0;
		frame(SP_FR_WINDOW, s->id, 4);
		return 1;
	}
	if (s->readable) {
		/* The client is read only now that the port takes a frame:
		 * a slow host slows the clients, not our memory. */
		s->readable = 0;
		m = s->up_avail < SP_FRAME_CHUNK ? s->up_avail : SP_FRAME_CHUNK;
		n = read(s->fd, obuf + SP_FRAME_HDR, m);
		if (n > 0) {
			s->up_avail -= n;
			frame(SP_FR_DATA, s->id, n);
			return 1;
		}
		if (n == 0) {
			s->client_eof = 1;
			s->eof_pending = 1;
		} else if (errno != EAGAIN && errno != EINTR) {
			eg_stream_abort(s);
			return stream_frame(s);
		}
	}
	if (s->eof_pending) {
		s->eof_pending = 0;
		s->eof_sent = 1;
		frame(SP_FR_DATA, s->id, 0);
		stream_maybe_done(s);
		return 1;
	}
	return 0;
}

static int
stream_has_frame(const struct stream *s)
{
	return s->close_pending || s->open_pending || win_due(s) ||
	    s->readable || s->eof_pending;
}

/* Puts the next frame to send in obuf; 0 when there is none. */
static int
next_frame(void)
{
	struct stream *s;

	if (ctl_len > 0) {
		memcpy(obuf, ctl, ctl_len);
		olen = ctl_len;
		ooff = 0;
		ctl_len = 0;
		return 1;
	}
	while ((s = q_head) != NULL) {
		q_remove(s);
		if (stream_frame(s) == 1) {
			/* Round robin: one frame a turn. */
			if (s->id != 0 && stream_has_frame(s))
				eg_q_push(s);
			return 1;
		}
		if (s->id != 0 && stream_has_frame(s))
			eg_q_push(s);
	}
	return 0;
}

static int
out_pending(void)
{
	return ooff < olen || ctl_len > 0 || q_head != NULL;
}

/* Writes frames while the port takes them; -1 when the host has gone. */
static int
out_flush(void)
{
	int frames = 0;
	ssize_t w;

	for (;;) {
		if (ooff == olen) {
			olen = ooff = 0;
			if (frames++ == FRAMES_PER_ROUND || !next_frame())
				return 0;
		}
		w = write(hostfd, obuf + ooff, olen - ooff);
		if (w > 0) {
			ooff += w;
			continue;
		}
		if (w == -1 && errno == EINTR)
			continue;
		if (w == -1 && errno == EAGAIN)
			return 0;
		return -1;
	}
}

/* ---- the host ---- */

/* SIGIO from the port only while no host is there: the driver raises it
 * for every batch of data too, which would wake every thread waiting for
 * a host of a space.N port, all through a transfer.  A host's going shows
 * in poll as HUP. */
static void
port_async(int on)
{
	if (conf.sock == NULL && dev >= 0)
		fcntl(dev, F_SETFL, O_NONBLOCK | (on ? O_ASYNC : 0));
}

static void
host_lost(const char *why)
{
	if (hostfd >= 0)
		sd_log(NULL, "egress: host gone: %s", why);
	streams_reset();
	greeted = 0;
	sp_frame_dec_release(&dec);
	sp_frame_dec_init(&dec);
	/* A frame cut short is the old host's; the next starts clean. */
	olen = ooff = 0;
	ctl_len = 0;
	if (conf.sock != NULL && hostfd >= 0)
		close(hostfd);
	else if (hostfd >= 0)
		port_async(1);
	hostfd = -1;
}

/* The host broke the protocol: every stream goes, and we say why.  A
 * socket (test mode) is closed; the port cannot be, so it waits for the
 * host's next hello, dropping everything else. */
static void
host_break(const char *why)
{
	char msg[300];

	sp_frame_dec_release(&dec);
	sp_frame_dec_init(&dec);
	if (!greeted)
		return;
	snprintf(msg, sizeof msg, "%s", why);
	sd_log(NULL, "egress: protocol error from the host: %s", msg);
	streams_reset();
	greeted = 0;
	ctl_json(SP_FR_ERROR, json_pack("{s:s,s:s}", "error", "protocol",
	    "msg", msg));
	if (conf.sock != NULL && hostfd >= 0) {
		if (ooff == olen && ctl_len > 0)
			(void)!write(hostfd, ctl, ctl_len);
		host_lost("it broke the protocol");
	}
}

static int
host_hello(const struct sp_frame *f, struct sp_err *e)
{
	json_t *j, *op, *n;

	if (sp_frame_json(f, &j, e) == -1)
		return -1;
	op = json_object_get(j, "op");
	n = json_object_get(j, "nonce");
	if (!json_is_string(op) || strcmp(json_string_value(op), "hello") != 0 ||
	    !json_is_string(n) || json_string_length(n) > NONCE_MAX) {
		json_decref(j);
		return sp_err_set(e, SP_E_PROTOCOL, 0, "bad hello");
	}
	/* A new host, or the same one starting over: nothing of before
	 * stays.  A frame half written is finished, for the host skips
	 * whole frames until our answer. */
	streams_reset();
	greeted = 1;
	ctl_json(SP_FR_HELLO, json_pack("{s:i,s:s,s:O,s:i,s:i}", "version",
	    SP_PROTO_VERSION, "boot_id", conf.boot_id, "nonce", n, "egress", 1,
	    "inbound", 1));
	json_decref(j);
	return 0;
}

static int
host_data(struct stream *s, const struct sp_frame *f, struct sp_err *e)
{
	struct chunk *c;

	if (s->kind == K_DNS)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "DATA on lookup %u",
		    f->stream);
	if (s->host_eof)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "DATA after EOF on "
		    "stream %u", f->stream);
	if (f->len > SP_FRAME_CHUNK || f->len > s->down_avail)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "DATA of %u bytes over the "
		    "window (%u) on stream %u", f->len, s->down_avail,
		    f->stream);
	if (f->len == 0) {
		s->host_eof = 1;
		s->win_pending = 0;
		down_flush(s);
		return 0;
	}
	if ((c = malloc(sizeof *c + f->len)) == NULL) {
		eg_stream_abort(s);
		return 0;
	}
	c->next = NULL;
	c->len = f->len;
	c->off = 0;
	memcpy(c->data, f->data, f->len);
	if (s->down_tail != NULL)
		s->down_tail->next = c;
	else
		s->down = c;
	s->down_tail = c;
	s->down_len += f->len;
	s->down_avail -= f->len;
	down_flush(s);
	return 0;
}

static int
host_answer(struct stream *s, const struct sp_frame *f, struct sp_err *e)
{
	json_t *j, *name, *allow;
	uint32_t i;
	int rc = -1;

	if (s->kind != K_DNS)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "ANSWER on stream %u, not "
		    "a lookup", f->stream);
	if (sp_frame_json(f, &j, e) == -1)
		return -1;
	name = json_object_get(j, "name");
	allow = json_object_get(j, "allow");
	if (!json_is_string(name) || !json_is_boolean(allow) ||
	    strcmp(json_string_value(name), s->q.name) != 0) {
		sp_err_set(e, SP_E_PROTOCOL, 0, "bad ANSWER on stream %u",
		    f->stream);
		goto out;
	}
	if (!json_is_true(allow))
		eg_dns_reply(&s->q, RC_NXDOMAIN, 0);
	else if (s->q.qtype != T_A && s->q.qtype != T_ANY)
		eg_dns_reply(&s->q, RC_OK, 0);
	else if ((i = sd_fake_get(s->q.name)) == SD_FAKE_NONE)
		eg_dns_reply(&s->q, RC_SERVFAIL, 0);
	else
		eg_dns_reply(&s->q, RC_OK, sd_fake_addr(i));
	eg_stream_free(s);
	rc = 0;
out:
	json_decref(j);
	return rc;
}

/* The host asks for a connection to 127.0.0.1:port in the guest (an
 * inbound port, space-port): the stream is ours, with an id of our own,
 * and its OPEN names the host's reference.  A connection that cannot be
 * made is an OPEN with an error, and no stream.  Nonblocking: the socket
 * reads its refusal (or its first bytes) once the connect is done, and
 * the host's bytes wait in the stream until then. */
static int
host_inbound(const struct sp_frame *f, struct sp_err *e)
{
	struct sockaddr_in sa;
	struct stream *s;
	json_t *j, *kind, *port, *ref;
	int fd;

	if (f->stream != 0)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "OPEN on stream %u",
		    f->stream);
	if (sp_frame_json(f, &j, e) == -1)
		return -1;
	kind = json_object_get(j, "kind");
	port = json_object_get(j, "port");
	ref = json_object_get(j, "ref");
	if (!json_is_string(kind) ||
	    strcmp(json_string_value(kind), "inbound") != 0 ||
	    !json_is_integer(port) || json_integer_value(port) < 1 ||
	    json_integer_value(port) > 65535 || !json_is_integer(ref) ||
	    json_integer_value(ref) < 1) {
		json_decref(j);
		return sp_err_set(e, SP_E_PROTOCOL, 0, "bad inbound OPEN");
	}
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)json_integer_value(port));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == -1 &&
	    errno != EINPROGRESS) {
		close(fd);
		fd = -1;
	}
	/* No slot: the host's wait for an answer runs out. */
	if ((s = eg_stream_new(K_INBOUND, fd)) == NULL) {
		if (fd >= 0)
			eg_close_reset(fd);
	} else {
		s->ref = (uint64_t)json_integer_value(ref);
		s->refused = fd < 0;
		s->port = (uint16_t)json_integer_value(port);
		eg_q_push(s);
	}
	json_decref(j);
	return 0;
}

/* One frame from the host; -1 with e on a breach of the protocol. */
static int
host_frame(const struct sp_frame *f, struct sp_err *e)
{
	struct stream *s;
	uint32_t inc;

	/* Until hello, what comes is an earlier host's leftovers. */
	if (f->type == SP_FR_HELLO)
		return host_hello(f, e);
	if (!greeted)
		return 0;
	switch (f->type) {
	case SP_FR_DATA:
	case SP_FR_WINDOW:
	case SP_FR_CLOSE:
	case SP_FR_ANSWER:
		break;
	case SP_FR_ERROR:
		sd_log(NULL, "egress: the host sent an error");
		return 0;
	case SP_FR_OPEN:
		return host_inbound(f, e);
	default:
		return sp_err_set(e, SP_E_PROTOCOL, 0, "unexpected frame type %u",
		    f->type);
	}
	if (f->type == SP_FR_WINDOW && f->len != 4)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "WINDOW of %u bytes",
		    f->len);
	if (f->type == SP_FR_CLOSE && f->len != 0)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "CLOSE of %u bytes", f->len);
	/* A stream we closed may still hear from the host: dropped. */
	if ((s = stream_get(f->stream)) == NULL || s->close_pending) {
		if (s != NULL && f->type == SP_FR_CLOSE)
			eg_stream_free(s);
		return 0;
	}
	switch (f->type) {
	case SP_FR_DATA:
		return host_data(s, f, e);
	case SP_FR_WINDOW:
		if (s->kind == K_DNS)
			return sp_err_set(e, SP_E_PROTOCOL, 0, "WINDOW on lookup "
			    "%u", f->stream);
		inc = sp_be32_get(f->data);
		if (inc > SP_EGRESS_WINDOW - s->up_avail)
			return sp_err_set(e, SP_E_PROTOCOL, 0, "WINDOW of %u over "
			    "what was sent on stream %u", inc, f->stream);
		s->up_avail += inc;
		return 0;
	case SP_FR_CLOSE:
		if (s->kind == K_DNS && s->deadline != 0)
			eg_dns_reply(&s->q, RC_SERVFAIL, 0);
		eg_stream_free(s);
		return 0;
	default:
		return host_answer(s, f, e);
	}
}

/* Takes what the host sent; -1 when it has gone.  The virtio port gives
 * one 4 KiB buffer per read: read on until it has no more (at most
 * HOST_READS times), rather than poll again between each, for under TCG
 * every system call counts. */
#define HOST_READS	32
static int
host_read(void)
{
	struct sp_frame f;
	struct sp_err e;
	ssize_t n;
	int r, i;

	for (i = 0; i < HOST_READS && hostfd >= 0; i++) {
		n = read(hostfd, ibuf, sizeof ibuf);
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			return 0;
		if (n <= 0)
			return i == 0 ? -1 : 0;
		if (sp_frame_dec_feed(&dec, ibuf, n, &e) == -1) {
			host_break(e.msg);
			return 0;
		}
		while ((r = sp_frame_dec_next(&dec, &f, &e)) == 1)
			if (host_frame(&f, &e) == -1) {
				host_break(e.msg);
				return 0;
			}
		if (r == -1) {
			host_break(e.msg);
			return 0;
		}
	}
	return 0;
}

/* The port says HUP while no host is there, and a new host's first bytes
 * may come before the news that it is (the driver hears of hosts and of
 * data on separate queues): they are taken, and the host is there once a
 * read says "nothing yet" rather than EOF. */
static void
host_probe(void)
{
	struct pollfd pfd = { dev, POLLIN, 0 };
	struct sp_frame f;
	struct sp_err e;
	ssize_t n;
	int r;

	if (poll(&pfd, 1, 0) == -1)
		return;
	if (pfd.revents & (POLLERR | POLLNVAL))
		return;
	if (pfd.revents & POLLHUP) {
		while ((n = read(dev, ibuf, sizeof ibuf)) > 0) {
			if (sp_frame_dec_feed(&dec, ibuf, n, &e) == -1) {
				host_break(e.msg);
				continue;
			}
			while ((r = sp_frame_dec_next(&dec, &f, &e)) == 1)
				if (host_frame(&f, &e) == -1)
					break;
			if (r != 0)
				host_break(e.msg);
		}
		if (n == 0 || errno != EAGAIN)
			return;
	}
	hostfd = dev;
	port_async(0);
	sd_log(NULL, "egress: host connected");
}

int
eg_host_ready(void)
{
	return hostfd >= 0 && greeted;
}

/* ---- the guest's side: guest/egress-listen.c ---- */

/* ---- the loop ---- */

/* The port, once the guest has it (looked for again now and then: a
 * daemon started before the device was ready must not miss it). */
static void
port_open(void)
{
	char path[300];

	if (eg_now_ms() < eg_port_look_at)
		return;
	eg_port_look_at = eg_now_ms() + PORT_LOOK_MS;
	if (sd_port_find(SP_EGRESS_PORT_NAME, path, sizeof path) == -1)
		return;
	/* The driver raises SIGIO when the host comes or goes. */
	if ((dev = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) == -1 ||
	    fcntl(dev, F_SETOWN, getpid()) == -1 ||
	    fcntl(dev, F_SETFL, O_NONBLOCK | O_ASYNC) == -1) {
		sd_log(NULL, "egress: %s: %s", path, strerror(errno));
		if (dev >= 0)
			close(dev);
		dev = -1;
		return;
	}
	sd_log(NULL, "egress: serving %s", path);
}

static int
sock_listen(const char *path)
{
	struct sockaddr_un sa;
	int fd;

	if (strlen(path) >= sizeof sa.sun_path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	unlink(path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == -1 ||
	    listen(fd, 1) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

enum { P_EV, P_HOST, P_PROXY, P_REDIR, P_DNS, P_FIXED };
static struct pollfd pfds[P_FIXED + NSLOTS];
static uint32_t pids[P_FIXED + NSLOTS];

/* The poll set of this round, and how long to wait. */
static int
poll_build(int *timeout)
{
	struct stream *s;
	int64_t now = eg_now_ms(), t = -1;
	uint32_t i;
	int n = P_FIXED;

	pfds[P_EV] = (struct pollfd){ evfd, POLLIN, 0 };
	pfds[P_HOST] = (struct pollfd){ -1, 0, 0 };
	if (hostfd >= 0)
		pfds[P_HOST] = (struct pollfd){ hostfd,
		    POLLIN | (out_pending() ? POLLOUT : 0), 0 };
	else if (conf.sock != NULL)
		pfds[P_HOST] = (struct pollfd){ dev, POLLIN, 0 };
	else
		t = dev < 0 ? PORT_LOOK_MS : HOST_LOOK_MS;
	pfds[P_PROXY] = (struct pollfd){ proxyfd, POLLIN, 0 };
	pfds[P_REDIR] = (struct pollfd){ redirfd, POLLIN, 0 };
	if (now < eg_accept_pause_until) {
		pfds[P_PROXY].fd = pfds[P_REDIR].fd = -1;
		t = eg_accept_pause_until - now;
	}
	pfds[P_DNS] = (struct pollfd){ eg_dnsfd, POLLIN, 0 };
	if (eg_d_head != NULL && (t < 0 || eg_d_head->deadline - now < t))
		t = eg_d_head->deadline > now ? eg_d_head->deadline - now : 0;
	for (i = 0; i < nlive; i++) {
		s = &eg_streams[live[i]];
		if (s->fd < 0 || s->close_pending)
			continue;
		pfds[n].events = 0;
		if (!s->client_eof && !s->readable && s->up_avail > 0)
			pfds[n].events |= POLLIN;
		if (s->down != NULL)
			pfds[n].events |= POLLOUT;
		/* A client with nothing to do is left out, lest its HUP
		 * wake us in a loop. */
		if (pfds[n].events == 0)
			continue;
		pfds[n].fd = s->fd;
		pfds[n].revents = 0;
		pids[n++] = s->id;
	}
	*timeout = t > 60000 ? 60000 : (int)t;
	return n;
}

static void
stream_event(int i)
{
	struct stream *s = stream_get(pids[i]);
	short ev = pfds[i].revents;

	/* The host may have ended it earlier in this round. */
	if (s == NULL || s->fd < 0 || s->close_pending || ev == 0)
		return;
	if ((pfds[i].events & POLLOUT) && s->down != NULL)
		down_flush(s);
	if ((s = stream_get(pids[i])) == NULL || s->fd < 0 ||
	    s->close_pending)
		return;
	if ((pfds[i].events & POLLIN) && (ev & (POLLIN | POLLHUP | POLLERR))) {
		s->readable = 1;
		eg_q_push(s);
	}
}

static void
loop_once(void)
{
	uint64_t news;
	int n, i, timeout;

	if (conf.sock == NULL && dev < 0)
		port_open();
	if (conf.sock == NULL && dev >= 0 && hostfd < 0)
		host_probe();
	eg_dns_expire(eg_now_ms());
	n = poll_build(&timeout);
	if (poll(pfds, n, timeout) == -1) {
		if (errno != EINTR)
			sd_log(NULL, "egress: poll: %s", strerror(errno));
		return;
	}
	if (pfds[P_EV].revents & POLLIN)
		(void)!read(evfd, &news, sizeof news);
	if (hostfd < 0 && conf.sock != NULL && (pfds[P_HOST].revents & POLLIN)) {
		hostfd = accept4(dev, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (hostfd >= 0)
			sd_log(NULL, "egress: host connected");
	} else if (hostfd >= 0 && pfds[P_HOST].fd == hostfd) {
		/* The port says HUP when its host goes; a socket reads EOF. */
		if (conf.sock == NULL &&
		    (pfds[P_HOST].revents & (POLLHUP | POLLERR | POLLNVAL)))
			host_lost("the port hung up");
		else if ((pfds[P_HOST].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    host_read() == -1)
			host_lost("end of its connection");
	}
	for (i = P_FIXED; i < n; i++)
		stream_event(i);
	if (pfds[P_PROXY].revents & POLLIN)
		eg_accept_clients(proxyfd, K_PROXY);
	if (pfds[P_REDIR].revents & POLLIN)
		eg_accept_clients(redirfd, K_TCP);
	if (pfds[P_DNS].revents & POLLIN)
		eg_dns_serve();
	if (hostfd >= 0 && out_pending() && out_flush() == -1)
		host_lost("write to it failed");
}

/* In the guest, the tunnel's thread runs first-in-first-out above every
 * ordinary task: it runs until it has nothing to do, rather than being
 * preempted by each client it wakes.  Under TCG a context switch flushes
 * QEMU's soft TLB and its cache of translated code, and as an ordinary
 * thread every send to curl made curl run at once, for a few KiB; as the
 * first thread it makes a tenth of the switches at twice the rate.  The
 * thread blocks in poll whenever the host has sent nothing and no client
 * can take more, so it cannot hold the CPU longer than the data keeps
 * coming; processes never get this from it (reset on fork), and the
 * kernel's RT throttling leaves the others 5% if it ever spun.  The price:
 * while a download fills the tunnel, other work waits more, for half as
 * long (docs/benchmarks.md, "Egress").  Not in the test mode: that runs on
 * the host. */
static void
egress_priority(void)
{
	struct sched_param p = { .sched_priority = 1 };

	if (conf.sock == NULL &&
	    sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &p) == -1)
		sd_log(NULL, "egress: SCHED_FIFO: %s", strerror(errno));
}

static void *
egress_main(void *arg)
{
	egress_priority();
	for (;;)
		loop_once();
	return NULL;
}

void
sd_egress_host_news(void)
{
	uint64_t one = 1;

	if (evfd >= 0)
		(void)!write(evfd, &one, sizeof one);
}

char *const *
sd_egress_env(void)
{
	return proxy_env[0] != NULL ? proxy_env : NULL;
}

int
sd_egress_start(const struct sd_egress_conf *c)
{
	static const char *names[] = { "HTTP_PROXY", "HTTPS_PROXY",
	    "http_proxy", "https_proxy" };
	pthread_t t;
	uint32_t i;

	conf = *c;
	sp_frame_dec_init(&dec);
	for (i = 0; i < NSLOTS; i++) {
		eg_streams[i].fd = -1;
		free_slots[i] = NSLOTS - 1 - i;
	}
	nfree = NSLOTS;
	if (sd_fake_init() == -1 ||
	    (evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1)
		return -1;
	if (conf.sock != NULL && (dev = sock_listen(conf.sock)) == -1) {
		sd_log(NULL, "egress: %s: %s", conf.sock, strerror(errno));
		return -1;
	}
	proxyfd = eg_listen_on(SOCK_STREAM, conf.proxy_port);
	redirfd = eg_listen_on(SOCK_STREAM, conf.redirect_port);
	eg_dnsfd = eg_listen_on(SOCK_DGRAM, conf.dns_port);
	if (proxyfd >= 0) {
		for (i = 0; i < 4; i++) {
			snprintf(proxy_env_buf[i], sizeof proxy_env_buf[i],
			    "%s=http://127.0.0.1:%d", names[i], conf.proxy_port);
			proxy_env[i] = proxy_env_buf[i];
		}
		proxy_env[4] = "NO_PROXY=localhost,127.0.0.1,::1";
		proxy_env[5] = "no_proxy=localhost,127.0.0.1,::1";
	}
	if (pthread_create(&t, NULL, egress_main, NULL) != 0)
		return -1;
	return 0;
}
