/*
 * sp_id: sandbox ids and the validation of every name a user hands us.  Ids
 * are fixed-length so that a saved VM state can be re-identified in place for
 * a fork (design.md).
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "sp_core.h"

static const char b32[] = "abcdefghijklmnopqrstuvwxyz234567";

int
sp_id_new(char out[SP_ID_LEN + 1], struct sp_err *e)
{
	unsigned char r[SP_ID_LEN];
	size_t got = 0;
	ssize_t n;
	int i;

	while (got < sizeof r) {
		n = getrandom(r + got, sizeof r - got, 0);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return sp_err_sys(e, SP_E_INTERNAL, "getrandom");
		got += (size_t)n;
	}
	for (i = 0; i < SP_ID_LEN; i++)
		out[i] = b32[r[i] & 31];
	out[SP_ID_LEN] = '\0';
	return 0;
}

int
sp_id_valid(const char *s)
{
	int i;

	if (s == NULL)
		return 0;
	for (i = 0; i < SP_ID_LEN; i++)
		if (s[i] == '\0' || strchr(b32, s[i]) == NULL)
			return 0;
	return s[SP_ID_LEN] == '\0';
}

/* Prints at most a short, safe prefix of hostile input into messages. */
static void
quote_prefix(const char *s, char *out, size_t n)
{
	size_t i, j = 0;

	for (i = 0; s[i] != '\0' && j + 5 < n && i < 40; i++) {
		unsigned char c = (unsigned char)s[i];

		out[j++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	if (s[i] != '\0' && j + 4 < n) {
		memcpy(out + j, "...", 3);
		j += 3;
	}
	out[j] = '\0';
}

int
sp_id_check(const char *s, struct sp_err *e)
{
	char q[64];

	if (sp_id_valid(s))
		return 0;
	quote_prefix(s ? s : "", q, sizeof q);
	return sp_err_set(e, SP_E_BAD_INPUT, 0,
	    "'%s' is not a sandbox id (%d chars of a-z, 2-7)", q, SP_ID_LEN);
}

int
sp_name_check(const char *what, const char *s, struct sp_err *e)
{
	char q[64];
	size_t i, n;

	n = s ? strlen(s) : 0;
	quote_prefix(s ? s : "", q, sizeof q);
	if (n == 0 || n > SP_NAME_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "%s '%s' must be 1 to %d characters", what, q, SP_NAME_MAX);
	if (s[0] == '.' || s[0] == '-')
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "%s '%s' must not start with '.' or '-'", what, q);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return sp_err_set(e, SP_E_BAD_INPUT, 0,
			    "%s '%s' may hold only letters, digits, '.', '_' and '-'",
			    what, q);
	}
	return 0;
}

int
sp_handle_valid(const char *s)
{
	size_t i, n = s ? strlen(s) : 0;

	if (n == 0 || n > SP_HANDLE_MAX || s[0] == '-' || s[n - 1] == '-' ||
	    sp_id_valid(s))
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' &&
		    s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

int
sp_handle_check(const char *s, struct sp_err *e)
{
	char q[64];

	if (sp_handle_valid(s))
		return 0;
	quote_prefix(s ? s : "", q, sizeof q);
	if (sp_id_valid(s))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "name '%s' is what an id "
		    "looks like (%d chars of a-z, 2-7): add a digit 0, 1, 8, 9 or "
		    "a '-'", q, SP_ID_LEN);
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "name '%s': 1 to %d of a-z, 0-9 "
	    "and '-', a letter or digit at each end", q, SP_HANDLE_MAX);
}

int
sp_request_id_check(const char *s, struct sp_err *e)
{
	char q[64];
	size_t i, n = s ? strlen(s) : 0;

	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' &&
		    s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		    strchr("._:-", s[i]) != NULL))
			break;
	if (n > 0 && n <= SP_REQUEST_ID_MAX && i == n)
		return 0;
	quote_prefix(s ? s : "", q, sizeof q);
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "request id '%s': 1 to %d of "
	    "A-Z, a-z, 0-9, '.', '_', ':' and '-'", q, SP_REQUEST_ID_MAX);
}

int
sp_label_check(const char *kv, struct sp_err *e)
{
	char key[SP_NAME_MAX + 1];
	const char *eq, *v;
	size_t i, kn;

	if (kv == NULL || (eq = strchr(kv, '=')) == NULL)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a label is KEY=VALUE");
	kn = (size_t)(eq - kv);
	if (kn == 0 || kn > SP_NAME_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "a label key must be 1 to %d characters", SP_NAME_MAX);
	memcpy(key, kv, kn);
	key[kn] = '\0';
	if (sp_name_check("label key", key, e) == -1)
		return -1;
	v = eq + 1;
	if (strlen(v) > SP_LABEL_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "label '%s': value longer than %d bytes", key, SP_LABEL_MAX);
	if (!sp_utf8_valid(v, strlen(v)))
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "label '%s': value is not valid UTF-8", key);
	for (i = 0; v[i] != '\0'; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
			return sp_err_set(e, SP_E_BAD_INPUT, 0,
			    "label '%s': value holds a control character", key);
	return 0;
}

/* Strict UTF-8: no overlongs, no surrogates, nothing above U+10FFFF, no NUL. */
int
sp_utf8_valid(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, k, len;
	unsigned int cp, min;

	while (i < n) {
		unsigned char c = s[i];

		if (c == 0)
			return 0;
		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			len = 2;
			cp = c & 0x1f;
			min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			len = 3;
			cp = c & 0x0f;
			min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			len = 4;
			cp = c & 0x07;
			min = 0x10000;
		} else
			return 0;
		if (i + len > n)
			return 0;
		for (k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += len;
	}
	return 1;
}
