/*
 * sp_apikey.c: API keys.  A key is "spk_" ID "_" SECRET: ID (16 hex) names
 * its row, SECRET (64 hex, 32 random bytes) is shown once and kept only as
 * its BLAKE2b-256 hash.  The secret is random, so a fast hash is enough: no
 * dictionary to guess from.
 */
#include <string.h>

#include <sodium.h>

#include "sp_api.h"

static void
hash_hex(const char *secret, char out[65])
{
	unsigned char h[32];

	crypto_generichash(h, sizeof h, (const unsigned char *)secret,
	    strlen(secret), NULL, 0);
	sodium_bin2hex(out, 65, h, sizeof h);
}

static void
random_hex(char *out, size_t nbytes)
{
	unsigned char b[32];

	randombytes_buf(b, nbytes);
	sodium_bin2hex(out, 2 * nbytes + 1, b, nbytes);
	sodium_memzero(b, sizeof b);
}

int
sp_apikey_new(const char *tenant, int admin, int rate,
    struct sp_apikey_row *row, char key[SP_APIKEY_LEN + 1], struct sp_err *e)
{
	char secret[SP_APIKEY_SECRET_LEN + 1];

	if (sodium_init() < 0)
		return sp_err_set(e, SP_E_INTERNAL, 0, "libsodium will not start");
	memset(row, 0, sizeof *row);
	random_hex(row->id, SP_APIKEY_ID_LEN / 2);
	random_hex(secret, SP_APIKEY_SECRET_LEN / 2);
	snprintf(row->tenant, sizeof row->tenant, "%s", admin ? "" : tenant);
	row->admin = admin;
	row->rate = rate;
	hash_hex(secret, row->hash);
	snprintf(key, SP_APIKEY_LEN + 1, "spk_%s_%s", row->id, secret);
	sodium_memzero(secret, sizeof secret);
	return 0;
}

static int
all_hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

int
sp_apikey_check(struct sp_db *db, const char *key, struct sp_apikey_row *row,
    struct sp_err *e)
{
	char id[SP_APIKEY_ID_LEN + 1], h[65];

	if (key == NULL || strlen(key) != SP_APIKEY_LEN ||
	    strncmp(key, "spk_", 4) != 0 || key[4 + SP_APIKEY_ID_LEN] != '_' ||
	    !all_hex(key + 4, SP_APIKEY_ID_LEN) ||
	    !all_hex(key + 5 + SP_APIKEY_ID_LEN, SP_APIKEY_SECRET_LEN))
		goto bad;
	memcpy(id, key + 4, SP_APIKEY_ID_LEN);
	id[SP_APIKEY_ID_LEN] = '\0';
	if (sp_db_apikey_get(db, id, row, e) == -1) {
		if (e->code == SP_E_NOT_FOUND)
			goto bad;
		return -1;
	}
	hash_hex(key + 5 + SP_APIKEY_ID_LEN, h);
	if (!sp_api_token_equal(h, row->hash))
		goto bad;
	return 0;
bad:
	return sp_err_set(e, SP_E_UNAUTHORIZED, 0, "a valid API key is needed");
}

int
sp_api_token_new(char out[65], struct sp_err *e)
{
	if (sodium_init() < 0)
		return sp_err_set(e, SP_E_INTERNAL, 0, "libsodium will not start");
	random_hex(out, 32);
	return 0;
}

int
sp_api_token_equal(const char *a, const char *b)
{
	size_t n = strlen(a);

	return n == strlen(b) && sodium_memcmp(a, b, n) == 0;
}
