/*
 * sp_reconcile: one pass of the node-local reconcile loop (design.md).
 * The DB row says what was last commanded; the node (libvirt, btrfs) says
 * what is.  A command that died halfway left its sandbox in a transient
 * state, or its VM where the row does not say: this pass finishes or rolls
 * back the one and drives the other to the row.  It never touches a sandbox
 * whose lock a live command holds, nor anything outside this node's root.
 * Then it carries out the lifetimes that ran out (sp_expiry) and the wishes
 * other nodes recorded for this node's sandboxes (sp_reconcile_wishes),
 * which space-reconcile --listen also does the moment one is recorded.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_sandbox.h"

#define READY_PROBE_MS	3000

struct pass {
	struct sp_ctx *x;
	int (*fn)(json_t *, void *);
	void *arg;
	int failed;
};

/* Tells one action; on failure with the error, and the pass goes on. */
static void
tell(struct pass *p, const char *id, const char *action, const char *from,
    int rc, const struct sp_err *e)
{
	json_t *o;

	o = json_pack("{s:s, s:b, s:s, s:s}", "id", id, "ok", rc == 0, "action",
	    action, "from", from);
	/* A repair of a sandbox is an event (sp_event.c). */
	if (id[0] != '\0') {
		char what[48];

		snprintf(what, sizeof what, "reconcile.%s", action);
		sp_event_note(p->x->db, what, id, rc == 0 ? NULL :
		    sp_code_name(e->code), -1, rc == 0 ? NULL : json_pack(
		    "{s:s}", "msg", e->msg));
	}
	if (rc != 0) {
		json_object_set_new(o, "error", json_string(sp_code_name(e->code)));
		json_object_set_new(o, "msg", json_string(e->msg));
		p->failed = 1;
	}
	p->fn(o, p->arg);
}

static int
is_off(const char *vstate)
{
	return strcmp(vstate, "shutoff") == 0 || strcmp(vstate, "absent") == 0 ||
	    strcmp(vstate, "crashed") == 0;
}

/* A pod the scheduler claimed for a create --anywhere (sp_schedule.c). */
static int
pod_taken(const struct sp_sandbox_row *r)
{
	json_t *j = r->placed ? json_loads(r->placed, 0, NULL) : NULL;
	int taken = json_is_true(json_object_get(j, "claimed"));

	json_decref(j);
	return taken;
}

/* A sandbox left in creating by a dead create: keep it when its guest
 * answers, else remove what was made. */
static void
fix_creating(struct pass *p, const struct sp_sandbox_row *r, const char *vstate)
{
	const char *id = r->id;
	json_t *labels, *env;
	struct sp_err e;
	int existed, rc;

	/* Placed here by the scheduler and not made yet, or a pod it took
	 * for a create and not woken yet: the wish is carried out below
	 * (sp_reconcile_wishes). */
	if (strcmp(r->want, "running") == 0 && (strcmp(vstate, "absent") == 0 ||
	    (pod_taken(r) && strcmp(vstate, "paused") == 0)))
		return;
	/* A pod half made is simply made again by the next fill. */
	if (!r->pod && strcmp(vstate, "running") == 0 &&
	    sp_chan_wait_ready(p->x->conf.run, id, READY_PROBE_MS, &e) == 0) {
		/* What the dead create did not do yet: tell the guest who
		 * it is (a checkpoint's copies share their RNG state). */
		labels = json_loads(r->labels ? r->labels : "{}", 0, NULL);
		env = json_loads(r->env ? r->env : "[]", 0, NULL);
		rc = sp_sandbox_hand_identity(p->x, id, labels, env, &e);
		json_decref(labels);
		json_decref(env);
		if (rc == 0)
			rc = sp_db_transition(p->x->db, id, SP_ST_RUNNING, -1,
			    NULL, &e);
		if (rc == 0) {
			tell(p, id, "finished-create", "creating", rc, &e);
			return;
		}
	}
	rc = sp_sandbox_remove(p->x, id, &existed, &e);
	tell(p, id, "rolled-back-create", "creating", rc, &e);
}

/*
 * A failed sandbox comes back from its newest full checkpoint, disk rolled
 * back to the same instant; one cut short in recovering finishes its move.
 * Without a checkpoint it stays failed, and nothing is told.
 */
static void
recover(struct pass *p, const char *id)
{
	char snap[SP_ID_LEN + 1] = "";
	struct sp_sandbox_row r;
	struct sp_err e;
	const char *from;
	json_t *o;
	int rc;

	if (sp_db_sandbox_get(p->x->db, id, &r, &e) == -1)
		return;
	from = sp_state_name(r.state);
	rc = sp_snap_recover_locked(p->x, &r, snap, &e);
	if (rc == -1 && r.state == SP_ST_FAILED && e.code == SP_E_NOT_FOUND) {
		sp_db_row_release(&r);
		return;
	}
	o = json_pack("{s:s, s:b, s:s, s:s, s:s}", "id", id, "ok", rc == 0,
	    "action", "recovered", "from", from, "snap", snap);
	if (rc == -1) {
		json_object_set_new(o, "error", json_string(sp_code_name(e.code)));
		json_object_set_new(o, "msg", json_string(e.msg));
		p->failed = 1;
	}
	p->fn(o, p->arg);
	sp_db_row_release(&r);
}

/* 1 when this node's fence paused id's VM; with clear, the mark goes.  The
 * mark is in $SPACE_RUN/pods, where space writes (a VM's run directory is
 * its jail's). */
static int
fenced(struct sp_ctx *x, const char *id, int clear)
{
	char mark[SP_PATH_MAX];
	struct sp_err ignored;

	if (sp_pod_file(x->conf.run, id, SP_POD_FENCED, mark, sizeof mark,
	    &ignored) == -1)
		return 0;
	if (clear)
		return unlink(mark) == 0;
	return access(mark, F_OK) == 0;
}

/*
 * This node's lease lapsed and its sandboxes were marked lost, but this one
 * is still here (no backup, or not restored elsewhere yet): the node is back
 * and takes it, as the VM shows it, on the generation read; a node that
 * restored it first wins, and this one's VM goes as a stale copy (orphans).
 */
static void
reclaim(struct pass *p, const struct sp_sandbox_row *r, const char *vstate)
{
	enum sp_state to = SP_ST_FAILED;
	char dom[SP_ID_LEN + 4];
	struct sp_err e;
	int rc;

	/* A VM that is off: whether it was stopped, or died with the node,
	 * the record no longer says; failed it is (space-stop, then
	 * space-start, brings it back from its disk). */
	if (strcmp(vstate, "running") == 0)
		to = SP_ST_RUNNING;
	else if (strcmp(vstate, "paused") == 0)
		/* Paused by this node's fence: it was running. */
		to = fenced(p->x, r->id, 0) ? SP_ST_RUNNING : SP_ST_PAUSED;
	rc = sp_db_transition(p->x->db, r->id, to, r->gen, NULL, &e);
	if (rc == 0 && to == SP_ST_RUNNING && strcmp(vstate, "paused") == 0) {
		sp_sandbox_domain(r->id, dom);
		rc = sp_virt_resume(p->x->virt, dom, &e);
		fenced(p->x, r->id, 1);
	}
	tell(p, r->id, "reclaimed", "lost", rc, &e);
}

/* A restore cut short here is finished here. */
static void
restore_here(struct pass *p, const struct sp_sandbox_row *r)
{
	struct sp_err e;
	json_t *o = NULL;
	int rc;

	/* One placed here to run is a wish (sp_reconcile_wishes). */
	if (r->state == SP_ST_SUSPENDED)
		return;
	rc = sp_restore_locked(p->x, r->id, &o, &e);
	json_decref(o);
	tell(p, r->id, "restored", sp_state_name(r->state), rc, &e);
}

static void
finish_suspend(struct pass *p, const char *id)
{
	struct sp_err e;
	json_t *o = NULL;
	int rc;

	rc = sp_suspend(p->x, id, 0, &o, &e);
	json_decref(o);
	tell(p, id, "finished-suspend", "suspending", rc, &e);
}

/* Drives the VM to what the row says, for the states a verb claims first. */
static void
fix_live(struct pass *p, const struct sp_sandbox_row *r, const char *vstate)
{
	char dom[SP_ID_LEN + 4];
	const char *from = sp_state_name(r->state);
	struct sp_err e;
	int rc;

	sp_sandbox_domain(r->id, dom);
	if (r->state == SP_ST_STOPPED) {
		if (!is_off(vstate)) {
			rc = sp_virt_destroy(p->x->virt, dom, &e);
			tell(p, r->id, "stopped-vm", from, rc, &e);
		}
		return;
	}
	if (is_off(vstate)) {
		/* The VM is gone while the row says it lives: QEMU died. */
		rc = sp_db_transition(p->x->db, r->id, SP_ST_FAILED, r->gen, NULL, &e);
		tell(p, r->id, "marked-failed", from, rc, &e);
		if (rc == 0)
			recover(p, r->id);
		return;
	}
	if (r->state == SP_ST_RUNNING && strcmp(vstate, "paused") == 0) {
		rc = sp_virt_resume(p->x->virt, dom, &e);
		if (rc == 0)
			fenced(p->x, r->id, 1);
		tell(p, r->id, "resumed-vm", from, rc, &e);
	} else if (r->state == SP_ST_PAUSED && strcmp(vstate, "running") == 0) {
		rc = sp_virt_pause(p->x->virt, dom, &e);
		tell(p, r->id, "paused-vm", from, rc, &e);
	}
}

static void
one(struct pass *p, const char *id)
{
	char dom[SP_ID_LEN + 4], vstate[16];
	struct sp_sandbox_row r;
	struct sp_err e;
	int fd, existed, rc;

	/* A live command holds the lock: its sandbox is not ours to fix. */
	if (sp_sandbox_lock(p->x, id, 0, &fd, &e) == -1)
		return;
	if (sp_db_sandbox_get(p->x->db, id, &r, &e) == -1) {
		sp_sandbox_unlock(fd);
		return;
	}
	sp_sandbox_domain(id, dom);
	if (sp_virt_state(p->x->virt, dom, vstate, &e) == -1) {
		tell(p, id, "observe", sp_state_name(r.state), -1, &e);
		goto out;
	}
	switch (r.state) {
	case SP_ST_CREATING:
		/* Removing takes the lock itself. */
		sp_sandbox_unlock(fd);
		fd = -1;
		fix_creating(p, &r, vstate);
		break;
	case SP_ST_DESTROYED:
		sp_sandbox_unlock(fd);
		fd = -1;
		rc = sp_sandbox_remove(p->x, id, &existed, &e);
		tell(p, id, "finished-remove", "destroyed", rc, &e);
		break;
	case SP_ST_RUNNING:
	case SP_ST_PAUSED:
	case SP_ST_STOPPED:
		fix_live(p, &r, vstate);
		break;
	case SP_ST_FAILED:
	case SP_ST_RECOVERING:
		recover(p, id);
		break;
	case SP_ST_SUSPENDED:
	case SP_ST_RESTORING:
		restore_here(p, &r);
		break;
	case SP_ST_SUSPENDING:
		/* A suspend cut short (its command killed, or the DB gone
		 * under it) is finished, as running it again would; it takes
		 * the lock itself. */
		sp_sandbox_unlock(fd);
		fd = -1;
		finish_suspend(p, id);
		break;
	case SP_ST_LOST:
		/* One the scheduler placed here to restore is a wish. */
		if (r.want[0] == '\0')
			reclaim(p, &r, vstate);
		break;
	case SP_ST__COUNT:
		break;
	}
out:
	sp_db_row_release(&r);
	sp_sandbox_unlock(fd);
}

/* A set of ids: the first `sorted` of them sorted (ids_sort), those added
 * since not.  Looking one up is a binary search and a look at the few added
 * since: a pass over n sandboxes is not n times n. */
struct ids {
	char (*v)[SP_ID_LEN + 1];
	size_t n, cap, sorted;
};

static int
add_id(struct ids *s, const char *id)
{
	void *nv;

	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		if ((nv = realloc(s->v, s->cap * sizeof *s->v)) == NULL)
			return -1;
		s->v = nv;
	}
	memcpy(s->v[s->n++], id, SP_ID_LEN + 1);
	return 0;
}

static int
cmp_id(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Sorts s, each id once. */
static void
ids_sort(struct ids *s)
{
	size_t i, k = 0;

	if (s->n > 0)
		qsort(s->v, s->n, sizeof *s->v, cmp_id);
	for (i = 0; i < s->n; i++)
		if (k == 0 || strcmp(s->v[k - 1], s->v[i]) != 0) {
			if (k != i)
				memcpy(s->v[k], s->v[i], sizeof *s->v);
			k++;
		}
	s->n = s->sorted = k;
}

static int
has_id(const struct ids *s, const char *id)
{
	size_t i;

	if (s->sorted > 0 && bsearch(id, s->v, s->sorted, sizeof *s->v,
	    cmp_id) != NULL)
		return 1;
	for (i = s->sorted; i < s->n; i++)
		if (strcmp(s->v[i], id) == 0)
			return 1;
	return 0;
}

static int
collect_row(const struct sp_sandbox_row *r, void *arg)
{
	struct pass *p = ((void **)arg)[0];
	struct ids *s = ((void **)arg)[1];

	if (strcmp(r->node, p->x->conf.node) != 0)
		return 0;
	return add_id(s, r->id);
}

struct orphan_walk {
	struct pass *p;
	const struct ids *known;
	struct ids found;
};

/* A domain sp-<id> with no row, whose disk lies under this root (others
 * belong to another node sharing this libvirt). */
static int
orphan_domain(const char *name, void *arg)
{
	struct orphan_walk *w = arg;
	char needle[SP_PATH_MAX], *xml = NULL;
	const char *id = name + 3;
	struct sp_err e;

	if (strncmp(name, "sp-", 3) != 0 || !sp_id_valid(id) ||
	    has_id(w->known, id) || has_id(&w->found, id))
		return 0;
	if (sp_path_fmt(needle, sizeof needle, &e, "%s/sandboxes/%s/",
	    w->p->x->conf.root, id) == -1 ||
	    sp_virt_xml(w->p->x->virt, name, &xml, &e) == -1)
		return 0;
	if (strstr(xml, needle) != NULL)
		add_id(&w->found, id);
	free(xml);
	return 0;
}

/*
 * A sandbox another node holds now (restored there) can leave a copy here:
 * a --keep-local checkpoint, a VM a crash kept from being released.  This
 * node's copy goes; the row, and a domain of that name whose disk lies
 * under another root, stay.
 */
static int
release_left(struct sp_ctx *x, const char *id, struct sp_err *e)
{
	char dir[SP_PATH_MAX], tmp[SP_PATH_MAX], run[SP_PATH_MAX];
	char dom[SP_ID_LEN + 4], needle[SP_PATH_MAX], *xml = NULL;
	struct sp_err absent;
	int ours;

	sp_sandbox_domain(id, dom);
	if (sp_sandbox_dir(x, id, dir, sizeof dir, e) == -1 ||
	    sp_sandbox_run_dir(x, id, run, sizeof run, e) == -1 ||
	    sp_path_fmt(tmp, sizeof tmp, e, "%s/sandboxes/.%s.rollback",
	    x->conf.root, id) == -1 ||
	    sp_path_fmt(needle, sizeof needle, e, "%s/", dir) == -1)
		return -1;
	ours = sp_virt_xml(x->virt, dom, &xml, &absent) == 0 &&
	    strstr(xml, needle) != NULL;
	free(xml);
	if (ours && (sp_virt_destroy(x->virt, dom, e) == -1 ||
	    sp_virt_undefine(x->virt, dom, e) == -1))
		return -1;
	if (ours)
		sp_jail_release(x, id);
	if (sp_subvol_delete(dir, e) == -1 || sp_subvol_delete(tmp, e) == -1 ||
	    sp_snap_remove_all(x, id, e) == -1)
		return -1;
	return ours ? sp_jail_run_remove(x, id, run, e) : 0;
}

static void
orphans(struct pass *p, const struct ids *known)
{
	struct orphan_walk w = { p, known, { 0 } };
	struct sp_sandbox_row r;
	char dir[SP_PATH_MAX];
	struct dirent *d;
	struct sp_err e;
	size_t i;
	DIR *dp;
	int existed, rc, k, ours, fd;

	for (k = 0; k < 2; k++) {
		if (sp_path_fmt(dir, sizeof dir, &e, "%s/%s", p->x->conf.root,
		    k == 0 ? "sandboxes" : "snapshots") == -1 ||
		    (dp = opendir(dir)) == NULL)
			continue;
		while ((d = readdir(dp)) != NULL)
			if (sp_id_valid(d->d_name) && !has_id(known, d->d_name))
				add_id(&w.found, d->d_name);
		closedir(dp);
	}
	ids_sort(&w.found);
	if (sp_virt_list(p->x->virt, orphan_domain, &w, &e) == -1)
		tell(p, "", "list-domains", "", -1, &e);
	for (i = 0; i < w.found.n; i++) {
		/* What another node now runs (a restore moved it) is that
		 * node's: its row must not go with our leftovers.  A row of
		 * this node is one made since the rows were read (a create):
		 * not an orphan; nor is one a live command holds. */
		if (sp_db_sandbox_get(p->x->db, w.found.v[i], &r, &e) == 0) {
			ours = strcmp(r.node, p->x->conf.node) == 0;
			sp_db_row_release(&r);
			if (ours || sp_sandbox_lock(p->x, w.found.v[i], 0, &fd,
			    &e) == -1)
				continue;
			/* Read again under the lock: a restore here may have
			 * taken it in between. */
			if (sp_db_sandbox_get(p->x->db, w.found.v[i], &r, &e) == 0) {
				ours = strcmp(r.node, p->x->conf.node) == 0;
				sp_db_row_release(&r);
				rc = ours ? 0 : release_left(p->x, w.found.v[i], &e);
				if (!ours)
					tell(p, w.found.v[i], "released-left-behind",
					    "none", rc, &e);
			}
			sp_sandbox_unlock(fd);
			continue;
		}
		rc = sp_sandbox_remove(p->x, w.found.v[i], &existed, &e);
		tell(p, w.found.v[i], "removed-orphan", "none", rc, &e);
	}
	free(w.found.v);
}

/* A jail uid is in use while its id has a sandbox directory or a VM (a
 * template's warm one has only the VM). */
static int
jail_in_use(struct sp_ctx *x, const char *id)
{
	char dir[SP_PATH_MAX], dom[SP_ID_LEN + 4], vstate[16];
	struct sp_err e;

	if (!sp_id_valid(id))
		return 0;
	if (sp_sandbox_dir(x, id, dir, sizeof dir, &e) == -1 ||
	    sp_subvol_exists(dir))
		return 1;
	sp_sandbox_domain(id, dom);
	return sp_virt_state(x->virt, dom, vstate, &e) == -1 ||
	    strcmp(vstate, "absent") != 0;
}

int
sp_reconcile_once(struct sp_ctx *x, int (*fn)(json_t *, void *), void *arg,
    struct sp_err *e)
{
	struct pass p = { x, fn, arg, 0 };
	struct ids known = { 0 };
	void *walk[2] = { &p, &known };
	int64_t gone;
	size_t i;
	int rc, freed;

	if (sp_ctx_virt(x, e) == -1)
		return -1;
	/* Pods too: their subvolumes and VMs are not orphans. */
	if (sp_db_sandbox_each(x->db, SP_DB_WITH_PODS, collect_row, walk, e) == -1) {
		free(known.v);
		return -1;
	}
	ids_sort(&known);
	for (i = 0; i < known.n; i++) {
		one(&p, known.v[i]);
		/* A create killed while its claim was boosted left the VM's
		 * CPU weight raised: put it back. */
		if ((rc = sp_boost_repair(x->conf.run, known.v[i], e)) != 0)
			tell(&p, known.v[i], "unboosted", "boosted",
			    rc == 1 ? 0 : -1, e);
	}
	if (sp_snap_drop_unfinished(x, fn, arg, e) == -1)
		p.failed = 1;
	orphans(&p, &known);
	free(known.v);
	/* The v1 pids cgroups of VMs that ended: once a pass, not at every
	 * start (each try at one in use is a failed rmdir). */
	if (sp_jail_pids_tidy(x, e) == -1)
		tell(&p, "", "pids-sweep", "", -1, e);
	if (sp_jail_gc(x, jail_in_use, &freed, e) == -1)
		tell(&p, "", "jail-gc", "", -1, e);
	else if (freed > 0)
		tell(&p, "", "jail-uids-freed", "", 0, e);
	/* Volume subvolumes no row of this node claims: a removal cut
	 * short, a volume that moved to another node with its sandbox. */
	if (sp_volume_gc(x, &freed, e) == -1)
		tell(&p, "", "volume-gc", "", -1, e);
	else if (freed > 0)
		tell(&p, "", "volumes-removed", "", 0, e);
	/* Lifetimes that ran out: kill, pause or suspend (sp_expiry). */
	if (sp_expiry_run(x, fn, arg, e) == -1)
		p.failed = 1;
	/* The event log keeps SPACE_EVENTS_KEEP (sp_event.c). */
	if (sp_event_prune(x->db, x->conf.events_keep, &gone, e) == -1)
		tell(&p, "", "events-prune", "", -1, e);
	else if (gone > 0)
		tell(&p, "", "events-pruned", "", 0, e);
	if (sp_reconcile_wishes(x, 1, fn, arg, e) == -1)
		p.failed = 1;
	if (p.failed)
		return sp_err_set(e, SP_E_PARTIAL, 0, "some repairs failed");
	return 0;
}

/* ---- wishes: the desired state other nodes recorded (design.md) ---- */

struct wish_run {
	struct pass *p;
	char (*ids)[SP_ID_LEN + 1];
	char (*wants)[16];
	size_t n, cap;
};

static int
collect_wish(const struct sp_sandbox_row *r, void *arg)
{
	struct wish_run *w = arg;
	void *a, *b;

	if (w->n == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 16;
		a = realloc(w->ids, w->cap * sizeof *w->ids);
		if (a != NULL)
			w->ids = a;
		b = realloc(w->wants, w->cap * sizeof *w->wants);
		if (b != NULL)
			w->wants = b;
		if (a == NULL || b == NULL)
			return -1;
	}
	snprintf(w->ids[w->n], sizeof w->ids[w->n], "%s", r->id);
	snprintf(w->wants[w->n], sizeof w->wants[w->n], "%s", r->want);
	w->n++;
	return 0;
}

/*
 * Makes the sandbox the scheduler placed here, from its row: what a create
 * that died on the way here left (this is a second try) goes first.
 */
static int
create_placed(struct sp_ctx *x, const char *id, struct sp_err *e)
{
	struct sp_create_req req = { 0 };
	char dom[SP_ID_LEN + 4], vstate[16];
	struct sp_sandbox_row r;
	json_t *out = NULL;
	int rc;

	if (sp_db_sandbox_get(x->db, id, &r, e) == -1)
		return -1;
	req.template = r.template;
	req.memory_mib = r.memory_mib;
	req.vcpus = r.vcpus;
	req.disk_gb = r.disk_gb;
	req.cpu_pct = r.cpu_pct;
	req.labels = json_loads(r.labels ? r.labels : "{}", 0, NULL);
	req.env = json_loads(r.env ? r.env : "[]", 0, NULL);
	if (json_array_size(req.env) == 0) {
		json_decref(req.env);
		req.env = NULL;
	}
	req.ready_timeout_ms = READY_PROBE_MS * 60;
	req.no_pool = 1;
	req.placed_id = id;
	/* A pod taken for it: woken and told who it is, the claim's end.
	 * Gone meanwhile, or one that will not wake, it is made afresh as
	 * any placed one is. */
	sp_sandbox_domain(id, dom);
	if (pod_taken(&r) && sp_ctx_virt(x, e) == 0 &&
	    sp_virt_state(x->virt, dom, vstate, e) == 0 &&
	    strcmp(vstate, "paused") == 0 &&
	    sp_pool_claim_finish(x, id, req.labels, req.env, e) == 0)
		rc = 0;
	else
		rc = release_left(x, id, e) == -1 ? -1 :
		    sp_sandbox_create(x, &req, &out, e);
	json_decref(out);
	json_decref(req.labels);
	json_decref(req.env);
	sp_db_row_release(&r);
	return rc;
}

/* Takes id to want from where its row now is; 0 when it is there.  *did
 * names what it did, for the line. */
static int
carry_out(struct sp_ctx *x, const char *id, const char *want, const char **did,
    struct sp_err *e)
{
	struct sp_sandbox_row r;
	enum sp_state s;
	json_t *o = NULL;
	int changed, forced, existed, rc;

	*did = "removed";
	if (strcmp(want, "destroyed") == 0)
		return sp_sandbox_remove(x, id, &existed, e);
	if (sp_db_sandbox_get(x->db, id, &r, e) == -1)
		return -1;
	s = r.state;
	sp_db_row_release(&r);
	*did = "already";
	if (strcmp(sp_state_name(s), want) == 0)
		return 0;
	if (strcmp(want, "running") == 0 && s == SP_ST_CREATING) {
		*did = "created";
		return create_placed(x, id, e);
	}
	if (strcmp(want, "running") == 0) {
		*did = s == SP_ST_PAUSED ? "resumed" : s == SP_ST_STOPPED ?
		    "started" : "restored";
		if (s == SP_ST_PAUSED)
			return sp_sandbox_resume(x, id, &changed, e);
		if (s == SP_ST_STOPPED)
			return sp_sandbox_start(x, id, READY_PROBE_MS * 60, &changed,
			    e);
		if (s == SP_ST_SUSPENDED || s == SP_ST_RESTORING ||
		    s == SP_ST_LOST) {
			rc = sp_restore(x, id, NULL, &o, e);
			json_decref(o);
			return rc;
		}
	}
	*did = want;
	if (strcmp(want, "paused") == 0)
		return sp_sandbox_pause(x, id, &changed, e);
	if (strcmp(want, "stopped") == 0)
		return sp_sandbox_stop(x, id, READY_PROBE_MS * 10, &changed, &forced,
		    e);
	if (strcmp(want, "suspended") == 0) {
		rc = sp_suspend(x, id, 0, &o, e);
		json_decref(o);
		return rc;
	}
	return sp_err_set(e, SP_E_BAD_STATE, 0, "cannot take a sandbox that is "
	    "%s to %s", sp_state_name(s), want);
}

int
sp_reconcile_wishes(struct sp_ctx *x, int failed_too,
    int (*fn)(json_t *, void *), void *arg, struct sp_err *e)
{
	struct pass p = { x, fn, arg, 0 };
	struct wish_run w = { &p, NULL, NULL, 0, 0 };
	const char *did = "";
	struct sp_err we, lost;
	char *err, msg[160];
	json_t *o;
	size_t i, n;
	int rc = 0;

	if (sp_db_wishes_each(x->db, x->conf.node, failed_too, collect_wish, &w,
	    e) == -1) {
		free(w.ids);
		free(w.wants);
		return -1;
	}
	for (i = 0; i < w.n; i++) {
		if (carry_out(x, w.ids[i], w.wants[i], &did, &we) == 0 &&
		    sp_db_sandbox_wish_done(x->db, w.ids[i], w.wants[i], NULL,
		    &we) == 0) {
			tell(&p, w.ids[i], did, "wish", 0, &we);
			continue;
		}
		/* For whoever waits on it: {"error","msg"}.  A DB that is
		 * not there takes no note; the next pass tries again. */
		/* Bounded: the row keeps 255 bytes of it (want_error), and
		 * cut where no UTF-8 character is. */
		n = strlen(we.msg);
		if (n >= sizeof msg) {
			n = sizeof msg - 1;
			while (n > 0 && ((unsigned char)we.msg[n] & 0xc0) == 0x80)
				n--;
		}
		memcpy(msg, we.msg, n);
		msg[n] = '\0';
		o = json_pack("{s:s, s:s}", "error", sp_code_name(we.code), "msg",
		    msg);
		err = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (err != NULL && we.code != SP_E_DB)
			sp_db_sandbox_wish_done(x->db, w.ids[i], w.wants[i], err,
			    &lost);
		free(err);
		tell(&p, w.ids[i], did, "wish", -1, &we);
		rc = -1;
	}
	free(w.ids);
	free(w.wants);
	if (rc == -1)
		return sp_err_set(e, SP_E_PARTIAL, 0, "some wishes failed");
	return 0;
}

/* ---- fencing: a node that lost its lease stops what it runs ---- */

int
sp_reconcile_fence(struct sp_ctx *x, int (*fn)(json_t *, void *), void *arg,
    struct sp_err *e)
{
	char dir[SP_PATH_MAX], mark[SP_PATH_MAX] = "";
	char dom[SP_ID_LEN + 4], vstate[16];
	struct pass p = { x, fn, arg, 0 };
	struct dirent *d;
	struct sp_err we;
	DIR *dp;
	int rc, marked;

	if (sp_ctx_virt(x, e) == -1 ||
	    sp_path_fmt(dir, sizeof dir, e, "%s/sandboxes", x->conf.root) == -1)
		return -1;
	if ((dp = opendir(dir)) == NULL)
		return sp_err_sys(e, SP_E_IO, "%s", dir);
	while ((d = readdir(dp)) != NULL) {
		if (!sp_id_valid(d->d_name))
			continue;
		sp_sandbox_domain(d->d_name, dom);
		if (sp_virt_state(x->virt, dom, vstate, &we) == -1 ||
		    strcmp(vstate, "running") != 0)
			continue;
		/* Marked first: a pause the node did itself is undone by it.
		 * Paused even without its mark (then it stays paused until
		 * resumed by hand): no VM may run on. */
		marked = sp_pod_file(x->conf.run, d->d_name, SP_POD_FENCED,
		    mark, sizeof mark, &we) == 0 &&
		    sp_path_replace_text(mark, "", &we) == 0;
		rc = sp_virt_pause(x->virt, dom, &we);
		if (rc == 0 && !marked)
			rc = sp_err_set(&we, SP_E_IO, 0, "paused, but its mark "
			    "%s could not be made: resume it by hand", mark);
		tell(&p, d->d_name, "fenced", "running", rc, &we);
	}
	closedir(dp);
	return p.failed ? sp_err_set(e, SP_E_PARTIAL, 0, "some VMs were not "
	    "paused") : 0;
}
