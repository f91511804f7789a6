/*
 * egress-listen: the guest's side of the egress tunnel (egress.h): the HTTP
 * proxy on 127.0.0.1:3128, the transparent-redirect target on :3129 and the
 * DNS server on :53, each client or question a stream to the host.
 */
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "dns.h"
#include "fake-addr.h"
#include "egress.h"

#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST	80	/* linux/netfilter_ipv4.h */
#endif

int
eg_listen_on(int type, int port)
{
	struct sockaddr_in sa;
	int fd, one = 1;

	if (port == 0)
		return -1;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) ==
	    -1)
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == -1 ||
	    (type == SOCK_STREAM && listen(fd, 128) == -1))
		goto fail;
	return fd;
fail:
	sd_log(NULL, "egress: 127.0.0.1:%d: %s", port, strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

/* Where a redirected connection was going: its original destination, or
 * (without the redirect, as in test mode) the address it reached. */
static int
redirect_target(int fd, struct stream *s)
{
	struct sockaddr_in dst;
	socklen_t len = sizeof dst;
	const char *name;
	uint32_t a;

	memset(&dst, 0, sizeof dst);
	if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &dst, &len) == -1 ||
	    dst.sin_family != AF_INET) {
		len = sizeof dst;
		if (getsockname(fd, (struct sockaddr *)&dst, &len) == -1 ||
		    dst.sin_family != AF_INET)
			return -1;
	}
	a = ntohl(dst.sin_addr.s_addr);
	s->port = ntohs(dst.sin_port);
	if (sd_fake_in_net(a)) {
		/* Only a name we gave out means anything there. */
		if ((name = sd_fake_name(a)) == NULL)
			return -1;
		snprintf(s->host, sizeof s->host, "%s", name);
	} else if (inet_ntop(AF_INET, &dst.sin_addr, s->host,
	    sizeof s->host) == NULL)
		return -1;
	return 0;
}

/* A client we cannot serve.  One of the proxy speaks HTTP: it is told why
 * (an HTTP client then has a clear error, and some crash on a bare reset);
 * any other is reset. */
static void
refuse(int fd, enum kind kind, const char *why)
{
	char r[256];
	int n;

	if (kind != K_PROXY) {
		eg_close_reset(fd);
		return;
	}
	n = snprintf(r, sizeof r, "HTTP/1.1 503 Service Unavailable\r\n"
	    "Content-Type: text/plain\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\n%s\n", strlen(why) + 1, why);
	(void)send(fd, r, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	shutdown(fd, SHUT_WR);
	close(fd);
}

void
eg_accept_clients(int lfd, enum kind kind)
{
	struct stream *s;
	int fd, i;

	for (i = 0; i < ACCEPTS_PER_ROUND; i++) {
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			/* Out of descriptors: the listener stays readable,
			 * so look again in a moment rather than spin. */
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				eg_accept_pause_until = eg_now_ms() + 100;
			return;
		}
		/* Data comes from the tunnel in pieces as it arrives: send
		 * each at once rather than wait for an ACK (Nagle). */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 },
		    sizeof(int));
		/* No host, or too many streams: the client learns at once. */
		if (!eg_host_ready()) {
			refuse(fd, kind, "space egress: the gateway is not "
			    "connected");
			continue;
		}
		if ((s = eg_stream_new(kind, fd)) == NULL) {
			refuse(fd, kind, "space egress: too many connections");
			continue;
		}
		if (kind == K_TCP && redirect_target(fd, s) == -1) {
			eg_stream_free(s);
			continue;
		}
		eg_q_push(s);
	}
}

void
eg_dns_serve(void)
{
	unsigned char b[DNS_BUF];
	struct query q;
	struct stream *s;
	socklen_t plen;
	ssize_t n;
	int i, rc;

	for (i = 0; i < ACCEPTS_PER_ROUND; i++) {
		plen = sizeof q.peer;
		n = recvfrom(eg_dnsfd, b, sizeof b, MSG_TRUNC | MSG_DONTWAIT,
		    (struct sockaddr *)&q.peer, &plen);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return;
		if ((size_t)n > sizeof b || plen != sizeof q.peer ||
		    q.peer.sin_family != AF_INET)
			continue;
		if ((rc = sd_dns_parse(b, n, &q)) == -1)
			continue;
		if (rc == RC_OK && q.qtype != T_A && q.qtype != T_ANY &&
		    q.qtype != T_AAAA) {
			/* No other records here: an empty answer. */
			eg_dns_reply(&q, RC_OK, 0);
			continue;
		}
		if (rc != RC_OK) {
			eg_dns_reply(&q, rc, 0);
			continue;
		}
		if (!eg_host_ready() || eg_ndns >= DNS_PENDING_MAX ||
		    (s = eg_stream_new(K_DNS, -1)) == NULL) {
			eg_dns_reply(&q, RC_SERVFAIL, 0);
			continue;
		}
		s->q = q;
		s->deadline = eg_now_ms() + DNS_TIMEOUT_MS;
		eg_d_push(s);
		eg_q_push(s);
	}
}

/* Lookups the host did not answer in time: SERVFAIL, and CLOSE so that
 * the host forgets them too. */
void
eg_dns_expire(int64_t now)
{
	struct stream *s;

	while ((s = eg_d_head) != NULL && s->deadline <= now) {
		eg_dns_reply(&s->q, RC_SERVFAIL, 0);
		eg_stream_abort(s);
	}
}
