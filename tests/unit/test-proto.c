/*
 * test-proto: the frame decoder, and the host end of the channel against a
 * hostile fake guest; then, when the guest daemon is built
 * (build/guest/space-daemon, or $SPACE_DAEMON), the real daemon in its
 * listening test mode, end to end.  TAP output; exit 1 on any failure.
 */
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sp.h"

#define ID	"abcdefghij23"

static int ntest, nfail;
static char dir[64], sock0[100], sock1[100];

static void
ok(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", cond ? "" : "not ", ++ntest);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!cond)
		nfail++;
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A frame in memory: header + payload. */
static size_t
frame(unsigned char *out, uint8_t type, uint32_t stream, const void *p,
    size_t n)
{
	sp_frame_hdr(out, type, stream, n);
	memcpy(out + SP_FRAME_HDR, p, n);
	return SP_FRAME_HDR + n;
}

/* Feeds raw bytes to a fresh decoder; the result of the first next(). */
static int
dec_once(const void *p, size_t n, struct sp_frame *f, struct sp_err *e)
{
	struct sp_frame_dec d;
	int r;

	sp_frame_dec_init(&d);
	r = sp_frame_dec_feed(&d, p, n, e);
	if (r == 0)
		r = sp_frame_dec_next(&d, f, e);
	/* The frame's data outlives the decoder: point it into p. */
	if (r == 1)
		f->data = (unsigned char *)p + (f->data - d.buf);
	sp_frame_dec_release(&d);
	return r;
}

static int
json_of(const char *s, struct sp_err *e)
{
	struct sp_frame f;
	json_t *j;
	int r;

	f.type = SP_FR_REQ;
	f.stream = 1;
	f.len = strlen(s);
	f.data = (unsigned char *)s;
	r = sp_frame_json(&f, &j, e);
	json_decref(j);
	return r;
}

static void
test_decoder(void)
{
	static unsigned char big[SP_FRAME_HDR + SP_FRAME_MAX];
	unsigned char buf[512], *p;
	struct sp_frame_dec d;
	struct sp_frame f;
	struct sp_err e;
	size_t n = 0, i, step;
	int r, count, good;
	int sv[2], pp[2];

	/* Round trip of every type, through memory, byte by byte. */
	n += frame(buf + n, SP_FR_HELLO, 0, "{\"a\":1}", 7);
	n += frame(buf + n, SP_FR_STDIN, 7, "", 0);
	n += frame(buf + n, SP_FR_STDOUT, 0xfffffffe, "out", 3);
	n += frame(buf + n, SP_FR_ERROR, 9, "{}", 2);
	sp_frame_dec_init(&d);
	count = 0;
	good = 1;
	for (i = 0; i < n; i++) {
		if (sp_frame_dec_feed(&d, buf + i, 1, &e) == -1)
			good = 0;
		while ((r = sp_frame_dec_next(&d, &f, &e)) == 1) {
			count++;
			if (count == 3 && (f.type != SP_FR_STDOUT ||
			    f.stream != 0xfffffffe || f.len != 3 ||
			    memcmp(f.data, "out", 3) != 0))
				good = 0;
			if (count == 2 && (f.len != 0 || f.stream != 7))
				good = 0;
		}
		if (r == -1)
			good = 0;
	}
	ok(good && count == 4, "four frames fed a byte at a time");
	ok(d.len - d.off == 0 && d.cap <= 4096, "decoder empty and small after");
	sp_frame_dec_release(&d);

	/* A maximal frame, fed in read-sized chunks, stays within bounds. */
	sp_frame_hdr(big, SP_FR_STDOUT, 3, SP_FRAME_MAX);
	memset(big + SP_FRAME_HDR, 'x', SP_FRAME_MAX);
	sp_frame_dec_init(&d);
	count = 0;
	good = 1;
	for (i = 0; i < 3; i++)
		for (p = big; p < big + sizeof big; p += step) {
			step = sizeof big - (p - big);
			if (step > SP_FRAME_CHUNK - 7)
				step = SP_FRAME_CHUNK - 7;
			if (sp_frame_dec_feed(&d, p, step, &e) == -1)
				good = 0;
			while ((r = sp_frame_dec_next(&d, &f, &e)) == 1)
				count += f.len == SP_FRAME_MAX &&
				    f.data[SP_FRAME_MAX - 1] == 'x';
			if (r == -1)
				good = 0;
		}
	ok(good && count == 3, "three 1 MiB frames in chunks");
	ok(d.cap <= SP_FRAME_HDR + SP_FRAME_MAX + SP_FRAME_CHUNK,
	    "decoder capacity %zu within one frame and a chunk", d.cap);
	ok(sp_frame_dec_feed(&d, big, SP_FRAME_CHUNK + 1, &e) == 0 &&
	    sp_frame_dec_feed(&d, big, sizeof big, &e) == -1 &&
	    e.code == SP_E_PROTOCOL, "feeding past the bound fails");
	sp_frame_dec_release(&d);

	/* Bad headers fail as soon as the bad field is in. */
	sp_frame_hdr(buf, SP_FR_STDOUT, 1, SP_FRAME_MAX + 1);
	ok(dec_once(buf, 4, &f, &e) == -1 && e.code == SP_E_PROTOCOL,
	    "oversize length rejected from 4 bytes: %s", e.msg);
	memcpy(buf, "\0\0\0\4\4", 5);
	ok(dec_once(buf, 5, &f, &e) == -1, "length 4 rejected");
	memcpy(buf, "\0\0\0\0", 4);
	ok(dec_once(buf, 4, &f, &e) == -1, "length 0 rejected");
	sp_frame_hdr(buf, 0, 1, 0);
	ok(dec_once(buf, 5, &f, &e) == -1, "type 0 rejected: %s", e.msg);
	sp_frame_hdr(buf, 200, 1, 0);
	ok(dec_once(buf, 9, &f, &e) == -1, "type 200 rejected");
	sp_frame_hdr(buf, SP_FR_HELLO, 1, SP_JSON_MAX + 1);
	ok(dec_once(buf, 5, &f, &e) == -1, "JSON frame over SP_JSON_MAX "
	    "rejected: %s", e.msg);
	sp_frame_hdr(buf, SP_FR_STDOUT, 1, SP_JSON_MAX + 1);
	ok(dec_once(buf, 5, &f, &e) == 0, "data frame over SP_JSON_MAX waits");
	n = frame(buf, SP_FR_STDOUT, 1, "0123456789", 10);
	ok(dec_once(buf, n - 1, &f, &e) == 0, "truncated frame waits");
	ok(dec_once(buf, 3, &f, &e) == 0, "truncated length waits");
	ok(dec_once(buf, n, &f, &e) == 1 && f.len == 10, "whole frame comes");

	/* JSON payloads. */
	ok(json_of("{\"op\":\"exec\",\"argv\":[\"x\"]}", &e) == 0,
	    "valid JSON object");
	ok(json_of("{\"op\":", &e) == -1 && e.code == SP_E_PROTOCOL,
	    "invalid JSON: %s", e.msg);
	ok(json_of("[1,2]", &e) == -1, "non-object: %s", e.msg);
	ok(json_of("\"s\"", &e) == -1, "bare string");
	ok(json_of("{\"a\":1,\"a\":2}", &e) == -1, "duplicate keys: %s", e.msg);
	ok(json_of("{\"a\":\"\xff\xfe\"}", &e) == -1, "invalid UTF-8: %s",
	    e.msg);
	ok(json_of("{\"a\":\"\xc0\xaf\"}", &e) == -1, "overlong UTF-8");
	ok(json_of("{\"a\":\"x\\u0000y\"}", &e) == -1, "NUL in a string");
	ok(json_of("{} {}", &e) == -1, "trailing data");
	ok(strchr(e.msg, '\n') == NULL, "messages are one clean line");
	{
		static char huge[SP_JSON_MAX + 16];
		struct sp_frame hf;
		json_t *j;

		memset(huge, ' ', sizeof huge - 1);
		huge[0] = '{';
		huge[sizeof huge - 2] = '}';
		hf.type = SP_FR_REQ;
		hf.len = sizeof huge - 1;
		hf.data = (unsigned char *)huge;
		ok(sp_frame_json(&hf, &j, &e) == -1, "JSON over SP_JSON_MAX");
	}
	{
		static char deep[20001];

		memset(deep, '[', 20000);
		ok(json_of(deep, &e) == -1, "deep nesting refused");
	}

	/* sp_frame_write: sockets and pipes. */
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == -1 || pipe(pp) == -1)
		abort();
	ok(sp_frame_write(sv[0], SP_FR_STDERR, 5, "abc", 3, &e) == 0 &&
	    sp_frame_write(pp[1], SP_FR_STDERR, 5, "abc", 3, &e) == 0,
	    "sp_frame_write on a socket and a pipe");
	n = read(sv[1], buf, sizeof buf);
	ok(n == 12 && dec_once(buf, n, &f, &e) == 1 && f.type == SP_FR_STDERR &&
	    f.stream == 5 && memcmp(f.data, "abc", 3) == 0, "socket bytes");
	n = read(pp[0], buf, sizeof buf);
	ok(n == 12 && memcmp(buf, "\0\0\0\x08\x05\0\0\0\x05" "abc", 12) == 0,
	    "pipe bytes are the wire format");
	ok(sp_frame_write(sv[0], SP_FR_REQ, 1, big, SP_JSON_MAX + 1, &e) == -1,
	    "sp_frame_write refuses oversize JSON");
	close(sv[1]);
	ok(sp_frame_write(sv[0], SP_FR_STDIN, 1, "x", 1, &e) == -1,
	    "write to a closed peer fails without SIGPIPE: %s", e.msg);
	close(sv[0]);
	close(pp[0]);
	close(pp[1]);
}

/* ---- a fake guest, one connection per scenario ---- */

struct fake {
	int lfd, fd;
	struct sp_frame_dec d;
	unsigned char buf[8192];
	uint32_t stream;	/* of the last request */
};

static int
fake_next(struct fake *g, struct sp_frame *f)
{
	struct sp_err e;
	ssize_t n;
	int r;

	for (;;) {
		if ((r = sp_frame_dec_next(&g->d, f, &e)) != 0)
			return r;
		if ((n = read(g->fd, g->buf, sizeof g->buf)) <= 0)
			return -1;
		if (sp_frame_dec_feed(&g->d, g->buf, n, &e) == -1)
			return -1;
	}
}

/* The next request, past the stdin of earlier calls. */
static int
fake_next_req(struct fake *g, struct sp_frame *f)
{
	int r;

	while ((r = fake_next(g, f)) == 1 && f->type == SP_FR_STDIN)
		;
	return r == 1 && f->type == SP_FR_REQ ? 1 : -1;
}

static void
fake_send(struct fake *g, uint8_t type, uint32_t stream, const char *s)
{
	struct sp_err e;

	sp_frame_write(g->fd, type, stream, s, strlen(s), &e);
}

/* Takes the host's hello: its JSON in *j and its stream in *hs. */
static int
fake_hello_take(struct fake *g, json_t **j, uint32_t *hs)
{
	struct sp_frame f;
	struct sp_err e;

	if (fake_next(g, &f) != 1 || f.type != SP_FR_HELLO ||
	    sp_frame_json(&f, j, &e) == -1)
		return -1;
	*hs = f.stream;
	return 0;
}

/* Answers the hello j (taken: released) with the version given. */
static void
fake_hello_answer(struct fake *g, json_t *j, uint32_t hs, int version)
{
	struct sp_err e;
	json_t *r;

	r = json_pack("{s:i,s:s,s:O,s:i}", "version", version, "boot_id",
	    "fake-boot", "nonce", json_object_get(j, "nonce"), "ports", 1);
	sp_frame_write_json(g->fd, SP_FR_HELLO, hs, r, &e);
	json_decref(r);
	json_decref(j);
}

/* Answers the host's hello; version and nonce as the scenario wants, after
 * stale frames of an earlier host. */
static int
fake_hello(struct fake *g, int version, int stale)
{
	uint32_t hs;
	json_t *j;
	int i;

	if (fake_hello_take(g, &j, &hs) == -1)
		return -1;
	for (i = 0; i < stale; i++)
		fake_send(g, i % 2 ? SP_FR_STDOUT : SP_FR_HELLO, 3,
		    i % 2 ? "old output" : "{\"version\":1,\"boot_id\":\"b\","
		    "\"nonce\":\"0123\"}");
	fake_hello_answer(g, j, hs, version);
	return 0;
}

/* Takes the host's request; 0 with g->stream set. */
static int
fake_req(struct fake *g)
{
	struct sp_frame f;

	if (fake_hello(g, SP_PROTO_VERSION, 0) == -1 || fake_next(g, &f) != 1 ||
	    f.type != SP_FR_REQ)
		return -1;
	g->stream = f.stream;
	return 0;
}

static void
g_echo(struct fake *g)
{
	struct sp_frame f;
	struct sp_err e;

	if (fake_req(g) == -1)
		return;
	/* Echo stdin to stdout until its end. */
	while (fake_next(g, &f) == 1 && f.type == SP_FR_STDIN && f.len > 0)
		sp_frame_write(g->fd, SP_FR_STDOUT, g->stream, f.data, f.len, &e);
	fake_send(g, SP_FR_STDERR, g->stream, "err\n");
	fake_send(g, SP_FR_EXIT, g->stream, "{\"status\":3}");
	/* A second call on the same channel. */
	if (fake_next_req(g, &f) == 1)
		fake_send(g, SP_FR_EXIT, f.stream, "{\"signal\":9}");
	while (fake_next(g, &f) == 1)
		;
}

/* A request sent with the hello (sp_chan_open_req): it is here before the
 * hello is answered, which a host that waits for the answer never does. */
static int
early_serve(struct fake *g)
{
	struct sp_frame f;
	uint32_t hs;
	json_t *j;

	if (fake_hello_take(g, &j, &hs) == -1)
		return -1;
	if (fake_next(g, &f) != 1 || f.type != SP_FR_REQ) {
		json_decref(j);
		return -1;
	}
	g->stream = f.stream;
	fake_hello_answer(g, j, hs, SP_PROTO_VERSION);
	fake_send(g, SP_FR_EXIT, g->stream, "{\"status\":0}");
	return 0;
}

static void
g_early(struct fake *g)
{
	struct sp_frame f;

	if (early_serve(g) == 0)
		while (fake_next(g, &f) == 1)
			;
}

/* The first connection's hello goes unanswered: the host comes again, and
 * its request with it. */
static void
g_early_retry(struct fake *g)
{
	struct sp_frame f;

	if (fake_next(g, &f) != 1 || f.type != SP_FR_HELLO ||
	    fake_next(g, &f) != 1 || f.type != SP_FR_REQ)
		return;
	while (fake_next(g, &f) == 1)
		;
	close(g->fd);
	sp_frame_dec_release(&g->d);
	sp_frame_dec_init(&g->d);
	if ((g->fd = accept(g->lfd, NULL, NULL)) >= 0 && early_serve(g) == 0)
		while (fake_next(g, &f) == 1)
			;
}

/* A request and a first command sent with the hello
 * (sp_chan_open_req_first): all here before the hello is answered, the
 * command's end of stdin too (the host had it at hand). */
static void
g_early_first(struct fake *g)
{
	struct sp_frame f;
	struct sp_err e;
	json_t *j = NULL, *req = NULL;
	uint32_t hs, op;

	if (fake_hello_take(g, &j, &hs) == -1)
		return;
	if (fake_next(g, &f) != 1 || f.type != SP_FR_REQ)
		goto out;
	op = f.stream;
	if (fake_next(g, &f) != 1 || f.type != SP_FR_REQ ||
	    sp_frame_json(&f, &req, &e) == -1 ||
	    !json_is_true(json_object_get(req, "after_identity")))
		goto out;
	g->stream = f.stream;
	if (fake_next(g, &f) != 1 || f.type != SP_FR_STDIN || f.len != 0 ||
	    f.stream != g->stream)
		goto out;
	fake_hello_answer(g, j, hs, SP_PROTO_VERSION);
	j = NULL;
	fake_send(g, SP_FR_EXIT, op, "{\"status\":0}");
	fake_send(g, SP_FR_STDOUT, g->stream, "first\n");
	fake_send(g, SP_FR_EXIT, g->stream, "{\"status\":4}");
	while (fake_next(g, &f) == 1)
		;
out:
	json_decref(j);
	json_decref(req);
}

/* Never answers; a host that came again would leave dir/again. */
static void
g_deaf_first(struct fake *g)
{
	struct sp_frame f;
	char p[128];
	int fd;

	while (fake_next(g, &f) == 1)
		;
	if (accept(g->lfd, NULL, NULL) >= 0) {
		snprintf(p, sizeof p, "%s/again", dir);
		if ((fd = open(p, O_CREAT | O_WRONLY, 0600)) >= 0)
			close(fd);
	}
}

static void
g_oversize(struct fake *g)
{
	unsigned char h[SP_FRAME_HDR];
	struct sp_frame f;

	if (fake_req(g) == -1)
		return;
	sp_frame_hdr(h, SP_FR_STDOUT, g->stream, SP_FRAME_MAX + 1);
	(void)!write(g->fd, h, sizeof h);
	while (fake_next(g, &f) == 1)
		;
}

static void
g_garbage(struct fake *g)
{
	struct sp_frame f;

	fake_next(g, &f);
	(void)!write(g->fd, "HTTP/1.1 400 Bad Request\r\n\r\n", 28);
	while (fake_next(g, &f) == 1)
		;
}

static void
g_truncated_hello(struct fake *g)
{
	struct sp_frame f;

	fake_next(g, &f);
	(void)!write(g->fd, "\0\0\0\x40\x01\0\0\0\0{\"vers", 15);
}

static void
g_truncated(struct fake *g)
{
	if (fake_req(g) == -1)
		return;
	(void)!write(g->fd, "\0\0\0\x40\x04\0\0\0\x01partial", 16);
}

static void
g_other_stream(struct fake *g)
{
	struct sp_frame f;

	if (fake_req(g) == -1)
		return;
	fake_send(g, SP_FR_STDOUT, g->stream + 1, "not yours");
	while (fake_next(g, &f) == 1)
		;
}

static void
g_silent(struct fake *g)
{
	struct sp_frame f;

	while (fake_next(g, &f) == 1)
		;
}

static void
g_mute_exec(struct fake *g)
{
	struct sp_frame f;

	if (fake_req(g) == -1)
		return;
	while (fake_next(g, &f) == 1)
		;
}

static void
g_stale(struct fake *g)
{
	struct sp_frame f;

	fake_hello(g, SP_PROTO_VERSION, 5);
	while (fake_next(g, &f) == 1)
		;
}

static void
g_too_stale(struct fake *g)
{
	struct sp_frame f;

	fake_hello(g, SP_PROTO_VERSION, 17);
	while (fake_next(g, &f) == 1)
		;
}

/* Misses the first hello, as a guest may while clients come and go; the
 * host comes back and says it again. */
static void
g_deaf_once(struct fake *g)
{
	struct sp_frame f;

	while (fake_next(g, &f) == 1)
		;
	close(g->fd);
	sp_frame_dec_release(&g->d);
	sp_frame_dec_init(&g->d);
	if ((g->fd = accept(g->lfd, NULL, NULL)) == -1 ||
	    fake_hello(g, SP_PROTO_VERSION, 1) == -1)
		return;
	if (fake_next_req(g, &f) == 1)
		fake_send(g, SP_FR_EXIT, f.stream, "{\"status\":5}");
	while (fake_next(g, &f) == 1)
		;
}

static void
g_version(struct fake *g)
{
	struct sp_frame f;

	fake_hello(g, SP_PROTO_VERSION + 1, 0);
	while (fake_next(g, &f) == 1)
		;
}

static void
g_error(struct fake *g)
{
	struct sp_frame f;

	if (fake_req(g) == -1)
		return;
	fake_send(g, SP_FR_ERROR, g->stream, "{\"error\":\"exec-failed\","
	    "\"msg\":\"exec \\\"nope\\\":\\u0001\\u001b[31m no\\u0085 file\"}");
	if (fake_next_req(g, &f) == 1)
		fake_send(g, SP_FR_ERROR, f.stream,
		    "{\"error\":\"Evil Token!\",\"msg\":7}");
	if (fake_next_req(g, &f) == 1)
		fake_send(g, SP_FR_EXIT, f.stream, "{\"status\":300}");
	while (fake_next(g, &f) == 1)
		;
}

static void
g_bad_type(struct fake *g)
{
	struct sp_frame f;

	if (fake_req(g) == -1)
		return;
	fake_send(g, SP_FR_REQ, g->stream, "{\"op\":\"exec\"}");
	while (fake_next(g, &f) == 1)
		;
}

static void
g_flood(struct fake *g)
{
	static unsigned char blob[SP_FRAME_MAX];
	struct sp_err e;
	int i;

	if (fake_req(g) == -1)
		return;
	memset(blob, 'z', sizeof blob);
	for (i = 0; i < 8; i++)
		sp_frame_write(g->fd, SP_FR_STDOUT, g->stream, blob,
		    sizeof blob, &e);
	fake_send(g, SP_FR_EXIT, g->stream, "{\"status\":0}");
	pause();
}

static int
listen_on(const char *path)
{
	struct sockaddr_un sa;
	int fd;

	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%.100s", path);
	unlink(path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) == -1 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof sa) == -1 ||
	    listen(fd, 4) == -1)
		abort();
	return fd;
}

static pid_t
fake_start(void (*fn)(struct fake *))
{
	struct fake g;
	pid_t pid;
	int l;

	l = listen_on(sock0);
	if ((pid = fork()) == 0) {
		memset(&g, 0, sizeof g);
		g.lfd = l;
		sp_frame_dec_init(&g.d);
		if ((g.fd = accept(l, NULL, NULL)) >= 0) {
			fn(&g);
			/* The host sees EOF only when no copy of the
			 * listening socket is left either. */
			close(l);
		}
		_exit(0);
	}
	close(l);
	return pid;
}

static void
fake_stop(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(sock0);
}

/* Runs argv with in as stdin; stdout into *out (malloc'd). */
static int
run(struct sp_chan *c, char *const argv[], char *const env[], const char *cwd,
    const void *in, size_t inlen, char **out, size_t *outlen, int *status,
    struct sp_err *e)
{
	struct sp_exec x;
	FILE *fi = NULL, *fo, *fe;
	long n;
	int rc;

	fo = tmpfile();
	fe = tmpfile();
	if (in != NULL) {
		fi = tmpfile();
		fwrite(in, 1, inlen, fi);
		fflush(fi);
		rewind(fi);
	}
	memset(&x, 0, sizeof x);
	x.argv = argv;
	x.env = env;
	x.cwd = cwd;
	x.in_fd = fi != NULL ? fileno(fi) : -1;
	x.out_fd = fileno(fo);
	x.err_fd = fileno(fe);
	*status = -1;
	rc = sp_chan_exec(c, &x, status, e);
	n = lseek(fileno(fo), 0, SEEK_END);
	*out = calloc(1, n + 1);
	if (n > 0)
		(void)!pread(fileno(fo), *out, n, 0);
	*outlen = n;
	if (fi != NULL)
		fclose(fi);
	fclose(fo);
	fclose(fe);
	return rc;
}

static void
test_fake(void)
{
	char *argv[] = { "cat", NULL }, *out;
	struct sp_chan *c;
	struct rusage ru;
	struct sp_err e;
	size_t outlen;
	int64_t t0;
	int st, r, i, locks[SP_PORTS_DEFAULT];
	pid_t g, h;

	g = fake_start(g_echo);
	r = sp_chan_open(&c, dir, ID, 2000, &e);
	ok(r == 0 && json_is_string(json_object_get(sp_chan_hello(c),
	    "boot_id")), "open and hello against a fake guest");
	if (r == 0) {
		r = run(c, argv, NULL, NULL, "hello world", 11, &out, &outlen,
		    &st, &e);
		ok(r == 0 && st == 3 && outlen == 11 &&
		    memcmp(out, "hello world", 11) == 0,
		    "exec relays stdin and stdout, status 3");
		free(out);
		r = run(c, argv, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
		ok(r == 0 && st == 137, "second call: signal 9 is 137");
		free(out);
		sp_chan_close(c);
	}
	fake_stop(g);

	{
		json_t *req = json_pack("{s:s}", "op", "clock");
		struct sp_frame f;
		uint32_t s;

		g = fake_start(g_early);
		r = sp_chan_open_req(&c, dir, ID, 2000, req, &s, &e);
		ok(r == 0 && sp_chan_recv(c, &f, 2000, &e) == 0 &&
		    f.type == SP_FR_EXIT && f.stream == s,
		    "a request sent with the hello is answered before the "
		    "hello would be: %s", r == 0 ? "" : e.msg);
		sp_chan_close(c);
		fake_stop(g);

		g = fake_start(g_early_retry);
		t0 = now_ms();
		r = sp_chan_open_req(&c, dir, ID, 5000, req, &s, &e);
		ok(r == 0 && sp_chan_recv(c, &f, 2000, &e) == 0 &&
		    f.type == SP_FR_EXIT && f.stream == s,
		    "hello unanswered: the request comes again with the next "
		    "hello (%lld ms): %s", (long long)(now_ms() - t0),
		    r == 0 ? "" : e.msg);
		sp_chan_close(c);
		fake_stop(g);
		json_decref(req);
	}

	{
		json_t *req = json_pack("{s:s}", "op", "identity");
		char *first[] = { "true", NULL }, p[128], buf[16] = "";
		FILE *fo = tmpfile(), *fe = tmpfile();
		struct sp_exec x;
		struct sp_frame f;
		uint32_t s;
		int sent = -1;

		memset(&x, 0, sizeof x);
		x.argv = first;
		x.in_fd = -1;
		x.out_fd = fileno(fo);
		x.err_fd = fileno(fe);
		g = fake_start(g_early_first);
		r = sp_chan_open_req_first(&c, dir, ID, 2000, req, &s, &x,
		    &sent, &e);
		ok(r == 0 && sent == 1 && sp_chan_recv(c, &f, 2000, &e) == 0 &&
		    f.type == SP_FR_EXIT && f.stream == s,
		    "a request and a first command (and its stdin's end) sent "
		    "with the hello: %s", r == 0 ? "" : e.msg);
		if (r == 0) {
			r = sp_chan_exec(c, &x, &st, &e);
			(void)!pread(fileno(fo), buf, sizeof buf - 1, 0);
			ok(r == 0 && st == 4 && strcmp(buf, "first\n") == 0,
			    "the call goes on with the command sent ahead: its "
			    "output, status 4: %s", r == 0 ? "" : e.msg);
			sp_chan_close(c);
		}
		fake_stop(g);

		snprintf(p, sizeof p, "%s/again", dir);
		unlink(p);
		g = fake_start(g_deaf_first);
		t0 = now_ms();
		sent = -1;
		r = sp_chan_open_req_first(&c, dir, ID, 1500, req, &s, &x,
		    &sent, &e);
		ok(r == -1 && e.code == SP_E_TIMED_OUT && sent == 1 &&
		    now_ms() - t0 >= 1400 && access(p, F_OK) == -1,
		    "a hello with a first command, unanswered, is not said "
		    "again on a new connection: %s after %lld ms",
		    r == -1 ? e.msg : "", (long long)(now_ms() - t0));
		fake_stop(g);
		unlink(p);
		fclose(fo);
		fclose(fe);
		json_decref(req);
	}

	g = fake_start(g_oversize);
	r = sp_chan_open(&c, dir, ID, 2000, &e);
	if (r == 0) {
		r = run(c, argv, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
		free(out);
		ok(r == -1 && e.code == SP_E_PROTOCOL,
		    "(a) oversize frame in exec: %s", e.msg);
		r = run(c, argv, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
		free(out);
		ok(r == -1 && e.code == SP_E_PROTOCOL,
		    "the channel is closed after it: %s", e.msg);
		sp_chan_close(c);
	} else
		ok(0, "(a) open: %s", e.msg);
	fake_stop(g);

	g = fake_start(g_garbage);
	r = sp_chan_open(&c, dir, ID, 2000, &e);
	ok(r == -1 && e.code == SP_E_PROTOCOL,
	    "(b) garbage instead of hello: %s", e.msg);
	fake_stop(g);

	g = fake_start(g_truncated_hello);
	r = sp_chan_open(&c, dir, ID, 2000, &e);
	ok(r == -1 && e.code == SP_E_PROTOCOL,
	    "(c) truncated hello then close: %s", e.msg);
	fake_stop(g);

	g = fake_start(g_truncated);
	if (sp_chan_open(&c, dir, ID, 2000, &e) == 0) {
		r = run(c, argv, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
		free(out);
		ok(r == -1 && e.code == SP_E_PROTOCOL,
		    "(c) truncated frame in exec then close: %s", e.msg);
		sp_chan_close(c);
	} else
		ok(0, "(c) open: %s", e.msg);
	fake_stop(g);

	g = fake_start(g_other_stream);
	if (sp_chan_open(&c, dir, ID, 2000, &e) == 0) {
		r = run(c, argv, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
		free(out);
		ok(r == -1 && e.code == SP_E_PROTOCOL,
		    "(d) frame for another stream: %s", e.msg);
		sp_chan_close(c);
	} else
		ok(0, "(d) open: %s", e.msg);
	fake_stop(g);

	g = fake_start(g_bad_type);
	if (sp_chan_open(&c, dir, ID, 2000, &e) == 0) {
		r = run(c, argv, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
		free(out);
		ok(r == -1 && e.code == SP_E_PROTOCOL,
		    "a REQ frame from the guest: %s", e.msg);
		sp_chan_close(c);
	} else
		ok(0, "open: %s", e.msg);
	fake_stop(g);

	g = fake_start(g_silent);
	t0 = now_ms();
	r = sp_chan_open(&c, dir, ID, 300, &e);
	t0 = now_ms() - t0;
	ok(r == -1 && e.code == SP_E_TIMED_OUT && e.temp &&
	    t0 >= 290 && t0 < 1500, "(e) no hello answer: timeout after "
	    "%lld ms: %s", (long long)t0, e.msg);
	fake_stop(g);

	/* A guest that answers hello, then says nothing: the host waits
	 * (no call timeout yet) but must not spin. */
	g = fake_start(g_mute_exec);
	if ((h = fork()) == 0) {
		if (sp_chan_open(&c, dir, ID, 2000, &e) == 0)
			run(c, argv, NULL, NULL, NULL, 0, &out, &outlen, &st,
			    &e);
		_exit(0);
	}
	usleep(600 * 1000);
	r = waitpid(h, NULL, WNOHANG);
	kill(h, SIGKILL);
	wait4(h, NULL, 0, &ru);
	t0 = ru.ru_utime.tv_sec * 1000 + ru.ru_utime.tv_usec / 1000 +
	    ru.ru_stime.tv_sec * 1000 + ru.ru_stime.tv_usec / 1000;
	ok(r == 0 && t0 < 100, "(e) a mute guest: the host blocks, "
	    "%lld ms of CPU in 600 ms", (long long)t0);
	fake_stop(g);

	g = fake_start(g_stale);
	r = sp_chan_open(&c, dir, ID, 2000, &e);
	ok(r == 0, "five stale frames before the hello answer are skipped");
	if (r == 0)
		sp_chan_close(c);
	fake_stop(g);

	g = fake_start(g_deaf_once);
	t0 = now_ms();
	r = sp_chan_open(&c, dir, ID, 3000, &e);
	t0 = now_ms() - t0;
	ok(r == 0 && t0 >= 400 && t0 < 1500, "a missed hello: the host "
	    "comes back and says it again (%lld ms)", (long long)t0);
	if (r == 0) {
		r = run(c, argv, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
		free(out);
		ok(r == 0 && st == 5, "and the call works%s%s",
		    r == 0 ? "" : ": ", r == 0 ? "" : e.msg);
		sp_chan_close(c);
	} else
		ok(0, "open: %s", e.msg);
	fake_stop(g);

	g = fake_start(g_too_stale);
	r = sp_chan_open(&c, dir, ID, 2000, &e);
	ok(r == -1 && e.code == SP_E_PROTOCOL,
	    "seventeen are too many: %s", e.msg);
	fake_stop(g);

	g = fake_start(g_version);
	r = sp_chan_open(&c, dir, ID, 2000, &e);
	ok(r == -1 && e.code == SP_E_PROTOCOL, "another version: %s",
	    e.msg);
	fake_stop(g);

	g = fake_start(g_error);
	if (sp_chan_open(&c, dir, ID, 2000, &e) == 0) {
		r = run(c, argv, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
		free(out);
		ok(r == -1 && e.code == SP_E_EXEC_FAILED &&
		    strcmp(e.msg, "guest: exec \"nope\":[31m no file") == 0,
		    "guest error, control characters stripped: %s", e.msg);
		r = run(c, argv, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
		free(out);
		ok(r == -1 && e.code == SP_E_GUEST,
		    "a bad error token becomes \"guest\": %s", e.msg);
		r = run(c, argv, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
		free(out);
		ok(r == -1 && e.code == SP_E_PROTOCOL,
		    "exit status 300: %s", e.msg);
		sp_chan_close(c);
	} else
		ok(0, "open: %s", e.msg);
	fake_stop(g);

	g = fake_start(g_flood);
	if (sp_chan_open(&c, dir, ID, 2000, &e) == 0) {
		r = run(c, argv, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
		ok(r == 0 && st == 0 && outlen == 8 * SP_FRAME_MAX,
		    "eight maximal frames relayed");
		free(out);
		sp_chan_close(c);
	} else
		ok(0, "open: %s", e.msg);
	fake_stop(g);

	/* Every port locked: busy. */
	for (i = 0; i < SP_PORTS_DEFAULT; i++) {
		char p[300];

		snprintf(p, sizeof p, "%s/%s/space.%d.lock", dir, ID, i);
		locks[i] = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		flock(locks[i], LOCK_EX);
	}
	if ((h = fork()) == 0) {
		r = sp_chan_open(&c, dir, ID, 100, &e);
		_exit(r == -1 && e.code == SP_E_BUSY && e.temp ? 0 : 1);
	}
	waitpid(h, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "all ports locked: busy");
	for (i = 0; i < SP_PORTS_DEFAULT; i++)
		close(locks[i]);

	r = sp_chan_open(&c, dir, ID, 100, &e);
	ok(r == -1 && e.code == SP_E_NOT_RUNNING,
	    "no socket: %s", e.msg);
	t0 = now_ms();
	r = sp_chan_wait_ready(dir, ID, 200, &e);
	t0 = now_ms() - t0;
	ok(r == -1 && e.code == SP_E_TIMED_OUT && t0 >= 190 &&
	    t0 < 1000, "wait_ready without a VM: %s", e.msg);
	r = sp_chan_open(&c, dir, "../../etc/x", 100, &e);
	ok(r == -1 && e.code == SP_E_BAD_INPUT, "bad id refused");
	g = fake_start(g_stale);
	ok(sp_chan_wait_ready(dir, ID, 2000, &e) == 0, "wait_ready");
	fake_stop(g);
}

/* ---- the real daemon, in its listening test mode ---- */

static int
proc_has(const char *needle)
{
	char path[300], buf[256];
	struct dirent *de;
	DIR *d;
	ssize_t n;
	int fd, found = 0;

	if ((d = opendir("/proc")) == NULL)
		return 0;
	while (!found && (de = readdir(d)) != NULL) {
		snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
		if ((fd = open(path, O_RDONLY)) == -1)
			continue;
		if ((n = read(fd, buf, sizeof buf - 1)) > 0) {
			buf[n] = '\0';
			for (ssize_t i = 0; i < n; i++)
				if (buf[i] == '\0')
					buf[i] = ' ';
			found = strstr(buf, needle) != NULL;
		}
		close(fd);
	}
	closedir(d);
	return found;
}

static void
test_daemon(const char *daemon)
{
	char *a_echo[] = { "echo", "hi", NULL };
	char *a_exit[] = { "sh", "-c", "exit 7", NULL };
	char *a_kill[] = { "sh", "-c", "kill -9 $$", NULL };
	char *a_cat[] = { "cat", NULL };
	char *a_env[] = { "sh", "-c", "echo \"$FOO\"; pwd; echo err >&2", NULL };
	char *a_nope[] = { "no-such-command-xyz", NULL };
	char *a_true[] = { "true", NULL };
	char *a_sleep[] = { "sleep", "31.7", NULL };
	char *a_bg[] = { "sh", "-c", "sleep 0.3 & echo started", NULL };
	char *env[] = { "FOO=bar baz", "PATH=/usr/bin:/bin", NULL };
	unsigned char junk[64];
	struct sp_chan *c, *c2;
	struct sp_frame f;
	struct sp_frame_dec d;
	struct sp_err e;
	char *out, *big;
	size_t outlen, i;
	int64_t t0, t;
	pid_t dpid, h;
	int st, r, fd, n;
	json_t *j;

	if ((dpid = fork()) == 0) {
		int nul = open("/dev/null", O_WRONLY);

		if (getenv("TEST_VERBOSE") == NULL)
			dup2(nul, 2);
		execl(daemon, daemon, "-l", sock0, sock1, (char *)NULL);
		_exit(127);
	}
	r = sp_chan_wait_ready(dir, ID, 5000, &e);
	ok(r == 0, "daemon: ready%s%s", r == 0 ? "" : ": ", r == 0 ? "" : e.msg);
	if (sp_chan_open(&c, dir, ID, 2000, &e) == -1) {
		ok(0, "daemon: open: %s", e.msg);
		goto out;
	}
	j = sp_chan_hello(c);
	ok(json_integer_value(json_object_get(j, "ports")) == 2 &&
	    json_string_length(json_object_get(j, "boot_id")) == 36,
	    "daemon: hello says 2 ports and a boot id");
	r = run(c, a_echo, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
	ok(r == 0 && st == 0 && strcmp(out, "hi\n") == 0, "daemon: echo hi");
	free(out);
	r = run(c, a_exit, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
	ok(r == 0 && st == 7, "daemon: exit 7");
	free(out);
	r = run(c, a_kill, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
	ok(r == 0 && st == 137, "daemon: killed by signal 9 is 137");
	free(out);
	r = run(c, a_env, env, "/tmp", NULL, 0, &out, &outlen, &st, &e);
	ok(r == 0 && st == 0 && strcmp(out, "bar baz\n/tmp\n") == 0,
	    "daemon: env and cwd");
	free(out);
	r = run(c, a_nope, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
	ok(r == -1 && e.code == SP_E_EXEC_FAILED,
	    "daemon: no such command: %s", e.msg);
	free(out);
	r = run(c, a_true, NULL, "/no/such/dir", NULL, 0, &out, &outlen, &st,
	    &e);
	ok(r == -1 && e.code == SP_E_EXEC_FAILED,
	    "daemon: bad cwd: %s", e.msg);
	free(out);
	/* 8 MiB through cat: both directions full at once must not lock. */
	big = malloc(8 << 20);
	for (i = 0; i < (8u << 20); i++)
		big[i] = "0123456789abcdef\n"[i % 17];
	t0 = now_ms();
	r = run(c, a_cat, NULL, NULL, big, 8 << 20, &out, &outlen, &st, &e);
	t = now_ms() - t0;
	ok(r == 0 && st == 0 && outlen == (8u << 20) &&
	    memcmp(out, big, outlen) == 0, "daemon: 8 MiB through cat "
	    "(%lld ms)", (long long)t);
	free(out);
	free(big);
	r = run(c, a_bg, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
	ok(r == 0 && strcmp(out, "started\n") == 0,
	    "daemon: EXIT waits for pipes held by a background child");
	free(out);

	/* Two ports at once. */
	r = sp_chan_open(&c2, dir, ID, 2000, &e);
	ok(r == 0, "daemon: a second channel takes port 1");
	if (r == 0) {
		r = run(c2, a_echo, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
		ok(r == 0 && strcmp(out, "hi\n") == 0, "daemon: exec on port 1");
		free(out);
		sp_chan_close(c2);
	}
	sp_chan_close(c);

	/* Round trips: open + hello + exec true + close. */
	t0 = now_ms();
	for (i = 0; i < 50; i++) {
		if (sp_chan_open(&c, dir, ID, 2000, &e) == -1)
			break;
		r = run(c, a_true, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
		free(out);
		sp_chan_close(c);
		if (r == -1 || st != 0)
			break;
	}
	t = now_ms() - t0;
	ok(i == 50, "daemon: 50 calls, %.2f ms each (open, hello, exec true)",
	    (double)t / 50);

	/* A host that vanishes mid-call: the daemon kills the command. */
	if ((h = fork()) == 0) {
		if (sp_chan_open(&c, dir, ID, 2000, &e) == 0)
			run(c, a_sleep, NULL, NULL, NULL, 0, &out, &outlen,
			    &st, &e);
		_exit(0);
	}
	for (i = 0; i < 100 && !proc_has("sleep 31.7"); i++)
		usleep(20000);
	ok(proc_has("sleep 31.7"), "daemon: a long command runs");
	kill(h, SIGKILL);
	waitpid(h, NULL, 0);
	for (i = 0; i < 100 && proc_has("sleep 31.7"); i++)
		usleep(20000);
	ok(!proc_has("sleep 31.7"), "daemon: killed when the host vanished");

	/* Garbage from the host: an ERROR, and the daemon lives on. */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	{
		struct sockaddr_un sa;

		memset(&sa, 0, sizeof sa);
		sa.sun_family = AF_UNIX;
		snprintf(sa.sun_path, sizeof sa.sun_path, "%.99s", sock0);
		r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
	}
	(void)!write(fd, "GET / HTTP/1.1\r\n\r\n", 18);
	sp_frame_dec_init(&d);
	r = 0;
	while (r == 0 && (n = read(fd, junk, sizeof junk)) > 0)
		if (sp_frame_dec_feed(&d, junk, n, &e) == 0)
			r = sp_frame_dec_next(&d, &f, &e);
	ok(r == 1 && f.type == SP_FR_ERROR && f.len > 0 &&
	    memmem(f.data, f.len, "\"protocol\"", 10) != NULL,
	    "daemon: garbage gets a protocol error");
	sp_frame_dec_release(&d);
	close(fd);
	if (sp_chan_open(&c, dir, ID, 2000, &e) == 0) {
		r = run(c, a_echo, NULL, NULL, NULL, 0, &out, &outlen, &st, &e);
		ok(r == 0 && strcmp(out, "hi\n") == 0, "daemon: alive after it");
		free(out);
		sp_chan_close(c);
	} else
		ok(0, "daemon: open after garbage: %s", e.msg);
out:
	kill(dpid, SIGTERM);
	waitpid(dpid, NULL, 0);
}

int
main(void)
{
	char sub[300];
	const char *daemon;

	snprintf(dir, sizeof dir, "/tmp/test-proto.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(sub, sizeof sub, "%s/%s", dir, ID);
	snprintf(sock0, sizeof sock0, "%.80s/space.0.sock", sub);
	snprintf(sock1, sizeof sock1, "%.80s/space.1.sock", sub);
	mkdir(sub, 0700);
	test_decoder();
	test_fake();
	daemon = getenv("SPACE_DAEMON");
	if (daemon == NULL)
		daemon = "build/guest/space-daemon";
	if (access(daemon, X_OK) == 0)
		test_daemon(daemon);
	else
		printf("ok %d # SKIP no guest daemon at %s\n", ++ntest, daemon);
	printf("1..%d\n", ntest);
	snprintf(sub, sizeof sub, "rm -rf '%s'", dir);
	(void)!system(sub);
	return nfail > 0;
}
