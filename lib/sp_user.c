/*
 * sp_user: the ids of the node's unprivileged user and of a group, looked
 * up with the reentrant calls (threads reach them).  A file of its own so
 * that what needs only these (sp_path.c's sp_path_adopt, and so the
 * fuzzers built from it) does not pull in sp_proc.c.  And how a process
 * started as root becomes that user for good (space-gatewayd).
 */
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <linux/capability.h>

#include <dirent.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <unistd.h>

#include "sp_core.h"

/* space's ids once found: sp_path_adopt asks on every write a command run
 * as root makes in space's stores.  Not found is asked again (space-init
 * makes the user). */
static pthread_mutex_t space_mu = PTHREAD_MUTEX_INITIALIZER;
static int space_known;
static uid_t space_uid;
static gid_t space_gid;

int
sp_space_ids(uid_t *uid, gid_t *gid)
{
	struct passwd pw, *found = NULL;
	char buf[4096];
	int known;

	pthread_mutex_lock(&space_mu);
	if (!space_known && getpwnam_r(SP_USER, &pw, buf, sizeof buf,
	    &found) == 0 && found != NULL) {
		space_uid = pw.pw_uid;
		space_gid = pw.pw_gid;
		space_known = 1;
	}
	known = space_known;
	if (known && uid != NULL)
		*uid = space_uid;
	if (known && gid != NULL)
		*gid = space_gid;
	pthread_mutex_unlock(&space_mu);
	return known;
}

int
sp_group_id(const char *name, gid_t *gid)
{
	struct group gr, *found = NULL;
	char buf[4096];

	if (getgrnam_r(name, &gr, buf, sizeof buf, &found) != 0 ||
	    found == NULL)
		return 0;
	*gid = gr.gr_gid;
	return 1;
}

/* The threads of this process: 1 unless it started some. */
static int
threads(void)
{
	struct dirent *d;
	DIR *dir;
	int n = 0;

	if ((dir = opendir("/proc/self/task")) == NULL)
		return -1;
	while ((d = readdir(dir)) != NULL)
		n += d->d_name[0] != '.';
	closedir(dir);
	return n;
}

int
sp_become_space(int low_ports, struct sp_err *e)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = { { 0 } };
	uid_t uid;
	gid_t gid;

	if (geteuid() != 0 || !sp_space_ids(&uid, &gid))
		return 0;
	/* Capabilities are each thread's: one thread, or some stay root. */
	if (threads() != 1)
		return sp_err_set(e, SP_E_INTERNAL, 0, "becoming %s with "
		    "threads running", SP_USER);
	if ((low_ports && prctl(PR_SET_KEEPCAPS, 1L, 0L, 0L, 0L) == -1) ||
	    setgroups(1, &gid) == -1 || setresgid(gid, gid, gid) == -1 ||
	    setresuid(uid, uid, uid) == -1)
		return sp_err_sys(e, SP_E_IO, "becoming %s", SP_USER);
	if (low_ports) {
		d[0].permitted = d[0].effective =
		    1u << CAP_NET_BIND_SERVICE;
		if (syscall(SYS_capset, &h, d) == -1 ||
		    prctl(PR_SET_KEEPCAPS, 0L, 0L, 0L, 0L) == -1)
			return sp_err_sys(e, SP_E_IO, "keeping the low ports "
			    "as %s", SP_USER);
	}
	/* Not space's other processes' to trace or read: what root gave
	 * this one (a key it loaded) stays in it. */
	if (prctl(PR_SET_DUMPABLE, 0L, 0L, 0L, 0L) == -1)
		return sp_err_sys(e, SP_E_IO, "PR_SET_DUMPABLE");
	return 1;
}
