/*
 * sp_gw_stream: a gateway stream's two sides.  The tunnel's reader
 * (sp_gateway.c) fills a stream's ring with what the guest sent and its
 * credit with the windows the guest gave; the stream's worker (sp_gw_conn.c)
 * takes from the ring and sends within the credit, through the calls here.
 * Both sides hold references, under the gateway's lock.
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_net.h"
#include "sp_gw.h"

/* ---- egress counts, for space-metrics ---- */

void
gw_count(struct gw_tunnel *t, int up, size_t n)
{
	__atomic_add_fetch(up ? &t->sent : &t->received, (uint64_t)n,
	    __ATOMIC_RELAXED);
}

static int
counts_path(const struct gw_tunnel *t, char *out, size_t n)
{
	return snprintf(out, n, "%s/" SP_GATEWAY_COUNTS_DIR "/%s.json",
	    t->g->run, t->id) < (int)n ? 0 : -1;
}

void
gw_counts_save(struct gw_tunnel *t, int force)
{
	char path[SP_PATH_MAX], tmp[SP_PATH_MAX + 8], dir[SP_PATH_MAX];
	int64_t now = sp_clock_ms(), last;
	FILE *f;

	last = __atomic_load_n(&t->saved_ms, __ATOMIC_RELAXED);
	if ((!force && now - last < 1000) ||
	    !__atomic_compare_exchange_n(&t->saved_ms, &last, now, 0,
	    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	if (counts_path(t, path, sizeof path) == -1 ||
	    snprintf(dir, sizeof dir, "%s/" SP_GATEWAY_COUNTS_DIR, t->g->run) >=
	    (int)sizeof dir)
		return;
	(void)mkdir(dir, 0755);
	snprintf(tmp, sizeof tmp, "%s.%d", path, (int)gettid());
	if ((f = fopen(tmp, "we")) == NULL)
		return;
	fprintf(f, "{\"sent\":%llu,\"received\":%llu}\n",
	    (unsigned long long)__atomic_load_n(&t->sent, __ATOMIC_RELAXED),
	    (unsigned long long)__atomic_load_n(&t->received,
	    __ATOMIC_RELAXED));
	if (fclose(f) == 0)
		(void)rename(tmp, path);
	else
		unlink(tmp);
}

/* ---- references ---- */

void
gw_tunnel_put_locked(struct gw_tunnel *t)
{
	struct sp_gateway *g = t->g;
	struct gw_tunnel **pp;
	char path[SP_PATH_MAX];

	if (--t->refs > 0)
		return;
	for (pp = &g->tunnels; *pp != NULL; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	g->ntunnels--;
	pthread_cond_broadcast(&g->cv);
	/* Its VM's counters end with it (libvirt's do too). */
	if (counts_path(t, path, sizeof path) == 0)
		unlink(path);
	close(t->fd);
	pthread_mutex_destroy(&t->wmu);
	pthread_mutex_destroy(&t->wake_mu);
	free(t);
}

static void
stream_free(struct gw_stream *s)
{
	if (s->efd >= 0)
		close(s->efd);
	free(s->in);
	free(s);
}

void
gw_stream_put(struct gw_stream *s)
{
	struct sp_gateway *g = s->t->g;
	struct gw_tunnel *t = s->t;
	int last;

	pthread_mutex_lock(&g->mu);
	last = --s->refs == 0;
	if (last) {
		g->nstreams--;
		gw_tunnel_put_locked(t);
	}
	pthread_mutex_unlock(&g->mu);
	if (last)
		stream_free(s);
}

void
gw_kick(struct gw_stream *s)
{
	uint64_t one = 1;

	if (write(s->efd, &one, sizeof one) == -1 && errno != EAGAIN)
		return;
}

/* Takes s out of its tunnel's table (under g->mu): nothing more for it. */
void
gw_unlink_locked(struct gw_stream *s)
{
	struct gw_stream **pp;

	for (pp = &s->t->streams; *pp != NULL; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			s->t->nstreams--;
			s->closed = 1;
			gw_kick(s);
			if (--s->refs == 0) {
				/* The worker is gone already. */
				s->t->g->nstreams--;
				gw_tunnel_put_locked(s->t);
				stream_free(s);
			}
			return;
		}
}

/* ---- frames out ---- */

int
gw_send_frame(struct gw_tunnel *t, uint8_t type, uint32_t stream,
    const void *p, size_t n)
{
	struct sp_err e;
	int rc;

	pthread_mutex_lock(&t->wmu);
	rc = sp_frame_write(t->fd, type, stream, p, n, &e);
	pthread_mutex_unlock(&t->wmu);
	/* The reader notices the end of the connection and cleans up. */
	if (rc == -1)
		shutdown(t->fd, SHUT_RDWR);
	return rc;
}

static int
send_window(struct gw_tunnel *t, uint32_t stream, size_t n)
{
	unsigned char b[4];

	sp_be32_put(b, (uint32_t)n);
	return gw_send_frame(t, SP_FR_WINDOW, stream, b, 4);
}

/* ---- what a worker calls ---- */

ssize_t
gw_guest_read(struct gw_stream *s, void *buf, size_t n)
{
	struct sp_gateway *g = s->t->g;
	size_t k, first, win;

	pthread_mutex_lock(&g->mu);
	if (s->closed) {
		pthread_mutex_unlock(&g->mu);
		return -2;
	}
	if (s->in_len == 0) {
		pthread_mutex_unlock(&g->mu);
		return s->in_eof ? 0 : -1;
	}
	k = n < s->in_len ? n : s->in_len;
	first = SP_EGRESS_WINDOW - s->in_off;
	if (first > k)
		first = k;
	memcpy(buf, s->in + s->in_off, first);
	memcpy((unsigned char *)buf + first, s->in, k - first);
	s->in_off = (s->in_off + k) % SP_EGRESS_WINDOW;
	s->in_len -= k;
	s->win_unsent += k;
	win = 0;
	if (s->win_unsent >= SP_EGRESS_WINDOW_BATCH) {
		win = s->win_unsent;
		s->win_unsent = 0;
	}
	pthread_mutex_unlock(&g->mu);
	if (win > 0 && send_window(s->t, s->id, win) == -1)
		return -2;
	return (ssize_t)k;
}

int
gw_guest_peek(struct gw_stream *s, unsigned char *first, int *eof)
{
	struct sp_gateway *g = s->t->g;
	int have;

	pthread_mutex_lock(&g->mu);
	have = s->in_len > 0;
	if (have)
		*first = s->in[s->in_off];
	*eof = s->in_eof || s->closed;
	pthread_mutex_unlock(&g->mu);
	return have;
}

ssize_t
gw_guest_write(struct gw_stream *s, const void *buf, size_t n)
{
	struct sp_gateway *g = s->t->g;
	size_t m;

	pthread_mutex_lock(&g->mu);
	if (s->closed) {
		pthread_mutex_unlock(&g->mu);
		return -2;
	}
	m = n;
	if ((int64_t)m > s->credit)
		m = (size_t)s->credit;
	if (m > SP_FRAME_CHUNK)
		m = SP_FRAME_CHUNK;
	s->credit -= (int64_t)m;
	pthread_mutex_unlock(&g->mu);
	if (m == 0)
		return 0;
	if (gw_send_frame(s->t, SP_FR_DATA, s->id, buf, m) == -1)
		return -2;
	return (ssize_t)m;
}

int
gw_guest_eof(struct gw_stream *s)
{
	return gw_send_frame(s->t, SP_FR_DATA, s->id, NULL, 0);
}

void
gw_guest_close(struct gw_stream *s)
{
	struct sp_gateway *g = s->t->g;
	int was;

	pthread_mutex_lock(&g->mu);
	was = s->closed;
	gw_unlink_locked(s);
	pthread_mutex_unlock(&g->mu);
	if (!was)
		gw_send_frame(s->t, SP_FR_CLOSE, s->id, NULL, 0);
}

void
gw_stream_end(struct gw_stream *s)
{
	struct sp_gateway *g = s->t->g;

	pthread_mutex_lock(&g->mu);
	if (!s->closed)
		gw_unlink_locked(s);
	pthread_mutex_unlock(&g->mu);
}

int
gw_stream_closed(struct gw_stream *s)
{
	struct sp_gateway *g = s->t->g;
	int c;

	pthread_mutex_lock(&g->mu);
	c = s->closed;
	pthread_mutex_unlock(&g->mu);
	return c;
}

int
gw_wait(struct gw_stream *s, int fd, short events, int ms)
{
	struct pollfd p[2];
	uint64_t v;

	p[0].fd = s->efd;
	p[0].events = POLLIN;
	p[1].fd = fd;
	p[1].events = events;
	p[0].revents = p[1].revents = 0;
	if (poll(p, fd >= 0 ? 2 : 1, ms) <= 0)
		return 0;
	if (p[0].revents & POLLIN)
		while (read(s->efd, &v, sizeof v) > 0)
			;
	return fd >= 0 ? p[1].revents : 0;
}
