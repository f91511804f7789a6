/*
 * jail-probe: a compromised QEMU, simulated for tests/jail.bats.  It takes
 * on a sandbox's jail (its uid and gid, no supplementary groups, no
 * capabilities, no new privileges, and the seccomp filter QEMU's
 * "-sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny,
 * resourcecontrol=deny" installs, with EPERM where QEMU kills), then tries
 * each OP ARG in turn and prints a JSON line per try:
 *   {"op":"read","arg":"/path","result":"EACCES"}   or "ok".
 * OPs: read PATH, write PATH, list DIR, connect SOCKET, ptrace PID,
 * signal PID, setuid UID, exec PATH.
 * usage: jail-probe UID GID OP ARG [OP ARG]...   (as root)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* QEMU 7.2's denied system calls (softmmu/qemu-seccomp.c), by option. */
static const char *const denied[] = {
	/* obsolete */
	"readdir", "_sysctl", "bdflush", "create_module", "get_kernel_syms",
	"query_module", "sgetmask", "ssetmask", "sysfs", "uselib", "ustat",
	"vserver",
	/* elevateprivileges */
	"setuid", "setgid", "setpgid", "setsid", "setreuid", "setregid",
	"setresuid", "setresgid", "setfsuid", "setfsgid",
	/* spawn (clone without CLONE_THREAD is QEMU's too; a probe does
	 * not fork) */
	"fork", "vfork", "execve", "execveat",
	/* resourcecontrol */
	"getpriority", "setpriority", "sched_setparam", "sched_setscheduler",
	"sched_setaffinity", "sched_get_priority_max", "sched_get_priority_min",
};

static void
die(const char *what)
{
	fprintf(stderr, "jail-probe: %s: %s\n", what, strerror(errno));
	exit(2);
}

static unsigned long
number(const char *s)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0') {
		fprintf(stderr, "jail-probe: '%s' is not a number\n", s);
		exit(2);
	}
	return v;
}

static void
jail(uid_t uid, gid_t gid)
{
	scmp_filter_ctx f;
	size_t i;
	int nr;

	if (setgroups(0, NULL) == -1 || setresgid(gid, gid, gid) == -1 ||
	    setresuid(uid, uid, uid) == -1)
		die("taking the jail's uid and gid");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		die("no new privileges");
	if ((f = seccomp_init(SCMP_ACT_ALLOW)) == NULL)
		die("seccomp_init");
	for (i = 0; i < sizeof denied / sizeof denied[0]; i++)
		if ((nr = seccomp_syscall_resolve_name(denied[i])) !=
		    __NR_SCMP_ERROR && nr >= 0 &&
		    seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), nr, 0) < 0)
			die(denied[i]);
	if (seccomp_load(f) < 0)
		die("seccomp_load");
	seccomp_release(f);
}

static int
try(const char *op, const char *arg)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd, rc = -1;
	DIR *d;

	if (strcmp(op, "read") == 0 || strcmp(op, "write") == 0) {
		fd = open(arg, (op[0] == 'r' ? O_RDONLY : O_WRONLY) | O_CLOEXEC |
		    O_NOCTTY);
		if (fd >= 0) {
			close(fd);
			rc = 0;
		}
	} else if (strcmp(op, "list") == 0) {
		if ((d = opendir(arg)) != NULL) {
			closedir(d);
			rc = 0;
		}
	} else if (strcmp(op, "connect") == 0) {
		if (strlen(arg) >= sizeof sun.sun_path) {
			errno = ENAMETOOLONG;
			return -1;
		}
		strcpy(sun.sun_path, arg);
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0) {
			rc = connect(fd, (struct sockaddr *)&sun, sizeof sun);
			close(fd);
		}
	} else if (strcmp(op, "ptrace") == 0) {
		rc = (int)ptrace(PTRACE_SEIZE, (pid_t)number(arg), NULL, NULL);
	} else if (strcmp(op, "signal") == 0) {
		rc = kill((pid_t)number(arg), SIGSTOP);
	} else if (strcmp(op, "setuid") == 0) {
		rc = setuid((uid_t)number(arg));
	} else if (strcmp(op, "exec") == 0) {
		char *const argv[] = { (char *)arg, NULL };

		rc = execv(arg, argv);
	} else {
		fprintf(stderr, "jail-probe: unknown op '%s'\n", op);
		exit(2);
	}
	return rc;
}

int
main(int argc, char *argv[])
{
	int i, rc;

	if (argc < 5 || (argc - 3) % 2 != 0) {
		fprintf(stderr, "usage: jail-probe UID GID OP ARG [OP ARG]...\n");
		return 2;
	}
	jail((uid_t)number(argv[1]), (gid_t)number(argv[2]));
	for (i = 3; i < argc; i += 2) {
		errno = 0;
		rc = try(argv[i], argv[i + 1]);
		printf("{\"op\":\"%s\",\"arg\":\"%s\",\"result\":\"%s\"}\n",
		    argv[i], argv[i + 1], rc == 0 ? "ok" :
		    strerrorname_np(errno) ? strerrorname_np(errno) : "?");
		fflush(stdout);
	}
	return 0;
}
