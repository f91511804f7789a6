/*
 * http-ok: runs inside a sandbox for bench/egress.  A keep-alive HTTP/1.1
 * server on 127.0.0.1:PORT that answers every request with the same small
 * response tests/upstream-server gives for /x ("ok /x\n").  curl in the guest
 * against it is what a small request costs the guest itself (curl and the
 * guest's TCP under its CPU), with no egress path at all: bench/egress sets
 * it beside the same request through the tunnel.  It detaches (the exec
 * that started it returns) and serves one connection at a time until
 * killed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n"
    "ok /x\n";

static void
serve(int c)
{
	char buf[8192], *end;
	size_t have = 0, used;
	ssize_t n;

	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	while ((n = read(c, buf + have, sizeof buf - 1 - have)) > 0) {
		have += n;
		buf[have] = '\0';
		while ((end = strstr(buf, "\r\n\r\n")) != NULL) {
			if (write(c, answer, sizeof answer - 1) == -1)
				return;
			used = end + 4 - buf;
			memmove(buf, buf + used, have - used + 1);
			have -= used;
		}
		if (have == sizeof buf - 1)
			return;	/* a request head over 8 KiB: not ours */
	}
}

int
main(int argc, char *argv[])
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int l, c, port = argc > 1 ? atoi(argv[1]) : 0, null;

	if (port <= 0 || port > 65535) {
		fprintf(stderr, "usage: http-ok PORT\n");
		return 100;
	}
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((l = socket(AF_INET, SOCK_STREAM, 0)) == -1 ||
	    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 },
	    sizeof(int)) == -1 ||
	    bind(l, (struct sockaddr *)&a, sizeof a) == -1 ||
	    listen(l, 8) == -1) {
		perror("http-ok: 127.0.0.1");
		return 1;
	}
	/* Listening before the caller returns: it may connect at once. */
	switch (fork()) {
	case -1:
		perror("http-ok: fork");
		return 1;
	case 0:
		break;
	default:
		return 0;
	}
	setsid();
	if ((null = open("/dev/null", O_RDWR)) >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
	}
	for (;;) {
		if ((c = accept(l, NULL, NULL)) == -1)
			continue;
		serve(c);
		close(c);
	}
}
