/*
 * sp_boost: a claim's VM gets ten times the CPU weight of the node's other
 * sandboxes until its create is done (its first command ended, or a second
 * after the claim), so that eight creates at once are not slowed by the
 * work each guest goes on doing after its own create returned (its kernel's
 * ticks until the grace periods that free the exited command are over,
 * the hang-up of the claim's channel).
 *
 * The weight is the cgroup's that libvirt made for the VM (cpu.shares under
 * cgroup v1, cpu.weight under v2), found from its vCPU thread (sp_cgroup.c):
 * the topmost directory of that thread's cgroup whose name holds the
 * domain's name.  When the jail is on, space-noded gives that file to the
 * user space as each VM starts (sp_boost_give), so that a claim run as
 * space boosts too.
 * While boosted, $SPACE_RUN/pods/ID.boost (the directory is space's: a claim
 * as space writes there, and the VM's run directory is its jail's) holds
 * the file and the weight to put back,
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

int
sp_pod_file(const char *run_dir, const char *id, const char *what,
    char *out, size_t n, struct sp_err *e)
{
	return sp_path_fmt(out, n, e, "%s/" SP_PODS_DIR "/%s.%s", run_dir, id,
	    what);
}

void
sp_pod_forget(const char *run_dir, const char *id)
{
	static const char *const whats[] = {
		"json", MARK, SP_POD_TRIMMED, SP_POD_FENCED
	};
	char p[SP_PATH_MAX];
	struct sp_err ignored;
	size_t i;

	for (i = 0; i < sizeof whats / sizeof whats[0]; i++)
		if (sp_pod_file(run_dir, id, whats[i], p, sizeof p,
		    &ignored) == 0)
			unlink(p);
}

int
sp_boost_file_ok(const char *file, const char *id)
{
	char dir[SP_PATH_MAX];
	const char *name = strrchr(file, '/');

	if (strncmp(file, "/sys/fs/cgroup/", 15) != 0 ||
	    strstr(file, "..") != NULL || name == NULL ||
	    (strcmp(name, "/cpu.shares") != 0 &&
	    strcmp(name, "/cpu.weight") != 0) ||
	    (size_t)snprintf(dir, sizeof dir, "%.*s", (int)(name - file),
	    file) >= sizeof dir)
		return 0;
	return sp_cgroup_names_domain(dir, id);
}

int
sp_boost_give(pid_t pid, const char *id, struct sp_err *e)
{
	char file[SP_PATH_MAX];
	uid_t uid;
	gid_t gid;
	int fd, rc = 0;

	if (!sp_space_ids(&uid, &gid))
		return 0;
	if (sp_boost_weight_file(pid, id, file, sizeof file) == -1)
		return sp_err_set(e, SP_E_IO, 0, "no CPU weight file of sp-%s",
		    id);
	if ((fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1 ||
	    fchown(fd, uid, (gid_t)-1) == -1)
		rc = sp_err_sys(e, SP_E_IO, "give %s to %s", file, SP_USER);
	if (fd != -1)
		close(fd);
	return rc;
}

/* The weight file of the VM's cgroup cg. */
static int
weight_file(const struct sp_cgroup *cg, char *out, size_t n)
{
	return (size_t)snprintf(out, n, "%s%s/%s", cg->mount, cg->path,
	    cg->v2 ? "cpu.weight" : "cpu.shares") >= n ? -1 : 0;
}

int
sp_boost_weight_path(char *cgroup, char *mountinfo, const char *id,
    char *out, size_t n)
{
	struct sp_cgroup cg;

	if (sp_cgroup_parse(cgroup, mountinfo, "cpu", id, &cg) == -1)
		return -1;
	return weight_file(&cg, out, n);
}

int
sp_boost_weight_file(pid_t tid, const char *id, char *out, size_t n)
{
	struct sp_cgroup cg;

	if (sp_cgroup_of(tid, "cpu", id, &cg) == -1 ||
	    weight_file(&cg, out, n) == -1)
		return -1;
	return access(out, W_OK);
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
	struct sp_err ignored;
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
	/* The mark first: a booster killed after the write is repaired
	 * (by space-reconcile run as space: the mark is space's). */
	if (sp_pod_file(run_dir, id, MARK, b->mark, sizeof b->mark,
	    &ignored) == -1 ||
	    (b->markfd = open(b->mark, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC |
	    O_NOFOLLOW, 0600)) == -1 || flock(b->markfd, LOCK_EX) == -1 ||
	    sp_path_adopt(b->markfd, b->mark, &ignored) == -1)
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
	struct stat st;
	ssize_t r;
	int fd, w, rc = 0;

	if (sp_pod_file(run_dir, id, MARK, mark, sizeof mark, e) == -1)
		return -1;
	if ((fd = open(mark, O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
	    O_NONBLOCK)) == -1)
		return errno == ENOENT ? 0 : sp_err_sys(e, SP_E_IO, "%s", mark);
	/* space's to write: a regular file, or not a mark (no FIFO to wait
	 * on when root repairs). */
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		close(fd);
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s: not a boost record",
		    mark);
	}
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
	if (!sp_boost_file_ok(rec, id) || *val == '\0' || strlen(val) > 6) {
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
