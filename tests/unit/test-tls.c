/*
 * test-tls: the node CA and the gateway's TLS contexts (lib/sp_tls.c).  The
 * CA is made once, refused when half made, exposed or mismatched; leaves
 * for names and addresses are checked field by field and through real TLS
 * handshakes in memory (a BIO pair) against a client that trusts the CA, a
 * client that trusts only the system store, and wrong host names; the
 * cache keeps one context per host, drops the oldest past its size, and
 * gives concurrent first uses one context.  TAP output; exit 1 on any
 * failure.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "sp.h"
#include "tap.h"

#define THREADS	8

static char root[64];
static struct sp_err e;

static void
pathf(char *out, const char *dir, const char *name)
{
	if ((size_t)snprintf(out, SP_PATH_MAX, "%s/%s", dir, name) >=
	    SP_PATH_MAX)
		abort();
}

static char *
slurp(const char *path, size_t *n)
{
	struct stat st;
	char *p;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return NULL;
	if (fstat(fd, &st) == -1 || (p = malloc(st.st_size + 1)) == NULL ||
	    read(fd, p, st.st_size) != st.st_size)
		abort();
	close(fd);
	p[st.st_size] = '\0';
	*n = (size_t)st.st_size;
	return p;
}

static void
spit(const char *path, const void *p, size_t n, mode_t mode)
{
	int fd;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd == -1 || write(fd, p, n) != (ssize_t)n || fchmod(fd, mode) ||
	    close(fd) == -1)
		abort();
}

static mode_t
mode_of(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 ? st.st_mode & 07777 : (mode_t)-1;
}

/* A fresh root under the test's directory. */
static void
subroot(char *out, const char *name)
{
	pathf(out, root, name);
	if (mkdir(out, 0755) == -1)
		abort();
}

static X509 *
read_cert(const char *path)
{
	FILE *f = fopen(path, "r");
	X509 *x;

	if (f == NULL)
		return NULL;
	x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	return x;
}

/* Seconds from now to t (negative: in the past). */
static long
secs_from_now(const ASN1_TIME *t)
{
	ASN1_TIME *now = ASN1_TIME_set(NULL, time(NULL));
	int days = 0, secs = 0;

	ASN1_TIME_diff(&days, &secs, now, t);
	ASN1_TIME_free(now);
	return (long)days * 86400 + secs;
}

static int
ext_critical(X509 *x, int nid)
{
	int i = X509_get_ext_by_NID(x, nid, -1);

	return i >= 0 && X509_EXTENSION_get_critical(X509_get_ext(x, i));
}

static int
is_p256(X509 *x)
{
	EVP_PKEY *k = X509_get0_pubkey(x);
	char group[32];

	return k != NULL && EVP_PKEY_is_a(k, "EC") &&
	    EVP_PKEY_get_group_name(k, group, sizeof group, NULL) == 1 &&
	    strcmp(group, "prime256v1") == 0;
}

/* The result of one handshake in memory. */
struct hs {
	int ok;			/* both ends finished */
	long verify;		/* the client's verify result */
	char sni[256];		/* what the server saw, "" for none */
	X509 *peer;		/* the client's view of the server's leaf */
};

/*
 * A TLS handshake between a server on sctx and a client on cctx (host set
 * with sp_tls_client_host unless NULL), over a BIO pair: each side runs
 * until it needs the other's bytes, in turns, until both are done or one
 * fails.  Then one application record, to be sure the session works.
 */
static void
handshake(SSL_CTX *sctx, SSL_CTX *cctx, const char *host, struct hs *r)
{
	SSL *s = SSL_new(sctx), *c = SSL_new(cctx);
	BIO *bs = NULL, *bc = NULL;
	const char *sn;
	char buf[8];
	int i, rs = 0, rc = 0, err;

	memset(r, 0, sizeof *r);
	if (s == NULL || c == NULL || BIO_new_bio_pair(&bs, 0, &bc, 0) != 1)
		abort();
	SSL_set_bio(s, bs, bs);
	SSL_set_bio(c, bc, bc);
	SSL_set_accept_state(s);
	SSL_set_connect_state(c);
	if (host != NULL && sp_tls_client_host(c, host, &e) == -1)
		goto out;
	for (i = 0; i < 64 && (rs != 1 || rc != 1); i++) {
		if (rc != 1 && (rc = SSL_do_handshake(c)) != 1) {
			err = SSL_get_error(c, rc);
			if (err != SSL_ERROR_WANT_READ &&
			    err != SSL_ERROR_WANT_WRITE)
				break;
		}
		if (rs != 1 && (rs = SSL_do_handshake(s)) != 1) {
			err = SSL_get_error(s, rs);
			if (err != SSL_ERROR_WANT_READ &&
			    err != SSL_ERROR_WANT_WRITE)
				break;
		}
	}
	r->verify = SSL_get_verify_result(c);
	r->peer = SSL_get1_peer_certificate(c);
	if ((sn = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name)) != NULL)
		snprintf(r->sni, sizeof r->sni, "%s", sn);
	r->ok = rs == 1 && rc == 1 && SSL_write(c, "ping", 4) == 4 &&
	    SSL_read(s, buf, sizeof buf) == 4 && memcmp(buf, "ping", 4) == 0;
out:
	SSL_free(s);
	SSL_free(c);
	ERR_clear_error();
}

static void
test_create(char *crt, char *key)
{
	char dir[SP_PATH_MAX], p[SP_PATH_MAX], empty[SP_PATH_MAX];
	struct stat k1, c1, k2, c2;
	char *kb1, *cb1, *kb2, *cb2;
	size_t kn1, cn1, kn2, cn2;
	int made = -1;

	pathf(dir, root, "ca");
	pathf(key, dir, "ca.key");
	pathf(crt, dir, "ca.crt");
	tap_okf(sp_code_name(e.code), e.msg, sp_tls_ca_create(root, "n1", &made, &e) == 0 &&
	    made == 1, "create: made");
	tap_ok(mode_of(dir) == 0755 && mode_of(key) == 0600 &&
	    mode_of(crt) == 0644, "create: ca/ 0755, ca.key 0600, ca.crt 0644");
	kb1 = slurp(key, &kn1);
	cb1 = slurp(crt, &cn1);
	tap_ok(kb1 && cb1 && strstr(kb1, "-----BEGIN PRIVATE KEY-----") &&
	    strstr(cb1, "-----BEGIN CERTIFICATE-----"), "create: PEM files");
	tap_ok(access(dir, F_OK) == 0 && stat(key, &k1) == 0 &&
	    stat(crt, &c1) == 0, "create: files there");

	made = -1;
	tap_okf(sp_code_name(e.code), e.msg, sp_tls_ca_create(root, "n1", &made, &e) == 0 &&
	    made == 0, "create again: made 0");
	kb2 = slurp(key, &kn2);
	cb2 = slurp(crt, &cn2);
	tap_ok(stat(key, &k2) == 0 && stat(crt, &c2) == 0 &&
	    k1.st_ino == k2.st_ino && c1.st_ino == c2.st_ino &&
	    kn1 == kn2 && cn1 == cn2 && memcmp(kb1, kb2, kn1) == 0 &&
	    memcmp(cb1, cb2, cn1) == 0, "create again: files unchanged");
	OPENSSL_cleanse(kb1, kn1);
	OPENSSL_cleanse(kb2, kn2);
	free(kb1);
	free(kb2);
	free(cb1);
	free(cb2);

	tap_okf(sp_code_name(e.code), e.msg, sp_tls_ca_cert_path(root, p, sizeof p, &e) == 0 &&
	    strcmp(p, crt) == 0, "cert path is root/ca/ca.crt");
	subroot(empty, "empty");
	tap_ok(sp_tls_ca_cert_path(empty, p, sizeof p, &e) == -1 &&
	    e.code == SP_E_NOT_FOUND, "cert path without a CA: "
	    "not-found");
	printf("#   %s\n", e.msg);
}

static void
test_ca_cert(const char *crt)
{
	X509 *x = read_cert(crt);
	BIGNUM *serial;
	char cn[128] = "";
	long life;

	if (!tap_ok(x != NULL, "CA certificate parses"))
		return;
	X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName,
	    cn, sizeof cn);
	tap_ok(strcmp(cn, "SPACE node CA n1") == 0, "CA: CN 'SPACE node CA n1'");
	tap_ok(X509_check_issued(x, x) == X509_V_OK &&
	    X509_verify(x, X509_get0_pubkey(x)) == 1, "CA: self-signed");
	tap_ok(X509_check_ca(x) == 1 &&
	    ext_critical(x, NID_basic_constraints) &&
	    X509_get_pathlen(x) == 0, "CA: basicConstraints CA:TRUE, critical, "
	    "pathlen 0");
	tap_ok(X509_get_key_usage(x) == (KU_KEY_CERT_SIGN | KU_CRL_SIGN) &&
	    ext_critical(x, NID_key_usage),
	    "CA: keyUsage keyCertSign and cRLSign, critical");
	tap_ok(X509_get0_subject_key_id(x) != NULL, "CA: subjectKeyIdentifier");
	tap_ok(is_p256(x), "CA: ECDSA P-256");
	serial = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
	tap_ok(serial && BN_num_bits(serial) == 128 && !BN_is_negative(serial),
	    "CA: a 128-bit serial");
	BN_free(serial);
	life = secs_from_now(X509_get0_notAfter(x));
	tap_ok(labs(secs_from_now(X509_get0_notBefore(x)) + 3600) < 120 &&
	    labs(life - 3650L * 86400) < 120, "CA: valid from an hour ago "
	    "for 10 years");
	X509_free(x);
}

/* Refusals: half-made pairs, exposed and foreign keys, mismatched keys. */
static void
test_refusals(const char *good_key)
{
	char r2[SP_PATH_MAX], r3[SP_PATH_MAX], k[SP_PATH_MAX], c[SP_PATH_MAX];
	char k3[SP_PATH_MAX], dir[SP_PATH_MAX];
	struct sp_tls_ca *ca = NULL;
	char *bytes;
	size_t n;
	int made;

	subroot(r2, "half");
	pathf(dir, r2, "ca");
	pathf(k, dir, "ca.key");
	pathf(c, dir, "ca.crt");
	if (sp_tls_ca_create(r2, "n2", &made, &e) == -1)
		abort();
	unlink(c);
	made = -1;
	tap_ok(sp_tls_ca_create(r2, "n2", &made, &e) == -1 &&
	    e.code == SP_E_CORRUPT && made == 0 &&
	    access(c, F_OK) == -1, "key without cert: create says corrupt, "
	    "makes nothing");
	printf("#   %s\n", e.msg);
	tap_ok(sp_tls_ca_load(r2, &ca, &e) == -1 &&
	    e.code == SP_E_CORRUPT && ca == NULL,
	    "key without cert: load says corrupt");

	subroot(r3, "other");
	pathf(dir, r3, "ca");
	pathf(k3, dir, "ca.key");
	pathf(c, dir, "ca.crt");
	if (sp_tls_ca_create(r3, "n3", &made, &e) == -1)
		abort();
	rename(k3, k);		/* r2 gets r3's key beside no cert */
	tap_ok(sp_tls_ca_create(r3, "n3", &made, &e) == -1 &&
	    e.code == SP_E_CORRUPT && access(k3, F_OK) == -1,
	    "cert without key: corrupt, makes nothing");

	/* r3: its cert with another CA's key. */
	bytes = slurp(good_key, &n);
	spit(k3, bytes, n, 0600);
	OPENSSL_cleanse(bytes, n);
	free(bytes);
	tap_ok(sp_tls_ca_load(r3, &ca, &e) == -1 &&
	    e.code == SP_E_CORRUPT, "a key of another CA: corrupt");
	printf("#   %s\n", e.msg);
	spit(k3, "not a key\n", 10, 0600);
	tap_ok(sp_tls_ca_load(r3, &ca, &e) == -1 &&
	    e.code == SP_E_CORRUPT, "a key that does not parse: "
	    "corrupt");
	printf("#   %s\n", e.msg);

	if (chmod(good_key, 0644) == -1)
		abort();
	tap_ok(sp_tls_ca_load(root, &ca, &e) == -1 &&
	    e.code == SP_E_BAD_INPUT && ca == NULL,
	    "key mode 0644: refused (bad-input)");
	printf("#   %s\n", e.msg);
	made = -1;
	tap_ok(sp_tls_ca_create(root, "n1", &made, &e) == -1 &&
	    e.code == SP_E_BAD_INPUT && made == 0 &&
	    mode_of(good_key) == 0644, "key mode 0644: create refuses, "
	    "changes nothing");
	chmod(good_key, 0620);
	tap_ok(sp_tls_ca_load(root, &ca, &e) == -1 &&
	    e.code == SP_E_BAD_INPUT, "key mode 0620: refused");
	chmod(good_key, 0600);
	if (geteuid() == 0) {
		if (chown(good_key, 1, (gid_t)-1) == -1)
			abort();
		tap_ok(sp_tls_ca_load(root, &ca, &e) == -1 &&
		    e.code == SP_E_BAD_INPUT,
		    "key owned by another user: refused");
		printf("#   %s\n", e.msg);
		if (chown(good_key, 0, (gid_t)-1) == -1)
			abort();
	} else
		tap_ok(1, "key owned by another user # SKIP not root");
	tap_okf(sp_code_name(e.code), e.msg, sp_tls_ca_load(root, &ca, &e) == 0 && ca != NULL,
	    "mode 0600 again: load works");
	sp_tls_ca_free(ca);
	ca = NULL;
	tap_ok(sp_tls_ca_load(r2 /* now only r3's key */, &ca, &e) == -1 &&
	    e.code == SP_E_CORRUPT, "still half made: corrupt");
	pathf(dir, root, "empty");
	tap_ok(sp_tls_ca_load(dir, &ca, &e) == -1 &&
	    e.code == SP_E_NOT_FOUND, "no CA: load says not-found");
}

static void
test_leaf_name(struct sp_tls_ca *ca, const char *crt)
{
	SSL_CTX *s, *s2, *s3, *c;
	X509 *cax = read_cert(crt);
	struct hs r;

	s = sp_tls_server_ctx(ca, "api.example.test", &e);
	tap_okf(sp_code_name(e.code), e.msg, s != NULL, "leaf for api.example.test");
	c = sp_tls_client_ctx(crt, &e);
	tap_okf(sp_code_name(e.code), e.msg, c != NULL, "client context trusting ca.crt");
	if (s == NULL || c == NULL || cax == NULL)
		abort();

	handshake(s, c, "api.example.test", &r);
	tap_okf(sp_code_name(e.code), e.msg, r.ok && r.verify == X509_V_OK,
	    "handshake to api.example.test verifies");
	tap_ok(strcmp(r.sni, "api.example.test") == 0,
	    "the server saw SNI api.example.test");
	if (r.peer != NULL) {
		X509 *x = r.peer;
		char cn[128] = "";

		X509_NAME_get_text_by_NID(X509_get_subject_name(x),
		    NID_commonName, cn, sizeof cn);
		tap_ok(strcmp(cn, "api.example.test") == 0 &&
		    X509_check_host(x, "api.example.test", 0, 0, NULL) == 1,
		    "leaf: CN and subjectAltName DNS:api.example.test");
		tap_ok(X509_get_extended_key_usage(x) == XKU_SSL_SERVER,
		    "leaf: extendedKeyUsage serverAuth only");
		tap_ok(X509_check_ca(x) == 0 &&
		    ext_critical(x, NID_basic_constraints),
		    "leaf: not a CA (critical basicConstraints)");
		tap_ok(X509_get0_authority_key_id(x) != NULL &&
		    ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(x),
		    X509_get0_subject_key_id(cax)) == 0,
		    "leaf: authorityKeyIdentifier is the CA's key id");
		tap_ok(X509_check_issued(cax, x) == X509_V_OK &&
		    X509_verify(x, X509_get0_pubkey(cax)) == 1,
		    "leaf: issued and signed by the CA");
		tap_ok(labs(secs_from_now(X509_get0_notBefore(x)) + 3600) <
		    120 && labs(secs_from_now(X509_get0_notAfter(x)) -
		    30L * 86400) < 120, "leaf: valid from an hour ago for 30 "
		    "days");
		tap_ok(is_p256(x), "leaf: ECDSA P-256");
		X509_free(r.peer);
	} else
		tap_ok(0, "leaf: the client got it");

	handshake(s, c, "other.example.test", &r);
	tap_ok(!r.ok && r.verify == X509_V_ERR_HOSTNAME_MISMATCH,
	    "handshake as other.example.test FAILS (hostname mismatch)");
	X509_free(r.peer);
	handshake(s, c, "127.0.0.1", &r);
	tap_ok(!r.ok && r.verify == X509_V_ERR_IP_ADDRESS_MISMATCH,
	    "handshake as 127.0.0.1 to the name's leaf FAILS");
	X509_free(r.peer);
	handshake(s, c, NULL, &r);
	tap_ok(r.ok && r.verify == X509_V_OK, "(without a host set the chain "
	    "alone is checked: callers must set one)");
	X509_free(r.peer);

	s2 = sp_tls_server_ctx(ca, "api.example.test", &e);
	s3 = sp_tls_server_ctx(ca, "API.Example.TEST", &e);
	tap_ok(s2 == s && s3 == s, "the cache gives the same context for the "
	    "same host, in any case");
	handshake(s, c, "API.EXAMPLE.test", &r);
	tap_ok(r.ok && r.verify == X509_V_OK, "host names compare without "
	    "case");
	X509_free(r.peer);
	SSL_CTX_free(s2);
	SSL_CTX_free(s3);
	SSL_CTX_free(s);
	SSL_CTX_free(c);
	X509_free(cax);
}

static void
test_leaf_ip(struct sp_tls_ca *ca, const char *crt)
{
	SSL_CTX *s, *s6, *c;
	struct hs r;

	s = sp_tls_server_ctx(ca, "127.0.0.1", &e);
	tap_okf(sp_code_name(e.code), e.msg, s != NULL, "leaf for 127.0.0.1");
	c = sp_tls_client_ctx(crt, &e);
	if (s == NULL || c == NULL)
		abort();
	handshake(s, c, "127.0.0.1", &r);
	tap_okf(sp_code_name(e.code), e.msg, r.ok && r.verify == X509_V_OK,
	    "handshake to 127.0.0.1 verifies");
	tap_ok(r.sni[0] == '\0', "no SNI for an address");
	tap_ok(r.peer && X509_check_ip_asc(r.peer, "127.0.0.1", 0) == 1 &&
	    X509_check_host(r.peer, "127.0.0.1", 0,
	    X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, NULL) != 1,
	    "leaf: subjectAltName IP:127.0.0.1, no DNS name");
	X509_free(r.peer);
	handshake(s, c, "127.0.0.2", &r);
	tap_ok(!r.ok && r.verify == X509_V_ERR_IP_ADDRESS_MISMATCH,
	    "handshake as 127.0.0.2 FAILS (address mismatch)");
	X509_free(r.peer);
	handshake(s, c, "localhost", &r);
	tap_ok(!r.ok && r.verify == X509_V_ERR_HOSTNAME_MISMATCH,
	    "handshake as localhost to the address's leaf FAILS");
	X509_free(r.peer);

	s6 = sp_tls_server_ctx(ca, "::1", &e);
	tap_okf(sp_code_name(e.code), e.msg, s6 != NULL, "leaf for ::1");
	handshake(s6, c, "0:0::1", &r);
	tap_ok(r.ok && r.verify == X509_V_OK, "handshake to ::1 (written "
	    "0:0::1) verifies");
	X509_free(r.peer);
	SSL_CTX_free(s6);
	SSL_CTX_free(s);
	SSL_CTX_free(c);
}

/* The node CA is for guests: a client on the system store refuses it. */
static void
test_system_store(struct sp_tls_ca *ca)
{
	SSL_CTX *s, *c;
	struct hs r;

	s = sp_tls_server_ctx(ca, "api.example.test", &e);
	c = sp_tls_client_ctx(NULL, &e);
	tap_okf(sp_code_name(e.code), e.msg, c != NULL, "client context on the system store");
	if (s == NULL || c == NULL)
		abort();
	handshake(s, c, "api.example.test", &r);
	tap_ok(!r.ok && r.verify == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
	    "the system store does NOT trust the node CA");
	printf("#   verify: %s\n", X509_verify_cert_error_string(r.verify));
	X509_free(r.peer);
	SSL_CTX_free(c);
	c = sp_tls_client_ctx("", &e);
	handshake(s, c, "api.example.test", &r);
	tap_ok(c != NULL && !r.ok, "\"\" is the system store too");
	X509_free(r.peer);
	SSL_CTX_free(c);
	SSL_CTX_free(s);
}

static void
test_client_errors(void)
{
	char p[SP_PATH_MAX];
	SSL_CTX *c;

	pathf(p, root, "no-such-ca.crt");
	c = sp_tls_client_ctx(p, &e);
	tap_ok(c == NULL && e.code == SP_E_NOT_FOUND,
	    "a missing CA file: not-found");
	pathf(p, root, "garbage.crt");
	spit(p, "garbage\n", 8, 0644);
	c = sp_tls_client_ctx(p, &e);
	tap_ok(c == NULL && e.code == SP_E_BAD_INPUT &&
	    strstr(e.msg, "garbage.crt") != NULL, "a CA file without "
	    "certificates: bad-input, named");
	printf("#   %s\n", e.msg);
	tap_ok(ERR_peek_error() == 0, "the OpenSSL error queue is left empty");
	ERR_put_error(ERR_LIB_SSL, 0, SSL_R_CERTIFICATE_VERIFY_FAILED,
	    __FILE__, __LINE__);
	tap_ok(sp_tls_err(&e, "upstream handshake") == -1 &&
	    e.code == SP_E_TLS && e.temp == 0 &&
	    strncmp(e.msg, "upstream handshake: ", 20) == 0 &&
	    strstr(e.msg, "certificate verify failed") != NULL &&
	    ERR_peek_error() == 0, "sp_tls_err: code tls, the reason, queue "
	    "cleared");
	printf("#   %s\n", e.msg);
}

static void
test_bad_hosts(struct sp_tls_ca *ca)
{
	static const char *bad[] = {
		"", "a b", "a\tb", "a\x01z", "host\nx", "a,DNS:evil.test",
		"*.example.test", "-a.test", "a-.test", "a..b", ".a", "a.",
		"127.1", "1.2.3", "10.0.0.256", "[::1]", "fe80::1%lo",
		"caf\xc3\xa9.test", "a/b", "a:443",
	};
	char longname[300], label[70];
	SSL_CTX *s, *c;
	SSL *ssl;
	size_t i;
	int fails = 0;

	c = sp_tls_client_ctx(NULL, &e);
	ssl = SSL_new(c);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		sp_err_clear(&e);
		s = sp_tls_server_ctx(ca, bad[i], &e);
		if (s != NULL || e.code != SP_E_BAD_INPUT) {
			printf("#   server ctx took bad host %zu\n", i);
			fails++;
		}
		SSL_CTX_free(s);
		sp_err_clear(&e);
		if (sp_tls_client_host(ssl, bad[i], &e) != -1 ||
		    e.code != SP_E_BAD_INPUT) {
			printf("#   client took bad host %zu\n", i);
			fails++;
		}
	}
	tap_ok(fails == 0, "bad hosts (empty, spaces, control bytes, commas, "
	    "wildcards, odd dots, numeric TLDs, non-ASCII) are bad-input");
	sp_tls_server_ctx(ca, "a\x01z", &e);
	printf("#   %s\n", e.msg);

	memset(longname, 'a', sizeof longname);
	for (i = 63; i < sizeof longname; i += 64)
		longname[i] = '.';
	longname[254] = '\0';
	tap_ok(sp_tls_server_ctx(ca, longname, &e) == NULL &&
	    e.code == SP_E_BAD_INPUT && strlen(e.msg) < 200,
	    "a 254-byte name is bad-input");
	memset(label, 'b', 64);
	memcpy(label + 64, ".test", 6);
	tap_ok(sp_tls_server_ctx(ca, label, &e) == NULL &&
	    e.code == SP_E_BAD_INPUT, "a 64-byte label is bad-input");
	tap_ok(sp_tls_client_host(ssl, NULL, &e) == -1 &&
	    e.code == SP_E_BAD_INPUT, "a NULL host is bad-input");
	SSL_free(ssl);
	SSL_CTX_free(c);
}

/* A long name's leaf has an empty subject and a critical SAN. */
static void
test_long_name(struct sp_tls_ca *ca, const char *crt)
{
	char name[254];
	SSL_CTX *s, *c;
	struct hs r;
	size_t i;

	memset(name, 'c', sizeof name);
	for (i = 63; i < sizeof name; i += 64)
		name[i] = '.';
	name[253] = '\0';
	s = sp_tls_server_ctx(ca, name, &e);
	c = sp_tls_client_ctx(crt, &e);
	if (s == NULL || c == NULL)
		abort();
	handshake(s, c, name, &r);
	tap_ok(r.ok && r.verify == X509_V_OK && r.peer &&
	    X509_NAME_entry_count(X509_get_subject_name(r.peer)) == 0 &&
	    ext_critical(r.peer, NID_subject_alt_name),
	    "a 253-byte name: verifies; empty subject, critical SAN");
	X509_free(r.peer);
	SSL_CTX_free(s);
	SSL_CTX_free(c);
}

/* Past SP_TLS_CACHE_MAX hosts the oldest goes; a context someone still
 * holds keeps working. */
static void
test_eviction(struct sp_tls_ca *ca, const char *crt)
{
	char host[64];
	SSL_CTX *first, *last, *s, *c;
	struct timespec t0, t1;
	struct hs r;
	int i, fails = 0;

	first = sp_tls_server_ctx(ca, "h0.evict.test", &e);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 1; i <= SP_TLS_CACHE_MAX; i++) {
		snprintf(host, sizeof host, "h%d.evict.test", i);
		if ((s = sp_tls_server_ctx(ca, host, &e)) == NULL)
			fails++;
		SSL_CTX_free(s);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("# %d leaves minted in %.0f ms\n", SP_TLS_CACHE_MAX,
	    (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	tap_okf(sp_code_name(e.code), e.msg, first != NULL && fails == 0,
	    "%d more hosts minted", SP_TLS_CACHE_MAX);
	snprintf(host, sizeof host, "h%d.evict.test", SP_TLS_CACHE_MAX);
	last = sp_tls_server_ctx(ca, host, &e);
	s = sp_tls_server_ctx(ca, "h0.evict.test", &e);
	tap_ok(s != NULL && s != first, "the oldest host was dropped and is "
	    "minted again");
	SSL_CTX_free(s);
	s = sp_tls_server_ctx(ca, host, &e);
	tap_ok(s != NULL && s == last, "the newest host is still cached");
	SSL_CTX_free(s);
	c = sp_tls_client_ctx(crt, &e);
	handshake(first, c, "h0.evict.test", &r);
	tap_ok(r.ok && r.verify == X509_V_OK, "a dropped context its holder "
	    "still has keeps working");
	X509_free(r.peer);
	SSL_CTX_free(c);
	SSL_CTX_free(first);
	SSL_CTX_free(last);
}

struct race {
	struct sp_tls_ca *ca;
	SSL_CTX *got;
};

static void *
race1(void *arg)
{
	struct race *r = arg;
	struct sp_err e2;

	r->got = sp_tls_server_ctx(r->ca, "race.example.test", &e2);
	return NULL;
}

static void
test_threads(struct sp_tls_ca *ca)
{
	struct race r[THREADS];
	pthread_t t[THREADS];
	SSL_CTX *now;
	int i, same = 1;

	for (i = 0; i < THREADS; i++) {
		r[i].ca = ca;
		if (pthread_create(&t[i], NULL, race1, &r[i]) != 0)
			abort();
	}
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	now = sp_tls_server_ctx(ca, "race.example.test", &e);
	for (i = 0; i < THREADS; i++) {
		same = same && r[i].got != NULL && r[i].got == now;
		SSL_CTX_free(r[i].got);
	}
	tap_ok(same, "concurrent first uses of a host all get the cached "
	    "context");
	SSL_CTX_free(now);
}

int
main(void)
{
	char crt[SP_PATH_MAX], key[SP_PATH_MAX];
	struct sp_tls_ca *ca = NULL;

	snprintf(root, sizeof root, "/tmp/test-tls.XXXXXX");
	if (mkdtemp(root) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_create(crt, key);
	test_ca_cert(crt);
	test_refusals(key);
	if (!tap_okf(sp_code_name(e.code), e.msg, sp_tls_ca_load(root, &ca, &e) == 0,
	    "load the CA"))
		return tap_done();
	test_leaf_name(ca, crt);
	test_leaf_ip(ca, crt);
	test_system_store(ca);
	test_client_errors();
	test_bad_hosts(ca);
	test_long_name(ca, crt);
	test_threads(ca);
	test_eviction(ca, crt);
	sp_tls_ca_free(ca);
	sp_path_remove_tree(root, &e);
	return tap_done();
}
