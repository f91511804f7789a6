/*
 * exec-lib: the "library" series of bench/exec.  One channel, then N calls of
 * `true` through sp_chan_exec, each timed; prints the milliseconds, one per
 * line, for bench/exec to summarise.  With "ping" as a 4th argument each call
 * is a `ps` instead: one request and its answer, the channel's own round trip
 * with no process started.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sp.h"

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int
skip(json_t *j, void *arg)
{
	return 0;
}

int
main(int argc, char *argv[])
{
	char *cmd[] = { "true", NULL };
	struct sp_exec x = { .argv = cmd, .in_fd = -1 };
	struct sp_chan *c;
	struct sp_err e;
	double t0;
	int i, n, status, devnull;

	if (argc != 4 && (argc != 5 || strcmp(argv[4], "ping") != 0)) {
		fprintf(stderr, "usage: exec-lib RUN_DIR ID N [ping]\n");
		return SP_EXIT_USAGE;
	}
	n = atoi(argv[3]);
	devnull = open("/dev/null", O_WRONLY);
	x.out_fd = x.err_fd = devnull;
	if (sp_chan_open(&c, argv[1], argv[2], 30000, &e) == -1) {
		fprintf(stderr, "exec-lib: %s\n", e.msg);
		return SP_EXIT_TEMP;
	}
	for (i = 0; i < n; i++) {
		t0 = now_ms();
		if (argc == 5)
			status = sp_chan_ps(c, skip, NULL, &e);
		else if (sp_chan_exec(c, &x, &status, &e) == -1)
			status = -1;
		if (status != 0) {
			fprintf(stderr, "exec-lib: call %d: %s\n", i, e.msg);
			return SP_EXIT_FAIL;
		}
		printf("%.3f\n", now_ms() - t0);
	}
	sp_chan_close(c);
	return 0;
}
