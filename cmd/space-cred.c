/*
 * space-cred: the credentials the gateway injects into sandboxes' requests
 * (design.md).  Secrets come in on stdin only and never go out again.
 *   add --name N --scope S --host H[,H...] --inject M [--expires T]
 *       [--rate N/PERIOD]          a credential, its secret on stdin
 *   ls                             every credential, never a secret
 *   rm NAME... [--scope S]         removes them, secrets too
 *   rotate NAME [--scope S] [--expires T]   a new secret from stdin
 *   audit [--since T]              the audit log, JSON lines
 *   resolve --sandbox ID [--tenant T] [--project P] HOST...
 *                                  which credential a request would carry
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sp.h"
#include "sp_cred.h"

/* The secret and room for a CR LF after it, and one byte to see more. */
#define SECRET_BUF	(SP_CRED_SECRET_MAX + 3)

struct opt {
	const char *name, *scope, *hosts, *inject, *rate;
	const char *sandbox, *tenant, *project;
	const char *expires, *since;
};

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-cred add --name N --scope S --host "
	    "H[,H...] --inject METHOD\n"
	    "           [--expires T] [--rate N/PERIOD]   < secret\n"
	    "       space-cred ls\n"
	    "       space-cred rm NAME... [--scope S]\n"
	    "       space-cred rotate NAME [--scope S] [--expires T]   < secret\n"
	    "       space-cred audit [--since T]\n"
	    "       space-cred resolve --sandbox ID [--tenant T] [--project P] "
	    "HOST...\n");
	sp_usage_exit();
}

/* Options of every subcommand; allowed says which this one takes. */
static int
parse(int argc, char *argv[], const char *allowed, struct opt *o)
{
	static const struct option opts[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "scope", required_argument, NULL, 's' },
		{ "host", required_argument, NULL, 'H' },
		{ "inject", required_argument, NULL, 'i' },
		{ "expires", required_argument, NULL, 'x' },
		{ "rate", required_argument, NULL, 'r' },
		{ "since", required_argument, NULL, 'S' },
		{ "sandbox", required_argument, NULL, 'b' },
		{ "tenant", required_argument, NULL, 't' },
		{ "project", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 },
	};
	const char **slot;
	int ch;

	memset(o, 0, sizeof *o);
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch == '?' || strchr(allowed, ch) == NULL)
			usage();
		switch (ch) {
		case 'n': slot = &o->name; break;
		case 's': slot = &o->scope; break;
		case 'H': slot = &o->hosts; break;
		case 'i': slot = &o->inject; break;
		case 'x': slot = &o->expires; break;
		case 'r': slot = &o->rate; break;
		case 'S': slot = &o->since; break;
		case 'b': slot = &o->sandbox; break;
		case 't': slot = &o->tenant; break;
		default: slot = &o->project; break;
		}
		if (*slot != NULL)
			usage();	/* given twice */
		*slot = optarg;
	}
	return optind;
}

/* Unix seconds, or 0 when s is NULL. */
static int
seconds(const char *what, const char *s, int64_t *out, struct sp_err *e)
{
	char *end;
	long long v;

	*out = 0;
	if (s == NULL)
		return 0;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || *s < '0' || *s > '9' ||
	    v > 253402300799LL)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s: not unix seconds "
		    "(0 to 253402300799)", what);
	*out = v;
	return 0;
}

/* {"ok":false,"error","msg"} with the fields of extra (stolen), and the
 * human line; the exit status. */
static int
fail(const char *what, json_t *extra, const struct sp_err *e)
{
	json_t *o = extra != NULL ? extra : json_object();

	json_object_set_new(o, "ok", json_false());
	json_object_set_new(o, "error", json_string(e->code != SP_E_NONE ?
	    sp_code_name(e->code) : "internal"));
	json_object_set_new(o, "msg", json_string(e->msg));
	sp_out_json(o);
	if (what != NULL)
		sp_warn("%s: %s", what, e->msg);
	else
		sp_warn("%s", e->msg);
	return sp_err_exit(e);
}

/*
 * The secret from stdin: to EOF from a pipe or file, one line from a
 * terminal, which does not echo it.  One trailing newline (LF or CR LF) is
 * cut.  Empty, or over SP_CRED_SECRET_MAX, is bad input.
 */
static int
read_secret(unsigned char *buf, size_t *n, struct sp_err *e)
{
	struct termios t, quiet;
	int tty = isatty(0) && tcgetattr(0, &t) == 0;
	size_t got = 0;
	ssize_t r = 0;

	if (tty) {
		quiet = t;
		quiet.c_lflag &= ~ECHO;
		tcsetattr(0, TCSAFLUSH, &quiet);
		fprintf(stderr, "secret: ");
	}
	while (got < SECRET_BUF) {
		r = read(0, buf + got, SECRET_BUF - got);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			sp_err_sys(e, SP_E_IO, "read the secret from stdin");
			break;
		}
		if (r == 0)
			break;
		got += r;
		if (tty && buf[got - 1] == '\n')
			break;
	}
	if (tty) {
		tcsetattr(0, TCSAFLUSH, &t);
		fputc('\n', stderr);
	}
	if (r == -1)
		return -1;
	if (got > 0 && buf[got - 1] == '\n')
		got--;
	if (got > 0 && buf[got - 1] == '\r')
		got--;
	if (got > SP_CRED_SECRET_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "the secret is over %d "
		    "bytes", SP_CRED_SECRET_MAX);
	if (got == 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "no secret on stdin");
	*n = got;
	return 0;
}

/* Each host of a list, so that a bad one is told before the secret is
 * asked for. */
static int
hosts_check(const char *list, struct sp_err *e)
{
	char h[SP_CRED_HOST_MAX + 1], one[SP_CRED_HOST_MAX + 2];
	const char *p = list;
	size_t n;

	do {
		n = strcspn(p, ",");
		if (n >= sizeof one)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "host '%.40s...' is "
			    "over %d characters", p, SP_CRED_HOST_MAX);
		memcpy(one, p, n);
		one[n] = '\0';
		if (sp_cred_host_norm(one, 1, h, sizeof h, e) == -1)
			return -1;
		p += n;
	} while (*p++ == ',');
	return 0;
}

static int
add(const char *root, int argc, char *argv[], unsigned char *secret)
{
	struct sp_cred_spec s;
	struct sp_cred c;
	struct sp_err e;
	struct opt o;
	int64_t rn, rp;
	size_t n;

	if (parse(argc, argv, "nsHixr", &o) != argc || o.name == NULL ||
	    o.scope == NULL || o.hosts == NULL || o.inject == NULL)
		usage();
	memset(&s, 0, sizeof s);
	s.name = o.name;
	s.scope = o.scope;
	s.hosts = o.hosts;
	s.inject = o.inject;
	s.rate = o.rate;
	/* Everything checked before the secret is asked for. */
	if (seconds("--expires", o.expires, &s.expires, &e) == -1 ||
	    sp_name_check("name", s.name, &e) == -1 ||
	    sp_cred_scope_check(s.scope, &e) == -1 ||
	    hosts_check(s.hosts, &e) == -1 ||
	    sp_cred_inject_check(s.inject, &e) == -1 ||
	    (s.rate != NULL && sp_cred_rate_parse(s.rate, &rn, &rp, &e) == -1) ||
	    read_secret(secret, &n, &e) == -1 ||
	    sp_cred_add(root, &s, secret, n, time(NULL), &c, &e) == -1)
		return fail(o.name, json_pack("{s:s}", "name", o.name), &e);
	return sp_out_ok(NULL, sp_cred_json(&c));
}

static int
ls1(const struct sp_cred *c, const struct sp_err *bad, void *arg)
{
	int *rc = arg, r;

	if (bad == NULL) {
		sp_out_json(sp_cred_json(c));
		return 0;
	}
	r = fail(c->name, json_pack("{s:s, s:s}", "name", c->name, "scope",
	    c->scope), bad);
	if (r > *rc)
		*rc = r;
	return 0;
}

static int
rm(const char *root, int argc, char *argv[])
{
	struct sp_cred c;
	struct sp_err e;
	struct opt o;
	int i, removed, r, rc = 0;
	json_t *j;

	i = parse(argc, argv, "s", &o);
	if (i == argc)
		usage();
	for (; i < argc; i++) {
		if (sp_cred_remove(root, argv[i], o.scope, time(NULL), &removed,
		    &c, &e) == -1) {
			j = json_pack("{s:s}", "name", argv[i]);
			if (o.scope != NULL)
				json_object_set_new(j, "scope",
				    json_string(o.scope));
			r = fail(argv[i], j, &e);
		} else if (removed) {
			r = sp_out_ok(NULL, json_pack("{s:s, s:s, s:b}", "name",
			    c.name, "scope", c.scope, "removed", 1));
		} else {
			j = json_pack("{s:s}", "name", argv[i]);
			if (o.scope != NULL)
				json_object_set_new(j, "scope",
				    json_string(o.scope));
			json_object_set_new(j, "removed", json_false());
			r = sp_out_ok(NULL, j);
		}
		if (r > rc)
			rc = r;
	}
	return rc;
}

static int
rotate(const char *root, int argc, char *argv[], unsigned char *secret)
{
	struct sp_cred c;
	struct sp_err e;
	struct opt o;
	int64_t expires;
	size_t n;

	if (parse(argc, argv, "sx", &o) != argc - 1)
		usage();
	if (seconds("--expires", o.expires, &expires, &e) == -1 ||
	    sp_cred_get(root, argv[argc - 1], o.scope, &c, &e) == -1 ||
	    read_secret(secret, &n, &e) == -1 ||
	    sp_cred_rotate(root, argv[argc - 1], o.scope, secret, n, expires,
	    time(NULL), &c, &e) == -1)
		return fail(argv[argc - 1], json_pack("{s:s}", "name",
		    argv[argc - 1]), &e);
	return sp_out_ok(NULL, sp_cred_json(&c));
}

static int
print(json_t *rec, void *arg)
{
	return sp_out_json(rec);
}

static int
audit(const char *root, int argc, char *argv[])
{
	struct sp_err e;
	struct opt o;
	int64_t since;

	if (parse(argc, argv, "S", &o) != argc)
		usage();
	if (seconds("--since", o.since, &since, &e) == -1 ||
	    sp_cred_audit_each(root, since, print, NULL, &e) == -1)
		return fail(NULL, NULL, &e);
	return 0;
}

static int
resolve(const char *root, int argc, char *argv[])
{
	struct sp_cred c;
	struct sp_err e;
	struct opt o;
	int i, r, rc = 0;
	json_t *j, *rec;

	i = parse(argc, argv, "btp", &o);
	if (o.sandbox == NULL || i == argc)
		usage();
	for (; i < argc; i++) {
		if (sp_cred_resolve(root, o.sandbox, o.tenant, o.project,
		    argv[i], &c, &e) == -1) {
			r = fail(argv[i], json_pack("{s:s}", "host", argv[i]), &e);
		} else {
			j = json_pack("{s:s}", "host", argv[i]);
			rec = sp_cred_json(&c);
			json_object_update(j, rec);
			json_decref(rec);
			json_object_set_new(j, "expired", json_boolean(
			    c.expires > 0 && time(NULL) >= c.expires));
			r = sp_out_ok(NULL, j);
		}
		if (r > rc)
			rc = r;
	}
	return rc;
}

int
main(int argc, char *argv[])
{
	static unsigned char secret[SECRET_BUF];
	struct sp_conf conf;
	struct sp_err e;
	const char *sub;
	int rc;

	sp_cli_init(argc, argv, usage);
	if (argc < 2)
		usage();
	sub = argv[1];
	if (strcmp(sub, "ls") == 0 && argc != 2)
		usage();
	if (sodium_init() < 0) {
		sp_err_set(&e, SP_E_INTERNAL, 0, "libsodium cannot start");
		return fail(NULL, NULL, &e);
	}
	if (sp_conf_load(&conf, &e) == -1)
		return fail(NULL, NULL, &e);
	sodium_mlock(secret, sizeof secret);
	if (strcmp(sub, "add") == 0)
		rc = add(conf.root, argc - 1, argv + 1, secret);
	else if (strcmp(sub, "ls") == 0) {
		rc = 0;
		if (sp_cred_each(conf.root, ls1, &rc, &e) == -1)
			rc = fail(NULL, NULL, &e);
	} else if (strcmp(sub, "rm") == 0)
		rc = rm(conf.root, argc - 1, argv + 1);
	else if (strcmp(sub, "rotate") == 0)
		rc = rotate(conf.root, argc - 1, argv + 1, secret);
	else if (strcmp(sub, "audit") == 0)
		rc = audit(conf.root, argc - 1, argv + 1);
	else if (strcmp(sub, "resolve") == 0)
		rc = resolve(conf.root, argc - 1, argv + 1);
	else
		usage();
	sodium_munlock(secret, sizeof secret);
	return rc;
}
