/* sp_err: stable error tokens with a message and a "retry may help" flag. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sp.h"

static void
set_code(struct sp_err *e, const char *code)
{
	snprintf(e->code, sizeof e->code, "%s", code);
}

int
sp_err_set(struct sp_err *e, const char *code, int temp, const char *fmt, ...)
{
	va_list ap;

	if (e == NULL)
		return -1;
	set_code(e, code);
	e->temp = temp;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	return -1;
}

/* Errors a retry can cure: resources, interruptions, timeouts. */
static int
errno_is_temp(int err)
{
	switch (err) {
	case EAGAIN:
	case EINTR:
	case ENOMEM:
	case ENOSPC:
	case ETIMEDOUT:
	case EBUSY:
	case ECONNREFUSED:
	case ECONNRESET:
	case EMFILE:
	case ENFILE:
		return 1;
	default:
		return 0;
	}
}

int
sp_err_sys(struct sp_err *e, const char *code, const char *fmt, ...)
{
	int saved = errno;
	size_t n;
	va_list ap;

	if (e == NULL)
		return -1;
	set_code(e, code);
	e->temp = errno_is_temp(saved);
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	n = strlen(e->msg);
	if (n < sizeof e->msg)
		snprintf(e->msg + n, sizeof e->msg - n, ": %s", strerror(saved));
	errno = saved;
	return -1;
}

void
sp_err_clear(struct sp_err *e)
{
	memset(e, 0, sizeof *e);
}

int
sp_err_exit(const struct sp_err *e)
{
	if (e->temp)
		return SP_EXIT_TEMP;
	if (strcmp(e->code, "bad-input") == 0 || strcmp(e->code, "usage") == 0)
		return SP_EXIT_USAGE;
	return SP_EXIT_FAIL;
}
