/*
 * test-port: the inbound ports' files (lib/sp_port.c): host addresses
 * parsed strictly, ports written, listed and removed under a scratch root,
 * and whatever else lies in ROOT/ports (junk names, bad text, symlinks,
 * directories) passed over; the gateway's status believed only while the
 * process that wrote it lives.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"
#include "tap.h"

static struct sp_err e;
static char root[64];

#define ID_A	"aaaaaaaaaaaa"
#define ID_B	"bbbbbbbbbbbb"

static int
parse_ok(const char *s, const char *want)
{
	struct sockaddr_in sa;
	char out[SP_PORT_LISTEN_MAX];

	memset(&e, 0, sizeof e);
	if (sp_port_listen_parse(s, &sa, &e) == -1)
		return 0;
	sp_port_listen_fmt(&sa, out);
	return strcmp(out, want) == 0;
}

static int
parse_bad(const char *s)
{
	struct sockaddr_in sa;

	memset(&e, 0, sizeof e);
	return sp_port_listen_parse(s, &sa, &e) == -1 &&
	    e.code == SP_E_BAD_INPUT;
}

static void
test_parse(void)
{
	static const char *const bad[] = { "", ":", ":80", "127.0.0.1",
	    "127.0.0.1:", "127.0.0.1:-1", "127.0.0.1:65536", "127.0.0.1:8x",
	    "127.0.0.1:+80", "127.0.0.1: 80", "localhost:80", "::1:80",
	    "[::1]:80", "300.1.1.1:80", "1.2.3:80", "1.2.3.4.5:80",
	    "127.0.0.1:99999999999999999999",
	    "1111111111111111111111111111111111.1.1.1:80" };
	size_t i;

	tap_ok(parse_ok("127.0.0.1:8080", "127.0.0.1:8080"), "127.0.0.1:8080");
	tap_ok(parse_ok("0.0.0.0:1", "0.0.0.0:1"), "0.0.0.0:1");
	tap_ok(parse_ok("127.0.0.1:0", "127.0.0.1:0"), "port 0: any");
	tap_ok(parse_ok("255.255.255.255:65535", "255.255.255.255:65535"),
	    "the longest address fits SP_PORT_LISTEN_MAX");
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		tap_okf(sp_code_name(e.code), e.msg, parse_bad(bad[i]),
		    "'%s' is bad input", bad[i]);
	memset(&e, 0, sizeof e);
	tap_ok(sp_port_listen_parse(NULL, &(struct sockaddr_in){ 0 }, &e) == -1,
	    "NULL is bad input");
}

static void
put(const char *rel, const char *text)
{
	char p[256];
	int fd;

	snprintf(p, sizeof p, "%s/ports/%s", root, rel);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0) {
		if (write(fd, text, strlen(text)) < 0)
			perror(p);
		close(fd);
	}
}

static int
add(const char *id, int port, const char *listen)
{
	struct sp_port p;

	memset(&p, 0, sizeof p);
	snprintf(p.id, sizeof p.id, "%s", id);
	p.port = port;
	snprintf(p.listen, sizeof p.listen, "%s", listen);
	memset(&e, 0, sizeof e);
	return sp_port_add(root, &p, &e);
}

static void
test_files(void)
{
	struct sp_port *ps = NULL;
	char p[256], big[200];
	size_t n = 99;
	int removed = -1;

	tap_ok(sp_port_list(root, NULL, &ps, &n, &e) == 0 && n == 0 &&
	    ps == NULL, "no ports directory: none");
	tap_ok(add(ID_A, 8080, "127.0.0.1:40001") == 0, "a port written");
	tap_ok(add(ID_A, 22, "127.0.0.1:40002") == 0, "another of the same");
	tap_ok(add(ID_B, 80, "0.0.0.0:40003") == 0, "one of another sandbox");
	tap_ok(add(ID_A, 8080, "127.0.0.1:40004") == 0, "one replaced");
	tap_ok(add("NOT-AN-ID", 80, "127.0.0.1:1") == -1 &&
	    e.code == SP_E_BAD_INPUT, "a bad id is bad input");
	tap_ok(add(ID_A, 0, "127.0.0.1:1") == -1 && e.code == SP_E_BAD_INPUT,
	    "port 0 is bad input");
	tap_ok(add(ID_A, 65536, "127.0.0.1:1") == -1 &&
	    e.code == SP_E_BAD_INPUT, "port 65536 is bad input");
	/* What is not a port's file is passed over. */
	put(ID_A "/abc", "127.0.0.1:1\n");
	put(ID_A "/0", "127.0.0.1:1\n");
	put(ID_A "/080", "127.0.0.1:1\n");
	put(ID_A "/65536", "127.0.0.1:1\n");
	put(ID_A "/81", "127.0.0.1:1");			/* no newline */
	put(ID_A "/82", "localhost:1\n");
	put(ID_A "/83", "");
	memset(big, '1', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	put(ID_A "/84", big);
	put(ID_A "/8080.new", "127.0.0.1:1\n");		/* a write cut short */
	snprintf(p, sizeof p, "%s/ports/%s/85", root, ID_A);
	if (symlink("22", p) == -1)
		perror(p);
	snprintf(p, sizeof p, "%s/ports/%s/86", root, ID_A);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/ports/not-an-id", root);
	mkdir(p, 0755);
	put("not-an-id/80", "127.0.0.1:1\n");
	put("stray", "x\n");
	memset(&e, 0, sizeof e);
	tap_okf(sp_code_name(e.code), e.msg,
	    sp_port_list(root, NULL, &ps, &n, &e) == 0 && n == 3,
	    "every sandbox: the three ports, nothing else (%zu)", n);
	tap_ok(n == 3 && strcmp(ps[0].id, ID_A) == 0 && ps[0].port == 22 &&
	    strcmp(ps[0].listen, "127.0.0.1:40002") == 0 &&
	    ps[1].port == 8080 && strcmp(ps[1].listen, "127.0.0.1:40004") == 0 &&
	    strcmp(ps[2].id, ID_B) == 0 && ps[2].port == 80,
	    "in order of id and port, each with its address");
	free(ps);
	tap_ok(sp_port_list(root, ID_B, &ps, &n, &e) == 0 && n == 1 &&
	    ps[0].port == 80, "one sandbox's");
	free(ps);
	memset(&e, 0, sizeof e);
	tap_ok(sp_port_list(root, "../etc", &ps, &n, &e) == -1 &&
	    e.code == SP_E_BAD_INPUT, "a bad id to list is bad input");
	tap_ok(sp_port_remove(root, ID_A, 22, &removed, &e) == 0 && removed == 1,
	    "removed");
	tap_ok(sp_port_remove(root, ID_A, 22, &removed, &e) == 0 && removed == 0,
	    "removed again: nothing was there");
	tap_ok(sp_port_forget(root, ID_A, &e) == 0 &&
	    sp_port_list(root, ID_A, &ps, &n, &e) == 0 && n == 0,
	    "forgotten: its directory goes, junk and all");
	free(ps);
	tap_ok(sp_port_forget(root, ID_A, &e) == 0, "forgotten twice: fine");
}

static void
status(const char *text)
{
	char p[256];
	FILE *f;

	/* The gateway's directory, as the gateway makes it. */
	snprintf(p, sizeof p, "%s/" SP_GATEWAY_DIR, root);
	(void)mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/" SP_PORT_STATUS, root);
	if ((f = fopen(p, "w")) != NULL) {
		fputs(text, f);
		fclose(f);
	}
}

static void
test_status(void)
{
	char text[128];
	json_t *j;
	pid_t dead;

	tap_ok(sp_port_status(root) == NULL, "no file: no gateway");
	snprintf(text, sizeof text, "{\"pid\":%d,\"ports\":[]}", (int)getpid());
	status(text);
	tap_ok((j = sp_port_status(root)) != NULL, "a living writer's file");
	json_decref(j);
	if ((dead = fork()) == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	snprintf(text, sizeof text, "{\"pid\":%d,\"ports\":[]}", (int)dead);
	status(text);
	tap_ok(sp_port_status(root) == NULL, "a dead writer's file: no gateway");
	status("{\"pid\":0,\"ports\":[]}");
	tap_ok(sp_port_status(root) == NULL, "pid 0: no");
	snprintf(text, sizeof text, "{\"pid\":%d}", (int)getpid());
	status(text);
	tap_ok(sp_port_status(root) == NULL, "no ports array: no");
	snprintf(text, sizeof text, "{\"pid\":%d,\"pid\":1,\"ports\":[]}",
	    (int)getpid());
	status(text);
	tap_ok(sp_port_status(root) == NULL, "duplicate keys: no");
	status("{\"pid\":");
	tap_ok(sp_port_status(root) == NULL, "cut short: no");
}

int
main(void)
{
	char cmd[128];

	snprintf(root, sizeof root, "/tmp/test-port.XXXXXX");
	if (mkdtemp(root) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_parse();
	test_files();
	test_status();
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", root);
	return tap_done();
}
