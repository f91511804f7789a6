/*
 * space-daemon: the guest end of the channel (design.md).  The
 * guest's init starts it and respawns it.  It serves each virtio-serial port
 * named space.N in a thread of its own: it answers the host's hello, runs
 * commands and relays their stdin, stdout, stderr and exit status.  It never
 * listens on a network and never exits on a bad request.  The port named
 * space.egress carries the guest's network instead (daemon-egress.c): the
 * only sockets the daemon listens on are that tunnel's, on loopback.
 *
 *	space-daemon			the space.N ports found in /sys
 *	space-daemon DEV ...		these port devices
 *	space-daemon -l SOCK ...	test mode: listen on unix sockets, each
 *					accepted connection standing for the host
 *	space-daemon -e SOCK [-p PORT] [-r PORT] [-d PORT] [-l SOCK ...]
 *					test mode of the egress tunnel: SOCK
 *					stands for space.egress, and the proxy,
 *					redirect and DNS ports (3128, 3129, 53;
 *					0 for none) are these; without -l, the
 *					tunnel alone
 */
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sp.h"
#include "daemon.h"

#define PORTS_MAX	32
#define NONCE_MAX	128
#define SYS_PORTS	"/sys/class/virtio-ports"
/* How often a port with no host looks for one unwoken (a signal wakes it):
 * rarely, since every look costs an idle guest CPU (docs/benchmarks.md,
 * "Idle guests"). */
#define HOST_LOOK_S	10

static int op_exec(struct port *, uint32_t, json_t *);

static const struct op ops[] = {
	{ "exec", op_exec },
	{ "ps", sd_op_ps },
	{ "logs", sd_op_logs },
	{ "kill", sd_op_kill },
	{ "activity", sd_op_activity },
	{ "identity", sd_op_identity },
	{ "clock", sd_op_clock },
	{ "disk-grow", sd_op_disk_grow },
	{ "freeze", sd_op_freeze },
	{ "thaw", sd_op_thaw },
	{ "volume-mount", sd_op_volume_mount },
	{ "volume-umount", sd_op_volume_umount },
	{ "trim", sd_op_trim },
	{ "fs.read", fs_read },
	{ "fs.write", fs_write },
	{ "fs.append", fs_append },
	{ "fs.stat", fs_stat },
	{ "fs.list", fs_list },
	{ "fs.mkdir", fs_mkdir },
	{ "fs.remove", fs_remove },
	{ "fs.rename", fs_rename },
	{ "tar.out", tar_out },
	{ "tar.in", tar_in },
};

static struct port ports[PORTS_MAX];
static int nports;
static char boot_id[64] = "unknown";
/* The limit of open files the daemon was given, which its commands get
 * back: the daemon itself needs more, a descriptor per tunnel stream. */
static struct rlimit nofile;
static int nofile_raised;

/* The driver signals when a host connects or goes; the signal thread bumps
 * the port's host_gen.  A space.N port raises sig_port (F_SETSIG) with its
 * descriptor in si_fd, which wakes that port's thread alone; a plain SIGIO
 * (the egress port's, or the kernel's when its queue of sig_port
 * overflowed) wakes every one.  Indexes are those of ports[]. */
static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t host_cv[PORTS_MAX];
static unsigned long host_gen[PORTS_MAX];
static int sig_port;

void
sd_log(const struct port *p, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fprintf(stderr, "space-daemon: %s%s%s\n", p != NULL ? p->path : "",
	    p != NULL ? ": " : "", line);
}

/* Writes a frame whose n payload bytes are in p->out after the header
 * (one buffer: the port makes each write() a message of its own), waiting
 * while the port is full; -1 when the host has gone. */
int
sd_send_out(struct port *p, uint8_t type, uint32_t stream, size_t n)
{
	struct pollfd pfd;
	size_t off = 0;
	ssize_t w;

	sp_frame_hdr(p->out, type, stream, n);
	n += SP_FRAME_HDR;
	while (off < n) {
		if ((w = write(p->fd, p->out + off, n - off)) >= 0) {
			off += w;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -1;
		pfd.fd = p->fd;
		pfd.events = POLLOUT;
		if (poll(&pfd, 1, -1) == 1 &&
		    (pfd.revents & (POLLHUP | POLLERR | POLLNVAL)))
			return -1;
	}
	return 0;
}

/* Sends j (stolen) as one frame. */
int
sd_send_json(struct port *p, uint8_t type, uint32_t stream, json_t *j)
{
	size_t n;

	n = j != NULL ? json_dumpb(j, (char *)p->out + SP_FRAME_HDR,
	    SP_FRAME_CHUNK, JSON_COMPACT) : 0;
	json_decref(j);
	if (n == 0 || n > SP_FRAME_CHUNK) {
		sd_log(p, "cannot encode a reply");
		return 0;
	}
	return sd_send_out(p, type, stream, n);
}

int
sd_send_error(struct port *p, uint32_t stream, enum sp_code code,
    const char *fmt, ...)
{
	char msg[512];
	json_t *j;
	va_list ap;
	const char *name = sp_code_name(code);
	size_t i;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	sd_log(p, "stream %u: %s: %s", stream, name, msg);
	/* A cut may have split a UTF-8 sequence: then send plain ASCII. */
	if ((j = json_pack("{s:s,s:s}", "error", name, "msg", msg)) == NULL) {
		for (i = 0; msg[i] != '\0'; i++)
			if ((unsigned char)msg[i] >= 0x80)
				msg[i] = '?';
		j = json_pack("{s:s,s:s}", "error", name, "msg", msg);
	}
	return sd_send_json(p, SP_FR_ERROR, stream, j);
}

static void
call_reset(struct call *c)
{
	int *fds[] = { &c->pidfd, &c->in, &c->out, &c->err, &c->master };
	size_t i;

	if (c->pid > 0)
		sd_procs_remove(c->pid);
	for (i = 0; i < sizeof fds / sizeof fds[0]; i++)
		if (*fds[i] >= 0)
			close(*fds[i]);
	memset(c, 0, sizeof *c);
	c->pidfd = c->in = c->out = c->err = c->master = -1;
}

/* Ends the call at once: its host went away or started over. */
static void
call_abort(struct port *p)
{
	struct call *c = &p->call;

	if (c->pid > 0) {
		/* The command leads its own process group (setsid); once it
		 * is reaped, a group still holding its pipes is killed too. */
		if (!c->exited || c->out >= 0 || c->err >= 0)
			kill(-c->pid, SIGKILL);
		if (!c->exited) {
			kill(c->pid, SIGKILL);
			while (waitpid(c->pid, NULL, 0) == -1 && errno == EINTR)
				;
		}
		sd_log(p, "stream %u: call aborted", c->stream);
	}
	call_reset(c);
}

static void
reap(struct call *c)
{
	pid_t r;

	while ((r = waitpid(c->pid, &c->wstatus, WNOHANG)) == -1 &&
	    errno == EINTR)
		;
	if (r == c->pid || (r == -1 && errno == ECHILD))
		c->exited = 1;
}

/* Sends EXIT once the command has exited and both its pipes are closed. */
static int
call_finish(struct port *p)
{
	struct call *c = &p->call;
	uint32_t stream = c->stream;
	json_t *j;

	if (c->pid == 0 || !c->exited || c->out >= 0 || c->err >= 0)
		return 0;
	if (WIFSIGNALED(c->wstatus))
		j = json_pack("{s:i}", "signal", WTERMSIG(c->wstatus));
	else
		j = json_pack("{s:i}", "status", WEXITSTATUS(c->wstatus));
	call_reset(c);
	return sd_send_json(p, SP_FR_EXIT, stream, j);
}

/* Writes pending input to the command as far as its pipe takes it. */
static void
stdin_push(struct call *c)
{
	ssize_t w;

	while (c->npend > 0) {
		w = write(c->in, c->pend, c->npend);
		if (w == -1 && errno == EINTR)
			continue;
		if (w == -1 && errno == EAGAIN)
			return;
		if (w == -1) {
			/* The command closed its stdin: drop the rest. */
			c->npend = 0;
			c->in_eof = 1;
			break;
		}
		c->pend += w;
		c->npend -= w;
	}
	if (c->in_eof && c->in >= 0) {
		close(c->in);
		c->in = -1;
	}
}

static void
feed_stdin(struct port *p, const struct sp_frame *f)
{
	struct call *c = &p->call;

	/* Input that crossed the call's end on the wire is dropped. */
	if (c->pid == 0 || f->stream != c->stream || c->in < 0 || c->in_eof)
		return;
	if (f->len == 0)
		c->in_eof = 1;
	c->pend = f->data;
	c->npend = f->len;
	stdin_push(c);
}

/* Sends what the pipe holds as one frame, or with all, up to RELAY_BURST
 * frames until it is empty or closed.  Once the command has exited (or the
 * pipe says it hung up) its output is read in one go: a poll round per
 * frame costs a context switch, which TCG makes dear.  A process the
 * command left behind may still hold the pipe and write on: the burst's
 * bound lets the host's frames in between. */
#define RELAY_BURST	64
static int
relay(struct port *p, int *fd, uint8_t type, int all)
{
	ssize_t n;
	int k = 0;

	do {
		n = read(*fd, p->out + SP_FRAME_HDR, SP_FRAME_CHUNK);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			return 0;
		if (n <= 0) {
			close(*fd);
			*fd = -1;
			return 0;
		}
		if (sd_send_out(p, type, p->call.stream, n) == -1)
			return -1;
	} while (all && ++k < RELAY_BURST);
	return 0;
}

struct spawn_fail {
	int stage;		/* 0 set-up, 1 chdir, 2 exec, 3 user */
	int err;		/* 0: the exec succeeded */
};

/* What the child of spawn() works from.  It shares the daemon's memory
 * until its execve (clone with CLONE_VM | CLONE_VFORK, as posix_spawn does):
 * no page tables are copied and the daemon takes no copy-on-write faults
 * after, which under TCG saves about a millisecond a command.  The price:
 * the child calls only raw system calls and writes only into this record.
 * glibc's setuid() would ask every thread of the daemon to change too. */
struct child_args {
	int in, out, err;
	const struct spawn_spec *s;
	char **paths;		/* where to look for argv[0], in PATH order */
	char **sh_argv;		/* /bin/sh, the script, argv[1]...: ENOEXEC */
	struct spawn_fail sf;
};

/* Tries each candidate like execvp() does, in the command's own PATH, and
 * returns why none ran.  A name that is not there is skipped by access():
 * a failed execve costs the kernel a whole new address space first.
 * Nothing is written to a before the end: the parent takes an error there
 * for a failed exec. */
static int
child_exec(struct child_args *a)
{
	const struct spawn_spec *s = a->s;
	int i, err = ENOENT, eacces = 0;

	for (i = 0; a->paths[i] != NULL; i++) {
		if (access(a->paths[i], F_OK) == -1 &&
		    (errno == ENOENT || errno == ENOTDIR)) {
			err = errno;
			continue;
		}
		execve(a->paths[i], s->argv, s->envp);
		err = errno;
		if (err == ENOEXEC) {
			a->sh_argv[1] = a->paths[i];
			execve("/bin/sh", a->sh_argv, s->envp);
			return errno;
		}
		if (err == EACCES)
			eacces = 1;
		else if (err != ENOENT && err != ENOTDIR && err != ESTALE &&
		    err != ENODEV && err != ETIMEDOUT)
			return err;
	}
	return eacces ? EACCES : err;
}

/* The child: raw calls only until execve (see struct child_args).  With a
 * pty, in is its slave and becomes the controlling terminal of the new
 * session, so that ^C at the host's keyboard reaches the foreground job. */
static int
child(void *arg)
{
	struct child_args *a = arg;
	const struct spawn_spec *s = a->s;
	sigset_t none;

	sigemptyset(&none);
	a->sf.stage = 0;
	if (sigprocmask(SIG_SETMASK, &none, NULL) == -1 ||
	    signal(SIGPIPE, SIG_DFL) == SIG_ERR)
		goto fail;
	if (nofile_raised && setrlimit(RLIMIT_NOFILE, &nofile) == -1)
		goto fail;
	if (setsid() == -1)
		goto fail;
	if (s->tty && ioctl(a->in, TIOCSCTTY, 0) == -1)
		goto fail;
	if (dup2(a->in, 0) == -1 || dup2(a->out, 1) == -1 ||
	    dup2(a->err, 2) == -1)
		goto fail;
	a->sf.stage = 3;
	if (s->user && (syscall(SYS_setgroups, s->ngroups, s->groups) == -1 ||
	    syscall(SYS_setresgid, s->gid, s->gid, s->gid) == -1 ||
	    syscall(SYS_setresuid, s->uid, s->uid, s->uid) == -1))
		goto fail;
	a->sf.stage = 1;
	if (s->cwd != NULL && chdir(s->cwd) == -1)
		goto fail;
	a->sf.stage = 2;
	a->sf.err = child_exec(a);
	_exit(127);
fail:
	a->sf.err = errno != 0 ? errno : EINVAL;
	_exit(127);
}

/* The value of PATH in env, or execvp()'s default. */
static const char *
env_path(char **env)
{
	size_t i;

	for (i = 0; env != NULL && env[i] != NULL; i++)
		if (strncmp(env[i], "PATH=", 5) == 0)
			return env[i] + 5;
	return "/bin:/usr/bin";
}

/* The names argv[0] may be, in order: itself when it has a slash, else
 * each directory of PATH (an empty one being the working directory) with
 * it appended.  One allocation: free() it. */
static char **
exec_paths(const char *file, const char *path)
{
	size_t n = 1, i = 0, len, flen = strlen(file), room;
	const char *d, *e;
	char **v, *w;

	if (strchr(file, '/') == NULL)
		for (d = path; d != NULL; d = strchr(d, ':'), d = d ? d + 1 : d)
			n++;
	room = (n + 1) * sizeof *v + n * (flen + 2) + strlen(path) + 1;
	if ((v = malloc(room)) == NULL)
		return NULL;
	w = (char *)(v + n + 1);
	if (strchr(file, '/') != NULL) {
		v[i++] = strcpy(w, file);
	} else {
		for (d = path; d != NULL; d = *e == ':' ? e + 1 : NULL) {
			e = strchrnul(d, ':');
			len = (size_t)(e - d);
			v[i++] = w;
			if (len > 0) {
				memcpy(w, d, len);
				w[len++] = '/';
			}
			memcpy(w + len, file, flen + 1);
			w += len + flen + 1;
		}
	}
	v[i] = NULL;
	return v;
}

/* A pseudo-terminal of rows x cols: *master and *slave, close-on-exec. */
static int
pty_open(int rows, int cols, int *master, int *slave)
{
	struct winsize ws = { 0 };
	char name[64];

	*slave = -1;
	if ((*master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) == -1)
		return -1;
	ws.ws_row = rows > 0 ? rows : 24;
	ws.ws_col = cols > 0 ? cols : 80;
	if (grantpt(*master) == -1 || unlockpt(*master) == -1 ||
	    ptsname_r(*master, name, sizeof name) != 0 ||
	    (*slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) == -1 ||
	    ioctl(*master, TIOCSWINSZ, &ws) == -1) {
		close(*master);
		if (*slave >= 0)
			close(*slave);
		*master = *slave = -1;
		return -1;
	}
	return 0;
}

/* Starts a command; -1 only when the host has gone.  A detached one gets
 * /dev/null (or the pty) as stdin and one pipe for stdout and stderr, kept
 * by daemon-procs; the call answers its pid at once. */
static int
spawn(struct port *p, uint32_t stream, const struct spawn_spec *s,
    json_t *argv)
{
	static const char *stages[] = { "set-up", "chdir", "exec", "user" };
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 };
	int fds[6], i, rc = 0, master = -1, pidfd;
	/* The child's stack: this thread waits while the child uses it. */
	char stack[64 * 1024] __attribute__((aligned(64)));
	struct call *c = &p->call;
	struct child_args a = { .in = -1 };
	size_t argc;
	pid_t pid;

	if (s->tty) {
		if (pty_open(s->rows, s->cols, &master, &in[0]) == -1) {
			rc = sd_send_error(p, stream, SP_E_EXEC_FAILED, "pty: %s",
			    strerror(errno));
			goto out;
		}
		out[1] = fcntl(in[0], F_DUPFD_CLOEXEC, 0);
		err[1] = fcntl(in[0], F_DUPFD_CLOEXEC, 0);
	} else if (s->detach) {
		in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (pipe2(out, O_CLOEXEC) == 0)
			err[1] = fcntl(out[1], F_DUPFD_CLOEXEC, 0);
	} else if (pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0 &&
	    pipe2(err, O_CLOEXEC) == -1)
		err[1] = -1;	/* the check below reports it */
	if (in[0] < 0 || out[1] < 0 || err[1] < 0) {
		rc = sd_send_error(p, stream, SP_E_EXEC_FAILED, "pipe: %s",
		    strerror(errno));
		goto out;
	}
	a.in = in[0], a.out = out[1], a.err = err[1], a.s = s;
	for (argc = 0; s->argv[argc] != NULL; argc++)
		;
	if ((a.paths = exec_paths(s->argv[0], env_path(s->envp))) == NULL ||
	    (a.sh_argv = calloc(argc + 2, sizeof *a.sh_argv)) == NULL) {
		rc = sd_send_error(p, stream, SP_E_EXEC_FAILED, "out of memory");
		goto out;
	}
	a.sh_argv[0] = "/bin/sh";
	memcpy(a.sh_argv + 2, s->argv + 1, argc * sizeof *s->argv);
	/* Back here once the child has called execve or exited. */
	if ((pid = clone(child, stack + sizeof stack,
	    CLONE_VM | CLONE_VFORK | SIGCHLD, &a)) == -1) {
		rc = sd_send_error(p, stream, SP_E_EXEC_FAILED, "clone: %s",
		    strerror(errno));
		goto out;
	}
	if (a.sf.err != 0) {
		while (waitpid(pid, NULL, 0) == -1 && errno == EINTR)
			;
		if (a.sf.stage < 0 || a.sf.stage > 3)
			a.sf.stage = 0;
		rc = sd_send_error(p, stream, SP_E_EXEC_FAILED, "%s \"%.200s\": %s",
		    stages[a.sf.stage], a.sf.stage == 1 ? s->cwd : s->argv[0],
		    strerror(a.sf.err));
		goto out;
	}
	pidfd = syscall(SYS_pidfd_open, pid, 0);
	if (s->detach) {
		if (sd_procs_detach(pid, pidfd, s->tty ? master : out[0], argv,
		    s->tty) == -1) {
			/* No room to keep it: it must not run unwatched. */
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			while (waitpid(pid, NULL, 0) == -1 && errno == EINTR)
				;
			if (pidfd >= 0)
				close(pidfd);
			rc = sd_send_error(p, stream, SP_E_BUSY, "%d processes "
			    "are running already", PROCS_MAX);
			goto out;
		}
		if (s->tty)
			master = -1;
		else
			out[0] = -1;
		rc = sd_send_json(p, SP_FR_EXIT, stream,
		    json_pack("{s:i}", "pid", (int)pid));
		goto out;
	}
	sd_procs_add(pid, argv, s->tty);
	c->pid = pid;
	c->stream = stream;
	c->pidfd = pidfd;
	if (s->tty) {
		c->out = master;
		c->in = fcntl(master, F_DUPFD_CLOEXEC, 0);
		c->master = fcntl(master, F_DUPFD_CLOEXEC, 0);
		master = -1;
	} else {
		c->in = in[1];
		c->out = out[0];
		c->err = err[0];
		in[1] = out[0] = err[0] = -1;
	}
	fcntl(c->in, F_SETFL, O_NONBLOCK);
	fcntl(c->out, F_SETFL, O_NONBLOCK);
	if (c->err >= 0)
		fcntl(c->err, F_SETFL, O_NONBLOCK);
	/* Before any output: the host may name it in other calls (kill). */
	if (s->announce)
		rc = sd_send_json(p, SP_FR_STARTED, stream,
		    json_pack("{s:i}", "pid", (int)pid));
out:
	fds[0] = in[0], fds[1] = in[1], fds[2] = out[0], fds[3] = out[1];
	fds[4] = err[0], fds[5] = err[1];
	free(a.paths);
	free(a.sh_argv);
	for (i = 0; i < 6; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (master >= 0)
		close(master);
	return rc;
}

/* A NULL-terminated vector of the strings of array a, pointing into a. */
static char **
strings(json_t *a, int need)
{
	char **v;
	json_t *s;
	size_t i, n;

	if (!json_is_array(a) || (n = json_array_size(a)) > ARGS_MAX ||
	    n < (size_t)need || (v = calloc(n + 1, sizeof *v)) == NULL)
		return NULL;
	json_array_foreach(a, i, s) {
		if (!json_is_string(s)) {
			free(v);
			return NULL;
		}
		v[i] = (char *)json_string_value(s);
	}
	return v;
}

/* An integer option of a request: 0 when absent, -1 when out of range. */
static int
int_opt(json_t *req, const char *key, int lo, int hi, int *out)
{
	json_t *v = json_object_get(req, key);

	*out = 0;
	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo ||
	    json_integer_value(v) > hi)
		return -1;
	*out = (int)json_integer_value(v);
	return 0;
}

/*
 * The environment of a call that brings none: the sandbox's own (from its
 * identity) first, then each default it does not set.  out has room for
 * SD_ENV_MAX + 4; *ref keeps the strings alive until the caller drops it.
 */
static char **
with_identity_env(char **defaults, char **out, json_t **ref)
{
	size_t i, k, n = 0, len;
	json_t *v;
	int set;

	if ((*ref = sd_identity_env()) == NULL)
		return defaults;
	json_array_foreach(*ref, i, v)
		out[n++] = (char *)json_string_value(v);
	for (k = 0; defaults[k] != NULL; k++) {
		len = strcspn(defaults[k], "=") + 1;
		for (set = 0, i = 0; i < json_array_size(*ref); i++)
			set |= strncmp(out[i], defaults[k], len) == 0;
		if (!set)
			out[n++] = defaults[k];
	}
	out[n] = NULL;
	return out;
}

/* A new vector (pointing into both) of base with each of add set over it:
 * one of the same name replaced, else appended; NULL when out of memory. */
static char **
overlay_env(char **base, char **add)
{
	size_t nb, na, n, i, k, len;
	char **v;

	for (nb = 0; base[nb] != NULL; nb++)
		;
	for (na = 0; add[na] != NULL; na++)
		;
	if ((v = calloc(nb + na + 1, sizeof *v)) == NULL)
		return NULL;
	memcpy(v, base, nb * sizeof *v);
	for (n = nb, k = 0; k < na; k++) {
		len = strcspn(add[k], "=") + 1;
		for (i = 0; i < n && strncmp(v[i], add[k], len) != 0; i++)
			;
		v[i] = add[k];
		if (i == n)
			n++;
	}
	return v;
}

/*
 * env with the egress tunnel's proxy variables it does not set added after
 * its own: the tunnel is the only way out, whatever environment a call
 * brings.  env itself when there is nothing to add; else a new vector
 * (pointing into env and static strings) in *fresh, which the caller frees.
 */
static char **
with_egress_env(char **env, char ***fresh)
{
	char *const *px = sd_egress_env();
	size_t i, k, n, m, len, nv;
	char **v;
	int set;

	*fresh = NULL;
	if (px == NULL)
		return env;
	for (n = 0; env[n] != NULL; n++)
		;
	for (m = 0; px[m] != NULL; m++)
		;
	if ((v = calloc(n + m + 1, sizeof *v)) == NULL)
		return env;
	memcpy(v, env, n * sizeof *v);
	for (nv = n, k = 0; k < m; k++) {
		len = strcspn(px[k], "=") + 1;
		for (set = 0, i = 0; i < n && !set; i++)
			set = strncmp(env[i], px[k], len) == 0;
		if (!set)
			v[nv++] = px[k];
	}
	*fresh = v;
	return v;
}

static int
op_exec(struct port *p, uint32_t stream, json_t *req)
{
	char **argv = NULL, **envp = NULL, home[300] = "HOME=/root", why[256];
	char *denv[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", home,
	    "TERM=dumb", NULL };
	char *menv[2 * SD_ENV_MAX + 4], **xenv = NULL, **aenv = NULL;
	char **ibase = denv, **ienvp = NULL;
	json_t *ienv = NULL;
	struct spawn_spec s;
	const char *cwd = NULL;
	json_t *v;
	size_t i;
	int rc;

	/* Sent ahead of its identity's answer: it follows that identity. */
	if (json_is_true(json_object_get(req, "after_identity")) &&
	    !p->identity_set) {
		rc = sd_send_error(p, stream, SP_E_BAD_STATE, "the identity this "
		    "command was to follow was not set");
		goto out;
	}
	if ((argv = strings(json_object_get(req, "argv"), 1)) == NULL ||
	    argv[0][0] == '\0') {
		rc = sd_send_error(p, stream, SP_E_BAD_INPUT, "argv must be an "
		    "array of 1 to %d strings, the first not empty", ARGS_MAX);
		goto out;
	}
	if ((v = json_object_get(req, "env")) != NULL &&
	    (envp = strings(v, 0)) == NULL) {
		rc = sd_send_error(p, stream, SP_E_BAD_INPUT, "env must be an array "
		    "of at most %d strings", ARGS_MAX);
		goto out;
	}
	for (i = 0; envp != NULL && envp[i] != NULL; i++)
		if (strchr(envp[i], '=') == NULL || envp[i][0] == '=') {
			rc = sd_send_error(p, stream, SP_E_BAD_INPUT,
			    "env[%zu] is not NAME=VALUE", i);
			goto out;
		}
	if ((v = json_object_get(req, "cwd")) != NULL) {
		if (!json_is_string(v) || json_string_length(v) == 0) {
			rc = sd_send_error(p, stream, SP_E_BAD_INPUT,
			    "cwd must be a path");
			goto out;
		}
		cwd = json_string_value(v);
	} else
		cwd = json_string_value(sd_image_get("cwd"));
	memset(&s, 0, sizeof s);
	s.tty = json_is_true(json_object_get(req, "tty"));
	s.detach = json_is_true(json_object_get(req, "detach"));
	s.announce = json_is_true(json_object_get(req, "announce"));
	if (int_opt(req, "rows", 0, 4096, &s.rows) == -1 ||
	    int_opt(req, "cols", 0, 4096, &s.cols) == -1) {
		rc = sd_send_error(p, stream, SP_E_BAD_INPUT, "rows and cols must "
		    "be numbers from 0 to 4096");
		goto out;
	}
	/* The image's user (its config's User) unless the call names one. */
	if ((v = json_object_get(req, "user")) == NULL)
		v = sd_image_get("user");
	if (v != NULL &&
	    sd_user_resolve(v, &s, home, sizeof home, why, sizeof why) == -1) {
		rc = sd_send_error(p, stream, SP_E_BAD_INPUT, "%s", why);
		goto out;
	}
	if (s.tty)
		denv[2] = "TERM=xterm-256color";
	s.argv = argv;
	/* Under the sandbox's environment, the image's over the defaults. */
	if ((v = sd_image_get("env")) != NULL && (ienvp = strings(v, 0)) !=
	    NULL && (ibase = overlay_env(denv, ienvp)) == NULL) {
		rc = sd_send_error(p, stream, SP_E_EXEC_FAILED, "out of memory");
		goto out;
	}
	/* "env_add": env goes over what a call that brings none gets. */
	if (envp != NULL && json_is_true(json_object_get(req, "env_add"))) {
		if ((aenv = overlay_env(with_identity_env(ibase, menv, &ienv),
		    envp)) == NULL) {
			rc = sd_send_error(p, stream, SP_E_EXEC_FAILED,
			    "out of memory");
			goto out;
		}
		s.envp = aenv;
	} else
		s.envp = envp != NULL ? envp : with_identity_env(ibase, menv,
		    &ienv);
	s.envp = with_egress_env(s.envp, &xenv);
	s.cwd = cwd;
	rc = spawn(p, stream, &s, json_object_get(req, "argv"));
out:
	json_decref(ienv);
	if (ibase != denv)
		free(ibase);
	free(ienvp);
	free(xenv);
	free(aenv);
	free(argv);
	free(envp);
	return rc;
}

static int
hello(struct port *p, uint32_t stream, json_t *req)
{
	json_t *op = json_object_get(req, "op"), *n;

	n = json_object_get(req, "nonce");
	if (!json_is_string(op) || strcmp(json_string_value(op), "hello") != 0 ||
	    !json_is_string(n) || json_string_length(n) > NONCE_MAX)
		return sd_send_error(p, stream, SP_E_PROTOCOL, "bad hello");
	/* A host that came back after a disconnect we did not see. */
	call_abort(p);
	p->identity_set = 0;
	return sd_send_json(p, SP_FR_HELLO, stream,
	    json_pack("{s:i,s:s,s:O,s:i,s:b,s:b}", "version", SP_PROTO_VERSION,
	    "boot_id", boot_id, "nonce", n, "ports", nports, "after_identity",
	    1, "announce", 1));
}

/* {"op":"signal","signal":N} to the call's process group, or
 * {"op":"resize","rows":R,"cols":C} of its pty.  No answer: the call's
 * output and exit tell the rest. */
static void
call_control(struct port *p, json_t *j)
{
	struct call *c = &p->call;
	const char *op = json_string_value(json_object_get(j, "op"));
	struct winsize ws = { 0 };
	int sig, rows, cols;

	if (strcmp(op, "signal") == 0 && c->pid > 0 && !c->exited &&
	    int_opt(j, "signal", 1, 64, &sig) == 0 && sig > 0) {
		if (kill(-c->pid, sig) == -1)
			kill(c->pid, sig);
	} else if (strcmp(op, "resize") == 0 && c->master >= 0 &&
	    int_opt(j, "rows", 1, 4096, &rows) == 0 &&
	    int_opt(j, "cols", 1, 4096, &cols) == 0 && rows > 0 && cols > 0) {
		ws.ws_row = rows;
		ws.ws_col = cols;
		ioctl(c->master, TIOCSWINSZ, &ws);
	} else
		sd_log(p, "stream %u: bad control message", c->stream);
}

/* One frame from the host; -1 when the host has gone. */
static int
handle_frame(struct port *p, const struct sp_frame *f)
{
	struct sp_err e;
	json_t *j = NULL, *op;
	size_t i;
	int rc = 0;

	switch (f->type) {
	case SP_FR_STDIN:
		feed_stdin(p, f);
		return 0;
	case SP_FR_ERROR:
		sd_log(p, "stream %u: the host sent an error", f->stream);
		return 0;
	case SP_FR_HELLO:
	case SP_FR_REQ:
		break;
	default:
		return sd_send_error(p, f->stream, SP_E_PROTOCOL,
		    "unexpected frame type %u", f->type);
	}
	if (sp_frame_json(f, &j, &e) == -1)
		return sd_send_error(p, f->stream, SP_E_PROTOCOL, "%s", e.msg);
	if (f->type == SP_FR_HELLO) {
		rc = hello(p, f->stream, j);
		goto out;
	}
	if (!json_is_string(op = json_object_get(j, "op"))) {
		rc = sd_send_error(p, f->stream, SP_E_BAD_INPUT, "request without op");
		goto out;
	}
	/* A signal or a new window size for the running call; one that
	 * crossed the call's end on the wire is dropped, as its stdin is. */
	if (strcmp(json_string_value(op), "signal") == 0 ||
	    strcmp(json_string_value(op), "resize") == 0) {
		if (p->call.pid != 0 && f->stream == p->call.stream)
			call_control(p, j);
		goto out;
	}
	if (p->call.pid != 0) {
		rc = sd_send_error(p, f->stream, SP_E_BUSY, "a call is running on "
		    "this port (stream %u)", p->call.stream);
		goto out;
	}
	for (i = 0; i < sizeof ops / sizeof ops[0]; i++)
		if (strcmp(ops[i].name, json_string_value(op)) == 0) {
			/* Asking how idle we are is not using the sandbox. */
			if (ops[i].run != sd_op_activity)
				sd_activity_touch();
			rc = ops[i].run(p, f->stream, j);
			goto out;
		}
	rc = sd_send_error(p, f->stream, SP_E_BAD_INPUT, "unknown op \"%.64s\"",
	    json_string_value(op));
out:
	json_decref(j);
	return rc;
}

int
sd_recv_frame(struct port *p, struct sp_frame *f, int timeout_ms,
    struct sp_err *e)
{
	struct pollfd pfd;
	ssize_t n;
	int r;

	for (;;) {
		if ((r = sp_frame_dec_next(&p->dec, f, e)) != 0)
			return r;
		pfd.fd = p->fd;
		pfd.events = POLLIN;
		r = poll(&pfd, 1, timeout_ms);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			return sp_err_sys(e, SP_E_IO, "poll");
		if (r == 0)
			return sp_err_set(e, SP_E_TIMED_OUT, 1, "the host sent nothing");
		n = read(p->fd, p->buf, sizeof p->buf);
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return sp_err_set(e, SP_E_GONE, 0, "the host went away");
		if (sp_frame_dec_feed(&p->dec, p->buf, n, e) == -1)
			return -1;
	}
}

static void
dec_reset(struct port *p)
{
	sp_frame_dec_release(&p->dec);
	sp_frame_dec_init(&p->dec);
}

/* The host's bytes do not parse: say so and start over with the next. */
static int
bad_stream(struct port *p, const struct sp_err *e)
{
	call_abort(p);
	dec_reset(p);
	return sd_send_error(p, 0, SP_E_PROTOCOL, "%s", e->msg);
}

/* Serves one host connection until it goes away. */
static void
session(struct port *p)
{
	struct call *c = &p->call;
	struct pollfd pfd[5];
	struct sp_frame f;
	struct sp_err e;
	ssize_t n;
	int r, timeout;

	for (;;) {
		/* Buffered frames come first, unless the command's stdin
		 * is full: then the host waits, and our memory stays one
		 * frame. */
		r = 0;
		while (c->npend == 0 &&
		    (r = sp_frame_dec_next(&p->dec, &f, &e)) == 1)
			if (handle_frame(p, &f) == -1)
				return;
		if (r == -1 && bad_stream(p, &e) == -1)
			return;
		pfd[0].fd = p->fd;
		pfd[0].events = c->npend == 0 ? POLLIN : 0;
		pfd[1].fd = c->npend > 0 ? c->in : -1;
		pfd[1].events = POLLOUT;
		pfd[2].fd = c->out;
		pfd[3].fd = c->err;
		pfd[2].events = pfd[3].events = POLLIN;
		pfd[4].fd = c->pid != 0 && !c->exited ? c->pidfd : -1;
		pfd[4].events = POLLIN;
		/* Without a pidfd, look for the exit ten times a second. */
		timeout = c->pid != 0 && !c->exited && c->pidfd < 0 ? 100 : -1;
		if (poll(pfd, 5, timeout) == -1) {
			if (errno == EINTR)
				continue;
			sd_log(p, "poll: %s", strerror(errno));
			return;
		}
		if (pfd[0].revents & (POLLHUP | POLLERR | POLLNVAL))
			return;
		if (pfd[0].revents & POLLIN) {
			n = read(p->fd, p->buf, sizeof p->buf);
			if (n == 0 ||
			    (n == -1 && errno != EINTR && errno != EAGAIN))
				return;
			if (n > 0 &&
			    sp_frame_dec_feed(&p->dec, p->buf, n, &e) == -1 &&
			    bad_stream(p, &e) == -1)
				return;
		}
		if (pfd[1].revents != 0)
			stdin_push(c);
		if (c->pid != 0 && !c->exited &&
		    (pfd[4].revents != 0 || timeout > 0))
			reap(c);
		if (c->out >= 0 && (pfd[2].revents != 0 || c->exited) &&
		    relay(p, &c->out, SP_FR_STDOUT,
		    c->exited || (pfd[2].revents & POLLHUP)) == -1)
			return;
		if (c->err >= 0 && (pfd[3].revents != 0 || c->exited) &&
		    relay(p, &c->err, SP_FR_STDERR,
		    c->exited || (pfd[3].revents & POLLHUP)) == -1)
			return;
		if (call_finish(p) == -1)
			return;
	}
}

/* Waits until a host is connected to the port. */
static int
wait_host(struct port *p)
{
	struct pollfd pfd;
	struct timespec ts;
	struct sp_err e;
	unsigned long gen;
	ssize_t n;
	int r;

	if (p->listening) {
		p->fd = accept4(p->dev, NULL, NULL,
		    SOCK_CLOEXEC | SOCK_NONBLOCK);
		return p->fd >= 0 ? 0 : -1;
	}
	for (;;) {
		pthread_mutex_lock(&host_mu);
		gen = host_gen[p - ports];
		pthread_mutex_unlock(&host_mu);
		pfd.fd = p->dev;
		pfd.events = POLLIN;
		if ((r = poll(&pfd, 1, 0)) == -1 && errno == EINTR)
			continue;
		if (r == -1 || (r == 1 && (pfd.revents & (POLLERR | POLLNVAL))))
			return -1;
		if (r == 0 || !(pfd.revents & POLLHUP))
			break;
		/* No host, says the port; yet a new host's first bytes often
		 * come before the news that it is there (the driver hears of
		 * hosts and of data on separate queues).  Keep them for the
		 * session: what an earlier host left is at worst a stale
		 * frame, which a hello (the host says it again when not
		 * answered) or a decoding error clears. */
		while ((n = read(p->dev, p->buf, sizeof p->buf)) > 0)
			if (sp_frame_dec_feed(&p->dec, p->buf, n, &e) == -1)
				dec_reset(p);
		if (n == -1 && errno == EAGAIN)
			break;
		/* Until a host is there poll says HUP at once: wait for the
		 * driver's signal instead, looking again now and then in case
		 * one was missed (a host not answered says hello again on a
		 * new connection, which raises another). */
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += HOST_LOOK_S;
		pthread_mutex_lock(&host_mu);
		while (host_gen[p - ports] == gen &&
		    pthread_cond_timedwait(&host_cv[p - ports], &host_mu,
		    &ts) == 0)
			;
		pthread_mutex_unlock(&host_mu);
	}
	p->fd = p->dev;
	return 0;
}

/* Signals from a port only while it has no host: the driver raises one for
 * every batch of data as well.  When each was a SIGIO for every thread of
 * the daemon (the signal thread, every port waiting for a host, the egress
 * tunnel) that made ten wake-ups per exec, each a context switch, which
 * under TCG flushes QEMU's soft TLB.  A host's going shows in poll as HUP. */
static void
port_async(struct port *p, int on)
{
	if (!p->listening)
		fcntl(p->dev, F_SETFL, O_NONBLOCK | (on ? O_ASYNC : 0));
}

static void *
port_main(void *arg)
{
	struct port *p = arg;

	for (;;) {
		if (wait_host(p) == -1) {
			sd_log(p, "waiting for the host: %s", strerror(errno));
			sleep(1);
			continue;
		}
		port_async(p, 0);
		session(p);
		/* On before wait_host reads host_gen: a host that comes after
		 * raises the signal, one that came before shows in its poll. */
		port_async(p, 1);
		call_abort(p);
		p->identity_set = 0;
		/* What the decoder holds now is the departed host's: a
		 * frame cut short, or input its command never took. */
		dec_reset(p);
		if (p->listening)
			close(p->fd);
		p->fd = -1;
	}
	return NULL;
}

static void *
sigio_main(void *arg)
{
	sigset_t set;
	siginfo_t si;
	int i, all, found;

	sigemptyset(&set);
	sigaddset(&set, SIGIO);
	sigaddset(&set, sig_port);
	for (;;) {
		if (sigwaitinfo(&set, &si) == -1)
			continue;
		pthread_mutex_lock(&host_mu);
		all = si.si_signo != sig_port;
		for (i = found = 0; i < nports && !all; i++)
			found |= ports[i].dev == si.si_fd;
		for (i = 0; i < nports; i++)
			if (all || !found || ports[i].dev == si.si_fd) {
				host_gen[i]++;
				pthread_cond_signal(&host_cv[i]);
			}
		pthread_mutex_unlock(&host_mu);
		if (all || !found)
			sd_egress_host_news();
	}
	return NULL;
}

static int
add_port(const char *path, int listening)
{
	struct sockaddr_un sa;
	struct port *p;

	if (nports == PORTS_MAX || strlen(path) >= sizeof p->path ||
	    strlen(path) >= sizeof sa.sun_path) {
		sd_log(NULL, "%s: too many ports or too long a path", path);
		return -1;
	}
	p = &ports[nports];
	snprintf(p->path, sizeof p->path, "%s", path);
	p->listening = listening;
	p->fd = -1;
	sp_frame_dec_init(&p->dec);
	p->call.pidfd = p->call.in = p->call.out = p->call.err = -1;
	p->call.master = -1;
	if (listening) {
		memset(&sa, 0, sizeof sa);
		sa.sun_family = AF_UNIX;
		strcpy(sa.sun_path, path);
		unlink(path);
		if ((p->dev = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) ==
		    -1 || bind(p->dev, (struct sockaddr *)&sa, sizeof sa) == -1 ||
		    listen(p->dev, 1) == -1)
			goto fail;
	} else {
		/* The driver signals when the host comes or goes. */
		if ((p->dev = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) ==
		    -1 || fcntl(p->dev, F_SETOWN, getpid()) == -1 ||
		    fcntl(p->dev, F_SETSIG, sig_port) == -1 ||
		    fcntl(p->dev, F_SETFL, O_NONBLOCK | O_ASYNC) == -1)
			goto fail;
	}
	pthread_mutex_lock(&host_mu);	/* the signal thread reads ports[] */
	nports++;
	pthread_mutex_unlock(&host_mu);
	return 0;
fail:
	sd_log(p, "%s", strerror(errno));
	if (p->dev >= 0)
		close(p->dev);
	return -1;
}

static int
read_line(const char *path, char *buf, size_t n)
{
	FILE *f;
	int rc = -1;

	if ((f = fopen(path, "re")) == NULL)
		return -1;
	if (fgets(buf, n, f) != NULL) {
		buf[strcspn(buf, "\n")] = '\0';
		rc = 0;
	}
	fclose(f);
	return rc;
}

/* The device node of the port in SYS_PORTS/entry.  busy-box mdev makes no
 * /dev/virtio-ports links, and may not have made the node itself yet. */
static int
port_node(const char *entry, char *dev, size_t n)
{
	char path[512], num[32];
	unsigned int maj, min;

	snprintf(dev, n, "/dev/%s", entry);
	snprintf(path, sizeof path, SYS_PORTS "/%s/dev", entry);
	if (access(dev, F_OK) == -1 &&
	    (read_line(path, num, sizeof num) == -1 ||
	    sscanf(num, "%u:%u", &maj, &min) != 2 ||
	    mknod(dev, S_IFCHR | 0600, makedev(maj, min)) == -1)) {
		sd_log(NULL, "%s: no device node", dev);
		return -1;
	}
	return 0;
}

/* The name of the port in SYS_PORTS/entry, or -1. */
static int
port_name(const char *entry, char *name, size_t n)
{
	char path[512];

	if (entry[0] == '.' || strlen(entry) > 200)
		return -1;
	snprintf(path, sizeof path, SYS_PORTS "/%s/name", entry);
	return read_line(path, name, n);
}

int
sd_port_find(const char *want, char *dev, size_t n)
{
	char name[64];
	struct dirent *de;
	DIR *d;
	int rc = -1;

	if ((d = opendir(SYS_PORTS)) == NULL)
		return -1;
	while (rc == -1 && (de = readdir(d)) != NULL)
		if (port_name(de->d_name, name, sizeof name) == 0 &&
		    strcmp(name, want) == 0)
			rc = port_node(de->d_name, dev, n);
	closedir(d);
	return rc;
}

/* The space.N ports. */
static void
find_ports(void)
{
	char name[64], dev[300];
	struct dirent *de;
	DIR *d;

	if ((d = opendir(SYS_PORTS)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (port_name(de->d_name, name, sizeof name) == -1 ||
		    strncmp(name, "space.", 6) != 0 || name[6] == '\0' ||
		    strspn(name + 6, "0123456789") != strlen(name + 6))
			continue;
		if (port_node(de->d_name, dev, sizeof dev) == 0)
			add_port(dev, 0);
	}
	closedir(d);
}

/* Room for every stream of the tunnel besides the daemon's own files. */
static void
nofile_raise(void)
{
	struct rlimit r;
	rlim_t want = SP_EGRESS_STREAMS_MAX + 256;

	if (getrlimit(RLIMIT_NOFILE, &nofile) == -1 || nofile.rlim_cur >= want)
		return;
	r = nofile;
	r.rlim_cur = r.rlim_max < want ? r.rlim_max : want;
	if (setrlimit(RLIMIT_NOFILE, &r) == 0)
		nofile_raised = 1;
}

static void
usage(void)
{
	fprintf(stderr, "usage: space-daemon [-l] [-e sock [-p port] [-r port] "
	    "[-d port]] [path ...]\n");
	exit(SP_EXIT_USAGE);
}

static int
port_arg(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 0 || v > 65535)
		usage();
	return (int)v;
}

/*
 * Every signal the daemon was started with ignored goes back to its default:
 * an ignored signal survives execve, so its commands would ignore it too (a
 * daemon started from a shell's background job ignores SIGINT and SIGQUIT,
 * and ^C at a command's pty then did nothing).  Once here, not in each
 * child, where it would cost ~60 system calls a command.
 */
static void
signals_default(void)
{
	struct sigaction sa;
	int sig;

	for (sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP &&
		    sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
			signal(sig, SIG_DFL);
}

int
main(int argc, char *argv[])
{
	struct sd_egress_conf eg = { NULL, boot_id, SP_EGRESS_PROXY_PORT,
	    SP_EGRESS_REDIRECT_PORT, 53 };
	pthread_condattr_t ca;
	pthread_t t;
	size_t seed;
	sigset_t set;
	int ch, i, listening = 0;

	/* Started as the guest's init (design.md, "Any root filesystem"). */
	if (getpid() == 1)
		return sd_init_main();
	while ((ch = getopt(argc, argv, "le:p:r:d:")) != -1)
		switch (ch) {
		case 'l':
			listening = 1;
			break;
		case 'e':
			eg.sock = optarg;
			break;
		case 'p':
			eg.proxy_port = port_arg(optarg);
			break;
		case 'r':
			eg.redirect_port = port_arg(optarg);
			break;
		case 'd':
			eg.dns_port = port_arg(optarg);
			break;
		default:
			usage();
		}
	argc -= optind;
	argv += optind;
	if (listening && argc == 0)
		usage();
	/* Pipes must never land on 0, 1 or 2. */
	while ((i = open("/dev/null", O_RDWR)) >= 0 && i <= 2)
		;
	if (i > 2)
		close(i);
	signals_default();
	signal(SIGPIPE, SIG_IGN);	/* the child sets it back */
	sig_port = SIGRTMIN;
	sigemptyset(&set);
	sigaddset(&set, SIGIO);
	sigaddset(&set, sig_port);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	for (i = 0; i < PORTS_MAX; i++)
		pthread_cond_init(&host_cv[i], &ca);
	if (read_line("/proc/sys/kernel/random/boot_id", boot_id,
	    sizeof boot_id) == -1)
		snprintf(boot_id, sizeof boot_id, "unknown");
	/* jansson seeds its hash tables from /dev/urandom on first use,
	 * which waits until the kernel's generator is ready: a second and
	 * more in a fresh VM without an RNG device.  Seed it now, without
	 * waiting; the host is not hashing against us. */
	if (getrandom(&seed, sizeof seed, GRND_INSECURE) != sizeof seed)
		seed = (size_t)time(NULL) ^ (size_t)getpid() << 16;
	json_object_seed(seed | 1);
	sd_image_load();
	if (sd_activity_start() == -1)
		sd_log(NULL, "activity sampler did not start: idle_s counts calls only");
	if (pthread_create(&t, NULL, sigio_main, NULL) != 0) {
		sd_log(NULL, "cannot start a thread");
		return SP_EXIT_TEMP;
	}
	/* The test mode of -l serves no tunnel: it would take the host's
	 * ports 3128 and 53. */
	if (eg.sock != NULL || !listening)
		nofile_raise();
	if ((eg.sock != NULL || !listening) && sd_egress_start(&eg) == -1) {
		sd_log(NULL, "the egress tunnel did not start");
		if (eg.sock != NULL)
			return SP_EXIT_TEMP;
	}
	/* The tunnel's test mode alone. */
	if (eg.sock != NULL && !listening && argc == 0)
		for (;;)
			pause();
	for (i = 0; i < argc; i++)
		add_port(argv[i], listening);
	/* Without ports there is nothing to do but wait for them. */
	for (i = 0; argc == 0 && nports == 0; i++) {
		find_ports();
		if (nports == 0 && i == 0)
			sd_log(NULL, "no space.N ports yet");
		if (nports == 0)
			sleep(2);
	}
	if (nports == 0)
		return SP_EXIT_TEMP;
	for (i = 0; i < nports; i++)
		if (pthread_create(&t, NULL, port_main, &ports[i]) != 0) {
			sd_log(&ports[i], "cannot start a thread");
			return SP_EXIT_TEMP;
		}
	sd_log(NULL, "serving %d port%s, boot %s", nports,
	    nports == 1 ? "" : "s", boot_id);
	for (;;)
		pause();
}
