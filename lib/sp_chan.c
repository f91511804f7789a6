/*
 * sp_chan: the host end of a sandbox's channel.  A client takes a free
 * virtio-serial port with flock on its lock file, connects to the unix
 * socket QEMU listens on for that port, says hello and runs calls.  All the
 * guest sends is hostile: every wait is a poll (with a deadline where the
 * call has one), every byte goes through the bounded frame decoder, and the
 * first protocol error closes the connection.
 */
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sp_vm.h"

#define LOCK_RETRY_MS		5
#define CONNECT_RETRY_MS	20
#define STALE_MAX		16	/* earlier clients' frames skipped */
#define HELLO_RETRY_MS		500	/* first wait, doubled up to 4 s */
#define RECONNECT_MS		50
#define NONCE_BYTES		16
#define FLUSH_MS		5000
#define HELLO_MAX		128	/* the host's hello, nonce and all */
/* A request and the hello it may be sent with; or a control message beside
 * a call's data. */
#define OBUF_SIZE		(2 * SP_FRAME_HDR + SP_JSON_MAX + HELLO_MAX)
#define KILL_GRACE_MS		5000	/* for the EXIT after a timeout */
#define CTL_MAX			128	/* a control message */

struct sp_chan {
	int fd;			/* the socket, -1 once closed by an error */
	int lockfd;
	int port;
	uint32_t stream;	/* the last stream used */
	uint32_t ahead;		/* an exec sent ahead of its call, or 0 */
	int ahead_in_done;	/* its stdin was all sent with it */
	json_t *hello;
	struct sp_frame_dec dec;
	unsigned char *obuf;	/* frames queued for the socket */
	size_t olen, ooff;
	unsigned char rbuf[SP_FRAME_CHUNK];
};

/* A request sent in the same write as the hello (sp_chan_open_req), and
 * with first, an exec after it (sp_chan_open_req_first). */
struct early_req {
	const char *text;
	size_t len;
	uint32_t stream;
	const struct sp_exec *first;
	uint32_t first_stream;
	int first_in_done;	/* its stdin was all sent with it */
	int first_sent;		/* some of it went out */
};

static int exec_queue(struct sp_chan *, const struct sp_exec *, int,
    uint32_t *, int *, struct sp_err *);

/* One call in progress. */
struct call {
	uint32_t stream;
	int out_fd, err_fd;
	int done;		/* 1 on EXIT, 2 on the guest's ERROR */
	int status;
	int signaled;		/* the EXIT said a signal */
	const struct sp_exec *x;	/* for its started callback */
};

/* The poll timeout left until deadline; -1 (forever) when there is none. */
static int
left_ms(int64_t deadline)
{
	int64_t d;

	if (deadline < 0)
		return -1;
	d = deadline - sp_clock_ms();
	if (d < 0)
		return 0;
	return d > INT_MAX ? INT_MAX : (int)d;
}

static void
nap_ms(int64_t deadline, int ms)
{
	struct timespec ts;
	int left = left_ms(deadline);

	if (left >= 0 && left < ms)
		ms = left;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static int
port_path(char *buf, size_t n, const char *run, const char *id, int port,
    const char *ext, struct sp_err *e)
{
	int r;

	r = snprintf(buf, n, "%s/%s/space.%d.%s", run, id, port, ext);
	if (r < 0 || (size_t)r >= n)
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "run directory path too long: \"%s\"", run);
	return 0;
}

/*
 * Tries the lock file of each port from..to: 1 with *lockfd and *port
 * when one was free, 0 when all are busy.  Opened read-only, all flock
 * needs, and made readable (the run directory's ACL lets the group space
 * read it then): a lock file one command made, a command run as root or
 * as space takes alike.  A jailed VM's run directory is its QEMU's, where
 * space may not make a file: sp_jail_dirs_at makes them there first.  A
 * QEMU that swaps one for something else than a regular file is refused,
 * never waited on (O_NONBLOCK: a FIFO).
 */
static int
lock_port(const char *run, const char *id, int from, int to, int *lockfd,
    int *port, struct sp_err *e)
{
	char path[SP_PATH_MAX];
	struct stat st;
	int i, fd, saved;

	for (i = from; i <= to; i++) {
		if (port_path(path, sizeof path, run, id, i, "lock", e) == -1)
			return -1;
		fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW |
		    O_NONBLOCK, 0644);
		if (fd == -1 && errno == ENOENT)
			return sp_err_set(e, SP_E_NOT_RUNNING, 0,
			    "no channel directory \"%s/%s\"", run, id);
		if (fd == -1)
			return sp_err_sys(e, SP_E_IO, "open \"%s\"", path);
		if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
			close(fd);
			return sp_err_set(e, SP_E_BAD_STATE, 0, "\"%s\" is not "
			    "a lock file", path);
		}
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			*lockfd = fd;
			*port = i;
			return 1;
		}
		saved = errno;
		close(fd);
		if (saved != EWOULDBLOCK) {
			errno = saved;
			return sp_err_sys(e, SP_E_IO, "flock \"%s\"", path);
		}
	}
	return 0;
}

int
sp_qemu_connect(const char *path, int64_t deadline, int *fdp, struct sp_err *e)
{
	struct sockaddr_un sa;
	int fd, saved;

	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sa.sun_path)
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "socket path too long: \"%s\"", path);
	strcpy(sa.sun_path, path);
	for (;;) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    0);
		if (fd == -1)
			return sp_err_sys(e, SP_E_IO, "socket");
		if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
			*fdp = fd;
			return 0;
		}
		saved = errno;
		close(fd);
		errno = saved;
		/* A full listen backlog: QEMU takes one client at a time. */
		if (saved == EAGAIN && left_ms(deadline) != 0) {
			nap_ms(deadline, LOCK_RETRY_MS);
			continue;
		}
		if (saved == ENOENT || saved == ECONNREFUSED)
			return sp_err_sys(e, SP_E_NOT_RUNNING, "connect \"%s\"",
			    path);
		return sp_err_sys(e, SP_E_IO, "connect \"%s\"", path);
	}
}

/* Queues a frame; callers make sure it fits. */
static void
out_add(struct sp_chan *c, uint8_t type, uint32_t stream, const void *p,
    size_t n)
{
	if (c->ooff > 0) {
		memmove(c->obuf, c->obuf + c->ooff, c->olen - c->ooff);
		c->olen -= c->ooff;
		c->ooff = 0;
	}
	sp_frame_hdr(c->obuf + c->olen, type, stream, n);
	if (n > 0)
		memcpy(c->obuf + c->olen + SP_FRAME_HDR, p, n);
	c->olen += SP_FRAME_HDR + n;
}

/* Sends what is queued as far as the socket takes it without blocking. */
static int
out_push(struct sp_chan *c, struct sp_err *e)
{
	ssize_t w;

	while (c->ooff < c->olen) {
		w = send(c->fd, c->obuf + c->ooff, c->olen - c->ooff,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w == -1 && errno == EINTR)
			continue;
		if (w == -1 && errno == EAGAIN)
			return 0;
		if (w == -1)
			return sp_err_sys(e, SP_E_PROTOCOL, "channel write");
		c->ooff += w;
	}
	c->ooff = c->olen = 0;
	return 0;
}

static int
out_drain(struct sp_chan *c, int64_t deadline, struct sp_err *e)
{
	struct pollfd pfd;
	int r;

	for (;;) {
		if (out_push(c, e) == -1)
			return -1;
		if (c->olen == 0)
			return 0;
		pfd.fd = c->fd;
		pfd.events = POLLOUT;
		r = poll(&pfd, 1, left_ms(deadline));
		if (r == -1 && errno != EINTR)
			return sp_err_sys(e, SP_E_IO, "poll");
		if (r == 0)
			return sp_err_set(e, SP_E_TIMED_OUT, 1,
			    "the guest does not read its channel");
	}
}

/* Reads what the socket has into the decoder; EOF is an error because
 * every exchange ends with a frame the host waits for. */
static int
chan_read(struct sp_chan *c, struct sp_err *e)
{
	ssize_t n;

	n = recv(c->fd, c->rbuf, sizeof c->rbuf, MSG_DONTWAIT);
	if (n == -1 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n == -1)
		return sp_err_sys(e, SP_E_PROTOCOL, "channel read");
	if (n == 0)
		return sp_err_set(e, SP_E_PROTOCOL, 0,
		    "the guest closed the channel%s",
		    c->dec.len > c->dec.off ? " in the middle of a frame" : "");
	return sp_frame_dec_feed(&c->dec, c->rbuf, n, e);
}

/* The next frame, waiting until deadline. */
static int
chan_next(struct sp_chan *c, int64_t deadline, struct sp_frame *f,
    struct sp_err *e)
{
	struct pollfd pfd;
	int r;

	for (;;) {
		if ((r = sp_frame_dec_next(&c->dec, f, e)) != 0)
			return r;
		pfd.fd = c->fd;
		pfd.events = POLLIN;
		r = poll(&pfd, 1, left_ms(deadline));
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			return sp_err_sys(e, SP_E_IO, "poll");
		if (r == 0)
			return sp_err_set(e, SP_E_TIMED_OUT, 1, "no answer");
		if (chan_read(c, e) == -1)
			return -1;
	}
}

/* One hello on the connection: 1 with *rep when the answer carrying a
 * fresh nonce came before until, 0 when none did. */
static int
hello_once(struct sp_chan *c, int64_t until, struct early_req *early,
    json_t **rep, struct sp_err *e)
{
	unsigned char raw[NONCE_BYTES];
	char nonce[2 * NONCE_BYTES + 1];
	json_t *req = NULL, *v;
	char *s = NULL;
	struct sp_frame f;
	int i, in_fd, stale = 0, rc = -1;

	*rep = NULL;
	if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
		sp_err_sys(e, SP_E_IO, "getrandom");
		goto out;
	}
	for (i = 0; i < NONCE_BYTES; i++)
		snprintf(nonce + 2 * i, 3, "%02x", raw[i]);
	req = json_pack("{s:s,s:s}", "op", "hello", "nonce", nonce);
	if (req == NULL || (s = json_dumps(req, JSON_COMPACT)) == NULL) {
		sp_err_set(e, SP_E_NOMEM, 1, "cannot encode hello");
		goto out;
	}
	if (strlen(s) > HELLO_MAX) {
		sp_err_set(e, SP_E_INTERNAL, 0, "hello over %d bytes", HELLO_MAX);
		goto out;
	}
	out_add(c, SP_FR_HELLO, 0, s, strlen(s));
	if (early != NULL)
		out_add(c, SP_FR_REQ, early->stream, early->text, early->len);
	if (early != NULL && early->first != NULL) {
		if (exec_queue(c, early->first, 1, &early->first_stream, &in_fd,
		    e) == -1)
			goto out;
		early->first_in_done = in_fd < 0;
		early->first_sent = 1;
	}
	if (out_drain(c, until, e) == -1) {
		rc = e->code == SP_E_TIMED_OUT ? 0 : -1;
		goto out;
	}
	/* Frames an earlier client left unread may come first: skip a few,
	 * knowing our answer by its nonce. */
	for (;;) {
		if (chan_next(c, until, &f, e) == -1) {
			rc = e->code == SP_E_TIMED_OUT ? 0 : -1;
			goto out;
		}
		if (f.type == SP_FR_HELLO) {
			if (sp_frame_json(&f, rep, e) == -1)
				goto out;
			v = json_object_get(*rep, "nonce");
			if (json_is_string(v) &&
			    strcmp(json_string_value(v), nonce) == 0)
				break;
			json_decref(*rep);
			*rep = NULL;
		}
		if (++stale > STALE_MAX) {
			sp_err_set(e, SP_E_PROTOCOL, 0, "no hello answer among "
			    "the first %d frames from the guest", STALE_MAX);
			goto out;
		}
	}
	rc = 1;
out:
	json_decref(req);
	free(s);
	return rc;
}

/* Connects to the port and exchanges hello.  When no answer comes for a
 * while, the guest may have missed our hello (its virtio port hears of
 * hosts and of their bytes on separate queues) or be stuck in a frame an
 * earlier client cut short: going away for a moment, which the guest sees,
 * and coming back clears both. */
static int
chan_hello(struct sp_chan *c, const char *path, int64_t deadline,
    struct early_req *early, struct sp_err *e)
{
	json_t *rep = NULL, *v;
	int64_t until;
	int wait = HELLO_RETRY_MS, r, rc = -1;

	for (;;) {
		if (sp_qemu_connect(path, deadline, &c->fd, e) == -1)
			goto out;
		until = sp_clock_ms() + wait;
		/* A command sent with the hello is not sent again: the
		 * guest may have it.  One connection, waited on to the end. */
		if (early != NULL && early->first != NULL)
			until = deadline;
		if (deadline >= 0 && deadline < until)
			until = deadline;
		if ((r = hello_once(c, until, early, &rep, e)) == -1)
			goto out;
		if (r == 1)
			break;
		if (early != NULL && early->first_sent) {
			sp_err_set(e, SP_E_TIMED_OUT, 1, "the guest daemon did not "
			    "answer the hello its first command came with");
			goto out;
		}
		if (deadline >= 0 && left_ms(deadline) == 0) {
			sp_err_set(e, SP_E_TIMED_OUT, 1, "the guest daemon did not "
			    "answer hello on port %d in time", c->port);
			goto out;
		}
		close(c->fd);
		c->fd = -1;
		c->ooff = c->olen = 0;
		sp_frame_dec_release(&c->dec);
		sp_frame_dec_init(&c->dec);
		nap_ms(deadline, RECONNECT_MS);
		if (wait < 8 * HELLO_RETRY_MS)
			wait *= 2;
	}
	v = json_object_get(rep, "version");
	if (!json_is_integer(v) || json_integer_value(v) != SP_PROTO_VERSION) {
		sp_err_set(e, SP_E_PROTOCOL, 0, "the guest daemon does not speak "
		    "protocol version %d", SP_PROTO_VERSION);
		goto out;
	}
	if (!json_is_string(json_object_get(rep, "boot_id"))) {
		sp_err_set(e, SP_E_PROTOCOL, 0, "the guest's hello has no boot_id");
		goto out;
	}
	c->hello = rep;
	rep = NULL;
	rc = 0;
out:
	json_decref(rep);
	return rc;
}

/* Opens a channel on port, or on any free port when port < 0; early (when
 * not NULL) goes with the hello, on a fresh stream. */
static int
chan_open(struct sp_chan **cp, const char *run, const char *id, int port,
    int64_t deadline, struct early_req *early, struct sp_err *e)
{
	struct sp_chan *c = NULL;
	char path[SP_PATH_MAX];
	int r, rc = -1;

	*cp = NULL;
	if (sp_id_check(id, e) == -1)
		goto out;
	if ((c = calloc(1, sizeof *c)) == NULL ||
	    (c->obuf = malloc(OBUF_SIZE)) == NULL) {
		sp_err_sys(e, SP_E_NOMEM, "channel");
		goto out;
	}
	c->fd = c->lockfd = -1;
	sp_frame_dec_init(&c->dec);
	for (;;) {
		r = lock_port(run, id, port < 0 ? 0 : port,
		    port < 0 ? SP_PORTS_DEFAULT - 1 : port, &c->lockfd,
		    &c->port, e);
		if (r == -1)
			goto out;
		if (r == 1)
			break;
		if (left_ms(deadline) == 0) {
			sp_err_set(e, SP_E_BUSY, 1, "every channel port of "
			    "sandbox %s is busy", id);
			goto out;
		}
		nap_ms(deadline, LOCK_RETRY_MS);
	}
	if (early != NULL)
		early->stream = sp_chan_stream_new(c);
	if (port_path(path, sizeof path, run, id, c->port, "sock", e) == -1 ||
	    chan_hello(c, path, deadline, early, e) == -1)
		goto out;
	if (early != NULL && early->first != NULL) {
		c->ahead = early->first_stream;
		c->ahead_in_done = early->first_in_done;
	}
	*cp = c;
	c = NULL;
	rc = 0;
out:
	sp_chan_close(c);
	return rc;
}

int
sp_chan_open(struct sp_chan **cp, const char *run, const char *id,
    int timeout_ms, struct sp_err *e)
{
	int64_t deadline = timeout_ms < 0 ? -1 : sp_clock_ms() + timeout_ms;

	return chan_open(cp, run, id, -1, deadline, NULL, e);
}

int
sp_chan_open_req_first(struct sp_chan **cp, const char *run, const char *id,
    int timeout_ms, const json_t *req, uint32_t *stream,
    const struct sp_exec *first, int *sent, struct sp_err *e)
{
	int64_t deadline = timeout_ms < 0 ? -1 : sp_clock_ms() + timeout_ms;
	char buf[SP_JSON_MAX + 1];
	struct early_req early = { .first = first };
	int rc;

	*cp = NULL;
	if (sent != NULL)
		*sent = 0;
	early.len = json_dumpb(req, buf, sizeof buf, JSON_COMPACT);
	if (early.len == 0 || early.len > SP_JSON_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "request over %d bytes",
		    SP_JSON_MAX);
	early.text = buf;
	rc = chan_open(cp, run, id, -1, deadline, &early, e);
	*stream = early.stream;
	if (sent != NULL)
		*sent = early.first_sent;
	return rc;
}

int
sp_chan_open_req(struct sp_chan **cp, const char *run, const char *id,
    int timeout_ms, const json_t *req, uint32_t *stream, struct sp_err *e)
{
	return sp_chan_open_req_first(cp, run, id, timeout_ms, req, stream,
	    NULL, NULL, e);
}

void
sp_chan_close(struct sp_chan *c)
{
	if (c == NULL)
		return;
	/* The socket goes first, so that the next holder of the lock finds
	 * QEMU free to take its connection. */
	if (c->fd >= 0)
		close(c->fd);
	if (c->lockfd >= 0)
		close(c->lockfd);
	json_decref(c->hello);
	sp_frame_dec_release(&c->dec);
	free(c->obuf);
	free(c);
}

json_t *
sp_chan_hello(struct sp_chan *c)
{
	return c->hello;
}

int
sp_chan_wait_ready(const char *run, const char *id, int timeout_ms,
    struct sp_err *e)
{
	struct sp_chan *c;
	char why[sizeof e->msg];
	int64_t deadline = sp_clock_ms() + (timeout_ms < 0 ? 0 : timeout_ms);

	/* While the VM boots its socket may not exist or not listen yet;
	 * once it does, QEMU holds our hello until the daemon reads it. */
	for (;;) {
		if (chan_open(&c, run, id, 0, deadline, NULL, e) == 0) {
			sp_chan_close(c);
			return 0;
		}
		if (e->code == SP_E_TIMED_OUT ||
		    e->code == SP_E_BUSY ||
		    (e->code == SP_E_NOT_RUNNING &&
		    left_ms(deadline) == 0)) {
			snprintf(why, sizeof why, "%s", e->msg);
			return sp_err_set(e, SP_E_TIMED_OUT, 1, "sandbox %s: no "
			    "answer within %d ms: %s", id, timeout_ms, why);
		}
		if (e->code != SP_E_NOT_RUNNING)
			return -1;
		nap_ms(deadline, CONNECT_RETRY_MS);
	}
}

/* Writes all of p to fd.  SIGPIPE is held off meanwhile so that a reader
 * gone away is an EPIPE error here and not the death of the caller. */
static int
write_full(int fd, const unsigned char *p, size_t n)
{
	sigset_t pipeset, old, pend;
	struct timespec zero = { 0, 0 };
	struct pollfd pfd;
	ssize_t w;
	int was_pending, saved = 0;

	sigemptyset(&pipeset);
	sigaddset(&pipeset, SIGPIPE);
	sigpending(&pend);
	was_pending = sigismember(&pend, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipeset, &old);
	while (n > 0) {
		w = write(fd, p, n);
		if (w == -1 && errno == EINTR)
			continue;
		if (w == -1 && errno == EAGAIN) {
			pfd.fd = fd;
			pfd.events = POLLOUT;
			poll(&pfd, 1, -1);
			continue;
		}
		if (w == -1) {
			saved = errno;
			break;
		}
		p += w;
		n -= w;
	}
	if (saved == EPIPE && !was_pending)
		sigtimedwait(&pipeset, NULL, &zero);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return saved == 0 ? 0 : -1;
}

/* Copies the guest's message without control characters (C0, DEL, C1),
 * never cutting a UTF-8 sequence. */
static void
clean_msg(char *dst, size_t n, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, k, j;

	while (*u != '\0') {
		k = *u < 0x80 ? 1 : *u < 0xe0 ? 2 : *u < 0xf0 ? 3 : 4;
		for (j = 1; j < k; j++)
			if (u[j] == '\0')
				goto out;
		if ((k == 1 && (*u < 0x20 || *u == 0x7f)) ||
		    (k == 2 && u[0] == 0xc2 && u[1] < 0xa0)) {
			u += k;
			continue;
		}
		if (i + k >= n)
			break;
		memcpy(dst + i, u, k);
		i += k;
		u += k;
	}
out:
	dst[i] = '\0';
}

/* Fills e with the guest's error; -1 when the message itself is bad. */
static int
guest_error(const struct sp_frame *f, struct sp_err *e)
{
	json_t *j, *v;
	enum sp_code code = SP_E_GUEST;
	const char *msg = "(no message)";
	char buf[400];

	if (sp_frame_json(f, &j, e) == -1)
		return -1;
	/* A token the host does not know stays "guest". */
	v = json_object_get(j, "error");
	if (json_is_string(v) &&
	    sp_code_of(json_string_value(v), &code) == -1)
		code = SP_E_GUEST;
	v = json_object_get(j, "msg");
	if (json_is_string(v))
		msg = json_string_value(v);
	clean_msg(buf, sizeof buf, msg);
	sp_err_set(e, code, code == SP_E_BUSY, "guest: %s", buf);
	json_decref(j);
	return 0;
}

static int
parse_exit(const struct sp_frame *f, int *status, int *signaled,
    struct sp_err *e)
{
	json_t *j, *st, *sg;
	json_int_t v;
	int rc = -1;

	if (sp_frame_json(f, &j, e) == -1)
		return -1;
	st = json_object_get(j, "status");
	sg = json_object_get(j, "signal");
	if (json_is_integer(st) && sg == NULL &&
	    (v = json_integer_value(st)) >= 0 && v <= 255) {
		*status = (int)v;
		rc = 0;
	} else if (json_is_integer(sg) && st == NULL &&
	    (v = json_integer_value(sg)) >= 1 && v <= 64) {
		*status = 128 + (int)v;
		*signaled = 1;
		rc = 0;
	} else
		sp_err_set(e, SP_E_PROTOCOL, 0, "bad exit message from the guest");
	json_decref(j);
	return rc;
}

/* One frame of a call: -1 ends the connection, 0 goes on (k->done tells
 * whether the call is over). */
static int
exec_frame(struct call *k, const struct sp_frame *f, struct sp_err *e)
{
	json_t *j, *v;
	int *fd;

	/* The guest could not parse what we sent and starts over: the
	 * connection is of no more use, but its reason is worth telling. */
	if (f->stream == 0 && f->type == SP_FR_ERROR &&
	    guest_error(f, e) == 0)
		return -1;
	if (f->stream != k->stream)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "the guest sent a frame "
		    "for stream %u during the call on stream %u", f->stream,
		    k->stream);
	switch (f->type) {
	case SP_FR_STDOUT:
	case SP_FR_STDERR:
		fd = f->type == SP_FR_STDOUT ? &k->out_fd : &k->err_fd;
		if (*fd < 0 || write_full(*fd, f->data, f->len) == 0)
			return 0;
		/* Nobody reads any more: the command still runs to its end. */
		if (errno == EPIPE) {
			*fd = -1;
			return 0;
		}
		return sp_err_sys(e, SP_E_IO, "writing the command's output");
	case SP_FR_EXIT:
		if (parse_exit(f, &k->status, &k->signaled, e) == -1)
			return -1;
		k->done = 1;
		return 0;
	case SP_FR_STARTED:
		if (k->x->started == NULL || sp_frame_json(f, &j, e) == -1)
			break;
		v = json_object_get(j, "pid");
		if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
		    json_integer_value(v) > INT_MAX) {
			json_decref(j);
			return sp_err_set(e, SP_E_PROTOCOL, 0, "bad pid from the "
			    "guest");
		}
		k->x->started(k->x->started_arg,
		    (pid_t)json_integer_value(v));
		json_decref(j);
		return 0;
	case SP_FR_ERROR:
		if (guest_error(f, e) == -1)
			return -1;
		k->done = 2;
		return 0;
	default:
		break;
	}
	return sp_err_set(e, SP_E_PROTOCOL, 0, "the guest sent a frame of type "
	    "%u during a call", f->type);
}

static int
add_strings(json_t *req, const char *key, char *const *v, struct sp_err *e)
{
	json_t *a;
	size_t i;

	if ((a = json_array()) == NULL || json_object_set_new(req, key, a))
		return sp_err_set(e, SP_E_NOMEM, 1, "cannot build a request");
	for (i = 0; v[i] != NULL; i++)
		if (json_array_append_new(a, json_string(v[i])) == -1)
			return sp_err_set(e, SP_E_BAD_INPUT, 0,
			    "%s[%zu] is not valid UTF-8", key, i);
	return 0;
}

/* The exec options past argv, env and cwd. */
static int
add_opts(json_t *req, const struct sp_exec *x, int detach, struct sp_err *e)
{
	char *end;
	long uid;
	int r = 0;

	if (x->user != NULL) {
		errno = 0;
		uid = strtol(x->user, &end, 10);
		if (x->user[0] != '\0' && *end == '\0' && errno == 0 &&
		    uid >= 0 && uid <= INT_MAX)
			r |= json_object_set_new(req, "user", json_integer(uid));
		else if (x->user[0] == '\0' ||
		    json_object_set_new(req, "user", json_string(x->user)) == -1)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "bad user name");
	}
	if (x->tty)
		r |= json_object_set_new(req, "tty", json_true());
	if (x->tty && x->rows > 0 && x->cols > 0) {
		r |= json_object_set_new(req, "rows", json_integer(x->rows));
		r |= json_object_set_new(req, "cols", json_integer(x->cols));
	}
	if (detach)
		r |= json_object_set_new(req, "detach", json_true());
	if (r != 0)
		return sp_err_set(e, SP_E_NOMEM, 1, "cannot build a request");
	return 0;
}

static int
build_req(const struct sp_exec *x, int detach, int after_identity, char **out,
    struct sp_err *e)
{
	json_t *req;
	size_t n;
	int rc = -1;

	*out = NULL;
	if (x->argv == NULL || x->argv[0] == NULL || x->argv[0][0] == '\0')
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "empty command");
	if ((req = json_pack("{s:s}", "op", "exec")) == NULL) {
		sp_err_set(e, SP_E_NOMEM, 1, "cannot build a request");
		goto out;
	}
	if (add_strings(req, "argv", x->argv, e) == -1 ||
	    (x->env != NULL && add_strings(req, "env", x->env, e) == -1))
		goto out;
	if (x->env != NULL && x->env_add &&
	    json_object_set_new(req, "env_add", json_true()) == -1) {
		sp_err_set(e, SP_E_NOMEM, 1, "cannot build a request");
		goto out;
	}
	if (x->cwd != NULL && json_object_set_new(req, "cwd",
	    json_string(x->cwd)) == -1) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "cwd is not valid UTF-8");
		goto out;
	}
	if (add_opts(req, x, detach, e) == -1)
		goto out;
	if ((after_identity && json_object_set_new(req, "after_identity",
	    json_true()) == -1) || (x->started != NULL && !detach &&
	    json_object_set_new(req, "announce", json_true()) == -1)) {
		sp_err_set(e, SP_E_NOMEM, 1, "cannot build a request");
		goto out;
	}
	if ((*out = json_dumps(req, JSON_COMPACT)) == NULL) {
		sp_err_set(e, SP_E_NOMEM, 1, "cannot build a request");
		goto out;
	}
	if ((n = strlen(*out)) > SP_JSON_MAX) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "the command takes %zu bytes, "
		    "over the %d byte limit of a request", n, SP_JSON_MAX);
		free(*out);
		*out = NULL;
		goto out;
	}
	rc = 0;
out:
	json_decref(req);
	return rc;
}

/* Queues a control message for the call from a record of the caller's. */
static void
ctl_add(struct sp_chan *c, uint32_t stream, const struct sp_exec_ctl *r)
{
	char m[CTL_MAX];
	int n;

	if (r->sig > 0 && r->sig <= 64)
		n = snprintf(m, sizeof m, "{\"op\":\"signal\",\"signal\":%d}",
		    r->sig);
	else if (r->sig == 0 && r->rows > 0 && r->rows <= 4096 &&
	    r->cols > 0 && r->cols <= 4096)
		n = snprintf(m, sizeof m, "{\"op\":\"resize\",\"rows\":%d,"
		    "\"cols\":%d}", r->rows, r->cols);
	else
		return;
	out_add(c, SP_FR_REQ, stream, m, n);
}

/*
 * Queues x's exec request on a new stream, with what stdin has at once (all
 * of /dev/null: its end) as far as the queue has room: the guest wakes once
 * for both.  *in_fd is x's stdin, or -1 once its end is queued.
 */
static int
exec_queue(struct sp_chan *c, const struct sp_exec *x, int after_identity,
    uint32_t *stream, int *in_fd, struct sp_err *e)
{
	struct pollfd pfd = { x->in_fd, POLLIN, 0 };
	ssize_t n = -1, room;
	char *req = NULL;

	*in_fd = x->in_fd;
	if (c->fd < 0)
		return sp_err_set(e, SP_E_PROTOCOL, 0,
		    "the channel was closed by an earlier error");
	if (build_req(x, 0, after_identity, &req, e) == -1)
		return -1;
	*stream = sp_chan_stream_new(c);
	out_add(c, SP_FR_REQ, *stream, req, strlen(req));
	free(req);
	room = (ssize_t)OBUF_SIZE - (ssize_t)(c->olen - c->ooff) -
	    2 * SP_FRAME_HDR;
	if (room > SP_FRAME_CHUNK)
		room = SP_FRAME_CHUNK;
	if (*in_fd >= 0 && room > 0 && poll(&pfd, 1, 0) == 1 &&
	    (n = read(*in_fd, c->rbuf, room)) > 0)
		out_add(c, SP_FR_STDIN, *stream, c->rbuf, n);
	else if (n == 0)
		*in_fd = -1;
	if (*in_fd < 0)
		out_add(c, SP_FR_STDIN, *stream, NULL, 0);
	return 0;
}

int
sp_chan_exec_ahead(struct sp_chan *c, const struct sp_exec *x,
    struct sp_err *e)
{
	json_t *v = json_object_get(c->hello, "after_identity");
	int in_fd;

	/* Not built (the plain exec after says why): nothing sent. */
	if (!json_is_true(v) || c->ahead != 0 ||
	    exec_queue(c, x, 1, &c->ahead, &in_fd, e) == -1)
		return 1;
	c->ahead_in_done = in_fd < 0;
	if (out_push(c, e) == -1) {
		c->ahead = 0;
		return -1;
	}
	return 0;
}

int
sp_chan_exec(struct sp_chan *c, const struct sp_exec *x, int *status,
    struct sp_err *e)
{
	static const struct sp_exec_ctl kill9 = { 9, 0, 0 };
	struct sp_exec_ctl rec;
	struct pollfd pfd[3];
	struct sp_frame f;
	struct call k;
	int64_t deadline = -1;
	ssize_t n;
	int in_fd, r = 0, rc = -1, killed = 0;

	if (c->fd < 0)
		return sp_err_set(e, SP_E_PROTOCOL, 0,
		    "the channel was closed by an earlier error");
	memset(&k, 0, sizeof k);
	k.x = x;
	if (x->started != NULL && !json_is_true(json_object_get(c->hello,
	    "announce")))
		return sp_err_set(e, SP_E_BAD_STATE, 0, "the sandbox's daemon "
		    "does not say a command's pid (a template made before "
		    "that: import it again)");
	if (c->ahead != 0) {
		k.stream = c->ahead;
		in_fd = c->ahead_in_done ? -1 : x->in_fd;
		c->ahead = 0;
	} else if (exec_queue(c, x, 0, &k.stream, &in_fd, e) == -1)
		return -1;
	k.out_fd = x->out_fd;
	k.err_fd = x->err_fd;
	if (x->timeout_ms > 0)
		deadline = sp_clock_ms() + x->timeout_ms;
	while (k.done == 0) {
		if (out_push(c, e) == -1)
			goto fail;
		while (k.done == 0 &&
		    (r = sp_frame_dec_next(&c->dec, &f, e)) == 1)
			if (exec_frame(&k, &f, e) == -1)
				goto fail;
		if (k.done != 0)
			break;
		if (r == -1)
			goto fail;
		/* Over time: SIGKILL once (when the queue has room), and a
		 * guest that does not end the call in the grace time after
		 * loses the connection, which kills the command too. */
		if (deadline >= 0 && left_ms(deadline) == 0) {
			if (killed || c->olen > 0) {
				if (killed) {
					sp_err_set(e, SP_E_TIMED_OUT, 0, "no exit "
					    "after the timeout's SIGKILL");
					goto fail;
				}
			} else {
				ctl_add(c, k.stream, &kill9);
				killed = 1;
				deadline = sp_clock_ms() + KILL_GRACE_MS;
				continue;
			}
		}
		/* Stdin and control records are read only when the queue is
		 * empty: the guest paces them, and host memory stays one
		 * frame. */
		pfd[0].fd = c->fd;
		pfd[0].events = POLLIN | (c->olen > 0 ? POLLOUT : 0);
		pfd[1].fd = c->olen == 0 ? in_fd : -1;
		pfd[1].events = POLLIN;
		pfd[2].fd = c->olen == 0 && x->ctl_fd > 0 ? x->ctl_fd : -1;
		pfd[2].events = POLLIN;
		if (poll(pfd, 3, deadline >= 0 && (c->olen == 0 || killed) ?
		    left_ms(deadline) : deadline >= 0 ? 50 : -1) == -1) {
			if (errno == EINTR)
				continue;
			sp_err_sys(e, SP_E_IO, "poll");
			goto fail;
		}
		if ((pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    chan_read(c, e) == -1)
			goto fail;
		if (pfd[2].revents != 0) {
			if (read(x->ctl_fd, &rec, sizeof rec) == sizeof rec)
				ctl_add(c, k.stream, &rec);
			continue;
		}
		if (pfd[1].revents != 0) {
			n = read(in_fd, c->rbuf, SP_FRAME_CHUNK);
			if (n == -1 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n > 0)
				out_add(c, SP_FR_STDIN, k.stream, c->rbuf, n);
			else {
				out_add(c, SP_FR_STDIN, k.stream, NULL, 0);
				in_fd = -1;
			}
		}
	}
	/* A frame half sent would garble the next call: finish it; frames
	 * not begun are dropped. */
	if (c->ooff > 0 && out_drain(c, sp_clock_ms() + FLUSH_MS, e) == -1)
		goto fail;
	c->ooff = c->olen = 0;
	if (k.done == 1 && killed) {
		sp_err_set(e, SP_E_TIMED_OUT, 0, "the command ran over its "
		    "timeout of %d ms and was killed", x->timeout_ms);
		goto out;
	}
	if (k.done == 1) {
		*status = k.status;
		if (x->signaled != NULL)
			*x->signaled = k.signaled;
		rc = 0;
	}
	goto out;
fail:
	close(c->fd);
	c->fd = -1;
out:
	return rc;
}

int
sp_chan_detach(struct sp_chan *c, const struct sp_exec *x, pid_t *pid,
    struct sp_err *e)
{
	struct sp_frame f;
	uint32_t stream;
	json_t *j = NULL, *v;
	char *req = NULL;
	int rc = -1;

	if (build_req(x, 1, 0, &req, e) == -1)
		return -1;
	stream = sp_chan_stream_new(c);
	if (sp_chan_send(c, SP_FR_REQ, stream, req, strlen(req), 10000,
	    e) == -1 || sp_chan_recv(c, &f, 10000, e) == -1)
		goto out;
	if (f.stream == stream && f.type == SP_FR_ERROR) {
		sp_chan_error_frame(&f, e);
		goto out;
	}
	if (f.stream != stream || f.type != SP_FR_EXIT ||
	    sp_frame_json(&f, &j, e) == -1 ||
	    !json_is_integer(v = json_object_get(j, "pid")) ||
	    json_integer_value(v) <= 0 || json_integer_value(v) > INT_MAX) {
		sp_err_set(e, SP_E_PROTOCOL, 0, "bad answer to a detached exec");
		goto out;
	}
	*pid = (pid_t)json_integer_value(v);
	rc = 0;
out:
	json_decref(j);
	free(req);
	return rc;
}

/*
 * The generic exchange other call types (files, processes) are built on: a
 * fresh stream, frames out (each sent whole before the next is queued), and
 * frames in, one at a time, each valid until the next sp_chan_recv.
 */
uint32_t
sp_chan_stream_new(struct sp_chan *c)
{
	if (++c->stream == 0)
		c->stream = 1;
	return c->stream;
}

int
sp_chan_send(struct sp_chan *c, uint8_t type, uint32_t stream, const void *p,
    size_t n, int timeout_ms, struct sp_err *e)
{
	int64_t deadline = timeout_ms < 0 ? -1 : sp_clock_ms() + timeout_ms;

	if (c->fd < 0)
		return sp_err_set(e, SP_E_PROTOCOL, 0,
		    "the channel was closed by an earlier error");
	if (n > SP_FRAME_CHUNK)
		return sp_err_set(e, SP_E_INTERNAL, 0, "frame of %zu bytes is over "
		    "the %d a send takes", n, SP_FRAME_CHUNK);
	if (out_drain(c, deadline, e) == -1)
		goto fail;
	out_add(c, type, stream, p, n);
	if (out_drain(c, deadline, e) == -1)
		goto fail;
	return 0;
fail:
	close(c->fd);
	c->fd = -1;
	return -1;
}

int
sp_chan_send_json(struct sp_chan *c, uint8_t type, uint32_t stream,
    const json_t *j, int timeout_ms, struct sp_err *e)
{
	char buf[SP_JSON_MAX + 1];
	size_t n;

	n = json_dumpb(j, buf, sizeof buf, JSON_COMPACT);
	if (n == 0 || n > SP_JSON_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "request over %d bytes",
		    SP_JSON_MAX);
	return sp_chan_send(c, type, stream, buf, n, timeout_ms, e);
}

int
sp_chan_recv(struct sp_chan *c, struct sp_frame *f, int timeout_ms,
    struct sp_err *e)
{
	int64_t deadline = timeout_ms < 0 ? -1 : sp_clock_ms() + timeout_ms;

	if (c->fd < 0)
		return sp_err_set(e, SP_E_PROTOCOL, 0,
		    "the channel was closed by an earlier error");
	if (chan_next(c, deadline, f, e) != 1) {
		/* A guest that broke the protocol or went silent is not
		 * talked to again on this connection. */
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	return 0;
}

int
sp_chan_error_frame(const struct sp_frame *f, struct sp_err *e)
{
	guest_error(f, e);
	return -1;
}

int
sp_chan_call(struct sp_chan *c, json_t *req, int timeout_ms, json_t **answer,
    struct sp_err *e)
{
	struct sp_frame f;
	uint32_t stream;
	int rc;

	if (answer != NULL)
		*answer = NULL;
	if (req == NULL)
		return sp_err_set(e, SP_E_NOMEM, 0, "cannot build a request");
	stream = sp_chan_stream_new(c);
	rc = sp_chan_send_json(c, SP_FR_REQ, stream, req, timeout_ms, e);
	json_decref(req);
	if (rc == -1 || sp_chan_recv(c, &f, timeout_ms, e) == -1)
		return -1;
	if (f.type == SP_FR_ERROR && (f.stream == stream || f.stream == 0))
		return sp_chan_error_frame(&f, e);
	if (f.type != SP_FR_EXIT || f.stream != stream)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "the guest answered a "
		    "call with a frame of type %u on stream %u", f.type,
		    f.stream);
	return answer == NULL ? 0 : sp_frame_json(&f, answer, e);
}

/* For command-line callers of sp_chan_exec (space-exec, space-create). */
static int exec_ctl[2] = { -1, -1 };

/* A signal for us is one for the command; a new window size, its pty's. */
static void
exec_on_signal(int sig)
{
	struct sp_exec_ctl r = { sig, 0, 0 };
	struct winsize ws;
	int saved = errno;

	if (sig == SIGWINCH) {
		if (ioctl(0, TIOCGWINSZ, &ws) == -1)
			goto out;
		r.sig = 0;
		r.rows = ws.ws_row;
		r.cols = ws.ws_col;
	}
	(void)!write(exec_ctl[1], &r, sizeof r);
out:
	errno = saved;
}

int
sp_exec_forward_signals(int tty, struct sp_err *e)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH };
	struct sigaction sa;
	size_t i;

	if (exec_ctl[0] == -1 && pipe2(exec_ctl, O_CLOEXEC | O_NONBLOCK) == -1)
		return sp_err_sys(e, SP_E_IO, "signal forwarding");
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = exec_on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		if ((sigs[i] != SIGWINCH || tty) &&
		    sigaction(sigs[i], &sa, NULL) == -1)
			return sp_err_sys(e, SP_E_IO, "signal forwarding");
	return exec_ctl[0];
}
