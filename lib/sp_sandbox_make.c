/*
 * sp_sandbox_make: a new sandbox's VM from a subvolume (a template, its
 * checkpoint, a snapshot), what the host tells a new guest (its identity and
 * the time), and taking a sandbox apart again.  The operations on whole
 * sandboxes (sp_sandbox.c), the pool's claims (sp_pool_claim.c), snapshots
 * and suspend are built on it; it uses none of them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sp_sandbox.h"

static int
write_json(const char *path, json_t *j, struct sp_err *e)
{
	char *s;
	int rc;

	if ((s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER)) == NULL)
		return sp_err_set(e, SP_E_INTERNAL, 0, "json_dumps");
	rc = sp_path_replace_text(path, s, e);
	free(s);
	return rc;
}

static int64_t
realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Tells the new guest who it is: its id (also its host name), its labels, a
 * fresh seed for its random generator, and the time.  A guest restored from
 * a checkpoint would otherwise draw the same random bytes as every other
 * copy of it, and live at the time the checkpoint was taken (TLS refuses
 * certificates "not yet valid").
 */
#define IDENTITY_MS	10000
#define GROW_MS		120000	/* ext4 grows a block group at a time */

/*
 * Sends req (taken) to the guest as one call and waits for its EXIT.  The
 * ops sent here (identity, clock) set a state, and setting it twice does no
 * harm: req goes with the hello, which saves the claim a turn of the guest
 * (~1-2 ms under TCG).  With keep, the channel stays open in *keep when the
 * op succeeded, for a call after it (a create's first command).  With
 * first too, that call is sent once the hello is answered, before the op
 * is (*sent then says so): the guest goes from the op to the command
 * without waiting for us, and runs it only after an identity that took.
 * With with_hello (the daemon is known to take it), it goes in the
 * hello's own write, which saves the guest another turn; a hello not
 * answered is then not said again (the command must not run twice).
 */
static int
guest_op(struct sp_ctx *x, const char *id, json_t *req, int ms,
    struct sp_chan **keep, const struct sp_exec *first, int with_hello,
    int *sent, struct sp_err *e)
{
	const struct sp_exec *early;
	struct sp_chan *c = NULL;
	struct sp_frame f;
	uint32_t stream;
	int rc = -1, r;

	if (req == NULL)
		return sp_err_set(e, SP_E_INTERNAL, 0, "json_pack");
	early = keep != NULL && with_hello ? first : NULL;
	if (sp_chan_open_req_first(&c, x->conf.run, id, ms, req,
	    &stream, early, sent, e) == -1)
		goto out;
	if (keep != NULL && first != NULL && early == NULL) {
		r = sp_chan_exec_ahead(c, first, e);
		*sent = r != 1;
		if (r == -1)
			goto out;
	}
	if (sp_chan_recv(c, &f, ms, e) == -1)
		goto out;
	if (f.type == SP_FR_ERROR) {
		sp_chan_error_frame(&f, e);
		/* The guest refuses a call sent ahead of a failed op. */
		if (sent != NULL && f.stream == stream)
			*sent = 0;
	} else if (f.type != SP_FR_EXIT || f.stream != stream)
		sp_err_set(e, SP_E_PROTOCOL, 0, "%s: unexpected answer",
		    json_string_value(json_object_get(req, "op")));
	else
		rc = 0;
out:
	json_decref(req);
	if (rc == 0 && keep != NULL)
		*keep = c;
	else
		sp_chan_close(c);
	return rc;
}

int
sp_sandbox_identify(struct sp_ctx *x, const char *id, json_t *labels, json_t *env,
    struct sp_chan **keep, const struct sp_exec *first, int with_hello,
    int *sent, struct sp_err *e)
{
	unsigned char seed[32];
	char hex[65];
	json_t *req;
	size_t i;

	if (getrandom(seed, sizeof seed, 0) != (ssize_t)sizeof seed)
		return sp_err_sys(e, SP_E_INTERNAL, "getrandom");
	for (i = 0; i < sizeof seed; i++)
		snprintf(hex + 2 * i, 3, "%02x", seed[i]);
	explicit_bzero(seed, sizeof seed);
	req = json_pack("{s:s, s:s, s:s, s:s, s:O, s:O, s:I}", "op", "identity",
	    "id", id, "hostname", id, "seed", hex, "labels", labels ? labels :
	    json_object(), "env", env ? env : json_array(), "time_ns",
	    (json_int_t)realtime_ns());
	explicit_bzero(hex, sizeof hex);
	/* The seed is fresh entropy for the guest, not a secret kept: its copy
	 * inside jansson goes with the object (the host is trusted memory). */
	return guest_op(x, id, req, IDENTITY_MS, keep, first, with_hello, sent,
	    e);
}

int
sp_sandbox_hand_identity(struct sp_ctx *x, const char *id, json_t *labels,
    json_t *env, struct sp_err *e)
{
	return sp_sandbox_identify(x, id, labels, env, NULL, NULL, 0, NULL, e);
}

/* A guest's clock stands still while its VM is paused: set it again. */
int
sp_sandbox_sync_clock(struct sp_ctx *x, const char *id, struct sp_err *e)
{
	return guest_op(x, id, json_pack("{s:s, s:I}", "op", "clock", "time_ns",
	    (json_int_t)realtime_ns()), IDENTITY_MS, NULL, NULL, 0, NULL, e);
}

#define QUIET_EXEC_MS	60000	/* then SIGKILL: no wait without an end */

int
sp_sandbox_exec_quiet(struct sp_ctx *x, const char *id, char *argv[],
    int open_ms, int exec_ms, int *status, struct sp_err *e)
{
	struct sp_exec xr = { .argv = argv, .in_fd = -1,
	    .timeout_ms = exec_ms };
	struct sp_chan *c;
	int null, rc;

	if ((null = open("/dev/null", O_WRONLY | O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_IO, "open /dev/null");
	xr.out_fd = xr.err_fd = null;
	rc = sp_chan_open(&c, x->conf.run, id, open_ms, e);
	if (rc == 0) {
		rc = sp_chan_exec(c, &xr, status, e);
		sp_chan_close(c);
	}
	close(null);
	return rc;
}

/* Undoes a half-made create, whose lock it holds; errors here are
 * secondary to the first. */
static void
discard_locked(struct sp_ctx *x, const char *id)
{
	struct sp_err ignored;

	sp_sandbox_discard(x, id, &ignored);
}

int
sp_sandbox_teardown(struct sp_ctx *x, const char *id, int *existed,
    struct sp_err *e)
{
	char dir[SP_PATH_MAX], run[SP_PATH_MAX], tmp[SP_PATH_MAX];
	char dom[SP_ID_LEN + 4], vstate[16];

	if (sp_ctx_virt(x, e) == -1 ||
	    sp_sandbox_dir(x, id, dir, sizeof dir, e) == -1 ||
	    sp_sandbox_run_dir(x, id, run, sizeof run, e) == -1 ||
	    sp_path_fmt(tmp, sizeof tmp, e, "%s/sandboxes/.%s.rollback",
	    x->conf.root, id) == -1)
		return -1;
	sp_sandbox_domain(id, dom);
	if (sp_virt_state(x->virt, dom, vstate, e) == -1)
		return -1;
	if (strcmp(vstate, "absent") != 0)
		*existed = 1;
	sp_crashpoint("remove-after-mark");
	if (sp_virt_destroy(x->virt, dom, e) == -1 ||
	    sp_virt_undefine(x->virt, dom, e) == -1)
		return -1;
	sp_jail_release(x, id);
	sp_crashpoint("remove-after-vm");
	if (sp_subvol_exists(dir))
		*existed = 1;
	if (sp_subvol_delete(dir, e) == -1 || sp_subvol_delete(tmp, e) == -1)
		return -1;
	return sp_jail_run_remove(x, id, run, e);
}

int
sp_sandbox_forget(struct sp_ctx *x, const char *id, struct sp_err *e)
{
	int removed;

	/* Its egress policy (space-egress) goes with it. */
	if (sp_egress_policy_remove(x->conf.root, SP_EGRESS_SANDBOX, id,
	    &removed, e) == -1)
		return -1;
	/* So do its credentials (space-cred) and its rate state. */
	if (sp_cred_forget_sandbox(x->conf.root, id, (int64_t)time(NULL),
	    e) == -1)
		return -1;
	/* And its inbound ports (space-port): the gateway stops listening. */
	if (sp_port_forget(x->conf.root, id, e) == -1)
		return -1;
	/* Its volumes stay; their mounts in it go. */
	if (sp_volume_forget(x, id, e) == -1)
		return -1;
	return sp_db_sandbox_delete(x->db, id, e);
}

int
sp_sandbox_discard(struct sp_ctx *x, const char *id, struct sp_err *e)
{
	struct sp_sandbox_row row;
	struct sp_err ge;
	int existed = 0;

	/* Marked destroyed first, as a removal does: a racing command then
	 * fails cleanly. */
	if (sp_db_sandbox_get(x->db, id, &row, &ge) == 0) {
		if (row.state != SP_ST_DESTROYED &&
		    sp_db_transition(x->db, id, SP_ST_DESTROYED, -1, NULL,
		    e) == -1) {
			sp_db_row_release(&row);
			return -1;
		}
		sp_db_row_release(&row);
	} else if (ge.code != SP_E_NOT_FOUND) {
		*e = ge;
		return -1;
	}
	if (sp_sandbox_teardown(x, id, &existed, e) == -1)
		return -1;
	return sp_sandbox_forget(x, id, e);
}

/* A placed create that failed: what it made goes, and its row stays,
 * failed, for whoever asked to see why (the wish's error). */
static void
placed_failed(struct sp_ctx *x, const char *id)
{
	struct sp_err ignored;
	int existed;

	sp_sandbox_teardown(x, id, &existed, &ignored);
	sp_db_transition(x->db, id, SP_ST_FAILED, -1, NULL, &ignored);
}

int
sp_sandbox_make_new(struct sp_ctx *x, const struct sp_create_req *r,
    const struct sp_template_row *t, int64_t t0,
    void (*prepare)(struct sp_ctx *, const char *), json_t **out,
    struct sp_err *e)
{
	char tpath[SP_PATH_MAX], ckpt[SP_PATH_MAX], ref[2 * SP_NAME_MAX + 2];
	char id[SP_ID_LEN + 1];
	struct sp_ckpt_info ci;
	struct sp_make m;
	struct sp_err ignored;
	int warm;

	if (sp_ctx_virt(x, e) == -1)
		return -1;
	if (sp_template_path(x->conf.root, t, tpath, sizeof tpath, e) == -1 ||
	    sp_ckpt_path(x->conf.root, t, ckpt, sizeof ckpt, e) == -1)
		return -1;
	if (!sp_subvol_exists(tpath))
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "template %s@%.12s is in the DB "
		    "but not on this node (%s)", t->name, t->digest, tpath);
	/* The template's booted checkpoint, when it was booted as asked. */
	warm = !r->no_checkpoint && sp_subvol_exists(ckpt) &&
	    sp_ckpt_read(ckpt, &ci, &ignored) == 0 &&
	    ci.memory_mib == r->memory_mib && ci.vcpus == r->vcpus &&
	    sp_ckpt_current(ckpt, &ignored) == 1;
	snprintf(ref, sizeof ref, "%s@%s", t->name, t->digest);
	m = (struct sp_make){
		.src = warm ? ckpt : tpath, .saved = warm ? &ci : NULL,
		.template = ref, .memory_mib = r->memory_mib, .vcpus = r->vcpus,
		.disk_bytes = (int64_t)r->disk_gb * SP_GIB,
		.cpu_pct = r->cpu_pct,
		.labels = r->labels, .env = r->env,
		.pool = r->pod ? t->name : NULL,
		.ready_timeout_ms = r->ready_timeout_ms,
		.prepare = r->pod ? prepare : NULL,
		.placed_id = r->placed_id,
		.name = r->name, .request_id = r->request_id,
	};
	if (sp_sandbox_make(x, &m, id, e) == -1)
		return -1;
	*out = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "id", id, "state",
	    r->pod ? "paused" : "running", "template", ref, "virt",
	    x->virt_type, "path", warm ? "checkpoint" : "cold", "create_ms",
	    (json_int_t)(sp_clock_ms() - t0));
	return 0;
}


/*
 * A disk larger than its source's: QEMU grows the file (libvirt's block
 * resize, which tells the guest kernel), then the guest grows its ext4
 * root into it online (the daemon's disk-grow).  The filesystem's size is
 * the sandbox's disk quota: writing past it is ENOSPC in the guest, and the
 * file, sparse, costs the host only what was written.  Snapshots, forks,
 * rollbacks and suspends copy the file and so keep the size.  size is the
 * file's as the sandbox got it: by now the directory is its jail's alone.
 */
static int
grow_disk(struct sp_ctx *x, const char *id, const char *dom, off_t size,
    int64_t bytes, struct sp_err *e)
{
	if (size < bytes &&
	    sp_virt_block_resize(x->virt, dom, "vda", (uint64_t)bytes, e) == -1)
		return -1;
	return guest_op(x, id, json_pack("{s:s, s:I}", "op", "disk-grow",
	    "bytes", (json_int_t)bytes), GROW_MS, NULL, NULL, 0, NULL, e);
}

int
sp_sandbox_make(struct sp_ctx *x, const struct sp_make *m,
    char id[SP_ID_LEN + 1], struct sp_err *e)
{
	char dir[SP_PATH_MAX], run[SP_PATH_MAX];
	struct sp_vm_files f;
	char p[SP_PATH_MAX], dom[SP_ID_LEN + 4], *xml = NULL, *labels = NULL;
	char *envtext = NULL, uuid[37];
	struct sp_sandbox_row row = { 0 };
	struct sp_vm_spec spec;
	struct sp_volume_plug plugs[SP_VOLUMES_MAX];
	struct sp_vm_volume vols[SP_VOLUMES_MAX];
	int nvols = 0;
	struct sp_vm_layout l;
	struct sp_jail jail;
	struct stat st = { 0 };
	json_t *meta = NULL;
	int rc = -1, inserted = 0, lock = -1;

	if (sp_ctx_virt(x, e) == -1)
		return -1;
	if (m->placed_id != NULL)
		snprintf(row.id, sizeof row.id, "%s", m->placed_id);
	else if (sp_id_new(row.id, e) == -1)
		return -1;
	sp_virt_boot_layout(&l);	/* a restore reads its own */
	if (sp_sandbox_dir(x, row.id, dir, sizeof dir, e) == -1 ||
	    sp_sandbox_run_dir(x, row.id, run, sizeof run, e) == -1 ||
	    sp_vm_files(dir, &f, e) == -1 || sp_ckpt_uuid_new(uuid, e) == -1)
		return -1;
	labels = m->labels ? json_dumps(m->labels, JSON_COMPACT | JSON_SORT_KEYS) :
	    strdup("{}");
	envtext = m->env ? json_dumps(m->env, JSON_COMPACT) : strdup("[]");
	if (labels == NULL || envtext == NULL) {
		sp_err_set(e, SP_E_INTERNAL, 0, "out of memory");
		goto out;
	}
	/* The row comes first, in state creating, so a crash leaves a trace. */
	row.state = SP_ST_CREATING;
	snprintf(row.template, sizeof row.template, "%s", m->template);
	snprintf(row.node, sizeof row.node, "%s", x->conf.node);
	row.created = (int64_t)time(NULL);
	row.memory_mib = m->memory_mib;
	row.vcpus = m->vcpus;
	row.disk_gb = (int)(m->disk_bytes / SP_GIB);
	row.cpu_pct = m->cpu_pct;
	row.labels = labels;
	row.env = envtext;
	snprintf(row.name, sizeof row.name, "%s", m->name ? m->name : "");
	snprintf(row.request_id, sizeof row.request_id, "%s", m->request_id ?
	    m->request_id : "");
	if (sp_sandbox_lock(x, row.id, 1, &lock, e) == -1)
		goto out;
	if (m->placed_id == NULL && sp_db_sandbox_insert(x->db, &row, e) == -1)
		goto out;
	inserted = 1;
	/* A pod is one from its birth, so it never lists as a sandbox. */
	if (m->pool != NULL && sp_db_pod_mark(x->db, row.id, m->pool, e) == -1)
		goto out;
	sp_crashpoint("create-after-row");
	if (sp_subvol_snapshot(m->src, dir, 0, e) == -1 ||
	    sp_jail_disk_limit(x, dir, m->disk_bytes, e) == -1)
		goto out;
	if (m->disk_bytes > 0 && stat(f.disk, &st) == -1) {
		sp_err_sys(e, SP_E_IO, "%s", f.disk);
		goto out;
	}
	sp_crashpoint("create-after-snapshot");
	sp_sandbox_domain(row.id, dom);
	if (m->saved != NULL) {
		if (sp_ckpt_layout(f.sav, &l, e) == -1)
			goto out;
	} else
		unlink(f.sav);	/* a disk snapshot of a checkpoint has one */
	/* Its jail's uid, then its files beside its disk while the
	 * directory is still its maker's, then the directory its jail's. */
	if (sp_jail_get(x, row.id, &jail, e) == -1)
		goto out;
	/* A checkpoint with volumes plugged: read-only ones are shared. */
	if (m->saved != NULL && sp_volume_restore(x, row.id, dir, jail.uid, 1,
	    plugs, SP_VOLUMES_MAX, &nvols, e) == -1)
		goto out;
	spec = (struct sp_vm_spec){
		.name = dom, .uuid = uuid, .memory_mib = m->memory_mib,
		.vcpus = m->vcpus,
		.kernel = f.kernel, .initrd = f.initrd, .cmdline = NULL,
		.disk = f.disk, .chan_dir = run, .nports = l.nports,
		.virt_type = x->virt_type, .shared_vectors = l.shared_vectors,
		.no_egress = !l.egress, .balloon = l.balloon,
		.cpu_quota_pct = m->cpu_pct,
	};
	sp_volume_spec(&spec, plugs, nvols, vols);
	if (sp_jail_spec(x, &jail, &spec, e) == -1 ||
	    sp_virt_domain_xml(&spec, &xml, e) == -1)
		goto out;
	if (sp_path_fmt(p, sizeof p, e, "%s/domain.xml", dir) == -1 ||
	    sp_path_replace_text(p, xml, e) == -1)
		goto out;
	meta = json_pack("{s:s, s:s, s:s, s:I, s:i, s:i, s:O}", "id", row.id,
	    "template", row.template, "node", row.node, "created",
	    (json_int_t)row.created, "memory_mib", row.memory_mib, "vcpus",
	    row.vcpus, "labels", m->labels ? m->labels : json_object());
	if (meta == NULL || sp_path_fmt(p, sizeof p, e, "%s/sandbox.json", dir) == -1 ||
	    write_json(p, meta, e) == -1 ||
	    sp_jail_dirs(x, &jail, dir, run, e) == -1)
		goto out;
	if (sp_virt_define(x->virt, xml, e) == -1)
		goto out;
	sp_crashpoint("create-after-define");
	if (m->saved != NULL) {
		/* The guest goes on from its checkpoint under its own name
		 * and UUID (space-noded re-identifies the image it restores
		 * itself); its memory image has done its work and need not
		 * stay in the sandbox. */
		if ((sp_virt_noded_sock(x->virt) == NULL &&
		    sp_ckpt_identify(f.sav, dom, uuid, e) == -1) ||
		    sp_virt_restore(x->virt, f.sav, xml, dom, e) == -1)
			goto out;
		unlink(f.sav);
	} else if (sp_virt_start(x->virt, dom, e) == -1)
		goto out;
	if (sp_jail_started(x, dom, e) == -1)
		goto out;
	sp_crashpoint("create-after-start");
	if (sp_chan_wait_ready(x->conf.run, row.id, m->ready_timeout_ms, e) == -1)
		goto out;
	if (m->disk_bytes > 0 && grow_disk(x, row.id, dom, st.st_size,
	    m->disk_bytes, e) == -1)
		goto out;
	if (m->pool != NULL) {
		/* A pod waits with its vCPUs stopped, for whoever claims it
		 * and tells it who it is. */
		if (m->prepare != NULL)
			m->prepare(x, row.id);
		if (sp_virt_pause(x->virt, dom, e) == -1 ||
		    sp_db_transition(x->db, row.id, SP_ST_PAUSED, -1, NULL, e) == -1)
			goto out;
	} else if (sp_sandbox_hand_identity(x, row.id, m->labels, m->env, e) == -1 ||
	    sp_db_transition(x->db, row.id, SP_ST_RUNNING, -1, NULL, e) == -1)
		goto out;
	memcpy(id, row.id, SP_ID_LEN + 1);
	rc = 0;
out:
	if (rc == -1 && inserted && m->placed_id == NULL)
		discard_locked(x, row.id);
	else if (rc == -1 && inserted)
		placed_failed(x, row.id);
	sp_sandbox_unlock(lock);
	json_decref(meta);
	free(xml);
	free(labels);
	free(envtext);
	return rc;
}
