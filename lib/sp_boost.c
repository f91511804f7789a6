/*
 * sp_boost: a claim's VM gets ten times the CPU weight of the node's other
 * sandboxes until its create is done (its first command ended, or a second
 * after the claim), so that eight creates at once are not slowed by the
 * work each guest goes on doing after its own create returned (its kernel's
 * ticks until the grace periods that free the exited command are over,
 * the hang-up of the claim's channel).
 *
 * The weight is the cgroup's that libvirt made for the VM (cpu.shares under
 * cgroup v1, cpu.weight under v2), found from its vCPU thread: the topmost
 * directory of that thread's cgroup whose name holds the domain's name.
 * While boosted, run/ID/boost holds the file and the weight to put back,
 * locked by the booster: space-reconcile puts back what a booster that was
 * killed left (sp_boost_repair), and removes a mark its booster did not get
 * to write (it had not raised the weight).  The restore is
 * async-signal-safe.
 */
#include <sys/file.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_vm.h"

#define BOOST_FACTOR	10
#define MARK		"boost"

#define PROC_TEXT_MAX	(1 << 20)	/* /proc/self/mountinfo of a busy host */

/* The next line of *text (NUL-terminated in place), or NULL at the end. */
static char *
next_line(char **text)
{
	char *line = *text, *nl;

	if (line == NULL || *line == '\0')
		return NULL;
	if ((nl = strchr(line, '\n')) != NULL) {
		*nl = '\0';
		*text = nl + 1;
	} else
		*text = line + strlen(line);
	return line;
}

/* The mount points, from mountinfo's text (changed in place), of the cgroup
 * v1 hierarchy with the cpu controller (super options holding "cpu") and of
 * cgroup v2: "" for none. */
static void
cpu_mounts(char *text, char *v1, char *v2, size_t n)
{
	char *line, *sep, *f[6], *opt, *save;
	int i;

	v1[0] = v2[0] = '\0';
	while ((line = next_line(&text)) != NULL) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT ... - FSTYPE SRC OPTS */
		if ((sep = strstr(line, " - ")) == NULL)
			continue;
		*sep = '\0';
		f[0] = strtok_r(line, " ", &save);
		for (i = 1; i < 5; i++)
			f[i] = f[i - 1] != NULL ? strtok_r(NULL, " ", &save) :
			    NULL;
		if (f[0] == NULL || f[4] == NULL || strcmp(f[3], "/") != 0)
			continue;
		f[5] = strtok_r(sep + 3, " ", &save);	/* fstype */
		(void)strtok_r(NULL, " ", &save);	/* source */
		opt = strtok_r(NULL, " ", &save);
		if (f[5] != NULL && strcmp(f[5], "cgroup2") == 0 && v2[0] == '\0')
			snprintf(v2, n, "%s", f[4]);
		if (f[5] == NULL || strcmp(f[5], "cgroup") != 0 || opt == NULL)
			continue;
		for (opt = strtok_r(opt, ",", &save); opt != NULL;
		    opt = strtok_r(NULL, ",", &save))
			if (strcmp(opt, "cpu") == 0)
				snprintf(v1, n, "%s", f[4]);
	}
}

/* Does the path's last component name the domain (libvirt writes "sp-ID"
 * as is under v1, as "sp\x2dID" in a systemd scope's name)? */
static int
names_domain(const char *path, const char *id)
{
	const char *last = strrchr(path, '/');
	char a[SP_ID_LEN + 8], b[SP_ID_LEN + 8];

	last = last != NULL ? last + 1 : path;
	snprintf(a, sizeof a, "sp-%s", id);
	snprintf(b, sizeof b, "sp\\x2d%s", id);
	return strstr(last, a) != NULL || strstr(last, b) != NULL;
}

int
sp_boost_weight_path(char *cgroup, char *mountinfo, const char *id,
    char *out, size_t n)
{
	char m1[SP_PATH_MAX], m2[SP_PATH_MAX], v1[SP_PATH_MAX] = "";
	char v2[SP_PATH_MAX] = "", up[SP_PATH_MAX], *line, *c, *p, *tok, *save;

	/* HIERARCHY:CONTROLLERS:PATH */
	while ((line = next_line(&cgroup)) != NULL) {
		if ((c = strchr(line, ':')) == NULL ||
		    (p = strchr(c + 1, ':')) == NULL)
			continue;
		*c++ = '\0';	/* line: the hierarchy's number */
		*p++ = '\0';	/* c: its controllers, p: the path */
		if (strcmp(line, "0") == 0 && *c == '\0')
			snprintf(v2, sizeof v2, "%s", p);
		for (tok = strtok_r(c, ",", &save); tok != NULL;
		    tok = strtok_r(NULL, ",", &save))
			if (strcmp(tok, "cpu") == 0)
				snprintf(v1, sizeof v1, "%s", p);
	}
	cpu_mounts(mountinfo, m1, m2, sizeof m1);
	if (v1[0] != '\0' && m1[0] != '\0')
		p = v1, c = m1;
	else if (v2[0] != '\0' && m2[0] != '\0')
		p = v2, c = m2;
	else
		return -1;
	if (p[0] != '/' || strstr(p, "/..") != NULL)
		return -1;
	/* Up to the topmost directory that names the domain. */
	while (strlen(p) > 1 && !names_domain(p, id))
		*strrchr(p, '/') = '\0';
	if (strlen(p) <= 1)
		return -1;
	for (;;) {
		snprintf(up, sizeof up, "%s", p);
		*strrchr(up, '/') = '\0';
		if (strlen(up) <= 1 || !names_domain(up, id))
			break;
		*strrchr(p, '/') = '\0';
	}
	if ((size_t)snprintf(out, n, "%s%s/%s", c, p, c == m1 ? "cpu.shares" :
	    "cpu.weight") >= n)
		return -1;
	return 0;
}

/* The whole of a /proc file, NUL-terminated, or NULL: free() it. */
static char *
proc_text(const char *path)
{
	size_t len = 0, room = 4096;
	char *buf, *bigger;
	ssize_t r;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return NULL;
	if ((buf = malloc(room)) == NULL)
		goto fail;
	while ((r = read(fd, buf + len, room - len - 1)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			goto fail;
		}
		len += (size_t)r;
		if (len + 1 == room) {
			if (room * 2 > PROC_TEXT_MAX ||
			    (bigger = realloc(buf, room * 2)) == NULL)
				goto fail;
			buf = bigger;
			room *= 2;
		}
	}
	buf[len] = '\0';
	close(fd);
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

int
sp_boost_weight_file(pid_t tid, const char *id, char *out, size_t n)
{
	char path[64], *cgroup, *mountinfo;
	int rc = -1;

	snprintf(path, sizeof path, "/proc/%d/cgroup", (int)tid);
	cgroup = proc_text(path);
	mountinfo = proc_text("/proc/self/mountinfo");
	if (cgroup != NULL && mountinfo != NULL &&
	    sp_boost_weight_path(cgroup, mountinfo, id, out, n) == 0)
		rc = access(out, W_OK);
	free(cgroup);
	free(mountinfo);
	return rc;
}

void
sp_boost_init(struct sp_boost *b)
{
	b->fd = b->markfd = -1;
	b->oldlen = 0;
	b->mark[0] = '\0';
}

int
sp_boost_start(struct sp_boost *b, const char *run_dir, const char *id,
    pid_t tid)
{
	char file[SP_PATH_MAX];

	sp_boost_init(b);
	if (tid <= 0 || sp_boost_weight_file(tid, id, file, sizeof file) == -1)
		return -1;
	return sp_boost_start_file(b, run_dir, id, file);
}

int
sp_boost_start_file(struct sp_boost *b, const char *run_dir, const char *id,
    const char *file)
{
	char val[32], rec[SP_PATH_MAX + 64];
	long long old, max;
	struct stat st;
	ssize_t r;
	int n;

	sp_boost_init(b);
	if ((b->fd = open(file, O_RDWR | O_CLOEXEC)) == -1)
		return -1;
	if ((r = pread(b->fd, val, sizeof val - 1, 0)) <= 0)
		goto fail;
	val[r] = '\0';
	old = strtoll(val, NULL, 10);
	max = strstr(file, "cpu.weight") != NULL ? 10000 : 262144;
	if (old <= 0 || old > max)
		goto fail;
	b->oldlen = (size_t)snprintf(b->old, sizeof b->old, "%lld", old);
	/* The mark first: a booster killed after the write is repaired. */
	snprintf(b->mark, sizeof b->mark, "%s/%s/" MARK, run_dir, id);
	if ((b->markfd = open(b->mark, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC |
	    O_NOFOLLOW, 0600)) == -1 || flock(b->markfd, LOCK_EX) == -1)
		goto fail;
	/* A repair that found it empty before this lock removed it: a
	 * record written there now would be in no file (no boost then). */
	if (fstat(b->markfd, &st) == -1 || st.st_nlink == 0) {
		close(b->markfd);
		b->markfd = -1;
		goto fail;
	}
	n = snprintf(rec, sizeof rec, "%s\n%s\n", file, b->old);
	if (n <= 0 || (size_t)n >= sizeof rec ||
	    write(b->markfd, rec, (size_t)n) != n)
		goto fail;
	n = snprintf(val, sizeof val, "%lld", old * BOOST_FACTOR > max ? max :
	    old * BOOST_FACTOR);
	if (pwrite(b->fd, val, (size_t)n, 0) != n)
		goto fail;
	return 0;
fail:
	sp_boost_end(b);
	return -1;
}

void
sp_boost_restore(const struct sp_boost *b)
{
	int saved = errno;

	if (b->fd >= 0 && b->oldlen > 0)
		(void)!pwrite(b->fd, b->old, b->oldlen, 0);
	errno = saved;
}

void
sp_boost_end(struct sp_boost *b)
{
	sp_boost_restore(b);
	if (b->markfd >= 0) {
		unlink(b->mark);
		close(b->markfd);
	}
	if (b->fd >= 0)
		close(b->fd);
	sp_boost_init(b);
}

int
sp_boost_repair(const char *run_dir, const char *id, struct sp_err *e)
{
	char mark[SP_PATH_MAX], rec[SP_PATH_MAX + 64], *nl, *val;
	ssize_t r;
	int fd, w, rc = 0;

	if (sp_path_fmt(mark, sizeof mark, e, "%s/%s/" MARK, run_dir, id) == -1)
		return -1;
	if ((fd = open(mark, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return errno == ENOENT ? 0 : sp_err_sys(e, SP_E_IO, "%s", mark);
	/* Held: its booster is alive and puts it back itself. */
	if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		close(fd);
		return 0;
	}
	r = read(fd, rec, sizeof rec - 1);
	rec[r > 0 ? r : 0] = '\0';
	/* FILE\nWEIGHT\n, FILE under /sys/fs/cgroup and of this domain. */
	if ((nl = strchr(rec, '\n')) == NULL) {
		/* Killed before it wrote it whole, so before the weight:
		 * nothing changed, the mark goes (a booster that had not
		 * locked it yet sees it gone, and does not boost). */
		unlink(mark);
		rc = 0;
		goto out;
	}
	*nl = '\0';
	val = nl + 1;
	val[strspn(val, "0123456789")] = '\0';
	if (strncmp(rec, "/sys/fs/cgroup/", 15) != 0 || strstr(rec, "..") ||
	    strstr(rec, id) == NULL || *val == '\0' || strlen(val) > 6) {
		rc = sp_err_set(e, SP_E_BAD_INPUT, 0, "%s: not a boost record",
		    mark);
		goto out;
	}
	if ((w = open(rec, O_WRONLY | O_CLOEXEC)) == -1) {
		/* The VM and its cgroup are gone: nothing to put back. */
		rc = errno == ENOENT ? 1 : sp_err_sys(e, SP_E_IO, "%s", rec);
		goto drop;
	}
	if (write(w, val, strlen(val)) != (ssize_t)strlen(val))
		rc = sp_err_sys(e, SP_E_IO, "%s", rec);
	else
		rc = 1;
	close(w);
drop:
	if (rc == 1)
		unlink(mark);
out:
	close(fd);
	return rc;
}
