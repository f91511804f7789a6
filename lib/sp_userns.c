/*
 * sp_userns: a function run in a child in a user namespace of its own,
 * whose id maps space-noded writes (sp_noded_userns.c), or root itself.
 * There the child is root over the ids 0..65535, which are the host's
 * SP_IMPORT_IDS_FIRST.., and 65536 is its caller's own uid and gid (but
 * root's: nothing of root's is the child's).  So what keeps an archive's
 * owners, a template's import by one not root, needs no root to do it: the
 * archive is parsed by a process that can reach what its caller can, and
 * the files of ids nobody else has.
 */
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_vm.h"

/* What the child answers: its function's JSON, or its error. */
#define ANSWER_MAX	(4 << 20)

static void
child(int go, int res, int (*fn)(void *, json_t **, struct sp_err *),
    void *arg)
{
	struct sp_err e;
	json_t *value = NULL, *o;
	char c;
	int rc = -1;

	/* One byte first: "u", in its namespace and waiting for the maps;
	 * "e", its error follows. */
	if (unshare(CLONE_NEWUSER) == -1) {
		sp_err_sys(&e, SP_E_INTERNAL, "a user namespace");
		if (write(res, "e", 1) != 1)
			_exit(1);
	} else if (write(res, "u", 1) != 1 || read(go, &c, 1) != 1)
		_exit(1);	/* the caller went, or failed to map it */
	else if (setgroups(0, NULL) == -1 || setresgid(0, 0, 0) == -1 ||
	    setresuid(0, 0, 0) == -1)
		sp_err_sys(&e, SP_E_INTERNAL, "become the user namespace's "
		    "root");
	else
		rc = fn(arg, &value, &e);
	o = rc == 0 ? json_pack("{s:o*}", "value", value) :
	    json_pack("{s:s, s:b, s:s}", "code", sp_code_name(e.code),
	    "temp", e.temp, "msg", e.msg);
	if (o == NULL || json_dumpfd(o, res, JSON_COMPACT) == -1)
		_exit(1);
	_exit(0);
}

int
sp_userns_write_maps(int pfd, long pid, int client, unsigned uid,
    unsigned gid, struct sp_err *e)
{
	static const char *const files[] = { "uid_map", "gid_map" };
	char map[128];
	int fd, n, i;
	ssize_t w;

	for (i = 0; i < 2; i++) {
		n = snprintf(map, sizeof map, "0 %lu %lu\n",
		    (unsigned long)SP_IMPORT_IDS_FIRST,
		    (unsigned long)SP_IMPORT_IDS);
		if (client)
			n += snprintf(map + n, sizeof map - (size_t)n,
			    "%lu %u 1\n", (unsigned long)SP_IMPORT_IDS,
			    i == 0 ? uid : gid);
		if ((fd = openat(pfd, files[i], O_WRONLY | O_CLOEXEC)) == -1)
			return sp_err_sys(e, SP_E_NOT_FOUND, "process %ld's %s",
			    pid, files[i]);
		w = write(fd, map, (size_t)n);
		close(fd);
		if (w == n)
			continue;
		/* The kernel takes a map once, from the namespace's
		 * parent. */
		if (w == -1 && errno == EPERM)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "process %ld: "
			    "not in a user namespace of its own right below "
			    "this one, or its %s is written already (or this "
			    "process has not CAP_SETUID and CAP_SETGID)", pid,
			    files[i]);
		return sp_err_sys(e, SP_E_IO, "process %ld's %s", pid,
		    files[i]);
	}
	return 0;
}

/* Root maps its child's namespace itself: 0..65535 only, so that nothing
 * of root's is the child's (it gets its staging directory from root). */
static int
map_here(pid_t pid, struct sp_err *e)
{
	char path[64];
	int pfd, rc;

	snprintf(path, sizeof path, "/proc/%ld", (long)pid);
	if ((pfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_INTERNAL, "%s", path);
	rc = sp_userns_write_maps(pfd, (long)pid, 0, 0, 0, e);
	close(pfd);
	return rc;
}

/* All the child writes, at most ANSWER_MAX bytes; NULL when more. */
static char *
read_all(int fd, size_t *n)
{
	char *buf = NULL, *p;
	size_t cap = 0;
	ssize_t r;

	*n = 0;
	for (;;) {
		if (*n == cap) {
			if (cap == ANSWER_MAX || (p = realloc(buf, cap ? cap * 2 :
			    4096)) == NULL) {
				free(buf);
				return NULL;
			}
			buf = p;
			cap = cap ? cap * 2 : 4096;
		}
		r = read(fd, buf + *n, cap - *n);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			return buf;
		*n += (size_t)r;
	}
}

/* The child's answer, as fn's: *value its JSON, or e its error. */
static int
answer(const char *buf, size_t n, int status, json_t **value,
    struct sp_err *e)
{
	json_t *o = buf != NULL && n > 0 ? json_loadb(buf, n, 0, NULL) : NULL;
	const char *code = json_string_value(json_object_get(o, "code"));
	enum sp_code c;
	int rc = -1;

	if (o != NULL && code != NULL && sp_code_of(code, &c) == 0)
		sp_err_set(e, c, json_is_true(json_object_get(o, "temp")), "%s",
		    json_string_value(json_object_get(o, "msg")) ?
		    json_string_value(json_object_get(o, "msg")) : "");
	else if (o == NULL || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
	    json_object_get(o, "value") == NULL)
		sp_err_set(e, SP_E_INTERNAL, 0, "the user namespace's child "
		    "ended without an answer (status %d)", status);
	else {
		*value = json_incref(json_object_get(o, "value"));
		rc = 0;
	}
	json_decref(o);
	return rc;
}

int
sp_userns_run(const char *sock, int (*fn)(void *, json_t **, struct sp_err *),
    void *arg, json_t **value, struct sp_err *e)
{
	int go[2] = { -1, -1 }, res[2] = { -1, -1 }, status = 0, rc = -1;
	int unmapped = 0;
	char *buf = NULL, c;
	size_t n = 0;
	ssize_t r;
	pid_t pid;

	*value = NULL;
	if (pipe2(go, O_CLOEXEC) == -1 || pipe2(res, O_CLOEXEC) == -1) {
		sp_err_sys(e, SP_E_INTERNAL, "pipe");
		goto out;
	}
	if ((pid = fork()) == -1) {
		sp_err_sys(e, SP_E_INTERNAL, "fork");
		goto out;
	}
	if (pid == 0) {
		close(go[1]);
		close(res[0]);
		child(go[0], res[1], fn, arg);
	}
	close(go[0]);
	close(res[1]);
	go[0] = res[1] = -1;
	while ((r = read(res[0], &c, 1)) == -1 && errno == EINTR)
		;
	/* "u": mapped, it goes on and answers; "e": its error follows. */
	if (r == 1 && c == 'u') {
		if ((sock == NULL ? map_here(pid, e) :
		    sp_virt_noded_call(sock, json_pack("{s:s, s:I}", "op",
		    "userns-map", "pid", (json_int_t)pid), NULL, e)) == -1)
			unmapped = 1;
		else if (write(go[1], "g", 1) == 1)
			buf = read_all(res[0], &n);
	} else if (r == 1 && c == 'e')
		buf = read_all(res[0], &n);
	close(go[1]);
	go[1] = -1;
	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	if (!unmapped)
		rc = answer(buf, n, status, value, e);
out:
	free(buf);
	if (go[0] != -1)
		close(go[0]);
	if (go[1] != -1)
		close(go[1]);
	if (res[0] != -1)
		close(res[0]);
	if (res[1] != -1)
		close(res[1]);
	return rc;
}
