/*
 * sp_proc: runs the few external programs we need, without a shell; the
 * clock; and the crash points tests use to kill a command at a known place.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sp.h"

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
		return sp_err_sys(e, "internal", "pipe");
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	errno = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (errno != 0) {
		sp_err_sys(e, "internal", "run %s", argv[0]);
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
			return sp_err_sys(e, "internal", "wait %s", argv[0]);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		rc = 0;
	else if (WIFEXITED(status))
		sp_err_set(e, "io", 0, "%s exited %d: %s", argv[0],
		    WEXITSTATUS(status), tail);
	else
		sp_err_set(e, "io", 0, "%s killed by signal %d", argv[0],
		    WTERMSIG(status));
	return rc;
}

int64_t
sp_clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
sp_crashpoint(const char *name)
{
	const char *at = getenv("SPACE_CRASH_AT");

	if (at != NULL && strcmp(at, name) == 0)
		raise(SIGKILL);
}

/*
 * Starts argv with stdin from in and stdout to out (-1: /dev/null) and its
 * stderr to err_path (for the reason when it fails); *pid for
 * sp_proc_wait.  The caller closes its own copies of in and out.
 */
int
sp_proc_spawn(char *const argv[], int in, int out, const char *err_path,
    pid_t *pid, struct sp_err *e)
{
	posix_spawn_file_actions_t fa;

	posix_spawn_file_actions_init(&fa);
	if (in >= 0)
		posix_spawn_file_actions_adddup2(&fa, in, 0);
	else
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (out >= 0)
		posix_spawn_file_actions_adddup2(&fa, out, 1);
	else
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, err_path ? err_path :
	    "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0600);
	errno = posix_spawnp(pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (errno != 0)
		return sp_err_sys(e, "internal", "run %s", argv[0]);
	return 0;
}

/* Waits for pid; an error names what and the tail of err_path (may be NULL). */
int
sp_proc_wait(pid_t pid, const char *what, const char *err_path,
    struct sp_err *e)
{
	char tail[TAIL + 1] = "";
	ssize_t n;
	off_t end;
	int status, fd;

	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			return sp_err_sys(e, "internal", "wait %s", what);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (err_path != NULL && (fd = open(err_path, O_RDONLY | O_CLOEXEC)) >= 0) {
		end = lseek(fd, 0, SEEK_END);
		if (end > TAIL)
			lseek(fd, end - TAIL, SEEK_SET);
		else
			lseek(fd, 0, SEEK_SET);
		if ((n = read(fd, tail, TAIL)) > 0)
			tail[n] = '\0';
		close(fd);
		while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == ' '))
			tail[--n] = '\0';
	}
	if (WIFEXITED(status))
		return sp_err_set(e, "io", 0, "%s exited %d: %s", what,
		    WEXITSTATUS(status), tail);
	return sp_err_set(e, "io", 0, "%s killed by signal %d", what,
	    WTERMSIG(status));
}
