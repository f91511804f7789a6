/*
 * spawn: runs inside a sandbox for bench/exec.  Times N rounds of
 * vfork + exec + wait of a program (default /bin/true) with the guest's own
 * clock and prints the milliseconds, one per line: the floor under any exec
 * round trip, whatever the host and the channel do.  vfork, because that is
 * how space-daemon starts commands (clone with CLONE_VM | CLONE_VFORK).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int
main(int argc, char *argv[])
{
	char *prog = argc > 2 ? argv[2] : "/bin/true";
	char *args[] = { prog, NULL };
	int i, n = argc > 1 ? atoi(argv[1]) : 100;
	double t0;
	pid_t pid;

	if (n <= 0 || n > 100000) {
		fprintf(stderr, "usage: spawn [N [PROGRAM]]\n");
		return 100;
	}
	for (i = 0; i < n; i++) {
		t0 = now_ms();
		if ((pid = vfork()) == -1) {
			perror("vfork");
			return 1;
		}
		if (pid == 0) {
			execv(prog, args);
			_exit(127);
		}
		if (waitpid(pid, NULL, 0) == -1) {
			perror("waitpid");
			return 1;
		}
		printf("%.3f\n", now_ms() - t0);
	}
	return 0;
}
