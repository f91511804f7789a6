/* sp_out: the output contract, JSON lines on stdout and human lines on stderr. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "sp.h"

static const char *prog = "space";

void
sp_out_init(const char *p)
{
	const char *slash;

	if (p == NULL)
		return;
	for (slash = p; *p; p++)
		if (*p == '/')
			slash = p + 1;
	prog = slash;
}

const char *
sp_out_prog(void)
{
	return prog;
}

int
sp_out_json(json_t *obj)
{
	char *s;
	int rc = 0;

	s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(obj);
	if (s == NULL)
		return -1;
	/* One line per item, flushed, so a reader downstream sees it at once. */
	if (puts(s) == EOF || fflush(stdout) == EOF)
		rc = -1;
	free(s);
	return rc;
}

void
sp_warn(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int
sp_out_fail(const char *id, const struct sp_err *e)
{
	json_t *o;

	o = json_object();
	if (id != NULL)
		json_object_set_new(o, "id", json_string(id));
	json_object_set_new(o, "ok", json_false());
	json_object_set_new(o, "error", json_string(e->code[0] ? e->code : "internal"));
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
