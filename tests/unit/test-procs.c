/*
 * test-procs: the process side of the guest daemon, end to end against the
 * real daemon in its listening test mode (build/guest/space-daemon, or
 * $SPACE_DAEMON): user switch, signals, pty and resize, detached processes
 * with their ring buffer, ps, logs and kill, the per-call timeout, and an
 * exec sent ahead of an identity (it runs only after one that took).
 * TAP output; exit 1 on any failure.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"
#include "tap.h"

#define ID	"abcdefghij23"

static char dir[64], sock0[100];

/* Runs argv with x's own stdin; stdout into out (NUL-terminated, cut at
 * n - 1). */
static int
run_stdin(struct sp_chan *c, struct sp_exec *x, char *out, size_t n,
    int *status, struct sp_err *e)
{
	FILE *fo = tmpfile();
	ssize_t got;
	int rc;

	x->out_fd = fileno(fo);
	*status = -1;
	rc = sp_chan_exec(c, x, status, e);
	got = pread(fileno(fo), out, n - 1, 0);
	out[got > 0 ? got : 0] = '\0';
	fclose(fo);
	return rc;
}

/* As run_stdin(), with no stdin and stderr dropped. */
static int
run(struct sp_chan *c, struct sp_exec *x, char *out, size_t n, int *status,
    struct sp_err *e)
{
	x->in_fd = -1;
	x->err_fd = -1;
	return run_stdin(c, x, out, n, status, e);
}

/* A pipe holding the control records given, for x->ctl_fd. */
static int
ctl_pipe(const struct sp_exec_ctl *r, int nr, int *wfd)
{
	int p[2];

	if (pipe(p) == -1)
		abort();
	if (write(p[1], r, nr * sizeof *r) != (ssize_t)(nr * sizeof *r))
		abort();
	*wfd = p[1];
	return p[0];
}

struct find {
	pid_t pid;
	json_t *rec;
};

static int
find1(json_t *r, void *arg)
{
	struct find *f = arg;

	if (json_integer_value(json_object_get(r, "pid")) == f->pid) {
		f->rec = json_incref(r);
		return 1;
	}
	return 0;
}

/* The ps record of pid, or NULL. */
static json_t *
ps_of(struct sp_chan *c, pid_t pid)
{
	struct find f = { pid, NULL };
	struct sp_err e;

	if (sp_chan_ps(c, find1, &f, &e) == -1)
		return NULL;
	return f.rec;
}

static int
state_is(struct sp_chan *c, pid_t pid, const char *st)
{
	json_t *r = ps_of(c, pid);
	int yes;

	yes = r != NULL &&
	    strcmp(json_string_value(json_object_get(r, "state")), st) == 0;
	json_decref(r);
	return yes;
}

static long
vmhwm_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static void
test_user(struct sp_chan *c)
{
	char *a_id[] = { "id", "-u", NULL };
	struct sp_exec x = { 0 };
	struct sp_err e = { SP_E_NONE, 0, "" };
	char out[256];
	int st, r;

	x.argv = a_id;
	x.user = "nobody";
	r = run(c, &x, out, sizeof out, &st, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && st == 0 && strcmp(out, "65534\n") == 0,
	    "user nobody: id -u says 65534");
	x.user = "65534";
	r = run(c, &x, out, sizeof out, &st, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && strcmp(out, "65534\n") == 0,
	    "user by uid 65534");
	x.user = "no-such-user-xyz";
	r = run(c, &x, out, sizeof out, &st, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_BAD_INPUT,
	    "unknown user refused: %s", e.msg);
}

static void
test_signal_timeout(struct sp_chan *c)
{
	char *a_sleep[] = { "sleep", "30", NULL };
	char *a_echo[] = { "echo", "hi", NULL };
	struct sp_exec_ctl term = { SIGTERM, 0, 0 };
	struct sp_exec x = { 0 };
	struct sp_err e = { SP_E_NONE, 0, "" };
	char out[256];
	int64_t t0, t;
	json_t *j;
	int st, r, wfd;

	x.argv = a_sleep;
	x.ctl_fd = ctl_pipe(&term, 1, &wfd);
	t0 = sp_clock_ms();
	r = run(c, &x, out, sizeof out, &st, &e);
	t = sp_clock_ms() - t0;
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && st == 128 + SIGTERM && t < 5000,
	    "SIGTERM to a running call ends it: status %d in %lld ms", st,
	    (long long)t);
	close(x.ctl_fd);
	close(wfd);

	memset(&x, 0, sizeof x);
	x.argv = a_sleep;
	x.timeout_ms = 500;
	t0 = sp_clock_ms();
	r = run(c, &x, out, sizeof out, &st, &e);
	t = sp_clock_ms() - t0;
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_TIMED_OUT &&
	    t >= 500 && t < 3000, "timeout 500 ms on sleep 30: %s after %lld ms",
	    sp_code_name(e.code), (long long)t);
	x.argv = a_echo;
	x.timeout_ms = 5000;
	r = run(c, &x, out, sizeof out, &st, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && strcmp(out, "hi\n") == 0,
	    "the channel serves the next call after a timeout");

	/* A signal that crossed its call's end is dropped without a word. */
	j = json_pack("{s:s,s:i}", "op", "signal", "signal", SIGKILL);
	r = sp_chan_send_json(c, SP_FR_REQ, sp_chan_stream_new(c), j, 2000, &e);
	json_decref(j);
	if (r == 0)
		r = run(c, &x, out, sizeof out, &st, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && strcmp(out, "hi\n") == 0,
	    "a late signal is dropped, the next call is served");
}

static void
test_pty(struct sp_chan *c)
{
	char *a_size[] = { "sh", "-c", "test -t 0 && test -t 1 && "
	    "echo tty; stty size", NULL };
	char *a_resize[] = { "sh", "-c", "sleep 0.5; stty size", NULL };
	char *a_intr[] = { "sh", "-c", "trap 'echo INT; exit 3' INT; "
	    "echo ready; sleep 5 & wait", NULL };
	struct sp_exec_ctl rs = { 0, 40, 100 };
	struct sp_exec x = { 0 };
	struct sp_err e = { SP_E_NONE, 0, "" };
	char out[256];
	int st, r, wfd;
	FILE *fo;
	int inp[2];

	x.argv = a_size;
	x.tty = 1;
	x.rows = 33;
	x.cols = 77;
	r = run(c, &x, out, sizeof out, &st, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && st == 0 &&
	    strcmp(out, "tty\r\n33 77\r\n") == 0,
	    "pty: the child sees a terminal of 33x77");
	x.argv = a_resize;
	x.ctl_fd = ctl_pipe(&rs, 1, &wfd);
	r = run(c, &x, out, sizeof out, &st, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && strcmp(out, "40 100\r\n") == 0,
	    "pty: resize to 40x100 reaches it");
	close(x.ctl_fd);
	close(wfd);

	/* ^C typed into the pty is SIGINT for the foreground job. */
	if (pipe(inp) == -1)
		abort();
	(void)!write(inp[1], "\x03", 1);
	memset(&x, 0, sizeof x);
	x.argv = a_intr;
	x.tty = 1;
	fo = tmpfile();
	x.in_fd = inp[0];
	x.out_fd = fileno(fo);
	x.err_fd = -1;
	/* The ^C may come before the trap is set: then sh dies of it. */
	usleep(1000);
	r = sp_chan_exec(c, &x, &st, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && (st == 3 || st == 128 + SIGINT),
	    "pty: ^C interrupts (status %d)", st);
	fclose(fo);
	close(inp[0]);
	close(inp[1]);
}

static void
test_detached(pid_t dpid)
{
	char *a_sleep[] = { "sh", "-c", "echo hello; exec sleep 1000", NULL };
	char *a_flood[] = { "head", "-c", "10485760", "/dev/zero", NULL };
	char *a_tick[] = { "sh", "-c", "for i in 1 2 3; do echo $i; "
	    "sleep 0.2; done", NULL };
	struct sp_exec x = { 0 };
	struct sp_err e = { SP_E_NONE, 0, "" };
	struct sp_chan *c;
	json_t *rec;
	FILE *fo;
	char out[64];
	pid_t pid = 0, big = 0, tick = 0;
	long hwm0, hwm1;
	int r, running, i;

	if (sp_chan_open(&c, dir, ID, 2000, &e) == -1) {
		tap_okf(sp_code_name(e.code), e.msg, 0, "open");
		return;
	}
	x.argv = a_sleep;
	r = sp_chan_detach(c, &x, &pid, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && pid > 0, "detach: pid %d", (int)pid);
	sp_chan_close(c);
	/* A new connection: the process outlived its caller's. */
	usleep(200000);
	if (sp_chan_open(&c, dir, ID, 2000, &e) == -1) {
		tap_okf(sp_code_name(e.code), e.msg, 0, "reopen");
		return;
	}
	rec = ps_of(c, pid);
	tap_ok(rec != NULL && json_is_true(json_object_get(rec, "detached")) &&
	    strcmp(json_string_value(json_object_get(rec, "state")),
	    "running") == 0 && json_array_size(json_object_get(rec,
	    "argv")) == 3, "detached: listed by ps as running after its "
	    "connection closed");
	json_decref(rec);
	fo = tmpfile();
	r = sp_chan_logs(c, pid, 0, fileno(fo), &running, &e);
	i = pread(fileno(fo), out, sizeof out - 1, 0);
	out[i > 0 ? i : 0] = '\0';
	fclose(fo);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && running && strcmp(out, "hello\n") == 0,
	    "detached: logs so far");
	r = sp_chan_kill(c, pid, SIGTERM, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0, "detached: kill");
	for (i = 0; i < 100 && !state_is(c, pid, "exited"); i++)
		usleep(20000);
	rec = ps_of(c, pid);
	tap_ok(rec != NULL && json_integer_value(json_object_get(rec,
	    "signal")) == SIGTERM, "detached: exited of SIGTERM");
	json_decref(rec);
	r = sp_chan_kill(c, pid, SIGTERM, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_BAD_STATE,
	    "kill of an exited process: bad-state");
	r = sp_chan_kill(c, 1, SIGTERM, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_NOT_FOUND,
	    "kill of a pid the daemon did not start: not-found");

	/* 10 MiB of output: the ring keeps the last 1 MiB. */
	hwm0 = vmhwm_kib(dpid);
	x.argv = a_flood;
	r = sp_chan_detach(c, &x, &big, &e);
	for (i = 0; r == 0 && i < 250 && !state_is(c, big, "exited"); i++)
		usleep(20000);
	fo = tmpfile();
	r = sp_chan_logs(c, big, 0, fileno(fo), &running, &e);
	hwm1 = vmhwm_kib(dpid);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && !running &&
	    lseek(fileno(fo), 0, SEEK_END) == 1024 * 1024,
	    "ring: 10 MiB written, %lld bytes kept",
	    (long long)lseek(fileno(fo), 0, SEEK_END));
	fclose(fo);
	tap_okf("", "", hwm1 >= 0 && hwm1 - hwm0 < 8 * 1024, "ring: daemon "
	    "peak memory grew %ld KiB (to %ld KiB)", hwm1 - hwm0, hwm1);

	/* follow streams until the process exits. */
	x.argv = a_tick;
	r = sp_chan_detach(c, &x, &tick, &e);
	fo = tmpfile();
	if (r == 0)
		r = sp_chan_logs(c, tick, 1, fileno(fo), &running, &e);
	i = pread(fileno(fo), out, sizeof out - 1, 0);
	out[i > 0 ? i : 0] = '\0';
	fclose(fo);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && !running &&
	    strcmp(out, "1\n2\n3\n") == 0, "logs -f streams to the end");
	sp_chan_close(c);
}

/*
 * A seed is exactly 64 hex digits: what sscanf's "%2x" let through (a sign,
 * a space, "0x") is refused as bad input.  Its time_ns is bad too: a
 * daemon that took the seed fails there, with another message, before it
 * would set the host name (the daemon has a UTS namespace of its own here
 * besides).
 */
static void
test_identity_seed(void)
{
	static const char *const bad[] = {
	    "+1", " f", "0x", "g0", "-0" };
	char seed[65];
	struct sp_err e = { SP_E_NONE, 0, "" };
	struct sp_chan *c;
	struct sp_frame f;
	uint32_t stream;
	json_t *req, *ans;
	const char *code, *msg;
	size_t i;
	int r;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		memset(seed, 'a', 64);
		seed[64] = '\0';
		memcpy(seed + 10, bad[i], 2);
		req = json_pack("{s:s, s:s, s:s, s:s, s:s}", "op", "identity",
		    "id", ID, "hostname", ID, "seed", seed, "time_ns", "bad");
		r = sp_chan_open_req(&c, dir, ID, 2000, req, &stream, &e);
		json_decref(req);
		if (!tap_okf(sp_code_name(e.code), e.msg, r == 0, "open with an identity op"))
			return;
		r = sp_chan_recv(c, &f, 2000, &e);
		ans = r == 0 && f.type == SP_FR_ERROR ?
		    json_loadb((const char *)f.data, f.len, 0, NULL) : NULL;
		code = json_string_value(json_object_get(ans, "error"));
		msg = json_string_value(json_object_get(ans, "msg"));
		tap_okf(sp_code_name(e.code), e.msg, code != NULL && msg != NULL &&
		    strcmp(code, "bad-input") == 0 &&
		    strstr(msg, "hex seed") != NULL,
		    "a seed with \"%s\" in it is bad input", bad[i]);
		json_decref(ans);
		sp_chan_close(c);
	}
}

/*
 * A first command sent ahead of its identity's answer (sp_chan_exec_ahead)
 * runs only after an identity that took: refused after one that failed
 * (no seed here: the op fails before it changes anything, so this test
 * does not rename the host it runs on) and on a connection without one.
 * And what stdin has at once goes with the request: all of /dev/null, or
 * a pipe's bytes and then its end.
 */
static void
test_after_identity(void)
{
	char ran[128], *a_touch[] = { "touch", ran, NULL };
	char *a_cat[] = { "cat", NULL };
	struct sp_exec x = { .argv = a_touch, .in_fd = -1, .out_fd = -1,
	    .err_fd = -1 };
	struct sp_err e = { SP_E_NONE, 0, "" };
	struct sp_chan *c;
	struct sp_frame f;
	uint32_t stream;
	json_t *req;
	char out[64];
	int r, st = -1, p[2];

	snprintf(ran, sizeof ran, "%s/ran", dir);
	req = json_pack("{s:s, s:s, s:s}", "op", "identity", "id", ID,
	    "hostname", ID);
	r = sp_chan_open_req(&c, dir, ID, 2000, req, &stream, &e);
	json_decref(req);
	if (!tap_okf(sp_code_name(e.code), e.msg, r == 0, "open with an identity op"))
		return;
	r = sp_chan_exec_ahead(c, &x, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0, "the daemon takes an exec sent ahead");
	tap_okf(sp_code_name(e.code), e.msg, sp_chan_recv(c, &f, 2000, &e) == 0 &&
	    f.type == SP_FR_ERROR && f.stream == stream,
	    "an identity without a seed fails");
	r = sp_chan_exec(c, &x, &st, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_BAD_STATE &&
	    access(ran, F_OK) == -1,
	    "the exec sent after it is refused, not run: bad-state");
	sp_chan_close(c);

	if (sp_chan_open(&c, dir, ID, 2000, &e) == -1)
		return;
	r = sp_chan_exec_ahead(c, &x, &e) == 0 ? sp_chan_exec(c, &x, &st, &e) :
	    0;
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_BAD_STATE &&
	    access(ran, F_OK) == -1,
	    "an exec sent ahead on a connection with no identity: bad-state");
	/* The same request without after_identity runs (the path is right). */
	r = sp_chan_exec(c, &x, &st, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && st == 0 && access(ran, F_OK) == 0,
	    "the same command sent plainly runs");

	x.argv = a_cat;
	x.in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	r = run_stdin(c, &x, out, sizeof out, &st, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && st == 0 && out[0] == '\0',
	    "cat with /dev/null as stdin: its end goes with the request");
	close(x.in_fd);
	if (pipe(p) == -1 || write(p[1], "abc", 3) != 3)
		abort();
	close(p[1]);
	x.in_fd = p[0];
	r = run_stdin(c, &x, out, sizeof out, &st, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && st == 0 && strcmp(out, "abc") == 0,
	    "cat with a pipe as stdin: its bytes there at once, then its end");
	close(p[0]);
	sp_chan_close(c);
}

int
main(void)
{
	char sub[300];
	const char *daemon;
	struct sp_chan *c;
	struct sp_err e;
	pid_t dpid;

	daemon = getenv("SPACE_DAEMON");
	if (daemon == NULL)
		daemon = "build/guest/space-daemon";
	if (access(daemon, X_OK) == -1) {
		printf("1..0 # SKIP no guest daemon at %s\n", daemon);
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof dir, "/tmp/test-procs.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(sub, sizeof sub, "%s/%s", dir, ID);
	snprintf(sock0, sizeof sock0, "%.80s/space.0.sock", sub);
	mkdir(sub, 0700);
	if ((dpid = fork()) == 0) {
		int nul = open("/dev/null", O_WRONLY);

		if (getenv("TEST_VERBOSE") == NULL)
			dup2(nul, 2);
		/* Started as a shell's background job starts it: the ^C test
		 * below then needs the daemon to give its commands SIGINT
		 * back (an ignored signal survives execve). */
		signal(SIGINT, SIG_IGN);
		signal(SIGQUIT, SIG_IGN);
		/* An identity op that took would name the host it runs on:
		 * as root, the daemon gets a host name of its own. */
		if (geteuid() == 0)
			(void)unshare(CLONE_NEWUTS);
		execl(daemon, daemon, "-l", sock0, (char *)NULL);
		_exit(127);
	}
	if (tap_okf("", "", sp_chan_wait_ready(dir, ID, 5000, &e) == 0,
	    "daemon ready") && sp_chan_open(&c, dir, ID, 2000, &e) == 0) {
		if (geteuid() == 0)
			test_user(c);
		else
			printf("ok %d # SKIP user switch needs root\n", ++tap_n);
		test_signal_timeout(c);
		test_pty(c);
		sp_chan_close(c);
		test_detached(dpid);
		test_identity_seed();
		test_after_identity();
	}
	kill(dpid, SIGTERM);
	waitpid(dpid, NULL, 0);
	snprintf(sub, sizeof sub, "rm -rf '%s'", dir);
	(void)!system(sub);
	return tap_done();
}
