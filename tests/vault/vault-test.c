/*
 * vault-test: a secret manager for tests, for "cmd:" vaults of space-cred
 * (lib/sp_cred.h).  It keeps each secret in plain text as a file of
 * $VAULT_TEST_DIR: a stand-in, never for real secrets.
 *
 *	vault-test put NAME	stdin: the secret
 *	vault-test get NAME	stdout: the secret and a newline
 *	vault-test rm NAME
 *
 * Every call appends its argv and environment to $VAULT_TEST_DIR/calls.log,
 * so that a test can check that no secret travels that way.  VAULT_TEST_MODE
 * makes it misbehave: hang (sleeps, a child holding its output open too),
 * fail (exit 1), flood (get prints 1 MiB), ctrl (get prints a secret with an
 * escape character), signal (dies by SIGKILL), once-missing (the first get
 * says no such NAME, as after a rotation in between; the next ones answer).
 * Exit status: 0 done, 1 failure, 2 no such NAME, 100 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SECRET_MAX	(64 * 1024)

extern char **environ;

static void
die(int status, const char *msg)
{
	fprintf(stderr, "vault-test: %s\n", msg);
	exit(status);
}

static void
usage(void)
{
	die(100, "usage: vault-test get|put|rm NAME");
}

static int
name_ok(const char *s)
{
	const char *p;

	if (*s == '\0' || *s == '.' || *s == '-' || strlen(s) > 200)
		return 0;
	for (p = s; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' ||
		    *p == '-'))
			return 0;
	return 1;
}

static void
log_call(const char *dir, int argc, char **argv)
{
	char path[4096];
	char **env;
	FILE *f;
	int i;

	snprintf(path, sizeof path, "%s/calls.log", dir);
	if ((f = fopen(path, "a")) == NULL)
		die(1, strerror(errno));
	fprintf(f, "argv:");
	for (i = 0; i < argc; i++)
		fprintf(f, " %s", argv[i]);
	fprintf(f, "\n");
	for (env = environ; *env != NULL; env++)
		fprintf(f, "env: %s\n", *env);
	fclose(f);
}

static void
put(const char *path)
{
	static char buf[SECRET_MAX];
	char tmp[4200];
	size_t n = 0;
	ssize_t r;
	int fd;

	while (n < sizeof buf && (r = read(0, buf + n, sizeof buf - n)) != 0) {
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			die(1, strerror(errno));
		n += r;
	}
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600)) == -1 ||
	    write(fd, buf, n) != (ssize_t)n || close(fd) == -1 ||
	    rename(tmp, path) == -1)
		die(1, strerror(errno));
	memset(buf, 0, sizeof buf);
}

static void
get(const char *path, const char *mode)
{
	static char buf[SECRET_MAX];
	ssize_t n;
	int fd, i;

	if (strcmp(mode, "flood") == 0) {
		memset(buf, 'x', sizeof buf);
		for (i = 0; i < 16; i++)
			if (write(1, buf, sizeof buf) != (ssize_t)sizeof buf)
				exit(1);
		exit(0);
	}
	if (strcmp(mode, "ctrl") == 0) {
		printf("bad\033[0msecret\n");
		exit(0);
	}
	if (strcmp(mode, "once-missing") == 0) {
		char marker[4200];

		snprintf(marker, sizeof marker, "%s.missed", path);
		if ((fd = open(marker, O_WRONLY | O_CREAT | O_EXCL, 0600)) != -1) {
			close(fd);
			die(2, "no such secret, this once");
		}
	}
	if ((fd = open(path, O_RDONLY)) == -1) {
		if (errno == ENOENT)
			die(2, "no such secret");
		die(1, strerror(errno));
	}
	if ((n = read(fd, buf, sizeof buf)) == -1)
		die(1, strerror(errno));
	close(fd);
	if (write(1, buf, n) != n || write(1, "\n", 1) != 1)
		die(1, strerror(errno));
	memset(buf, 0, sizeof buf);
}

int
main(int argc, char *argv[])
{
	const char *dir = getenv("VAULT_TEST_DIR"), *mode;
	char path[4096];

	mode = getenv("VAULT_TEST_MODE");
	if (mode == NULL)
		mode = "";
	if (argc != 3 || !name_ok(argv[2]))
		usage();
	if (dir == NULL || *dir == '\0')
		die(100, "VAULT_TEST_DIR is not set");
	log_call(dir, argc, argv);
	if (strcmp(mode, "hang") == 0) {
		if (fork() == 0)
			sleep(60);	/* holds stdout: a group kill ends it */
		sleep(60);
		exit(0);
	}
	if (strcmp(mode, "fail") == 0)
		die(1, "told to fail");
	if (strcmp(mode, "signal") == 0)
		raise(SIGKILL);
	snprintf(path, sizeof path, "%s/%s", dir, argv[2]);
	if (strcmp(argv[1], "put") == 0)
		put(path);
	else if (strcmp(argv[1], "get") == 0)
		get(path, mode);
	else if (strcmp(argv[1], "rm") == 0) {
		if (unlink(path) == -1)
			die(errno == ENOENT ? 2 : 1, strerror(errno));
	} else
		usage();
	return 0;
}
