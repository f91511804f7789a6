/*
 * sp_procs: the host's calls about the guest daemon's processes (ps, logs,
 * kill), built on the channel's generic exchange.  What the guest says
 * about its processes is checked field by field and rebuilt, so that a
 * hostile guest cannot pass anything but well-formed records up to a
 * command's output.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_vm.h"

#define ASK_MS		10000	/* a guest that says nothing for this long is gone */
#define PS_MAX		4096	/* records in one answer */

static int
int_in(json_t *j, const char *key, json_int_t lo, json_int_t hi)
{
	json_t *v = json_object_get(j, key);

	return json_is_integer(v) && json_integer_value(v) >= lo &&
	    json_integer_value(v) <= hi;
}

/* The record of one process, rebuilt from the guest's; NULL when bad. */
static json_t *
proc_check(json_t *g)
{
	json_t *r = NULL, *argv, *s, *a = NULL;
	const char *st;
	size_t i;

	argv = json_object_get(g, "argv");
	st = json_string_value(json_object_get(g, "state"));
	if (!int_in(g, "pid", 1, INT_MAX) || !json_is_array(argv) ||
	    st == NULL || (strcmp(st, "running") != 0 &&
	    strcmp(st, "exited") != 0) || !int_in(g, "started", 0, INT64_MAX) ||
	    !json_is_boolean(json_object_get(g, "detached")) ||
	    !json_is_boolean(json_object_get(g, "tty")))
		return NULL;
	if ((a = json_array()) == NULL)
		return NULL;
	json_array_foreach(argv, i, s)
		if (!json_is_string(s) || json_array_append(a, s) == -1)
			goto bad;
	r = json_pack("{s:O,s:o,s:s,s:O,s:O,s:O}", "pid",
	    json_object_get(g, "pid"), "argv", a, "state", st, "started",
	    json_object_get(g, "started"), "detached",
	    json_object_get(g, "detached"), "tty", json_object_get(g, "tty"));
	a = NULL;
	if (r == NULL || strcmp(st, "running") == 0)
		return r;
	if (int_in(g, "status", 0, 255))
		json_object_set(r, "status", json_object_get(g, "status"));
	else if (int_in(g, "signal", 1, 64))
		json_object_set(r, "signal", json_object_get(g, "signal"));
	else
		goto bad;
	return r;
bad:
	json_decref(a);
	json_decref(r);
	return NULL;
}

/* Sends req on a fresh stream; *stream gets it. */
static int
ask(struct sp_chan *c, json_t *req, uint32_t *stream, struct sp_err *e)
{
	int rc;

	if (req == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "cannot build a request");
	*stream = sp_chan_stream_new(c);
	rc = sp_chan_send_json(c, SP_FR_REQ, *stream, req, ASK_MS, e);
	json_decref(req);
	return rc;
}

/* The next frame of this stream; an ERROR becomes e. */
static int
answer(struct sp_chan *c, uint32_t stream, int timeout_ms,
    struct sp_frame *f, struct sp_err *e)
{
	if (sp_chan_recv(c, f, timeout_ms, e) == -1)
		return -1;
	if (f->type == SP_FR_ERROR && (f->stream == stream || f->stream == 0))
		return sp_chan_error_frame(f, e);
	if (f->stream != stream)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "the guest answered on "
		    "stream %u, not %u", f->stream, stream);
	return 0;
}

int
sp_chan_ps(struct sp_chan *c, int (*fn)(json_t *, void *), void *arg,
    struct sp_err *e)
{
	struct sp_frame f;
	uint32_t stream;
	json_t *g, *r;
	int n, stop = 0;

	if (ask(c, json_pack("{s:s}", "op", "ps"), &stream, e) == -1)
		return -1;
	for (n = 0;; n++) {
		if (answer(c, stream, ASK_MS, &f, e) == -1)
			return -1;
		if (f.type == SP_FR_EXIT)
			return 0;
		if (f.type != SP_FR_STDOUT || n == PS_MAX)
			return sp_err_set(e, SP_E_PROTOCOL, 0, "bad ps answer");
		if (sp_frame_json(&f, &g, e) == -1)
			return -1;
		r = proc_check(g);
		json_decref(g);
		if (r == NULL)
			return sp_err_set(e, SP_E_PROTOCOL, 0, "bad process "
			    "record from the guest");
		/* The rest is read all the same: the stream must end. */
		if (!stop)
			stop = fn(r, arg);
		json_decref(r);
	}
}

/* Writes all of p to fd, waiting when it is nonblocking and full. */
static int
put(int fd, const unsigned char *p, size_t n)
{
	struct pollfd pfd;
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, p, n)) == -1) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -1;
			pfd.fd = fd;
			pfd.events = POLLOUT;
			poll(&pfd, 1, -1);
			continue;
		}
		p += w;
		n -= w;
	}
	return 0;
}

int
sp_chan_logs(struct sp_chan *c, pid_t pid, int follow, int fd, int *running,
    struct sp_err *e)
{
	struct sp_frame f;
	uint32_t stream;
	json_t *j;

	if (running != NULL)
		*running = 0;
	if (ask(c, json_pack("{s:s,s:i,s:b}", "op", "logs", "pid", (int)pid,
	    "follow", follow), &stream, e) == -1)
		return -1;
	for (;;) {
		/* Following waits as long as the process is quiet. */
		if (answer(c, stream, follow ? -1 : ASK_MS, &f, e) == -1)
			return -1;
		if (f.type == SP_FR_EXIT)
			break;
		if (f.type != SP_FR_STDOUT)
			return sp_err_set(e, SP_E_PROTOCOL, 0, "bad logs answer");
		if (put(fd, f.data, f.len) == -1)
			return sp_err_sys(e, SP_E_IO, "writing the logs");
	}
	if (sp_frame_json(&f, &j, e) == -1)
		return -1;
	if (running != NULL)
		*running = json_is_true(json_object_get(j, "running"));
	json_decref(j);
	return 0;
}

int
sp_chan_kill(struct sp_chan *c, pid_t pid, int sig, struct sp_err *e)
{
	if (sig < 0 || sig > 64)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "no signal %d", sig);
	return sp_chan_call(c, json_pack("{s:s,s:i,s:i}", "op", "kill", "pid",
	    (int)pid, "signal", sig), ASK_MS, NULL, e);
}

int
sp_chan_open_running(struct sp_ctx *x, const char *id, struct sp_chan **c,
    int timeout_ms, struct sp_err *e)
{
	struct sp_sandbox_row row;
	enum sp_state st;

	*c = NULL;
	if (sp_id_check(id, e) == -1 ||
	    sp_db_sandbox_get(x->db, id, &row, e) == -1)
		return -1;
	st = row.state;
	sp_db_row_release(&row);
	if (st != SP_ST_RUNNING)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "sandbox is %s, not "
		    "running", sp_state_name(st));
	return sp_chan_open(c, x->conf.run, id, timeout_ms, e);
}
