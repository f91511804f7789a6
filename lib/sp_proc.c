/*
 * sp_proc: runs the few external programs we need, without a shell; the
 * clock; the crash points tests use to kill a command at a known place; and
 * who the user space is.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sp_core.h"

extern char **environ;

#define TAIL 400

int
sp_proc_run(char *const argv[], struct sp_err *e)
{
	posix_spawn_file_actions_t fa;
	char tail[TAIL + 1], buf[512];
	size_t tn = 0;
	ssize_t n;
	int p[2], status, rc = -1;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) == -1)
		return sp_err_sys(e, SP_E_INTERNAL, "pipe");
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	errno = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (errno != 0) {
		sp_err_sys(e, SP_E_INTERNAL, "run %s", argv[0]);
		close(p[0]);
		return -1;
	}
	/* Keep only the last TAIL bytes of stderr: that is where the reason is. */
	while ((n = read(p[0], buf, sizeof buf)) > 0 || (n == -1 && errno == EINTR)) {
		if (n <= 0)
			continue;
		if ((size_t)n >= TAIL) {
			memcpy(tail, buf + n - TAIL, TAIL);
			tn = TAIL;
		} else {
			if (tn + (size_t)n > TAIL) {
				memmove(tail, tail + (tn + n - TAIL), TAIL - n);
				tn = TAIL - n;
			}
			memcpy(tail + tn, buf, n);
			tn += n;
		}
	}
	close(p[0]);
	tail[tn] = '\0';
	while (tn > 0 && (tail[tn - 1] == '\n' || tail[tn - 1] == ' '))
		tail[--tn] = '\0';
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			return sp_err_sys(e, SP_E_INTERNAL, "wait %s", argv[0]);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		rc = 0;
	else if (WIFEXITED(status))
		sp_err_set(e, SP_E_IO, 0, "%s exited %d: %s", argv[0],
		    WEXITSTATUS(status), tail);
	else
		sp_err_set(e, SP_E_IO, 0, "%s killed by signal %d", argv[0],
		    WTERMSIG(status));
	return rc;
}

int64_t
sp_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
sp_clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
sp_now(int64_t *out, struct sp_err *e)
{
	const char *v = getenv("SPACE_NOW");
	char *end;
	long long t;

	if (v == NULL || *v == '\0') {
		*out = (int64_t)time(NULL);
		return 0;
	}
	errno = 0;
	t = strtoll(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0' || t < 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_NOW must be unix "
		    "seconds");
	*out = t;
	return 0;
}

void
sp_crashpoint(const char *name)
{
	const char *at = getenv("SPACE_CRASH_AT");

	if (at != NULL && strcmp(at, name) == 0)
		raise(SIGKILL);
	/* Stops here until a test has done what it wants done in between
	 * (stopped the DB server) and sends SIGCONT. */
	if ((at = getenv("SPACE_STOP_AT")) != NULL && strcmp(at, name) == 0)
		raise(SIGSTOP);
}

/*
 * A place for programs' stderr that is never full: memory of our own (a
 * file on the node's filesystem would lose the very message that says the
 * filesystem is full), one per call, so concurrent calls keep theirs apart.
 */
int
sp_proc_errfd(struct sp_err *e)
{
	int fd = memfd_create("stderr", MFD_CLOEXEC);

	if (fd == -1)
		return sp_err_sys(e, SP_E_INTERNAL, "memfd_create");
	return fd;
}

/*
 * Starts argv with stdin from in and stdout to out (-1: /dev/null) and its
 * stderr to err (sp_proc_errfd; -1: /dev/null), for the reason when it
 * fails; *pid for sp_proc_wait.  The caller closes its own copies of in,
 * out and err.
 */
int
sp_proc_spawn(char *const argv[], int in, int out, int err, pid_t *pid,
    struct sp_err *e)
{
	return sp_proc_spawn_fds(argv, in, out, err, NULL, 0, pid, e);
}

int
sp_proc_spawn_fds(char *const argv[], int in, int out, int err,
    const int *fds, int nfds, pid_t *pid, struct sp_err *e)
{
	posix_spawn_file_actions_t fa;
	int high[SP_PROC_FDS_MAX], i, n, rc = -1;

	if (nfds < 0 || nfds > SP_PROC_FDS_MAX)
		return sp_err_set(e, SP_E_INTERNAL, 0, "%d descriptors to pass",
		    nfds);
	/* Copies above every target first: a descriptor that is itself 3 or
	 * 4 would be overwritten before it is passed on. */
	for (n = 0; n < nfds; n++)
		if ((high[n] = fcntl(fds[n], F_DUPFD_CLOEXEC, 64)) == -1) {
			sp_err_sys(e, SP_E_INTERNAL, "pass descriptor %d",
			    fds[n]);
			goto out;
		}
	posix_spawn_file_actions_init(&fa);
	if (in >= 0)
		posix_spawn_file_actions_adddup2(&fa, in, 0);
	else
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (out >= 0)
		posix_spawn_file_actions_adddup2(&fa, out, 1);
	else
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (err >= 0)
		posix_spawn_file_actions_adddup2(&fa, err, 2);
	else
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	for (i = 0; i < nfds; i++)
		posix_spawn_file_actions_adddup2(&fa, high[i], 3 + i);
	errno = posix_spawnp(pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (errno != 0)
		sp_err_sys(e, SP_E_INTERNAL, "run %s", argv[0]);
	else
		rc = 0;
out:
	while (n > 0)
		close(high[--n]);
	return rc;
}

/* Waits for pid; an error names what and the tail of err (may be -1). */
int
sp_proc_wait(pid_t pid, const char *what, int err, struct sp_err *e)
{
	char tail[TAIL + 1] = "";
	ssize_t n = 0;
	off_t end;
	int status;

	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			return sp_err_sys(e, SP_E_INTERNAL, "wait %s", what);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (err >= 0 && (end = lseek(err, 0, SEEK_END)) > 0 &&
	    (n = pread(err, tail, TAIL, end > TAIL ? end - TAIL : 0)) > 0)
		tail[n] = '\0';
	while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == ' '))
		tail[--n] = '\0';
	if (WIFEXITED(status))
		return sp_err_set(e, SP_E_IO, 0, "%s exited %d: %s", what,
		    WEXITSTATUS(status), tail);
	return sp_err_set(e, SP_E_IO, 0, "%s killed by signal %d", what,
	    WTERMSIG(status));
}

/* Keeps the last SP_PROC_TAIL bytes p adds, as printable text. */
static void
tail_add(char *tail, size_t *tn, const unsigned char *p, size_t n)
{
	size_t i;

	if (n > SP_PROC_TAIL) {
		p += n - SP_PROC_TAIL;
		n = SP_PROC_TAIL;
	}
	if (*tn + n > SP_PROC_TAIL) {
		memmove(tail, tail + (*tn + n - SP_PROC_TAIL), SP_PROC_TAIL - n);
		*tn = SP_PROC_TAIL - n;
	}
	for (i = 0; i < n; i++)
		tail[(*tn)++] = p[i] >= 0x20 && p[i] <= 0x7e ? (char)p[i] : ' ';
	tail[*tn] = '\0';
}

/* argv started in a process group of its own, its stdin a socket (send()
 * with MSG_NOSIGNAL cannot SIGPIPE us when it does not read). */
static int
talk_spawn(char *const argv[], int in[2], int out[2], int err[2], pid_t *pid,
    struct sp_err *e)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, def;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) == -1 ||
	    pipe2(out, O_CLOEXEC) == -1 || pipe2(err, O_CLOEXEC) == -1)
		return sp_err_sys(e, SP_E_INTERNAL, "pipes for %s", argv[0]);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[1], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, err[1], 2);
	/* Its own group, so that a timeout kills what it started too. */
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &def);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP |
	    POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	errno = posix_spawnp(pid, argv[0], &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (errno != 0) {
		*pid = -1;
		return sp_err_sys(e, SP_E_INTERNAL, "run %s", argv[0]);
	}
	close(in[1]);
	close(out[1]);
	close(err[1]);
	in[1] = out[1] = err[1] = -1;
	return 0;
}

int
sp_proc_talk(char *const argv[], const void *in, size_t inlen,
    unsigned char *out, size_t max, size_t *outn, char tail[SP_PROC_TAIL + 1],
    int ms, struct sp_err *e)
{
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	int *fds[] = { pin, pout, perr };
	const unsigned char *ip = in;
	unsigned char scratch[512];
	struct pollfd pfd[3];
	int64_t deadline, left;
	size_t got = 0, tn = 0, room, j;
	int i, status, rc = -1;
	ssize_t k;
	pid_t pid = -1, w;

	tail[0] = '\0';
	if (talk_spawn(argv, pin, pout, perr, &pid, e) == -1)
		goto out;
	deadline = sp_clock_ms() + ms;
	pfd[0].fd = pin[0];
	pfd[0].events = POLLOUT;
	pfd[1].fd = pout[0];
	pfd[2].fd = perr[0];
	pfd[1].events = pfd[2].events = POLLIN;
	if (inlen == 0) {
		shutdown(pin[0], SHUT_WR);
		pfd[0].fd = -1;
	}
	while (pfd[1].fd != -1 || pfd[2].fd != -1) {
		if ((left = deadline - sp_clock_ms()) <= 0)
			goto timeout;
		if (poll(pfd, 3, left) == -1) {
			if (errno == EINTR)
				continue;
			sp_err_sys(e, SP_E_INTERNAL, "poll %s", argv[0]);
			goto out;
		}
		if (pfd[0].fd != -1 && pfd[0].revents != 0) {
			k = send(pin[0], ip, inlen, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (k > 0) {
				ip += k;
				inlen -= (size_t)k;
			}
			/* Done, or it will not read: its answer tells. */
			if (inlen == 0 || (k == -1 && errno != EAGAIN &&
			    errno != EINTR)) {
				shutdown(pin[0], SHUT_WR);
				pfd[0].fd = -1;
			}
		}
		for (i = 1; i < 3; i++) {
			if (pfd[i].fd == -1 || pfd[i].revents == 0)
				continue;
			room = i == 1 && out != NULL && got < max;
			k = read(pfd[i].fd, room ? out + got : scratch, room ?
			    max - got : sizeof scratch);
			if (k == -1 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (k <= 0) {
				pfd[i].fd = -1;
			} else if (i == 2) {
				tail_add(tail, &tn, scratch, (size_t)k);
			} else if (room) {
				got += (size_t)k;
			} else if (out != NULL) {
				sp_err_set(e, SP_E_TOO_BIG, 0, "%s printed over %zu "
				    "bytes", argv[0], max);
				goto out;
			}
		}
	}
	/* Its output is closed; it still has until the deadline to exit. */
	for (;;) {
		w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			break;
		if (w == -1 && errno != EINTR) {
			sp_err_sys(e, SP_E_INTERNAL, "wait %s", argv[0]);
			goto out;
		}
		if (sp_clock_ms() >= deadline)
			goto timeout;
		poll(NULL, 0, 1);
	}
	pid = -1;
	while (tn > 0 && tail[tn - 1] == ' ')
		tail[--tn] = '\0';
	if (WIFSIGNALED(status)) {
		sp_err_set(e, SP_E_KILLED, 1, "%s killed by signal %d", argv[0],
		    WTERMSIG(status));
		goto out;
	}
	if (outn != NULL)
		*outn = got;
	rc = WEXITSTATUS(status);
	goto out;
timeout:
	sp_err_set(e, SP_E_TIMED_OUT, 1, "%s did not finish in %d ms", argv[0], ms);
out:
	sodium_memzero(scratch, sizeof scratch);
	if (pid > 0) {
		kill(-pid, SIGKILL);
		while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
			;
	}
	for (i = 0; i < 3; i++)
		for (j = 0; j < 2; j++)
			if (fds[i][j] != -1)
				close(fds[i][j]);
	if (rc == -1 && out != NULL)
		sodium_memzero(out, max);
	return rc;
}

int
sp_env_ms(const char *name, int def, int *ms, struct sp_err *e)
{
	const char *s = getenv(name);
	char *end;
	long v;

	*ms = def;
	if (s == NULL || *s == '\0')
		return 0;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 1 || v > 3600000)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s: not a number of "
		    "milliseconds 1..3600000", name);
	*ms = (int)v;
	return 0;
}
