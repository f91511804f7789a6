/*
 * egress.h: what the parts of the guest's egress tunnel share:
 * daemon-egress.c (the streams, the frames to and from the host, the loop)
 * and egress-listen.c (the guest's side: the proxy, redirect and DNS
 * listeners).  One thread runs both, so nothing here is locked.
 */
#ifndef EGRESS_H
#define EGRESS_H

#include <stdint.h>

#include "sp.h"
#include "dns.h"

#define SLOT_BITS	10
#define NSLOTS		(1u << SLOT_BITS)
_Static_assert(NSLOTS == SP_EGRESS_STREAMS_MAX, "a slot per stream");
#define DNS_BUF		1500
#define DNS_PENDING_MAX	256		/* lookups waiting for the host */
#define DNS_TIMEOUT_MS	3000
#define FRAMES_PER_ROUND 64		/* then poll: the loop has others */
#define ACCEPTS_PER_ROUND 16
#define PORT_LOOK_MS	5000
/* With the port open and no host, the driver's signal wakes the thread when
 * one comes; it looks unwoken this often as well, like the space.N ports.
 * Rarely: each look wakes an idle guest, and as a SCHED_FIFO thread it also
 * arms the kernel's RT period timer, a second wakeup. */
#define HOST_LOOK_MS	10000
#define NONCE_MAX	128

enum kind { K_FREE, K_PROXY, K_TCP, K_DNS, K_INBOUND };

/* Bytes of one DATA frame from the host, on their way to the client. */
struct chunk {
	struct chunk *next;
	size_t len, off;
	unsigned char data[];
};

struct stream {
	uint32_t id;		/* 0 when the slot is free */
	uint32_t live_at;	/* its index in live[] */
	enum kind kind;
	int fd;			/* the client's socket, or -1 */
	/* What is still to be sent, in this order. */
	unsigned char open_pending, close_pending, eof_pending;
	unsigned char readable;	/* the client has bytes or EOF for us */
	unsigned char client_eof, eof_sent, host_eof, shut_wr, queued;
	uint32_t up_avail;	/* how much more the host takes from us */
	uint32_t down_avail;	/* how much more the host may send us */
	uint32_t win_pending;	/* written to the client, not yet announced */
	struct chunk *down, *down_tail;
	size_t down_len;
	struct stream *qprev, *qnext;	/* the queue of streams with frames */
	struct stream *dprev, *dnext;	/* lookups, oldest first */
	char host[NAME_MAX_ + 1];	/* tcp: where to */
	uint16_t port;
	struct query q;		/* dns */
	int64_t deadline;
	uint64_t ref;		/* inbound: the host's reference */
	unsigned char refused;	/* inbound: nothing listens; OPEN says so */
};

extern struct stream eg_streams[NSLOTS];
extern struct stream *eg_d_head;	/* lookups waiting, oldest first */
extern int eg_dnsfd, eg_ndns;
/* No accepting until then (out of descriptors); the next look for a port. */
extern int64_t eg_accept_pause_until, eg_port_look_at;

/* daemon-egress.c */
int64_t eg_now_ms(void);
/* Answers q with rcode, and addr as an A record when not 0. */
void eg_dns_reply(const struct query *q, int rcode, uint32_t addr);
/* A new stream of kind for client fd, or NULL when all slots are taken. */
struct stream *eg_stream_new(enum kind kind, int fd);
/* Queues s for frames to the host; adds s to the lookups waiting. */
void eg_q_push(struct stream *s);
void eg_d_push(struct stream *s);
/* Closes fd with a reset (SO_LINGER 0), not a FIN. */
void eg_close_reset(int fd);
void eg_stream_free(struct stream *s);
void eg_stream_abort(struct stream *s);
/* Whether a host is there and said hello. */
int eg_host_ready(void);

/* egress-listen.c */
/* A socket of type listening on 127.0.0.1:port, nonblocking; -1 on error. */
int eg_listen_on(int type, int port);
/* Takes the clients waiting on lfd, a stream each. */
void eg_accept_clients(int lfd, enum kind kind);
/* Takes the questions waiting on the DNS socket; answers the overdue. */
void eg_dns_serve(void);
void eg_dns_expire(int64_t now);

#endif
