/*
 * test-crypt: encryption at rest (lib/sp_crypt.c): stream round trips, also
 * through pipes; every way a stream can be damaged is "corrupt" and gives
 * out nothing unverified; data keys wrapped by a key file and by an external
 * KMS program (the test one, build/tests/kms-test or $SPACE_KMS_TEST, and
 * misbehaving shell scripts); and the encryption throughput.
 * TAP output; exit 1 on any failure.
 */
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sp.h"
#include "tap.h"

#define CH	SP_CRYPT_CHUNK
#define HDR	33		/* magic, version, secretstream header */
#define OVER	21		/* per chunk: length and secretstream bytes */
#define MARKER	"SPACE-PLAINTEXT-MARKER"

static char dir[64];
static unsigned char key[32];

static int
mem_fd(const void *p, size_t n)
{
	int fd = memfd_create("test-crypt", MFD_CLOEXEC);

	if (fd == -1 || write(fd, p, n) != (ssize_t)n || lseek(fd, 0, SEEK_SET) == -1)
		abort();
	return fd;
}

/* All of fd, from its start, into a new buffer. */
static unsigned char *
slurp(int fd, size_t *n)
{
	struct stat st;
	unsigned char *p;

	if (fstat(fd, &st) == -1 || (p = malloc(st.st_size + 1)) == NULL ||
	    pread(fd, p, st.st_size, 0) != st.st_size)
		abort();
	*n = st.st_size;
	return p;
}

static void
pattern(unsigned char *p, size_t n, unsigned seed)
{
	unsigned char s[randombytes_SEEDBYTES] = { 0 };

	memcpy(s, &seed, sizeof seed);
	randombytes_buf_deterministic(p, n, s);
}

static unsigned char *
enc(const unsigned char *pt, size_t n, const unsigned char *k, size_t *cn)
{
	struct sp_err e = { 0 };
	uint64_t in;
	int ifd = mem_fd(pt, n), ofd = mem_fd("", 0);
	unsigned char *ct;

	if (sp_crypt_encrypt(ifd, ofd, k, &in, &e) == -1 || in != n) {
		printf("# encrypt: %s: %s\n", sp_code_name(e.code), e.msg);
		abort();
	}
	ct = slurp(ofd, cn);
	close(ifd);
	close(ofd);
	return ct;
}

/* Decrypts ct; *pt (may be NULL) gets what came out, even on error. */
static int
dec(const unsigned char *ct, size_t cn, const unsigned char *k,
    unsigned char **pt, size_t *pn, uint64_t *count, struct sp_err *e)
{
	int ifd = mem_fd(ct, cn), ofd = mem_fd("", 0), rc;
	uint64_t c;
	size_t n;
	unsigned char *p;

	sp_err_clear(e);
	rc = sp_crypt_decrypt(ifd, ofd, k, &c, e);
	p = slurp(ofd, &n);
	if (pt != NULL) {
		*pt = p;
		*pn = n;
	} else
		free(p);
	if (count != NULL)
		*count = c;
	close(ifd);
	close(ofd);
	return rc;
}

static void
test_roundtrip(void)
{
	size_t sizes[] = { 0, 1, CH - 1, CH, CH + 1, 3 * CH, 200000 };
	size_t i, cn, pn, chunks;
	unsigned char *pt, *ct, *out;
	struct sp_err e = { 0 };
	uint64_t count;

	for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t n = sizes[i];

		pt = malloc(n + 1);
		pattern(pt, n, i);
		ct = enc(pt, n, key, &cn);
		chunks = n / CH + 1;
		tap_okf("", "", cn == HDR + chunks * OVER + n,
		    "%zu bytes: %zu encrypted (%zu chunks)", n, cn, chunks);
		tap_okf(sp_code_name(e.code), e.msg, dec(ct, cn, key, &out, &pn, &count,
		    &e) == 0 && pn == n && count == n &&
		    memcmp(out, pt, n) == 0, "%zu bytes: round trip", n);
		free(out);
		free(ct);
		free(pt);
	}
}

/* 10 MiB: a writer child -> pipe -> encrypt -> pipe -> decrypting child. */
static void
test_pipes(void)
{
	size_t n = 10 << 20, got;
	unsigned char *pt = malloc(n), *out;
	char path[128];
	int a[2], b[2], fd, st1, st2;
	struct sp_err e = { 0 };
	pid_t w, d;
	uint64_t in;
	int rc;

	pattern(pt, n, 42);
	snprintf(path, sizeof path, "%s/pipe.out", dir);
	if (pipe(a) == -1 || pipe(b) == -1)
		abort();
	if ((w = fork()) == 0) {
		close(a[0]);
		close(b[0]);
		close(b[1]);
		/* Odd writes, so that reads come short. */
		for (size_t off = 0; off < n; off += 7777)
			if (write(a[1], pt + off, n - off < 7777 ? n - off : 7777) < 0)
				_exit(1);
		_exit(0);
	}
	if ((d = fork()) == 0) {
		close(a[0]);
		close(a[1]);
		close(b[1]);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		_exit(sp_crypt_decrypt(b[0], fd, key, &in, &e) == 0 && in == n ?
		    0 : 1);
	}
	close(a[1]);
	close(b[0]);
	rc = sp_crypt_encrypt(a[0], b[1], key, &in, &e);
	close(a[0]);
	close(b[1]);
	waitpid(w, &st1, 0);
	waitpid(d, &st2, 0);
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && in == n, "10 MiB encrypted from a pipe "
	    "to a pipe");
	tap_ok(WIFEXITED(st2) && WEXITSTATUS(st2) == 0 && WIFEXITED(st1) &&
	    WEXITSTATUS(st1) == 0, "decrypted from a pipe");
	fd = open(path, O_RDONLY);
	out = slurp(fd, &got);
	close(fd);
	tap_ok(got == n && memcmp(out, pt, n) == 0, "10 MiB round trip intact");
	free(out);
	free(pt);
}

static void
test_secrecy(void)
{
	size_t n = 3 * CH, cn, cn2, off;
	unsigned char *pt = malloc(n), *ct, *ct2;

	for (off = 0; off + sizeof MARKER <= n; off += sizeof MARKER)
		memcpy(pt + off, MARKER, sizeof MARKER);
	ct = enc(pt, n, key, &cn);
	ct2 = enc(pt, n, key, &cn2);
	tap_ok(memmem(ct, cn, MARKER, 8) == NULL && memmem(ct, cn, "PLAINTEXT",
	    9) == NULL, "the ciphertext holds no piece of the marker");
	tap_ok(memcmp(ct, "SPACEENC\x01", 9) == 0, "the stream starts "
	    "with magic and version");
	tap_ok(cn == cn2 && memcmp(ct + 9, ct2 + 9, cn - 9) != 0,
	    "the same plaintext and key encrypt differently twice");
	free(ct);
	free(ct2);
	free(pt);
}

/* A damaged copy of ct decrypts to "corrupt" and to no more than the
 * verified chunks before the damage. */
static void
damaged(const unsigned char *ct, size_t cn, const unsigned char *pt,
    size_t keep_max, const char *what)
{
	unsigned char *out;
	struct sp_err e = { 0 };
	size_t pn;
	int rc = dec(ct, cn, key, &out, &pn, NULL, &e);

	tap_okf(sp_code_name(e.code), e.msg, rc == -1 && e.code == SP_E_CORRUPT &&
	    pn <= keep_max && pn % CH == 0 && memcmp(out, pt, pn) == 0,
	    "%s: corrupt, %zu verified bytes out", what, pn);
	free(out);
}

static void
test_tamper(void)
{
	/* 3 full chunks and a final one of 3392 bytes. */
	size_t n = 200000, cn, i, c1 = HDR, c2 = c1 + 4 + CH + 17;
	size_t c3 = c2 + 4 + CH + 17, c4 = c3 + 4 + CH + 17;
	unsigned char *pt = malloc(n), *ct, *bad, wrong[32];
	struct {
		size_t off;
		const char *what;
		size_t keep;
	} flips[] = {
		{ 0, "magic", 0 }, { 8, "version", 0 },
		{ 9, "secretstream header", 0 },
		{ HDR - 1, "secretstream header end", 0 },
		{ c1, "chunk 1 length, high byte", 0 },
		{ c1 + 3, "chunk 1 length, low byte", 0 },
		{ c1 + 4, "chunk 1 tag byte", 0 },
		{ c1 + 4 + 1000, "chunk 1 body", 0 },
		{ c2 - 1, "chunk 1 MAC", 0 },
		{ c2 + 4 + 5000, "chunk 2 body", CH },
		{ c4 + 4, "final chunk tag byte", 3 * CH },
		{ c4 + 4 + 100, "final chunk body", 3 * CH },
	};
	size_t cuts[] = { 0, 1, 8, 9, 20, HDR, HDR + 2, HDR + 4, HDR + 100,
	    c2, c2 + 3, c3, c4, c4 + 4, c4 + 10 };

	pattern(pt, n, 7);
	ct = enc(pt, n, key, &cn);
	bad = malloc(cn + 2 * (4 + CH + 17));
	tap_ok(cn == c4 + 4 + (n - 3 * CH) + 17, "layout as documented");

	for (i = 0; i < sizeof flips / sizeof flips[0]; i++) {
		memcpy(bad, ct, cn);
		bad[flips[i].off] ^= 0x01;
		damaged(bad, cn, pt, flips[i].keep, flips[i].what);
	}
	memcpy(bad, ct, cn);
	bad[cn - 1] ^= 0x80;
	damaged(bad, cn, pt, 3 * CH, "final chunk MAC (last byte)");

	for (i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
		char what[64];

		snprintf(what, sizeof what, "truncated to %zu bytes", cuts[i]);
		damaged(ct, cuts[i], pt, 3 * CH, what);
	}
	damaged(ct, cn - 1, pt, 3 * CH, "truncated by one byte");

	/* Junk, or a whole chunk, after the final chunk. */
	memcpy(bad, ct, cn);
	bad[cn] = 0;
	damaged(bad, cn + 1, pt, 3 * CH, "one byte after the final chunk");
	memcpy(bad + cn, ct + c4, cn - c4);
	damaged(bad, cn + (cn - c4), pt, 3 * CH, "final chunk repeated");
	memcpy(bad + cn, ct + c1, c2 - c1);
	damaged(bad, cn + (c2 - c1), pt, 3 * CH, "a chunk after the final one");

	/* Chunks reordered, dropped, repeated. */
	memcpy(bad, ct, c1);
	memcpy(bad + c1, ct + c2, c3 - c2);
	memcpy(bad + c1 + (c3 - c2), ct + c1, c2 - c1);
	memcpy(bad + c3, ct + c3, cn - c3);
	damaged(bad, cn, pt, 0, "chunks 1 and 2 swapped");
	memcpy(bad, ct, c2);
	memcpy(bad + c2, ct + c3, cn - c3);
	damaged(bad, cn - (c3 - c2), pt, CH, "chunk 2 dropped");
	memcpy(bad, ct, c2);
	memcpy(bad + c2, ct + c1, cn - c1);
	damaged(bad, cn + (c2 - c1), pt, CH, "chunk 1 repeated");

	/* Lengths out of bounds are refused before anything is read. */
	{
		const unsigned char lens[][4] = {
			{ 0xff, 0xff, 0xff, 0xff }, { 0, 1, 0, 0x12 },
			{ 0, 0, 0, 16 }, { 0, 0, 0, 0 },
		};

		for (i = 0; i < sizeof lens / sizeof lens[0]; i++) {
			char what[64];

			memcpy(bad, ct, cn);
			memcpy(bad + c1, lens[i], 4);
			snprintf(what, sizeof what, "chunk length %02x%02x%02x%02x",
			    lens[i][0], lens[i][1], lens[i][2], lens[i][3]);
			damaged(bad, cn, pt, 0, what);
		}
	}

	/* A short MESSAGE chunk is a valid secretstream but not our stream:
	 * made here by hand, one 10-byte MESSAGE then a FINAL. */
	{
		crypto_secretstream_xchacha20poly1305_state st;
		unsigned char s[HDR + 2 * (4 + 17) + 10];
		unsigned long long l;

		memcpy(s, "SPACEENC\x01", 9);
		crypto_secretstream_xchacha20poly1305_init_push(&st, s + 9, key);
		crypto_secretstream_xchacha20poly1305_push(&st, s + HDR + 4, &l,
		    pt, 10, s, 9, crypto_secretstream_xchacha20poly1305_TAG_MESSAGE);
		memcpy(s + HDR, "\0\0\0\x1b", 4);
		crypto_secretstream_xchacha20poly1305_push(&st, s + HDR + 31 + 4,
		    &l, NULL, 0, s, 9, crypto_secretstream_xchacha20poly1305_TAG_FINAL);
		memcpy(s + HDR + 31, "\0\0\0\x11", 4);
		damaged(s, sizeof s, pt, 0, "a short chunk before the final one");
	}

	memcpy(wrong, key, sizeof wrong);
	wrong[0] ^= 1;
	{
		struct sp_err e = { 0 };
		size_t pn;
		unsigned char *out;

		tap_okf(sp_code_name(e.code), e.msg, dec(ct, cn, wrong, &out, &pn, NULL, &e) == -1 &&
		    e.code == SP_E_CORRUPT && pn == 0, "wrong key: corrupt, "
		    "nothing out");
		free(out);
		randombytes_buf(bad, 5000);
		tap_okf(sp_code_name(e.code), e.msg, dec(bad, 5000, key, NULL, NULL, NULL, &e) == -1 &&
		    e.code == SP_E_CORRUPT, "random bytes: corrupt");
		tap_okf(sp_code_name(e.code), e.msg, dec(bad, 0, key, NULL, NULL, NULL, &e) == -1 &&
		    e.code == SP_E_CORRUPT, "empty input: corrupt");
	}
	free(bad);
	free(ct);
	free(pt);
}

static void
test_io_errors(void)
{
	struct sp_err e = { 0 };
	int fd = mem_fd("abc", 3), ro = open("/dev/null", O_RDONLY);

	sp_err_clear(&e);
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_encrypt(fd, ro, key, NULL, &e) == -1 &&
	    e.code == SP_E_IO, "encrypting to a read-only fd: io");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_decrypt(-1, ro, key, NULL, &e) == -1 &&
	    e.code == SP_E_IO, "decrypting a bad fd: io");
	close(fd);
	close(ro);
}

static void
test_data_key(void)
{
	unsigned char a[32], b[32];

	tap_ok(sp_crypt_data_key(a) == 0 && sp_crypt_data_key(b) == 0 &&
	    memcmp(a, b, 32) != 0, "data keys are random");
}

/* ---- wrapping ---- */

static int
is(const struct sp_err *e, const char *code)
{
	return strcmp(sp_code_name(e->code), code) == 0;
}

static void
test_file_kms(void)
{
	char kf[128], ref[160], w1[SP_CRYPT_WRAPPED_MAX], w2[SP_CRYPT_WRAPPED_MAX];
	char bad[SP_CRYPT_WRAPPED_MAX + 8];
	unsigned char dk[32], out[32];
	struct sp_err e = { 0 };
	struct stat st;

	snprintf(kf, sizeof kf, "%s/tenant.key", dir);
	snprintf(ref, sizeof ref, "file:%s", kf);
	sp_crypt_data_key(dk);
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_key_create(kf, &e) == 0, "key file made");
	tap_ok(stat(kf, &st) == 0 && (st.st_mode & 0777) == 0600 &&
	    st.st_size == 32, "key file is 32 bytes, mode 0600");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_key_create(kf, &e) == -1 && is(&e, "exists"),
	    "a second key file at the same path: exists");
	tap_ok(stat(kf, &st) == 0 && st.st_size == 32, "the first key is kept");

	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap(ref, dk, w1, sizeof w1, &e) == 0 &&
	    strncmp(w1, "v1:file:", 8) == 0 && strlen(w1) == 104,
	    "wrap: v1:file: and 96 base64 characters");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap(ref, dk, w2, sizeof w2, &e) == 0 &&
	    strcmp(w1, w2) != 0, "wrapping twice differs (random nonce)");
	memset(out, 0, sizeof out);
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, w1, out, &e) == 0 &&
	    memcmp(out, dk, 32) == 0, "unwrap gives the data key back");
	memset(out, 0, sizeof out);
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, w2, out, &e) == 0 &&
	    memcmp(out, dk, 32) == 0, "so does the second wrapping");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap(ref, dk, bad, 100, &e) == -1 &&
	    is(&e, "bad-input"), "a buffer too small: bad-input");

	/* Malformed wrapped keys. */
	{
		const char *cases[] = { "", "garbage", "v1:file:", "v1:file:!!!!",
		    "v2:file:AAAA", "v1:vault:AAAA", "v1:file:AAAA" };
		size_t i;

		for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
			tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, cases[i], out,
			    &e) == -1 && is(&e, "corrupt"), "unwrap '%s': corrupt",
			    cases[i]);
		snprintf(bad, sizeof bad, "%s=", w1);
		tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, bad, out, &e) == -1 &&
		    is(&e, "corrupt"), "trailing character: corrupt");
		char big[2 * SP_CRYPT_WRAPPED_MAX];

		memset(big, 'A', sizeof big - 1);
		memcpy(big, "v1:file:", 8);
		big[sizeof big - 1] = '\0';
		tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, big, out, &e) == -1 &&
		    is(&e, "corrupt"), "oversize: corrupt");
		snprintf(bad, sizeof bad, "%s", w1);
		bad[20] = bad[20] == 'A' ? 'B' : 'A';
		tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, bad, out, &e) == -1 &&
		    is(&e, "key-revoked"), "a damaged box does not open "
		    "(key-revoked, as documented)");
	}
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap("file:", w1, out, &e) == -1 &&
	    is(&e, "bad-input"), "file: without a path: bad-input");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap("vault:x", w1, out, &e) == -1 &&
	    is(&e, "bad-input"), "unknown reference kind: bad-input");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap("vault:x", dk, bad, sizeof bad,
	    &e) == -1 && is(&e, "bad-input"), "wrap, unknown kind: bad-input");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap("cmd:/bin/false", w1, out,
	    &e) == -1 && is(&e, "bad-input"), "file: wrapped key, cmd: "
	    "reference: bad-input");

	/* Replaced, then revoked. */
	snprintf(bad, sizeof bad, "%s.old", kf);
	if (rename(kf, bad) == -1)
		abort();
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, w1, out, &e) == -1 &&
	    is(&e, "key-revoked") && strstr(e.msg, "revoked") != NULL,
	    "key file deleted: unwrap is key-revoked");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap(ref, dk, w2, sizeof w2, &e) == -1 &&
	    is(&e, "key-revoked"), "and wrap too");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_key_create(kf, &e) == 0, "a new key file "
	    "in its place");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, w1, out, &e) == -1 &&
	    is(&e, "key-revoked"), "key replaced: key-revoked");
	if (rename(bad, kf) == -1)
		abort();
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, w1, out, &e) == 0 &&
	    memcmp(out, dk, 32) == 0, "the old key back: unwraps again");
	if (truncate(kf, 31) == -1)
		abort();
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, w1, out, &e) == -1 &&
	    is(&e, "kms"), "a key file of 31 bytes: kms");
	sodium_memzero(dk, sizeof dk);
	sodium_memzero(out, sizeof out);
}

/* An executable shell script dir/name. */
static const char *
script(const char *name, const char *body)
{
	static char path[128];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	if ((f = fopen(path, "w")) == NULL)
		abort();
	fprintf(f, "#!/bin/sh\n%s\n", body);
	if (fclose(f) == EOF || chmod(path, 0755) == -1)
		abort();
	return path;
}

static int
file_has(const char *path, const char *s)
{
	size_t n;
	int fd = open(path, O_RDONLY);
	unsigned char *p;
	int found;

	if (fd == -1)
		return -1;
	p = slurp(fd, &n);
	close(fd);
	found = memmem(p, n, s, strlen(s)) != NULL;
	free(p);
	return found;
}

static void
test_cmd_kms(const char *kms)
{
	char kf[128], ref[SP_PATH_MAX + 256], w[SP_CRYPT_WRAPPED_MAX];
	char w2[SP_CRYPT_WRAPPED_MAX];
	char marker[160], *argv[] = { (char *)kms, "keygen", kf, NULL };
	unsigned char dk[32], out[32];
	struct sp_err e = { 0 };
	int fd;

	snprintf(kf, sizeof kf, "%s/cmd.key", dir);
	snprintf(ref, sizeof ref, "cmd:%s %s", kms, kf);
	snprintf(marker, sizeof marker, "%s.revoked", kf);
	sp_crypt_data_key(dk);
	tap_okf(sp_code_name(e.code), e.msg, sp_proc_run(argv, &e) == 0, "kms-test keygen");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap(ref, dk, w, sizeof w, &e) == 0 &&
	    strncmp(w, "v1:cmd:kt1.", 11) == 0, "cmd: wrap -> %.24s...", w);
	memset(out, 0, sizeof out);
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, w, out, &e) == 0 &&
	    memcmp(out, dk, 32) == 0, "cmd: unwrap gives the data key back");
	/* Extra spaces between words do not matter. */
	snprintf(ref, sizeof ref, "cmd:  %s \t %s ", kms, kf);
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, w, out, &e) == 0 &&
	    memcmp(out, dk, 32) == 0, "words split on runs of blanks");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap("file:/nonexistent", w, out,
	    &e) == -1 && is(&e, "bad-input"), "cmd: wrapped key, file: "
	    "reference: bad-input");

	if ((fd = open(marker, O_WRONLY | O_CREAT, 0600)) == -1)
		abort();
	close(fd);
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, w, out, &e) == -1 &&
	    is(&e, "key-revoked") && strstr(e.msg, "key revoked") != NULL,
	    "revoked (exit 3): unwrap is key-revoked, with its message");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap(ref, dk, w2, sizeof w2, &e) == -1 &&
	    is(&e, "key-revoked"), "and wrap too");
	unlink(marker);
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, w, out, &e) == 0 &&
	    memcmp(out, dk, 32) == 0, "marker gone: unwraps again");
	snprintf(w2, sizeof w2, "%s", w);
	w2[20] = w2[20] == 'A' ? 'B' : 'A';
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, w2, out, &e) == -1 &&
	    is(&e, "kms") && e.temp, "the program cannot unwrap (exit 1): kms");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, "v1:cmd:two words", out,
	    &e) == -1 && is(&e, "corrupt"), "a wrapped key with a space: corrupt");
	sodium_memzero(dk, sizeof dk);
	sodium_memzero(out, sizeof out);
}

static void
test_cmd_misbehaving(void)
{
	char ref[512], w[SP_CRYPT_WRAPPED_MAX], b64[64], path[128];
	unsigned char dk[32], out[32];
	struct sp_err e = { 0 };
	int64_t t0;

	sp_crypt_data_key(dk);
	sodium_bin2base64(b64, sizeof b64, dk, 32, sodium_base64_VARIANT_ORIGINAL);

	/* What the program is given: argv, environment, stdin. */
	snprintf(ref, sizeof ref, "cmd:%s one two", script("spy",
	    "d=$(dirname \"$0\"); printf '%s\\n' \"$0\" \"$@\" >\"$d/spy.argv\"; "
	    "env >\"$d/spy.env\"; cat >\"$d/spy.in\"; echo wrapped-ok"));
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap(ref, dk, w, sizeof w, &e) == 0 &&
	    strcmp(w, "v1:cmd:wrapped-ok") == 0, "a program's line is the "
	    "wrapped key");
	snprintf(path, sizeof path, "%s/spy.argv", dir);
	tap_ok(file_has(path, "wrap\none\ntwo\n") == 1, "argv: PROGRAM wrap ARGS");
	tap_ok(file_has(path, b64) == 0, "the data key is not in argv");
	snprintf(path, sizeof path, "%s/spy.env", dir);
	tap_ok(file_has(path, b64) == 0, "nor in the environment");
	snprintf(path, sizeof path, "%s/spy.in", dir);
	{
		char want[80];

		snprintf(want, sizeof want, "%s\n", b64);
		tap_ok(file_has(path, want) == 1, "it is on stdin, base64 and "
		    "a newline");
	}
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, "v1:cmd:wrapped-ok", out,
	    &e) == -1 && is(&e, "kms"), "unwrap answered by a non-key: kms");
	snprintf(path, sizeof path, "%s/spy.argv", dir);
	tap_ok(file_has(path, "unwrap\none\ntwo\n") == 1, "argv: PROGRAM "
	    "unwrap ARGS");
	snprintf(path, sizeof path, "%s/spy.in", dir);
	tap_ok(file_has(path, "wrapped-ok\n") == 1, "the wrapped key on stdin");

	/* Answers that are not one well-formed line. */
	{
		struct {
			const char *body, *what;
		} bad[] = {
			{ "echo 'two words'", "a space" },
			{ "printf 'a\\nb\\n'", "two lines" },
			{ "true", "nothing" },
			{ "printf '\\n'", "an empty line" },
			{ "printf 'abc\\001\\n'", "a control character" },
			{ "printf 'caf\\303\\251\\n'", "non-ASCII" },
			{ "head -c 4001 /dev/zero | tr '\\0' a", "4001 bytes" },
			{ "exec yes aaaaaaaaaaaaaaaaaaaaaa", "endless output" },
		};
		size_t i;

		for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			snprintf(ref, sizeof ref, "cmd:%s", script("bad", bad[i].body));
			t0 = sp_clock_ms();
			tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap(ref, dk, w, sizeof w,
			    &e) == -1 && is(&e, "kms") && sp_clock_ms() - t0 < 5000,
			    "wrap answered by %s: kms", bad[i].what);
		}
		snprintf(ref, sizeof ref, "cmd:%s", script("ok4000",
		    "head -c 4000 /dev/zero | tr '\\0' a; echo"));
		tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap(ref, dk, w, sizeof w, &e) == 0 &&
		    strlen(w) == 7 + 4000, "an answer of 4000 bytes fits");
		tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap(ref, dk, w, 1000, &e) == -1 &&
		    is(&e, "bad-input"), "but not in 1000 bytes: bad-input");
	}
	{
		const char *bodies[] = {
			"cat >/dev/null; echo hello",
			"cat >/dev/null; head -c 31 /dev/zero | base64",
			"cat >/dev/null; head -c 33 /dev/zero | base64",
			"cat >/dev/null; head -c 32 /dev/zero | base64; echo more",
			"cat >/dev/null; head -c 32 /dev/zero | base64 | tr -d =",
		};
		size_t i;

		for (i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
			snprintf(ref, sizeof ref, "cmd:%s", script("badkey",
			    bodies[i]));
			tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, "v1:cmd:x", out,
			    &e) == -1 && is(&e, "kms"), "unwrap answered by "
			    "'%s': kms", bodies[i] + 16);
		}
		snprintf(ref, sizeof ref, "cmd:%s", script("zerokey",
		    "head -c 32 /dev/zero | base64"));
		tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, "v1:cmd:x", out,
		    &e) == 0 && sodium_is_zero(out, 32), "a program that does "
		    "not read stdin works");
	}

	/* Exit statuses and signals. */
	snprintf(ref, sizeof ref, "cmd:%s", script("fail",
	    "echo 'boom: service unavailable' >&2; exit 1"));
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap(ref, dk, w, sizeof w, &e) == -1 &&
	    is(&e, "kms") && e.temp && strstr(e.msg, "boom: service "
	    "unavailable") != NULL, "exit 1: kms, temp, its stderr in the "
	    "message");
	snprintf(ref, sizeof ref, "cmd:%s", script("revoked",
	    "printf 'access denied\\001\\n' >&2; exit 3"));
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_unwrap(ref, "v1:cmd:x", out, &e) == -1 &&
	    is(&e, "key-revoked") && !e.temp && strchr(e.msg, '\001') == NULL,
	    "exit 3: key-revoked, its stderr sanitized");
	snprintf(ref, sizeof ref, "cmd:%s", script("signal", "kill -9 $$"));
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap(ref, dk, w, sizeof w, &e) == -1 &&
	    is(&e, "kms"), "killed by a signal: kms");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap("cmd:/nonexistent/kms", dk, w,
	    sizeof w, &e) == -1 && is(&e, "kms"), "no such program: kms");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap("cmd:", dk, w, sizeof w, &e) == -1 &&
	    is(&e, "bad-input"), "cmd: without a program: bad-input");
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap("cmd: a b c d e f g h i j k l m n o "
	    "p q r s t u v w x y z A B C D E F G", dk, w, sizeof w, &e) == -1 &&
	    is(&e, "bad-input"), "cmd: of too many words: bad-input");

	/* Hanging programs are killed, and what they started with them. */
	setenv("SPACE_KMS_TIMEOUT_MS", "300", 1);
	snprintf(ref, sizeof ref, "cmd:%s", script("hang",
	    "sleep 30 & echo $! >\"$(dirname \"$0\")/hang.pid\"; wait"));
	t0 = sp_clock_ms();
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap(ref, dk, w, sizeof w, &e) == -1 &&
	    is(&e, "timed-out") && e.temp, "a hanging program: timed-out");
	tap_ok(sp_clock_ms() - t0 < 3000, "after the timeout, not 30 s");
	{
		char stat[64], buf[256] = "";
		int gone = 0, i;
		FILE *f;
		long pid = 0;

		snprintf(path, sizeof path, "%s/hang.pid", dir);
		if ((f = fopen(path, "r")) != NULL) {
			if (fscanf(f, "%ld", &pid) != 1)
				pid = 0;
			fclose(f);
		}
		/* Gone, or a zombie its new parent has yet to reap. */
		for (i = 0; pid > 0 && i < 200 && !gone; i++) {
			snprintf(stat, sizeof stat, "/proc/%ld/stat", pid);
			if ((f = fopen(stat, "r")) == NULL)
				gone = 1;
			else {
				if (fgets(buf, sizeof buf, f) != NULL &&
				    strstr(buf, ") Z ") != NULL)
					gone = 1;
				fclose(f);
			}
			if (!gone)
				usleep(10000);
		}
		tap_ok(pid > 0 && gone, "its child (sleep) was killed too");
	}
	snprintf(ref, sizeof ref, "cmd:%s", script("linger",
	    "cat >/dev/null; echo x; exec >&- 2>&-; sleep 30"));
	t0 = sp_clock_ms();
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap(ref, dk, w, sizeof w, &e) == -1 &&
	    is(&e, "timed-out") && sp_clock_ms() - t0 < 3000, "answered, but "
	    "does not exit: timed-out");
	setenv("SPACE_KMS_TIMEOUT_MS", "abc", 1);
	tap_okf(sp_code_name(e.code), e.msg, sp_crypt_wrap(ref, dk, w, sizeof w, &e) == -1 &&
	    is(&e, "bad-input"), "SPACE_KMS_TIMEOUT_MS=abc: bad-input");
	unsetenv("SPACE_KMS_TIMEOUT_MS");
	sodium_memzero(dk, sizeof dk);
}

static int
fd_count(void)
{
	int fd, n = 0;

	for (fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) != -1)
			n++;
	return n;
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
test_throughput(void)
{
	size_t n = 64 << 20;
	unsigned char *pt = malloc(n);
	int ifd, cfd, null = open("/dev/null", O_WRONLY);
	struct sp_err e = { 0 };
	uint64_t c;
	double t, te, tm, td;
	int rc;

	randombytes_buf(pt, n);
	ifd = mem_fd(pt, n);
	cfd = mem_fd("", 0);
	free(pt);
	/* To /dev/null: the cost of the crypto, not of storing the output. */
	t = now();
	rc = sp_crypt_encrypt(ifd, null, key, &c, &e);
	te = now() - t;
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && c == n, "64 MiB encrypted");
	lseek(ifd, 0, SEEK_SET);
	t = now();
	rc = sp_crypt_encrypt(ifd, cfd, key, &c, &e);
	tm = now() - t;
	lseek(cfd, 0, SEEK_SET);
	t = now();
	rc |= sp_crypt_decrypt(cfd, null, key, &c, &e);
	td = now() - t;
	tap_okf(sp_code_name(e.code), e.msg, rc == 0 && c == n, "64 MiB decrypted");
	printf("# throughput, 64 MiB: encrypt to /dev/null %.0f ms = %.0f MiB/s; "
	    "to memory %.0f ms = %.0f MiB/s; decrypt %.0f ms = %.0f MiB/s\n",
	    te * 1000, 64 / te, tm * 1000, 64 / tm, td * 1000, 64 / td);
	close(ifd);
	close(cfd);
	close(null);
}

int
main(void)
{
	const char *kms = getenv("SPACE_KMS_TEST");
	char abs[SP_PATH_MAX];
	struct sp_err e = { 0 };
	int fds;

	snprintf(dir, sizeof dir, "/tmp/sp-crypt-XXXXXX");
	if (mkdtemp(dir) == NULL || sodium_init() < 0)
		abort();
	sp_crypt_data_key(key);
	test_data_key();
	test_roundtrip();
	test_pipes();
	test_secrecy();
	test_tamper();
	test_io_errors();
	fds = fd_count();
	test_file_kms();
	if (kms == NULL || *kms == '\0')
		kms = "build/tests/kms-test";
	if (tap_ok(realpath(kms, abs) != NULL && access(abs, X_OK) == 0,
	    "the test KMS program is built (make build/tests/kms-test, or "
	    "SPACE_KMS_TEST)"))
		test_cmd_kms(abs);
	test_cmd_misbehaving();
	tap_ok(fd_count() == fds, "no descriptor left open by the KMS calls");
	test_throughput();
	sp_path_remove_tree(dir, &e);
	return tap_done();
}
