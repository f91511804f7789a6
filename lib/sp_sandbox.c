/*
 * sp_sandbox: the lifecycle operations, composed from the DB, btrfs, libvirt
 * and the channel.  A sandbox is a writable btrfs snapshot of its template
 * (no bytes copied) booted as the libvirt domain sp-<id>.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sp.h"

int
sp_ctx_open(struct sp_ctx *x, int with_virt, struct sp_err *e)
{
	if (sp_ctx_open_db(x, e) == -1)
		return -1;
	if (with_virt && sp_ctx_virt(x, e) == -1) {
		sp_ctx_close(x);
		return -1;
	}
	return 0;
}

int
sp_each_sandbox(int argc, char **argv, struct sp_ctx *x, int with_virt,
    sp_item_fn fn, void *arg)
{
	struct sp_err e;
	int rc;

	if (sp_ctx_open(x, with_virt, &e) == -1)
		return sp_out_fail(NULL, &e);
	rc = sp_each(argc, argv, fn, arg);
	sp_ctx_close(x);
	return rc;
}

int
sp_ctx_virt(struct sp_ctx *x, struct sp_err *e)
{
	if (x->virt != NULL)
		return 0;
	if (sp_virt_open(&x->virt, x->conf.libvirt_uri, e) == -1)
		return -1;
	x->virt_close = sp_virt_close;
	return sp_virt_pick_type(x->virt, x->conf.virt_type, x->virt_type, e);
}

/*
 * The run dir holds the channel sockets QEMU creates; QEMU runs as libvirt's
 * unprivileged user, so that user's group may write there and nobody else.
 */
int
sp_sandbox_make_run_dir(const char *dir, struct sp_err *e)
{
	struct group *g;

	if (mkdir(dir, 0770) == -1 && errno != EEXIST)
		return sp_err_sys(e, SP_E_IO, "mkdir %s", dir);
	if ((g = getgrnam("libvirt-qemu")) != NULL && chown(dir, 0, g->gr_gid) == -1)
		return sp_err_sys(e, SP_E_IO, "chown %s", dir);
	if (chmod(dir, g != NULL ? 0770 : 0777) == -1)
		return sp_err_sys(e, SP_E_IO, "chmod %s", dir);
	return 0;
}

static int
write_file(const char *path, const char *text, struct sp_err *e)
{
	FILE *f;

	if ((f = fopen(path, "we")) == NULL)
		return sp_err_sys(e, SP_E_IO, "%s", path);
	fputs(text, f);
	if (fclose(f) == EOF)
		return sp_err_sys(e, SP_E_IO, "%s", path);
	return 0;
}

static int
write_json(const char *path, json_t *j, struct sp_err *e)
{
	char *s;
	int rc;

	if ((s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER)) == NULL)
		return sp_err_set(e, SP_E_INTERNAL, 0, "json_dumps");
	rc = write_file(path, s, e);
	free(s);
	return rc;
}

static int remove_locked(struct sp_ctx *, const char *, int *,
    struct sp_err *);

/* Undoes a half-made create (whose lock it holds); errors here are secondary
 * to the first. */
static void
unmake(struct sp_ctx *x, const char *id)
{
	struct sp_err ignored;
	int existed;

	remove_locked(x, id, &existed, &ignored);
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
#define QMP_MS		5000	/* to resume a pod through QEMU's monitor */

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
guest_op(struct sp_ctx *x, const char *id, json_t *req, struct sp_chan **keep,
    const struct sp_exec *first, int with_hello, int *sent, struct sp_err *e)
{
	const struct sp_exec *early;
	struct sp_chan *c = NULL;
	struct sp_frame f;
	uint32_t stream;
	int rc = -1, r;

	if (req == NULL)
		return sp_err_set(e, SP_E_INTERNAL, 0, "json_pack");
	early = keep != NULL && with_hello ? first : NULL;
	if (sp_chan_open_req_first(&c, x->conf.run, id, IDENTITY_MS, req,
	    &stream, early, sent, e) == -1)
		goto out;
	if (keep != NULL && first != NULL && early == NULL) {
		r = sp_chan_exec_ahead(c, first, e);
		*sent = r != 1;
		if (r == -1)
			goto out;
	}
	if (sp_chan_recv(c, &f, IDENTITY_MS, e) == -1)
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

static int
hand_identity(struct sp_ctx *x, const char *id, json_t *labels, json_t *env,
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
	return guest_op(x, id, req, keep, first, with_hello, sent, e);
}

int
sp_sandbox_hand_identity(struct sp_ctx *x, const char *id, json_t *labels,
    json_t *env, struct sp_err *e)
{
	return hand_identity(x, id, labels, env, NULL, NULL, 0, NULL, e);
}

/* A guest's clock stands still while its VM is paused: set it again. */
int
sp_sandbox_sync_clock(struct sp_ctx *x, const char *id, struct sp_err *e)
{
	return guest_op(x, id, json_pack("{s:s, s:I}", "op", "clock", "time_ns",
	    (json_int_t)realtime_ns()), NULL, NULL, 0, NULL, e);
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

/*
 * Runs what a claim will run in a pod before it is paused, the way the claim
 * sends it: the identity op with a first command (`true`, stdin at its end),
 * in the hello's own write when the daemon takes that.  Under TCG a restored
 * VM starts with an empty translation cache, so code first run at the claim
 * is translated there, and the first fork and exec after a restore are the
 * slowest; running them here moves that work before the pause.  The
 * identity given here is overridden by the claim's; its file goes again, so
 * that the claim's identity makes the file and does not replace one
 * (dropping a file written before the pause is slow for the first call
 * after it).  Then the guest runs POD_SETTLE_MS more: what those calls left
 * for later (RCU callbacks freeing the exec's credentials and files, timers)
 * runs now, not after the claim's resume.  What it saves is in
 * docs/benchmarks.md ("A pod rehearses its claim").
 */
#define POD_SETTLE_MS	50

static int
warm_up(struct sp_ctx *x, const char *id)
{
	char *argv[] = { "true", NULL };
	struct sp_exec xr = { .argv = argv, .timeout_ms = QUIET_EXEC_MS };
	struct sp_chan *c;
	struct sp_err ignored;
	int i, status, sent, after_identity = 0, null;

	if (sp_chan_open(&c, x->conf.run, id, 5000, &ignored) == 0) {
		after_identity = json_is_true(json_object_get(sp_chan_hello(c),
		    "after_identity"));
		sp_chan_close(c);
	}
	if ((null = open("/dev/null", O_RDWR | O_CLOEXEC)) == -1)
		return after_identity;
	xr.in_fd = xr.out_fd = xr.err_fd = null;
	for (i = 0; i < 2; i++) {
		if (hand_identity(x, id, NULL, NULL, &c, &xr, after_identity,
		    &sent, &ignored) == 0) {
			sp_chan_exec(c, &xr, &status, &ignored);
			sp_chan_close(c);
		}
	}
	close(null);
	if (sp_chan_open(&c, x->conf.run, id, 5000, &ignored) == 0) {
		sp_fs_remove(c, SP_GUEST_IDENTITY_FILE, 0, &ignored);
		sp_chan_close(c);
	}
	usleep(POD_SETTLE_MS * 1000);
	return after_identity;
}

/*
 * What a claim would otherwise ask QEMU each time, learnt once when the pod
 * is made: whether it runs on KVM, and its VM's CPU weight file for the
 * boost (found from the vCPU thread QEMU names); and whether its daemon
 * takes a first command in the hello's own write (after_identity).  In
 * run/ID/pod.json, read and removed by the claim, which then sends QEMU
 * "cont" alone.  Best effort: a claim without it asks QEMU, as before, and
 * sends its command after the hello's answer.
 */
#define POD_RECORD	"pod.json"

/* What QEMU's answers to query-kvm and query-cpus-fast say: virt, and the
 * first vCPU thread in *tid (0 when the answer names none).  QEMU is the
 * host's, but its answer is checked all the same. */
static void
qemu_facts(json_t *kvm, json_t *cpus, char virt[16], pid_t *tid)
{
	json_t *t = json_object_get(json_array_get(cpus, 0), "thread-id");

	snprintf(virt, 16, "%s", json_is_true(json_object_get(kvm, "enabled")) ?
	    "kvm" : "qemu");
	*tid = json_is_integer(t) && json_integer_value(t) > 0 &&
	    json_integer_value(t) < INT_MAX ? (pid_t)json_integer_value(t) : 0;
}

static void
record_pod(struct sp_ctx *x, const char *id, int after_identity)
{
	static const char *const cmds[] = { "query-kvm", "query-cpus-fast" };
	char run[SP_PATH_MAX], p[SP_PATH_MAX], file[SP_PATH_MAX] = "";
	char virt[16];
	json_t *rets[2] = { NULL, NULL }, *rec = NULL;
	struct sp_qmp *q;
	struct sp_err ignored;
	pid_t tid;

	if (sp_sandbox_run_dir(x, id, run, sizeof run, &ignored) == -1 ||
	    sp_path_fmt(p, sizeof p, &ignored, "%s/" POD_RECORD, run) == -1 ||
	    sp_qmp_open(&q, run, QMP_MS, &ignored) == -1)
		return;
	if (sp_qmp_cmds(q, cmds, 2, rets, &ignored) == 0) {
		qemu_facts(rets[0], rets[1], virt, &tid);
		if (tid == 0 ||
		    sp_boost_weight_file(tid, id, file, sizeof file) == -1)
			file[0] = '\0';
		rec = json_pack("{s:s, s:s, s:b}", "virt", virt, "weight_file",
		    file, "after_identity", after_identity);
		if (rec == NULL || json_dump_file(rec, p, JSON_COMPACT) == -1)
			unlink(p);
	}
	json_decref(rec);
	json_decref(rets[0]);
	json_decref(rets[1]);
	sp_qmp_close(q);
}

/* The pod's record (record_pod), removed: 0 with virt, file (empty when
 * it has none) and *after_identity, -1 when there is none or it is not one
 * we wrote. */
static int
take_pod_record(const char *run, char virt[16], char *file, size_t n,
    int *after_identity)
{
	char p[SP_PATH_MAX];
	const char *v, *f;
	struct sp_err ignored;
	json_t *rec;
	int rc = -1, a = 0;

	if (sp_path_fmt(p, sizeof p, &ignored, "%s/" POD_RECORD, run) == -1 ||
	    (rec = json_load_file(p, JSON_REJECT_DUPLICATES, NULL)) == NULL)
		return -1;
	unlink(p);
	if (json_unpack(rec, "{s:s, s:s, s?b}", "virt", &v, "weight_file", &f,
	    "after_identity", &a) == 0 &&
	    (strcmp(v, "qemu") == 0 || strcmp(v, "kvm") == 0) &&
	    strlen(f) < n && (*f == '\0' ||
	    (strncmp(f, "/sys/fs/cgroup/", 15) == 0 &&
	    strstr(f, "/..") == NULL))) {
		snprintf(virt, 16, "%s", v);
		snprintf(file, n, "%s", f);
		*after_identity = a;
		rc = 0;
	}
	json_decref(rec);
	return rc;
}

/*
 * Wakes a claimed pod through QEMU's own monitor: no libvirt in the claim's
 * path, where loading it would cost more than the rest of the claim.  Whether it runs on KVM
 * and its CPU weight file come from its record (record_pod), else from
 * QEMU.  A pod without that monitor (made before there was one) is resumed
 * through libvirt.  With boost, its VM's CPU weight is raised (sp_boost.c).
 */
static int
resume_pod(struct sp_ctx *x, const char *id, const char *dom, char virt[16],
    struct sp_boost *boost, int *after_identity, struct sp_err *e)
{
	static const char *const asking[] = { "query-kvm", "query-cpus-fast",
	    "cont" };
	static const char *const cont[] = { "cont" };
	char run[SP_PATH_MAX], file[SP_PATH_MAX];
	json_t *rets[3] = { NULL, NULL, NULL };
	struct sp_qmp *q;
	pid_t tid;
	int rc, known;

	if (sp_sandbox_run_dir(x, id, run, sizeof run, e) == -1)
		return -1;
	*after_identity = 0;
	known = take_pod_record(run, virt, file, sizeof file,
	    after_identity) == 0;
	if (sp_qmp_open(&q, run, QMP_MS, e) == -1) {
		if (e->code != SP_E_NOT_RUNNING ||
		    sp_ctx_virt(x, e) == -1)
			return -1;
		snprintf(virt, 16, "%s", x->virt_type);
		return sp_virt_resume(x->virt, dom, e);
	}
	if (known) {
		rc = sp_qmp_cmds(q, cont, 1, rets, e);
		if (rc == 0 && boost != NULL && file[0] != '\0')
			(void)sp_boost_start_file(boost, x->conf.run, id, file);
		goto out;
	}
	rc = sp_qmp_cmds(q, asking, 3, rets, e);
	qemu_facts(rets[0], rets[1], virt, &tid);
	if (rc == 0 && boost != NULL && tid != 0)
		(void)sp_boost_start(boost, x->conf.run, id, tid);
out:
	json_decref(rets[0]);
	json_decref(rets[1]);
	json_decref(rets[2]);
	sp_qmp_close(q);
	return rc;
}

/*
 * Takes a warm pod of the template, if one is ready: claimed in one DB
 * statement, resumed, told who it is.  1 with *out when it did, 0 when no pod
 * was ready (or the one taken would not wake: it is removed), -1 on error.
 */
static int
take_pod(struct sp_ctx *x, const struct sp_create_req *r,
    const struct sp_template_row *t, int64_t t0, json_t **out,
    struct sp_err *e)
{
	char ref[2 * SP_NAME_MAX + 2], id[SP_ID_LEN + 1], dom[SP_ID_LEN + 4];
	char *labels, *env, virt[16];
	struct sp_err lost;
	int c, fd, existed, sent = 0, with_hello;

	snprintf(ref, sizeof ref, "%s@%s", t->name, t->digest);
	labels = r->labels ? json_dumps(r->labels, JSON_COMPACT | JSON_SORT_KEYS) :
	    NULL;
	env = r->env ? json_dumps(r->env, JSON_COMPACT) : NULL;
	c = sp_db_pod_claim(x->db, t->name, ref, r->memory_mib, r->vcpus, labels,
	    env, id, e);
	free(labels);
	free(env);
	if (c <= 0)
		return c;
	sp_crashpoint("create-after-claim");
	sp_sandbox_domain(id, dom);
	if (sp_sandbox_lock(x, id, 1, &fd, e) == -1)
		return -1;
	if (resume_pod(x, id, dom, virt, r->boost, &with_hello, &lost) == -1 ||
	    hand_identity(x, id, r->labels, r->env, r->chan,
	    r->chan != NULL ? r->first : NULL, with_hello, &sent,
	    &lost) == -1 ||
	    sp_db_transition(x->db, id, SP_ST_RUNNING, -1, NULL, &lost) == -1) {
		if (r->chan != NULL) {
			sp_chan_close(*r->chan);
			*r->chan = NULL;
		}
		if (r->boost != NULL)
			sp_boost_end(r->boost);
		sp_sandbox_unlock(fd);
		sp_sandbox_remove(x, id, &existed, e);
		/* A first command that may have started is not run again
		 * elsewhere: this create fails. */
		if (sent) {
			*e = lost;
			return -1;
		}
		return 0;
	}
	sp_sandbox_unlock(fd);
	*out = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "id", id, "state",
	    "running", "template", ref, "virt", virt, "path", "pool",
	    "create_ms", (json_int_t)(sp_clock_ms() - t0));
	return 1;
}

int
sp_sandbox_create(struct sp_ctx *x, const struct sp_create_req *r, json_t **out,
    struct sp_err *e)
{
	char tpath[SP_PATH_MAX], ckpt[SP_PATH_MAX], ref[2 * SP_NAME_MAX + 2];
	char id[SP_ID_LEN + 1];
	struct sp_template_row t;
	struct sp_ckpt_info ci;
	struct sp_make m;
	struct sp_err ignored;
	int64_t t0 = sp_clock_ms();
	int rc, warm, built;

	*out = NULL;
	if (r->chan != NULL)
		*r->chan = NULL;
	if (r->memory_mib < 64 || r->memory_mib > 65536)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "memory must be 64 to 65536 MiB");
	if (r->vcpus < 1 || r->vcpus > 64)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "vcpus must be 1 to 64");
	/* Built on first use when only its source is known; once for many. */
	if (sp_template_materialize(x, r->template, &t, &built, e) == -1)
		return -1;
	if (!r->pod && !r->no_pool) {
		if ((rc = take_pod(x, r, &t, t0, out, e)) != 0)
			return rc == 1 ? 0 : -1;
	}
	/* No pod: this one is made here, through libvirt. */
	if (sp_ctx_virt(x, e) == -1)
		return -1;
	if (sp_template_path(x->conf.root, &t, tpath, sizeof tpath, e) == -1 ||
	    sp_ckpt_path(x->conf.root, &t, ckpt, sizeof ckpt, e) == -1)
		return -1;
	if (!sp_subvol_exists(tpath))
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "template %s@%.12s is in the DB "
		    "but not on this node (%s)", t.name, t.digest, tpath);
	/* The template's booted checkpoint, when it was booted as asked. */
	warm = !r->no_checkpoint && sp_subvol_exists(ckpt) &&
	    sp_ckpt_read(ckpt, &ci, &ignored) == 0 &&
	    ci.memory_mib == r->memory_mib && ci.vcpus == r->vcpus &&
	    sp_ckpt_current(ckpt, &ignored) == 1;
	snprintf(ref, sizeof ref, "%s@%s", t.name, t.digest);
	m = (struct sp_make){
		.src = warm ? ckpt : tpath, .saved = warm ? &ci : NULL,
		.template = ref, .memory_mib = r->memory_mib, .vcpus = r->vcpus,
		.labels = r->labels, .env = r->env,
		.pool = r->pod ? t.name : NULL,
		.ready_timeout_ms = r->ready_timeout_ms,
	};
	if (sp_sandbox_make(x, &m, id, e) == -1)
		return -1;
	*out = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "id", id, "state",
	    r->pod ? "paused" : "running", "template", ref, "virt",
	    x->virt_type, "path", warm ? "checkpoint" : "cold", "create_ms",
	    (json_int_t)(sp_clock_ms() - t0));
	return 0;
}

int
sp_sandbox_make(struct sp_ctx *x, const struct sp_make *m,
    char id[SP_ID_LEN + 1], struct sp_err *e)
{
	char dir[SP_PATH_MAX], run[SP_PATH_MAX];
	char disk[SP_PATH_MAX], kernel[SP_PATH_MAX], initrd[SP_PATH_MAX];
	char p[SP_PATH_MAX], dom[SP_ID_LEN + 4], *xml = NULL, *labels = NULL;
	char *envtext = NULL, sav[SP_PATH_MAX], old[SP_ID_LEN + 4], uuid[37];
	struct sp_sandbox_row row = { 0 };
	struct sp_vm_spec spec;
	struct sp_vm_layout l;
	json_t *meta = NULL;
	int rc = -1, inserted = 0, lock = -1;

	if (sp_ctx_virt(x, e) == -1 || sp_id_new(row.id, e) == -1)
		return -1;
	sp_virt_boot_layout(&l);	/* a restore reads its own */
	if (sp_sandbox_dir(x, row.id, dir, sizeof dir, e) == -1 ||
	    sp_sandbox_run_dir(x, row.id, run, sizeof run, e) == -1 ||
	    sp_path_fmt(disk, sizeof disk, e, "%s/disk.raw", dir) == -1 ||
	    sp_path_fmt(kernel, sizeof kernel, e, "%s/vmlinuz", dir) == -1 ||
	    sp_path_fmt(initrd, sizeof initrd, e, "%s/initrd.img", dir) == -1 ||
	    sp_path_fmt(sav, sizeof sav, e, "%s/mem.sav", dir) == -1 ||
	    sp_ckpt_uuid_new(uuid, e) == -1)
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
	row.labels = labels;
	row.env = envtext;
	if (sp_sandbox_lock(x, row.id, 1, &lock, e) == -1)
		goto out;
	if (sp_db_sandbox_insert(x->db, &row, e) == -1)
		goto out;
	inserted = 1;
	/* A pod is one from its birth, so it never lists as a sandbox. */
	if (m->pool != NULL && sp_db_pod_mark(x->db, row.id, m->pool, e) == -1)
		goto out;
	sp_crashpoint("create-after-row");
	if (sp_subvol_snapshot(m->src, dir, 0, e) == -1)
		goto out;
	sp_crashpoint("create-after-snapshot");
	sp_sandbox_domain(row.id, dom);
	if (m->saved != NULL) {
		sp_sandbox_domain(m->saved->id, old);
		if (sp_ckpt_reidentify(sav, old, dom, m->saved->uuid, uuid, e) == -1 ||
		    sp_ckpt_layout(sav, &l, e) == -1)
			goto out;
	} else
		unlink(sav);	/* a disk snapshot of a checkpoint has one */
	if (sp_sandbox_make_run_dir(run, e) == -1)
		goto out;
	spec = (struct sp_vm_spec){
		.name = dom, .uuid = uuid, .memory_mib = m->memory_mib,
		.vcpus = m->vcpus,
		.kernel = kernel, .initrd = initrd, .cmdline = NULL,
		.disk = disk, .chan_dir = run, .nports = l.nports,
		.virt_type = x->virt_type, .shared_vectors = l.shared_vectors,
		.no_egress = !l.egress,
	};
	if (sp_virt_domain_xml(&spec, &xml, e) == -1)
		goto out;
	if (sp_path_fmt(p, sizeof p, e, "%s/domain.xml", dir) == -1 ||
	    write_file(p, xml, e) == -1)
		goto out;
	meta = json_pack("{s:s, s:s, s:s, s:I, s:i, s:i, s:O}", "id", row.id,
	    "template", row.template, "node", row.node, "created",
	    (json_int_t)row.created, "memory_mib", row.memory_mib, "vcpus",
	    row.vcpus, "labels", m->labels ? m->labels : json_object());
	if (meta == NULL || sp_path_fmt(p, sizeof p, e, "%s/sandbox.json", dir) == -1 ||
	    write_json(p, meta, e) == -1)
		goto out;
	if (sp_virt_define(x->virt, xml, e) == -1)
		goto out;
	sp_crashpoint("create-after-define");
	if (m->saved != NULL) {
		/* The guest goes on from its checkpoint; its memory image has
		 * done its work and need not stay in the sandbox. */
		if (sp_virt_restore(x->virt, sav, xml, dom, e) == -1)
			goto out;
		unlink(sav);
	} else if (sp_virt_start(x->virt, dom, e) == -1)
		goto out;
	sp_crashpoint("create-after-start");
	if (sp_chan_wait_ready(x->conf.run, row.id, m->ready_timeout_ms, e) == -1)
		goto out;
	if (m->pool != NULL) {
		/* A pod waits with its vCPUs stopped, for whoever claims it
		 * and tells it who it is. */
		record_pod(x, row.id, warm_up(x, row.id));
		if (sp_virt_pause(x->virt, dom, e) == -1 ||
		    sp_db_transition(x->db, row.id, SP_ST_PAUSED, -1, NULL, e) == -1)
			goto out;
	} else if (sp_sandbox_hand_identity(x, row.id, m->labels, m->env, e) == -1 ||
	    sp_db_transition(x->db, row.id, SP_ST_RUNNING, -1, NULL, e) == -1)
		goto out;
	memcpy(id, row.id, SP_ID_LEN + 1);
	rc = 0;
out:
	if (rc == -1 && inserted)
		unmake(x, row.id);
	sp_sandbox_unlock(lock);
	json_decref(meta);
	free(xml);
	free(labels);
	free(envtext);
	return rc;
}

int
sp_sandbox_remove(struct sp_ctx *x, const char *id, int *existed,
    struct sp_err *e)
{
	int fd, rc;

	*existed = 0;
	if (sp_id_check(id, e) == -1 || sp_sandbox_lock(x, id, 1, &fd, e) == -1)
		return -1;
	rc = remove_locked(x, id, existed, e);
	sp_sandbox_unlock(fd);
	return rc;
}

static int
remove_locked(struct sp_ctx *x, const char *id, int *existed,
    struct sp_err *e)
{
	char dir[SP_PATH_MAX], run[SP_PATH_MAX], snaps[SP_PATH_MAX];
	char tmp[SP_PATH_MAX], dom[SP_ID_LEN + 4], vstate[16];
	struct sp_sandbox_row row;
	struct sp_err ge;
	int in_db, removed;

	*existed = 0;
	if (sp_id_check(id, e) == -1)
		return -1;
	if (sp_ctx_virt(x, e) == -1)
		return -1;
	if (sp_sandbox_dir(x, id, dir, sizeof dir, e) == -1 ||
	    sp_sandbox_run_dir(x, id, run, sizeof run, e) == -1 ||
	    sp_path_fmt(snaps, sizeof snaps, e, "%s/snapshots/%s", x->conf.root,
	    id) == -1 ||
	    sp_path_fmt(tmp, sizeof tmp, e, "%s/sandboxes/.%s.rollback",
	    x->conf.root, id) == -1)
		return -1;
	in_db = sp_db_sandbox_get(x->db, id, &row, &ge) == 0;
	if (!in_db && ge.code != SP_E_NOT_FOUND) {
		*e = ge;
		return -1;
	}
	if (in_db) {
		*existed = 1;
		/* Marking it destroyed first makes racing commands fail cleanly. */
		if (row.state != SP_ST_DESTROYED &&
		    sp_db_transition(x->db, id, SP_ST_DESTROYED, -1, NULL, e) == -1) {
			sp_db_row_release(&row);
			return -1;
		}
		sp_db_row_release(&row);
	}
	sp_sandbox_domain(id, dom);
	if (sp_virt_state(x->virt, dom, vstate, e) == -1)
		return -1;
	if (strcmp(vstate, "absent") != 0)
		*existed = 1;
	sp_crashpoint("remove-after-mark");
	if (sp_virt_destroy(x->virt, dom, e) == -1 ||
	    sp_virt_undefine(x->virt, dom, e) == -1)
		return -1;
	sp_crashpoint("remove-after-vm");
	if (sp_subvol_exists(dir) || access(snaps, F_OK) == 0)
		*existed = 1;
	if (sp_subvol_delete(dir, e) == -1 || sp_subvol_delete(tmp, e) == -1 ||
	    sp_snap_remove_all(x, id, e) == -1)
		return -1;
	if (sp_path_remove_tree(run, e) == -1)
		return -1;
	/* What a suspend put in the object store goes too; when the store
	 * does not answer, the row stays destroyed and the next try (or
	 * reconcile) finishes. */
	if (in_db && sp_remote_forget(x, id, e) == -1)
		return -1;
	/* Its egress policy (space-egress) goes with it. */
	if (sp_egress_policy_remove(x->conf.root, SP_EGRESS_SANDBOX, id,
	    &removed, e) == -1)
		return -1;
	/* So do its credentials (space-cred) and its rate state. */
	if (sp_cred_forget_sandbox(x->conf.root, id, (int64_t)time(NULL),
	    e) == -1)
		return -1;
	return sp_db_sandbox_delete(x->db, id, e);
}

/* What libvirt says, mapped to our states; a vanished VM of a live row failed. */
static const char *
observed_state(const struct sp_sandbox_row *r, const char *v)
{
	if (strcmp(v, "running") == 0 && r->state == SP_ST_RUNNING)
		return "running";
	if (strcmp(v, "paused") == 0 &&
	    (r->state == SP_ST_PAUSED || r->state == SP_ST_RUNNING))
		return "paused";
	if (r->state == SP_ST_RUNNING || r->state == SP_ST_PAUSED) {
		if (strcmp(v, "absent") == 0 || strcmp(v, "shutoff") == 0 ||
		    strcmp(v, "crashed") == 0)
			return "failed";
	}
	return sp_state_name(r->state);
}

/* How long nothing happened in the sandbox, by its daemon; -1 when it does
 * not answer in time (busy, paused, gone).  The number comes from the guest:
 * it is checked, never trusted further than a display value. */
#define IDLE_ASK_MS	2000
#define IDLE_MAX_S	(100LL * 365 * 86400)

static long long
ask_idle(struct sp_ctx *x, const char *id)
{
	struct sp_chan *c = NULL;
	struct sp_frame f;
	struct sp_err e;
	json_t *req, *rep = NULL, *v;
	uint32_t stream;
	long long idle = -1;

	if (sp_chan_open(&c, x->conf.run, id, IDLE_ASK_MS, &e) == -1)
		return -1;
	stream = sp_chan_stream_new(c);
	req = json_pack("{s:s}", "op", "activity");
	if (sp_chan_send_json(c, SP_FR_REQ, stream, req, IDLE_ASK_MS, &e) == -1 ||
	    sp_chan_recv(c, &f, IDLE_ASK_MS, &e) == -1)
		goto out;
	if (f.type != SP_FR_EXIT || f.stream != stream ||
	    sp_frame_json(&f, &rep, &e) == -1)
		goto out;
	v = json_object_get(rep, "idle_s");
	if (json_is_integer(v) && json_integer_value(v) >= 0 &&
	    json_integer_value(v) <= IDLE_MAX_S)
		idle = json_integer_value(v);
out:
	json_decref(req);
	json_decref(rep);
	sp_chan_close(c);
	return idle;
}

int
sp_sandbox_describe(struct sp_ctx *x, const struct sp_sandbox_row *r,
    json_t **out, struct sp_err *e)
{
	char dir[SP_PATH_MAX], dom[SP_ID_LEN + 4], vstate[16];
	json_t *labels, *o, *excl, *rec;
	uint64_t bytes;
	struct sp_err ve;
	long long idle;

	*out = NULL;
	sp_sandbox_domain(r->id, dom);
	if (sp_ctx_virt(x, e) == -1 || sp_virt_state(x->virt, dom, vstate, e) == -1)
		return -1;
	if (sp_sandbox_dir(x, r->id, dir, sizeof dir, e) == -1)
		return -1;
	/* A sandbox whose subvolume is gone still lists, with null bytes. */
	if (sp_subvol_exists(dir) && sp_subvol_exclusive_bytes(dir, &bytes, &ve) == 0)
		excl = json_integer((json_int_t)bytes);
	else
		excl = json_null();
	idle = -1;
	if (strcmp(observed_state(r, vstate), "running") == 0)
		idle = ask_idle(x, r->id);
	labels = json_loads(r->labels ? r->labels : "{}", 0, NULL);
	o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:i, s:i, s:o, s:o, s:o, "
	    "s:I}", "id", r->id, "state", observed_state(r, vstate), "vm", vstate,
	    "template", r->template, "created", (json_int_t)r->created,
	    "node", r->node, "memory_mib", r->memory_mib, "vcpus", r->vcpus,
	    "disk_exclusive_bytes", excl, "idle_s", idle >= 0 ?
	    json_integer(idle) : json_null(), "labels", labels ? labels :
	    json_object(), "gen", (json_int_t)r->gen);
	if (o != NULL && r->pod)
		json_object_set_new(o, "pod", json_true());
	/* The last rollback or recovery: {"snap","kind","at","why"}. */
	if (o != NULL && r->recovered != NULL &&
	    (rec = json_loads(r->recovered, 0, NULL)) != NULL)
		json_object_set_new(o, "recovered", rec);
	if (o == NULL)
		return sp_err_set(e, SP_E_INTERNAL, 0, "json_pack");
	*out = o;
	return 0;
}
