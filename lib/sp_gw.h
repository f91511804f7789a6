/*
 * sp_gw.h: what the parts of the gateway share -- sp_gateway.c (the
 * tunnels: one per sandbox, its frames), sp_gw_stream.c (a stream's ring and
 * windows, between the tunnel and the worker) and sp_gw_conn.c (one
 * connection: decide, connect, relay, add credentials).
 * Not part of the library's interface.
 */
#ifndef SP_GW_H
#define SP_GW_H

#include <pthread.h>
#include <stdint.h>

#include "sp_net.h"

struct gw_tunnel;
struct gw_listener;
struct gw_pending;

struct sp_gateway {
	struct sp_gateway_opts o;
	char root[SP_PATH_MAX], run[SP_PATH_MAX];
	char upstream_ca[SP_PATH_MAX], hosts[SP_PATH_MAX];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct sp_egress_never never;	/* under mu; copied per decision */
	struct sp_tls_ca *ca;		/* NULL without a node CA */
	SSL_CTX *client;		/* upstream TLS, or NULL */
	struct gw_tunnel *tunnels;
	int ntunnels, nstreams;
	int stopping;
	/* Inbound ports (sp_gw_port.c): the listeners, changed only by the
	 * thread that calls sp_gateway_ports; the connections accepted and
	 * not yet ended (under mu). */
	struct gw_listener *listeners;
	int ninbound;
	int ports_status_due;		/* RUN/ports.json to be written */
};

/* One sandbox's egress port. */
struct gw_tunnel {
	struct sp_gateway *g;
	struct gw_tunnel *next;
	char id[SP_ID_LEN + 1];
	char tenant[SP_NAME_MAX + 1], project[SP_NAME_MAX + 1];
	char template[2 * SP_NAME_MAX + 2];
	int fd;
	pthread_mutex_t wmu;		/* one frame at a time on fd */
	/* Under g->mu: */
	struct gw_stream *streams;
	int nstreams, dead, refs;
	int hello, inbound;		/* the guest answered; it takes inbound */
	uint64_t ref_seq;		/* the last inbound reference asked */
	struct gw_pending *pending;	/* inbound asked, not yet answered */
	pthread_mutex_t wake_mu;	/* one wake-up at a time */
	/* Bytes to and from upstreams (atomic), and when they were last
	 * written for space-metrics (gw_counts_save). */
	uint64_t sent, received;
	int64_t saved_ms;
};

/* One connection of the guest. */
struct gw_stream {
	struct gw_tunnel *t;
	struct gw_stream *next;
	uint32_t id;
	int proxy;			/* kind proxy; else tcp */
	int inbound;			/* a connection to a port of the guest */
	char host[SP_EGRESS_NAME_MAX + 1];
	int port;
	int efd;			/* eventfd: something below changed */
	/* Under g->mu: */
	unsigned char *in;		/* DATA from the guest, a ring */
	size_t in_off, in_len;
	int in_eof, closed;		/* EOF, CLOSE (or the tunnel went) */
	int64_t credit;			/* DATA we may still send */
	size_t win_unsent;		/* handed on, not yet in a WINDOW */
	int refs;
};

/* sp_gw_stream.c: the tunnel's side. */
/* Counts n bytes sent upstream (up) or received from it. */
void gw_count(struct gw_tunnel *t, int up, size_t n);
/* Writes the tunnel's counts to RUN/egress-counts/ID.json (whole: a new
 * file renamed over), at most once a second unless force. */
void gw_counts_save(struct gw_tunnel *t, int force);
/* Drops a reference to t; the last one frees it.  Under g->mu. */
void gw_tunnel_put_locked(struct gw_tunnel *t);
/* Wakes the stream's worker (its eventfd). */
void gw_kick(struct gw_stream *s);
/* Takes s out of its tunnel's table.  Under g->mu. */
void gw_unlink_locked(struct gw_stream *s);
/* One frame to the guest, under the tunnel's write lock; -1 when the
 * tunnel is gone. */
int gw_send_frame(struct gw_tunnel *t, uint8_t type, uint32_t stream,
    const void *data, size_t n);

/* sp_gw_stream.c: the worker's side. */
/* Takes up to n bytes the guest sent (and gives it the window back, in
 * WINDOW frames of SP_EGRESS_WINDOW_BATCH or more): the count, 0 at EOF,
 * -1 when nothing is there yet, -2 when the stream is closed. */
ssize_t gw_guest_read(struct gw_stream *s, void *buf, size_t n);
/* Sends up to n bytes within the window: the count, 0 when the window is
 * shut (wait on efd), -2 when the stream or tunnel is gone. */
ssize_t gw_guest_write(struct gw_stream *s, const void *buf, size_t n);
/* Bytes waiting from the guest; 1 when at EOF with none (peek). */
int gw_guest_peek(struct gw_stream *s, unsigned char *first, int *eof);
int gw_guest_eof(struct gw_stream *s);		/* sends EOF */
void gw_guest_close(struct gw_stream *s);	/* sends CLOSE */
/* Out of the table without a frame: EOF went both ways. */
void gw_stream_end(struct gw_stream *s);
int gw_stream_closed(struct gw_stream *s);
/* Waits on the stream's eventfd and fd (events) up to ms; fd may be -1.
 * Returns poll's revents of fd. */
int gw_wait(struct gw_stream *s, int fd, short events, int ms);

/* An inbound connection asked of the guest (sp_gw_port.c), until its
 * answer: the stream it opened, or its refusal.  Under g->mu. */
struct gw_pending {
	struct gw_pending *next;
	uint64_t ref;
	struct gw_stream *s;		/* the guest's stream, one reference */
	int taken;			/* the answer came: s or refused next */
	int refused;
};
/* The guest's OPEN of kind inbound (sp_gateway.c hands it over): takes
 * the pending connection of ref.  Under g->mu; 0 when none waits. */
struct gw_pending *gw_pending_take_locked(struct gw_tunnel *t, uint64_t ref);

/* Stops every listener (sp_gateway_free). */
void gw_ports_stop(struct sp_gateway *g);

/* sp_gw_conn.c: a stream's worker thread; it owns one reference. */
void *gw_conn_main(void *arg);
/* Relays an inbound stream s and the client connection fd until both end;
 * closes fd and drops the caller's reference to s. */
void gw_conn_inbound(struct gw_stream *s, int fd);
/* The DNS question of a guest: allow or not, logged. */
int gw_dns_allow(struct gw_tunnel *t, const char *name, char *reason,
    size_t n);

void gw_stream_put(struct gw_stream *s);

#endif
