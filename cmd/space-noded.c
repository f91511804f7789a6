/*
 * space-noded: the node manager, the one process of a node meant to run as
 * root (design.md, "What an attacker must break").  It serves a closed list
 * of operations on a Unix socket ($SPACE_RUN/noded.sock, mode 0660, group
 * --group): a request is a line of JSON, its answer a line of JSON
 * ({"ok":true} or {"ok":false,"error":TOKEN,"msg":...}).  Every request is
 * checked whole (sp_noded_parse) and its paths opened beneath SPACE_ROOT
 * (sp_noded.c) before anything changes.  One thread, poll(): at most
 * MAX_CLIENTS connections, each idle at most IDLE_MS, each answer sent
 * without blocking (a client is not read while its last answer waits to
 * be sent, so one that does not read only stalls itself).  Every request
 * is logged, a JSON line on stdout with the peer's uid.  SIGTERM and SIGINT stop it.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"

#define MAX_CLIENTS	64
#define IDLE_MS		10000

#define OUT_MAX		2048	/* an answer: an error's message is < 512 */

struct client {
	int fd;
	uid_t uid;
	int64_t last;			/* ms of its last byte either way */
	size_t n;			/* bytes of requests in buf */
	size_t out, sent;		/* an answer not yet all sent */
	char buf[SP_NODED_LINE_MAX + 1];
	char obuf[OUT_MAX];
};

static volatile sig_atomic_t stop;
static struct client *clients[MAX_CLIENTS];

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-noded [--socket PATH] [--group GROUP]\n");
	sp_usage_exit();
}

static void
drop(int i)
{
	close(clients[i]->fd);
	free(clients[i]);
	clients[i] = NULL;
}

/* Sends what is left of c's answer; -1 when the client must go. */
static int
flush(struct client *c)
{
	ssize_t w;

	while (c->sent < c->out) {
		w = send(c->fd, c->obuf + c->sent, c->out - c->sent,
		    MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w == -1)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		c->sent += (size_t)w;
	}
	c->out = c->sent = 0;
	return 0;
}

/* Puts one answer line out; what the socket does not take now waits for
 * poll, and the client's next request with it. */
static int
answer(struct client *c, const struct sp_err *e)
{
	json_t *o;
	char *s;
	size_t len;

	o = e == NULL ? json_pack("{s:b}", "ok", 1) : json_pack("{s:b, s:s, "
	    "s:s}", "ok", 0, "error", sp_code_name(e->code), "msg", e->msg);
	s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (s == NULL || (len = strlen(s)) + 1 > sizeof c->obuf) {
		free(s);
		return -1;
	}
	memcpy(c->obuf, s, len);
	c->obuf[len] = '\n';
	c->out = len + 1;
	c->sent = 0;
	free(s);
	return flush(c);
}

static void
log_line(const struct client *c, const struct sp_noded_req *r,
    const struct sp_err *e)
{
	json_t *o;

	o = json_pack("{s:I, s:s, s:s, s:b}", "uid", (json_int_t)c->uid, "op",
	    r == NULL ? "" : r->op == SP_NODED_PING ? "ping" :
	    r->op == SP_NODED_CREATE ? "subvol-create" :
	    r->op == SP_NODED_SNAPSHOT ? "subvol-snapshot" : "subvol-delete",
	    "path", r == NULL ? "" : r->path, "ok", e == NULL);
	if (o == NULL)
		return;
	if (e != NULL)
		json_object_set_new(o, "error", json_string(sp_code_name(e->code)));
	sp_out_json(o);
}

/* Each whole line in c's buffer is a request; -1 when c must go. */
static int
serve(int root_fd, struct client *c)
{
	struct sp_noded_req r;
	struct sp_err e;
	char *nl;
	size_t len;
	int rc, parsed;

	while (c->out == 0 && (nl = memchr(c->buf, '\n', c->n)) != NULL) {
		len = (size_t)(nl - c->buf);
		parsed = sp_noded_parse(c->buf, len, &r, &e) == 0;
		rc = parsed ? sp_noded_do(root_fd, &r, &e) : -1;
		log_line(c, parsed ? &r : NULL, rc == 0 ? NULL : &e);
		if (answer(c, rc == 0 ? NULL : &e) == -1)
			return -1;
		c->n -= len + 1;
		memmove(c->buf, nl + 1, c->n);
	}
	if (c->out == 0 && c->n > SP_NODED_LINE_MAX) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "a request is at most %d bytes",
		    SP_NODED_LINE_MAX);
		log_line(c, NULL, &e);
		answer(c, &e);
		return -1;		/* no line to go on from */
	}
	return 0;
}

static int
listen_on(const char *path, const char *group, struct sp_err *e)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct group *g;
	int fd;

	if (strlen(path) >= sizeof sun.sun_path)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "socket path too long");
	strcpy(sun.sun_path, path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0)) == -1)
		return sp_err_sys(e, SP_E_IO, "socket");
	unlink(path);
	/* Made 0600, then opened to the group: never reachable by more. */
	if (fchmod(fd, 0600) == -1 ||
	    bind(fd, (struct sockaddr *)&sun, sizeof sun) == -1 ||
	    chmod(path, 0600) == -1) {
		sp_err_sys(e, SP_E_IO, "bind %s", path);
		close(fd);
		return -1;
	}
	if ((g = getgrnam(group)) != NULL &&
	    (chown(path, 0, g->gr_gid) == -1 || chmod(path, 0660) == -1)) {
		sp_err_sys(e, SP_E_IO, "chown %s", path);
		close(fd);
		return -1;
	}
	if (g == NULL)
		sp_warn("no group '%s': %s is root's alone", group, path);
	if (listen(fd, MAX_CLIENTS) == -1) {
		sp_err_sys(e, SP_E_IO, "listen %s", path);
		close(fd);
		return -1;
	}
	return fd;
}

static void
accept_one(int lfd)
{
	struct ucred cred;
	socklen_t len = sizeof cred;
	int fd, i;

	if ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) == -1)
		return;
	for (i = 0; i < MAX_CLIENTS && clients[i] != NULL; i++)
		;
	if (i == MAX_CLIENTS || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred,
	    &len) == -1 || (clients[i] = calloc(1, sizeof *clients[i])) == NULL) {
		close(fd);		/* full: it may come back */
		return;
	}
	clients[i]->fd = fd;
	clients[i]->uid = cred.uid;
	clients[i]->last = sp_clock_ms();
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "group", required_argument, NULL, 'g' },
		{ NULL, 0, NULL, 0 },
	};
	struct pollfd pfd[MAX_CLIENTS + 1];
	int idx[MAX_CLIENTS + 1];
	char sock[SP_PATH_MAX];
	const char *path = NULL, *group = SP_USER;
	struct sp_conf conf;
	struct sp_err e;
	struct sigaction sa;
	int ch, lfd, root_fd, i, n, k;
	ssize_t got;
	int64_t now;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch == 's')
			path = optarg;
		else if (ch == 'g')
			group = optarg;
		else
			usage();
	}
	if (optind != argc)
		usage();
	if (sp_conf_load(&conf, &e) == -1)
		return sp_out_fail(NULL, &e);
	if (path == NULL) {
		if (sp_path_fmt(sock, sizeof sock, &e, "%s/" SP_NODED_SOCK,
		    conf.run) == -1)
			return sp_out_fail(NULL, &e);
		path = sock;
	}
	if ((root_fd = open(conf.root, O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1) {
		sp_err_sys(&e, SP_E_NOT_INITIALIZED, "%s", conf.root);
		return sp_out_fail(NULL, &e);
	}
	if ((lfd = listen_on(path, group, &e)) == -1)
		return sp_out_fail(NULL, &e);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sp_warn("serving %s on %s", conf.root, path);
	while (!stop) {
		pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		/* A client with an answer pending is not read: it must read
		 * first (a flood backs up in its own socket). */
		for (n = 1, i = 0; i < MAX_CLIENTS; i++)
			if (clients[i] != NULL) {
				pfd[n] = (struct pollfd){ .fd = clients[i]->fd,
				    .events = clients[i]->out > 0 ? POLLOUT :
				    POLLIN };
				idx[n++] = i;
			}
		if (poll(pfd, (nfds_t)n, 1000) == -1 && errno != EINTR)
			break;
		now = sp_clock_ms();
		for (k = 1; k < n; k++) {
			struct client *c = clients[idx[k]];

			if (pfd[k].revents == 0) {
				if (now - c->last > IDLE_MS)
					drop(idx[k]);
				continue;
			}
			if (c->out > 0) {
				/* Its answer went on: then what it sent after. */
				c->last = now;
				if ((pfd[k].revents & (POLLERR | POLLHUP)) ||
				    flush(c) == -1 || serve(root_fd, c) == -1)
					drop(idx[k]);
				continue;
			}
			got = read(c->fd, c->buf + c->n, sizeof c->buf - c->n);
			if (got <= 0) {
				/* Gone, perhaps mid-request: what it sent
				 * without its newline is dropped. */
				if (got == 0 || (errno != EAGAIN && errno != EINTR))
					drop(idx[k]);
				continue;
			}
			c->n += (size_t)got;
			c->last = now;
			if (serve(root_fd, c) == -1)
				drop(idx[k]);
		}
		if (pfd[0].revents & POLLIN)
			accept_one(lfd);
	}
	for (i = 0; i < MAX_CLIENTS; i++)
		if (clients[i] != NULL)
			drop(i);
	close(lfd);
	unlink(path);
	close(root_fd);
	return 0;
}
