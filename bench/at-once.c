/*
 * at-once: starts N copies of a command at once and times each, from just
 * before its posix_spawn to its reaping.  Prints one line per copy, in the
 * order they ended: the milliseconds, a tab, the first line the copy wrote
 * (its JSON, for bench/create to check and to clean up after).
 *
 *   at-once N CMD [ARG...]
 *
 * bench/create times its concurrent rounds with both this and bash.  Under
 * bash each create costs the bench two forks of bash (the `&` subshell, then
 * `$(...)`), and a fork copies bash's page tables: work of the harness, not
 * of the command, which on some machines here took a fifth of a round's CPU.
 * posix_spawn starts the command without copying the parent.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define COPIES_MAX	64
#define LINE_MAX_OUT	4096	/* a create's JSON line is ~250 bytes */

extern char **environ;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct copy {
	pid_t pid;
	int out;	/* read end of the copy's stdout */
	double t0;
};

/* The first line of what the copy wrote; it has exited, so this ends. */
static void
first_line(int fd, char *buf, size_t n)
{
	size_t got = 0;
	ssize_t r;

	while (got < n - 1 && (r = read(fd, buf + got, n - 1 - got)) != 0) {
		if (r == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		got += (size_t)r;
	}
	buf[got] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

int
main(int argc, char *argv[])
{
	static struct copy c[COPIES_MAX];
	posix_spawn_file_actions_t fa;
	char line[LINE_MAX_OUT], *end;
	int i, k, n, p[2], status, failed = 0;
	double t1;
	pid_t pid;
	long v;

	if (argc < 3 || (v = strtol(argv[1], &end, 10), *end != '\0') ||
	    v < 1 || v > COPIES_MAX) {
		fprintf(stderr, "usage: at-once N CMD [ARG...]  (N 1..%d)\n",
		    COPIES_MAX);
		return 2;
	}
	n = (int)v;
	for (i = 0; i < n; i++) {
		/* Close-on-exec: a copy gets its own pipe as stdout and
		 * none of the others' ends. */
		if (pipe2(p, O_CLOEXEC) == -1) {
			perror("at-once: pipe");
			failed = 1;
			break;
		}
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
		c[i].out = p[0];
		c[i].t0 = now_ms();
		errno = posix_spawnp(&c[i].pid, argv[2], &fa, NULL, argv + 2,
		    environ);
		posix_spawn_file_actions_destroy(&fa);
		close(p[1]);
		if (errno != 0) {
			fprintf(stderr, "at-once: %s: %s\n", argv[2],
			    strerror(errno));
			close(c[i].out);
			failed = 1;
			break;
		}
	}
	/* Only the copies that started, each waited for and told: a caller
	 * cleans up after what they made even when a later one did not
	 * start. */
	n = i;
	for (k = 0; k < n; k++) {
		while ((pid = waitpid(-1, &status, 0)) == -1 && errno == EINTR)
			;
		t1 = now_ms();
		if (pid == -1) {
			perror("at-once: waitpid");
			return 1;
		}
		for (i = 0; i < n && c[i].pid != pid; i++)
			;
		if (i == n)
			continue;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed = 1;
		/* Each copy's output was written before it exited and fits in
		 * the pipe, so reading it now does not hold up the others. */
		first_line(c[i].out, line, sizeof line);
		close(c[i].out);
		printf("%.3f\t%s\n", t1 - c[i].t0, line);
	}
	return failed;
}
