/*
 * space-tenant: the tenants of the HTTP API (space-apid) and their keys.
 *   add NAME [quotas]         a tenant; quotas 0 (the default) are none,
 *                             --templates the ones it may use (all)
 *   set NAME [quotas]         its quotas and templates from now on
 *   ls                        tenants, their quotas and what they use
 *   rm NAME                   a tenant with no sandboxes, and its keys
 *   key add TENANT [--rate N] a key, shown once; --admin: sees everything
 *   key ls [TENANT]           keys (never the secret)
 *   key rm ID                 a key, refused from then on
 * A tenant's sandboxes are those labelled tenant=NAME.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-tenant add NAME [--max-running N] [--max-vcpus N]\n"
	    "           [--max-memory MiB] [--max-disk GB] [--templates NAME,...|all]\n"
	    "       space-tenant set NAME [--max-running N] [--max-vcpus N]\n"
	    "           [--max-memory MiB] [--max-disk GB] [--templates NAME,...|all]\n"
	    "       space-tenant ls\n"
	    "       space-tenant rm NAME\n"
	    "       space-tenant key add TENANT [--rate N]\n"
	    "       space-tenant key add --admin [--rate N]\n"
	    "       space-tenant key ls [TENANT]\n"
	    "       space-tenant key rm ID\n");
	sp_usage_exit();
}

static int
number(const char *opt, const char *s, long hi)
{
	char *end;
	long v;

	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < 0 || v > hi) {
		sp_warn("%s: need a whole number from 0 to %ld", opt, hi);
		exit(SP_EXIT_USAGE);
	}
	return (int)v;
}

/* The options after NAME of add and set; for set, what is not given
 * stays as it was (t holds it). */
static void
quota_opts(int argc, char *argv[], struct sp_tenant_row *t)
{
	static const struct option opts[] = {
		{ "max-running", required_argument, NULL, 'r' },
		{ "max-vcpus", required_argument, NULL, 'c' },
		{ "max-memory", required_argument, NULL, 'm' },
		{ "max-disk", required_argument, NULL, 'd' },
		{ "templates", required_argument, NULL, 'T' },
		{ NULL, 0, NULL, 0 },
	};
	struct sp_err e;
	json_t *a;
	char *list, *name, *save = NULL;
	int ch;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'r':
			t->max_running = number("--max-running", optarg, 100000);
			break;
		case 'c':
			t->max_vcpus = number("--max-vcpus", optarg, 1000000);
			break;
		case 'm':
			t->max_memory_mib = number("--max-memory", optarg,
			    1 << 30);
			break;
		case 'd':
			t->max_disk_gb = number("--max-disk", optarg, 1 << 30);
			break;
		case 'T':
			/* NAME[,NAME...], or all */
			t->templates[0] = '\0';
			if (strcmp(optarg, "all") == 0)
				break;
			a = json_array();
			list = strdup(optarg);
			for (name = strtok_r(list, ",", &save); name != NULL;
			    name = strtok_r(NULL, ",", &save)) {
				if (sp_name_check("template", name, &e) == -1 ||
				    json_array_size(a) == SP_TENANT_TEMPLATES_MAX) {
					sp_warn("--templates: NAME[,NAME...] (at "
					    "most %d), or all", SP_TENANT_TEMPLATES_MAX);
					exit(SP_EXIT_USAGE);
				}
				json_array_append_new(a, json_string(name));
			}
			free(list);
			if (json_array_size(a) == 0)
				usage();
			name = json_dumps(a, JSON_COMPACT);
			snprintf(t->templates, sizeof t->templates, "%s", name);
			free(name);
			json_decref(a);
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
}

static json_t *
tenant_json(const struct sp_tenant_row *t)
{
	json_t *tpl = t->templates[0] ? json_loads(t->templates, 0, NULL) :
	    NULL;

	return json_pack("{s:s, s:I, s:{s:i, s:i, s:i, s:i}, s:o}", "tenant",
	    t->name, "created", (json_int_t)t->created, "quota", "running",
	    t->max_running, "vcpus", t->max_vcpus, "memory_mib",
	    t->max_memory_mib, "disk_gb", t->max_disk_gb, "templates",
	    tpl ? tpl : json_string("all"));
}

static int
ls1(const struct sp_tenant_row *t, void *arg)
{
	struct sp_ctx *x = arg;
	struct sp_tenant_usage u;
	struct sp_err e;
	json_t *o = tenant_json(t);

	if (sp_db_tenant_usage(x->db, t->name, &u, &e) == -1) {
		json_decref(o);
		return sp_out_fail(t->name, &e) ? -1 : 0;
	}
	json_object_set_new(o, "uses", json_pack("{s:i, s:i, s:i, s:i, s:I}",
	    "sandboxes", u.sandboxes, "running", u.running, "vcpus", u.vcpus,
	    "memory_mib", u.memory_mib, "disk_bytes", (json_int_t)u.disk_bytes));
	return sp_out_json(o) == 0 ? 0 : -1;
}

static int
key_ls1(const struct sp_apikey_row *k, void *arg)
{
	return sp_out_json(json_pack("{s:s, s:o, s:b, s:i, s:I}", "key", k->id,
	    "tenant", k->admin ? json_null() : json_string(k->tenant), "admin",
	    k->admin, "rate", k->rate, "created", (json_int_t)k->created)) ==
	    0 ? 0 : -1;
}

static int
key_add(struct sp_ctx *x, int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "admin", no_argument, NULL, 'a' },
		{ "rate", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	char key[SP_APIKEY_LEN + 1];
	struct sp_apikey_row row;
	const char *tenant = NULL;
	struct sp_err e;
	int ch, admin = 0, rate = SP_APIKEY_RATE_DEFAULT, rc;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'a':
			admin = 1;
			break;
		case 'r':
			rate = number("--rate", optarg, 1000000);
			break;
		default:
			usage();
		}
	}
	if (optind < argc)
		tenant = argv[optind++];
	if (optind != argc || (admin == (tenant != NULL)))
		usage();
	if ((tenant != NULL && sp_name_check("tenant", tenant, &e) == -1) ||
	    sp_apikey_new(tenant, admin, rate, &row, key, &e) == -1 ||
	    sp_db_apikey_add(x->db, &row, &e) == -1)
		return sp_out_fail(NULL, &e);
	rc = sp_out_ok(NULL, json_pack("{s:s, s:s, s:o, s:b, s:i}", "key", key,
	    "id", row.id, "tenant", admin ? json_null() : json_string(tenant),
	    "admin", admin, "rate", rate));
	sodium_memzero(key, sizeof key);
	return rc;
}

int
main(int argc, char *argv[])
{
	struct sp_tenant_row t;
	struct sp_ctx x;
	struct sp_err e;
	const char *verb;
	int rc = 0, key;

	sp_cli_init(argc, argv, usage);
	if (argc < 2)
		usage();
	key = strcmp(argv[1], "key") == 0;
	if (key && argc < 3)
		usage();
	verb = argv[1 + key];
	argc -= 1 + key;
	argv += 1 + key;
	/* argv[0] is the verb now; what follows are its operands. */
	if (strcmp(verb, "ls") == 0 ? argc > (key ? 2 : 1) :
	    strcmp(verb, "rm") == 0 ? argc != 2 :
	    strcmp(verb, "add") == 0 ? argc < 2 :
	    strcmp(verb, "set") == 0 ? key || argc < 2 : 1)
		usage();
	memset(&t, 0, sizeof t);
	if (!key && (strcmp(verb, "add") == 0 || strcmp(verb, "set") == 0)) {
		snprintf(t.name, sizeof t.name, "%s", argv[1]);
		if (sp_name_check("tenant", argv[1], &e) == -1) {
			sp_warn("%s", e.msg);
			return SP_EXIT_USAGE;
		}
	}
	if (sp_ctx_open(&x, 0, &e) == -1)
		return sp_out_fail(NULL, &e);
	if (key && strcmp(verb, "add") == 0) {
		rc = key_add(&x, argc, argv);
	} else if (key && strcmp(verb, "ls") == 0) {
		if (sp_db_apikey_each(x.db, argc == 2 ? argv[1] : NULL, key_ls1,
		    NULL, &e) == -1)
			rc = sp_out_fail(NULL, &e);
	} else if (key) {
		if (sp_db_apikey_remove(x.db, argv[1], &e) == -1)
			rc = sp_out_fail(argv[1], &e);
		else
			rc = sp_out_ok(NULL, json_pack("{s:s, s:b}", "key",
			    argv[1], "removed", 1));
	} else if (strcmp(verb, "add") == 0) {
		quota_opts(argc - 1, argv + 1, &t);
		if (sp_db_tenant_add(x.db, &t, &e) == -1 ||
		    sp_db_tenant_get(x.db, t.name, &t, &e) == -1)
			rc = sp_out_fail(NULL, &e);
		else
			rc = sp_out_ok(NULL, tenant_json(&t));
	} else if (strcmp(verb, "set") == 0) {
		if (sp_db_tenant_get(x.db, t.name, &t, &e) == -1) {
			rc = sp_out_fail(NULL, &e);
		} else {
			quota_opts(argc - 1, argv + 1, &t);
			if (sp_db_tenant_set(x.db, &t, &e) == -1)
				rc = sp_out_fail(NULL, &e);
			else
				rc = sp_out_ok(NULL, tenant_json(&t));
		}
	} else if (strcmp(verb, "ls") == 0) {
		if (sp_db_tenant_each(x.db, ls1, &x, &e) == -1)
			rc = sp_out_fail(NULL, &e);
	} else if (sp_db_tenant_remove(x.db, argv[1], &e) == -1) {
		rc = sp_out_fail(NULL, &e);
	} else {
		rc = sp_out_ok(NULL, json_pack("{s:s, s:b}", "tenant", argv[1],
		    "removed", 1));
	}
	sp_ctx_close(&x);
	return rc;
}
