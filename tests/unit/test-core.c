/* test-core: error tokens, ids, names, UTF-8, configuration, the stdin
 * input loop and the external programs' stderr. */
#include <sys/prctl.h>

#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sp.h"
#include "tap.h"

static void
test_ids(void)
{
	char id[SP_ID_LEN + 1], other[SP_ID_LEN + 1];
	struct sp_err e;

	tap_ok(sp_id_new(id, &e) == 0 && sp_id_valid(id), "new id is valid");
	sp_id_new(other, &e);
	tap_ok(strcmp(id, other) != 0, "two new ids differ");
	tap_ok(sp_id_valid("abcdefghij23"), "12 base32 chars are an id");
	tap_ok(!sp_id_valid("abcdefghij2"), "11 chars are not");
	tap_ok(!sp_id_valid("abcdefghij234"), "13 chars are not");
	tap_ok(!sp_id_valid("abcdefghij18"), "1 and 8 are not base32");
	tap_ok(!sp_id_valid("ABCDEFGHIJ23"), "upper case is not");
	tap_ok(!sp_id_valid("../../etc/pa"), "a path is not");
	tap_ok(!sp_id_valid(""), "empty is not");
	tap_ok(sp_id_check("\xff\xfe", &e) == -1 &&
	    e.code == SP_E_BAD_INPUT, "garbage id is bad-input");
	tap_ok(strchr(e.msg, '\xff') == NULL, "the message does not echo raw bytes");
}

/* Handles: a name is never an id, so an operand is one or the other. */
static void
test_handles(void)
{
	static const char *const good[] = { "web", "web-1", "a", "0", "1a",
	    "abcdefghij18", "aaaaaaaaaaaa0", "a-b-c" };
	static const char *const bad[] = { "", "-web", "web-", "Web", "a_b",
	    "a.b", "a b", "a/b", "a:b", "\xc3\xa9", "abcdefghij23",
	    "aaaaaaaaaaaa" };
	static const char *const rgood[] = { "k", "job-7", "A-z_0.9:x",
	    "6f1c2a8e-9b1d-4c57-a2a5-0f9d1e6c1b2a" };
	static const char *const rbad[] = { "", "a b", "a/b", "k$", "\xc3\xbc",
	    "k\n" };
	char longest[SP_HANDLE_MAX + 2], rlong[SP_REQUEST_ID_MAX + 2];
	struct sp_err e;
	size_t i;
	int ok = 1;

	for (i = 0; i < sizeof good / sizeof good[0]; i++)
		ok &= sp_handle_valid(good[i]) && sp_handle_check(good[i], &e) == 0;
	tap_ok(ok, "names of a-z, 0-9 and '-' inside are names");
	ok = 1;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ok &= !sp_handle_valid(bad[i]) && sp_handle_check(bad[i], &e) ==
		    -1 && e.code == SP_E_BAD_INPUT;
	tap_ok(ok, "upper case, '_', '.', '/', ':', spaces, non-ASCII, a '-' "
	    "at an end and ids are not names");
	tap_ok(sp_handle_check("abcdefghij23", &e) == -1 &&
	    strstr(e.msg, "what an id looks like") != NULL,
	    "a name that is an id says so");
	memset(longest, 'a', SP_HANDLE_MAX);
	longest[SP_HANDLE_MAX] = '\0';
	tap_okf("", "", sp_handle_valid(longest), "a name of %d characters",
	    SP_HANDLE_MAX);
	longest[SP_HANDLE_MAX] = 'a';
	longest[SP_HANDLE_MAX + 1] = '\0';
	tap_ok(!sp_handle_valid(longest), "one more is not");
	ok = 1;
	for (i = 0; i < sizeof rgood / sizeof rgood[0]; i++)
		ok &= sp_request_id_check(rgood[i], &e) == 0;
	for (i = 0; i < sizeof rbad / sizeof rbad[0]; i++)
		ok &= sp_request_id_check(rbad[i], &e) == -1 &&
		    e.code == SP_E_BAD_INPUT;
	memset(rlong, 'k', SP_REQUEST_ID_MAX);
	rlong[SP_REQUEST_ID_MAX] = '\0';
	ok &= sp_request_id_check(rlong, &e) == 0;
	rlong[SP_REQUEST_ID_MAX] = 'k';
	rlong[SP_REQUEST_ID_MAX + 1] = '\0';
	ok &= sp_request_id_check(rlong, &e) == -1;
	tap_okf("", "", ok, "request ids: UUIDs and keys of A-Z a-z 0-9 . _ : -, "
	    "up to %d; nothing else", SP_REQUEST_ID_MAX);
}

static void
test_names(void)
{
	struct sp_err e;
	char big[200];

	tap_ok(sp_name_check("t", "minimal", &e) == 0, "plain name ok");
	tap_ok(sp_name_check("t", "a.b_c-1", &e) == 0, "dots, dashes ok");
	tap_ok(sp_name_check("t", "a/b", &e) == -1, "slash refused");
	tap_ok(sp_name_check("t", "..", &e) == -1, "dot-dot refused");
	tap_ok(sp_name_check("t", ".hidden", &e) == -1, "leading dot refused");
	tap_ok(sp_name_check("t", "-opt", &e) == -1, "leading dash refused");
	tap_ok(sp_name_check("t", "", &e) == -1, "empty refused");
	tap_ok(sp_name_check("t", "caf\xc3\xa9", &e) == -1, "non-ASCII refused");
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	tap_ok(sp_name_check("t", big, &e) == -1 && e.code == SP_E_BAD_INPUT,
	    "overlong refused");
	tap_ok(sp_label_check("team=infra", &e) == 0, "label ok");
	tap_ok(sp_label_check("note=caf\xc3\xa9", &e) == 0, "UTF-8 label value ok");
	tap_ok(sp_label_check("note=\xc3", &e) == -1, "truncated UTF-8 refused");
	tap_ok(sp_label_check("note=a\nb", &e) == -1, "control char refused");
	tap_ok(sp_label_check("novalue", &e) == -1, "missing = refused");
	tap_ok(sp_label_check("a/b=c", &e) == -1, "bad key refused");
}

static void
test_utf8(void)
{
	tap_ok(sp_utf8_valid("plain", 5), "ASCII");
	tap_ok(sp_utf8_valid("\xe2\x82\xac", 3), "euro sign");
	tap_ok(sp_utf8_valid("\xf0\x9f\x98\x80", 4), "4-byte emoji");
	tap_ok(!sp_utf8_valid("\xc0\xaf", 2), "overlong slash");
	tap_ok(!sp_utf8_valid("\xed\xa0\x80", 3), "surrogate");
	tap_ok(!sp_utf8_valid("\xf4\x90\x80\x80", 4), "above U+10FFFF");
	tap_ok(!sp_utf8_valid("a\0b", 3), "embedded NUL");
	tap_ok(!sp_utf8_valid("\x80", 1), "lone continuation");
}

static void
test_conf(void)
{
	char path[] = "/tmp/sp-conf-XXXXXX";
	struct sp_conf c;
	struct sp_err e;
	FILE *f;
	int fd;

	unsetenv("SPACE_ROOT");
	unsetenv("SPACE_DB");
	unsetenv("SPACE_NODE");
	setenv("SPACE_CONF", "/nonexistent/space.conf", 1);
	tap_ok(sp_conf_load(&c, &e) == 0, "defaults load with no file");
	tap_ok(strcmp(c.root, "/var/lib/space") == 0, "default root");
	tap_ok(strcmp(c.db, "sqlite:/var/lib/space/space.db") == 0, "default db");
	tap_ok(strcmp(c.store, "file:///var/lib/space/objects") == 0, "default store");
	tap_ok(strcmp(c.libvirt_uri, "qemu:///system") == 0, "default uri");

	fd = mkstemp(path);
	f = fdopen(fd, "w");
	fprintf(f, "# a comment\n\nSPACE_ROOT = /srv/space\nSPACE_NODE=node-a\n");
	fclose(f);
	setenv("SPACE_CONF", path, 1);
	tap_ok(sp_conf_load(&c, &e) == 0 && strcmp(c.root, "/srv/space") == 0 &&
	    strcmp(c.node, "node-a") == 0, "file values are read");
	tap_ok(strcmp(c.db, "sqlite:/srv/space/space.db") == 0,
	    "db default follows the root");
	setenv("SPACE_ROOT", "/env/root", 1);
	tap_ok(sp_conf_load(&c, &e) == 0 && strcmp(c.root, "/env/root") == 0,
	    "environment beats the file");
	setenv("SPACE_ROOT", "/a/../etc", 1);
	tap_ok(sp_conf_load(&c, &e) == -1 && e.code == SP_E_BAD_INPUT,
	    "root with .. refused");
	setenv("SPACE_ROOT", "/a/..", 1);
	tap_ok(sp_conf_load(&c, &e) == -1, "root ending in .. refused");
	setenv("SPACE_ROOT", "relative", 1);
	tap_ok(sp_conf_load(&c, &e) == -1, "relative root refused");
	unsetenv("SPACE_ROOT");
	setenv("SPACE_NODE", "bad/node", 1);
	tap_ok(sp_conf_load(&c, &e) == -1, "bad node name refused");
	unsetenv("SPACE_NODE");
	tap_ok(sp_conf_load(&c, &e) == 0 && c.lim.on && c.lim.first ==
	    1900000000UL && c.lim.count == 65536 && c.lim.pids_max == 512 &&
	    c.lim.mem_overhead_mib == -1 && c.lim.cpu_quota_pct == 0 &&
	    c.lim.io_weight == 0, "the jail's defaults: on, 65536 uids, 512 "
	    "pids, overhead auto, no quota, no io weight");
	setenv("SPACE_CPU_QUOTA", "1.5", 1);
	setenv("SPACE_JAIL_UIDS", "70000-70063", 1);
	setenv("SPACE_MEM_OVERHEAD_MIB", "0", 1);
	setenv("SPACE_PIDS_MAX", "0", 1);
	setenv("SPACE_IO_WEIGHT", "500", 1);
	tap_ok(sp_conf_load(&c, &e) == 0 && c.lim.cpu_quota_pct == 150 &&
	    c.lim.first == 70000 && c.lim.count == 64 &&
	    c.lim.mem_overhead_mib == 0 && c.lim.pids_max == 0 &&
	    c.lim.io_weight == 500, "the jail's settings parse");
	tap_ok(c.ksm_on == 0 && c.ksm_pages_per_s == 50000, "KSM: off by "
	    "default, 50000 pages a second when on");
	setenv("SPACE_KSM", "on", 1);
	setenv("SPACE_KSM_RATE", "2000", 1);
	tap_ok(sp_conf_load(&c, &e) == 0 && c.ksm_on == 1 &&
	    c.ksm_pages_per_s == 2000, "KSM's settings parse");
	{
		static const char *const bad[][2] = {
			{ "SPACE_JAIL", "yes" }, { "SPACE_JAIL_UIDS", "70000" },
			{ "SPACE_JAIL_UIDS", "70000-70010" },
			{ "SPACE_JAIL_UIDS", "0-65535" },
			{ "SPACE_JAIL_UIDS", "70000-69999" },
			{ "SPACE_JAIL_UIDS", "70000-4294967295" },
			{ "SPACE_JAIL_UIDS", "70000-80000x" },
			{ "SPACE_CPU_QUOTA", "0" }, { "SPACE_CPU_QUOTA", "2 CPUs" },
			{ "SPACE_CPU_QUOTA", "nan" }, { "SPACE_CPU_QUOTA", "5000" },
			{ "SPACE_PIDS_MAX", "8" }, { "SPACE_PIDS_MAX", "-1" },
			{ "SPACE_MEM_OVERHEAD_MIB", "-1" },
			{ "SPACE_MEM_OVERHEAD_MIB", "1e3" },
			{ "SPACE_IO_WEIGHT", "5" }, { "SPACE_IO_WEIGHT", "1001" },
			{ "SPACE_KSM", "yes" }, { "SPACE_KSM", "On" },
			{ "SPACE_KSM_RATE", "49" }, { "SPACE_KSM_RATE", "1e5" },
			{ "SPACE_KSM_RATE", "10000001" },
		};
		size_t i;
		char was[64];

		for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			snprintf(was, sizeof was, "%s", getenv(bad[i][0]) ?
			    getenv(bad[i][0]) : "");
			setenv(bad[i][0], bad[i][1], 1);
			tap_okf(e.msg, "", sp_conf_load(&c, &e) == -1 &&
			    e.code == SP_E_BAD_INPUT && strstr(e.msg, bad[i][0])
			    != NULL, "%s=%s refused, named", bad[i][0], bad[i][1]);
			if (was[0] != '\0')
				setenv(bad[i][0], was, 1);
			else
				unsetenv(bad[i][0]);
		}
	}
	unsetenv("SPACE_CPU_QUOTA");
	unsetenv("SPACE_JAIL_UIDS");
	unsetenv("SPACE_MEM_OVERHEAD_MIB");
	unsetenv("SPACE_PIDS_MAX");
	unsetenv("SPACE_IO_WEIGHT");
	unsetenv("SPACE_KSM");
	unsetenv("SPACE_KSM_RATE");
	unsetenv("SPACE_NODE");

	f = fopen(path, "w");
	fprintf(f, "SPACE_ROOTS = /x\n");
	fclose(f);
	tap_ok(sp_conf_load(&c, &e) == -1 && strstr(e.msg, "unknown key") != NULL,
	    "unknown key refused with its line");
	f = fopen(path, "w");
	fprintf(f, "just words\n");
	fclose(f);
	tap_ok(sp_conf_load(&c, &e) == -1, "line without = refused");
	f = fopen(path, "w");
	fprintf(f, "SPACE_S3_ENDPOINT = http://127.0.0.1:9\nAWS_REGION = eu-x-1\n");
	fclose(f);
	unsetenv("SPACE_S3_ENDPOINT");
	setenv("AWS_REGION", "from-env", 1);
	tap_ok(sp_conf_load(&c, &e) == 0 && getenv("SPACE_S3_ENDPOINT") != NULL &&
	    strcmp(getenv("SPACE_S3_ENDPOINT"), "http://127.0.0.1:9") == 0 &&
	    strcmp(getenv("AWS_REGION"), "from-env") == 0,
	    "the store's settings may be in the file; the environment wins");
	unsetenv("SPACE_S3_ENDPOINT");
	unsetenv("AWS_REGION");
	unlink(path);
	unsetenv("SPACE_CONF");
}

static int seen_n;
static char seen[8][64];

static int
record(const char *id, json_t *rec, void *ctx)
{
	if (seen_n < 8)
		snprintf(seen[seen_n++], sizeof seen[0], "%s%s", id, rec ? "+j" : "");
	return strcmp(id, "fail") == 0 ? SP_EXIT_FAIL : 0;
}

/* Runs sp_each on the given stdin text; stdout goes to /dev/null. */
static int
each_on(const char *input)
{
	char path[] = "/tmp/sp-each-XXXXXX";
	int fd, rc, saved_out;
	FILE *f;

	fd = mkstemp(path);
	f = fdopen(fd, "w");
	fwrite(input, 1, strlen(input), f);
	fclose(f);
	if (freopen(path, "r", stdin) == NULL)
		abort();
	fflush(stdout);
	saved_out = dup(1);
	if (freopen("/dev/null", "w", stdout) == NULL)
		abort();
	seen_n = 0;
	rc = sp_each(0, NULL, record, NULL);
	fflush(stdout);
	dup2(saved_out, 1);
	close(saved_out);
	unlink(path);
	return rc;
}

static void
test_each(void)
{
	char *argv[] = { "a", "fail", "b" };
	char *big;
	int rc;

	seen_n = 0;
	tap_ok(sp_each(3, argv, record, NULL) == SP_EXIT_FAIL && seen_n == 3,
	    "argv items all run; status is the worst");
	rc = each_on("one\n  two  \n\n{\"id\":\"three\",\"x\":1}\n");
	tap_ok(rc == 0 && seen_n == 3 && strcmp(seen[1], "two") == 0 &&
	    strcmp(seen[2], "three+j") == 0, "bare and JSON lines on stdin");
	rc = each_on("{\"x\":1}\nok1\n{bad json\nok2\n");
	tap_ok(rc == SP_EXIT_USAGE && seen_n == 2, "bad lines reported, loop goes on");
	rc = each_on("{\"id\":\"a\",\"id\":\"b\"}\n");
	tap_ok(rc == SP_EXIT_USAGE && seen_n == 0, "duplicate keys refused");
	rc = each_on("a\xff\n");
	tap_ok(rc == SP_EXIT_USAGE && seen_n == 0, "invalid UTF-8 refused");
	big = malloc(SP_LINE_MAX + 100);
	memset(big, 'x', SP_LINE_MAX + 98);
	big[SP_LINE_MAX + 98] = '\n';
	big[SP_LINE_MAX + 99] = '\0';
	rc = each_on(big);
	tap_ok(rc == SP_EXIT_USAGE && seen_n == 0, "overlong line refused");
	free(big);
	rc = each_on("last-without-newline");
	tap_ok(rc == 0 && seen_n == 1, "a last line without newline counts");
}

/* Every token has one name, shaped as the JSON lines promise, and the name
 * leads back to it; the names older guests may send still do. */
static void
test_codes(void)
{
	struct sp_err e;
	enum sp_code c;
	const char *n;
	int i, j, shaped = 1, back = 1, unique = 1;

	for (i = 1; i < SP_E__COUNT; i++) {
		n = sp_code_name((enum sp_code)i);
		if (n[0] == '\0' || strlen(n) > 31 ||
		    strspn(n, "abcdefghijklmnopqrstuvwxyz-") != strlen(n) ||
		    n[0] == '-' || n[strlen(n) - 1] == '-')
			shaped = 0;
		if (sp_code_of(n, &c) == -1 || c != (enum sp_code)i)
			back = 0;
		for (j = 1; j < i; j++)
			if (strcmp(n, sp_code_name((enum sp_code)j)) == 0)
				unique = 0;
	}
	tap_ok(shaped, "every error token is a lower-case word or words");
	tap_ok(back, "every token's name leads back to it");
	tap_ok(unique, "no two tokens share a name");
	tap_ok(strcmp(sp_code_name(SP_E_NONE), "") == 0 &&
	    sp_code_of("", &c) == -1, "no error has the empty name");
	tap_ok(sp_code_of("timeout", &c) == 0 && c == SP_E_TIMED_OUT &&
	    sp_code_of("too-long", &c) == 0 && c == SP_E_TOO_BIG,
	    "older names map to the merged tokens");
	tap_ok(sp_code_of("no-such-token", &c) == -1 &&
	    sp_code_of("NOT-FOUND", &c) == -1, "unknown names are refused");
	tap_ok(strcmp(sp_code_name((enum sp_code)SP_E__COUNT), "internal") == 0,
	    "an out-of-range code is named internal");
	sp_err_clear(&e);
	tap_ok(e.code == SP_E_NONE, "a cleared error has no code");
	sp_err_set(&e, SP_E_BAD_INPUT, 0, "x");
	tap_ok(sp_err_exit(&e) == SP_EXIT_USAGE, "bad-input exits 100");
	sp_err_set(&e, SP_E_TIMED_OUT, 1, "x");
	tap_ok(sp_err_exit(&e) == SP_EXIT_TEMP, "a temporary error exits 111");
	sp_err_set(&e, SP_E_NOT_FOUND, 0, "x");
	tap_ok(sp_err_exit(&e) == SP_EXIT_FAIL, "not-found exits 1");
}

/* A program's reason reaches the error: each call's stderr its own, in
 * memory (not on a filesystem that may be the full one), its tail kept. */
static void
test_proc_stderr(void)
{
	char *a[] = { "sh", "-c", "echo reason-a >&2; exit 3", NULL };
	char *b[] = { "sh", "-c", "echo reason-b >&2; exit 4", NULL };
	char *big[] = { "sh", "-c", "seq 1 5000 >&2; echo the-end >&2; exit 1",
	    NULL };
	char *quiet[] = { "sh", "-c", "exit 2", NULL };
	struct sp_err ea, eb, e;
	struct statfs fs;
	pid_t pa, pb, p;
	int fa, fb, f;

	fa = sp_proc_errfd(&e);
	fb = sp_proc_errfd(&e);
	tap_ok(fa >= 0 && fb >= 0 && fa != fb, "each call gets a stderr of its own");
	tap_ok(fstatfs(fa, &fs) == 0 && fs.f_type == 0x01021994,
	    "it is memory (tmpfs), not a file on the node's filesystem");
	tap_ok(sp_proc_spawn(a, -1, -1, fa, &pa, &e) == 0 &&
	    sp_proc_spawn(b, -1, -1, fb, &pb, &e) == 0, "two programs at once");
	tap_ok(sp_proc_wait(pb, "b", fb, &eb) == -1 &&
	    strcmp(eb.msg, "b exited 4: reason-b") == 0, "b's error is b's reason");
	tap_ok(sp_proc_wait(pa, "a", fa, &ea) == -1 &&
	    strcmp(ea.msg, "a exited 3: reason-a") == 0, "a's error is a's reason");
	close(fa);
	close(fb);
	f = sp_proc_errfd(&e);
	tap_ok(sp_proc_spawn(big, -1, -1, f, &p, &e) == 0 &&
	    sp_proc_wait(p, "big", f, &e) == -1 &&
	    strstr(e.msg, "4999\n5000\nthe-end") != NULL &&
	    strstr(e.msg, "\n1\n2\n") == NULL && strlen(e.msg) < 450,
	    "a long stderr: its last lines, bounded");
	close(f);
	tap_ok(sp_proc_spawn(quiet, -1, -1, -1, &p, &e) == 0 &&
	    sp_proc_wait(p, "quiet", -1, &e) == -1 &&
	    strcmp(e.msg, "quiet exited 2: ") == 0, "no stderr asked for: the exit alone");
}

/* Reads what is in a pipe's read end once its writers are gone. */
static void
read_all(int fd, char *buf, size_t n)
{
	ssize_t got;
	size_t have = 0;

	while (have + 1 < n && (got = read(fd, buf + have, n - 1 - have)) > 0)
		have += (size_t)got;
	buf[have] = '\0';
}

/* fd as a descriptor from 100 up, the old number closed. */
static int
moved_high(int fd)
{
	int to = fcntl(fd, F_DUPFD_CLOEXEC, 100);

	close(fd);
	return to;
}

static void
test_proc_fds(void)
{
	char *two[] = { "sh", "-c", "echo to-3 >&3; echo to-4 >&4", NULL };
	char *five[] = { "true", NULL };
	int p[2], q[2], s3, s4, fds[2], many[5] = { 0, 0, 0, 0, 0 };
	char a[64], b[64];
	struct sp_err e;
	pid_t pid;

	/* Each descriptor as 3, 4 in the child, even when the parent's own
	 * numbers are 4 and 3 (the second would be overwritten by the first
	 * if passed as is). */
	s3 = fcntl(3, F_DUPFD_CLOEXEC, 100);
	s4 = fcntl(4, F_DUPFD_CLOEXEC, 100);
	close(3);
	close(4);
	if (pipe2(p, O_CLOEXEC) == -1 || pipe2(q, O_CLOEXEC) == -1) {
		tap_ok(0, "pipes for sp_proc_spawn_fds");
		return;
	}
	/* Their write ends as 4 (p) and 3 (q), whatever pipe2 gave. */
	p[0] = moved_high(p[0]);
	p[1] = moved_high(p[1]);
	q[0] = moved_high(q[0]);
	q[1] = moved_high(q[1]);
	if (dup3(p[1], 4, O_CLOEXEC) == -1 || dup3(q[1], 3, O_CLOEXEC) == -1) {
		tap_ok(0, "descriptors 3 and 4 for sp_proc_spawn_fds");
		return;
	}
	close(p[1]);
	close(q[1]);
	fds[0] = 4;		/* p's write end */
	fds[1] = 3;		/* q's */
	tap_ok(sp_proc_spawn_fds(two, -1, -1, -1, fds, 2, &pid, &e) == 0 &&
	    sp_proc_wait(pid, "two", -1, &e) == 0, "a program gets two "
	    "descriptors passed");
	close(3);
	close(4);
	read_all(p[0], a, sizeof a);
	read_all(q[0], b, sizeof b);
	tap_ok(strcmp(a, "to-3\n") == 0 && strcmp(b, "to-4\n") == 0,
	    "the first as its 3, the second as its 4, though the parent's "
	    "were 4 and 3");
	close(p[0]);
	close(q[0]);
	/* The test's own 3 and 4, if it had them, back. */
	if (s3 >= 0 && dup3(s3, 3, O_CLOEXEC) != -1)
		close(s3);
	if (s4 >= 0 && dup3(s4, 4, O_CLOEXEC) != -1)
		close(s4);
	tap_ok(sp_proc_spawn_fds(five, -1, -1, -1, many, 5, &pid, &e) == -1 &&
	    e.code == SP_E_INTERNAL, "more than SP_PROC_FDS_MAX refused");
}

/*
 * sp_lock_path: a lock file made readable and held through a read-only
 * descriptor; a second holder is told busy; a symlink is not followed;
 * and, as root, one root made is taken by another user.
 */
static void
test_lock_path(void)
{
	char dir[] = "/tmp/sp-lock-XXXXXX", p[64], q[64];
	struct sp_err e;
	struct stat st;
	int fd = -1, fd2 = -1, status;
	pid_t pid;

	umask(022);
	if (!tap_ok(mkdtemp(dir) != NULL, "lock: a temporary directory"))
		return;
	snprintf(p, sizeof p, "%s/a.lock", dir);
	snprintf(q, sizeof q, "%s/link.lock", dir);
	tap_okf(sp_code_name(e.code), e.msg, sp_lock_path(p, 0, &fd, &e) == 0 &&
	    fd >= 0, "lock: made and held");
	tap_ok(stat(p, &st) == 0 && (st.st_mode & 07777) == 0644 &&
	    (fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY,
	    "lock: the file is 0644, the descriptor read-only");
	tap_ok(sp_lock_path(p, 0, &fd2, &e) == -1 && e.code == SP_E_BUSY &&
	    e.temp && fd2 == -1, "lock: a second holder is told busy");
	close(fd);
	tap_ok(sp_lock_path(p, 0, &fd2, &e) == 0, "lock: free again once closed");
	close(fd2);
	tap_ok(symlink(p, q) == 0 && sp_lock_path(q, 0, &fd, &e) == -1 &&
	    e.code == SP_E_IO, "lock: a symlink is not followed");
	if (geteuid() != 0) {
		printf("ok %d # SKIP another user's lock needs root\n", ++tap_n);
	} else {
		chmod(dir, 0755);
		if ((pid = fork()) == 0) {
			if (setgid(65534) == -1 || setuid(65534) == -1)
				_exit(2);
			_exit(sp_lock_path(p, 0, &fd, &e) == 0 ? 0 : 1);
		}
		tap_ok(pid > 0 && waitpid(pid, &status, 0) == pid &&
		    WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "lock: one root made, another user takes");
	}
	unlink(q);
	unlink(p);
	rmdir(dir);
}

/* sp_path_replace_text: a new file, 0644, whatever was at the path; a
 * symlink there is replaced, its target untouched. */
static void
test_replace_text(void)
{
	char dir[] = "/tmp/sp-replace-XXXXXX", p[64], t[64], buf[16] = "";
	struct sp_err e;
	struct stat st;
	int fd;

	umask(022);
	if (!tap_ok(mkdtemp(dir) != NULL, "replace: a temporary directory"))
		return;
	snprintf(p, sizeof p, "%s/f", dir);
	snprintf(t, sizeof t, "%s/target", dir);
	tap_ok(sp_path_replace_text(p, "one\n", &e) == 0 &&
	    sp_path_replace_text(p, "two\n", &e) == 0 && stat(p, &st) == 0 &&
	    (st.st_mode & 07777) == 0644 && st.st_size == 4,
	    "replace: written anew, 0644");
	unlink(p);
	fd = open(t, O_WRONLY | O_CREAT, 0600);
	if (fd != -1) {
		(void)!write(fd, "keep", 4);
		close(fd);
	}
	tap_ok(symlink(t, p) == 0 && sp_path_replace_text(p, "new\n", &e) == 0 &&
	    lstat(p, &st) == 0 && S_ISREG(st.st_mode) &&
	    (fd = open(t, O_RDONLY)) != -1 && read(fd, buf, sizeof buf) == 4 &&
	    memcmp(buf, "keep", 4) == 0, "replace: a symlink replaced, its "
	    "target untouched");
	if (fd != -1)
		close(fd);
	unlink(p);
	unlink(t);
	rmdir(dir);
}

/* sp_group_id and sp_space_ids: what getgrnam/getpwnam say, from threads
 * too (the _r forms), and 0 for a name that is not there. */
static void
test_ids_of_names(void)
{
	struct passwd *pw;
	gid_t gid = 1;
	uid_t uid = 1;

	tap_ok(sp_group_id("root", &gid) == 1 && gid == 0,
	    "group id: root is 0");
	tap_ok(sp_group_id("no-such-group-of-space", &gid) == 0,
	    "group id: none for a missing group");
	pw = getpwnam(SP_USER);
	tap_ok(pw == NULL ? sp_space_ids(&uid, &gid) == 0 :
	    sp_space_ids(&uid, &gid) == 1 && uid == pw->pw_uid &&
	    gid == pw->pw_gid, "space's ids: as getpwnam says, or none");
}

static void *
nap(void *arg)
{
	(void)arg;
	usleep(100000);
	return NULL;
}

/* What sp_become_space leaves in a child: the bit of capability 10 alone
 * (CAP_NET_BIND_SERVICE) in CapEff and CapPrm, and not dumpable. */
static int
became_space(uid_t uid, gid_t gid)
{
	char line[256];
	FILE *f;
	int caps = 0;

	if (getuid() != uid || geteuid() != uid || getgid() != gid ||
	    getegid() != gid || getgroups(0, NULL) != 1 ||
	    prctl(PR_GET_DUMPABLE) != 0 ||
	    (f = fopen("/proc/self/status", "re")) == NULL)
		return 0;
	while (fgets(line, sizeof line, f) != NULL)
		caps += strcmp(line, "CapEff:\t0000000000000400\n") == 0 ||
		    strcmp(line, "CapPrm:\t0000000000000400\n") == 0;
	fclose(f);
	return caps == 2;
}

/* sp_become_space, in children: refused while a second thread runs (its
 * capabilities would stay root's), then space's ids, no other group,
 * CAP_NET_BIND_SERVICE alone, not dumpable. */
static void
test_become_space(void)
{
	struct sp_err e;
	pthread_t th;
	uid_t uid;
	gid_t gid;
	pid_t pid;
	int status, rc;

	if (geteuid() != 0 || !sp_space_ids(&uid, &gid)) {
		printf("ok %d # SKIP becoming space needs root and the user\n",
		    ++tap_n);
		return;
	}
	if ((pid = fork()) == 0) {
		if (pthread_create(&th, NULL, nap, NULL) != 0)
			_exit(3);
		rc = sp_become_space(1, &e);
		pthread_join(th, NULL);
		_exit(rc == -1 && e.code == SP_E_INTERNAL && geteuid() == 0 ?
		    0 : 1);
	}
	tap_ok(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0, "become space: refused with a second "
	    "thread, still root");
	if ((pid = fork()) == 0)
		_exit(sp_become_space(1, &e) == 1 && became_space(uid, gid) &&
		    setuid(0) == -1 ? 0 : 1);
	tap_ok(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0, "become space: its ids, one group, "
	    "CAP_NET_BIND_SERVICE alone, not dumpable, no way back");
}

int
main(void)
{
	test_proc_stderr();
	test_proc_fds();
	test_codes();
	test_ids();
	test_handles();
	test_names();
	test_utf8();
	test_conf();
	test_each();
	test_lock_path();
	test_ids_of_names();
	test_replace_text();
	test_become_space();
	return tap_done();
}
