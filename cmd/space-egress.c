/*
 * space-egress: what each sandbox may reach through the gateway (design.md).
 *   set (ID | --tenant T | --template NAME) [--allow RULE...] [--deny RULE...]
 *   show [ID...] [--tenant T] [--template NAME]
 *   clear (ID... | --tenant T | --template NAME)
 *   check [ID] [--tenant T] [--template NAME] HOST (PORT [--addr IP...] | --dns)
 * Policies are files the gateway reads for every new connection: a change
 * applies to the next one, without touching the sandbox.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"
#include "sp_egress.h"

struct args {
	struct sp_conf conf;
	const char *tenant, *template;
	char **pos;			/* the words that are no option */
	int npos;
	char (*ids)[SP_ID_LEN + 1];	/* the ids of names among them */
	struct sp_egress_policy p;	/* set: the rules given */
	struct sp_egress_addr addrs[SP_EGRESS_ADDRS_MAX];
	size_t naddrs;
	int dns;
};

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-egress set (ID | --tenant T | --template NAME) "
	    "[--allow RULE...] [--deny RULE...]\n"
	    "       space-egress show [ID...] [--tenant T] [--template NAME]\n"
	    "       space-egress clear (ID... | --tenant T | --template NAME)\n"
	    "       space-egress check [ID] [--tenant T] [--template NAME] HOST "
	    "(PORT [--addr IP...] | --dns)\n");
	sp_usage_exit();
}

/* Rules follow --allow or --deny, addresses --addr, up to the next option;
 * a rule or an address never begins with '-'.  A bad one is bad input. */
static int
parse(struct args *a, int argc, char *argv[], struct sp_err *e)
{
	enum { WORDS, ALLOW, DENY, ADDR } mode = WORDS;
	int i, set = strcmp(argv[1], "set") == 0;
	int check = strcmp(argv[1], "check") == 0;

	if ((a->pos = calloc((size_t)argc, sizeof *a->pos)) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "no memory");
	for (i = 2; i < argc; i++) {
		if (set && strcmp(argv[i], "--allow") == 0)
			mode = ALLOW;
		else if (set && strcmp(argv[i], "--deny") == 0)
			mode = DENY;
		else if (check && strcmp(argv[i], "--addr") == 0)
			mode = ADDR;
		else if (check && strcmp(argv[i], "--dns") == 0) {
			a->dns = 1;
			mode = WORDS;
		} else if (strcmp(argv[i], "--tenant") == 0 && i + 1 < argc &&
		    a->tenant == NULL)
			a->tenant = argv[++i];
		else if (strcmp(argv[i], "--template") == 0 && i + 1 < argc &&
		    a->template == NULL)
			a->template = argv[++i];
		else if (argv[i][0] == '-')
			usage();
		else if (mode == ALLOW || mode == DENY) {
			if (sp_egress_rules_add(mode == ALLOW ? &a->p.allow :
			    &a->p.deny, argv[i], e) == -1)
				return -1;
		} else if (mode == ADDR) {
			if (a->naddrs == SP_EGRESS_ADDRS_MAX)
				return sp_err_set(e, SP_E_BAD_INPUT, 0, "at most %d "
				    "addresses", SP_EGRESS_ADDRS_MAX);
			if (sp_egress_addr_parse(argv[i], &a->addrs[a->naddrs++],
			    e) == -1)
				return -1;
		} else
			a->pos[a->npos++] = argv[i];
	}
	if (a->tenant != NULL && sp_name_check("tenant", a->tenant, e) == -1)
		return -1;
	if (a->template != NULL && sp_name_check("template", a->template, e) == -1)
		return -1;
	return 0;
}

/* set and clear act on one thing: the sandbox, tenant or template named. */
static int
one_target(const struct args *a, enum sp_egress_scope *scope,
    const char **name, struct sp_err *e)
{
	if (a->npos + (a->tenant != NULL) + (a->template != NULL) != 1)
		usage();
	*scope = a->npos == 1 ? SP_EGRESS_SANDBOX :
	    a->tenant != NULL ? SP_EGRESS_TENANT : SP_EGRESS_TEMPLATE;
	*name = a->npos == 1 ? a->pos[0] : a->tenant != NULL ? a->tenant :
	    a->template;
	return *scope == SP_EGRESS_SANDBOX ? sp_id_check(*name, e) : 0;
}

/* Who the policy is about, as the JSON lines name it. */
static json_t *
about(enum sp_egress_scope scope, const char *name, json_t *o)
{
	if (scope == SP_EGRESS_TENANT)
		json_object_set_new(o, "tenant", json_string(name));
	else if (scope == SP_EGRESS_TEMPLATE)
		json_object_set_new(o, "template", json_string(name));
	return o;
}

static int
cmd_set(struct args *a)
{
	enum sp_egress_scope scope;
	const char *name;
	struct sp_err e;
	json_t *o;

	if (one_target(a, &scope, &name, &e) == -1)
		return sp_out_fail(NULL, &e);
	if (sp_egress_policy_write(a->conf.root, scope, name, &a->p, &e) == -1)
		return sp_out_fail(scope == SP_EGRESS_SANDBOX ? name : NULL, &e);
	o = about(scope, name, json_object());
	json_object_update_new(o, sp_egress_policy_json(&a->p));
	return sp_out_ok(scope == SP_EGRESS_SANDBOX ? name : NULL, o);
}

static int
clear1(const char *id, json_t *rec, void *arg)
{
	struct args *a = arg;
	struct sp_err e;
	int removed;

	if (sp_egress_policy_remove(a->conf.root, SP_EGRESS_SANDBOX, id,
	    &removed, &e) == -1)
		return sp_out_fail(id, &e);
	return sp_out_ok(id, json_pack("{s:b}", "removed", removed));
}

static int
cmd_clear(struct args *a)
{
	enum sp_egress_scope scope;
	const char *name;
	struct sp_err e;
	int removed;

	if (a->tenant == NULL && a->template == NULL)
		return sp_each(a->npos, a->pos, clear1, a);
	if (one_target(a, &scope, &name, &e) == -1 ||
	    sp_egress_policy_remove(a->conf.root, scope, name, &removed, &e) == -1)
		return sp_out_fail(NULL, &e);
	return sp_out_ok(NULL, about(scope, name, json_pack("{s:b}", "removed",
	    removed)));
}

/*
 * What the gateway takes from a sandbox's record: its tenant (the label
 * "tenant", else "default") and its template's name.  Without a DB, or
 * without a record, it is of tenant "default" and of no template; --tenant
 * and --template say otherwise.
 */
static int
defaults_of(const struct args *a, const char *id, char tenant[SP_LABEL_MAX + 1],
    char template[SP_NAME_MAX + 1], struct sp_err *e)
{
	struct sp_sandbox_row r;
	struct sp_db *db = NULL;
	json_t *labels, *t;
	int rc = 0;

	snprintf(tenant, SP_LABEL_MAX + 1, "%s", a->tenant ? a->tenant : "default");
	snprintf(template, SP_NAME_MAX + 1, "%s", a->template ? a->template : "");
	if (id == NULL || (a->tenant != NULL && a->template != NULL) ||
	    access(a->conf.db + strlen("sqlite:"), F_OK) == -1)
		return 0;
	memset(&r, 0, sizeof r);
	if (sp_db_open(&db, &a->conf, e) == -1)
		return -1;
	if (sp_db_sandbox_get(db, id, &r, e) == -1) {
		rc = e->code == SP_E_NOT_FOUND ? 0 : -1;
		goto out;
	}
	labels = json_loads(r.labels ? r.labels : "{}", 0, NULL);
	if (a->tenant == NULL && (t = json_object_get(labels, "tenant")) != NULL &&
	    json_is_string(t))
		snprintf(tenant, SP_LABEL_MAX + 1, "%s", json_string_value(t));
	json_decref(labels);
	if (a->template == NULL)
		snprintf(template, SP_NAME_MAX + 1, "%.*s",
		    (int)strcspn(r.template, "@"), r.template);
out:
	sp_db_row_release(&r);
	sp_db_close(db);
	return rc;
}

/* The effective policy: of the sandbox id (may be NULL), else of the
 * tenant, else of the template. */
static int
load(struct args *a, const char *id, struct sp_egress_policy *p, json_t **o,
    struct sp_err *e)
{
	char tenant[SP_LABEL_MAX + 1], template[SP_NAME_MAX + 1];

	if (id != NULL && sp_id_check(id, e) == -1)
		return -1;
	if (defaults_of(a, id, tenant, template, e) == -1 ||
	    sp_egress_policy_load(a->conf.root, id, id || a->tenant ? tenant :
	    NULL, template[0] ? template : NULL, p, e) == -1)
		return -1;
	*o = json_pack("{s:s}", "source", sp_egress_scope_name(p->source));
	if (id != NULL || a->tenant != NULL)
		json_object_set_new(*o, "tenant", json_string(tenant));
	if (template[0] != '\0')
		json_object_set_new(*o, "template", json_string(template));
	return 0;
}

static int
show1(const char *id, json_t *rec, void *arg)
{
	struct sp_egress_policy p;
	struct sp_err e;
	json_t *o;
	int rc;

	sp_egress_policy_init(&p);
	if (load(arg, id, &p, &o, &e) == -1)
		rc = sp_out_fail(id, &e);
	else {
		json_object_update_new(o, sp_egress_policy_json(&p));
		if (p.source != SP_EGRESS_NONE)
			json_object_set_new(o, "updated", json_integer(p.updated));
		rc = sp_out_ok(id, o);
	}
	sp_egress_policy_release(&p);
	return rc;
}

static int
cmd_show(struct args *a)
{
	if (a->npos == 0 && (a->tenant != NULL || a->template != NULL))
		return show1(NULL, NULL, a);
	return sp_each(a->npos, a->pos, show1, a);
}

static int
port_parse(const char *s, int *port, struct sp_err *e)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (s[0] < '1' || s[0] > '9' || *end != '\0' || errno != 0 || v > 65535)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "'%.16s' is not a port "
		    "(1 to 65535)", s);
	*port = (int)v;
	return 0;
}

static int
cmd_check(struct args *a)
{
	char s[SP_EGRESS_ADDR_STRLEN];
	struct sp_egress_decision d;
	struct sp_egress_policy p;
	struct sp_egress_never nv;
	struct sp_egress_addr lit;
	const char *id = NULL, *host;
	struct sp_err e;
	json_t *o = NULL, *out, *addrs;
	int want = a->dns ? 1 : 2, port = 0, rc;
	size_t i;

	if (a->npos == want + 1)
		id = a->pos[0];
	else if (a->npos != want || (a->tenant == NULL && a->template == NULL))
		usage();
	if (a->dns && a->naddrs > 0)
		usage();
	host = a->pos[a->npos - want];
	sp_egress_policy_init(&p);
	sp_egress_never_init(&nv);
	if ((!a->dns && port_parse(a->pos[a->npos - 1], &port, &e) == -1) ||
	    load(a, id, &p, &o, &e) == -1 || sp_egress_never_load(&nv, &e) == -1) {
		rc = sp_out_fail(id, &e);
		goto done;
	}
	/* Without addresses a name gets the decision taken before it is
	 * resolved: this command never resolves anything. */
	if (a->dns)
		sp_egress_decide_dns(&p, host, &d);
	else if (a->naddrs > 0 || sp_egress_addr_parse(host, &lit, NULL) == 0)
		sp_egress_decide(&p, &nv, host, port, a->addrs, a->naddrs, &d);
	else
		sp_egress_decide_name(&p, host, port, &d);
	if (strcmp(d.reason, "bad-host") == 0 || strcmp(d.reason, "bad-port") == 0) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "'%.64s' is not a host name or "
		    "address", host);
		rc = sp_out_fail(id, &e);
		goto done;
	}
	out = json_pack("{s:s}", "host", host);
	if (a->dns)
		json_object_set_new(out, "dns", json_true());
	else
		json_object_set_new(out, "port", json_integer(port));
	json_object_set_new(out, "decision", json_string(d.allow ? "allow" :
	    "deny"));
	json_object_set_new(out, "reason", json_string(d.reason));
	if (d.rule[0] != '\0')
		json_object_set_new(out, "rule", json_string(d.rule));
	if (!a->dns) {
		addrs = json_array();
		for (i = 0; i < d.naddrs; i++) {
			sp_egress_addr_format(&d.addrs[i], s);
			json_array_append_new(addrs, json_string(s));
		}
		json_object_set_new(out, "addrs", addrs);
	}
	/* Then where the policy came from. */
	json_object_update_new(out, o);
	o = NULL;
	rc = sp_out_ok(id, out);
done:
	json_decref(o);
	sp_egress_never_release(&nv);
	sp_egress_policy_release(&p);
	return rc;
}

/* The sandboxes' names among the first n operands become their ids. */
static int
names_to_ids(struct args *a, int n, struct sp_err *e)
{
	struct sp_ctx x;
	int i, open = 0, rc = 0;

	for (i = 0; i < n && rc == 0; i++) {
		if (!sp_handle_valid(a->pos[i]))
			continue;
		if (a->ids == NULL &&
		    (a->ids = calloc((size_t)a->npos, sizeof *a->ids)) == NULL)
			return sp_err_sys(e, SP_E_INTERNAL, "calloc");
		if (!open && sp_ctx_open_db(&x, e) == -1)
			return -1;
		open = 1;
		if ((rc = sp_sandbox_ref(&x, a->pos[i], a->ids[i], e)) == 0)
			a->pos[i] = a->ids[i];
	}
	if (open)
		sp_ctx_close(&x);
	return rc;
}

int
main(int argc, char *argv[])
{
	struct args a;
	struct sp_err e;
	int rc;

	sp_cli_init(argc, argv, usage);
	if (argc < 2 || (strcmp(argv[1], "set") != 0 &&
	    strcmp(argv[1], "show") != 0 && strcmp(argv[1], "clear") != 0 &&
	    strcmp(argv[1], "check") != 0))
		usage();
	memset(&a, 0, sizeof a);
	sp_egress_policy_init(&a.p);
	/* check's operands are [ID] HOST [PORT]: a host is no name. */
	if (parse(&a, argc, argv, &e) == -1 ||
	    sp_conf_load(&a.conf, &e) == -1 ||
	    names_to_ids(&a, strcmp(argv[1], "check") != 0 ? a.npos :
	    a.npos == (a.dns ? 2 : 3), &e) == -1) {
		rc = sp_out_fail(NULL, &e);
		goto out;
	}
	if (strcmp(argv[1], "set") == 0)
		rc = cmd_set(&a);
	else if (strcmp(argv[1], "show") == 0)
		rc = cmd_show(&a);
	else if (strcmp(argv[1], "clear") == 0)
		rc = cmd_clear(&a);
	else
		rc = cmd_check(&a);
out:
	sp_egress_policy_release(&a.p);
	free(a.pos);
	free(a.ids);
	return rc;
}
