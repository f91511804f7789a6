/*
 * sp_api_proc.c: commands started through the HTTP API.  A worker thread
 * runs each with sp_chan_exec, as space-exec would, on pipes: the stream
 * that answers the request reads its output from them, and other requests
 * reach it by sandbox and pid (its stdin, a signal, its pty's size) until
 * it ends.  The command's pid is the guest's (the daemon announces it).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "sp_api.h"
#include "sp_api_int.h"

struct sp_api_proc {
	char id[SP_ID_LEN + 1];
	char tag[SP_NAME_MAX + 1];
	json_t *config;
	struct sp_chan *chan;		/* opened by the request, the worker's */
	char **argv, **env;
	char *cwd, *user;
	int tty, rows, cols;
	int in_w, ctl_w;		/* ours to write; -1 when closed */
	int in_r, ctl_r, out_w, err_w;	/* the worker's */
	int out_r, err_r;		/* the stream's; -1 at EOF */
	pthread_t worker;
	int joined;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pid_t pid;			/* 0 until it started */
	int done;			/* the worker is over */
	int status, signaled, failed;
	struct sp_err err;
	struct sp_api_proc *next;	/* in procs, while it runs */
};

static pthread_mutex_t procs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sp_api_proc *procs;

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void
strv_free(char **v)
{
	size_t i;

	for (i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

static char **
strv_dup(char **v)
{
	size_t n, i;
	char **d;

	if (v == NULL)
		return NULL;
	for (n = 0; v[n] != NULL; n++)
		;
	if ((d = calloc(n + 1, sizeof *d)) == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if ((d[i] = strdup(v[i])) == NULL) {
			strv_free(d);
			return NULL;
		}
	return d;
}

static void
started(void *arg, pid_t pid)
{
	struct sp_api_proc *p = arg;

	pthread_mutex_lock(&p->mu);
	p->pid = pid;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

static void *
work(void *arg)
{
	struct sp_api_proc *p = arg;
	struct sp_exec xr = { .argv = p->argv, .env = p->env, .env_add = 1,
	    .cwd = p->cwd, .user = p->user, .tty = p->tty, .rows = p->rows,
	    .cols = p->cols, .in_fd = p->in_r, .out_fd = p->out_w,
	    .err_fd = p->tty ? -1 : p->err_w, .ctl_fd = p->ctl_r,
	    .started = started, .started_arg = p };
	struct sp_err e;
	int status = 0, signaled = 0, rc;

	xr.signaled = &signaled;
	rc = sp_chan_exec(p->chan, &xr, &status, &e);
	sp_chan_close(p->chan);
	p->chan = NULL;
	/* The stream sees EOF once it has read what is left. */
	close_fd(&p->out_w);
	close_fd(&p->err_w);
	pthread_mutex_lock(&p->mu);
	p->done = 1;
	p->status = status;
	p->signaled = signaled;
	if (rc == -1) {
		p->failed = 1;
		p->err = e;
	}
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static void
proc_free(struct sp_api_proc *p)
{
	close_fd(&p->in_w);
	close_fd(&p->ctl_w);
	close_fd(&p->in_r);
	close_fd(&p->ctl_r);
	close_fd(&p->out_w);
	close_fd(&p->err_w);
	close_fd(&p->out_r);
	close_fd(&p->err_r);
	strv_free(p->argv);
	strv_free(p->env);
	free(p->cwd);
	free(p->user);
	json_decref(p->config);
	sp_chan_close(p->chan);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}

int
sp_api_proc_start(struct sp_ctx *x, const struct sp_api_start *s,
    struct sp_api_proc **pp, struct sp_err *e)
{
	struct sp_api_proc *p;
	int in[2] = { -1, -1 }, ctl[2] = { -1, -1 }, out[2] = { -1, -1 };
	int err[2] = { -1, -1 };

	*pp = NULL;
	if ((p = calloc(1, sizeof *p)) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	snprintf(p->id, sizeof p->id, "%s", s->id);
	snprintf(p->tag, sizeof p->tag, "%s", s->tag ? s->tag : "");
	p->config = json_incref(s->config);
	p->tty = s->tty;
	p->rows = s->rows;
	p->cols = s->cols;
	p->in_w = p->ctl_w = p->in_r = p->ctl_r = -1;
	p->out_w = p->err_w = p->out_r = p->err_r = -1;
	if ((p->argv = strv_dup(s->argv)) == NULL ||
	    (s->env != NULL && (p->env = strv_dup(s->env)) == NULL) ||
	    (s->cwd != NULL && (p->cwd = strdup(s->cwd)) == NULL) ||
	    (s->user != NULL && (p->user = strdup(s->user)) == NULL)) {
		proc_free(p);
		return sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
	}
	if (pipe2(in, O_CLOEXEC) == -1 || pipe2(ctl, O_CLOEXEC) == -1 ||
	    pipe2(out, O_CLOEXEC) == -1 || pipe2(err, O_CLOEXEC) == -1) {
		sp_err_sys(e, SP_E_IO, "pipe");
		close_fd(&in[0]), close_fd(&in[1]), close_fd(&ctl[0]);
		close_fd(&ctl[1]), close_fd(&out[0]), close_fd(&out[1]);
		close_fd(&err[0]), close_fd(&err[1]);
		proc_free(p);
		return -1;
	}
	/* A port of the guest's daemon, taken here: its errors (a sandbox
	 * not running, every port busy) are the request's. */
	if (sp_sandbox_chan(x, s->id, &p->chan, e) == -1) {
		close_fd(&in[0]), close_fd(&in[1]), close_fd(&ctl[0]);
		close_fd(&ctl[1]), close_fd(&out[0]), close_fd(&out[1]);
		close_fd(&err[0]), close_fd(&err[1]);
		proc_free(p);
		return -1;
	}
	p->in_r = in[0], p->in_w = in[1];
	p->ctl_r = ctl[0], p->ctl_w = ctl[1];
	p->out_r = out[0], p->out_w = out[1];
	p->err_r = err[0], p->err_w = err[1];
	/* Without stdin, the command reads EOF at once. */
	if (!s->keep_stdin)
		close_fd(&p->in_w);
	if (pthread_create(&p->worker, NULL, work, p) != 0) {
		proc_free(p);
		return sp_err_set(e, SP_E_NOMEM, 1, "cannot start a thread");
	}
	pthread_mutex_lock(&procs_mu);
	p->next = procs;
	procs = p;
	pthread_mutex_unlock(&procs_mu);
	*pp = p;
	return 0;
}

pid_t
sp_api_proc_pid(struct sp_api_proc *p, struct sp_err *e)
{
	pid_t pid;

	pthread_mutex_lock(&p->mu);
	while (p->pid == 0 && !p->done)
		pthread_cond_wait(&p->cv, &p->mu);
	pid = p->pid;
	if (pid == 0)
		*e = p->err;
	pthread_mutex_unlock(&p->mu);
	return pid > 0 ? pid : -1;
}

int
sp_api_proc_read(struct sp_api_proc *p, char *buf, size_t max, size_t *n,
    int *which, int wait_ms)
{
	struct pollfd pfd[2];
	ssize_t r;
	int i;

	for (;;) {
		if (p->out_r < 0 && p->err_r < 0)
			return 0;
		pfd[0].fd = p->out_r;
		pfd[1].fd = p->err_r;
		pfd[0].events = pfd[1].events = POLLIN;
		r = poll(pfd, 2, wait_ms);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			return -1;
		if (r == 0)
			return -2;
		for (i = 0; i < 2; i++) {
			if (pfd[i].revents == 0)
				continue;
			r = read(pfd[i].fd, buf, max);
			if (r == -1 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (r <= 0) {
				close_fd(i == 0 ? &p->out_r : &p->err_r);
				continue;
			}
			*n = (size_t)r;
			*which = i + 1;
			return 1;
		}
	}
}

int
sp_api_proc_wait(struct sp_api_proc *p, int *status, int *signaled,
    struct sp_err *e)
{
	int rc;

	pthread_mutex_lock(&p->mu);
	while (!p->done)
		pthread_cond_wait(&p->cv, &p->mu);
	*status = p->status;
	*signaled = p->signaled;
	rc = p->failed ? -1 : 0;
	if (p->failed)
		*e = p->err;
	pthread_mutex_unlock(&p->mu);
	return rc;
}

void
sp_api_proc_release(struct sp_api_proc *p)
{
	struct sp_api_proc **q;

	if (p == NULL)
		return;
	pthread_mutex_lock(&procs_mu);
	for (q = &procs; *q != NULL; q = &(*q)->next)
		if (*q == p) {
			*q = p->next;
			break;
		}
	pthread_mutex_unlock(&procs_mu);
	/* A stream cut short: the command is killed, as when space-exec's
	 * client goes (its channel closes), and then waited for. */
	pthread_mutex_lock(&p->mu);
	if (!p->done) {
		close_fd(&p->out_r);
		close_fd(&p->err_r);
	}
	pthread_mutex_unlock(&p->mu);
	if (p->ctl_w >= 0) {
		struct sp_exec_ctl k = { SIGKILL, 0, 0 };

		if (!p->done)
			(void)!write(p->ctl_w, &k, sizeof k);
	}
	pthread_join(p->worker, NULL);
	proc_free(p);
}

/* Finds a running command of ours and calls fn on it under procs_mu. */
static int
with_proc(const char *id, pid_t pid, int (*fn)(struct sp_api_proc *, void *),
    void *arg, struct sp_err *e)
{
	struct sp_api_proc *p;
	int rc;

	pthread_mutex_lock(&procs_mu);
	for (p = procs; p != NULL; p = p->next)
		if (p->pid == pid && strcmp(p->id, id) == 0 && !p->done)
			break;
	if (p == NULL) {
		pthread_mutex_unlock(&procs_mu);
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "process %d is not a "
		    "running command started through the API", (int)pid);
	}
	rc = fn(p, arg);
	pthread_mutex_unlock(&procs_mu);
	if (rc == -1)
		return sp_err_sys(e, SP_E_IO, "process %d", (int)pid);
	if (rc == -2)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "process %d has no stdin "
		    "open", (int)pid);
	return 0;
}

static int
dup_input(struct sp_api_proc *p, void *arg)
{
	int *fd = arg;

	if (p->in_w < 0)
		return -2;
	return (*fd = fcntl(p->in_w, F_DUPFD_CLOEXEC, 0)) == -1 ? -1 : 0;
}

int
sp_api_proc_input(const char *id, pid_t pid, const void *data, size_t n,
    struct sp_err *e)
{
	int fd = -1, rc = 0;

	/* Written outside the table's lock: a command that does not read
	 * fills the pipe, and only this request waits for it. */
	if (with_proc(id, pid, dup_input, &fd, e) == -1)
		return -1;
	if (sp_write_all(fd, data, n) == -1)
		rc = sp_err_sys(e, errno == EPIPE ? SP_E_BAD_STATE : SP_E_IO,
		    "stdin of process %d", (int)pid);
	close(fd);
	return rc;
}

static int
end_input(struct sp_api_proc *p, void *arg)
{
	close_fd(&p->in_w);
	return 0;
}

int
sp_api_proc_close_input(const char *id, pid_t pid, struct sp_err *e)
{
	return with_proc(id, pid, end_input, NULL, e);
}

static int
put_ctl(struct sp_api_proc *p, void *arg)
{
	return write(p->ctl_w, arg, sizeof(struct sp_exec_ctl)) ==
	    sizeof(struct sp_exec_ctl) ? 0 : -1;
}

int
sp_api_proc_signal(const char *id, pid_t pid, int sig, struct sp_err *e)
{
	struct sp_exec_ctl k = { sig, 0, 0 };

	if (sig < 1 || sig > 64)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "no signal %d", sig);
	return with_proc(id, pid, put_ctl, &k, e);
}

int
sp_api_proc_resize(const char *id, pid_t pid, int rows, int cols,
    struct sp_err *e)
{
	struct sp_exec_ctl k = { 0, rows, cols };

	if (rows < 1 || rows > 4096 || cols < 1 || cols > 4096)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "rows and cols are 1 to "
		    "4096");
	return with_proc(id, pid, put_ctl, &k, e);
}

int
sp_api_proc_each(const char *id,
    void (*fn)(pid_t pid, const char *tag, json_t *config, void *arg),
    void *arg)
{
	struct sp_api_proc *p;

	pthread_mutex_lock(&procs_mu);
	for (p = procs; p != NULL; p = p->next)
		if (strcmp(p->id, id) == 0 && p->pid > 0 && !p->done)
			fn(p->pid, p->tag, p->config, arg);
	pthread_mutex_unlock(&procs_mu);
	return 0;
}

/* ---- what the handlers share ---- */

json_t *
sp_api_b64(const void *p, size_t n)
{
	size_t len = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
	char *s = malloc(len);
	json_t *j;

	if (s == NULL)
		return NULL;
	sodium_bin2base64(s, len, p, n, sodium_base64_VARIANT_ORIGINAL);
	j = json_string(s);
	free(s);
	return j;
}

void
sp_api_home(const char *user, char *out, size_t n)
{
	if (user == NULL || user[0] == '\0' || strcmp(user, "root") == 0)
		snprintf(out, n, "/root");
	else
		snprintf(out, n, "/home/%s", user);
}

/* A guest file or tree, written to a pipe by a thread while the answer
 * reads the other end: memory stays a frame whatever its size. */
struct file_out {
	struct sp_chan *ch;
	char path[SP_PATH_MAX];
	int tar;
	int wfd, rfd;
	pthread_t t;
};

static void *
file_out_run(void *arg)
{
	struct file_out *j = arg;
	struct sp_err e;

	if (j->tar)
		sp_fs_tar_out(j->ch, j->path, NULL, j->wfd, &e);
	else
		sp_fs_read(j->ch, j->path, j->wfd, NULL, &e);
	close(j->wfd);
	return NULL;
}

ssize_t
sp_api_fd_read(int fd, char *buf, size_t max)
{
	ssize_t n;

	do
		n = read(fd, buf, max);
	while (n == -1 && errno == EINTR);
	return n;
}

static ssize_t
file_out_read(void *arg, char *buf, size_t max)
{
	return sp_api_fd_read(((struct file_out *)arg)->rfd, buf, max);
}

static void
file_out_free(void *arg)
{
	struct file_out *j = arg;

	close(j->rfd);
	pthread_join(j->t, NULL);
	sp_chan_close(j->ch);
	free(j);
}

int
sp_api_file_stream(struct sp_api_call *c, struct sp_chan *ch,
    const char *path, int tar, struct sp_err *e)
{
	struct file_out *j;
	json_t *st = NULL;
	int p[2];

	/* A file that is not there answers 404, before the stream. */
	if (!tar && sp_fs_stat(ch, path, 1, &st, e) == -1)
		goto fail;
	if (!tar && strcmp(json_string_value(json_object_get(st, "type")),
	    "file") != 0) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "%s is not a file", path);
		goto fail;
	}
	json_decref(st);
	st = NULL;
	if ((j = calloc(1, sizeof *j)) == NULL) {
		sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
		goto fail;
	}
	if (pipe2(p, O_CLOEXEC) == -1) {
		free(j);
		sp_err_sys(e, SP_E_IO, "pipe");
		goto fail;
	}
	j->ch = ch;
	j->tar = tar;
	snprintf(j->path, sizeof j->path, "%s", path);
	j->rfd = p[0];
	j->wfd = p[1];
	if (pthread_create(&j->t, NULL, file_out_run, j) != 0) {
		close(p[0]);
		close(p[1]);
		free(j);
		sp_err_set(e, SP_E_NOMEM, 1, "cannot start a thread");
		goto fail;
	}
	c->status = 200;
	c->ctype = tar ? "application/x-tar" : "application/octet-stream";
	c->reader = file_out_read;
	c->reader_free = file_out_free;
	c->reader_arg = j;
	return 0;
fail:
	json_decref(st);
	sp_chan_close(ch);
	return -1;
}

/* ---- a command's answer: its events, in the format of the API ---- */

#define KEEPALIVE_MS	25000	/* an event at least this often */

struct sp_api_pstream {
	struct sp_api_proc *p;
	const struct sp_api_pstream_ops *ops;
	int stage;		/* 0 start, 1 output, 2 end, 3 done */
	int failed;		/* an event could not be made */
	char *pend;		/* bytes not handed out yet */
	size_t plen, poff;
	char buf[SP_API_CHUNK];
};

void
sp_api_pstream_put(struct sp_api_pstream *s, const void *p, size_t n)
{
	char *nb;

	if (p == NULL || (nb = realloc(s->pend, s->plen + n)) == NULL) {
		s->failed = 1;
		return;
	}
	memcpy(nb + s->plen, p, n);
	s->pend = nb;
	s->plen += n;
}

void
sp_api_pstream_json(struct sp_api_pstream *s, int flags, json_t *j, int line)
{
	char *t;

	if (line) {
		if ((t = json_dumps(j, JSON_COMPACT)) != NULL) {
			sp_api_pstream_put(s, t, strlen(t));
			sp_api_pstream_put(s, "\n", 1);
		} else
			s->failed = 1;
		free(t);
		json_decref(j);
	} else if (j == NULL || sp_connect_wrap(&s->pend, &s->plen, flags,
	    j) == -1)
		s->failed = 1;
}

static ssize_t
pstream_read(void *arg, char *buf, size_t max)
{
	struct sp_api_pstream *s = arg;
	struct sp_err e;
	size_t n;
	pid_t pid;
	int which, r, status, sig;

	while (s->poff == s->plen) {
		free(s->pend);
		s->pend = NULL;
		s->plen = s->poff = 0;
		switch (s->stage) {
		case 0:
			if ((pid = sp_api_proc_pid(s->p, &e)) < 0) {
				s->ops->fail(s, &e);
				s->stage = 3;
			} else {
				s->ops->start(s, pid);
				s->stage = 1;
			}
			break;
		case 1:
			r = sp_api_proc_read(s->p, s->buf, sizeof s->buf, &n,
			    &which, KEEPALIVE_MS);
			if (r == 1)
				s->ops->data(s, which, s->buf, n);
			else if (r == -2)
				s->ops->keepalive(s);
			else
				s->stage = 2;
			break;
		case 2:
			if (sp_api_proc_wait(s->p, &status, &sig, &e) == -1)
				s->ops->fail(s, &e);
			else
				s->ops->end(s, status, sig);
			s->stage = 3;
			break;
		default:
			return 0;
		}
		if (s->failed)
			return -1;	/* out of memory: cut the stream */
	}
	n = s->plen - s->poff < max ? s->plen - s->poff : max;
	memcpy(buf, s->pend + s->poff, n);
	s->poff += n;
	return (ssize_t)n;
}

static void
pstream_free(void *arg)
{
	struct sp_api_pstream *s = arg;

	sp_api_proc_release(s->p);
	free(s->pend);
	free(s);
}

int
sp_api_pstream_answer(struct sp_api_call *c, struct sp_api_proc *p,
    const struct sp_api_pstream_ops *ops, const char *ctype, struct sp_err *e)
{
	struct sp_api_pstream *s;

	if ((s = calloc(1, sizeof *s)) == NULL) {
		sp_api_proc_release(p);
		return sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
	}
	s->p = p;
	s->ops = ops;
	c->status = 200;
	c->ctype = ctype;
	c->reader = pstream_read;
	c->reader_free = pstream_free;
	c->reader_arg = s;
	return 0;
}
