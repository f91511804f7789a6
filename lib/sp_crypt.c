/*
 * sp_crypt: encryption at rest with customer keys (design.md): the
 * secretstream format of artifacts, data keys, and their wrapping by a
 * tenant's key through a key file or an external KMS program.  The formats
 * and error codes are described in sp_crypt.h.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "sp_storage.h"

#define MAGIC		"SPACEENC"
#define MAGIC_LEN	8
#define PRE_LEN		(MAGIC_LEN + 1)		/* magic and version */
#define SS_HDR		crypto_secretstream_xchacha20poly1305_HEADERBYTES
#define SS_ABYTES	crypto_secretstream_xchacha20poly1305_ABYTES
#define TAG_MESSAGE	crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
#define TAG_FINAL	crypto_secretstream_xchacha20poly1305_TAG_FINAL
#define CT_MAX		(SP_CRYPT_CHUNK + SS_ABYTES)

#define B64		sodium_base64_VARIANT_ORIGINAL
#define KEY_B64_LEN	sodium_base64_ENCODED_LEN(SP_CRYPT_KEY_BYTES, B64)
#define BOX_LEN		(crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES + \
			    SP_CRYPT_KEY_BYTES)
#define BOX_B64_LEN	sodium_base64_ENCODED_LEN(BOX_LEN, B64)
#define W_FILE		"v1:file:"
#define W_CMD		"v1:cmd:"
#define KMS_LINE_MAX	4000	/* a cmd: program's answer, newline aside */
#define KMS_ARGS	32

static int
crypt_init(struct sp_err *e)
{
	if (sodium_init() < 0)
		return sp_err_set(e, SP_E_INTERNAL, 0, "libsodium cannot start");
	return 0;
}

/* Reads until n bytes or EOF: the count (short only at EOF), or -1. */
static ssize_t
read_full(int fd, void *p, size_t n)
{
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		r = read(fd, (char *)p + got, n - got);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			return -1;
		if (r == 0)
			break;
		got += r;
	}
	return got;
}

int
sp_crypt_encrypt(int in, int out, const unsigned char key[32],
    uint64_t *bytes_in, struct sp_err *e)
{
	crypto_secretstream_xchacha20poly1305_state st;
	unsigned char hdr[PRE_LEN + SS_HDR], *pt = NULL, *ct = NULL;
	unsigned long long clen;
	uint64_t total = 0;
	unsigned char tag;
	ssize_t n;
	int rc = -1;

	if (crypt_init(e) == -1)
		goto out;
	pt = malloc(SP_CRYPT_CHUNK);
	ct = malloc(4 + CT_MAX);
	if (pt == NULL || ct == NULL) {
		sp_err_sys(e, SP_E_INTERNAL, "encrypt");
		goto out;
	}
	memcpy(hdr, MAGIC, MAGIC_LEN);
	hdr[MAGIC_LEN] = SP_CRYPT_VERSION;
	crypto_secretstream_xchacha20poly1305_init_push(&st, hdr + PRE_LEN, key);
	if (sp_write_all(out, hdr, sizeof hdr) == -1) {
		sp_err_sys(e, SP_E_IO, "write encrypted stream");
		goto out;
	}
	/* A full chunk is a MESSAGE; the first short one (EOF) is the FINAL. */
	do {
		n = read_full(in, pt, SP_CRYPT_CHUNK);
		if (n == -1) {
			sp_err_sys(e, SP_E_IO, "read plaintext");
			goto out;
		}
		tag = n < SP_CRYPT_CHUNK ? TAG_FINAL : TAG_MESSAGE;
		crypto_secretstream_xchacha20poly1305_push(&st, ct + 4, &clen,
		    pt, n, hdr, PRE_LEN, tag);
		sp_be32_put(ct, clen);
		if (sp_write_all(out, ct, 4 + clen) == -1) {
			sp_err_sys(e, SP_E_IO, "write encrypted stream");
			goto out;
		}
		total += n;
	} while (tag != TAG_FINAL);
	rc = 0;
out:
	sodium_memzero(&st, sizeof st);
	if (pt != NULL)
		sodium_memzero(pt, SP_CRYPT_CHUNK);
	free(pt);
	free(ct);
	if (bytes_in != NULL)
		*bytes_in = total;
	return rc;
}

/* read_full for the stream decrypt reads: *got bytes, or "io". */
static int
read_in(int fd, void *p, size_t n, size_t *got, struct sp_err *e)
{
	ssize_t r = read_full(fd, p, n);

	if (r == -1)
		return sp_err_sys(e, SP_E_IO, "read encrypted stream");
	*got = r;
	return 0;
}

int
sp_crypt_decrypt(int in, int out, const unsigned char key[32],
    uint64_t *bytes_out, struct sp_err *e)
{
	crypto_secretstream_xchacha20poly1305_state st;
	unsigned char hdr[PRE_LEN + SS_HDR], len[4], *pt = NULL, *ct = NULL;
	unsigned long long plen;
	uint64_t total = 0, chunk = 0;
	unsigned char tag;
	uint32_t clen;
	size_t n = 0;
	int rc = -1;

	if (crypt_init(e) == -1)
		goto out;
	pt = malloc(SP_CRYPT_CHUNK);
	ct = malloc(CT_MAX);
	if (pt == NULL || ct == NULL) {
		sp_err_sys(e, SP_E_INTERNAL, "decrypt");
		goto out;
	}
	if (read_in(in, hdr, sizeof hdr, &n, e) == -1)
		goto out;
	if (n < sizeof hdr || memcmp(hdr, MAGIC, MAGIC_LEN) != 0) {
		sp_err_set(e, SP_E_CORRUPT, 0, "not an encrypted stream");
		goto out;
	}
	if (hdr[MAGIC_LEN] != SP_CRYPT_VERSION) {
		sp_err_set(e, SP_E_CORRUPT, 0, "unknown encrypted stream version %u",
		    hdr[MAGIC_LEN]);
		goto out;
	}
	if (crypto_secretstream_xchacha20poly1305_init_pull(&st, hdr + PRE_LEN,
	    key) != 0) {
		sp_err_set(e, SP_E_CORRUPT, 0, "bad encrypted stream header");
		goto out;
	}
	for (;; chunk++) {
		if (read_in(in, len, sizeof len, &n, e) == -1)
			goto out;
		if (n < sizeof len) {
			sp_err_set(e, SP_E_CORRUPT, 0, "encrypted stream truncated "
			    "before chunk %llu (no final chunk)",
			    (unsigned long long)chunk);
			goto out;
		}
		clen = sp_be32_get(len);
		if (clen < SS_ABYTES || clen > CT_MAX) {
			sp_err_set(e, SP_E_CORRUPT, 0, "chunk %llu: length %lu out "
			    "of bounds", (unsigned long long)chunk,
			    (unsigned long)clen);
			goto out;
		}
		if (read_in(in, ct, clen, &n, e) == -1)
			goto out;
		if (n < clen) {
			sp_err_set(e, SP_E_CORRUPT, 0, "encrypted stream truncated "
			    "in chunk %llu", (unsigned long long)chunk);
			goto out;
		}
		if (crypto_secretstream_xchacha20poly1305_pull(&st, pt, &plen,
		    &tag, ct, clen, hdr, PRE_LEN) != 0) {
			sp_err_set(e, SP_E_CORRUPT, 0, "chunk %llu does not verify "
			    "(wrong key or damaged)", (unsigned long long)chunk);
			goto out;
		}
		/* Only the writer's two shapes of chunk make a whole stream. */
		if (tag != TAG_FINAL && (tag != TAG_MESSAGE ||
		    plen != SP_CRYPT_CHUNK)) {
			sp_err_set(e, SP_E_CORRUPT, 0, "chunk %llu: unexpected "
			    "tag or size", (unsigned long long)chunk);
			goto out;
		}
		/* The final chunk goes out only when nothing follows it. */
		if (tag == TAG_FINAL) {
			if (read_in(in, len, 1, &n, e) == -1)
				goto out;
			if (n != 0) {
				sp_err_set(e, SP_E_CORRUPT, 0, "data after the "
				    "final chunk");
				goto out;
			}
		}
		if (sp_write_all(out, pt, plen) == -1) {
			sp_err_sys(e, SP_E_IO, "write plaintext");
			goto out;
		}
		total += plen;
		if (tag == TAG_FINAL)
			break;
	}
	rc = 0;
out:
	sodium_memzero(&st, sizeof st);
	if (pt != NULL)
		sodium_memzero(pt, SP_CRYPT_CHUNK);
	free(pt);
	free(ct);
	if (bytes_out != NULL)
		*bytes_out = total;
	return rc;
}

int
sp_crypt_data_key(unsigned char key[32])
{
	if (sodium_init() < 0)
		return -1;
	randombytes_buf(key, SP_CRYPT_KEY_BYTES);
	return 0;
}

int
sp_crypt_key_create(const char *path, struct sp_err *e)
{
	unsigned char key[SP_CRYPT_KEY_BYTES];
	char tmp[SP_PATH_MAX], dir[SP_PATH_MAX];
	int fd = -1, dfd, rc = -1;

	if (crypt_init(e) == -1)
		return -1;
	if (sp_path_fmt(tmp, sizeof tmp, e, "%s.tmp-XXXXXX", path) == -1 ||
	    sp_path_fmt(dir, sizeof dir, e, "%s", path) == -1)
		return -1;
	sodium_mlock(key, sizeof key);
	randombytes_buf(key, sizeof key);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1) {
		sp_err_sys(e, SP_E_IO, "create key file %s", path);
		goto out;
	}
	if (sp_path_adopt(fd, tmp, e) == -1)
		goto out;
	if (fchmod(fd, 0600) == -1 || sp_write_all(fd, key, sizeof key) == -1 ||
	    fsync(fd) == -1) {
		sp_err_sys(e, SP_E_IO, "write key file %s", tmp);
		goto out;
	}
	/* link, unlike rename, refuses to replace a key that is there. */
	if (link(tmp, path) == -1) {
		if (errno == EEXIST)
			sp_err_set(e, SP_E_EXISTS, 0, "key file %s exists", path);
		else
			sp_err_sys(e, SP_E_IO, "create key file %s", path);
		goto out;
	}
	if ((dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		fsync(dfd);
		close(dfd);
	}
	rc = 0;
out:
	if (fd != -1) {
		unlink(tmp);
		close(fd);
	}
	sodium_munlock(key, sizeof key);
	return rc;
}

/* The tenant key of a file: reference: gone means revoked. */
static int
file_key_read(const char *path, unsigned char key[32], struct sp_err *e)
{
	struct stat st;
	ssize_t n;
	int fd, rc = -1;

	if (*path == '\0')
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "file: key reference "
		    "without a path");
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		if (errno == ENOENT || errno == ENOTDIR)
			return sp_err_set(e, SP_E_KEY_REVOKED, 0, "key file %s is "
			    "gone: the key is revoked", path);
		return sp_err_sys(e, SP_E_KMS, "key file %s", path);
	}
	if (fstat(fd, &st) == -1) {
		sp_err_sys(e, SP_E_KMS, "key file %s", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size != SP_CRYPT_KEY_BYTES) {
		sp_err_set(e, SP_E_KMS, 0, "key file %s is not a key of %d bytes",
		    path, SP_CRYPT_KEY_BYTES);
		goto out;
	}
	if ((n = read_full(fd, key, SP_CRYPT_KEY_BYTES)) == -1) {
		sp_err_sys(e, SP_E_KMS, "read key file %s", path);
		goto out;
	}
	if (n != SP_CRYPT_KEY_BYTES) {
		sp_err_set(e, SP_E_KMS, 0, "key file %s is short", path);
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

static int
file_wrap(const char *path, const unsigned char key[32], char *wrapped,
    size_t n, struct sp_err *e)
{
	unsigned char tk[SP_CRYPT_KEY_BYTES], box[BOX_LEN];
	int rc = -1;

	if (n < sizeof W_FILE - 1 + BOX_B64_LEN)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "no room for the wrapped key");
	sodium_mlock(tk, sizeof tk);
	if (file_key_read(path, tk, e) == -1)
		goto out;
	randombytes_buf(box, crypto_secretbox_NONCEBYTES);
	crypto_secretbox_easy(box + crypto_secretbox_NONCEBYTES, key,
	    SP_CRYPT_KEY_BYTES, box, tk);
	memcpy(wrapped, W_FILE, sizeof W_FILE - 1);
	sodium_bin2base64(wrapped + sizeof W_FILE - 1, BOX_B64_LEN, box,
	    sizeof box, B64);
	rc = 0;
out:
	sodium_munlock(tk, sizeof tk);
	return rc;
}

/* Strict base64 of exactly n bytes, all of s: 0 or -1. */
static int
b64_exact(const char *s, unsigned char *bin, size_t n)
{
	size_t len = strlen(s), got;
	const char *end;

	if (sodium_base642bin(bin, n, s, len, NULL, &got, &end, B64) != 0 ||
	    end != s + len || got != n)
		return -1;
	return 0;
}

static int
file_unwrap(const char *path, const char *b64, unsigned char key[32],
    struct sp_err *e)
{
	unsigned char tk[SP_CRYPT_KEY_BYTES], box[BOX_LEN];
	int rc = -1;

	if (b64_exact(b64, box, sizeof box) == -1)
		return sp_err_set(e, SP_E_CORRUPT, 0, "wrapped key is not well "
		    "formed");
	sodium_mlock(tk, sizeof tk);
	if (file_key_read(path, tk, e) == -1)
		goto out;
	if (crypto_secretbox_open_easy(key, box + crypto_secretbox_NONCEBYTES,
	    sizeof box - crypto_secretbox_NONCEBYTES, box, tk) != 0) {
		sp_err_set(e, SP_E_KEY_REVOKED, 0, "the key in %s does not unwrap "
		    "this data key: revoked or replaced", path);
		goto out;
	}
	rc = 0;
out:
	sodium_munlock(tk, sizeof tk);
	return rc;
}

/* 1 when s is 1..max bytes of printable ASCII without spaces. */
static int
kms_line_ok(const char *s, size_t len, size_t max)
{
	size_t i;

	if (len == 0 || len > max)
		return 0;
	for (i = 0; i < len; i++)
		if (s[i] < 0x21 || s[i] > 0x7e)
			return 0;
	return 1;
}

/*
 * Runs the KMS program of spec (what follows "cmd:") with op, input on its
 * stdin; its stdout's one line, newline cut, into out (max bytes, NUL
 * added; out has room for KMS_LINE_MAX + 2).  Every way it can fail is an
 * error: nothing it printed is trusted but a well-formed line.
 */
static int
kms_cmd(const char *spec, const char *op, const char *input, char *out,
    size_t max, struct sp_err *e)
{
	char buf[SP_PATH_MAX], *argv[KMS_ARGS + 2], *tok, *save;
	char tail[SP_PROC_TAIL + 1];
	size_t argc = 0, n = 0;
	int ms, status, rc = -1;

	if (sp_env_ms("SPACE_KMS_TIMEOUT_MS", SP_CRYPT_TIMEOUT_MS, &ms,
	    e) == -1 ||
	    sp_path_fmt(buf, sizeof buf, e, "%s", spec) == -1)
		return -1;
	for (tok = strtok_r(buf, " \t", &save); tok != NULL;
	    tok = strtok_r(NULL, " \t", &save)) {
		if (argc == KMS_ARGS)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "cmd: key "
			    "reference of too many words");
		argv[argc++] = tok;
		if (argc == 1)
			argv[argc++] = (char *)op;
	}
	if (argc == 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "cmd: key reference "
		    "without a program");
	argv[argc] = NULL;

	status = sp_proc_talk(argv, input, strlen(input), (unsigned char *)out,
	    KMS_LINE_MAX + 1, &n, tail, ms, e);
	if (status == -1) {
		/* A timeout says so; any other failure is the key service's,
		 * retryable when the program was killed or could not run. */
		if (e->code != SP_E_TIMED_OUT) {
			e->temp = e->code != SP_E_TOO_BIG;
			e->code = SP_E_KMS;
		}
		goto out;
	}
	if (status == 3) {
		sp_err_set(e, SP_E_KEY_REVOKED, 0, "kms program %s: the key is "
		    "revoked: %s", argv[0], tail);
		goto out;
	}
	if (status != 0) {
		sp_err_set(e, SP_E_KMS, 1, "kms program %s exited %d: %s", argv[0],
		    status, tail);
		goto out;
	}
	if (n > 0 && out[n - 1] == '\n')
		n--;
	if (!kms_line_ok(out, n, max)) {
		sp_err_set(e, SP_E_KMS, 0, "kms program %s printed no well-formed "
		    "line", argv[0]);
		goto out;
	}
	out[n] = '\0';
	rc = 0;
out:
	if (rc == -1)
		sodium_memzero(out, KMS_LINE_MAX + 2);
	return rc;
}

static int
cmd_wrap(const char *spec, const unsigned char key[32], char *wrapped,
    size_t n, struct sp_err *e)
{
	char in[KEY_B64_LEN + 1], line[KMS_LINE_MAX + 2];
	int rc = -1;

	sodium_mlock(in, sizeof in);
	sodium_bin2base64(in, KEY_B64_LEN, key, SP_CRYPT_KEY_BYTES, B64);
	strcat(in, "\n");
	if (kms_cmd(spec, "wrap", in, line, KMS_LINE_MAX, e) == -1)
		goto out;
	if (sizeof W_CMD - 1 + strlen(line) + 1 > n) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "no room for the wrapped key");
		goto out;
	}
	memcpy(wrapped, W_CMD, sizeof W_CMD - 1);
	strcpy(wrapped + sizeof W_CMD - 1, line);
	rc = 0;
out:
	sodium_munlock(in, sizeof in);
	return rc;
}

static int
cmd_unwrap(const char *spec, const char *payload, unsigned char key[32],
    struct sp_err *e)
{
	char in[KMS_LINE_MAX + 2], line[KMS_LINE_MAX + 2];
	int rc = -1;

	if (!kms_line_ok(payload, strlen(payload), KMS_LINE_MAX))
		return sp_err_set(e, SP_E_CORRUPT, 0, "wrapped key is not well "
		    "formed");
	snprintf(in, sizeof in, "%s\n", payload);
	sodium_mlock(line, sizeof line);
	if (kms_cmd(spec, "unwrap", in, line, KEY_B64_LEN - 1, e) == -1)
		goto out;
	if (b64_exact(line, key, SP_CRYPT_KEY_BYTES) == -1) {
		sodium_memzero(key, SP_CRYPT_KEY_BYTES);
		sp_err_set(e, SP_E_KMS, 0, "kms program answered no key of %d "
		    "bytes in base64", SP_CRYPT_KEY_BYTES);
		goto out;
	}
	rc = 0;
out:
	sodium_munlock(line, sizeof line);
	return rc;
}

int
sp_crypt_wrap(const char *keyref, const unsigned char key[32], char *wrapped,
    size_t n, struct sp_err *e)
{
	if (crypt_init(e) == -1)
		return -1;
	if (strncmp(keyref, "file:", 5) == 0)
		return file_wrap(keyref + 5, key, wrapped, n, e);
	if (strncmp(keyref, "cmd:", 4) == 0)
		return cmd_wrap(keyref + 4, key, wrapped, n, e);
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "unknown kind of key reference "
	    "(file: or cmd:)");
}

int
sp_crypt_unwrap(const char *keyref, const char *wrapped, unsigned char key[32],
    struct sp_err *e)
{
	int file = strncmp(keyref, "file:", 5) == 0;
	int cmd = strncmp(keyref, "cmd:", 4) == 0;

	if (crypt_init(e) == -1)
		return -1;
	if (!file && !cmd)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "unknown kind of key "
		    "reference (file: or cmd:)");
	if (strnlen(wrapped, SP_CRYPT_WRAPPED_MAX) == SP_CRYPT_WRAPPED_MAX)
		return sp_err_set(e, SP_E_CORRUPT, 0, "wrapped key too long");
	if (strncmp(wrapped, W_FILE, sizeof W_FILE - 1) == 0) {
		if (!file)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "key wrapped by a "
			    "file: key, reference is cmd:");
		return file_unwrap(keyref + 5, wrapped + sizeof W_FILE - 1,
		    key, e);
	}
	if (strncmp(wrapped, W_CMD, sizeof W_CMD - 1) == 0) {
		if (!cmd)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "key wrapped by a "
			    "cmd: program, reference is file:");
		return cmd_unwrap(keyref + 4, wrapped + sizeof W_CMD - 1, key,
		    e);
	}
	return sp_err_set(e, SP_E_CORRUPT, 0, "wrapped key of unknown version "
	    "or kind");
}
