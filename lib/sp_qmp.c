/*
 * sp_qmp: QEMU's own monitor, the second one each sandbox VM gets beside
 * libvirt's (sp_virt.c adds it as run/qmp.sock).  A claim from the warm pool
 * resumes its pod through it: a few lines of JSON instead of loading libvirt
 * and a round of RPCs through libvirtd.  libvirt hears QEMU's RESUME event
 * on its own monitor and records the domain as running.
 *
 * QEMU is the host's process, but it runs a hostile guest: every line it
 * sends is bounded, every wait has a deadline, and only the answers the
 * caller asked for are kept (events are skipped).
 */
#include <sys/socket.h>

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_vm.h"

#define QMP_LINE_MAX	(64 * 1024)
#define QMP_SKIP_MAX	64	/* events before an answer, at most */
#define CAPABILITIES	"{\"execute\":\"qmp_capabilities\"}\n"

struct sp_qmp {
	int fd;
	int greeted;		/* the greeting and capabilities' answer read */
	int64_t deadline;
	size_t len;		/* bytes in buf */
	size_t used;		/* of them, the line read_line() returned */
	char buf[QMP_LINE_MAX];
};

static int
wait_fd(struct sp_qmp *q, short ev, struct sp_err *e)
{
	struct pollfd p = { q->fd, ev, 0 };
	int64_t left;
	int r;

	for (;;) {
		if ((left = q->deadline - sp_clock_ms()) <= 0)
			return sp_err_set(e, SP_E_TIMED_OUT, 1, "QEMU's monitor did "
			    "not answer in time");
		if ((r = poll(&p, 1, (int)left)) == 1)
			return 0;
		if (r == -1 && errno != EINTR)
			return sp_err_sys(e, SP_E_IO, "poll on QEMU's monitor");
	}
}

/* The next line, without its end ("\n" or "\r\n"), NUL-terminated at the
 * start of q->buf; consume() drops it before the next is read. */
static int
read_line(struct sp_qmp *q, size_t *n, struct sp_err *e)
{
	char *nl;
	ssize_t r;

	for (;;) {
		if ((nl = memchr(q->buf, '\n', q->len)) != NULL) {
			*n = (size_t)(nl - q->buf);
			q->used = *n + 1;
			*nl = '\0';
			if (*n > 0 && q->buf[*n - 1] == '\r')
				q->buf[--*n] = '\0';
			return 0;
		}
		if (q->len == sizeof q->buf)
			return sp_err_set(e, SP_E_PROTOCOL, 0, "QEMU's monitor sent "
			    "a line over %d bytes", QMP_LINE_MAX);
		r = read(q->fd, q->buf + q->len, sizeof q->buf - q->len);
		if (r > 0) {
			q->len += (size_t)r;
			continue;
		}
		if (r == 0)
			return sp_err_set(e, SP_E_NOT_RUNNING, 1, "QEMU closed its "
			    "monitor");
		if (errno == EINTR)
			continue;
		if (errno == ECONNRESET)
			return sp_err_set(e, SP_E_NOT_RUNNING, 1, "QEMU closed its "
			    "monitor");
		if (errno != EAGAIN)
			return sp_err_sys(e, SP_E_IO, "reading QEMU's monitor");
		if (wait_fd(q, POLLIN, e) == -1)
			return -1;
	}
}

/* Drops the line read_line() returned, and its end. */
static void
consume(struct sp_qmp *q)
{
	memmove(q->buf, q->buf + q->used, q->len - q->used);
	q->len -= q->used;
	q->used = 0;
}

/* The next message that is not an event, as a JSON object. */
static int
next_reply(struct sp_qmp *q, json_t **out, struct sp_err *e)
{
	json_error_t je;
	json_t *j;
	size_t n = 0;
	int i;

	for (i = 0; i <= QMP_SKIP_MAX; i++) {
		if (read_line(q, &n, e) == -1)
			return -1;
		j = json_loadb(q->buf, n, JSON_REJECT_DUPLICATES, &je);
		consume(q);
		if (!json_is_object(j)) {
			json_decref(j);
			return sp_err_set(e, SP_E_PROTOCOL, 0, "QEMU's monitor sent "
			    "something not a JSON object");
		}
		if (json_object_get(j, "event") == NULL) {
			*out = j;
			return 0;
		}
		json_decref(j);
	}
	return sp_err_set(e, SP_E_PROTOCOL, 0, "QEMU's monitor sent over %d events "
	    "and no answer", QMP_SKIP_MAX);
}

static int
send_all(struct sp_qmp *q, const char *s, size_t n, struct sp_err *e)
{
	ssize_t w;

	while (n > 0) {
		w = send(q->fd, s, n, MSG_NOSIGNAL);
		if (w > 0) {
			s += w;
			n -= (size_t)w;
			continue;
		}
		if (w == -1 && errno == EINTR)
			continue;
		if (w == -1 && (errno == EPIPE || errno == ECONNRESET))
			return sp_err_set(e, SP_E_NOT_RUNNING, 1, "QEMU closed its "
			    "monitor");
		if (w == -1 && errno != EAGAIN)
			return sp_err_sys(e, SP_E_IO, "writing QEMU's monitor");
		if (wait_fd(q, POLLOUT, e) == -1)
			return -1;
	}
	return 0;
}

/* The answer to cmd: its "return" in *ret (when ret is not NULL). */
static int
answer(struct sp_qmp *q, const char *cmd, json_t **ret, struct sp_err *e)
{
	json_t *j = NULL, *v, *err;
	int rc = -1;

	if (next_reply(q, &j, e) == -1)
		return -1;
	if ((err = json_object_get(j, "error")) != NULL) {
		sp_err_set(e, SP_E_QEMU, 0, "%s: %.200s", cmd,
		    json_is_string(json_object_get(err, "desc")) ?
		    json_string_value(json_object_get(err, "desc")) :
		    "an error without a description");
		goto out;
	}
	if ((v = json_object_get(j, "return")) == NULL) {
		sp_err_set(e, SP_E_PROTOCOL, 0, "%s: QEMU's answer has no return",
		    cmd);
		goto out;
	}
	if (ret != NULL)
		*ret = json_incref(v);
	rc = 0;
out:
	json_decref(j);
	return rc;
}

/* The greeting, then the answer to the capabilities negotiation. */
static int
greeting(struct sp_qmp *q, struct sp_err *e)
{
	json_t *greet = NULL;

	if (next_reply(q, &greet, e) == -1)
		return -1;
	if (json_object_get(greet, "QMP") == NULL) {
		json_decref(greet);
		return sp_err_set(e, SP_E_PROTOCOL, 0, "QEMU's monitor did not "
		    "greet");
	}
	json_decref(greet);
	if (answer(q, "qmp_capabilities", NULL, e) == -1)
		return -1;
	q->greeted = 1;
	return 0;
}

/*
 * Sends n commands in one write, then reads their answers, which QEMU gives
 * in order: one turn of its main loop instead of n.  The first write of a
 * connection opens command mode in it too (capabilities negotiation, which
 * may go before the greeting is read: QEMU greets as it accepts and reads
 * what we sent after that).  rets (may be NULL) gets each one's "return",
 * NULL for those that did not answer.
 */
int
sp_qmp_cmds(struct sp_qmp *q, const char *const cmds[], size_t n,
    json_t *rets[], struct sp_err *e)
{
	char line[512];
	size_t i, len = 0;
	int w;

	line[0] = '\0';
	if (!q->greeted) {
		memcpy(line, CAPABILITIES, sizeof CAPABILITIES);
		len = sizeof CAPABILITIES - 1;
	}
	for (i = 0; i < n; i++) {
		if (rets != NULL)
			rets[i] = NULL;
		w = snprintf(line + len, sizeof line - len,
		    "{\"execute\":\"%s\"}\n", cmds[i]);
		if (w < 0 || (size_t)w >= sizeof line - len ||
		    strpbrk(cmds[i], "\"\\") != NULL)
			return sp_err_set(e, SP_E_INTERNAL, 0, "bad QMP command");
		len += (size_t)w;
	}
	if (send_all(q, line, len, e) == -1 ||
	    (!q->greeted && greeting(q, e) == -1))
		return -1;
	for (i = 0; i < n; i++)
		if (answer(q, cmds[i], rets != NULL ? &rets[i] : NULL, e) == -1)
			return -1;
	return 0;
}

int
sp_qmp_cmd(struct sp_qmp *q, const char *cmd, json_t **ret, struct sp_err *e)
{
	const char *cmds[1] = { cmd };

	return sp_qmp_cmds(q, cmds, 1, ret, e);
}

int
sp_qmp_open(struct sp_qmp **qp, const char *run_dir, int timeout_ms,
    struct sp_err *e)
{
	char path[SP_PATH_MAX];
	struct sp_qmp *q;

	*qp = NULL;
	if (sp_path_fmt(path, sizeof path, e, "%s/%s", run_dir, SP_QMP_SOCK) == -1)
		return -1;
	if ((q = malloc(sizeof *q)) == NULL)
		return sp_err_sys(e, SP_E_NOMEM, "QMP");
	q->len = q->used = 0;
	q->greeted = 0;
	q->deadline = sp_clock_ms() + timeout_ms;
	/* not-running: no monitor of ours, a VM defined before there was one.
	 * Command mode is asked for with the first commands, in their write:
	 * a claim costs QEMU's main loop one turn, not two. */
	if (sp_qemu_connect(path, q->deadline, &q->fd, e) == -1) {
		q->fd = -1;
		sp_qmp_close(q);
		return -1;
	}
	*qp = q;
	return 0;
}

void
sp_qmp_close(struct sp_qmp *q)
{
	if (q == NULL)
		return;
	if (q->fd >= 0)
		close(q->fd);
	free(q);
}
