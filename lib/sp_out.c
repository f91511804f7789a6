/* sp_out: the output contract, JSON lines on stdout and human lines on stderr. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_cli.h"

#ifndef SP_VERSION
#define SP_VERSION "unknown"
#endif

/* Where a command's usage goes and how it exits after: stderr and 100 for a
 * mistake, stdout and 0 when --help asked for it. */
static FILE *usage_to;
static int usage_status = SP_EXIT_USAGE;

void
sp_cli_init(int argc, char *argv[], void (*usage)(void))
{
	int i;

	sp_out_init(argv[0]);
	/* Looked for before getopt, which would take them for unknown options,
	 * and only up to "--": what follows is a guest's command. */
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--help") == 0) {
			usage_to = stdout;
			usage_status = 0;
			usage();
			exit(0);
		}
		if (strcmp(argv[i], "--version") == 0) {
			printf("%s %s\n", sp_out_prog(), SP_VERSION);
			exit(fflush(stdout) == EOF ? SP_EXIT_TEMP : 0);
		}
	}
}

FILE *
sp_usage_stream(void)
{
	return usage_to != NULL ? usage_to : stderr;
}

_Noreturn void
sp_usage_exit(void)
{
	if (fflush(stdout) == EOF && usage_status == 0)
		exit(SP_EXIT_TEMP);
	exit(usage_status);
}

int
sp_out_json(json_t *obj)
{
	char *s;
	int rc = 0;

	/* Twelve digits: a quota of 0.3 CPUs prints as 0.3, not as
	 * 0.29999999999999999. */
	s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER |
	    JSON_REAL_PRECISION(12));
	/* A verb's line for a sandbox is its event too (sp_event.c). */
	sp_event_line(obj);
	json_decref(obj);
	if (s == NULL)
		return -1;
	/* One line per item, flushed, so a reader downstream sees it at once. */
	if (puts(s) == EOF || fflush(stdout) == EOF)
		rc = -1;
	free(s);
	return rc;
}

int
sp_out_fail(const char *id, const struct sp_err *e)
{
	json_t *o;

	o = json_object();
	if (id != NULL)
		json_object_set_new(o, "id", json_string(id));
	json_object_set_new(o, "ok", json_false());
	json_object_set_new(o, "error", json_string(e->code != SP_E_NONE ?
	    sp_code_name(e->code) : "internal"));
	json_object_set_new(o, "msg", json_string(e->msg));
	sp_out_json(o);
	if (id != NULL)
		sp_warn("%s: %s", id, e->msg);
	else
		sp_warn("%s", e->msg);
	return sp_err_exit(e);
}

int
sp_out_ok(const char *id, json_t *extra)
{
	json_t *o;

	o = json_object();
	if (id != NULL)
		json_object_set_new(o, "id", json_string(id));
	json_object_set_new(o, "ok", json_true());
	if (extra != NULL) {
		json_object_update(o, extra);
		json_decref(extra);
	}
	sp_out_json(o);
	return SP_EXIT_OK;
}

int
sp_exec_fail_status(const char *id, const struct sp_err *e)
{
	sp_event_cli(id, e, json_pack("{s:s}", "msg", e->msg));
	sp_warn("%s: %s", id, e->msg);
	/* As a shell says: the command could not be started. */
	if (e->code == SP_E_EXEC_FAILED)
		return 127;
	/* The command's own timeout; a guest that did not answer in time is
	 * a temporary failure (111) instead. */
	if (e->code == SP_E_TIMED_OUT && !e->temp)
		return 124;	/* as timeout(1) */
	return sp_err_exit(e);
}

void
sp_cli_id_pid(int argc, char *argv[], void (*usage)(void), const char **id,
    pid_t *pid)
{
	char *end;
	long v;

	if (argc != 2)
		usage();
	*id = argv[0];
	v = strtol(argv[1], &end, 10);
	if (argv[1][0] == '\0' || *end != '\0' || v <= 0 || v > 0x7fffffff)
		usage();
	*pid = (pid_t)v;
}
