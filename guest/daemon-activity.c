/*
 * daemon-activity: when did this sandbox last do anything?  The time of the
 * last call the daemon served, and of the last change in the CPU time and I/O
 * of the guest's processes, so the host can pause what nobody uses
 * (`space-ls --idle-over 900 | space-pause`).  A sample reads /proc/PID/stat
 * and io of every process, which under TCG is costly enough that sampling
 * often would be much of what an idle sandbox costs the host
 * (docs/benchmarks.md, "Idle guests").  So the activity op samples when
 * asked, and a sample is taken unasked only every SAMPLE_S:
 * work no one asked about is then dated up to SAMPLE_S late, which makes a
 * sandbox look busier, never idler.
 */
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"

#define SAMPLE_S	30

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
/* Samples are taken one at a time, so that none is compared with a later. */
static pthread_mutex_t sample_mu = PTHREAD_MUTEX_INITIALIZER;
static double last_call, last_busy, started;
static unsigned long long calls;	/* served since the guest booted */
static unsigned long long last_sum;

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void
sd_activity_touch(void)
{
	pthread_mutex_lock(&mu);
	last_call = now_s();
	calls++;
	pthread_mutex_unlock(&mu);
}

/* utime + stime from a /proc/PID/stat line, or with children cutime +
 * cstime only (the daemon's own: the work of the calls it reaped, not its
 * serving).  One read, so a tick that lands between two reads cannot look
 * like work.  The comm field may hold spaces and parentheses.  Kernel
 * threads (children of kthreadd, pid 2) work on their own: KTHREAD. */
#define KTHREAD	ULLONG_MAX
static unsigned long long
stat_ticks(const char *path, int children)
{
	unsigned long long v[4] = { 0 };
	char buf[1024], *p;
	long ppid;
	FILE *f;
	size_t n;
	int i;

	if ((f = fopen(path, "re")) == NULL)
		return 0;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	if ((p = strrchr(buf, ')')) == NULL)
		return 0;
	if (sscanf(p + 2, "%*c %ld", &ppid) != 1)
		return 0;
	if (ppid == 2)
		return KTHREAD;
	/* After ") ": state(3) ... utime is field 14, so skip 11 fields. */
	for (i = 0, p += 2; i < 11 && p != NULL; i++)
		p = strchr(p + 1, ' ');
	if (p == NULL || sscanf(p, " %llu %llu %llu %llu", &v[0], &v[1], &v[2],
	    &v[3]) != 4)
		return 0;
	return children ? v[2] + v[3] : v[0] + v[1];
}

/* rchar + wchar: any read or write a process made, files and pipes alike. */
static unsigned long long
io_bytes(const char *path)
{
	unsigned long long sum = 0, x;
	char line[128];
	FILE *f;

	if ((f = fopen(path, "re")) == NULL)
		return 0;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "rchar: %llu", &x) == 1 ||
		    sscanf(line, "wchar: %llu", &x) == 1)
			sum += x;
	fclose(f);
	return sum;
}

/* The work of every process but init and the daemon's own serving. */
static unsigned long long
sample(void)
{
	char path[64];
	struct dirent *d;
	unsigned long long sum, ticks;
	pid_t self = getpid();
	DIR *dir;
	long pid;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)self);
	sum = stat_ticks(path, 1);
	if ((dir = opendir("/proc")) == NULL)
		return sum;
	while ((d = readdir(dir)) != NULL) {
		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		pid = strtol(d->d_name, NULL, 10);
		if (pid <= 2 || pid == self)
			continue;
		snprintf(path, sizeof path, "/proc/%ld/stat", pid);
		if ((ticks = stat_ticks(path, 0)) == KTHREAD)
			continue;
		sum += ticks;
		snprintf(path, sizeof path, "/proc/%ld/io", pid);
		sum += io_bytes(path);
	}
	closedir(dir);
	return sum;
}

/* Work since the last sample is dated now. */
static void
take_sample(void)
{
	unsigned long long s;

	pthread_mutex_lock(&sample_mu);
	s = sample();
	pthread_mutex_lock(&mu);
	if (s != last_sum)
		last_busy = now_s();
	last_sum = s;
	pthread_mutex_unlock(&mu);
	pthread_mutex_unlock(&sample_mu);
}

static void *
sampler(void *arg)
{
	(void)arg;
	for (;;) {
		sleep(SAMPLE_S);
		take_sample();
	}
	return NULL;
}

int
sd_activity_start(void)
{
	pthread_t t;

	started = last_call = last_busy = now_s();
	last_sum = sample();
	if (pthread_create(&t, NULL, sampler, NULL) != 0)
		return -1;
	pthread_detach(t);
	return 0;
}

/* {"op":"activity"} -> EXIT {"status":0,"idle_s":N,"call_idle_s":N,
 * "busy_idle_s":N,"uptime_s":N,"calls":N}.  Not itself a call that counts
 * as use. */
int
sd_op_activity(struct port *p, uint32_t stream, json_t *req)
{
	double now, call, busy;
	unsigned long long n;

	(void)req;
	take_sample();
	now = now_s();
	pthread_mutex_lock(&mu);
	call = now - last_call;
	busy = now - last_busy;
	n = calls;
	pthread_mutex_unlock(&mu);
	return sd_send_json(p, SP_FR_EXIT, stream, json_pack("{s:i, s:I, s:I, "
	    "s:I, s:I, s:I}", "status", 0, "idle_s", (json_int_t)(call < busy ?
	    call : busy), "call_idle_s", (json_int_t)call, "busy_idle_s",
	    (json_int_t)busy, "uptime_s", (json_int_t)(now - started), "calls",
	    (json_int_t)n));
}
