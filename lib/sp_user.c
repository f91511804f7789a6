/*
 * sp_user: the ids of the node's unprivileged user and of a group, looked
 * up with the reentrant calls (threads reach them).  A file of its own so
 * that what needs only these (sp_path.c's sp_path_adopt, and so the
 * fuzzers built from it) does not pull in sp_proc.c.
 */
#include <grp.h>
#include <pwd.h>

#include "sp_core.h"

int
sp_space_ids(uid_t *uid, gid_t *gid)
{
	struct passwd pw, *found = NULL;
	char buf[4096];

	if (getpwnam_r(SP_USER, &pw, buf, sizeof buf, &found) != 0 ||
	    found == NULL)
		return 0;
	if (uid != NULL)
		*uid = pw.pw_uid;
	if (gid != NULL)
		*gid = pw.pw_gid;
	return 1;
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
