/*
 * space-ps: the processes a sandbox's guest daemon started (running calls,
 * and detached processes until the table drops them), one JSON line each.
 */
#include <stdio.h>
#include <stdlib.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-ps ID\n");
	sp_usage_exit();
}

static int
show(json_t *proc, void *arg)
{
	const char *id = arg;
	json_t *o;

	/* Each line names its sandbox, so lines of many sandboxes mix. */
	if ((o = json_deep_copy(proc)) == NULL ||
	    json_object_set_new(o, "id", json_string(id)) == -1) {
		json_decref(o);
		return 0;
	}
	sp_out_json(o);
	return 0;
}

int
main(int argc, char *argv[])
{
	struct sp_chan *c = NULL;
	struct sp_ctx x;
	const char *id;
	char idbuf[SP_ID_LEN + 1];
	struct sp_err e;
	int rc = 0;

	sp_cli_init(argc, argv, usage);
	if (argc != 2 || argv[1][0] == '-')
		usage();
	id = argv[1];
	if (sp_ctx_open_ref(&x, &id, idbuf, &e) == -1)
		return sp_out_fail(id, &e);
	if (sp_sandbox_chan(&x, id, &c, &e) == -1 ||
	    sp_chan_ps(c, show, (void *)id, &e) == -1)
		rc = sp_out_fail(id, &e);
	else	/* its event, when no process line was one */
		sp_event_cli(id, NULL, NULL);
	sp_chan_close(c);
	sp_ctx_close(&x);
	return rc;
}
