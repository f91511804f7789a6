/*
 * space-noded: the node manager, the one process of a node meant to run as
 * root (design.md, "What an attacker must break").  It serves a closed list
 * of operations on a Unix socket ($SPACE_RUN/noded.sock, mode 0660, group
 * --group): a request is a line of JSON, its answer a line of JSON
 * ({"ok":true} or {"ok":false,"error":TOKEN,"msg":...}).  Every request is
 * checked whole (sp_noded_parse) and its paths opened beneath SPACE_ROOT
 * (sp_noded.c), a domain's XML and files checked (sp_noded_virt.c), before
 * anything changes.  One thread polls: at most MAX_CLIENTS connections,
 * each idle at most IDLE_MS, each answer sent without blocking (a client is
 * not read while its request is carried out or its answer waits to be sent,
 * so one that does not read only stalls itself).  Each request is carried
 * out on a thread of its own, as a libvirt call may take seconds (a restore
 * under TCG): one client's save does not hold up another's start.  Every
 * request is logged, a JSON line on stdout with the peer's uid.  A send
 * or a receive comes with a descriptor (SCM_RIGHTS) for its stream: it goes
 * with the next request line, and any other op passed one is refused.
 * SIGTERM and SIGINT stop it.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"

#define MAX_CLIENTS	64
#define IDLE_MS		10000

struct client {
	int fd;
	uid_t uid;
	gid_t gid;
	pid_t pid;			/* its process (SO_PEERCRED) */
	int64_t last;			/* ms of its last byte either way */
	size_t n;			/* bytes of requests in buf */
	int busy;			/* a request on a worker */
	int passed;			/* a descriptor it passed, or -1 */
	int done;			/* its answer is in obuf (under lock) */
	char *obuf;			/* an answer line */
	size_t out, sent;		/* of it, not yet all sent */
	char buf[SP_NODED_LINE_MAX + 1];
};

/* What a worker carries out for a client. */
struct job {
	struct client *c;
	struct sp_noded_req r;
};

static volatile sig_atomic_t stop;
static struct client *clients[MAX_CLIENTS];
static struct sp_noded_vm vm;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int wake[2];			/* a worker is done: a byte */

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
	if (clients[i]->passed >= 0)
		close(clients[i]->passed);
	close(clients[i]->fd);
	free(clients[i]->obuf);
	free(clients[i]);
	clients[i] = NULL;
}

/* What c sent next, and a descriptor passed with it (SCM_RIGHTS): one is
 * kept, the newest; the kernel closes any more in one message (they do not
 * fit the room given). */
static ssize_t
read_in(struct client *c)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = { c->buf + c->n, sizeof c->buf - c->n };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = cm.b, .msg_controllen = sizeof cm.b };
	struct cmsghdr *h;
	ssize_t got;
	size_t k;
	int fd;

	if ((got = recvmsg(c->fd, &m, MSG_CMSG_CLOEXEC)) < 0)
		return got;
	for (h = CMSG_FIRSTHDR(&m); h != NULL; h = CMSG_NXTHDR(&m, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		for (k = 0; k < (h->cmsg_len - CMSG_LEN(0)) / sizeof fd; k++) {
			memcpy(&fd, CMSG_DATA(h) + k * sizeof fd, sizeof fd);
			if (c->passed >= 0)
				close(c->passed);
			c->passed = fd;
		}
	}
	return got;
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
	free(c->obuf);
	c->obuf = NULL;
	return 0;
}

/* The answer line to a request: ok with value (taken; may be NULL), or e's
 * error; NULL when out of memory. */
static char *
answer_line(const struct sp_err *e, json_t *value)
{
	json_t *o;
	char *s, *line = NULL;
	size_t len;

	o = e == NULL ? json_pack("{s:b}", "ok", 1) : json_pack("{s:b, s:s, "
	    "s:s, s:b}", "ok", 0, "error", sp_code_name(e->code), "msg", e->msg,
	    "temp", e->temp);
	if (o != NULL && value != NULL)
		json_object_set(o, "value", value);
	json_decref(value);
	s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (s != NULL && (line = malloc((len = strlen(s)) + 2)) != NULL) {
		memcpy(line, s, len);
		memcpy(line + len, "\n", 2);
	}
	free(s);
	return line;
}

/* Puts an answer line out (taken); what the socket does not take now waits
 * for poll, and the client's next request with it. */
static int
answer(struct client *c, char *line)
{
	if (line == NULL)
		return -1;
	c->obuf = line;
	c->out = strlen(line);
	c->sent = 0;
	return flush(c);
}

/* The domain a request's XML names, for the log: as sent, when it is a
 * plain name (the XML itself is checked before it is used, not here). */
static void
xml_name(const char *xml, char *out, size_t n)
{
	const char *p, *q;

	out[0] = '\0';
	if (xml == NULL || (p = strstr(xml, "<name>")) == NULL ||
	    (q = strstr(p += 6, "</name>")) == NULL || (size_t)(q - p) >= n ||
	    strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789-") != (size_t)(q - p))
		return;
	snprintf(out, n, "%.*s", (int)(q - p), p);
}

static void
log_line(const struct client *c, const struct sp_noded_req *r,
    const struct sp_err *e)
{
	char dom[SP_NAME_MAX + 1];
	json_t *o;

	if (r != NULL)
		xml_name(r->xml, dom, sizeof dom);
	o = json_pack("{s:I, s:s, s:s, s:b}", "uid", (json_int_t)c->uid, "op",
	    r == NULL ? "" : sp_noded_op_name(r->op), "path", r == NULL ? "" :
	    r->name[0] ? r->name : dom[0] ? dom : r->dir[0] ? r->dir : r->path,
	    "ok", e == NULL);
	if (o == NULL)
		return;
	if (e != NULL)
		json_object_set_new(o, "error", json_string(sp_code_name(e->code)));
	pthread_mutex_lock(&lock);
	sp_out_json(o);
	pthread_mutex_unlock(&lock);
}

static void *
work(void *arg)
{
	struct job *j = arg;
	struct sp_err e;
	json_t *value = NULL;
	char *line;
	int rc;

	rc = j->r.op >= SP_NODED_VM_DEFINE ? sp_noded_vm_do(&vm, &j->r, &value,
	    &e) : sp_noded_do(vm.root_fd, vm.conf->root, &j->r, &value,
	    &e);
	log_line(j->c, &j->r, rc == 0 ? NULL : &e);
	line = answer_line(rc == 0 ? NULL : &e, value);
	pthread_mutex_lock(&lock);
	j->c->obuf = line;
	j->c->done = 1;
	pthread_mutex_unlock(&lock);
	(void)!write(wake[1], "", 1);
	sp_noded_req_free(&j->r);
	free(j);
	return NULL;
}

/* The next whole line in c's buffer: a bad one answered here, a good one
 * handed to a worker.  -1 when c must go. */
static int
serve(struct client *c)
{
	struct sp_err e;
	pthread_attr_t attr;
	pthread_t t;
	struct job *j;
	char *nl;
	size_t len;
	int rc;

	while (!c->busy && c->out == 0 &&
	    (nl = memchr(c->buf, '\n', c->n)) != NULL) {
		len = (size_t)(nl - c->buf);
		if ((j = calloc(1, sizeof *j)) == NULL)
			return -1;
		j->c = c;
		/* A descriptor passed goes with the next line, whatever
		 * it asks: a stream op needs one, no other op takes one. */
		rc = sp_noded_parse(c->buf, len, &j->r, &e);
		if (rc == 0 && c->passed >= 0 && sp_noded_op_fd(j->r.op) == -1)
			rc = sp_err_set(&e, SP_E_BAD_INPUT, 0, "%s takes no "
			    "descriptor", sp_noded_op_name(j->r.op));
		if (rc == 0) {
			j->r.peer_uid = c->uid;
			j->r.peer_gid = c->gid;
			j->r.peer_pid = c->pid;
			j->r.fd = c->passed;
			c->passed = -1;
		} else if (c->passed >= 0) {
			close(c->passed);
			c->passed = -1;
		}
		if (rc == -1) {
			sp_noded_req_free(&j->r);
			free(j);
			log_line(c, NULL, &e);
			if (answer(c, answer_line(&e, NULL)) == -1)
				return -1;
		} else {
			pthread_attr_init(&attr);
			pthread_attr_setdetachstate(&attr,
			    PTHREAD_CREATE_DETACHED);
			c->busy = 1;
			if (pthread_create(&t, &attr, work, j) != 0) {
				c->busy = 0;
				sp_noded_req_free(&j->r);
				free(j);
				pthread_attr_destroy(&attr);
				return -1;
			}
			pthread_attr_destroy(&attr);
		}
		c->n -= len + 1;
		memmove(c->buf, nl + 1, c->n);
	}
	if (!c->busy && c->out == 0 && c->n > SP_NODED_LINE_MAX) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "a request is at most %d bytes",
		    SP_NODED_LINE_MAX);
		log_line(c, NULL, &e);
		answer(c, answer_line(&e, NULL));
		return -1;		/* no line to go on from */
	}
	return 0;
}

/* The answers workers finished: each goes out, then what its client sent
 * after. */
static void
collect(void)
{
	char buf[64];
	int i, done;

	while (read(wake[0], buf, sizeof buf) > 0)
		;
	for (i = 0; i < MAX_CLIENTS; i++) {
		if (clients[i] == NULL || !clients[i]->busy)
			continue;
		pthread_mutex_lock(&lock);
		done = clients[i]->done;
		clients[i]->done = 0;
		pthread_mutex_unlock(&lock);
		if (!done)
			continue;
		clients[i]->busy = 0;
		clients[i]->last = sp_clock_ms();
		if (clients[i]->obuf == NULL ||
		    answer(clients[i], clients[i]->obuf) == -1 ||
		    serve(clients[i]) == -1)
			drop(i);
	}
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
	clients[i]->passed = -1;
	clients[i]->uid = cred.uid;
	clients[i]->gid = cred.gid;
	clients[i]->pid = cred.pid;
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
	struct pollfd pfd[MAX_CLIENTS + 2];
	int idx[MAX_CLIENTS + 2];
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
	vm.root_fd = root_fd;
	vm.conf = &conf;
	/* Its clients may be told to go through it ("noded"): it goes to
	 * libvirt. */
	vm.uri = sp_virt_uri_noded(conf.libvirt_uri) ? "qemu:///system" :
	    conf.libvirt_uri;
	pthread_mutex_init(&vm.lock, NULL);
	if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) == -1) {
		sp_err_sys(&e, SP_E_IO, "pipe");
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
		pfd[1] = (struct pollfd){ .fd = wake[0], .events = POLLIN };
		/* A client whose request is on a worker is not polled; one
		 * with an answer pending is not read: it must read first (a
		 * flood backs up in its own socket). */
		for (n = 2, i = 0; i < MAX_CLIENTS; i++)
			if (clients[i] != NULL && !clients[i]->busy) {
				pfd[n] = (struct pollfd){ .fd = clients[i]->fd,
				    .events = clients[i]->out > 0 ? POLLOUT :
				    POLLIN };
				idx[n++] = i;
			}
		if (poll(pfd, (nfds_t)n, 1000) == -1 && errno != EINTR)
			break;
		now = sp_clock_ms();
		for (k = 2; k < n; k++) {
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
				    flush(c) == -1 || serve(c) == -1)
					drop(idx[k]);
				continue;
			}
			got = read_in(c);
			if (got <= 0) {
				/* Gone, perhaps mid-request: what it sent
				 * without its newline is dropped. */
				if (got == 0 || (errno != EAGAIN && errno != EINTR))
					drop(idx[k]);
				continue;
			}
			c->n += (size_t)got;
			c->last = now;
			if (serve(c) == -1)
				drop(idx[k]);
		}
		if (pfd[1].revents & POLLIN)
			collect();
		if (pfd[0].revents & POLLIN)
			accept_one(lfd);
	}
	/* Workers still in a call are cut short by the exit. */
	for (i = 0; i < MAX_CLIENTS; i++)
		if (clients[i] != NULL && !clients[i]->busy)
			drop(i);
	close(lfd);
	unlink(path);
	close(root_fd);
	return 0;
}
