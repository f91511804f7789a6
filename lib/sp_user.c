/*
 * sp_user: the ids of the node's unprivileged user and of a group, looked
 * up with the reentrant calls (threads reach them).  A file of its own so
 * that what needs only these (sp_path.c's sp_path_adopt, and so the
 * fuzzers built from it) does not pull in sp_proc.c.
 */
#include <grp.h>
#include <pthread.h>
#include <pwd.h>

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
