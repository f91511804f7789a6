/*
 * daemon-freeze: the root filesystem held still for a disk snapshot
 * (design.md, "Snapshots"), or a volume's for its snapshot.
 * {"op":"freeze","timeout_ms":N,"path":P} flushes and freezes P, by
 * default / (FIFREEZE: ext4 commits its journal and marks itself clean, so
 * the disk as it is then mounts without a replay); {"op":"thaw"} thaws it.
 * Every path thaws: a watchdog process, forked before the freeze and
 * holding only a descriptor of / and the read end of a pipe, thaws when
 * the timeout passes or when the pipe's write end closes -- a thaw, or the
 * daemon's death.  Writers in the guest wait meanwhile; nothing here
 * writes to the frozen filesystem (the daemon logs to the console).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"

#define FREEZE_MS_MAX	60000

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int root_fd = -1;	/* while frozen (or the watchdog may thaw) */
static int hold_fd = -1;	/* the pipe's write end: its close thaws */
static pid_t watchdog = -1;
static struct timespec frozen_at;

static int64_t
ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)(now.tv_sec - t->tv_sec) * 1000 +
	    (now.tv_nsec - t->tv_nsec) / 1000000;
}

/* The watchdog: async-signal-safe calls only (it is forked from threads).
 * Its timeout starts when the freeze is done (a byte on the pipe): the
 * flush before it may take long.  The pipe's end, before or after, thaws
 * at once. */
static _Noreturn void
watch(int rfd, int fd, int ms)
{
	struct pollfd p = { rfd, POLLIN, 0 };
	char b;
	ssize_t n;

	while ((n = read(rfd, &b, 1)) == -1 && errno == EINTR)
		;
	if (n == 1)
		while (poll(&p, 1, ms) == -1 && errno == EINTR)
			;
	ioctl(fd, FITHAW, 0);
	_exit(0);
}

/* Ends a freeze: thaws (0: it was frozen still; 1: the watchdog had
 * thawed it already), lets the watchdog go and reaps it.  Under mu. */
static int
release(void)
{
	int was = 0;

	if (root_fd >= 0 && ioctl(root_fd, FITHAW, 0) == -1)
		was = 1;
	if (hold_fd >= 0)
		close(hold_fd);
	if (watchdog > 0)
		while (waitpid(watchdog, NULL, 0) == -1 && errno == EINTR)
			;
	if (root_fd >= 0)
		close(root_fd);
	root_fd = hold_fd = -1;
	watchdog = -1;
	return was;
}

int
sd_op_freeze(struct port *p, uint32_t stream, json_t *req)
{
	json_int_t ms = 5000;
	const char *path = "/";
	int pp[2], err;
	pid_t pid;

	if (json_unpack(req, "{s?I, s?s}", "timeout_ms", &ms, "path",
	    &path) == -1 || ms < 1 || ms > FREEZE_MS_MAX || path[0] != '/')
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "freeze: "
		    "timeout_ms is 1..%d, path absolute", FREEZE_MS_MAX);
	pthread_mutex_lock(&mu);
	/* A freeze whose watchdog thawed it and that no thaw ended. */
	if (root_fd >= 0 && waitpid(watchdog, NULL, WNOHANG) == watchdog) {
		watchdog = -1;
		release();
	}
	if (root_fd >= 0) {
		pthread_mutex_unlock(&mu);
		return sd_send_error(p, stream, SP_E_BUSY, "frozen already");
	}
	if ((root_fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1 ||
	    pipe2(pp, O_CLOEXEC) == -1) {
		err = errno;
		release();
		pthread_mutex_unlock(&mu);
		return sd_send_error(p, stream, SP_E_IO, "freeze: %s",
		    strerror(err));
	}
	if ((pid = fork()) == 0) {
		close(pp[1]);
		watch(pp[0], root_fd, (int)ms);
	}
	close(pp[0]);
	hold_fd = pp[1];
	watchdog = pid;
	if (pid == -1 || ioctl(root_fd, FIFREEZE, 0) == -1) {
		err = errno;
		release();
		pthread_mutex_unlock(&mu);
		return sd_send_error(p, stream, err == EOPNOTSUPP ?
		    SP_E_BAD_STATE : SP_E_IO, "freezing %.200s: %s", path,
		    strerror(err));
	}
	clock_gettime(CLOCK_MONOTONIC, &frozen_at);
	(void)!write(hold_fd, "", 1);	/* the watchdog's clock starts */
	pthread_mutex_unlock(&mu);
	return sd_send_json(p, SP_FR_EXIT, stream, json_pack("{s:i, s:[s]}",
	    "status", 0, "frozen", path));
}

int
sd_op_thaw(struct port *p, uint32_t stream, json_t *req)
{
	int64_t ms = -1;
	int late = 0, was;

	(void)req;
	pthread_mutex_lock(&mu);
	if ((was = root_fd >= 0)) {
		ms = ms_since(&frozen_at);
		late = release();
	}
	pthread_mutex_unlock(&mu);
	/* Not frozen: nothing to do, and said so. */
	return sd_send_json(p, SP_FR_EXIT, stream, json_pack("{s:i, s:b, s:I, "
	    "s:b}", "status", 0, "was_frozen", was, "frozen_ms", (json_int_t)ms,
	    "timed_out", late));
}
