/*
 * sp_noded_userns: the id maps of the user namespace a client's child has
 * just made to unpack a template's root filesystem in (sp_template.c), so
 * that the archive's owners are kept while nothing that parses it runs as
 * root.  A process not root may map only its own uid; space-noded writes
 * the maps, as newuidmap would from /etc/subuid:
 *
 *   0..65535  the host's SP_IMPORT_IDS_FIRST.. (ids nobody else has: what
 *             the archive's files are owned by, as the host sees them);
 *   65536     the client's own uid (gid), so that what the child makes is
 *             the client's and the client's own files stay in its reach.
 *
 * Only for a child of the client (its parent is the peer) whose uids are
 * all the client's.  The kernel takes each map once, and only from the
 * namespace's parent: so the child's namespace is one right below
 * space-noded's own (the host's), and the client's uid owns it, as a
 * process forked by the client, running as it, can only have made it
 * itself.  Its namespace is not opened here: that is a ptrace's right
 * (CAP_SYS_PTRACE), which space-noded does not keep.  The process is held
 * by its /proc directory from the first look to the last write, so a pid
 * used again names nothing.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_storage.h"

/* "PPid:" and the four "Uid:" of /proc/PID/status (host ids). */
static int
status_of(int pfd, long pid, long *ppid, unsigned uid[4], struct sp_err *e)
{
	char buf[4096], *p;
	ssize_t n;
	int fd;

	if ((fd = openat(pfd, "status", O_RDONLY | O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_NOT_FOUND, "process %ld", pid);
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "process %ld has ended",
		    pid);
	buf[n] = '\0';
	if ((p = strstr(buf, "\nPPid:\t")) == NULL ||
	    sscanf(p + 7, "%ld", ppid) != 1 ||
	    (p = strstr(buf, "\nUid:\t")) == NULL ||
	    sscanf(p + 6, "%u %u %u %u", &uid[0], &uid[1], &uid[2],
	    &uid[3]) != 4)
		return sp_err_set(e, SP_E_INTERNAL, 0, "process %ld: its status "
		    "does not read", pid);
	return 0;
}

int
sp_noded_userns_map(const struct sp_noded_req *r, struct sp_err *e)
{
	char path[64];
	unsigned uid[4];
	long ppid;
	int pfd, rc = -1, i;

	if (r->peer_uid == 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "userns-map is for a "
		    "client other than root: root unpacks owners itself");
	snprintf(path, sizeof path, "/proc/%ld", r->pid);
	if ((pfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_NOT_FOUND, "process %ld", r->pid);
	if (status_of(pfd, r->pid, &ppid, uid, e) == -1)
		goto out;
	for (i = 0; i < 4; i++)
		if (uid[i] != r->peer_uid)
			break;
	if (ppid != r->peer_pid || i < 4) {
		sp_err_set(e, SP_E_DENIED, 0, "process %ld is not a child of "
		    "the client's that runs as its uid", r->pid);
		goto out;
	}
	rc = sp_userns_write_maps(pfd, r->pid, 1, r->peer_uid, r->peer_gid,
	    e);
out:
	close(pfd);
	return rc;
}
