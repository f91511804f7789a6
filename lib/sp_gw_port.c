/*
 * sp_gw_port: the gateway's inbound ports (design.md, "Inbound ports").
 * For each port of ROOT/ports (sp_port.c) a listener thread accepts on
 * its host address; each connection gets a thread that asks the guest,
 * over the sandbox's tunnel, for a connection to 127.0.0.1:PORT (an OPEN
 * of kind inbound on stream 0 with a reference), waits for the guest's
 * answer (its own OPEN naming the reference, or a refusal), and relays
 * (sp_gw_conn.c).  A guest that does not answer within WAKE_AFTER_MS may
 * be paused: the gateway's wake hook is called once, and the wait goes
 * on.  Clients are hostile too: the connections in flight are bounded,
 * and a client that the guest cannot serve is reset.
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sp_net.h"
#include "sp_gw.h"

#define WAKE_AFTER_MS	50	/* no answer yet: the guest may be paused */
#define ANSWER_MS	15000	/* then the client is reset */
#define RETRY_MS	5000	/* a port that could not be listened on */
#define LISTENERS_MAX	4096
#define THREAD_STACK	(256 * 1024)

struct gw_listener {
	struct gw_listener *next;
	struct sp_gateway *g;
	struct sp_port p;
	int fd;				/* -1: not listening (error) */
	pthread_t th;
	char error[sizeof ((struct sp_err *)0)->msg];
	int64_t retry_at;
	int seen;
};

struct inbound {
	struct sp_gateway *g;
	char id[SP_ID_LEN + 1];
	int port;
	int fd;
};

/* ---- one connection ---- */

struct gw_pending *
gw_pending_take_locked(struct gw_tunnel *t, uint64_t ref)
{
	struct gw_pending **pp, *p;

	for (pp = &t->pending; (p = *pp) != NULL; pp = &p->next)
		if (p->ref == ref) {
			*pp = p->next;
			p->taken = 1;
			return p;
		}
	return NULL;
}

static void
reset(int fd)
{
	struct linger lg = { 1, 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	close(fd);
}

/* The live tunnel of id, with a reference taken; NULL when there is none
 * or its guest said it takes no inbound connections. */
static struct gw_tunnel *
tunnel_get_locked(struct sp_gateway *g, const char *id)
{
	struct gw_tunnel *t;

	for (t = g->tunnels; t != NULL; t = t->next)
		if (!t->dead && strcmp(t->id, id) == 0 &&
		    (!t->hello || t->inbound)) {
			t->refs++;
			return t;
		}
	return NULL;
}

static void
deadline_at(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

/* Asks the guest and waits for its answer: the stream, or NULL. */
static struct gw_stream *
ask_guest(struct gw_tunnel *t, struct inbound *in)
{
	struct sp_gateway *g = t->g;
	struct gw_pending p, **pp;
	struct timespec wake_at, give_up;
	char open[96];
	int woken = 0, rc;

	memset(&p, 0, sizeof p);
	pthread_mutex_lock(&g->mu);
	p.ref = ++t->ref_seq;
	p.next = t->pending;
	t->pending = &p;
	pthread_mutex_unlock(&g->mu);
	snprintf(open, sizeof open, "{\"kind\":\"inbound\",\"port\":%d,"
	    "\"ref\":%llu}", in->port, (unsigned long long)p.ref);
	gw_send_frame(t, SP_FR_OPEN, 0, open, strlen(open));
	deadline_at(&wake_at, WAKE_AFTER_MS);
	deadline_at(&give_up, ANSWER_MS);
	pthread_mutex_lock(&g->mu);
	for (;;) {
		if (p.s != NULL || p.refused)
			break;
		/* Taken: the reader is making its stream, and says soon
		 * (before it would end the tunnel). */
		if (p.taken) {
			pthread_cond_wait(&g->cv, &g->mu);
			continue;
		}
		if (t->dead)
			break;
		rc = pthread_cond_timedwait(&g->cv, &g->mu,
		    woken || g->o.wake == NULL ? &give_up : &wake_at);
		if (rc != ETIMEDOUT || p.taken)
			continue;
		if (woken || g->o.wake == NULL)
			break;
		woken = 1;
		pthread_mutex_unlock(&g->mu);
		/* One wake-up at a time; the others find it running. */
		pthread_mutex_lock(&t->wake_mu);
		if (g->o.wake(in->id, g->o.wake_arg) == -1)
			woken = 2;
		pthread_mutex_unlock(&t->wake_mu);
		pthread_mutex_lock(&g->mu);
		if (woken == 2 && !p.taken)
			break;
	}
	if (!p.taken)
		for (pp = &t->pending; *pp != NULL; pp = &(*pp)->next)
			if (*pp == &p) {
				*pp = p.next;
				break;
			}
	pthread_mutex_unlock(&g->mu);
	return p.s;
}

static void *
inbound_main(void *arg)
{
	struct inbound *in = arg;
	struct sp_gateway *g = in->g;
	struct gw_stream *s = NULL;
	struct gw_tunnel *t;

	pthread_mutex_lock(&g->mu);
	t = tunnel_get_locked(g, in->id);
	pthread_mutex_unlock(&g->mu);
	if (t != NULL)
		s = ask_guest(t, in);
	if (s != NULL)
		gw_conn_inbound(s, in->fd);	/* closes fd, puts s */
	else
		reset(in->fd);
	pthread_mutex_lock(&g->mu);
	if (t != NULL)
		gw_tunnel_put_locked(t);
	g->ninbound--;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	free(in);
	return NULL;
}

/* ---- listeners ---- */

static void
take(struct gw_listener *l, int fd)
{
	struct sp_gateway *g = l->g;
	struct inbound *in;
	pthread_attr_t a;
	pthread_t th;
	int one = 1, ok;

	pthread_mutex_lock(&g->mu);
	ok = g->ninbound < SP_GATEWAY_STREAMS_MAX && !g->stopping;
	if (ok)
		g->ninbound++;
	pthread_mutex_unlock(&g->mu);
	if (!ok || (in = calloc(1, sizeof *in)) == NULL) {
		reset(fd);
		if (ok)
			goto undo;
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	in->g = g;
	snprintf(in->id, sizeof in->id, "%s", l->p.id);
	in->port = l->p.port;
	in->fd = fd;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, THREAD_STACK);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	ok = pthread_create(&th, &a, inbound_main, in) == 0;
	pthread_attr_destroy(&a);
	if (ok)
		return;
	reset(fd);
	free(in);
undo:
	pthread_mutex_lock(&g->mu);
	g->ninbound--;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

static void *
listener_main(void *arg)
{
	struct gw_listener *l = arg;
	int fd;

	for (;;) {
		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			take(l, fd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
		    errno == ENOMEM) {
			poll(NULL, 0, 100);
			continue;
		}
		return NULL;	/* shut down: the port went */
	}
}

static int
listen_on(struct gw_listener *l)
{
	struct sockaddr_in sa;
	struct sp_err e;
	int one = 1, fd;

	l->error[0] = '\0';
	if (sp_port_listen_parse(l->p.listen, &sa, &e) == -1) {
		snprintf(l->error, sizeof l->error, "%s", e.msg);
		return -1;
	}
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == -1 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof sa) == -1 ||
	    listen(fd, 512) == -1) {
		snprintf(l->error, sizeof l->error, "listen on %s: %s",
		    l->p.listen, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	l->fd = fd;
	if (pthread_create(&l->th, NULL, listener_main, l) != 0) {
		snprintf(l->error, sizeof l->error, "no thread");
		close(fd);
		l->fd = -1;
		return -1;
	}
	return 0;
}

static void
listener_stop(struct gw_listener *l)
{
	if (l->fd < 0)
		return;
	shutdown(l->fd, SHUT_RDWR);	/* accept returns EINVAL */
	pthread_join(l->th, NULL);
	close(l->fd);
	l->fd = -1;
}

static int
status_write(struct sp_gateway *g, struct sp_err *e)
{
	char path[SP_PATH_MAX], tmp[SP_PATH_MAX + 16];
	struct gw_listener *l;
	json_t *j, *a, *one;
	int rc;

	if (sp_path_fmt(path, sizeof path, e, "%s/" SP_PORT_STATUS, g->run) ==
	    -1 || sp_path_fmt(tmp, sizeof tmp, e, "%s.%d", path,
	    (int)getpid()) == -1)
		return -1;
	if ((a = json_array()) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 0, "ports");
	for (l = g->listeners; l != NULL; l = l->next) {
		one = json_pack("{s:s, s:i, s:s}", "id", l->p.id, "port",
		    l->p.port, "listen", l->p.listen);
		if (one != NULL && l->fd < 0)
			json_object_set_new(one, "error", json_string(l->error));
		json_array_append_new(a, one);
	}
	j = json_pack("{s:I, s:o}", "pid", (json_int_t)getpid(), "ports", a);
	rc = j != NULL && json_dump_file(j, tmp, JSON_COMPACT) == 0 &&
	    rename(tmp, path) == 0 ? 0 : -1;
	json_decref(j);
	if (rc == -1) {
		unlink(tmp);
		return sp_err_sys(e, SP_E_IO, "write %s", path);
	}
	return 0;
}

int
sp_gateway_ports(struct sp_gateway *g, struct sp_err *e)
{
	struct gw_listener *l, **pp;
	struct sp_port *ports;
	size_t n, i, count = 0;
	int64_t now = sp_clock_ms();
	int changed = 0;

	if (sp_port_list(g->root, NULL, &ports, &n, e) == -1)
		return -1;
	for (l = g->listeners; l != NULL; l = l->next, count++)
		l->seen = 0;
	for (i = 0; i < n; i++) {
		for (l = g->listeners; l != NULL; l = l->next)
			if (strcmp(l->p.id, ports[i].id) == 0 &&
			    l->p.port == ports[i].port &&
			    strcmp(l->p.listen, ports[i].listen) == 0)
				break;
		if (l != NULL) {
			l->seen = 1;
			if (l->fd < 0 && now >= l->retry_at) {
				l->retry_at = now + RETRY_MS;
				changed |= listen_on(l) == 0;
			}
			continue;
		}
		if (count >= LISTENERS_MAX ||
		    (l = calloc(1, sizeof *l)) == NULL)
			continue;
		l->g = g;
		l->p = ports[i];
		l->fd = -1;
		l->seen = 1;
		l->retry_at = now + RETRY_MS;
		if (listen_on(l) == -1)
			sp_warn("%s port %d: %s", l->p.id, l->p.port, l->error);
		l->next = g->listeners;
		g->listeners = l;
		count++;
		changed = 1;
	}
	free(ports);
	for (pp = &g->listeners; (l = *pp) != NULL;) {
		if (l->seen) {
			pp = &l->next;
			continue;
		}
		*pp = l->next;
		listener_stop(l);
		free(l);
		changed = 1;
	}
	if (changed || g->ports_status_due)
		g->ports_status_due = status_write(g, e) == -1;
	return g->ports_status_due ? -1 : 0;
}

void
gw_ports_stop(struct sp_gateway *g)
{
	struct gw_listener *l;

	while ((l = g->listeners) != NULL) {
		g->listeners = l->next;
		listener_stop(l);
		free(l);
	}
}
