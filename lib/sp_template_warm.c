/*
 * sp_template_warm: a template's booted checkpoint (design.md).  The template
 * is booted once, its daemon answers, the guest settles, and its memory state
 * is saved beside it (sp_ckpt.c reads and re-identifies what is saved).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sp_sandbox.h"

#define WARM_READY_MS	180000
#define SYNC_MS		60000	/* the guest's sync before the save, then SIGKILL */
#define SETTLE_S	"2"	/* s of the guest's time before the save */

/* Boots the template in dir as domain sp-<id>, waits for its daemon, and
 * saves its memory to dir/mem.sav (which stops it). */
static int
boot_and_save(struct sp_ctx *x, const char *dir, const char *id,
    const char *uuid, int memory_mib, int vcpus, struct sp_err *e)
{
	char run[SP_PATH_MAX], dom[SP_ID_LEN + 4];
	struct sp_vm_files f;
	struct sp_vm_spec spec;
	struct sp_vm_layout l;
	struct sp_err ignored;
	char *sync_argv[] = { "sync", NULL }, *xml = NULL;
	char *settle_argv[] = { "sleep", SETTLE_S, NULL };
	int rc = -1, status;

	sp_sandbox_domain(id, dom);
	sp_virt_boot_layout(&l);
	if (sp_sandbox_run_dir(x, id, run, sizeof run, e) == -1 ||
	    sp_vm_files(dir, &f, e) == -1 ||
	    sp_sandbox_make_run_dir(run, e) == -1)
		return -1;
	spec = (struct sp_vm_spec){
		.name = dom, .uuid = uuid, .memory_mib = memory_mib,
		.vcpus = vcpus, .kernel = f.kernel, .initrd = f.initrd,
		.cmdline = NULL, .disk = f.disk, .chan_dir = run,
		.nports = l.nports, .virt_type = x->virt_type,
		.shared_vectors = l.shared_vectors, .no_egress = !l.egress,
	};
	if (sp_virt_domain_xml(&spec, &xml, e) == -1 ||
	    sp_virt_define(x->virt, xml, e) == -1)
		goto out;
	if (sp_virt_start(x->virt, dom, e) == -1 ||
	    sp_chan_wait_ready(x->conf.run, id, WARM_READY_MS, e) == -1)
		goto out;
	/* What the boot left dirty (atimes, the journal) is written out
	 * here, once: saved dirty, every copy would write it after its
	 * restore.  Best effort: a copy can do it itself. */
	sp_sandbox_exec_quiet(x, id, sync_argv, 5000, SYNC_MS, &status,
	    &ignored);
	/* The deferred work of the boot and of the sync runs here, once,
	 * not in every copy after its claim: the guest's clock stands still
	 * while a pod waits paused, so a timer still pending at the save
	 * fires in each copy's first second (Linux refines the TSC's
	 * calibration a second after its first read, then switches
	 * clocksource; the block layer's writeback timers follow the
	 * sync's writes).  Best effort, as the sync. */
	sp_sandbox_exec_quiet(x, id, settle_argv, 5000, SYNC_MS, &status,
	    &ignored);
	if (sp_virt_save(x->virt, dom, f.sav, e) == -1)
		goto out;
	rc = 0;
out:
	sp_virt_destroy(x->virt, dom, &ignored);
	sp_virt_undefine(x->virt, dom, &ignored);
	sp_path_remove_tree(run, &ignored);
	free(xml);
	return rc;
}

/* Moves the checkpoint ckpt aside, then deletes it: a create that looks
 * at once finds no checkpoint, rather than half of one. */
static int
drop_stale(const char *ckpt, struct sp_err *e)
{
	char id[SP_ID_LEN + 1], old[SP_PATH_MAX];

	if (sp_id_new(id, e) == -1 ||
	    sp_path_fmt(old, sizeof old, e, "%s.stale-%s", ckpt, id) == -1)
		return -1;
	if (rename(ckpt, old) == -1)
		return sp_err_sys(e, SP_E_IO, "rename %s", ckpt);
	return sp_subvol_delete(old, e);
}

int
sp_template_warm(struct sp_ctx *x, const char *ref, int memory_mib, int vcpus,
    json_t **out, struct sp_err *e)
{
	char tpath[SP_PATH_MAX], ckpt[SP_PATH_MAX], work[SP_PATH_MAX];
	char lock[SP_PATH_MAX], p[SP_PATH_MAX], id[SP_ID_LEN + 1], uuid[37];
	struct sp_template_row t;
	struct sp_err ignored;
	json_t *info = NULL;
	int64_t t0 = sp_clock_ms();
	int fd = -1, rc = -1, reused = 0;

	*out = NULL;
	if (sp_db_template_get(x->db, ref, &t, e) == -1 || sp_ctx_virt(x, e) == -1)
		return -1;
	if (sp_template_path(x->conf.root, &t, tpath, sizeof tpath, e) == -1 ||
	    sp_ckpt_path(x->conf.root, &t, ckpt, sizeof ckpt, e) == -1 ||
	    sp_path_fmt(lock, sizeof lock, e, "%s/locks/warm-%s.lock",
	    x->conf.root, t.digest) == -1)
		return -1;
	/* One warm-up per template at a time; the others find it done. */
	if ((fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) == -1)
		return sp_err_sys(e, SP_E_IO, "%s", lock);
	if (sp_flock_wait(fd, e) == -1)
		goto out;
	if (sp_subvol_exists(ckpt)) {
		if (sp_ckpt_current(ckpt, &ignored) == 1) {
			reused = 1;
			goto done;
		}
		/* Made by an older build (or unreadable): a create boots cold
		 * past it, and it is replaced here. */
		if (drop_stale(ckpt, e) == -1)
			goto out;
	}
	if (sp_id_new(id, e) == -1 || sp_ckpt_uuid_new(uuid, e) == -1 ||
	    sp_path_fmt(work, sizeof work, e, "%s/templates/.warming-%s-%s",
	    x->conf.root, t.digest, id) == -1)
		goto out;
	if (sp_subvol_snapshot(tpath, work, 0, e) == -1)
		goto out;
	if (boot_and_save(x, work, id, uuid, memory_mib, vcpus, e) == -1)
		goto fail;
	info = json_pack("{s:s, s:s, s:i, s:i, s:I, s:s}", "id", id, "uuid", uuid,
	    "memory_mib", memory_mib, "vcpus", vcpus, "created",
	    (json_int_t)time(NULL), "template", t.digest);
	if (sp_path_fmt(p, sizeof p, e, "%s/ckpt.json", work) == -1 ||
	    json_dump_file(info, p, JSON_INDENT(2)) == -1) {
		sp_err_set(e, SP_E_IO, 0, "cannot write %s", p);
		goto fail;
	}
	if (sp_subvol_set_readonly(work, 1, e) == -1)
		goto fail;
	if (rename(work, ckpt) == -1) {
		sp_err_sys(e, SP_E_IO, "rename %s", work);
		goto fail;
	}
done:
	*out = json_pack("{s:s, s:s, s:b, s:I}", "template", t.name, "digest",
	    t.digest, "reused", reused, "ms", (json_int_t)(sp_clock_ms() - t0));
	rc = 0;
	goto out;
fail:
	sp_subvol_delete(work, &ignored);
out:
	json_decref(info);
	if (fd >= 0)
		close(fd);
	return rc;
}
