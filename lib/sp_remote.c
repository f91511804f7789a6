/*
 * sp_remote: what moves between a node and the object store (design.md): the
 * send/receive pipelines, checked uploads and downloads, manifests, and
 * templates by lineage.  sp_suspend.c moves sandboxes with them.
 *
 * A sandbox goes to the object store and back, on any node:
 * Suspend: the VM is paused and a full checkpoint taken (disk and memory of
 * one instant, snapshots/<id>/<snap>/).  The checkpoint goes out as one
 * artifact, `btrfs send -p <template>` (only what differs from the template,
 * the memory image included) | zstd | encrypted with a fresh data key; then
 * manifest.json, last: the artifact's size and SHA-256, the template and the
 * btrfs lineage the delta applies to, the data key wrapped by the tenant's
 * key service.  Only then is the snapshot's row 'restorable' and the sandbox
 * 'suspended'; the VM and (unless kept) the node's copy are released.  Each
 * step can be done again, so a suspend cut short is finished by running it
 * again; nothing restorable depends on a step not yet done.
 *
 * Restore: the manifest is read and checked, the artifact downloaded and
 * checked against it before anything is applied, the data key unwrapped,
 * the template's lineage pulled when this node lacks it, the stream
 * decrypted | unzstd | `btrfs receive`d, and the VM restored from the
 * memory image with this node's paths: its processes go on.
 *
 * Store layout:
 *   templates/<name>@<digest>/<lineage>/{stream.zst,manifest.json}
 *   sandboxes/<id>/<snap>/{delta.zst.enc,manifest.json}
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sp_storage.h"

#define MANIFEST_MAX	(64 * 1024)
#define TENANT_LABEL	"tenant"

/* ---- small pieces ---- */

int
sp_remote_tmp(const struct sp_ctx *x, const char *name, char *out, size_t n,
    struct sp_err *e)
{
	char dir[SP_PATH_MAX];

	if (sp_path_fmt(dir, sizeof dir, e, "%s/tmp/transfer", x->conf.root) ==
	    -1 ||
	    sp_path_mkdirs(dir, 0700, e) == -1)
		return -1;
	return sp_path_fmt(out, n, e, "%s/%s", dir, name);
}

int
sp_remote_tmpfile(const struct sp_ctx *x, int *fd, char *path, size_t n,
    struct sp_err *e)
{
	char dir[SP_PATH_MAX];

	if (sp_remote_tmp(x, "", dir, sizeof dir, e) == -1)
		return -1;
	if ((*fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) == -1)
		return sp_err_sys(e, SP_E_IO, "a file without a name in %s", dir);
	if (sp_path_fmt(path, n, e, "/proc/self/fd/%d", *fd) == -1) {
		close(*fd);
		*fd = -1;
		return -1;
	}
	return 0;
}

/* Puts the JSON object j (stolen) at key. */
int
sp_remote_put_json(struct sp_store *s, const struct sp_ctx *x, const char *key,
    json_t *j, struct sp_err *e)
{
	char p[SP_PATH_MAX];
	uint64_t bytes;
	int fd, rc;

	if (j == NULL)
		return sp_err_set(e, SP_E_INTERNAL, 0, "out of memory");
	if (sp_remote_tmp(x, "manifest.XXXXXX", p, sizeof p, e) == -1 ||
	    (fd = mkostemp(p, O_CLOEXEC)) == -1) {
		json_decref(j);
		return e->code != SP_E_NONE ? -1 : sp_err_sys(e, SP_E_IO, "mkstemp");
	}
	unlink(p);
	rc = json_dumpfd(j, fd, JSON_INDENT(2) | JSON_SORT_KEYS) == 0 &&
	    lseek(fd, 0, SEEK_SET) == 0 ? 0 : sp_err_sys(e, SP_E_IO, "manifest");
	json_decref(j);
	if (rc == 0)
		rc = sp_store_put(s, key, fd, &bytes, e);
	close(fd);
	return rc;
}

/* Reads the JSON object at key (bounded). */
int
sp_remote_get_json(struct sp_store *s, const struct sp_ctx *x, const char *key,
    json_t **out, struct sp_err *e)
{
	char p[SP_PATH_MAX], *text = NULL;
	json_error_t je;
	uint64_t bytes;
	ssize_t n;
	int fd, rc = -1;

	*out = NULL;
	if (sp_remote_tmp(x, "get.XXXXXX", p, sizeof p, e) == -1)
		return -1;
	if ((fd = mkostemp(p, O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_IO, "mkstemp");
	unlink(p);
	if (sp_store_get(s, key, fd, &bytes, e) == -1)
		goto out;
	if (bytes > MANIFEST_MAX) {
		sp_err_set(e, SP_E_CORRUPT, 0, "%s: %llu bytes, more than a "
		    "manifest", key, (unsigned long long)bytes);
		goto out;
	}
	if ((text = malloc(bytes + 1)) == NULL) {
		sp_err_sys(e, SP_E_INTERNAL, "malloc");
		goto out;
	}
	if ((n = pread(fd, text, bytes, 0)) != (ssize_t)bytes) {
		sp_err_sys(e, SP_E_IO, "read %s", key);
		goto out;
	}
	text[bytes] = '\0';
	if ((*out = json_loads(text, JSON_REJECT_DUPLICATES, &je)) == NULL ||
	    !json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		sp_err_set(e, SP_E_CORRUPT, 0, "%s: not a JSON object: %s", key,
		    je.text);
		goto out;
	}
	rc = 0;
out:
	free(text);
	close(fd);
	return rc;
}

/* The key service that wraps the data keys of the sandbox's tenant: its
 * label "tenant" (else "default") names a row of space-key, else SPACE_KMS. */
int
sp_remote_keyref(struct sp_ctx *x, const struct sp_sandbox_row *sb,
    char tenant[SP_NAME_MAX + 1], char *keyref, size_t n, struct sp_err *e)
{
	json_t *labels = json_loads(sb->labels ? sb->labels : "{}", 0, NULL);
	const char *t = json_string_value(json_object_get(labels, TENANT_LABEL));
	struct sp_err ge;

	snprintf(tenant, SP_NAME_MAX + 1, "%s", t && *t ? t : "default");
	json_decref(labels);
	if (sp_db_tenant_key_get(x->db, tenant, keyref, n, &ge) == 0)
		return 0;
	if (ge.code != SP_E_NOT_FOUND) {
		*e = ge;
		return -1;
	}
	snprintf(keyref, n, "%s", x->conf.kms);
	/* The node's own default key is made on first use. */
	if (strncmp(keyref, "file:", 5) == 0 && access(keyref + 5, F_OK) == -1 &&
	    strcmp(keyref, x->conf.kms) == 0) {
		char dir[SP_PATH_MAX], *slash;

		snprintf(dir, sizeof dir, "%s", keyref + 5);
		if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
			*slash = '\0';
			if (sp_path_mkdirs(dir, 0700, e) == -1)
				return -1;
		}
		return sp_crypt_key_create(keyref + 5, e);
	}
	return 0;
}

/* ---- pipelines ---- */

/* abs as a path relative to the root, for space-noded. */
static int
rel_path(const struct sp_ctx *x, const char *abs, char *out, size_t n,
    struct sp_err *e)
{
	const char *rel = sp_path_beneath(x->conf.root, abs);

	if (rel == NULL)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s is not beneath %s",
		    abs, x->conf.root);
	return sp_path_fmt(out, n, e, "%s", rel);
}

/*
 * Asks space-noded (when the process goes through it, sp_noded_for) to run
 * btrfs send of subvol (against parent when not NULL) into fd, or btrfs
 * receive into dir (subvol NULL) from fd: 1 with the connection in *conn
 * for sp_noded_answer once the stream is through; 0 when this process
 * runs btrfs itself.
 */
static int
noded_stream(const struct sp_ctx *x, const char *parent, const char *subvol,
    const char *dir, int fd, char sock[SP_PATH_MAX], int *conn,
    struct sp_err *e)
{
	char path[SP_PATH_MAX], par[SP_PATH_MAX];
	int via;

	if ((via = sp_noded_for(&x->conf, sock, e)) != 1)
		return via;
	if (rel_path(x, subvol != NULL ? subvol : dir, path, sizeof path,
	    e) == -1 || (parent != NULL && rel_path(x, parent, par, sizeof par,
	    e) == -1))
		return -1;
	if (subvol == NULL)
		*conn = sp_noded_request(sock, json_pack("{s:s, s:s}", "op",
		    "subvol-receive", "path", path), fd, e);
	else if (parent != NULL)
		*conn = sp_noded_request(sock, json_pack("{s:s, s:s, s:s}", "op",
		    "subvol-send", "path", path, "parent", par), fd, e);
	else
		*conn = sp_noded_request(sock, json_pack("{s:s, s:s}", "op",
		    "subvol-send", "path", path), fd, e);
	return *conn == -1 ? -1 : 1;
}

/*
 * `btrfs send [-p parent] subvol` | zstd, then encrypted with key when it is
 * not NULL, into the file at out_path.  The send is space-noded's when
 * the process goes through it (btrfs send needs CAP_SYS_ADMIN).
 */
int
sp_remote_send(const struct sp_ctx *x, const char *parent, const char *subvol,
    const unsigned char *key, const char *out_path, struct sp_err *e)
{
	struct sigaction old_pipe;
	char *send_p[] = { "btrfs", "-q", "send", "-p", (char *)parent,
	    (char *)subvol, NULL };
	char *send_full[] = { "btrfs", "-q", "send", (char *)subvol, NULL };
	char *zstd[] = { "zstd", "-q", "-c", "-3", "-T0", NULL };
	int a[2] = { -1, -1 }, b[2] = { -1, -1 }, out = -1, rc = -1, errs;
	int conn = -1, via;
	char sock[SP_PATH_MAX];
	pid_t ps = -1, pz = -1;
	struct sp_err we;
	uint64_t n;

	if ((errs = sp_proc_errfd(e)) == -1)
		return -1;
	if ((out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600)) == -1) {
		close(errs);
		return sp_err_sys(e, SP_E_IO, "%s", out_path);
	}
	/* A stage that dies must be an error here, not our death. */
	sigaction(SIGPIPE, &(struct sigaction){ .sa_handler = SIG_IGN }, &old_pipe);
	if (pipe2(a, O_CLOEXEC) == -1 || (key != NULL && pipe2(b, O_CLOEXEC) == -1)) {
		sp_err_sys(e, SP_E_INTERNAL, "pipe");
		goto out;
	}
	if ((via = noded_stream(x, parent, subvol, NULL, a[1], sock, &conn,
	    e)) == -1 || (!via && sp_proc_spawn(parent ? send_p : send_full, -1,
	    a[1], errs, &ps, e) == -1))
		goto out;
	close(a[1]);
	a[1] = -1;
	if (sp_proc_spawn(zstd, a[0], key ? b[1] : out, errs, &pz, e) == -1)
		goto out;
	close(a[0]);
	a[0] = -1;
	if (key != NULL) {
		close(b[1]);
		b[1] = -1;
		if (sp_crypt_encrypt(b[0], out, key, &n, e) == -1)
			goto out;
	}
	rc = 0;
out:
	if (a[0] >= 0) close(a[0]);
	if (a[1] >= 0) close(a[1]);
	if (b[0] >= 0) close(b[0]);
	if (b[1] >= 0) close(b[1]);
	if (ps > 0 && sp_proc_wait(ps, "btrfs send", errs, rc == 0 ? e : &we) == -1)
		rc = -1;
	if (conn != -1 && sp_noded_answer(conn, sock, NULL, rc == 0 ? e :
	    &we) == -1)
		rc = -1;
	if (pz > 0 && sp_proc_wait(pz, "zstd", errs, rc == 0 ? e : &we) == -1)
		rc = -1;
	if (rc == 0 && fsync(out) == -1)
		rc = sp_err_sys(e, SP_E_IO, "fsync %s", out_path);
	close(out);
	close(errs);
	sigaction(SIGPIPE, &old_pipe, NULL);
	return rc;
}

/* The file at in_path, decrypted with key (when not NULL) | unzstd |
 * `btrfs receive dir`: space-noded's when the process goes through it. */
int
sp_remote_receive(const struct sp_ctx *x, const char *in_path,
    const unsigned char *key, const char *dir, struct sp_err *e)
{
	struct sigaction old_pipe;
	char *recv[] = { "btrfs", "-q", "receive", (char *)dir, NULL };
	char *unzstd[] = { "zstd", "-q", "-d", "-c", NULL };
	int a[2] = { -1, -1 }, b[2] = { -1, -1 }, in = -1, rc = -1, errs;
	pid_t pr = -1, pz = -1;
	struct sp_err de = { 0 }, ez, er;
	char sock[SP_PATH_MAX];
	int rz, rr, ran, conn = -1, via;
	uint64_t n;

	if ((errs = sp_proc_errfd(e)) == -1)
		return -1;
	if ((in = open(in_path, O_RDONLY | O_CLOEXEC)) == -1) {
		close(errs);
		return sp_err_sys(e, SP_E_IO, "%s", in_path);
	}
	/* A stage that dies must be an error here, not our death. */
	sigaction(SIGPIPE, &(struct sigaction){ .sa_handler = SIG_IGN }, &old_pipe);
	if (pipe2(b, O_CLOEXEC) == -1 || (key != NULL && pipe2(a, O_CLOEXEC) == -1)) {
		sp_err_sys(e, SP_E_INTERNAL, "pipe");
		goto out;
	}
	if ((via = noded_stream(x, NULL, NULL, dir, b[0], sock, &conn, e)) == -1 ||
	    (!via && sp_proc_spawn(recv, b[0], -1, errs, &pr, e) == -1))
		goto out;
	close(b[0]);
	b[0] = -1;
	if (sp_proc_spawn(unzstd, key ? a[0] : in, b[1], errs, &pz, e) == -1)
		goto out;
	close(b[1]);
	b[1] = -1;
	rc = 0;
	if (key != NULL) {
		close(a[0]);
		a[0] = -1;
		rc = sp_crypt_decrypt(in, a[1], key, &n, &de);
		close(a[1]);
		a[1] = -1;
	}
out:
	if (a[0] >= 0) close(a[0]);
	if (a[1] >= 0) close(a[1]);
	if (b[0] >= 0) close(b[0]);
	if (b[1] >= 0) close(b[1]);
	/* Which failure says why: a corrupt stream (found before its bytes
	 * went on), else the stage furthest down that failed, since a stage
	 * that dies makes the one before it see a broken pipe. */
	ran = pr > 0 || conn != -1;
	rz = pz > 0 ? sp_proc_wait(pz, "zstd -d", errs, &ez) : 0;
	rr = pr > 0 ? sp_proc_wait(pr, "btrfs receive", errs, &er) :
	    conn != -1 ? sp_noded_answer(conn, sock, NULL, &er) : 0;
	if (rc == -1 && ran && de.code == SP_E_CORRUPT)
		*e = de;
	else if (rr == -1)
		*e = er;
	else if (rz == -1)
		*e = ez;
	else if (rc == -1 && ran)
		*e = de;
	if (rr == -1 || rz == -1)
		rc = -1;
	close(in);
	close(errs);
	sigaction(SIGPIPE, &old_pipe, NULL);
	return rc;
}

/* Uploads the file at path to key; *size and hex its size and SHA-256. */
/*
 * Progress of a long transfer on stderr, when stderr is a terminal: a thread
 * looks every 200 ms at how far the transfer got (the offset an upload read
 * its file to, the size a download wrote) and redraws one line.
 */
struct progress {
	const char *what;
	int fd, download, on;
	uint64_t total;
	atomic_int stop;
	pthread_t thread;
};

static uint64_t
progress_at(const struct progress *p)
{
	struct stat st;
	off_t o;

	if (p->download)
		return fstat(p->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	o = lseek(p->fd, 0, SEEK_CUR);
	return o > 0 ? (uint64_t)o : 0;
}

static void *
progress_run(void *arg)
{
	struct progress *p = arg;

	while (!atomic_load(&p->stop)) {
		usleep(200000);
		fprintf(stderr, "\r%s: %s %.1f of %.1f MiB  ", sp_out_prog(),
		    p->what, progress_at(p) / 1048576.0, p->total / 1048576.0);
	}
	return NULL;
}

static void
progress_start(struct progress *p, const char *what, int fd, uint64_t total,
    int download)
{
	*p = (struct progress){ .what = what, .fd = fd, .download = download,
	    .total = total };
	atomic_init(&p->stop, 0);
	/* Small transfers are over before a line would help. */
	p->on = isatty(2) && total >= 8 * 1048576 &&
	    pthread_create(&p->thread, NULL, progress_run, p) == 0;
}

static void
progress_stop(struct progress *p)
{
	if (!p->on)
		return;
	atomic_store(&p->stop, 1);
	pthread_join(p->thread, NULL);
	fprintf(stderr, "\r%s: %s %.1f MiB, done%20s\n", sp_out_prog(), p->what,
	    progress_at(p) / 1048576.0, "");
}

int
sp_remote_upload(struct sp_store *s, const char *path, const char *key,
    uint64_t *size, char hex[65], struct sp_err *e)
{
	struct progress pr;
	uint64_t bytes;
	int fd, rc;

	if (sp_digest_file(path, hex, size, e) == -1)
		return -1;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_IO, "%s", path);
	progress_start(&pr, "uploading", fd, *size, 0);
	rc = sp_store_put(s, key, fd, &bytes, e);
	progress_stop(&pr);
	close(fd);
	if (rc == 0 && bytes != *size)
		rc = sp_err_set(e, SP_E_IO, 1, "%s: stored %llu of %llu bytes", key,
		    (unsigned long long)bytes, (unsigned long long)*size);
	return rc;
}

/* Downloads key to path and checks it against size and hex. */
int
sp_remote_download(struct sp_store *s, const char *key, const char *path,
    uint64_t size, const char *hex, struct sp_err *e)
{
	struct progress pr;
	char got[65];
	uint64_t bytes, n;
	int fd, rc;

	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) == -1)
		return sp_err_sys(e, SP_E_IO, "%s", path);
	progress_start(&pr, "downloading", fd, size, 1);
	/* No more than the manifest says: a store cannot fill the disk. */
	sp_store_set_get_max(s, size);
	rc = sp_store_get(s, key, fd, &bytes, e);
	sp_store_set_get_max(s, 0);
	progress_stop(&pr);
	close(fd);
	if (rc == -1 && e->code == SP_E_TOO_BIG)
		return sp_err_set(e, SP_E_CORRUPT, 0, "%s: more than the %llu bytes "
		    "its manifest says", key, (unsigned long long)size);
	if (rc == -1)
		return -1;
	if (sp_digest_file(path, got, &n, e) == -1)
		return -1;
	if (n != size || strcmp(got, hex) != 0)
		return sp_err_set(e, SP_E_CORRUPT, 0, "%s: %llu bytes with SHA-256 "
		    "%.12s..., the manifest says %llu and %.12s...", key,
		    (unsigned long long)n, got, (unsigned long long)size, hex);
	return 0;
}

/* ---- templates ---- */

static int
template_key(const struct sp_template_row *t, const char *lineage,
    const char *file, char *out, size_t n, struct sp_err *e)
{
	return sp_path_fmt(out, n, e, "templates/%s@%s/%s/%s", t->name,
	    t->digest, lineage, file);
}

int
sp_template_push(struct sp_ctx *x, struct sp_store *s, const char *ref,
    json_t **out, struct sp_err *e)
{
	char tpath[SP_PATH_MAX], lineage[37], key[SP_PATH_MAX], mkey[SP_PATH_MAX];
	char tmp[SP_PATH_MAX], hex[65];
	struct sp_template_row t;
	struct sp_err ge;
	uint64_t size, msize;
	int64_t t0 = sp_clock_ms();
	int rc, received, tfd;

	*out = NULL;
	if (sp_db_template_get(x->db, ref, &t, e) == -1 ||
	    sp_template_path(x->conf.root, &t, tpath, sizeof tpath, e) == -1)
		return -1;
	if (!sp_subvol_exists(tpath))
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "template %s@%.12s is not on "
		    "this node", t.name, t.digest);
	if (sp_subvol_lineage(tpath, lineage, &received, e) == -1 ||
	    template_key(&t, lineage, "stream.zst", key, sizeof key, e) == -1 ||
	    template_key(&t, lineage, "manifest.json", mkey, sizeof mkey, e) == -1)
		return -1;
	/* There already, manifest and all: nothing to do. */
	if (sp_store_head(s, mkey, &msize, &ge) == 0) {
		*out = json_pack("{s:s, s:s, s:s, s:b, s:I, s:I}", "template",
		    t.name, "digest", t.digest, "lineage", lineage, "pushed", 0,
		    "bytes_uploaded", (json_int_t)0, "ms",
		    (json_int_t)(sp_clock_ms() - t0));
		return 0;
	}
	if (ge.code != SP_E_NOT_FOUND) {
		*e = ge;
		return -1;
	}
	if (sp_remote_tmpfile(x, &tfd, tmp, sizeof tmp, e) == -1)
		return -1;
	rc = sp_remote_send(x, NULL, tpath, NULL, tmp, e);
	if (rc == 0)
		rc = sp_remote_upload(s, tmp, key, &size, hex, e);
	close(tfd);
	if (rc == -1)
		return -1;
	if (sp_remote_put_json(s, x, mkey, json_pack("{s:i, s:s, s:s, s:s, s:I, s:s, s:I}",
	    "version", 1, "template", t.name, "digest", t.digest, "lineage",
	    lineage, "bytes", (json_int_t)size, "sha256", hex, "pushed",
	    (json_int_t)time(NULL)), e) == -1)
		return -1;
	*out = json_pack("{s:s, s:s, s:s, s:b, s:I, s:I}", "template", t.name,
	    "digest", t.digest, "lineage", lineage, "pushed", 1,
	    "bytes_uploaded", (json_int_t)size, "ms",
	    (json_int_t)(sp_clock_ms() - t0));
	return 0;
}

/*
 * Makes sure this node has the template t of lineage (the one a delta was
 * sent against).  When the node's own copy of that digest is of another
 * lineage (imported here independently), the store's copy is received into
 * lineages/<lineage>/ beside it; when the node has none, it becomes the
 * node's copy.  *pulled says whether anything came down.
 */
int
sp_remote_lineage(struct sp_ctx *x, struct sp_store *s,
    const struct sp_template_row *t, const char *lineage, char *base,
    size_t nbase, int *pulled, uint64_t *bytes, struct sp_err *e)
{
	char tpath[SP_PATH_MAX], have[37], key[SP_PATH_MAX], mkey[SP_PATH_MAX];
	char tmp[SP_PATH_MAX], dir[SP_PATH_MAX], got[SP_PATH_MAX];
	char keepdir[SP_PATH_MAX], keep[SP_PATH_MAX];
	struct sp_err ignored;
	const char *hex;
	json_int_t size;
	json_t *m = NULL;
	int rc = -1, own, received = 0, tfd;

	*pulled = 0;
	*bytes = 0;
	if (sp_template_path(x->conf.root, t, tpath, sizeof tpath, e) == -1 ||
	    sp_path_fmt(keepdir, sizeof keepdir, e, "%s/lineages/%s",
	    x->conf.root, lineage) == -1 ||
	    sp_path_fmt(keep, sizeof keep, e, "%s/%s@%s", keepdir, t->name,
	    t->digest) == -1)
		return -1;
	/* A receive cut short leaves a subvolume without its received UUID
	 * (set last); it is made again. */
	if (sp_subvol_exists(keep) && (sp_subvol_lineage(keep, have, &received,
	    e) == -1 || (received && strcmp(have, lineage) == 0)))
		return received ? sp_path_fmt(base, nbase, e, "%s", keep) : -1;
	if (sp_subvol_exists(keep) && sp_subvol_delete(keep, e) == -1)
		return -1;
	own = sp_subvol_exists(tpath);
	if (own && sp_subvol_lineage(tpath, have, &received, e) == -1)
		return -1;
	if (own && !received && !sp_subvol_readonly(tpath)) {
		/* Templates are read-only from birth: this is a pull cut short. */
		if (sp_subvol_delete(tpath, e) == -1)
			return -1;
		own = 0;
	}
	/*
	 * btrfs receive looks clone sources up by received UUID only, so the
	 * origin of a lineage (its own UUID, received from nowhere) cannot
	 * take deltas either: it gets a received copy in lineages/ too.
	 */
	if (own && received && strcmp(have, lineage) == 0)
		return sp_path_fmt(base, nbase, e, "%s", tpath);
	if (template_key(t, lineage, "stream.zst", key, sizeof key, e) == -1 ||
	    template_key(t, lineage, "manifest.json", mkey, sizeof mkey, e) == -1 ||
	    sp_remote_get_json(s, x, mkey, &m, e) == -1)
		return -1;
	if (json_unpack(m, "{s:I, s:s}", "bytes", &size, "sha256", &hex) == -1 ||
	    size < 0 || strlen(hex) != 64) {
		sp_err_set(e, SP_E_CORRUPT, 0, "%s: malformed", mkey);
		goto out;
	}
	/* Received where it stays: a read-only subvolume cannot be moved. */
	if (own)
		snprintf(dir, sizeof dir, "%s", keepdir);
	else if (sp_path_fmt(dir, sizeof dir, e, "%s/templates", x->conf.root) == -1)
		goto out;
	if (sp_path_fmt(got, sizeof got, e, "%s/%s@%s", dir, t->name,
	    t->digest) == -1 || sp_subvol_mkdirs(dir, 0755, e) == -1 ||
	    sp_remote_tmpfile(x, &tfd, tmp, sizeof tmp, e) == -1)
		goto out;
	if (sp_remote_download(s, key, tmp, (uint64_t)size, hex, e) == -1 ||
	    sp_remote_receive(x, tmp, NULL, dir, e) == -1) {
		sp_subvol_delete(got, &ignored);
		close(tfd);
		goto out;
	}
	close(tfd);
	*bytes = (uint64_t)size;
	*pulled = 1;
	/* The DB may know it already (a shared DB): the insert is idempotent. */
	rc = sp_path_fmt(base, nbase, e, "%s", got) == -1 ? -1 :
	    own ? 0 : sp_db_template_insert(x->db, t, e);
out:
	json_decref(m);
	return rc;
}

/* From the keys under templates/<name>@<digest>/, the first lineage whose
 * manifest is there. */
struct first_lineage {
	char v[37];
	int n;
};

static int
first_lineage(const char *key, uint64_t size, void *arg)
{
	struct first_lineage *l = arg;
	const char *end = key + strlen(key), *slash;
	size_t k = strlen("/manifest.json");

	if (l->n > 0 || (size_t)(end - key) <= k + 36 ||
	    strcmp(end - k, "/manifest.json") != 0)
		return 0;
	slash = end - k - 36;
	if (slash[-1] != '/')
		return 0;
	memcpy(l->v, slash, 36);
	l->v[36] = '\0';
	l->n = 1;
	return 0;
}

int
sp_template_pull(struct sp_ctx *x, struct sp_store *s, const char *ref,
    json_t **out, struct sp_err *e)
{
	char name[SP_NAME_MAX + 1], prefix[SP_PATH_MAX], base[SP_PATH_MAX], *at;
	struct sp_template_row t = { 0 };
	int64_t t0 = sp_clock_ms();
	struct first_lineage l = { "", 0 };
	int pulled;
	uint64_t bytes;
	int rc;

	*out = NULL;
	/* name@digest: the first lineage the store holds of it. */
	if ((at = strchr(ref, '@')) == NULL || (size_t)(at - ref) > SP_NAME_MAX ||
	    strlen(at + 1) != 64)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "pull needs NAME@DIGEST "
		    "(64 hex digits)");
	memcpy(name, ref, (size_t)(at - ref));
	name[at - ref] = '\0';
	if (sp_name_check("template", name, e) == -1)
		return -1;
	snprintf(t.name, sizeof t.name, "%s", name);
	snprintf(t.digest, sizeof t.digest, "%s", at + 1);
	if (sp_db_template_get(x->db, ref, &t, e) == -1) {
		if (e->code != SP_E_NOT_FOUND)
			return -1;
		snprintf(t.name, sizeof t.name, "%s", name);
		snprintf(t.digest, sizeof t.digest, "%s", at + 1);
		t.created = (int64_t)time(NULL);
	}
	if (sp_path_fmt(prefix, sizeof prefix, e, "templates/%s@%s/", t.name,
	    t.digest) == -1)
		return -1;
	if (sp_store_list(s, prefix, first_lineage, &l, e) == -1)
		return -1;
	if (l.n == 0)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "the store has no %s", ref);
	rc = sp_remote_lineage(x, s, &t, l.v, base, sizeof base, &pulled,
	    &bytes, e);
	if (rc == 0)
		*out = json_pack("{s:s, s:s, s:s, s:b, s:I, s:I}", "template",
		    t.name, "digest", t.digest, "lineage", l.v, "pulled", pulled,
		    "bytes_downloaded", (json_int_t)bytes, "ms",
		    (json_int_t)(sp_clock_ms() - t0));
	return rc;
}
