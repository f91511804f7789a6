/*
 * sp_template_warm: a template's booted checkpoint (design.md).  The template
 * is booted once, its daemon answers, the start command (E2B's start
 * command: a server, say) is started detached and the ready command run
 * until it succeeds, the guest settles, and its memory state is saved beside
 * it (sp_ckpt.c reads and re-identifies what is saved).
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
#define READY_TRY_MS	30000	/* one run of the ready command */
#define READY_EVERY_MS	250	/* between runs */
#define READY_DEFAULT_S	120

/* The start command, detached: sh -c START, or the image's own argv. */
static int
start(struct sp_ctx *x, const char *id, const struct sp_warm *w,
    json_t *cmd, struct sp_err *e)
{
	char *sh[] = { "sh", "-c", (char *)w->start, NULL }, **argv = sh;
	struct sp_exec xr = { .in_fd = -1 };
	struct sp_chan *c;
	json_t *v;
	size_t i;
	pid_t pid;
	int rc;

	if (w->start_image) {
		if (json_array_size(cmd) == 0)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "the template's "
			    "image has no Entrypoint or Cmd to start");
		if ((argv = calloc(json_array_size(cmd) + 1, sizeof *argv)) ==
		    NULL)
			return sp_err_sys(e, SP_E_INTERNAL, "start");
		json_array_foreach(cmd, i, v)
			argv[i] = (char *)json_string_value(v);
	}
	xr.argv = argv;
	if ((rc = sp_chan_open(&c, x->conf.run, id, 5000, e)) == 0) {
		rc = sp_chan_detach(c, &xr, &pid, e);
		sp_chan_close(c);
	}
	if (argv != sh)
		free(argv);
	return rc;
}

/* sh -c READY until it exits 0, within timeout_s. */
static int
ready(struct sp_ctx *x, const char *id, const struct sp_warm *w,
    struct sp_err *e)
{
	char *argv[] = { "sh", "-c", (char *)w->ready, NULL };
	int64_t until = sp_clock_ms() + (int64_t)(w->ready_timeout_s > 0 ?
	    w->ready_timeout_s : READY_DEFAULT_S) * 1000;
	struct timespec pause = { 0, READY_EVERY_MS * 1000000L };
	struct sp_err last;
	int status = -1, tries = 0;

	sp_err_clear(&last);
	for (;;) {
		tries++;
		if (sp_sandbox_exec_quiet(x, id, argv, 5000, READY_TRY_MS,
		    &status, &last) == 0 && status == 0)
			return 0;
		if (sp_clock_ms() >= until)
			break;
		nanosleep(&pause, NULL);
	}
	if (last.code != SP_E_NONE)
		return sp_err_set(e, SP_E_TIMED_OUT, 0, "the ready command did "
		    "not succeed in %d tries: %s", tries, last.msg);
	return sp_err_set(e, SP_E_TIMED_OUT, 0, "the ready command did not "
	    "succeed in %d tries (last exit %d)", tries, status);
}

static void
trim(struct sp_ctx *x, const char *id)
{
	struct sp_chan *c = NULL;
	struct sp_err ignored;
	json_t *a = NULL;

	if (sp_chan_open(&c, x->conf.run, id, 5000, &ignored) == 0)
		(void)sp_trim_chan(c, &a, &ignored);
	json_decref(a);
	sp_chan_close(c);
}

/* Boots the template in dir as domain sp-<id>, waits for its daemon, starts
 * and waits for what w says, and saves its memory to dir/mem.sav (which
 * stops it). */
static int
boot_and_save(struct sp_ctx *x, const char *dir, const char *id,
    const char *uuid, const struct sp_warm *w, json_t *cmd, struct sp_err *e)
{
	int memory_mib = w->memory_mib, vcpus = w->vcpus;
	char run[SP_PATH_MAX], dom[SP_ID_LEN + 4];
	struct sp_vm_files f;
	struct sp_vm_spec spec;
	struct sp_vm_layout l;
	struct sp_jail jail;
	struct sp_err ignored;
	char *sync_argv[] = { "sync", NULL }, *xml = NULL;
	char *settle_argv[] = { "sleep", SETTLE_S, NULL };
	int rc = -1, status;

	sp_sandbox_domain(id, dom);
	sp_virt_boot_layout(&l);
	if (sp_sandbox_run_dir(x, id, run, sizeof run, e) == -1 ||
	    sp_vm_files(dir, &f, e) == -1 ||
	    sp_jail_prepare(x, id, dir, run, &jail, e) == -1)
		return -1;
	spec = (struct sp_vm_spec){
		.name = dom, .uuid = uuid, .memory_mib = memory_mib,
		.vcpus = vcpus, .kernel = f.kernel, .initrd = f.initrd,
		.cmdline = NULL, .disk = f.disk, .chan_dir = run,
		.nports = l.nports, .virt_type = x->virt_type,
		.shared_vectors = l.shared_vectors, .no_egress = !l.egress,
		.balloon = l.balloon,
	};
	if (sp_jail_spec(x, &jail, &spec, e) == -1 ||
	    sp_virt_domain_xml(&spec, &xml, e) == -1 ||
	    sp_virt_define(x->virt, xml, e) == -1)
		goto out;
	if (sp_virt_start(x->virt, dom, e) == -1 ||
	    sp_jail_started(x, dom, e) == -1 ||
	    sp_chan_wait_ready(x->conf.run, id, WARM_READY_MS, e) == -1)
		goto out;
	if (((w->start != NULL || w->start_image) &&
	    start(x, id, w, cmd, e) == -1) ||
	    (w->ready != NULL && ready(x, id, w, e) == -1))
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
	/* The guest's free memory zeroed and freed just before the save:
	 * saved as zero pages, and reported to the host by each copy soon
	 * after its restore (design.md, "Memory").  Best effort. */
	trim(x, id);
	if (sp_virt_save(x->virt, dom, f.sav, e) == -1)
		goto out;
	rc = 0;
out:
	sp_virt_destroy(x->virt, dom, &ignored);
	sp_virt_undefine(x->virt, dom, &ignored);
	sp_jail_release(x, id);
	sp_jail_run_remove(x, id, run, &ignored);
	free(xml);
	return rc;
}

/* ckpt.json, made anew (no file of that name there, no symlink). */
static int
write_new(const char *path, json_t *info, struct sp_err *e)
{
	int fd, rc;

	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0644)) == -1)
		return sp_err_sys(e, SP_E_IO, "create %s", path);
	rc = json_dumpfd(info, fd, JSON_INDENT(2)) == -1 || fsync(fd) == -1 ?
	    sp_err_sys(e, SP_E_IO, "write %s", path) : 0;
	close(fd);
	return rc;
}

/*
 * After the VM: ckpt.json still the file its maker wrote (its owner, one
 * link) and the image root's (libvirt's, space-noded's): the jail owned the
 * directory while the VM ran, and a QEMU taken over by its guest could have
 * put another file, or a symlink, in the place of either.
 */
static int
saved_as_made(const char *dir, struct sp_err *e)
{
	char p[SP_PATH_MAX];
	struct stat st;

	if (sp_path_fmt(p, sizeof p, e, "%s/ckpt.json", dir) == -1)
		return -1;
	if (lstat(p, &st) == -1 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || st.st_nlink != 1)
		return sp_err_set(e, SP_E_CORRUPT, 0, "%s is not the file made "
		    "before the boot: changed while the VM ran", p);
	if (sp_path_fmt(p, sizeof p, e, "%s/mem.sav", dir) == -1)
		return -1;
	if (lstat(p, &st) == -1 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
	    st.st_nlink != 1)
		return sp_err_set(e, SP_E_CORRUPT, 0, "%s is not libvirt's "
		    "save image: changed while the VM ran", p);
	return 0;
}

/* Moves the checkpoint ckpt aside, then deletes it: a create that looks
 * at once finds no checkpoint, rather than half of one. */
static int
drop_stale(const char *ckpt, struct sp_err *e)
{
	char id[SP_ID_LEN + 1], old[SP_PATH_MAX];

	/* templates/ is root's: one not root has space-noded delete it
	 * where it is (gone at once: btrfs unlinks it first). */
	if (geteuid() != 0)
		return sp_subvol_delete(ckpt, e);
	if (sp_id_new(id, e) == -1 ||
	    sp_path_fmt(old, sizeof old, e, "%s.stale-%s", ckpt, id) == -1)
		return -1;
	if (rename(ckpt, old) == -1)
		return sp_err_sys(e, SP_E_IO, "rename %s", ckpt);
	return sp_subvol_delete(old, e);
}

/* What a warm-up is asked to start and wait for, as ckpt.json keeps it. */
static json_t *
asked(const struct sp_warm *w)
{
	return json_pack("{s:s?, s:b, s:s?}", "start", w->start, "start_image",
	    w->start_image, "ready", w->ready);
}

/* 1 when the checkpoint was made starting and waiting for what w asks. */
static int
same_start(const char *ckpt, const struct sp_warm *w)
{
	char p[SP_PATH_MAX];
	json_t *j, *want, *have;
	struct sp_err ignored;
	int same;

	if (sp_path_fmt(p, sizeof p, &ignored, "%s/ckpt.json", ckpt) == -1 ||
	    (j = json_load_file(p, 0, NULL)) == NULL)
		return 0;
	want = asked(w);
	have = json_pack("{s:O?, s:b, s:O?}", "start", json_object_get(j,
	    "start"), "start_image", json_is_true(json_object_get(j,
	    "start_image")), "ready", json_object_get(j, "ready"));
	same = want != NULL && have != NULL && json_equal(want, have);
	json_decref(want);
	json_decref(have);
	json_decref(j);
	return same;
}

int
sp_template_warm(struct sp_ctx *x, const char *ref, const struct sp_warm *w,
    json_t **out, struct sp_err *e)
{
	json_t *config = NULL, *a;
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
	if (sp_lock_path(lock, 1, &fd, e) == -1)
		return -1;
	if (sp_subvol_exists(ckpt)) {
		if (sp_ckpt_current(ckpt, &ignored) == 1 && same_start(ckpt, w)) {
			reused = 1;
			/* One not root made it its group's, or space-init
			 * shared it. */
			if (geteuid() == 0 && sp_jail_share_ckpt(ckpt, e) == -1)
				goto out;
			goto done;
		}
		/* Made by an older build (or unreadable), or starting other
		 * things: a create boots cold past a stale one, and it is
		 * replaced here. */
		if (drop_stale(ckpt, e) == -1)
			goto out;
	}
	if (w->start_image && sp_template_config(x->conf.root, &t, &config,
	    e) == -1)
		goto out;
	if (sp_id_new(id, e) == -1 || sp_ckpt_uuid_new(uuid, e) == -1 ||
	    sp_path_fmt(work, sizeof work, e, "%s/templates/.warming-%s-%s",
	    x->conf.root, t.digest, id) == -1)
		goto out;
	if (sp_subvol_snapshot(tpath, work, 0, e) == -1)
		goto out;
	info = json_pack("{s:s, s:s, s:i, s:i, s:I, s:s}", "id", id, "uuid", uuid,
	    "memory_mib", w->memory_mib, "vcpus", w->vcpus, "created",
	    (json_int_t)time(NULL), "template", t.digest);
	a = asked(w);
	if (info == NULL || a == NULL || json_object_update(info, a) == -1) {
		json_decref(a);
		sp_err_set(e, SP_E_INTERNAL, 1, "out of memory");
		goto fail;
	}
	json_decref(a);
	/* Written before the boot, while the directory is its maker's: the
	 * VM's jail owns it while the VM runs, and what is there after is
	 * only trusted as its maker's (saved_as_made). */
	if (sp_path_fmt(p, sizeof p, e, "%s/ckpt.json", work) == -1 ||
	    write_new(p, info, e) == -1)
		goto fail;
	if (boot_and_save(x, work, id, uuid, w, json_object_get(config, "cmd"),
	    e) == -1)
		goto fail;
	if (geteuid() == 0) {
		if (saved_as_made(work, e) == -1 ||
		    sp_jail_share_ckpt(work, e) == -1 ||
		    sp_subvol_set_readonly(work, 1, e) == -1)
			goto fail;
		if (rename(work, ckpt) == -1) {
			sp_err_sys(e, SP_E_IO, "rename %s", work);
			goto fail;
		}
	} else {
		/* space-noded takes the directory from the jail (read-only,
		 * root's and the group's: what the group reads is the image,
		 * 0640 root's, and ckpt.json), then snapshots it into
		 * root's templates/. */
		if (sp_subvol_set_readonly(work, 1, e) == -1 ||
		    saved_as_made(work, e) == -1 ||
		    sp_subvol_snapshot(work, ckpt, 1, e) == -1)
			goto fail;
		sp_subvol_delete(work, &ignored);
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
	json_decref(config);
	if (fd >= 0)
		close(fd);
	return rc;
}
