/*
 * sp_digest: the SHA-256 of a file (libsodium), for what checks a file
 * against the digest it was sent or named by: objects of the store, blobs of
 * an OCI image.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <sodium.h>

#include "sp_storage.h"

int
sp_digest_file(const char *path, char hex[65], uint64_t *size, struct sp_err *e)
{
	crypto_hash_sha256_state st;
	unsigned char buf[65536], h[32];
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_IO, "%s", path);
	crypto_hash_sha256_init(&st);
	*size = 0;
	while ((n = read(fd, buf, sizeof buf)) > 0 || (n == -1 && errno == EINTR))
		if (n > 0) {
			crypto_hash_sha256_update(&st, buf, (size_t)n);
			*size += (uint64_t)n;
		}
	close(fd);
	if (n == -1)
		return sp_err_sys(e, SP_E_IO, "read %s", path);
	crypto_hash_sha256_final(&st, h);
	sodium_bin2hex(hex, 65, h, sizeof h);
	return 0;
}
