/*
 * space-port: a sandbox's inbound ports (design.md, "Inbound ports").
 *   space-port ID PORT [--listen ADDR:PORT]	serve the guest's PORT there
 *   space-port ls [ID...]			what is served, and how
 *   space-port rm ID PORT				stop serving it
 * The guest has no network device: space-gatewayd listens on the host
 * address, and each connection it accepts rides the sandbox's channel to
 * the guest's daemon, which connects to 127.0.0.1:PORT in the guest.  A
 * sandbox paused by its idle tiers wakes on the first connection.  Without
 * --listen the address is 127.0.0.1 and a port free now.  A port is this
 * node's: it goes with the sandbox's removal.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sp.h"

#define WAIT_MS	3000	/* for the gateway to say it listens */

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-port ID PORT [--listen ADDR:PORT]\n"
	    "       space-port ls [ID...]\n"
	    "       space-port rm ID PORT\n");
	sp_usage_exit();
}

static int
port_arg(const char *s)
{
	int v;

	if ((v = sp_port_number(s)) == -1) {
		sp_warn("PORT '%.16s' is not 1..65535", s);
		exit(SP_EXIT_USAGE);
	}
	return v;
}

/* A loopback port free now: the kernel's choice.  Another program may
 * take it before the gateway does; the gateway then says so. */
static int
free_port(struct sockaddr_in *sa, struct sp_err *e)
{
	socklen_t n = sizeof *sa;
	int fd;

	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    bind(fd, (struct sockaddr *)sa, sizeof *sa) == -1 ||
	    getsockname(fd, (struct sockaddr *)sa, &n) == -1) {
		sp_err_sys(e, SP_E_IO, "finding a free port");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* What the gateway says of id's port: its entry of RUN/ports.json (a
 * new reference), or NULL when it serves no such port (*gateway: whether
 * one runs). */
static json_t *
status_of(const struct sp_conf *c, const char *id, int port,
    const char *listen, int *gateway)
{
	json_t *st, *p, *found = NULL;
	size_t i;

	*gateway = 0;
	if ((st = sp_port_status(c->run)) == NULL)
		return NULL;
	*gateway = 1;
	json_array_foreach(json_object_get(st, "ports"), i, p)
		if (json_is_string(json_object_get(p, "id")) &&
		    strcmp(json_string_value(json_object_get(p, "id")), id) == 0 &&
		    json_integer_value(json_object_get(p, "port")) == port &&
		    (listen == NULL || (json_is_string(json_object_get(p,
		    "listen")) && strcmp(json_string_value(json_object_get(p,
		    "listen")), listen) == 0))) {
			found = json_incref(p);
			break;
		}
	json_decref(st);
	return found;
}

static json_t *
line_of(const struct sp_conf *c, const struct sp_port *p)
{
	json_t *st, *o;
	int gateway;

	st = status_of(c, p->id, p->port, p->listen, &gateway);
	o = json_pack("{s:i, s:s, s:s}", "port", p->port, "listen", p->listen,
	    "state", !gateway ? "no-gateway" : st == NULL ? "pending" :
	    json_object_get(st, "error") != NULL ? "error" : "listening");
	if (st != NULL && json_object_get(st, "error") != NULL)
		json_object_set(o, "msg", json_object_get(st, "error"));
	json_decref(st);
	return o;
}

static int
cmd_add(const char *id, int port, const char *listen)
{
	struct sp_ctx x;
	struct sp_sandbox_row r;
	struct sockaddr_in sa;
	struct sp_port p, old, *all = NULL;
	struct timespec ts = { 0, 50 * 1000000 };
	struct sp_err e, e2;
	char idbuf[SP_ID_LEN + 1];
	size_t n, i, mine = 0;
	json_t *st = NULL;
	int gateway = 0, waited, rc;

	memset(&p, 0, sizeof p);
	memset(&old, 0, sizeof old);
	if (sp_port_listen_parse(listen != NULL ? listen : "127.0.0.1:0", &sa,
	    &e) == -1 || sp_ctx_open_ref(&x, &id, idbuf, &e) == -1)
		return sp_out_fail(id, &e);
	if ((rc = sp_db_sandbox_get(x.db, id, &r, &e)) == 0) {
		if (r.pod || r.state == SP_ST_DESTROYED)
			rc = sp_err_set(&e, SP_E_NOT_FOUND, 0, "no such sandbox");
		else if (strcmp(r.node, x.conf.node) != 0)
			rc = sp_err_set(&e, SP_E_BAD_STATE, 0, "sandbox %s is on "
			    "node %s: its ports are served there", id, r.node);
		sp_db_row_release(&r);
	}
	if (rc == -1 || (sa.sin_port == 0 && free_port(&sa, &e) == -1) ||
	    sp_port_list(x.conf.root, NULL, &all, &n, &e) == -1) {
		sp_ctx_close(&x);
		return sp_out_fail(id, &e);
	}
	snprintf(p.id, sizeof p.id, "%s", id);
	p.port = port;
	sp_port_listen_fmt(&sa, p.listen);
	for (i = 0, rc = 0; i < n && rc == 0; i++) {
		if (strcmp(all[i].id, id) == 0 && all[i].port != port)
			mine++;
		if (strcmp(all[i].id, id) == 0 && all[i].port == port)
			old = all[i];	/* replaced: back if the new fails */
		if (strcmp(all[i].listen, p.listen) == 0 &&
		    (strcmp(all[i].id, id) != 0 || all[i].port != port))
			rc = sp_err_set(&e, SP_E_EXISTS, 0, "%s serves port %d "
			    "of %s already", p.listen, all[i].port, all[i].id);
	}
	free(all);
	if (rc == 0 && mine >= SP_PORTS_PER_SANDBOX)
		rc = sp_err_set(&e, SP_E_BAD_INPUT, 0, "at most %d ports a "
		    "sandbox", SP_PORTS_PER_SANDBOX);
	if (rc == -1 || sp_port_add(x.conf.root, &p, &e) == -1) {
		sp_ctx_close(&x);
		return sp_out_fail(id, &e);
	}
	/* The gateway takes it up within a round (250 ms). */
	for (waited = 0; waited < WAIT_MS; waited += 50) {
		st = status_of(&x.conf, id, port, p.listen, &gateway);
		if (st != NULL || (!gateway && waited >= 1000))
			break;
		nanosleep(&ts, NULL);
	}
	if (st != NULL && json_object_get(st, "error") != NULL) {
		/* It cannot listen there: nothing stays of the wish, and
		 * what the port had before comes back. */
		sp_err_set(&e, SP_E_IO, 0, "%s",
		    json_string_value(json_object_get(st, "error")) ?
		    json_string_value(json_object_get(st, "error")) : "error");
		if (old.port != 0)
			sp_port_add(x.conf.root, &old, &e2);
		else
			sp_port_remove(x.conf.root, id, port, &rc, &e2);
		json_decref(st);
		sp_ctx_close(&x);
		return sp_out_fail(id, &e);
	}
	json_decref(st);
	rc = sp_out_ok(id, line_of(&x.conf, &p));
	sp_ctx_close(&x);
	return rc;
}

static int
cmd_ls(int argc, char *argv[])
{
	char (*ids)[SP_ID_LEN + 1];
	struct sp_ctx x;
	struct sp_port *all;
	struct sp_err e;
	size_t n, i;
	int k, rc = 0;

	/* Names are looked up in the DB; ids alone need no more than the
	 * files. */
	if ((ids = calloc((size_t)argc + 1, sizeof *ids)) == NULL) {
		sp_err_sys(&e, SP_E_INTERNAL, "calloc");
		return sp_out_fail(NULL, &e);
	}
	if (sp_ctx_open_db(&x, &e) == -1) {
		free(ids);
		return sp_out_fail(NULL, &e);
	}
	for (k = 0; k < argc; k++)
		if (sp_sandbox_ref(&x, argv[k], ids[k], &e) == -1) {
			rc = sp_out_fail(argv[k], &e);
			goto out;
		}
	for (k = 0; k == 0 || k < argc; k++) {
		if (sp_port_list(x.conf.root, argc > 0 ? ids[k] : NULL, &all, &n,
		    &e) == -1) {
			rc = sp_out_fail(argc > 0 ? argv[k] : NULL, &e);
			goto out;
		}
		for (i = 0; i < n; i++) {
			json_t *o = line_of(&x.conf, &all[i]);

			json_object_set_new(o, "id", json_string(all[i].id));
			sp_out_json(o);
		}
		free(all);
	}
out:
	sp_ctx_close(&x);
	free(ids);
	return rc;
}

static int
cmd_rm(const char *id, int port)
{
	struct sp_ctx x;
	struct sp_err e;
	char idbuf[SP_ID_LEN + 1];
	int removed, rc;

	sp_event_action("port.rm");
	if (sp_ctx_open_ref(&x, &id, idbuf, &e) == -1)
		return sp_out_fail(id, &e);
	if (sp_port_remove(x.conf.root, id, port, &removed, &e) == -1)
		rc = sp_out_fail(id, &e);
	else if (!removed) {
		sp_err_set(&e, SP_E_NOT_FOUND, 0, "port %d of %s is not served",
		    port, id);
		rc = sp_out_fail(id, &e);
	} else
		rc = sp_out_ok(id, json_pack("{s:i, s:b}", "port", port,
		    "removed", 1));
	sp_ctx_close(&x);
	return rc;
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *listen = NULL;
	int ch;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (ch != 'l' || listen != NULL)
			usage();
		listen = optarg;
	}
	argc -= optind;
	argv += optind;
	if (argc >= 1 && strcmp(argv[0], "ls") == 0 && listen == NULL)
		return cmd_ls(argc - 1, argv + 1);
	if (argc == 3 && strcmp(argv[0], "rm") == 0 && listen == NULL)
		return cmd_rm(argv[1], port_arg(argv[2]));
	if (argc != 2)
		usage();
	return cmd_add(argv[0], port_arg(argv[1]), listen);
}
