/*
 * daemon-procs: the processes the daemon started.  A call's command is in
 * the table while it runs; a detached one stays after its call and its
 * connection, with a thread that keeps its output in a bounded ring buffer
 * (the oldest bytes go first) and reaps it.  The ops ps, logs and kill work
 * on this table only: the daemon never signals a process it did not start.
 */
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"

#define ARGV_KEEP	4096	/* bytes of argv a ps line shows */
#define FOLLOW_POLL_MS	200

struct proc {
	int used;
	pid_t pid;
	uint64_t seq;		/* order of start: the oldest goes first */
	json_t *argv;
	int64_t started;	/* unix seconds */
	int detached, tty;
	int exited, wstatus;
	int thread_done;	/* the detached thread no longer uses this */
	unsigned char *ring;	/* cap bytes, len of them used from head */
	size_t cap, len, head;
	uint64_t total;		/* bytes ever written */
};

struct keeper {
	int slot;
	pid_t pid;
	int pidfd, outfd;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct proc procs[PROCS_MAX];
static uint64_t seq;

/* A number of digits only, as a uid or gid; -1 when it is not one. */
static json_int_t
id_num(const char *s)
{
	json_int_t n = 0;

	if (*s == '\0' || strlen(s) > 10)
		return -1;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		n = n * 10 + (*s - '0');
	}
	return n <= 0x7fffffff ? n : -1;
}

/* A group by name or number: its gid, or -1. */
static json_int_t
group_id(const char *g)
{
	char buf[4096];
	struct group gr, *gp;
	json_int_t gid = id_num(g);
	FILE *f;

	if (gid >= 0 || (f = fopen("/etc/group", "re")) == NULL)
		return gid;
	while (fgetgrent_r(f, &gr, buf, sizeof buf, &gp) == 0)
		if (strcmp(gr.gr_name, g) == 0) {
			gid = gr.gr_gid;
			break;
		}
	fclose(f);
	return gid;
}

/*
 * A call's user: a name or uid of /etc/passwd, or a bare uid, as a number or
 * a string; a string may add ":GROUP" (a name or gid), as an image config's
 * User does, and then that group is the only one.
 */
int
sd_user_resolve(json_t *v, struct spawn_spec *s, char *home, size_t n,
    char *why, size_t nwhy)
{
	char buf[4096], ubuf[256], *grp = NULL;
	struct passwd pw, *pp;
	struct group gr, *gp;
	const char *name = NULL;
	json_int_t uid = -1, gid = -1;
	FILE *f;
	int found = 0, i;

	if (json_is_string(v) && json_string_length(v) < sizeof ubuf) {
		memcpy(ubuf, json_string_value(v), json_string_length(v) + 1);
		if ((grp = strchr(ubuf, ':')) != NULL)
			*grp++ = '\0';
		name = ubuf;
		if ((uid = id_num(ubuf)) >= 0)
			name = NULL;
	} else if (json_is_integer(v))
		uid = json_integer_value(v);
	if ((name == NULL && (uid < 0 || uid > 0x7fffffff)) ||
	    (name != NULL && name[0] == '\0')) {
		snprintf(why, nwhy, "user must be a name or a uid, with "
		    "\":group\" at most");
		return -1;
	}
	if (grp != NULL && (gid = group_id(grp)) < 0) {
		snprintf(why, nwhy, "no group \"%.64s\" in /etc/group", grp);
		return -1;
	}
	if ((f = fopen("/etc/passwd", "re")) != NULL) {
		while (fgetpwent_r(f, &pw, buf, sizeof buf, &pp) == 0)
			if ((name != NULL && strcmp(pw.pw_name, name) == 0) ||
			    (name == NULL && pw.pw_uid == (uid_t)uid)) {
				found = 1;
				break;
			}
		fclose(f);
	}
	if (!found && name != NULL) {
		snprintf(why, nwhy, "no user \"%.64s\" in /etc/passwd", name);
		return -1;
	}
	s->user = 1;
	s->ngroups = 0;
	if (!found) {
		/* A bare uid, as container runtimes take it. */
		s->uid = (uid_t)uid;
		s->gid = gid >= 0 ? (gid_t)gid : (gid_t)uid;
		s->groups[s->ngroups++] = s->gid;
		snprintf(home, n, "HOME=/");
		return 0;
	}
	s->uid = pw.pw_uid;
	s->gid = gid >= 0 ? (gid_t)gid : pw.pw_gid;
	s->groups[s->ngroups++] = s->gid;
	snprintf(home, n, "HOME=%s", pw.pw_dir);
	if (gid >= 0)
		return 0;
	name = pw.pw_name;
	/* pw's strings live in buf: keep the name before reading groups. */
	snprintf(why, nwhy, "%s", name);
	if ((f = fopen("/etc/group", "re")) == NULL)
		return 0;
	while (s->ngroups < GROUPS_MAX &&
	    fgetgrent_r(f, &gr, buf, sizeof buf, &gp) == 0)
		for (i = 0; gr.gr_mem[i] != NULL; i++)
			if (strcmp(gr.gr_mem[i], why) == 0 && gr.gr_gid != s->gid) {
				s->groups[s->ngroups++] = gr.gr_gid;
				break;
			}
	fclose(f);
	return 0;
}

/* argv as a ps line shows it: whole strings, at most ARGV_KEEP bytes. */
static json_t *
argv_keep(json_t *argv)
{
	json_t *a, *s;
	size_t i, n = 0;

	if ((a = json_array()) == NULL)
		return NULL;
	json_array_foreach(argv, i, s) {
		n += json_string_length(s) + 1;
		if (n > ARGV_KEEP && i > 0)
			break;
		json_array_append(a, s);
	}
	return a;
}

static void
proc_free(struct proc *pr)
{
	json_decref(pr->argv);
	free(pr->ring);
	memset(pr, 0, sizeof *pr);
}

/* A free slot, making one of the oldest exited process when the table is
 * full; -1 when every slot holds a running one.  Called locked. */
static int
slot_take(void)
{
	int i, old = -1;

	for (i = 0; i < PROCS_MAX; i++)
		if (!procs[i].used)
			return i;
	for (i = 0; i < PROCS_MAX; i++)
		if (procs[i].exited && procs[i].thread_done &&
		    (old < 0 || procs[i].seq < procs[old].seq))
			old = i;
	if (old >= 0)
		proc_free(&procs[old]);
	return old;
}

static int
slot_of(pid_t pid)
{
	int i;

	for (i = 0; i < PROCS_MAX; i++)
		if (procs[i].used && procs[i].pid == pid)
			return i;
	return -1;
}

static int
proc_fill(int i, pid_t pid, json_t *argv, int tty, int detached)
{
	struct proc *pr = &procs[i];

	if ((pr->argv = argv_keep(argv)) == NULL)
		return -1;
	pr->used = 1;
	pr->pid = pid;
	pr->seq = ++seq;
	pr->started = time(NULL);
	pr->tty = tty;
	pr->detached = detached;
	pr->thread_done = !detached;
	return 0;
}

int
sd_procs_add(pid_t pid, json_t *argv, int tty)
{
	int i, rc = -1;

	pthread_mutex_lock(&mu);
	if ((i = slot_take()) >= 0)
		rc = proc_fill(i, pid, argv, tty, 0);
	pthread_mutex_unlock(&mu);
	return rc;
}

void
sd_procs_remove(pid_t pid)
{
	int i;

	pthread_mutex_lock(&mu);
	if ((i = slot_of(pid)) >= 0 && !procs[i].detached)
		proc_free(&procs[i]);
	pthread_mutex_unlock(&mu);
}

/* Appends to the ring, growing it up to RING_MAX, then overwriting the
 * oldest bytes.  Called locked. */
static void
ring_put(struct proc *pr, const unsigned char *b, size_t n)
{
	unsigned char *nb;
	size_t want, pos, k;

	pr->total += n;
	if (n >= RING_MAX) {
		b += n - RING_MAX;
		n = RING_MAX;
	}
	if (pr->len + n > pr->cap && pr->cap < RING_MAX) {
		/* Still linear (head is 0 until the ring is full). */
		want = pr->cap < 4096 ? 4096 : pr->cap;
		while (want < pr->len + n && want < RING_MAX)
			want *= 2;
		if (want > RING_MAX)
			want = RING_MAX;
		if ((nb = realloc(pr->ring, want)) != NULL) {
			pr->ring = nb;
			pr->cap = want;
		}
	}
	if (pr->cap == 0)
		return;
	while (n > 0) {
		pos = (pr->head + pr->len) % pr->cap;
		k = pr->cap - pos < n ? pr->cap - pos : n;
		memcpy(pr->ring + pos, b, k);
		b += k;
		n -= k;
		pr->len += k;
		if (pr->len > pr->cap) {
			pr->head = (pr->head + pr->len - pr->cap) % pr->cap;
			pr->len = pr->cap;
		}
	}
}

/* Copies out up to n bytes from absolute offset *off (moved past what an
 * overwrite dropped); returns the count.  Called locked. */
static size_t
ring_get(struct proc *pr, uint64_t *off, unsigned char *out, size_t n)
{
	uint64_t first = pr->total - pr->len;
	size_t avail, pos, k, got = 0;

	if (*off < first)
		*off = first;
	avail = pr->total - *off;
	if (n > avail)
		n = avail;
	pos = (pr->head + (*off - first)) % (pr->cap ? pr->cap : 1);
	while (got < n) {
		k = pr->cap - pos < n - got ? pr->cap - pos : n - got;
		memcpy(out + got, pr->ring + pos, k);
		got += k;
		pos = (pos + k) % pr->cap;
	}
	*off += got;
	return got;
}

static void *
keeper_main(void *arg)
{
	struct keeper kp = *(struct keeper *)arg;
	unsigned char buf[SP_FRAME_CHUNK];
	struct pollfd pfd[2];
	int ws = 0, exited = 0;
	ssize_t n;
	pid_t r;

	free(arg);
	while (!exited || kp.outfd >= 0) {
		pfd[0].fd = kp.outfd;
		pfd[0].events = POLLIN;
		pfd[1].fd = exited ? -1 : kp.pidfd;
		pfd[1].events = POLLIN;
		/* Once it exited, take what is buffered and stop: a child of
		 * its own that holds the output keeps nothing alive here. */
		if (poll(pfd, 2, exited ? 0 : kp.pidfd < 0 ? 100 : -1) == -1 &&
		    errno != EINTR)
			break;
		if (kp.outfd >= 0 && (pfd[0].revents != 0 || exited)) {
			n = read(kp.outfd, buf, sizeof buf);
			if (n > 0) {
				pthread_mutex_lock(&mu);
				ring_put(&procs[kp.slot], buf, n);
				pthread_cond_broadcast(&cv);
				pthread_mutex_unlock(&mu);
			} else if (n == 0 || (errno != EINTR &&
			    (errno != EAGAIN || exited))) {
				close(kp.outfd);
				kp.outfd = -1;
			}
		}
		if (!exited && (pfd[1].revents != 0 || kp.pidfd < 0)) {
			while ((r = waitpid(kp.pid, &ws, kp.pidfd < 0 ? WNOHANG :
			    0)) == -1 && errno == EINTR)
				;
			if (r == kp.pid || (r == -1 && errno == ECHILD)) {
				exited = 1;
				pthread_mutex_lock(&mu);
				procs[kp.slot].wstatus = ws;
				procs[kp.slot].exited = 1;
				pthread_cond_broadcast(&cv);
				pthread_mutex_unlock(&mu);
			}
		}
	}
	if (kp.outfd >= 0)
		close(kp.outfd);
	if (kp.pidfd >= 0)
		close(kp.pidfd);
	pthread_mutex_lock(&mu);
	procs[kp.slot].thread_done = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	return NULL;
}

int
sd_procs_detach(pid_t pid, int pidfd, int outfd, json_t *argv, int tty)
{
	pthread_attr_t at;
	pthread_t t;
	struct keeper *kp;
	int i, rc = -1;

	if ((kp = malloc(sizeof *kp)) == NULL)
		return -1;
	pthread_mutex_lock(&mu);
	if ((i = slot_take()) < 0 || proc_fill(i, pid, argv, tty, 1) == -1)
		goto out;
	kp->slot = i;
	kp->pid = pid;
	kp->pidfd = pidfd;
	kp->outfd = outfd;
	fcntl(outfd, F_SETFL, O_NONBLOCK);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 256 * 1024);
	if (pthread_create(&t, &at, keeper_main, kp) != 0) {
		proc_free(&procs[i]);
		goto out;
	}
	kp = NULL;
	rc = 0;
out:
	pthread_mutex_unlock(&mu);
	free(kp);
	return rc;
}

static json_t *
proc_json(const struct proc *pr)
{
	json_t *j;

	j = json_pack("{s:i,s:O,s:s,s:I,s:b,s:b}", "pid", (int)pr->pid,
	    "argv", pr->argv, "state", pr->exited ? "exited" : "running",
	    "started", (json_int_t)pr->started, "detached", pr->detached,
	    "tty", pr->tty);
	if (j != NULL && pr->exited && WIFSIGNALED(pr->wstatus))
		json_object_set_new(j, "signal",
		    json_integer(WTERMSIG(pr->wstatus)));
	else if (j != NULL && pr->exited)
		json_object_set_new(j, "status",
		    json_integer(WEXITSTATUS(pr->wstatus)));
	return j;
}

/* ps: one STDOUT frame per process, each a JSON object, then EXIT. */
int
sd_op_ps(struct port *p, uint32_t stream, json_t *req)
{
	json_t *list[PROCS_MAX];
	int i, n = 0, rc = 0;

	pthread_mutex_lock(&mu);
	for (i = 0; i < PROCS_MAX; i++)
		if (procs[i].used && (list[n] = proc_json(&procs[i])) != NULL)
			n++;
	pthread_mutex_unlock(&mu);
	for (i = 0; i < n; i++) {
		if (rc == 0)
			rc = sd_send_json(p, SP_FR_STDOUT, stream, list[i]);
		else
			json_decref(list[i]);
	}
	if (rc == -1)
		return -1;
	return sd_send_json(p, SP_FR_EXIT, stream, json_pack("{s:i}",
	    "status", 0));
}

static int
pid_of(json_t *req, pid_t *pid)
{
	json_t *v = json_object_get(req, "pid");

	if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
	    json_integer_value(v) > 0x7fffffff)
		return -1;
	*pid = (pid_t)json_integer_value(v);
	return 0;
}

/* Has the host gone, or asked to stop following (any frame)? */
static int
host_stop(struct port *p)
{
	struct pollfd pfd;
	struct sp_frame f;
	struct sp_err e;

	pfd.fd = p->fd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 0) != 1)
		return 0;
	if (pfd.revents & (POLLHUP | POLLERR | POLLNVAL))
		return -1;
	if (sd_recv_frame(p, &f, 0, &e) == -1)
		return e.code == SP_E_TIMED_OUT ? 0 : -1;
	return 1;
}

/* logs: the ring so far as STDOUT frames; with follow, what comes after
 * until the process exits.  Then EXIT with the process's status when it has
 * one, else {"status":0,"running":true}. */
int
sd_op_logs(struct port *p, uint32_t stream, json_t *req)
{
	struct timespec ts;
	uint64_t off = 0;
	size_t n;
	uint64_t mine;
	pid_t pid;
	int i, follow, done, stop = 0;
	json_t *j;

	follow = json_is_true(json_object_get(req, "follow"));
	if (pid_of(req, &pid) == -1)
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "pid must be a "
		    "positive integer");
	pthread_mutex_lock(&mu);
	if ((i = slot_of(pid)) < 0 || !procs[i].detached) {
		pthread_mutex_unlock(&mu);
		return sd_send_error(p, stream, SP_E_NOT_FOUND, "no detached "
		    "process %d of this daemon", (int)pid);
	}
	mine = procs[i].seq;
	for (;;) {
		/* While unlocked the slot may have gone to a newer process. */
		if (procs[i].seq != mine) {
			pthread_mutex_unlock(&mu);
			return sd_send_error(p, stream, SP_E_NOT_FOUND, "process "
			    "%d left the table", (int)pid);
		}
		n = ring_get(&procs[i], &off, p->out + SP_FRAME_HDR,
		    SP_FRAME_CHUNK);
		done = procs[i].thread_done;
		if (n > 0) {
			pthread_mutex_unlock(&mu);
			if (sd_send_out(p, SP_FR_STDOUT, stream, n) == -1)
				return -1;
			pthread_mutex_lock(&mu);
			continue;
		}
		if (!follow || done || stop != 0)
			break;
		pthread_mutex_unlock(&mu);
		if ((stop = host_stop(p)) == -1)
			return -1;
		pthread_mutex_lock(&mu);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += FOLLOW_POLL_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (procs[i].total == off && !procs[i].thread_done)
			pthread_cond_timedwait(&cv, &mu, &ts);
	}
	if (!procs[i].exited)
		j = json_pack("{s:i,s:b}", "status", 0, "running", 1);
	else if (WIFSIGNALED(procs[i].wstatus))
		j = json_pack("{s:i}", "signal", WTERMSIG(procs[i].wstatus));
	else
		j = json_pack("{s:i}", "status", WEXITSTATUS(procs[i].wstatus));
	pthread_mutex_unlock(&mu);
	return sd_send_json(p, SP_FR_EXIT, stream, j);
}

/* kill: a signal to the process group of a running process of ours. */
int
sd_op_kill(struct port *p, uint32_t stream, json_t *req)
{
	json_t *v = json_object_get(req, "signal");
	int i, sig = SIGTERM, r = -1, saved = ESRCH;
	pid_t pid;

	if (pid_of(req, &pid) == -1)
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "pid must be a "
		    "positive integer");
	if (v != NULL && (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > 64))
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "signal must be "
		    "a number from 0 to 64");
	if (v != NULL)
		sig = (int)json_integer_value(v);
	pthread_mutex_lock(&mu);
	if ((i = slot_of(pid)) >= 0 && !procs[i].exited) {
		/* It leads its own session: the group is its whole job. */
		if ((r = kill(-pid, sig)) == -1)
			r = kill(pid, sig);
		saved = errno;
	}
	pthread_mutex_unlock(&mu);
	if (i < 0)
		return sd_send_error(p, stream, SP_E_NOT_FOUND, "no process %d of "
		    "this daemon", (int)pid);
	if (r == -1 && saved == ESRCH)
		return sd_send_error(p, stream, SP_E_BAD_STATE, "process %d is "
		    "not running", (int)pid);
	if (r == -1)
		return sd_send_error(p, stream, SP_E_IO, "kill %d: %s", (int)pid,
		    strerror(saved));
	return sd_send_json(p, SP_FR_EXIT, stream, json_pack("{s:i}",
	    "status", 0));
}
