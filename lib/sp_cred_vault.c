/*
 * sp_cred_vault: the secrets of credentials: the node's file vault (a
 * sealed file per secret under a key of its own) and external secret
 * managers run as cmd: programs.
 */
#include <sys/file.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <sodium.h>

#include "sp_net.h"
#include "sp_cred_int.h"

/* ---- the file vault ---- */

static int
vault_key(const char *root, int create, unsigned char key[32],
    struct sp_err *e)
{
	char p[SP_PATH_MAX];
	uid_t space_uid;
	struct stat st;
	ssize_t r;
	int fd, rc = -1;

	if (sp_path_fmt(p, sizeof p, e, "%s/creds/vault.key", root) == -1)
		return -1;
	if (create && access(p, F_OK) != 0 && (cred_dir(root, e) == -1 ||
	    (sp_crypt_key_create(p, e) == -1 && e->code != SP_E_EXISTS)))
		return -1;
	if ((fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		if (errno == ENOENT)
			return sp_err_set(e, SP_E_VAULT, 0, "the vault key %s is "
			    "gone: no secret of the file vault opens", p);
		return sp_err_sys(e, SP_E_VAULT, "open %s", p);
	}
	if (fstat(fd, &st) == -1) {
		sp_err_sys(e, SP_E_VAULT, "stat %s", p);
		goto out;
	}
	/* Its user's alone, or it is not a key to trust with every secret:
	 * this process's, or space's, whose store it is (space-init gives
	 * the store to space; root trusts what space keeps). */
	if (!S_ISREG(st.st_mode) || st.st_size != 32 ||
	    (st.st_mode & 077) != 0 || (st.st_uid != geteuid() &&
	    (geteuid() != 0 || !sp_space_ids(&space_uid, NULL) ||
	    st.st_uid != space_uid))) {
		sp_err_set(e, SP_E_VAULT, 0, "the vault key %s must be 32 bytes, "
		    "mode 0600, owned by uid %d%s", p, (int)geteuid(),
		    geteuid() == 0 ? " or " SP_USER : "");
		goto out;
	}
	while ((r = read(fd, key, 32)) == -1 && errno == EINTR)
		;
	if (r != 32) {
		sp_err_sys(e, SP_E_VAULT, "read %s", p);
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

/* The box binds the secret to its REF: a file moved under another name
 * does not open as that one. */
static int
fvault_put(const char *root, const char *ref, const unsigned char *s,
    size_t n, struct sp_err *e)
{
	unsigned char key[32], pt[BOX_PT_MAX], box[BOX_FILE_MAX];
	size_t rl = strlen(ref), pn = rl + 1 + n;
	char p[SP_PATH_MAX];
	int rc = -1;

	sodium_mlock(key, sizeof key);
	sodium_mlock(pt, sizeof pt);
	if (sp_path_fmt(p, sizeof p, e, "%s/creds/vault", root) == -1 ||
	    vault_key(root, 1, key, e) == -1 || sp_path_mkdirs(p, 0700, e) == -1 ||
	    sp_path_fmt(p, sizeof p, e, "%s/creds/vault/%s", root, ref) == -1)
		goto out;
	memcpy(pt, ref, rl + 1);
	memcpy(pt + rl + 1, s, n);
	memcpy(box, BOX_MAGIC, BOX_MAGIC_LEN);
	randombytes_buf(box + BOX_MAGIC_LEN, crypto_secretbox_NONCEBYTES);
	crypto_secretbox_easy(box + BOX_HDR, pt, pn, box + BOX_MAGIC_LEN, key);
	rc = cred_file_replace(p, box, BOX_HDR + crypto_secretbox_MACBYTES + pn, e);
out:
	sodium_munlock(pt, sizeof pt);
	sodium_munlock(key, sizeof key);
	return rc;
}

static int
fvault_get(const char *root, const char *ref, unsigned char *out,
    size_t *n, struct sp_err *e)
{
	unsigned char key[32], pt[BOX_PT_MAX], box[BOX_FILE_MAX];
	size_t rl = strlen(ref), got, pn;
	char p[SP_PATH_MAX];
	int rc = -1;

	sodium_mlock(key, sizeof key);
	sodium_mlock(pt, sizeof pt);
	if (sp_path_fmt(p, sizeof p, e, "%s/creds/vault/%s", root, ref) == -1 ||
	    cred_file_read(p, box, sizeof box, &got, e) == -1 ||
	    vault_key(root, 0, key, e) == -1)
		goto out;
	if (got < BOX_HDR + crypto_secretbox_MACBYTES + rl + 2 ||
	    memcmp(box, BOX_MAGIC, BOX_MAGIC_LEN) != 0) {
		sp_err_set(e, SP_E_CORRUPT, 0, "%s is not a sealed secret", p);
		goto out;
	}
	pn = got - BOX_HDR - crypto_secretbox_MACBYTES;
	if (crypto_secretbox_open_easy(pt, box + BOX_HDR, got - BOX_HDR,
	    box + BOX_MAGIC_LEN, key) != 0 || memcmp(pt, ref, rl + 1) != 0) {
		sp_err_set(e, SP_E_CORRUPT, 0, "%s does not open with the vault "
		    "key as %s", p, ref);
		goto out;
	}
	*n = pn - rl - 1;
	memcpy(out, pt + rl + 1, *n);
	rc = 0;
out:
	sodium_munlock(pt, sizeof pt);
	sodium_munlock(key, sizeof key);
	return rc;
}

static int
fvault_rm(const char *root, const char *ref, struct sp_err *e)
{
	char p[SP_PATH_MAX];

	if (sp_path_fmt(p, sizeof p, e, "%s/creds/vault/%s", root, ref) == -1)
		return -1;
	if (unlink(p) == -1 && errno != ENOENT)
		return sp_err_sys(e, SP_E_VAULT, "remove %s", p);
	return 0;
}

/* ---- the cmd: vault ---- */

/*
 * Runs PROGRAM op ref, in (inlen bytes) on its stdin, its stdout into out
 * (at most max bytes; out NULL: thrown away), the tail of its stderr into
 * tail; all within the timeout (sp_proc_talk).  Returns its exit status, or
 * -1 (it could not run, timed out, was killed by a signal or printed too
 * much); the child is reaped either way.
 */
static int
vcmd_run(const char *prog, const char *op, const char *ref, const void *in,
    size_t inlen, unsigned char *out, size_t max, size_t *outn,
    char tail[TAIL_MAX + 1], struct sp_err *e)
{
	char *argv[] = { (char *)prog, (char *)op, (char *)ref, NULL };
	int ms, rc;

	tail[0] = '\0';
	if (sp_env_ms("SPACE_CRED_VAULT_TIMEOUT_MS", SP_CRED_VAULT_TIMEOUT_MS,
	    &ms, e) == -1)
		return -1;
	rc = sp_proc_talk(argv, in, inlen, out, max, outn, tail, ms, e);
	/* A timeout says so; any other failure of the program is the
	 * vault's, retryable when it was killed. */
	if (rc == -1 && e->code != SP_E_TIMED_OUT) {
		e->temp = e->code == SP_E_KILLED;
		e->code = SP_E_VAULT;
	}
	return rc;
}

/* A vault program's exit status as an error. */
static int
vcmd_status(const char *prog, const char *op, const char *ref, int status,
    const char *tail, struct sp_err *e)
{
	if (status == 0)
		return 0;
	if (status == VAULT_NOT_FOUND)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "vault program %s has no "
		    "secret %s", prog, ref);
	return sp_err_set(e, SP_E_VAULT, 1, "vault program %s %s %s exited %d%s%s",
	    prog, op, ref, status, *tail ? ": " : "", tail);
}

/* ---- the vault of a credential ---- */

int
cred_vault_put(const char *root, const struct sp_cred *c, const void *s,
    size_t n, struct sp_err *e)
{
	char tail[TAIL_MAX + 1];
	int st;

	if (strcmp(c->vault, "file") == 0)
		return fvault_put(root, c->ref, s, n, e);
	if ((st = vcmd_run(c->vault + 4, "put", c->ref, s, n, NULL, 0, NULL,
	    tail, e)) == -1)
		return -1;
	if (st == VAULT_NOT_FOUND)
		st = 1;		/* put has no "not found" */
	return vcmd_status(c->vault + 4, "put", c->ref, st, tail, e);
}

/* The secret into out (room for SP_CRED_SECRET_MAX + 1), checked. */
int
cred_vault_get(const char *root, const struct sp_cred *c, unsigned char *out,
    size_t *n, struct sp_err *e)
{
	char tail[TAIL_MAX + 1];
	struct sp_err why;
	int st;

	if (strcmp(c->vault, "file") == 0) {
		if (fvault_get(root, c->ref, out, n, e) == -1)
			return -1;
	} else {
		if ((st = vcmd_run(c->vault + 4, "get", c->ref, NULL, 0, out,
		    SP_CRED_SECRET_MAX + 1, n, tail, e)) == -1 ||
		    vcmd_status(c->vault + 4, "get", c->ref, st, tail, e) == -1)
			return -1;
		if (*n > 0 && out[*n - 1] == '\n')
			(*n)--;
	}
	if (sp_cred_secret_check(c->inject, out, *n, &why) == -1) {
		sodium_memzero(out, SP_CRED_SECRET_MAX + 1);
		return sp_err_set(e, SP_E_VAULT, 0, "the vault's secret %s is not "
		    "one for %s: %s", c->ref, c->inject, why.msg);
	}
	return 0;
}

int
cred_vault_rm(const char *root, const struct sp_cred *c, struct sp_err *e)
{
	char tail[TAIL_MAX + 1];
	int st;

	if (strcmp(c->vault, "file") == 0)
		return fvault_rm(root, c->ref, e);
	if ((st = vcmd_run(c->vault + 4, "rm", c->ref, NULL, 0, NULL, 0, NULL,
	    tail, e)) == -1)
		return -1;
	if (st == VAULT_NOT_FOUND)
		return 0;
	return vcmd_status(c->vault + 4, "rm", c->ref, st, tail, e);
}
