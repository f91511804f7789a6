/*
 * test-qmp: sp_qmp against a fake QEMU monitor on a unix socket, which sends
 * what a real one does (greeting, answers, events in between) and what a
 * broken or hostile one might (an error, a line over the bound, no JSON, a
 * flood of events, silence, a hang-up).  The real monitor is exercised by
 * tests/pool.bats, where every claim resumes its pod through it.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"
#include "tap.h"

#define GREETING "{\"QMP\": {\"version\": {}, \"capabilities\": []}}\r\n"
#define OK "{\"return\": {}}\r\n"
#define EVENT "{\"timestamp\": {\"seconds\": 1, \"microseconds\": 2}, " \
	"\"event\": \"RESUME\"}\r\n"

static char dir[] = "/tmp/sp-qmp-XXXXXX";

/* A monitor that accepts one client, writes script (with pad > 0, that
 * many 'x' after it, no newline) and, with stay, stays until the client
 * leaves, keeping what it read in dir/sent; without, hangs up at once.
 * Returns its pid. */
static pid_t
monitor(const char *script, size_t pad, int stay)
{
	struct sockaddr_un sa;
	char sock[256], buf[4096];
	int l, c, sent;
	ssize_t n;
	pid_t pid;

	snprintf(sock, sizeof sock, "%s/%s", dir, SP_QMP_SOCK);
	unlink(sock);
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	if (strlen(sock) >= sizeof sa.sun_path)
		exit(2);
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	if ((l = socket(AF_UNIX, SOCK_STREAM, 0)) == -1 ||
	    bind(l, (struct sockaddr *)&sa, sizeof sa) == -1 || listen(l, 1) == -1)
		exit(2);
	if ((pid = fork()) != 0) {
		close(l);
		return pid;
	}
	signal(SIGPIPE, SIG_IGN);
	if ((c = accept(l, NULL, NULL)) == -1)
		_exit(2);
	(void)!write(c, script, strlen(script));
	memset(buf, 'x', sizeof buf);
	while (pad > 0) {
		size_t k = pad < sizeof buf ? pad : sizeof buf;

		if (write(c, buf, k) <= 0)
			break;
		pad -= k;
	}
	snprintf(sock, sizeof sock, "%s/sent", dir);
	if ((sent = open(sock, O_WRONLY | O_CREAT | O_TRUNC, 0600)) == -1)
		_exit(2);
	while (stay && (n = read(c, buf, sizeof buf)) > 0)
		(void)!write(sent, buf, (size_t)n);
	_exit(0);
}

static void
reap(pid_t pid)
{
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

/* Opens the monitor and sends query-kvm and cont in one write, as a claim
 * does: sp_qmp_cmds' result (-1 too when the open failed, e says which),
 * with both answers in rets (NULL for those that did not come). */
static int
query_and_cont(json_t *rets[2], struct sp_err *e)
{
	static const char *const cmds[] = { "query-kvm", "cont" };
	struct sp_qmp *q;
	int rc;

	rets[0] = rets[1] = NULL;
	if (sp_qmp_open(&q, dir, 2000, e) == -1)
		return -1;
	rc = sp_qmp_cmds(q, cmds, 2, rets, e);
	sp_qmp_close(q);
	return rc;
}

/* Opens the monitor and sends cont: -1 with e when either failed. */
static int
open_and_cont(struct sp_err *e)
{
	struct sp_qmp *q;
	int rc;

	if (sp_qmp_open(&q, dir, 2000, e) == -1)
		return -1;
	rc = sp_qmp_cmd(q, "cont", NULL, e);
	sp_qmp_close(q);
	return rc;
}

int
main(void)
{
	struct sp_qmp *q;
	struct sp_err e;
	json_t *ret = NULL, *rets[2];
	char script[16384];
	pid_t pid;
	int i, ok;

	if (mkdtemp(dir) == NULL)
		return 2;

	e.code = SP_E_NONE;
	e.msg[0] = '\0';
	tap_okf(sp_code_name(e.code), e.msg, sp_qmp_open(&q, dir, 1000, &e) == -1 &&
	    e.code == SP_E_NOT_RUNNING,
	    "no monitor there: not-running");

	/* What QEMU sends: an event may come before an answer. */
	pid = monitor(GREETING OK EVENT
	    "{\"return\": {\"enabled\": false, \"present\": true}}\r\n"
	    EVENT OK, 0, 1);
	ok = sp_qmp_open(&q, dir, 2000, &e) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok, "connected (command mode is asked for with "
	    "the first command)");
	if (ok) {
		tap_okf(sp_code_name(e.code), e.msg, sp_qmp_cmd(q, "query-kvm", &ret, &e) == 0 &&
		    json_is_false(json_object_get(ret, "enabled")) &&
		    json_is_true(json_object_get(ret, "present")),
		    "greeting, capabilities, then an answer after an event, "
		    "its return kept");
		json_decref(ret);
		tap_okf(sp_code_name(e.code), e.msg, sp_qmp_cmd(q, "cont", NULL, &e) == 0,
		    "the next command's answer, an event before it skipped");
		sp_qmp_close(q);
	}
	reap(pid);

	/* Commands in one write, answered in order; what went out, in order:
	 * capabilities (sent before the greeting is read), then both. */
	pid = monitor(GREETING OK EVENT
	    "{\"return\": {\"enabled\": true, \"present\": true}}\r\n"
	    EVENT OK, 0, 1);
	tap_okf(sp_code_name(e.code), e.msg, query_and_cont(rets, &e) == 0 &&
	    json_is_true(json_object_get(rets[0], "enabled")) &&
	    json_is_object(rets[1]),
	    "two commands in one write: both answers, in order");
	json_decref(rets[0]);
	json_decref(rets[1]);
	/* It leaves when we hung up, with all it read written down. */
	waitpid(pid, NULL, 0);
	snprintf(script, sizeof script, "%s/sent", dir);
	{
		FILE *f = fopen(script, "r");
		char got[512] = "";
		size_t n = f != NULL ? fread(got, 1, sizeof got - 1, f) : 0;

		got[n] = '\0';
		if (f != NULL)
			fclose(f);
		ok = strcmp(got, "{\"execute\":\"qmp_capabilities\"}\n"
		    "{\"execute\":\"query-kvm\"}\n{\"execute\":\"cont\"}\n") == 0;
		tap_okf("", got, ok, "the monitor read capabilities, query-kvm, "
		    "cont, one per line");
	}

	pid = monitor(GREETING OK OK "{\"error\": {\"class\": \"GenericError\", "
	    "\"desc\": \"no\"}}\r\n", 0, 1);
	tap_okf(sp_code_name(e.code), e.msg, query_and_cont(rets, &e) == -1 &&
	    e.code == SP_E_QEMU && strstr(e.msg, "cont") != NULL,
	    "the second of two failing: code qemu, named");
	json_decref(rets[0]);
	json_decref(rets[1]);
	reap(pid);

	pid = monitor(GREETING OK "{\"error\": {\"class\": \"GenericError\", "
	    "\"desc\": \"boom\"}}\r\n", 0, 1);
	ok = sp_qmp_open(&q, dir, 2000, &e) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok && sp_qmp_cmd(q, "cont", NULL, &e) == -1 &&
	    e.code == SP_E_QEMU && strstr(e.msg, "boom") != NULL,
	    "an error answer: code qemu, QEMU's description");
	if (ok)
		sp_qmp_close(q);
	reap(pid);

	pid = monitor(GREETING OK "{\"return\": {}, \"x\": \"", 70 * 1024, 1);
	ok = sp_qmp_open(&q, dir, 2000, &e) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok && sp_qmp_cmd(q, "cont", NULL, &e) == -1 &&
	    e.code == SP_E_PROTOCOL,
	    "a line over 64 KiB is refused");
	if (ok)
		sp_qmp_close(q);
	reap(pid);

	pid = monitor("this is not json\r\n", 0, 1);
	tap_okf(sp_code_name(e.code), e.msg, open_and_cont(&e) == -1 &&
	    e.code == SP_E_PROTOCOL, "a greeting that is not JSON");
	reap(pid);

	pid = monitor(OK, 0, 1);
	tap_okf(sp_code_name(e.code), e.msg, open_and_cont(&e) == -1 &&
	    e.code == SP_E_PROTOCOL, "an answer instead of a greeting");
	reap(pid);

	pid = monitor(GREETING "{\"error\": {\"class\": \"CommandNotFound\", "
	    "\"desc\": \"no caps\"}}\r\n", 0, 1);
	tap_okf(sp_code_name(e.code), e.msg, open_and_cont(&e) == -1 &&
	    e.code == SP_E_QEMU &&
	    strstr(e.msg, "qmp_capabilities") != NULL,
	    "capabilities refused: code qemu, the command named");
	reap(pid);

	strcpy(script, GREETING OK);
	for (i = 0; i < 100; i++)
		strcat(script, EVENT);
	pid = monitor(script, 0, 1);
	ok = sp_qmp_open(&q, dir, 2000, &e) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok && sp_qmp_cmd(q, "cont", NULL, &e) == -1 &&
	    e.code == SP_E_PROTOCOL,
	    "a flood of events and no answer is refused");
	if (ok)
		sp_qmp_close(q);
	reap(pid);

	pid = monitor(GREETING OK, 0, 1);
	ok = sp_qmp_open(&q, dir, 300, &e) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok && sp_qmp_cmd(q, "cont", NULL, &e) == -1 &&
	    e.code == SP_E_TIMED_OUT,
	    "a monitor that never answers: timeout at the deadline");
	if (ok)
		sp_qmp_close(q);
	reap(pid);

	pid = monitor(GREETING, 0, 0);
	tap_okf(sp_code_name(e.code), e.msg, open_and_cont(&e) == -1 &&
	    e.code == SP_E_NOT_RUNNING,
	    "a monitor that hangs up after its greeting: not-running");
	reap(pid);

	tap_okf(sp_code_name(e.code), e.msg, sp_qmp_open(&q, "/tmp/" "a-run-dir-far-too-long-"
	    "for-a-socket-path-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 100, &e) == -1 &&
	    e.code == SP_E_BAD_INPUT, "a run dir too long for a socket");

	snprintf(script, sizeof script, "rm -rf %s", dir);
	if (system(script) != 0)
		return 2;
	return tap_done();
}
