/* sp_err: stable error tokens with a message and a "retry may help" flag. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sp_core.h"

static const char *const names[SP_E__COUNT] = {
	[SP_E_NONE] = "",
	[SP_E_AUDIT] = "audit",
	[SP_E_BAD_INPUT] = "bad-input",
	[SP_E_BAD_STATE] = "bad-state",
	[SP_E_BTRFS] = "btrfs",
	[SP_E_BUSY] = "busy",
	[SP_E_CORRUPT] = "corrupt",
	[SP_E_DB] = "db",
	[SP_E_DENIED] = "denied",
	[SP_E_EXEC_FAILED] = "exec-failed",
	[SP_E_EXISTS] = "exists",
	[SP_E_EXPIRED] = "expired",
	[SP_E_FETCH] = "fetch",
	[SP_E_FULL] = "full",
	[SP_E_GONE] = "gone",
	[SP_E_GUEST] = "guest",
	[SP_E_IN_USE] = "in-use",
	[SP_E_INTERNAL] = "internal",
	[SP_E_IO] = "io",
	[SP_E_KEY_REVOKED] = "key-revoked",
	[SP_E_KILLED] = "killed",
	[SP_E_KMS] = "kms",
	[SP_E_LIBVIRT] = "libvirt",
	[SP_E_NO_SPACE] = "no-space",
	[SP_E_NOMEM] = "nomem",
	[SP_E_NOT_BTRFS] = "not-btrfs",
	[SP_E_NOT_EMPTY] = "not-empty",
	[SP_E_NOT_FOUND] = "not-found",
	[SP_E_NOT_INITIALIZED] = "not-initialized",
	[SP_E_NOT_RESTORABLE] = "not-restorable",
	[SP_E_NOT_RUNNING] = "not-running",
	[SP_E_PARTIAL] = "partial",
	[SP_E_PROTOCOL] = "protocol",
	[SP_E_QEMU] = "qemu",
	[SP_E_QUOTA_EXCEEDED] = "quota-exceeded",
	[SP_E_RATE_LIMITED] = "rate-limited",
	[SP_E_RESEED_FAILED] = "reseed-failed",
	[SP_E_STOPPED] = "stopped",
	[SP_E_TIMED_OUT] = "timed-out",
	[SP_E_TLS] = "tls",
	[SP_E_TOO_BIG] = "too-big",
	[SP_E_UNAUTHORIZED] = "unauthorized",
	[SP_E_VAULT] = "vault",
};

const char *
sp_code_name(enum sp_code code)
{
	return (unsigned)code < SP_E__COUNT ? names[code] : "internal";
}

/* Names earlier versions used, which a guest daemon of an older image may
 * still send. */
static const struct {
	const char *name;
	enum sp_code code;
} old_names[] = {
	{ "timeout", SP_E_TIMED_OUT },
	{ "too-long", SP_E_TOO_BIG },
};

int
sp_code_of(const char *name, enum sp_code *code)
{
	size_t i;

	for (i = 1; i < SP_E__COUNT; i++)
		if (strcmp(names[i], name) == 0) {
			*code = (enum sp_code)i;
			return 0;
		}
	for (i = 0; i < sizeof old_names / sizeof old_names[0]; i++)
		if (strcmp(old_names[i].name, name) == 0) {
			*code = old_names[i].code;
			return 0;
		}
	return -1;
}

int
sp_err_set(struct sp_err *e, enum sp_code code, int temp, const char *fmt, ...)
{
	va_list ap;

	if (e == NULL)
		return -1;
	e->code = code;
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
sp_err_sys(struct sp_err *e, enum sp_code code, const char *fmt, ...)
{
	int saved = errno;
	size_t n;
	va_list ap;

	if (e == NULL)
		return -1;
	e->code = code;
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
	if (e->code == SP_E_BAD_INPUT)
		return SP_EXIT_USAGE;
	return SP_EXIT_FAIL;
}

const char *
sp_quote(const char *s, char *out, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, j = 0;

	for (i = 0; s[i] != '\0' && j + 8 < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 0x20 && c < 0x7f && c != '\\') {
			out[j++] = (char)c;
			continue;
		}
		out[j++] = '\\';
		out[j++] = 'x';
		out[j++] = hex[c >> 4];
		out[j++] = hex[c & 15];
	}
	if (s[i] != '\0') {
		memcpy(out + j, "...", 3);
		j += 3;
	}
	out[j] = '\0';
	return out;
}
