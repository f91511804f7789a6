/*
 * space-node: the nodes of a cluster that share one DB.  ls shows each with
 * what it has, what its sandboxes ask for, and its lease; drain stops a
 * node taking new sandboxes (and filling its pool), ready undoes it; forget
 * drops a node that is gone for good; beat registers this node and renews
 * its lease (space-reconcile does it on every pass).
 */
#include <stdio.h>
#include <string.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-node ls [NODE]\n"
	    "       space-node drain [NODE]\n"
	    "       space-node ready [NODE]\n"
	    "       space-node forget NODE\n"
	    "       space-node beat\n");
	sp_usage_exit();
}

static int
add_pods(const char *template, int64_t ready, void *arg)
{
	return json_object_set_new(arg, template, json_integer(ready));
}

static json_t *
node_json(struct sp_db *db, const struct sp_node_row *n, struct sp_err *e)
{
	json_t *o, *templates, *pods;

	templates = json_loads(n->templates, 0, NULL);
	if (!json_is_array(templates)) {
		json_decref(templates);
		templates = json_array();
	}
	pods = json_object();
	if (sp_db_node_pods_each(db, n->name, add_pods, pods, e) == -1) {
		json_decref(templates);
		json_decref(pods);
		return NULL;
	}
	o = json_pack("{s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:s, s:o, s:o,"
	    " s:I, s:I, s:I, s:s}", "node", n->name, "state", n->state, "alive",
	    n->lease_left > 0, "lease_s", (json_int_t)n->lease_left, "seen",
	    (json_int_t)n->seen, "memory_mib", (json_int_t)n->memory_mib,
	    "vcpus", (json_int_t)n->vcpus, "disk_free_bytes",
	    (json_int_t)n->disk_free, "virt", n->virt, "templates", templates,
	    "pods", pods, "sandboxes", (json_int_t)n->sandboxes,
	    "memory_used_mib", (json_int_t)n->memory_used_mib, "vcpus_used",
	    (json_int_t)n->vcpus_used, "root", n->root);
	if (o == NULL)
		sp_err_sys(e, SP_E_INTERNAL, "out of memory");
	return o;
}

struct ls {
	struct sp_db *db;
	struct sp_err *e;
};

static int
ls1(const struct sp_node_row *n, void *arg)
{
	struct ls *l = arg;
	json_t *o = node_json(l->db, n, l->e);

	return o == NULL ? -1 : sp_out_json(o);
}

static int
ls(struct sp_ctx *x, const char *name)
{
	struct ls l = { x->db, NULL };
	struct sp_node_row n;
	struct sp_err e;
	json_t *o;

	l.e = &e;
	if (name == NULL)
		return sp_db_node_each(x->db, ls1, &l, &e) == -1 ?
		    sp_out_fail(NULL, &e) : SP_EXIT_OK;
	if (sp_db_node_get(x->db, name, &n, &e) == -1)
		return sp_out_fail(NULL, &e);
	o = node_json(x->db, &n, &e);
	sp_db_node_release(&n);
	return o == NULL ? sp_out_fail(NULL, &e) : sp_out_json(o);
}

/* drain or ready: the node's state, and whether this changed it. */
static int
set_state(struct sp_ctx *x, const char *name, const char *state)
{
	struct sp_node_row n;
	struct sp_err e;
	int changed;

	if (sp_name_check("node", name, &e) == -1 ||
	    sp_db_node_get(x->db, name, &n, &e) == -1)
		return sp_out_fail(NULL, &e);
	changed = strcmp(n.state, state) != 0;
	sp_db_node_release(&n);
	if (changed && sp_db_node_set_state(x->db, name, state, &e) == -1)
		return sp_out_fail(NULL, &e);
	return sp_out_ok(NULL, json_pack("{s:s, s:s, s:b}", "node", name,
	    "state", state, "changed", changed));
}

static int
forget(struct sp_ctx *x, const char *name)
{
	struct sp_err e;

	if (sp_name_check("node", name, &e) == -1 ||
	    sp_db_node_forget(x->db, name, &e) == -1)
		return sp_out_fail(NULL, &e);
	return sp_out_ok(NULL, json_pack("{s:s, s:b}", "node", name, "forgotten",
	    1));
}

static int
beat(struct sp_ctx *x)
{
	struct sp_node_row n;
	struct sp_err e;
	json_t *o;
	int lease;

	if ((lease = sp_node_lease_s(&e)) == -1 ||
	    sp_node_beat(x, lease, &n, &e) == -1)
		return sp_out_fail(NULL, &e);
	o = node_json(x->db, &n, &e);
	sp_db_node_release(&n);
	if (o == NULL)
		return sp_out_fail(NULL, &e);
	return sp_out_ok(NULL, o);
}

int
main(int argc, char *argv[])
{
	const char *verb, *name;
	struct sp_ctx x;
	struct sp_err e;
	int rc;

	sp_cli_init(argc, argv, usage);
	if (argc < 2 || argc > 3)
		usage();
	verb = argv[1];
	name = argc == 3 ? argv[2] : NULL;
	if (strcmp(verb, "ls") != 0 && strcmp(verb, "drain") != 0 &&
	    strcmp(verb, "ready") != 0 && strcmp(verb, "forget") != 0 &&
	    strcmp(verb, "beat") != 0)
		usage();
	if ((strcmp(verb, "forget") == 0 && name == NULL) ||
	    (strcmp(verb, "beat") == 0 && name != NULL))
		usage();
	if (sp_ctx_open(&x, 0, &e) == -1)
		return sp_out_fail(NULL, &e);
	if (name == NULL)
		name = strcmp(verb, "ls") == 0 ? NULL : x.conf.node;
	if (strcmp(verb, "ls") == 0)
		rc = ls(&x, name);
	else if (strcmp(verb, "drain") == 0)
		rc = set_state(&x, name, "draining");
	else if (strcmp(verb, "ready") == 0)
		rc = set_state(&x, name, "ready");
	else if (strcmp(verb, "forget") == 0)
		rc = forget(&x, name);
	else
		rc = beat(&x);
	sp_ctx_close(&x);
	return rc;
}
