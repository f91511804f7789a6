/*
 * sp_store_key: object keys and the plain I/O that the object store's
 * backends (sp_store_file.c, sp_store_s3.c) share.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "sp_storage.h"
#include "sp_store_int.h"

/* ---- keys ---- */

int
store_key_valid(const char *key, size_t max)
{
	const unsigned char *p;
	size_t n = 0, comp = 0;

	for (p = (const unsigned char *)key; *p != '\0'; p++) {
		if (++n > max)
			return 0;
		if (*p == '/') {
			if (comp == 0)
				return 0;
			comp = 0;
			continue;
		}
		if (*p <= ' ' || *p >= 0x7f || (comp == 0 && *p == '.'))
			return 0;
		if (++comp > SP_STORE_NAME_MAX)
			return 0;
	}
	return comp > 0;
}

/* A copy of s fit for a message: printable, cut short. */
const char *
store_shown(const char *s, char *buf, size_t n)
{
	size_t i;

	for (i = 0; i + 1 < n && s[i] != '\0'; i++)
		buf[i] = s[i] >= ' ' && s[i] < 0x7f ? s[i] : '?';
	buf[i] = '\0';
	return buf;
}

int
sp_store_key_check(const char *key, struct sp_err *e)
{
	char b[80];

	if (key == NULL || !store_key_valid(key, SP_STORE_KEY_MAX))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "bad object key \"%s\"",
		    key != NULL ? store_shown(key, b, sizeof b) : "");
	return 0;
}

/* A list prefix: "" or printable, and its part before the last '/' a key. */
int
store_prefix_check(const char *prefix, struct sp_err *e)
{
	char dir[SP_STORE_KEY_MAX + 1], b[80];
	const char *slash = strrchr(prefix, '/');
	const unsigned char *p;

	for (p = (const unsigned char *)prefix; *p != '\0'; p++)
		if (*p <= ' ' || *p >= 0x7f)
			break;
	if (*p != '\0' || p - (const unsigned char *)prefix > SP_STORE_KEY_MAX)
		goto bad;
	if (slash == NULL)
		return 0;
	memcpy(dir, prefix, (size_t)(slash - prefix));
	dir[slash - prefix] = '\0';
	if (store_key_valid(dir, SP_STORE_KEY_MAX))
		return 0;
bad:
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "bad list prefix \"%s\"",
	    store_shown(prefix, b, sizeof b));
}

/* ---- plain I/O ---- */

/* Reads fd until buf is full or at EOF; *got says how much came. */
int
store_fill(int fd, unsigned char *buf, size_t cap, size_t *got, const char *what,
    const char *key, struct sp_err *e)
{
	size_t n = 0;
	ssize_t r;

	while (n < cap) {
		if ((r = read(fd, buf + n, cap - n)) == -1) {
			if (errno == EINTR)
				continue;
			*got = n;
			return sp_err_sys(e, SP_E_IO, "%s %s: read", what, key);
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*got = n;
	return 0;
}
