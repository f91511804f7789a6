/*
 * sp_suspend: suspend a sandbox to the object store, restore it on any node
 * (design.md); the transfers themselves are sp_remote.c's.
 *
 * Suspend, holding the sandbox's lock, each step safe to do again:
 *   1. running/paused -> suspending (a rerun finds it suspending)
 *   2. VM paused; a full checkpoint, its row marked remote 'uploading' (a
 *      rerun reuses it)
 *   3. the template's lineage pushed if the store lacks it
 *   4. send -p template | zstd | encrypt (a fresh data key) -> upload
 *   5. manifest.json, last
 *   6. the row 'restorable', then the sandbox 'suspended'
 *   7. the VM and (unless kept) the node's copy released
 * A snapshot is restorable only when its row says so and its manifest, read
 * back, checks; the artifact is checked against the manifest before a byte
 * of it is applied.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sp_sandbox.h"

#define WRAPPED_MAX	SP_CRYPT_WRAPPED_MAX
#define RESTORE_READY_MS 60000

static int
snap_key(const char *id, const char *snap, const char *file, char *out,
    size_t n, struct sp_err *e)
{
	return sp_path_fmt(out, n, e, "sandboxes/%s/%s/%s", id, snap, file);
}

struct find_remote {
	const char *want;
	const char *tag;	/* or NULL: any */
	struct sp_snap_row r;
	int found;
};

static int
find_remote(const struct sp_snap_row *r, void *arg)
{
	struct find_remote *f = arg;

	/* Oldest first: the last one that matches is the newest. */
	if (strcmp(r->remote, f->want) == 0 && strcmp(r->kind, "full") == 0 &&
	    (f->tag == NULL || strcmp(r->tag, f->tag) == 0)) {
		f->r = *r;
		f->found = 1;
	}
	return 0;
}

/* The newest full snapshot of id whose remote is want (and tag, unless
 * NULL: a suspend takes only its own, never a backup's). */
static int
remote_snap(struct sp_ctx *x, const char *id, const char *want,
    const char *tag, struct sp_snap_row *r, struct sp_err *e)
{
	struct find_remote f;

	memset(&f, 0, sizeof f);
	f.want = want;
	f.tag = tag;
	if (sp_db_snap_each(x->db, id, NULL, find_remote, &f, e) == -1)
		return -1;
	if (!f.found)
		return 0;
	*r = f.r;
	return 1;
}

/*
 * The subvolume a sandbox's disk descends from is what its deltas are best
 * sent against (shared extents are not sent): the template, unless a restore
 * put it on a received copy of the template's lineage (lineages/), which the
 * restore notes in the sandbox's file "base".  Forks and snapshots carry it.
 */
#define BASE_FILE "base"

static int
write_base(const char *dir, const char *base, struct sp_err *e)
{
	char p[SP_PATH_MAX], line[SP_PATH_MAX + 2];

	if (sp_path_fmt(p, sizeof p, e, "%s/" BASE_FILE, dir) == -1 ||
	    sp_path_fmt(line, sizeof line, e, "%s\n", base) == -1)
		return -1;
	return sp_path_replace_text(p, line, e);
}

/* The base a snapshot names, if it still is a subvolume of that lineage. */
static int
read_base(const struct sp_ctx *x, const char *sdir, const char *lineage,
    char *out, size_t n)
{
	char p[SP_PATH_MAX], have[37];
	struct sp_err e;
	size_t k;
	int received;
	FILE *f;

	if (sp_path_fmt(p, sizeof p, &e, "%s/" BASE_FILE, sdir) == -1 ||
	    (f = fopen(p, "re")) == NULL)
		return -1;
	k = fgets(out, (int)n, f) != NULL ? strlen(out) : 0;
	fclose(f);
	if (k == 0 || out[k - 1] != '\n')
		return -1;
	out[k - 1] = '\0';
	if (strncmp(out, x->conf.root, strlen(x->conf.root)) != 0 ||
	    strstr(out, "/../") != NULL || !sp_subvol_exists(out) ||
	    sp_subvol_lineage(out, have, &received, &e) == -1 ||
	    strcmp(have, lineage) != 0)
		return -1;
	return 0;
}

/* Deletes what this node holds of a sandbox: its VM, its subvolume, its
 * snapshots' subvolumes; rows of snapshots not in the store go too. */
static int
release_local(struct sp_ctx *x, const char *id, int keep_local,
    struct sp_err *e)
{
	char dom[SP_ID_LEN + 4], dir[SP_PATH_MAX], run[SP_PATH_MAX];

	sp_sandbox_domain(id, dom);
	if (sp_virt_destroy(x->virt, dom, e) == -1 ||
	    sp_virt_undefine(x->virt, dom, e) == -1)
		return -1;
	sp_jail_release(x, id);
	if (keep_local)
		return 0;
	if (sp_sandbox_dir(x, id, dir, sizeof dir, e) == -1 ||
	    sp_sandbox_run_dir(x, id, run, sizeof run, e) == -1 ||
	    sp_subvol_delete(dir, e) == -1 ||
	    sp_snap_remove_all(x, id, e) == -1 ||
	    sp_jail_run_remove(x, id, run, e) == -1)
		return -1;
	return sp_db_snap_drop_local(x->db, id, e);
}

/* The crash point "WHO-POINT" (suspend-after-upload, backup-after-upload). */
static void
crash(const char *who, const char *point)
{
	char name[64];

	snprintf(name, sizeof name, "%s-%s", who, point);
	sp_crashpoint(name);
}

/*
 * Sends snapshot r of sandbox sb (a full checkpoint, taken) to the store:
 * the template's stream when the store lacks it (*pushed says), the delta
 * against the template, compressed and encrypted with a fresh data key
 * wrapped by the tenant's key (*size bytes), then the manifest; then the
 * snapshot is restorable.  Its crash points are named after crash_at
 * ("suspend", "backup").
 */
static int
send_up(struct sp_ctx *x, struct sp_store *s, const struct sp_sandbox_row *sb,
    const struct sp_snap_row *r, const char *crash_at, json_t **pushed,
    uint64_t *size, struct sp_err *e)
{
	char tenant[SP_NAME_MAX + 1], keyref[SP_PATH_MAX], wrapped[WRAPPED_MAX];
	char tref[2 * SP_NAME_MAX + 2], tpath[SP_PATH_MAX], lineage[37];
	char parent[SP_PATH_MAX];
	char sdir[SP_PATH_MAX], tmp[SP_PATH_MAX], key[SP_PATH_MAX];
	char mkey[SP_PATH_MAX], hex[65];
	const char *id = sb->id;
	unsigned char dk[32];
	struct sp_template_row t;
	int rc = -1, received, tfd;

	/* The template's lineage, which the delta is sent against. */
	if (sp_db_template_get(x->db, sb->template, &t, e) == -1 ||
	    sp_template_path(x->conf.root, &t, tpath, sizeof tpath, e) == -1 ||
	    sp_subvol_lineage(tpath, lineage, &received, e) == -1)
		return -1;
	if (sp_path_fmt(sdir, sizeof sdir, e, "%s/snapshots/%s/%s",
	    x->conf.root, id, r->snap) == -1 ||
	    read_base(x, sdir, lineage, parent, sizeof parent) == -1)
		snprintf(parent, sizeof parent, "%s", tpath);
	snprintf(tref, sizeof tref, "%s@%s", t.name, t.digest);
	if (sp_template_push(x, s, tref, pushed, e) == -1)
		return -1;
	crash(crash_at, "after-template");
	if (sp_remote_keyref(x, sb, tenant, keyref, sizeof keyref, e) == -1)
		return -1;
	sp_crypt_data_key(dk);
	if (sp_crypt_wrap(keyref, dk, wrapped, sizeof wrapped, e) == -1)
		goto wipe;
	if (snap_key(id, r->snap, "delta.zst.enc", key, sizeof key, e) == -1 ||
	    snap_key(id, r->snap, "manifest.json", mkey, sizeof mkey, e) == -1 ||
	    sp_remote_tmpfile(x, &tfd, tmp, sizeof tmp, e) == -1)
		goto wipe;
	if (sp_remote_send(x, parent, sdir, dk, tmp, e) == -1) {
		close(tfd);
		goto wipe;
	}
	crash(crash_at, "before-upload");
	rc = sp_remote_upload(s, tmp, key, size, hex, e);
	close(tfd);
	if (rc == -1)
		goto wipe;
	rc = -1;
	crash(crash_at, "after-upload");
	/* Plain text: no labels, no env (which may hold secrets); those
	 * stay in the DB row. */
	if (sp_remote_put_json(s, x, mkey, json_pack("{s:i, s:s, s:s, s:s, s:s, "
	    "s:s, s:I, s:i, s:i, s:{s:s, s:s, s:s}, "
	    "s:[{s:s, s:s, s:I, s:s}]}",
	    "version", 1, "id", id, "snap", r->snap, "node", x->conf.node,
	    "template", tref, "lineage", lineage, "taken", (json_int_t)r->taken,
	    "memory_mib", sb->memory_mib, "vcpus", sb->vcpus,
	    "key", "tenant", tenant, "kms", keyref, "wrapped", wrapped,
	    "artifacts", "name", "delta", "key", key, "bytes", (json_int_t)*size,
	    "sha256", hex), e) == -1)
		goto wipe;
	crash(crash_at, "after-manifest");
	if (sp_db_snap_set_remote(x->db, id, r->snap, "restorable", e) == -1)
		goto wipe;
	rc = 0;
wipe:
	sodium_memzero(dk, sizeof dk);
	return rc;
}

static int
suspend_locked(struct sp_ctx *x, struct sp_store *s, const char *id,
    int keep_local, json_t **out, struct sp_err *e)
{
	char dom[SP_ID_LEN + 4];
	struct sp_sandbox_row sb;
	struct sp_snap_row r;
	json_t *pushed = NULL;
	int64_t t0 = sp_clock_ms();
	uint64_t size = 0;
	int rc = -1, have;

	if (sp_db_sandbox_get(x->db, id, &sb, e) == -1)
		return -1;
	if (sb.state == SP_ST_SUSPENDED) {
		/* Done; what a suspend cut short after its last DB step left
		 * here is released now. */
		if (strcmp(sb.node, x->conf.node) == 0 &&
		    release_local(x, id, keep_local, e) == -1)
			goto out;
		*out = json_pack("{s:s, s:b, s:s, s:b}", "id", id, "ok", 1, "state",
		    "suspended", "changed", 0);
		rc = 0;
		goto out;
	}
	if (strcmp(sb.node, x->conf.node) != 0) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "%s is on node %s, not this one (%s)",
		    id, sb.node, x->conf.node);
		goto out;
	}
	if (sb.pod || (sb.state != SP_ST_RUNNING && sb.state != SP_ST_PAUSED &&
	    sb.state != SP_ST_SUSPENDING)) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "cannot suspend a sandbox that is %s",
		    sb.pod ? "a pod" : sp_state_name(sb.state));
		goto out;
	}
	if (sb.state != SP_ST_SUSPENDING &&
	    sp_db_transition(x->db, id, SP_ST_SUSPENDING, sb.gen, NULL, e) == -1)
		goto out;
	sp_crashpoint("suspend-after-claim");
	/* The checkpoint: this suspend's, when a rerun finds one; one that
	 * is restorable already only waits for the last steps. */
	sp_sandbox_domain(id, dom);
	if (sb.state == SP_ST_SUSPENDING &&
	    (have = remote_snap(x, id, "restorable", "suspend", &r, e)) != 0) {
		if (have == -1)
			goto out;
		goto finish;
	}
	if ((have = remote_snap(x, id, "uploading", "suspend", &r, e)) == -1)
		goto out;
	if (!have) {
		json_t *o = NULL;

		if (sp_virt_pause(x->virt, dom, e) == -1 ||
		    sp_snap_take_locked(x, id, 1, "suspend", &r, &o, e) == -1)
			goto out;
		json_decref(o);
		if (sp_db_snap_set_remote(x->db, id, r.snap, "uploading", e) == -1)
			goto out;
	}
	sp_crashpoint("suspend-after-checkpoint");
	if (send_up(x, s, &sb, &r, "suspend", &pushed, &size, e) == -1)
		goto out;
	sp_crashpoint("suspend-after-restorable");
finish:
	if (sp_db_transition(x->db, id, SP_ST_SUSPENDED, -1, NULL, e) == -1)
		goto out;
	sp_crashpoint("suspend-after-suspended");
	if (release_local(x, id, keep_local, e) == -1)
		goto out;
	*out = json_pack("{s:s, s:b, s:s, s:s, s:b, s:I, s:I, s:I}", "id", id,
	    "ok", 1, "snap", r.snap, "state", "suspended", "changed", 1,
	    "bytes_uploaded", (json_int_t)size, "template_bytes_uploaded",
	    json_integer_value(json_object_get(pushed, "bytes_uploaded")),
	    "ms", (json_int_t)(sp_clock_ms() - t0));
	rc = 0;
out:
	json_decref(pushed);
	sp_db_row_release(&sb);
	return rc;
}

/* Runs fn on id with the store open and the sandbox's lock held: the body
 * of sp_suspend and sp_backup (keep_local is suspend's). */
static int
with_store_locked(struct sp_ctx *x, const char *id, int keep_local,
    int (*fn)(struct sp_ctx *, struct sp_store *, const char *, int,
    json_t **, struct sp_err *), json_t **out, struct sp_err *e)
{
	struct sp_store *s = NULL;
	int fd, rc;

	*out = NULL;
	if (sp_id_check(id, e) == -1 || sp_ctx_virt(x, e) == -1 ||
	    sp_store_open(&s, x->conf.store, e) == -1)
		return -1;
	if (sp_sandbox_lock(x, id, 1, &fd, e) == -1) {
		sp_store_close(s);
		return -1;
	}
	rc = fn(x, s, id, keep_local, out, e);
	sp_sandbox_unlock(fd);
	sp_store_close(s);
	return rc;
}

int
sp_suspend(struct sp_ctx *x, const char *id, int keep_local, json_t **out,
    struct sp_err *e)
{
	return with_store_locked(x, id, keep_local, suspend_locked, out, e);
}

/* ---- backup: a running sandbox's newest state in the store ---- */

static int
backup_locked(struct sp_ctx *x, struct sp_store *s, const char *id,
    int keep_local, json_t **out, struct sp_err *e)
{
	struct sp_sandbox_row sb;
	struct sp_snap_row r;
	json_t *pushed = NULL, *o = NULL;
	int64_t t0 = sp_clock_ms();
	uint64_t size = 0;
	int rc = -1;

	if (sp_db_sandbox_get(x->db, id, &sb, e) == -1)
		return -1;
	if (strcmp(sb.node, x->conf.node) != 0) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "%s is on node %s, not this one (%s)",
		    id, sb.node, x->conf.node);
		goto out;
	}
	if (sb.pod || (sb.state != SP_ST_RUNNING && sb.state != SP_ST_PAUSED)) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "cannot back up a sandbox that is %s",
		    sb.pod ? "a pod" : sp_state_name(sb.state));
		goto out;
	}
	/* A full checkpoint (a running guest is paused for its memory only,
	 * and goes on), sent up as a suspend sends its own. */
	if (sp_snap_take_locked(x, id, 1, "backup", &r, &o, e) == -1)
		goto out;
	json_decref(o);
	if (sp_db_snap_set_remote(x->db, id, r.snap, "uploading", e) == -1)
		goto out;
	sp_crashpoint("backup-after-checkpoint");
	if (send_up(x, s, &sb, &r, "backup", &pushed, &size, e) == -1 ||
	    sp_db_snap_supersede(x->db, id, r.snap, e) == -1)
		goto out;
	*out = json_pack("{s:s, s:b, s:s, s:s, s:I, s:I, s:I, s:I}", "id", id,
	    "ok", 1, "snap", r.snap, "state", sp_state_name(sb.state),
	    "paused_ms", (json_int_t)r.paused_ms, "bytes_uploaded",
	    (json_int_t)size, "template_bytes_uploaded",
	    json_integer_value(json_object_get(pushed, "bytes_uploaded")),
	    "ms", (json_int_t)(sp_clock_ms() - t0));
	rc = 0;
out:
	json_decref(pushed);
	sp_db_row_release(&sb);
	return rc;
}

int
sp_backup(struct sp_ctx *x, const char *id, json_t **out, struct sp_err *e)
{
	/* A backup keeps everything here: keep_local means nothing to it. */
	return with_store_locked(x, id, 1, backup_locked, out, e);
}

/* ---- restore ---- */

/* The manifest of id's snapshot, read back and checked. */
static int
read_manifest(struct sp_ctx *x, struct sp_store *s, const char *id,
    const char *snap, json_t **m, struct sp_err *e)
{
	char mkey[SP_PATH_MAX];
	const char *mid, *msnap, *tref, *lin, *wrapped, *kms, *akey, *hex;
	json_int_t bytes;
	json_t *a;
	int version;

	if (snap_key(id, snap, "manifest.json", mkey, sizeof mkey, e) == -1)
		return -1;
	if (sp_remote_get_json(s, x, mkey, m, e) == -1) {
		if (e->code == SP_E_NOT_FOUND)
			sp_err_set(e, SP_E_NOT_RESTORABLE, 0, "snapshot %s of %s has "
			    "no manifest in the store", snap, id);
		return -1;
	}
	if (json_unpack(*m, "{s:i, s:s, s:s, s:s, s:s, s:{s:s, s:s}, s:o}",
	    "version", &version, "id", &mid, "snap", &msnap, "template", &tref,
	    "lineage", &lin, "key", "wrapped", &wrapped, "kms", &kms,
	    "artifacts", &a) == -1 || version != 1 || strcmp(mid, id) != 0 ||
	    strcmp(msnap, snap) != 0 || strlen(lin) != 36 ||
	    !json_is_array(a) || json_array_size(a) != 1 ||
	    json_unpack(json_array_get(a, 0), "{s:s, s:I, s:s}", "key", &akey,
	    "bytes", &bytes, "sha256", &hex) == -1 || bytes < 0 ||
	    strlen(hex) != 64) {
		json_decref(*m);
		*m = NULL;
		return sp_err_set(e, SP_E_CORRUPT, 0, "%s: not a manifest of %s/%s",
		    mkey, id, snap);
	}
	return 0;
}

/* The domain of a restored sandbox, with this node's paths and its own
 * CPU quota (cpu_pct, 0 for the node's). */
static int
define_here(struct sp_ctx *x, const char *id, const char *dir,
    const struct sp_ckpt_info *ci, int cpu_pct, char **xml, struct sp_err *e)
{
	char run[SP_PATH_MAX], p[SP_PATH_MAX];
	struct sp_jail jail;

	/* Its XML beside its disk while the directory is still its
	 * maker's, then the directory its jail's. */
	if (sp_sandbox_run_dir(x, id, run, sizeof run, e) == -1 ||
	    sp_path_fmt(p, sizeof p, e, "%s/domain.xml", dir) == -1 ||
	    sp_jail_get(x, id, &jail, e) == -1 ||
	    sp_sandbox_restore_xml(x, id, dir, ci, cpu_pct, &jail, xml, e) == -1)
		return -1;
	if (sp_path_replace_text(p, *xml, e) == -1 ||
	    sp_jail_dirs(x, &jail, dir, run, e) == -1)
		return -1;
	return sp_virt_define(x->virt, *xml, e);
}

static int
restore_locked_store(struct sp_ctx *x, struct sp_store *s, const char *id,
    json_t **out, struct sp_err *e)
{
	char sdir[SP_PATH_MAX], parent[SP_PATH_MAX], dir[SP_PATH_MAX];
	char tmp[SP_PATH_MAX], sav[SP_PATH_MAX], dom[SP_ID_LEN + 4];
	char base[SP_PATH_MAX];
	const char *tref, *lin, *wrapped, *kms, *akey, *hex;
	unsigned char dk[32];
	struct sp_sandbox_row sb;
	struct sp_template_row t;
	struct sp_snap_row r;
	struct sp_ckpt_info ci;
	struct sp_err lost;
	json_t *m = NULL, *labels = NULL, *env = NULL;
	json_int_t bytes;
	int64_t t0 = sp_clock_ms();
	uint64_t tbytes = 0;
	char *xml = NULL;
	int rc = -1, have, pulled, local, tfd;

	if (sp_db_sandbox_get(x->db, id, &sb, e) == -1)
		return -1;
	if (sb.state == SP_ST_RUNNING && strcmp(sb.node, x->conf.node) == 0) {
		*out = json_pack("{s:s, s:b, s:s, s:s, s:b}", "id", id, "ok", 1,
		    "state", "running", "node", x->conf.node, "changed", 0);
		rc = 0;
		goto out;
	}
	if (sb.state == SP_ST_RESTORING && strcmp(sb.node, x->conf.node) != 0) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "%s is being restored on node %s",
		    id, sb.node);
		goto out;
	}
	/* A lost one (its node's lease lapsed) comes back from its newest
	 * backup, as a suspended one from its suspend. */
	if (sb.state != SP_ST_SUSPENDED && sb.state != SP_ST_RESTORING &&
	    sb.state != SP_ST_LOST) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "cannot restore a sandbox that is "
		    "%s", sp_state_name(sb.state));
		goto out;
	}
	if ((have = remote_snap(x, id, "restorable", NULL, &r, e)) == -1)
		goto out;
	/* A restore cut short after it marked its snapshot goes on with it. */
	if (!have && sb.state == SP_ST_RESTORING &&
	    (have = remote_snap(x, id, "restored", NULL, &r, e)) == -1)
		goto out;
	if (!have) {
		sp_err_set(e, SP_E_NOT_RESTORABLE, 0, "%s has no restorable "
		    "snapshot", id);
		goto out;
	}
	/* Checked before anything changes: a bad manifest leaves it be. */
	if (read_manifest(x, s, id, r.snap, &m, e) == -1)
		goto out;
	json_unpack(m, "{s:s, s:s, s:{s:s, s:s}, s:[{s:s, s:I, s:s}]}",
	    "template", &tref, "lineage", &lin, "key", "wrapped", &wrapped,
	    "kms", &kms, "artifacts", "key", &akey, "bytes", &bytes, "sha256",
	    &hex);
	if (sp_crypt_unwrap(kms, wrapped, dk, e) == -1)
		goto out;
	/* On the generation read: a lost node that came back and took its
	 * sandbox first wins, and this restore does nothing. */
	if ((sb.state == SP_ST_SUSPENDED || sb.state == SP_ST_LOST) &&
	    sp_db_transition(x->db, id, SP_ST_RESTORING, sb.gen, NULL, e) == -1)
		goto wipe;
	if (sp_db_sandbox_place(x->db, id, x->conf.node, NULL, e) == -1)
		goto wipe;
	sp_crashpoint("restore-after-claim");
	if (sp_db_template_get(x->db, tref, &t, e) == -1 ||
	    sp_remote_lineage(x, s, &t, lin, base, sizeof base, &pulled,
	    &tbytes, e) == -1)
		goto back;
	if (sp_path_fmt(parent, sizeof parent, e, "%s/snapshots/%s",
	    x->conf.root, id) == -1 ||
	    sp_path_fmt(sdir, sizeof sdir, e, "%s/%s", parent, r.snap) == -1 ||
	    sp_sandbox_dir(x, id, dir, sizeof dir, e) == -1 ||
	    sp_path_fmt(sav, sizeof sav, e, "%s/mem.sav", dir) == -1)
		goto back;
	/* Kept here by suspend --keep-local: nothing to download. */
	local = sp_subvol_exists(sdir) && sp_ckpt_read(sdir, &ci, &lost) == 0;
	if (!local) {
		if (sp_subvol_delete(sdir, e) == -1 ||
		    sp_subvol_mkdirs(parent, 0700, e) == -1 ||
		    sp_remote_tmpfile(x, &tfd, tmp, sizeof tmp, e) == -1)
			goto back;
		if (sp_remote_download(s, akey, tmp, (uint64_t)bytes, hex, e) == -1) {
			close(tfd);
			goto back;
		}
		sp_crashpoint("restore-after-download");
		rc = sp_remote_receive(x, tmp, dk, parent, e);
		close(tfd);
		if (rc == -1) {
			sp_subvol_delete(sdir, &lost);
			goto back;
		}
		rc = -1;
		if (sp_ckpt_read(sdir, &ci, e) == -1)
			goto back;
	} else
		bytes = 0;
	sp_crashpoint("restore-after-receive");
	sp_sandbox_domain(id, dom);
	if (sp_virt_destroy(x->virt, dom, e) == -1 ||
	    sp_subvol_delete(dir, e) == -1 ||
	    sp_subvol_snapshot(sdir, dir, 0, e) == -1 ||
	    sp_jail_disk_limit(x, dir, 0, e) == -1 ||
	    write_base(dir, base, e) == -1 ||
	    define_here(x, id, dir, &ci, sb.cpu_pct, &xml, e) == -1 ||
	    sp_virt_restore(x->virt, sav, xml, dom, e) == -1 ||
	    sp_jail_started(x, dom, e) == -1)
		goto back;
	unlink(sav);
	if (sp_chan_wait_ready(x->conf.run, id, RESTORE_READY_MS, e) == -1 ||
	    sp_volume_replug(x, id, e) == -1)
		goto back;
	labels = json_loads(sb.labels ? sb.labels : "{}", 0, NULL);
	env = json_loads(sb.env ? sb.env : "[]", 0, NULL);
	/* It runs on from here: that snapshot is history now, not what a
	 * later suspend of it left (the store keeps its objects).  Marked
	 * first, so that no suspend can take it for its own; a restore cut
	 * short after this finds it as restored. */
	if (sp_sandbox_hand_identity(x, id, labels, env, e) == -1 ||
	    sp_db_snap_set_remote(x->db, id, r.snap, "restored", e) == -1 ||
	    sp_db_snap_supersede(x->db, id, NULL, e) == -1 ||
	    sp_db_transition(x->db, id, SP_ST_RUNNING, -1, NULL, e) == -1)
		goto back;
	/* The sandbox is a copy of it now: the checkpoint's own subvolume
	 * (its memory image above all) need not stay; the row does, for the
	 * objects in the store. */
	sp_subvol_delete(sdir, &lost);
	*out = json_pack("{s:s, s:b, s:s, s:s, s:s, s:b, s:I, s:I, s:I}", "id",
	    id, "ok", 1, "snap", r.snap, "state", "running", "node",
	    x->conf.node, "changed", 1, "bytes_downloaded", bytes,
	    "template_bytes_downloaded", (json_int_t)tbytes, "ms",
	    (json_int_t)(sp_clock_ms() - t0));
	rc = 0;
	goto wipe;
back:
	/* What failed here is undone; the store still has it all. */
	sp_virt_destroy(x->virt, dom, &lost);
	sp_virt_undefine(x->virt, dom, &lost);
	sp_subvol_delete(dir, &lost);
	sp_db_snap_set_remote(x->db, id, r.snap, "restorable", &lost);
	sp_db_transition(x->db, id, SP_ST_SUSPENDED, -1, NULL, &lost);
wipe:
	sodium_memzero(dk, sizeof dk);
out:
	free(xml);
	json_decref(labels);
	json_decref(env);
	json_decref(m);
	sp_db_row_release(&sb);
	return rc;
}

int
sp_restore_locked(struct sp_ctx *x, const char *id, json_t **out,
    struct sp_err *e)
{
	struct sp_store *s = NULL;
	int rc;

	*out = NULL;
	if (sp_ctx_virt(x, e) == -1 || sp_store_open(&s, x->conf.store, e) == -1)
		return -1;
	rc = restore_locked_store(x, s, id, out, e);
	sp_store_close(s);
	return rc;
}

int
sp_restore(struct sp_ctx *x, const char *id, const char *node, json_t **out,
    struct sp_err *e)
{
	struct sp_sandbox_row sb;
	int fd, rc;

	*out = NULL;
	if (sp_id_check(id, e) == -1)
		return -1;
	if (node != NULL && strcmp(node, x->conf.node) != 0) {
		/* Another node's: its reconcile pass restores it there; ""
		 * is the node the scheduler will pick (space-schedule). */
		if ((node[0] != '\0' && sp_name_check("node", node, e) == -1) ||
		    sp_db_sandbox_get(x->db, id, &sb, e) == -1)
			return -1;
		rc = sb.state == SP_ST_SUSPENDED || sb.state == SP_ST_LOST ? 0 : -1;
		sp_db_row_release(&sb);
		if (rc == -1)
			return sp_err_set(e, SP_E_BAD_STATE, 0, "only a suspended or "
			    "lost sandbox is restored elsewhere");
		if (sp_db_sandbox_place(x->db, id, node, "running", e) == -1)
			return -1;
		*out = json_pack("{s:s, s:b, s:s, s:o, s:b}", "id", id, "ok", 1,
		    "state", "suspended", "node", node[0] ? json_string(node) :
		    json_null(), "queued", 1);
		return 0;
	}
	if (sp_sandbox_lock(x, id, 1, &fd, e) == -1)
		return -1;
	rc = sp_restore_locked(x, id, out, e);
	sp_sandbox_unlock(fd);
	return rc;
}

/* ---- key rotation ---- */

struct rotate {
	struct sp_ctx *x;
	struct sp_store *s;
	const char *tenant, *keyref;
	int (*fn)(json_t *, void *);
	void *arg;
	int failed;
};

static int
rotate_one(const struct sp_snap_row *r, void *arg)
{
	struct rotate *ro = arg;
	char mkey[SP_PATH_MAX], wrapped[WRAPPED_MAX];
	const char *old, *kms, *tenant;
	unsigned char dk[32];
	struct sp_sandbox_row sb;
	struct sp_err e;
	json_t *m = NULL, *o, *labels;
	int rc = -1, mine;

	if (strcmp(r->remote, "restorable") != 0 &&
	    strcmp(r->remote, "restored") != 0)
		return 0;
	/* Only this tenant's sandboxes (their label), before any download. */
	if (sp_db_sandbox_get(ro->x->db, r->id, &sb, &e) == -1)
		return 0;
	labels = json_loads(sb.labels ? sb.labels : "{}", 0, NULL);
	mine = strcmp(json_string_value(json_object_get(labels, "tenant")) ?
	    json_string_value(json_object_get(labels, "tenant")) : "default",
	    ro->tenant) == 0;
	json_decref(labels);
	sp_db_row_release(&sb);
	if (!mine)
		return 0;
	if (read_manifest(ro->x, ro->s, r->id, r->snap, &m, &e) == -1)
		goto tell;
	if (json_unpack(m, "{s:{s:s, s:s, s:s}}", "key", "tenant", &tenant,
	    "wrapped", &old, "kms", &kms) == -1) {
		sp_err_set(&e, SP_E_CORRUPT, 0, "manifest without a tenant");
		goto tell;
	}
	if (strcmp(tenant, ro->tenant) != 0) {
		json_decref(m);
		return 0;
	}
	if (sp_crypt_unwrap(kms, old, dk, &e) == -1)
		goto tell;
	rc = sp_crypt_wrap(ro->keyref, dk, wrapped, sizeof wrapped, &e);
	sodium_memzero(dk, sizeof dk);
	if (rc == -1)
		goto tell;
	json_object_set_new(json_object_get(m, "key"), "wrapped",
	    json_string(wrapped));
	json_object_set_new(json_object_get(m, "key"), "kms",
	    json_string(ro->keyref));
	rc = snap_key(r->id, r->snap, "manifest.json", mkey, sizeof mkey, &e) == -1 ?
	    -1 : sp_remote_put_json(ro->s, ro->x, mkey, json_incref(m), &e);
tell:
	if (rc == -1) {
		ro->failed = 1;
		o = json_pack("{s:s, s:b, s:s, s:s, s:s}", "id", r->id, "ok", 0,
		    "snap", r->snap, "error", sp_code_name(e.code), "msg", e.msg);
	} else
		o = json_pack("{s:s, s:b, s:s, s:b}", "id", r->id, "ok", 1,
		    "snap", r->snap, "rewrapped", 1);
	if (o != NULL)
		ro->fn(o, ro->arg);
	json_decref(m);
	return 0;
}

int
sp_key_rotate(struct sp_ctx *x, const char *tenant, const char *keyref,
    int (*fn)(json_t *, void *), void *arg, struct sp_err *e)
{
	struct rotate ro = { x, NULL, tenant, keyref, fn, arg, 0 };
	unsigned char probe[32];
	char wrapped[WRAPPED_MAX];
	int rc;

	if (sp_name_check("tenant", tenant, e) == -1)
		return -1;
	/* The new key must work before anything is wrapped with it. */
	sp_crypt_data_key(probe);
	rc = sp_crypt_wrap(keyref, probe, wrapped, sizeof wrapped, e) == -1 ||
	    sp_crypt_unwrap(keyref, wrapped, probe, e) == -1 ? -1 : 0;
	sodium_memzero(probe, sizeof probe);
	if (rc == -1 || sp_store_open(&ro.s, x->conf.store, e) == -1)
		return -1;
	rc = sp_db_snap_each(x->db, NULL, NULL, rotate_one, &ro, e);
	sp_store_close(ro.s);
	if (rc == -1)
		return -1;
	if (ro.failed)
		return sp_err_set(e, SP_E_PARTIAL, 0, "some snapshots keep their "
		    "old key; the tenant's key is unchanged");
	return sp_db_tenant_key_set(x->db, tenant, keyref, e);
}

/* ---- forgetting ---- */

struct forget {
	struct sp_ctx *x;
	struct sp_store *s;	/* opened at the first snapshot in the store */
	struct sp_err *e;
	int failed;
};

static int
forget_one(const struct sp_snap_row *r, void *arg)
{
	static const char *const files[] = { "manifest.json", "delta.zst.enc" };
	struct forget *f = arg;
	char key[SP_PATH_MAX];
	size_t i;

	if (r->remote[0] == '\0' || f->failed)
		return 0;
	if (f->s == NULL && sp_store_open(&f->s, f->x->conf.store, f->e) == -1) {
		f->failed = 1;
		return 0;
	}
	/* The manifest first: without it nothing is restorable any more. */
	for (i = 0; i < sizeof files / sizeof files[0]; i++)
		if (snap_key(r->id, r->snap, files[i], key, sizeof key, f->e) == -1 ||
		    sp_store_delete(f->s, key, f->e) == -1) {
			f->failed = 1;
			return 0;
		}
	return 0;
}

int
sp_remote_forget(struct sp_ctx *x, const char *id, struct sp_err *e)
{
	struct forget f = { x, NULL, e, 0 };
	int rc;

	rc = sp_db_snap_each(x->db, id, NULL, forget_one, &f, e);
	if (f.s != NULL)
		sp_store_close(f.s);
	return rc == -1 || f.failed ? -1 : 0;
}
