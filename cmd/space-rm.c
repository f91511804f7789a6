/* space-rm: destroy sandboxes: their VM, subvolumes, run dir and DB rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"

static int
rm1(const char *id, json_t *rec, void *ctx)
{
	struct sp_err e;
	int existed;

	if (sp_sandbox_remove(ctx, id, &existed, &e) == -1)
		return sp_out_fail(id, &e);
	/* Removing what is already gone is success: it says so. */
	return sp_out_ok(id, json_pack("{s:b}", "removed", existed));
}

int
main(int argc, char *argv[])
{
	struct sp_ctx x;
	struct sp_err e;
	int rc;

	sp_out_init(argv[0]);
	if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		fprintf(stderr, "usage: space-rm [ID...]   (or ids on stdin)\n");
		return SP_EXIT_USAGE;
	}
	if (argc > 1 && strcmp(argv[1], "--") == 0) {
		argc--;
		argv++;
	}
	if (sp_ctx_open(&x, 1, &e) == -1)
		return sp_out_fail(NULL, &e);
	rc = sp_each(argc - 1, argv + 1, rm1, &x);
	sp_ctx_close(&x);
	return rc;
}
