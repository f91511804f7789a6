/*
 * sp_pool_claim: the two ends of a warm pod's life that are the pool's own.
 * When a pod is made, it rehearses the claim and learns what the claim
 * would ask QEMU (sp_pool_prepare); a create then takes one in a single DB
 * statement, wakes it through QEMU's monitor and tells it who it is
 * (sp_pool_claim).  Keeping the pools full is sp_pool.c's.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_sandbox.h"

#define QMP_MS		5000	/* to resume a pod through QEMU's monitor */

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
#define POD_EXEC_MS	60000	/* then SIGKILL: no wait without an end */

static int
warm_up(struct sp_ctx *x, const char *id)
{
	char *argv[] = { "true", NULL };
	struct sp_exec xr = { .argv = argv, .timeout_ms = POD_EXEC_MS };
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
		if (sp_sandbox_identify(x, id, NULL, NULL, &c, &xr, after_identity,
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
 * $SPACE_RUN/pods/ID.json (sp_pod_file), read and removed by the claim,
 * which then sends QEMU "cont" alone.  Best effort: a claim without it asks
 * QEMU, as before, and sends its command after the hello's answer.
 */
#define POD_RECORD	"json"

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
	char virt[16], *text = NULL;
	json_t *rets[2] = { NULL, NULL }, *rec = NULL;
	struct sp_qmp *q;
	struct sp_err ignored;
	pid_t tid;

	if (sp_sandbox_run_dir(x, id, run, sizeof run, &ignored) == -1 ||
	    sp_pod_file(x->conf.run, id, POD_RECORD, p, sizeof p,
	    &ignored) == -1 ||
	    sp_qmp_open(&q, run, QMP_MS, &ignored) == -1)
		return;
	if (sp_qmp_cmds(q, cmds, 2, rets, &ignored) == 0) {
		qemu_facts(rets[0], rets[1], virt, &tid);
		if (tid == 0 ||
		    sp_boost_weight_file(tid, id, file, sizeof file) == -1)
			file[0] = '\0';
		rec = json_pack("{s:s, s:s, s:b}", "virt", virt, "weight_file",
		    file, "after_identity", after_identity);
		/* Not followed if a link, space's if root writes it. */
		if (rec == NULL ||
		    (text = json_dumps(rec, JSON_COMPACT)) == NULL ||
		    sp_path_replace_text(p, text, &ignored) == -1)
			unlink(p);
	}
	free(text);
	json_decref(rec);
	json_decref(rets[0]);
	json_decref(rets[1]);
	sp_qmp_close(q);
}

void
sp_pool_prepare(struct sp_ctx *x, const char *id)
{
	record_pod(x, id, warm_up(x, id));
}

/* The pod's record (record_pod), removed: 0 with virt, file (empty when
 * it has none) and *after_identity, -1 when there is none or it is not one
 * we wrote.  It is space's to write, so its weight file is checked as a
 * boost mark's is. */
static int
take_pod_record(const char *run, const char *id, char virt[16], char *file,
    size_t n, int *after_identity)
{
	char p[SP_PATH_MAX];
	const char *v, *f;
	struct sp_err ignored;
	struct stat st;
	json_t *rec = NULL;
	int fd, rc = -1, a = 0;

	if (sp_pod_file(run, id, POD_RECORD, p, sizeof p, &ignored) == -1 ||
	    (fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) == -1)
		return -1;
	/* A small regular file: no FIFO to wait on, nothing large. */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= 4096)
		rec = json_loadfd(fd, JSON_REJECT_DUPLICATES, NULL);
	close(fd);
	unlink(p);
	if (rec == NULL)
		return -1;
	if (json_unpack(rec, "{s:s, s:s, s?b}", "virt", &v, "weight_file", &f,
	    "after_identity", &a) == 0 &&
	    (strcmp(v, "qemu") == 0 || strcmp(v, "kvm") == 0) &&
	    strlen(f) < n && (*f == '\0' || sp_boost_file_ok(f, id))) {
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
	known = take_pod_record(x->conf.run, id, virt, file, sizeof file,
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

int
sp_pool_claim(struct sp_ctx *x, const struct sp_create_req *r,
    const struct sp_template_row *t, int64_t t0, json_t **out,
    struct sp_err *e)
{
	char ref[2 * SP_NAME_MAX + 2], id[SP_ID_LEN + 1], dom[SP_ID_LEN + 4];
	char *labels, *env, virt[16];
	struct sp_err lost;
	int c, fd, sent = 0, with_hello;

	snprintf(ref, sizeof ref, "%s@%s", t->name, t->digest);
	labels = r->labels ? json_dumps(r->labels, JSON_COMPACT | JSON_SORT_KEYS) :
	    NULL;
	env = r->env ? json_dumps(r->env, JSON_COMPACT) : NULL;
	c = sp_db_pod_claim(x->db, x->conf.node, t->name, ref, r->memory_mib,
	    r->vcpus, labels, env, r->name, r->request_id, 1, id, e);
	free(labels);
	free(env);
	if (c <= 0)
		return c;
	sp_crashpoint("create-after-claim");
	sp_sandbox_domain(id, dom);
	if (sp_sandbox_lock(x, id, 1, &fd, e) == -1)
		return -1;
	if (resume_pod(x, id, dom, virt, r->boost, &with_hello, &lost) == -1 ||
	    sp_sandbox_identify(x, id, r->labels, r->env, r->chan,
	    r->chan != NULL ? r->first : NULL, with_hello, &sent,
	    &lost) == -1 ||
	    sp_db_transition(x->db, id, SP_ST_RUNNING, -1, NULL, &lost) == -1) {
		if (r->chan != NULL) {
			sp_chan_close(*r->chan);
			*r->chan = NULL;
		}
		if (r->boost != NULL)
			sp_boost_end(r->boost);
		/* A pod never had snapshots or stored copies: taking it
		 * apart is all a removal would do. */
		sp_sandbox_discard(x, id, e);
		sp_sandbox_unlock(fd);
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
sp_pool_claim_finish(struct sp_ctx *x, const char *id, json_t *labels,
    json_t *env, struct sp_err *e)
{
	char dom[SP_ID_LEN + 4], virt[16];
	int fd, sent = 0, with_hello, rc;

	sp_sandbox_domain(id, dom);
	if (sp_sandbox_lock(x, id, 1, &fd, e) == -1)
		return -1;
	rc = resume_pod(x, id, dom, virt, NULL, &with_hello, e) == -1 ||
	    sp_sandbox_identify(x, id, labels, env, NULL, NULL, with_hello,
	    &sent, e) == -1 ||
	    sp_db_transition(x->db, id, SP_ST_RUNNING, -1, NULL, e) == -1 ?
	    -1 : 0;
	sp_sandbox_unlock(fd);
	return rc;
}
