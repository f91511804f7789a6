/*
 * kms-test: a key service for tests, in the shape of a cloud KMS CLI, for
 * "cmd:" key references (lib/sp_crypt.h).
 *
 *	kms-test keygen [KEYFILE]	makes a tenant key (32 random bytes, 0600)
 *	kms-test wrap [KEYFILE]		stdin: a data key in base64; stdout: it
 *					wrapped, "kt1." + base64 of nonce and box
 *	kms-test unwrap [KEYFILE]	the reverse
 *
 * KEYFILE defaults to $KMS_TEST_KEY.  The key is revoked when KEYFILE.revoked
 * exists or KEYFILE is gone.  Exit status: 0 done, 1 failure (a wrapped key
 * this key does not open, bad input), 3 revoked, 100 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#define B64		sodium_base64_VARIANT_ORIGINAL
#define BOX_LEN		(crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES + 32)
#define PREFIX		"kt1."
#define LINE_MAX_	4096

static void
usage(void)
{
	fprintf(stderr, "usage: kms-test keygen|wrap|unwrap [keyfile]\n");
	exit(100);
}

static void
die(int status, const char *msg)
{
	fprintf(stderr, "kms-test: %s\n", msg);
	exit(status);
}

static void
keygen(const char *path)
{
	unsigned char k[32];
	int fd;

	randombytes_buf(k, sizeof k);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600)) == -1 ||
	    write(fd, k, sizeof k) != (ssize_t)sizeof k || close(fd) == -1)
		die(1, strerror(errno));
	sodium_memzero(k, sizeof k);
}

static void
key_read(const char *path, unsigned char k[32])
{
	char marker[4096];
	struct stat st;
	int fd;

	snprintf(marker, sizeof marker, "%s.revoked", path);
	if (stat(marker, &st) == 0)
		die(3, "key revoked");
	if ((fd = open(path, O_RDONLY)) == -1) {
		if (errno == ENOENT)
			die(3, "no such key: revoked");
		die(1, strerror(errno));
	}
	if (read(fd, k, 32) != 32)
		die(1, "bad key file");
	close(fd);
}

/* One line of stdin, newline cut. */
static size_t
line_read(char *buf, size_t n)
{
	size_t len;

	if (fgets(buf, n, stdin) == NULL)
		die(1, "no input");
	len = strlen(buf);
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	return len;
}

static void
wrap(const unsigned char k[32])
{
	unsigned char dk[32], box[BOX_LEN];
	char line[LINE_MAX_], out[sodium_base64_ENCODED_LEN(BOX_LEN, B64)];
	size_t len = line_read(line, sizeof line), got;
	const char *end;

	if (sodium_base642bin(dk, sizeof dk, line, len, NULL, &got, &end,
	    B64) != 0 || end != line + len || got != sizeof dk)
		die(1, "input is not a 32-byte key in base64");
	randombytes_buf(box, crypto_secretbox_NONCEBYTES);
	crypto_secretbox_easy(box + crypto_secretbox_NONCEBYTES, dk, sizeof dk,
	    box, k);
	sodium_bin2base64(out, sizeof out, box, sizeof box, B64);
	printf("%s%s\n", PREFIX, out);
	sodium_memzero(dk, sizeof dk);
	sodium_memzero(line, sizeof line);
}

static void
unwrap(const unsigned char k[32])
{
	unsigned char dk[32], box[BOX_LEN];
	char line[LINE_MAX_], out[sodium_base64_ENCODED_LEN(32, B64)];
	size_t len = line_read(line, sizeof line), got;
	const char *end, *p = line + strlen(PREFIX);

	if (strncmp(line, PREFIX, strlen(PREFIX)) != 0 ||
	    sodium_base642bin(box, sizeof box, p, len - strlen(PREFIX), NULL,
	    &got, &end, B64) != 0 || end != line + len || got != sizeof box)
		die(1, "input is not a wrapped key");
	if (crypto_secretbox_open_easy(dk, box + crypto_secretbox_NONCEBYTES,
	    sizeof box - crypto_secretbox_NONCEBYTES, box, k) != 0)
		die(1, "this key does not unwrap that");
	sodium_bin2base64(out, sizeof out, dk, sizeof dk, B64);
	printf("%s\n", out);
	sodium_memzero(dk, sizeof dk);
	sodium_memzero(out, sizeof out);
}

int
main(int argc, char *argv[])
{
	unsigned char k[32];
	const char *path;

	if (argc < 2 || argc > 3)
		usage();
	path = argc == 3 ? argv[2] : getenv("KMS_TEST_KEY");
	if (path == NULL || *path == '\0')
		usage();
	if (sodium_init() < 0)
		die(1, "libsodium cannot start");
	if (strcmp(argv[1], "keygen") == 0) {
		keygen(path);
		return 0;
	}
	if (strcmp(argv[1], "wrap") != 0 && strcmp(argv[1], "unwrap") != 0)
		usage();
	key_read(path, k);
	if (strcmp(argv[1], "wrap") == 0)
		wrap(k);
	else
		unwrap(k);
	sodium_memzero(k, sizeof k);
	if (fflush(stdout) == EOF)
		die(1, strerror(errno));
	return 0;
}
