/*
 * sp_cgroup: where a VM's cgroup is, for the jail's limits (sp_jail.c) and
 * a claim's CPU boost (sp_boost.c).  Found, not assumed: the hierarchies'
 * mount points from /proc/self/mountinfo, and a task's cgroup from its
 * /proc/TID/cgroup, taken up to the topmost directory whose name holds the
 * domain's (libvirt writes "sp-ID" as is without systemd, "sp\x2dID" in a
 * systemd scope's name).  Under cgroup v1 a controller has a hierarchy of
 * its own; under v2 all share one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_vm.h"

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

/* Does the comma-separated list hold name? (list is changed in place) */
static int
listed(char *list, const char *name)
{
	char *tok, *save;

	for (tok = strtok_r(list, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save))
		if (strcmp(tok, name) == 0)
			return 1;
	return 0;
}

/* The mount points, from mountinfo's text (changed in place), of the cgroup
 * v1 hierarchy with controller (its super options name it) and of cgroup
 * v2: "" for none. */
static void
mounts(char *text, const char *controller, char *v1, char *v2, size_t n)
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
		if (f[5] != NULL && strcmp(f[5], "cgroup") == 0 && opt != NULL &&
		    listed(opt, controller))
			snprintf(v1, n, "%s", f[4]);
	}
}

int
sp_cgroup_names_domain(const char *path, const char *id)
{
	const char *last = strrchr(path, '/');
	char a[SP_ID_LEN + 8], b[SP_ID_LEN + 8];

	last = last != NULL ? last + 1 : path;
	snprintf(a, sizeof a, "sp-%s", id);
	snprintf(b, sizeof b, "sp\\x2d%s", id);
	return strstr(last, a) != NULL || strstr(last, b) != NULL;
}

int
sp_cgroup_parse(char *cgroup, char *mountinfo, const char *controller,
    const char *id, struct sp_cgroup *cg)
{
	char m1[SP_PATH_MAX], m2[SP_PATH_MAX], v1[SP_PATH_MAX] = "";
	char v2[SP_PATH_MAX] = "", up[SP_PATH_MAX], *line, *c, *p;

	memset(cg, 0, sizeof *cg);
	/* HIERARCHY:CONTROLLERS:PATH */
	while ((line = next_line(&cgroup)) != NULL) {
		if ((c = strchr(line, ':')) == NULL ||
		    (p = strchr(c + 1, ':')) == NULL)
			continue;
		*c++ = '\0';	/* line: the hierarchy's number */
		*p++ = '\0';	/* c: its controllers, p: the path */
		if (strcmp(line, "0") == 0 && *c == '\0')
			snprintf(v2, sizeof v2, "%s", p);
		else if (listed(c, controller))
			snprintf(v1, sizeof v1, "%s", p);
	}
	mounts(mountinfo, controller, m1, m2, sizeof m1);
	if (v1[0] != '\0' && m1[0] != '\0')
		p = v1, c = m1;
	else if (v2[0] != '\0' && m2[0] != '\0')
		p = v2, c = m2, cg->v2 = 1;
	else
		return -1;
	if (p[0] != '/' || strstr(p, "/..") != NULL)
		return -1;
	/* Up to the topmost directory that names the domain. */
	while (strlen(p) > 1 && !sp_cgroup_names_domain(p, id))
		*strrchr(p, '/') = '\0';
	if (strlen(p) <= 1)
		return -1;
	for (;;) {
		snprintf(up, sizeof up, "%s", p);
		*strrchr(up, '/') = '\0';
		if (strlen(up) <= 1 || !sp_cgroup_names_domain(up, id))
			break;
		*strrchr(p, '/') = '\0';
	}
	if ((size_t)snprintf(cg->mount, sizeof cg->mount, "%s", c) >=
	    sizeof cg->mount ||
	    (size_t)snprintf(cg->path, sizeof cg->path, "%s", p) >=
	    sizeof cg->path)
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
sp_cgroup_of(pid_t tid, const char *controller, const char *id,
    struct sp_cgroup *cg)
{
	char path[64], *cgroup, *mountinfo;
	int rc = -1;

	snprintf(path, sizeof path, "/proc/%d/cgroup", (int)tid);
	cgroup = proc_text(path);
	mountinfo = proc_text("/proc/self/mountinfo");
	if (cgroup != NULL && mountinfo != NULL)
		rc = sp_cgroup_parse(cgroup, mountinfo, controller, id, cg);
	free(cgroup);
	free(mountinfo);
	return rc;
}

int
sp_cgroup_mount(const char *controller, char *out, size_t n, int *v2)
{
	char m2[SP_PATH_MAX], *mountinfo;

	*v2 = 0;
	out[0] = '\0';
	if ((mountinfo = proc_text("/proc/self/mountinfo")) == NULL)
		return -1;
	mounts(mountinfo, controller, out, m2, n < sizeof m2 ? n : sizeof m2);
	free(mountinfo);
	if (out[0] == '\0' && m2[0] != '\0') {
		snprintf(out, n, "%s", m2);
		*v2 = 1;
	}
	return out[0] != '\0' ? 0 : -1;
}
