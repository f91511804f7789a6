/*
 * daemon-trim: the guest's free memory handed back to the host.
 * {"op":"trim"} takes nearly all the guest's free memory in a child
 * process, page by page, and lets it go again.  Freed, those pages join
 * runs the kernel's free page reporting tells the balloon about (4 MiB and
 * up), and QEMU gives those back to the host.  Pages that were free all
 * along are not reported again once reported: a guest restored from a
 * checkpoint has every page of its memory back on the host (on a host that
 * commits a page on a read, such as this project's machines; QEMU reads
 * every page of a restore), and only a trim returns them (design.md,
 * "Memory").  The page cache stays: only MemFree, less a reserve, is
 * taken.  The child may be killed by the OOM killer first of all, so a
 * guest process that allocates meanwhile loses nothing but the trim.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23
#endif

/* What is left free: a 16th of the guest's memory, at least 16 MiB. */
#define RESERVE_MIN_KIB	(16 * 1024)

/* MemTotal and MemFree in KiB, or -1. */
static int
meminfo(long long *total, long long *free_kib)
{
	char line[128];
	FILE *f = fopen("/proc/meminfo", "re");

	*total = *free_kib = -1;
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL) {
		(void)(sscanf(line, "MemTotal: %lld kB", total) == 1 ||
		    sscanf(line, "MemFree: %lld kB", free_kib) == 1);
	}
	fclose(f);
	return *total > 0 && *free_kib >= 0 ? 0 : -1;
}

/* Whether a balloon device is bound to its driver: without one nothing
 * freed reaches the host. */
static int
has_balloon(void)
{
	DIR *d = opendir("/sys/bus/virtio/drivers/virtio_balloon");
	struct dirent *de;
	int found = 0;

	if (d == NULL)
		return 0;
	while (!found && (de = readdir(d)) != NULL)
		found = strncmp(de->d_name, "virtio", 6) == 0;
	closedir(d);
	return found;
}

/* The child: async-signal-safe calls only (forked from threads). */
static _Noreturn void
take(size_t bytes)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	void *m;

	if (fd >= 0) {
		(void)!write(fd, "1000", 4);
		close(fd);
	}
	m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		_exit(1);
	/* Page by page: a huge page would take a run whole, and leave the
	 * small runs between them as they are. */
	(void)madvise(m, bytes, MADV_NOHUGEPAGE);
	_exit(madvise(m, bytes, MADV_POPULATE_WRITE) == 0 ? 0 : 2);
}

int
sd_op_trim(struct port *p, uint32_t stream, json_t *req)
{
	long long total, free_kib, reserve, take_kib;
	int ws, balloon;
	pid_t pid;

	(void)req;
	if (meminfo(&total, &free_kib) == -1)
		return sd_send_error(p, stream, SP_E_IO, "trim: cannot read "
		    "/proc/meminfo");
	reserve = total / 16 > RESERVE_MIN_KIB ? total / 16 : RESERVE_MIN_KIB;
	take_kib = free_kib - reserve;
	balloon = has_balloon();
	if (take_kib < 4096 || !balloon)
		return sd_send_json(p, SP_FR_EXIT, stream, json_pack("{s:i, "
		    "s:I, s:I, s:b}", "status", 0, "free_kib", free_kib,
		    "taken_kib", (json_int_t)0, "balloon", balloon));
	if ((pid = fork()) == 0)
		take((size_t)take_kib * 1024);
	if (pid == -1)
		return sd_send_error(p, stream, SP_E_IO, "trim: fork: %s",
		    strerror(errno));
	while (waitpid(pid, &ws, 0) == -1 && errno == EINTR)
		;
	return sd_send_json(p, SP_FR_EXIT, stream, json_pack("{s:i, s:I, s:I, "
	    "s:b, s:b}", "status", 0, "free_kib", free_kib, "taken_kib",
	    take_kib, "balloon", 1, "whole", WIFEXITED(ws) &&
	    WEXITSTATUS(ws) == 0));
}
