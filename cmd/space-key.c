/*
 * space-key: the key service (KMS) each tenant's data keys are wrapped by.
 *   set TENANT KEYREF     the tenant's key from now on (file:PATH | cmd:PROG)
 *   ls                    tenants and their keys
 *   rotate TENANT KEYREF  re-wraps the data keys of the tenant's suspended
 *                         snapshots with KEYREF (no data moves), then sets it
 * A sandbox's tenant is its label "tenant" ("default" without one); a tenant
 * without a key of its own uses SPACE_KMS.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-key set TENANT KEYREF\n"
	    "       space-key ls\n"
	    "       space-key rotate TENANT KEYREF\n");
	sp_usage_exit();
}

static int
print(json_t *o, void *arg)
{
	return sp_out_json(o);
}

static int
ls1(const char *tenant, const char *keyref, int64_t updated, void *arg)
{
	return sp_out_json(json_pack("{s:s, s:s, s:I}", "tenant", tenant,
	    "keyref", keyref, "updated", (json_int_t)updated));
}

/* A key reference is checked by using it: a probe key wrapped and back. */
static int
check_ref(const char *keyref, struct sp_err *e)
{
	unsigned char k[32];
	char w[1024];
	int rc;

	sp_crypt_data_key(k);
	rc = sp_crypt_wrap(keyref, k, w, sizeof w, e) == -1 ||
	    sp_crypt_unwrap(keyref, w, k, e) == -1 ? -1 : 0;
	sodium_memzero(k, sizeof k);
	return rc;
}

int
main(int argc, char *argv[])
{
	struct sp_ctx x;
	struct sp_err e;
	int rc = 0;

	sp_cli_init(argc, argv, usage);
	if (argc < 2)
		usage();
	if (!((strcmp(argv[1], "set") == 0 && argc == 4) ||
	    (strcmp(argv[1], "rotate") == 0 && argc == 4) ||
	    (strcmp(argv[1], "ls") == 0 && argc == 2)))
		usage();
	if (sp_ctx_open(&x, 0, &e) == -1)
		return sp_out_fail(NULL, &e);
	if (strcmp(argv[1], "ls") == 0) {
		if (sp_db_tenant_key_each(x.db, ls1, NULL, &e) == -1)
			rc = sp_out_fail(NULL, &e);
	} else if (strcmp(argv[1], "set") == 0) {
		if (sp_name_check("tenant", argv[2], &e) == -1 ||
		    check_ref(argv[3], &e) == -1 ||
		    sp_db_tenant_key_set(x.db, argv[2], argv[3], &e) == -1)
			rc = sp_out_fail(NULL, &e);
		else
			rc = sp_out_ok(NULL, json_pack("{s:s, s:s}", "tenant",
			    argv[2], "keyref", argv[3]));
	} else if (sp_key_rotate(&x, argv[2], argv[3], print, NULL, &e) == -1)
		rc = sp_out_fail(NULL, &e);
	else
		rc = sp_out_ok(NULL, json_pack("{s:s, s:s, s:b}", "tenant",
		    argv[2], "keyref", argv[3], "rotated", 1));
	sp_ctx_close(&x);
	return rc;
}
