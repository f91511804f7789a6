/*
 * sp_crypt.h: encryption at rest with customer keys (design.md).
 *
 * An artifact is encrypted on the host, as a stream, with a fresh random
 * data key; the data key is wrapped by the tenant's key through the key
 * service ("KMS") a key reference names, and only the wrapped form is kept,
 * in the manifest beside the artifact.  Revoke the tenant's key and every
 * artifact under it is unreadable.  All of it is libsodium.
 *
 * Keys are 32 bytes the caller owns: wipe them with sodium_memzero when
 * done.  The functions here wipe every copy they make.
 */
#ifndef SP_CRYPT_H
#define SP_CRYPT_H

#include <stddef.h>
#include <stdint.h>

struct sp_err;

#define SP_CRYPT_KEY_BYTES	32
#define SP_CRYPT_VERSION	1
#define SP_CRYPT_CHUNK		(64 * 1024)	/* plaintext bytes per chunk */
#define SP_CRYPT_WRAPPED_MAX	4096	/* a wrapped key, its NUL included */
#define SP_CRYPT_TIMEOUT_MS	30000	/* a cmd: KMS program's time */

/*
 * The stream, version 1:
 *
 *	"SPACEENC"	8 bytes of magic
 *	0x01		the version
 *	24 bytes	the crypto_secretstream_xchacha20poly1305 header
 *	chunks		each a u32 big-endian length n, then n bytes of
 *			secretstream ciphertext (17 + the plaintext's bytes),
 *			the 9 bytes of magic and version as additional data
 *
 * Every chunk but the last holds exactly SP_CRYPT_CHUNK bytes of plaintext
 * and is tagged MESSAGE; the last holds 0 .. SP_CRYPT_CHUNK bytes and is
 * tagged FINAL (an input of a whole number of chunks ends with an empty
 * one); nothing follows it.  The length is known only at the end, so pipes
 * work both ways, and memory stays one chunk.  Overhead: 33 bytes plus 21
 * per chunk.
 */

/* Encrypts in until EOF to out; *bytes_in (may be NULL) gets the plaintext
 * bytes read.  Errors: "io" (read or write failed), "internal". */
int sp_crypt_encrypt(int in, int out, const unsigned char key[32],
    uint64_t *bytes_in, struct sp_err *e);

/* Decrypts in to out, verifying every chunk before a byte of it is written.
 * A stream that is not whole and intact -- bad magic, version or header, a
 * chunk that does not verify (wrong key, a flipped bit, chunks reordered or
 * dropped), a length out of bounds, no FINAL chunk (truncation), bytes after
 * it -- is "corrupt"; a read or write failure is "io".  On any error out may
 * already hold the verified chunks before the bad one (never the final
 * chunk): the caller must discard all of out.  *bytes_out (may be NULL)
 * gets the plaintext bytes written. */
int sp_crypt_decrypt(int in, int out, const unsigned char key[32],
    uint64_t *bytes_out, struct sp_err *e);

/* A fresh random data key.  0, or -1 when libsodium cannot start. */
int sp_crypt_data_key(unsigned char key[32]);

/* A tenant key file for "file:" key references: 32 random bytes, mode 0600,
 * made whole under a temporary name and then linked into place, so that a
 * crash never leaves a short key; "exists" when path is there already. */
int sp_crypt_key_create(const char *path, struct sp_err *e);

/*
 * Key references and wrapped keys.
 *
 * "file:PATH"	PATH holds the tenant key (sp_crypt_key_create).  Wrapped
 *		with crypto_secretbox_easy under a random nonce:
 *		"v1:file:" + base64 (standard, padded) of nonce (24 bytes) and
 *		box (48): 104 characters.  A missing key file is
 *		"key-revoked"; so is a key that does not open the box: a
 *		revoked key cannot be told from a replaced one (nor from a
 *		damaged wrapped key, which the manifest's checksums catch).
 *
 * "cmd:PROGRAM [ARG...]"
 *		An external program, e.g. a cloud KMS CLI or a wrapper
 *		around one.  The rest of the reference is split on spaces and
 *		tabs, without quoting (so PROGRAM and its arguments hold
 *		none); PROGRAM is searched in PATH when it has no '/'.  It
 *		runs without a shell as PROGRAM wrap|unwrap ARG..., in a
 *		process group of its own, with the caller's environment.
 *		wrap: stdin is the data key in base64 and a newline; stdout
 *		is one line of 1 .. 4000 printable ASCII characters without
 *		spaces, the wrapped key.  unwrap: stdin is that line and a
 *		newline; stdout the data key in base64, one line.  The data
 *		key never appears in argv or the environment.  Exit 0: done;
 *		3: the key is revoked ("key-revoked"); any other status or a
 *		signal: "kms" (temp: a retry may help); a malformed or
 *		oversize answer: "kms".  After SPACE_KMS_TIMEOUT_MS (default
 *		SP_CRYPT_TIMEOUT_MS) its process group is killed: "timed-out"
 *		(temp).  Wrapped: "v1:cmd:" + the line it printed.
 *
 * A wrapped key names the kind that made it: unwrapping it with a key
 * reference of another kind is "bad-input", as is an unknown kind of
 * reference.  A wrapped key that is not well formed is "corrupt".
 */
/* wrapped gets the wrapped key, NUL-terminated; n is its size
 * (SP_CRYPT_WRAPPED_MAX always fits). */
int sp_crypt_wrap(const char *keyref, const unsigned char key[32],
    char *wrapped, size_t n, struct sp_err *e);
int sp_crypt_unwrap(const char *keyref, const char *wrapped,
    unsigned char key[32], struct sp_err *e);

#endif
