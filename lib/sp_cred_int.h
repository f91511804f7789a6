/*
 * sp_cred_int.h: what the parts of the credential store share and no other
 * module may use: the limits of its files, and the helpers one part calls
 * in another (checks, paths and metadata, the vaults, the audit log).
 * The store's interface is sp_cred.h.
 */
#ifndef SP_CRED_INT_H
#define SP_CRED_INT_H

#include <stdint.h>
#include <sodium.h>

#include "sp_net.h"
#include "sp_cred.h"

#define META_MAX	(16 * 1024)	/* one metadata file: ~7 KiB at most */
#define TIME_MAX	((int64_t)253402300799)	/* 9999-12-31 */
#define B64		sodium_base64_VARIANT_ORIGINAL
#define BOX_MAGIC	"spcred1\n"
#define BOX_MAGIC_LEN	8
#define BOX_PT_MAX	(SP_CRED_REF_MAX + 1 + SP_CRED_SECRET_MAX)
#define BOX_HDR		(BOX_MAGIC_LEN + crypto_secretbox_NONCEBYTES)
#define BOX_FILE_MAX	(BOX_HDR + crypto_secretbox_MACBYTES + BOX_PT_MAX)
#define TAIL_MAX	SP_PROC_TAIL	/* of a vault program's stderr */
#define VAULT_NOT_FOUND	2	/* a vault program's exit: no such REF */

/* One line of the audit log, as cred_audit_append writes it. */
struct audit {
	int64_t time;
	const char *op, *sandbox, *tenant, *project, *host;
	const struct sp_cred *c;	/* NULL: none */
	const char *decision, *error;
	int64_t retry_after;
};

/* sp_cred_check.c */
void cred_rate_text(const struct sp_cred *c, char out[32]);
int cred_ref_ok(const char *ref);
int cred_hosts_parse(const char *list, struct sp_cred *c, struct sp_err *e);

/* sp_cred_scope.c: paths, files, metadata, the scopes */
int cred_dir(const char *root, struct sp_err *e);
int cred_meta_path(const char *root, const char *scope, const char *name,
    char *out, size_t n, struct sp_err *e);
int cred_file_read(const char *path, void *buf, size_t max, size_t *n,
    struct sp_err *e);
int cred_file_replace(const char *path, const void *buf, size_t n,
    struct sp_err *e);
int cred_meta_load(const char *root, const char *scope, const char *name,
    struct sp_cred *c, struct sp_err *e);
/* was NULL: a new one ("exists" when the name is taken); else it replaces
 * was ("bad-state", temporary, when it is no longer was).  Checked in a
 * shared DB; under a root the caller has looked, holding the lock. */
int cred_meta_write(const char *root, const struct sp_cred *c,
    const struct sp_cred *was, struct sp_err *e);
/* The key of a credential's rate state: its scope with '+' for '/', '+',
 * its name. */
void cred_rate_key(const struct sp_cred *c,
    char out[SP_CRED_SCOPE_MAX + SP_NAME_MAX + 2]);
int cred_meta_exists(const char *root, const char *scope, const char *name,
    int *found, struct sp_err *e);
/* The metadata and rate state of a credential gone: its file, or its row
 * and its buckets in a shared DB. */
int cred_meta_remove(const char *root, const struct sp_cred *c,
    struct sp_err *e);
int cred_scope_names_fast(const char *root, const char *scope,
    int (*fn)(const char *name, void *), void *arg, struct sp_err *e);
int cred_scope_of(const char *root, const char *name, const char *scope,
    char out[SP_CRED_SCOPE_MAX + 1], int *found, struct sp_err *e);

/* sp_cred_vault.c */
int cred_vault_put(const char *root, const struct sp_cred *c, const void *s,
    size_t n, struct sp_err *e);
int cred_vault_get(const char *root, const struct sp_cred *c,
    unsigned char *out, size_t *n, struct sp_err *e);
int cred_vault_rm(const char *root, const struct sp_cred *c,
    struct sp_err *e);

/* sp_cred_audit.c */
int cred_audit_append(const char *root, const struct audit *a,
    struct sp_err *e);
int cred_audit_change(const char *root, const char *op,
    const struct sp_cred *c, int64_t now, struct sp_err *e);

#endif
