/* sp_log: the program's name, and human lines on stderr. */
#include <stdarg.h>
#include <stdio.h>

#include "sp_core.h"

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
