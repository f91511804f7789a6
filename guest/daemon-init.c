/*
 * daemon-init: the guest's init for a root that brings none of SPACE's and
 * no systemd (an image imported as it is: design.md, "Any root
 * filesystem").  The initramfs starts /.space/bin/space-daemon as PID 1,
 * and as PID 1 it is this: it mounts what the guest needs and its image
 * need not have done (/dev/pts, /dev/shm, /run), starts the daemon proper
 * as its child and again whenever it dies, reaps every orphan, and on the
 * signals an init takes for it (SIGTERM, SIGUSR1, SIGUSR2, SIGPWR, SIGINT
 * from ctrl-alt-del) ends everything and powers the VM off.
 */
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"

#define SELF	"/proc/self/exe"

/* 1 when path is a mount point: another device than its parent's. */
static int
mounted(const char *path)
{
	char parent[256];
	struct stat a, b;

	snprintf(parent, sizeof parent, "%s/..", path);
	return stat(path, &a) == 0 && stat(parent, &b) == 0 &&
	    a.st_dev != b.st_dev;
}

static void
mount_if(const char *src, const char *dir, const char *type,
    unsigned long flags, const char *opts, mode_t mode)
{
	mkdir(dir, mode);
	if (!mounted(dir) && mount(src, dir, type, flags, opts) == -1)
		fprintf(stderr, "space-init: mount %s on %s: %s\n", type, dir,
		    strerror(errno));
}

static void
set_up(void)
{
	static const char *const links[][2] = {
		{ "/proc/self/fd", "/dev/fd" }, { "/proc/self/fd/0", "/dev/stdin" },
		{ "/proc/self/fd/1", "/dev/stdout" },
		{ "/proc/self/fd/2", "/dev/stderr" },
	};
	size_t i;

	mount_if("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL, 0555);
	mount_if("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL, 0555);
	mount_if("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755", 0755);
	mount_if("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	    "gid=5,mode=0620,ptmxmode=0666", 0755);
	mount_if("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
	    "mode=1777", 01777);
	mount_if("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755",
	    0755);
	for (i = 0; i < sizeof links / sizeof links[0]; i++)
		if (symlink(links[i][0], links[i][1]) == -1 && errno != EEXIST)
			fprintf(stderr, "space-init: %s: %s\n", links[i][1],
			    strerror(errno));
}

/* The daemon proper: this program again, not as PID 1. */
static pid_t
start(const sigset_t *old)
{
	char *argv[] = { "space-daemon", NULL };
	pid_t pid = fork();

	if (pid == 0) {
		sigprocmask(SIG_SETMASK, old, NULL);
		setsid();
		execv(SELF, argv);
		fprintf(stderr, "space-init: exec space-daemon: %s\n",
		    strerror(errno));
		_exit(127);
	}
	if (pid == -1)
		fprintf(stderr, "space-init: fork: %s\n", strerror(errno));
	return pid;
}

static void
power_off(void)
{
	struct timespec ts = { 0, 100 * 1000 * 1000 };
	int i;

	kill(-1, SIGTERM);
	for (i = 0; i < 20 && waitpid(-1, NULL, WNOHANG) != -1; i++)
		nanosleep(&ts, NULL);
	kill(-1, SIGKILL);
	sync();
	reboot(RB_POWER_OFF);
	_exit(1);	/* the kernel panics and the VM ends */
}

int
sd_init_main(void)
{
	struct timespec now, last = { 0, 0 }, pause = { 1, 0 };
	sigset_t all, old;
	siginfo_t si;
	pid_t daemon, pid;
	int fd;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	if ((fd = open("/dev/console", O_RDWR | O_NOCTTY | O_CLOEXEC)) != -1) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	set_up();
	/* ctrl-alt-del is a signal to init, not a reboot. */
	reboot(RB_DISABLE_CAD);
	daemon = start(&old);
	for (;;) {
		if (sigwaitinfo(&all, &si) == -1)
			continue;
		switch (si.si_signo) {
		case SIGTERM:
		case SIGINT:
		case SIGUSR1:
		case SIGUSR2:
		case SIGPWR:
			power_off();
			break;
		case SIGCHLD:
			break;
		default:
			continue;
		}
		while ((pid = waitpid(-1, NULL, WNOHANG)) > 0) {
			if (pid != daemon)
				continue;
			/* Not more than once a second. */
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - last.tv_sec < 1)
				nanosleep(&pause, NULL);
			clock_gettime(CLOCK_MONOTONIC, &last);
			fprintf(stderr, "space-init: space-daemon ended; "
			    "starting it again\n");
			daemon = start(&old);
		}
	}
}
