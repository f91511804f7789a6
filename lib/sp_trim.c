/*
 * sp_trim: a running guest's free memory handed back to the host.  The
 * guest's trim op (guest/daemon-trim.c) takes its free memory and lets it
 * go, and its balloon's free page reporting tells QEMU, which gives those
 * pages back.  A VM restored from a checkpoint needs it once: on a host
 * that commits a page on a read, QEMU's restore has every page resident
 * (design.md, "Memory").  So a trim can be asked once per start of a VM:
 * $SPACE_RUN/pods/ID.trimmed keeps which QEMU was trimmed (its monitor
 * socket, made anew by each QEMU), where space-idle.timer, run as space,
 * writes it (the VM's run directory is its jail's).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "sp_vm.h"

#define TRIM_MS		60000	/* the guest's answer: TCG touches slowly */

/* Which QEMU runs the VM now, as a short string: the monitor socket's
 * inode and time. */
static int
qemu_mark(const char *dir, char *out, size_t n, struct sp_err *e)
{
	char p[SP_PATH_MAX];
	struct stat st;

	if (sp_path_fmt(p, sizeof p, e, "%s/" SP_QMP_SOCK, dir) == -1)
		return -1;
	if (stat(p, &st) == -1)
		return sp_err_sys(e, errno == ENOENT ? SP_E_BAD_STATE : SP_E_IO,
		    "%s", p);
	snprintf(out, n, "%llu %lld.%09ld\n", (unsigned long long)st.st_ino,
	    (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	return 0;
}

static int
kib_ok(const json_t *v)
{
	return json_is_integer(v) && json_integer_value(v) >= 0 &&
	    json_integer_value(v) <= (json_int_t)1 << 40;
}

int
sp_trim_chan(struct sp_chan *c, json_t **answer, struct sp_err *e)
{
	return sp_chan_call(c, json_pack("{s:s}", "op", "trim"), TRIM_MS,
	    answer, e);
}

int
sp_trim(struct sp_ctx *x, const char *id, int once, json_t **out,
    struct sp_err *e)
{
	char dir[SP_PATH_MAX], marker[SP_PATH_MAX], mark[64], had[64] = "";
	struct sp_sandbox_row r;
	struct sp_err ignored;
	char node[sizeof r.node];
	enum sp_state st;
	struct sp_chan *c = NULL;
	json_t *a = NULL;
	int64_t t0 = sp_clock_ms();
	FILE *f;

	*out = NULL;
	if (sp_id_check(id, e) == -1 || sp_db_sandbox_get(x->db, id, &r, e) == -1)
		return -1;
	snprintf(node, sizeof node, "%s", r.node);
	st = r.state;
	sp_db_row_release(&r);
	if (strcmp(node, x->conf.node) != 0)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "sandbox is on node "
		    "'%s': trim it there", node);
	if (st != SP_ST_RUNNING)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "sandbox is %s, not "
		    "running", sp_state_name(st));
	if (sp_sandbox_run_dir(x, id, dir, sizeof dir, e) == -1 ||
	    sp_pod_file(x->conf.run, id, SP_POD_TRIMMED, marker, sizeof marker,
	    e) == -1 ||
	    qemu_mark(dir, mark, sizeof mark, e) == -1)
		return -1;
	if (once && (f = fopen(marker, "re")) != NULL) {
		(void)!fgets(had, sizeof had, f);
		fclose(f);
		if (strcmp(had, mark) == 0) {
			*out = json_pack("{s:b, s:s}", "trimmed", 0, "why",
			    "trimmed since its VM started");
			return *out != NULL ? 0 :
			    sp_err_set(e, SP_E_NOMEM, 0, "trim");
		}
	}
	if (sp_chan_open(&c, x->conf.run, id, 30000, e) == -1 ||
	    sp_trim_chan(c, &a, e) == -1)
		goto fail;
	sp_chan_close(c);
	c = NULL;
	/* The guest's figures, as it says them: whole KiB, a sane size. */
	if (!kib_ok(json_object_get(a, "free_kib")) ||
	    !kib_ok(json_object_get(a, "taken_kib")) ||
	    !json_is_boolean(json_object_get(a, "balloon"))) {
		sp_err_set(e, SP_E_PROTOCOL, 0, "the guest's trim answer is "
		    "not free_kib, taken_kib and balloon");
		goto fail;
	}
	/* Best effort: without the mark, --once trims once more. */
	(void)sp_path_replace_text(marker, mark, &ignored);
	*out = json_pack("{s:b, s:I, s:I, s:b, s:I}", "trimmed", 1, "free_mib",
	    json_integer_value(json_object_get(a, "free_kib")) / 1024,
	    "taken_mib", json_integer_value(json_object_get(a,
	    "taken_kib")) / 1024, "balloon", json_is_true(json_object_get(a,
	    "balloon")), "ms", (json_int_t)(sp_clock_ms() - t0));
	json_decref(a);
	return *out != NULL ? 0 : sp_err_set(e, SP_E_NOMEM, 0, "trim");
fail:
	sp_chan_close(c);
	json_decref(a);
	return -1;
}
