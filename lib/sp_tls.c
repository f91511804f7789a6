/*
 * sp_tls: the node CA and the TLS contexts of the network gateway
 * (design.md).  The CA is one ECDSA key and a self-signed certificate under
 * $SPACE_ROOT/ca/; the gateway presents, for each host a guest talks TLS
 * to, a leaf the CA signs on first use, kept in a small LRU per CA.
 */
#include <sys/file.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "sp_net.h"

#define HOST_MAX	253		/* a DNS name, dots included */
#define LABEL_MAX	63
#define CN_MAX		64		/* ub-common-name, RFC 5280 */
#define CA_DAYS		3650
#define LEAF_DAYS	30
#define SKEW		3600		/* a new certificate is valid from an
					 * hour ago: guest clocks lag */
#define RENEW		(24 * 3600)	/* a cached leaf this close to its end
					 * is minted again */
#define BUCKETS		2048		/* a power of 2, twice the cache */

_Static_assert(BUCKETS >= 2 * SP_TLS_CACHE_MAX, "cache buckets too few");

struct leaf {
	char host[HOST_MAX + 1];
	SSL_CTX *ctx;
	time_t renew;			/* minted again from then on */
	struct leaf *chain;		/* the next in its bucket */
	struct leaf *newer, *older;	/* the LRU list */
};

struct sp_tls_ca {
	EVP_PKEY *key;
	X509 *cert;
	pthread_mutex_t mu;		/* guards what follows */
	struct leaf *bucket[BUCKETS];
	struct leaf *newest, *oldest;
	size_t n;
};

/* ---- errors ---- */

static void
msg_append(struct sp_err *e, const char *s)
{
	size_t n = strlen(e->msg);

	if (n < sizeof e->msg)
		snprintf(e->msg + n, sizeof e->msg - n, "%s", s);
}

/*
 * what, then each queued OpenSSL error (library, reason and the detail it
 * attached, like a file name), oldest first.  The queue is left empty so
 * that a later failure does not carry this one's reasons.
 */
static int
tls_fail(struct sp_err *e, enum sp_code code, const char *what)
{
	const char *data, *lib, *reason;
	char buf[256];
	unsigned long err;
	int flags, n = 0;

	if (e == NULL) {
		ERR_clear_error();
		return -1;
	}
	sp_err_set(e, code, 0, "%s", what);
	while ((err = ERR_get_error_all(NULL, NULL, NULL, &data,
	    &flags)) != 0) {
		lib = ERR_lib_error_string(err);
		reason = ERR_reason_error_string(err);
		if (reason == NULL)
			ERR_error_string_n(err, buf, sizeof buf);
		else
			snprintf(buf, sizeof buf, "%s%s%s", lib ? lib : "",
			    lib ? ": " : "", reason);
		msg_append(e, n++ ? "; " : ": ");
		msg_append(e, buf);
		if ((flags & ERR_TXT_STRING) && data != NULL && *data != '\0') {
			msg_append(e, " (");
			msg_append(e, data);
			msg_append(e, ")");
		}
	}
	if (n == 0)
		msg_append(e, ": unknown TLS error");
	return -1;
}

int
sp_tls_err(struct sp_err *e, const char *what)
{
	return tls_fail(e, SP_E_TLS, what);
}

/* ---- host names ---- */

/* A printable copy of hostile text for messages, cut short. */
static const char *
quote(const char *s, char *out, size_t n)
{
	size_t i, j = 0;

	for (i = 0; s[i] != '\0' && j + 4 < n && i < 64; i++) {
		unsigned char c = (unsigned char)s[i];

		out[j++] = (c >= 0x20 && c < 0x7f && c != '\'') ? (char)c : '?';
	}
	if (s[i] != '\0') {
		memcpy(out + j, "...", 3);
		j += 3;
	}
	out[j] = '\0';
	return out;
}

/* LDH labels (and '_', which real host names carry) of 1..63 bytes. */
static int
dns_ok(const char *h)
{
	size_t len = 0, digits = 0;
	const char *p, *label = h;

	for (p = h; ; p++) {
		if (*p == '.' || *p == '\0') {
			len = (size_t)(p - label);
			if (len == 0 || len > LABEL_MAX || *label == '-' ||
			    p[-1] == '-')
				return 0;
			if (*p == '\0')
				break;
			label = p + 1;
			continue;
		}
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		    *p == '-' || *p == '_'))
			return 0;
	}
	/* An all-digit last label is no top-level domain: "127.1" is an
	 * address to some resolvers, and the CA must not vouch for it as a
	 * name. */
	for (p = label; *p >= '0' && *p <= '9'; p++)
		digits++;
	return digits != len;
}

/*
 * Checks host and gives its canonical form: a DNS name in lowercase, or an
 * IPv4 (or IPv6) address as inet_ntop writes it; *ip says which.  The
 * canonical form keys the cache and goes into the certificate.
 */
static int
host_norm(const char *host, char out[HOST_MAX + 1], int *ip, struct sp_err *e)
{
	unsigned char a[16];
	char q[96];
	size_t i, n;

	if (host == NULL || *host == '\0')
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "empty TLS host name");
	n = strnlen(host, HOST_MAX + 1);
	if (n > HOST_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "TLS host '%s' is longer "
		    "than %d bytes", quote(host, q, sizeof q), HOST_MAX);
	*ip = 1;
	if (inet_pton(AF_INET, host, a) == 1)
		return inet_ntop(AF_INET, a, out, HOST_MAX + 1) ? 0 :
		    sp_err_sys(e, SP_E_INTERNAL, "inet_ntop");
	if (inet_pton(AF_INET6, host, a) == 1)
		return inet_ntop(AF_INET6, a, out, HOST_MAX + 1) ? 0 :
		    sp_err_sys(e, SP_E_INTERNAL, "inet_ntop");
	*ip = 0;
	for (i = 0; i <= n; i++)
		out[i] = (host[i] >= 'A' && host[i] <= 'Z') ?
		    (char)(host[i] - 'A' + 'a') : host[i];
	if (!dns_ok(out))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "TLS host '%s' is neither "
		    "a DNS name nor an IP address", quote(host, q, sizeof q));
	return 0;
}

/* ---- certificates ---- */

/* A v3 certificate for pub with a random 128-bit serial, valid from an
 * hour ago for days; names and extensions are the caller's. */
static X509 *
cert_new(EVP_PKEY *pub, long days, struct sp_err *e)
{
	BIGNUM *bn = NULL;
	X509 *x;

	if ((x = X509_new()) == NULL || (bn = BN_new()) == NULL ||
	    X509_set_version(x, X509_VERSION_3) != 1 ||
	    BN_rand(bn, 128, BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ANY) != 1 ||
	    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) == NULL ||
	    X509_gmtime_adj(X509_getm_notBefore(x), -SKEW) == NULL ||
	    X509_time_adj_ex(X509_getm_notAfter(x), (int)days, 0,
	    NULL) == NULL || X509_set_pubkey(x, pub) != 1) {
		tls_fail(e, SP_E_INTERNAL, "new certificate");
		X509_free(x);
		x = NULL;
	}
	BN_free(bn);
	return x;
}

/* One extension in openssl.cnf syntax; the values are constants here. */
static int
add_ext(X509 *issuer, X509 *x, int nid, const char *value, struct sp_err *e)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	ok = ext != NULL && X509_add_ext(x, ext, -1) == 1;
	X509_EXTENSION_free(ext);
	if (!ok)
		return tls_fail(e, SP_E_INTERNAL, OBJ_nid2sn(nid));
	return 0;
}

static int
add_cn(X509 *x, const char *cn, struct sp_err *e)
{
	if (X509_NAME_add_entry_by_NID(X509_get_subject_name(x),
	    NID_commonName, MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
	    0) != 1)
		return tls_fail(e, SP_E_INTERNAL, "certificate name");
	return 0;
}

/*
 * The subjectAltName is built from parts rather than parsed from text, so
 * that nothing in a host name can add a second name.  Without a common name
 * (a host too long for one) the subject is empty and RFC 5280 wants the
 * extension critical.
 */
static int
add_san(X509 *x, const char *host, int ip, int critical, struct sp_err *e)
{
	GENERAL_NAMES *gens = GENERAL_NAMES_new();
	GENERAL_NAME *g = GENERAL_NAME_new();
	ASN1_OCTET_STRING *addr = NULL;
	ASN1_IA5STRING *dns = NULL;
	int ret = -1;

	if (gens == NULL || g == NULL)
		goto out;
	if (ip) {
		if ((addr = a2i_IPADDRESS(host)) == NULL)
			goto out;
		GENERAL_NAME_set0_value(g, GEN_IPADD, addr);
	} else {
		if ((dns = ASN1_IA5STRING_new()) == NULL ||
		    ASN1_STRING_set(dns, host, -1) != 1) {
			ASN1_IA5STRING_free(dns);
			goto out;
		}
		GENERAL_NAME_set0_value(g, GEN_DNS, dns);
	}
	if (sk_GENERAL_NAME_push(gens, g) <= 0)
		goto out;
	g = NULL;
	if (X509_add1_ext_i2d(x, NID_subject_alt_name, gens, critical,
	    X509V3_ADD_DEFAULT) != 1)
		goto out;
	ret = 0;
out:
	GENERAL_NAME_free(g);
	GENERAL_NAMES_free(gens);
	return ret == 0 ? 0 : tls_fail(e, SP_E_INTERNAL, "subjectAltName");
}

/* The CA: it signs leaves only (pathlen 0), for ten years. */
static X509 *
ca_cert(EVP_PKEY *key, const char *node, struct sp_err *e)
{
	char cn[CN_MAX + 1];
	X509 *x;

	/* A common name holds 64 bytes: a long node name is cut. */
	snprintf(cn, sizeof cn, "SPACE node CA%s%s", node && *node ? " " : "",
	    node ? node : "");
	if ((x = cert_new(key, CA_DAYS, e)) == NULL)
		return NULL;
	if (add_cn(x, cn, e) == -1 ||
	    X509_set_issuer_name(x, X509_get_subject_name(x)) != 1 ||
	    add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0",
	    e) == -1 ||
	    add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign",
	    e) == -1 ||
	    add_ext(x, x, NID_subject_key_identifier, "hash", e) == -1)
		goto fail;
	if (X509_sign(x, key, EVP_sha256()) <= 0) {
		tls_fail(e, SP_E_INTERNAL, "sign the CA certificate");
		goto fail;
	}
	return x;
fail:
	X509_free(x);
	return NULL;
}

static X509 *
leaf_cert(struct sp_tls_ca *ca, EVP_PKEY *key, const char *host, int ip,
    struct sp_err *e)
{
	int named = strlen(host) <= CN_MAX;
	X509 *x;

	if ((x = cert_new(key, LEAF_DAYS, e)) == NULL)
		return NULL;
	if ((named && add_cn(x, host, e) == -1) ||
	    X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) != 1 ||
	    add_san(x, host, ip, !named, e) == -1 ||
	    add_ext(ca->cert, x, NID_basic_constraints, "critical,CA:FALSE",
	    e) == -1 ||
	    add_ext(ca->cert, x, NID_key_usage, "critical,digitalSignature",
	    e) == -1 ||
	    add_ext(ca->cert, x, NID_ext_key_usage, "serverAuth", e) == -1 ||
	    add_ext(ca->cert, x, NID_subject_key_identifier, "hash", e) == -1 ||
	    add_ext(ca->cert, x, NID_authority_key_identifier, "keyid:always",
	    e) == -1)
		goto fail;
	if (X509_sign(x, ca->key, EVP_sha256()) <= 0) {
		tls_fail(e, SP_E_INTERNAL, "sign a leaf certificate");
		goto fail;
	}
	return x;
fail:
	X509_free(x);
	return NULL;
}

/* ---- the CA's files ---- */

static int
ca_file(const char *root, const char *name, char *out, size_t n,
    struct sp_err *e)
{
	return sp_path_fmt(out, n, e, "%s/%s/%s", root, SP_TLS_CA_DIR, name);
}

/* 1 when path is there (as anything), 0 when not. */
static int
present(const char *path, struct sp_err *e)
{
	struct stat st;

	if (lstat(path, &st) == 0)
		return 1;
	if (errno == ENOENT)
		return 0;
	return sp_err_sys(e, SP_E_IO, "stat '%s'", path);
}

/* Both files, neither ("not-found"), or one of them ("corrupt"). */
static int
pair_state(const char *root, int *have, struct sp_err *e)
{
	char key[SP_PATH_MAX], crt[SP_PATH_MAX];
	int k, c;

	if (ca_file(root, "ca.key", key, sizeof key, e) == -1 ||
	    ca_file(root, "ca.crt", crt, sizeof crt, e) == -1 ||
	    (k = present(key, e)) == -1 || (c = present(crt, e)) == -1)
		return -1;
	*have = k && c;
	if (k != c)
		return sp_err_set(e, SP_E_CORRUPT, 0, "node CA half made: '%s' "
		    "without '%s'; restore the pair or remove both",
		    k ? key : crt, k ? crt : key);
	return 0;
}

/* The passphrase callback: the key is never encrypted, and without one
 * OpenSSL would ask on the terminal. */
static int
no_passphrase(char *buf, int size, int rwflag, void *u)
{
	return -1;
}

/* The key file must be ours alone: anyone else who reads it can mint
 * certificates every template trusts. */
static int
key_file_check(int fd, const char *path, struct sp_err *e)
{
	struct stat st;

	if (fstat(fd, &st) == -1)
		return sp_err_sys(e, SP_E_IO, "stat '%s'", path);
	if (!S_ISREG(st.st_mode))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "CA key '%s' is not a "
		    "regular file", path);
	if (st.st_uid != geteuid())
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "CA key '%s' is owned by "
		    "uid %u, not by this user (uid %u)", path,
		    (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & 077)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "CA key '%s' is open to "
		    "group or others (mode %04o): chmod 600 it", path,
		    (unsigned)(st.st_mode & 07777));
	return 0;
}

/*
 * Reads the PEM of path through an fd BIO: no buffer of ours ever holds the
 * key, and OpenSSL wipes its own.  A file that does not parse is
 * "corrupt".
 */
static int
pem_read(const char *path, EVP_PKEY **key, X509 **cert, struct sp_err *e)
{
	char what[SP_PATH_MAX + 32];
	BIO *b = NULL;
	int fd, ret = -1;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) == -1)
		return sp_err_sys(e, SP_E_IO, "open '%s'", path);
	if (key != NULL && key_file_check(fd, path, e) == -1)
		goto out;
	if ((b = BIO_new_fd(fd, BIO_NOCLOSE)) == NULL) {
		tls_fail(e, SP_E_INTERNAL, "BIO_new_fd");
		goto out;
	}
	if (key != NULL)
		*key = PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL);
	else
		*cert = PEM_read_bio_X509(b, NULL, no_passphrase, NULL);
	if (key != NULL ? *key == NULL : *cert == NULL) {
		snprintf(what, sizeof what, "CA %s '%s' does not parse",
		    key != NULL ? "key" : "certificate", path);
		tls_fail(e, SP_E_CORRUPT, what);
		goto out;
	}
	ret = 0;
out:
	BIO_free(b);
	close(fd);
	return ret;
}

/*
 * Writes the PEM of key or cert as dir/name with mode, whole or not at all:
 * a temporary file beside it, fsync'd, renamed over it.  The fd BIO keeps
 * the key out of buffers of ours.
 */
static int
pem_write(const char *dir, const char *name, mode_t mode, EVP_PKEY *key,
    X509 *cert, struct sp_err *e)
{
	char tmp[SP_PATH_MAX], path[SP_PATH_MAX];
	BIO *b = NULL;
	int fd, ok, ret = -1;

	if (sp_path_fmt(tmp, sizeof tmp, e, "%s/.%s.tmp-XXXXXX", dir,
	    name) == -1 ||
	    sp_path_fmt(path, sizeof path, e, "%s/%s", dir, name) == -1)
		return -1;
	/* mkostemp makes it 0600: the key is never readable by others. */
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_IO, "create '%s'", tmp);
	if (fchmod(fd, mode) == -1) {
		sp_err_sys(e, SP_E_IO, "chmod '%s'", tmp);
		goto out;
	}
	if ((b = BIO_new_fd(fd, BIO_NOCLOSE)) == NULL) {
		tls_fail(e, SP_E_INTERNAL, "BIO_new_fd");
		goto out;
	}
	errno = 0;
	ok = key != NULL ? PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0,
	    NULL, NULL) : PEM_write_bio_X509(b, cert);
	if (ok != 1) {
		if (errno != 0)
			sp_err_sys(e, SP_E_IO, "write '%s'", tmp);
		else
			tls_fail(e, SP_E_INTERNAL, "PEM encoding");
		goto out;
	}
	if (fsync(fd) == -1) {
		sp_err_sys(e, SP_E_IO, "write '%s'", tmp);
		goto out;
	}
	if (rename(tmp, path) == -1) {
		sp_err_sys(e, SP_E_IO, "rename '%s' to '%s'", tmp, path);
		goto out;
	}
	ret = 0;
out:
	ERR_clear_error();
	BIO_free(b);
	close(fd);
	if (ret == -1)
		unlink(tmp);
	return ret;
}

/* root/ca, made 0755 when it is not there: the certificate in it is for
 * everyone; the key's own mode keeps it private. */
static int
ca_dir(const char *root, char *dir, size_t n, struct sp_err *e)
{
	if (sp_path_fmt(dir, n, e, "%s/%s", root, SP_TLS_CA_DIR) == -1)
		return -1;
	if (mkdir(dir, 0755) == 0) {
		if (chmod(dir, 0755) == -1)
			return sp_err_sys(e, SP_E_IO, "chmod '%s'", dir);
	} else if (errno != EEXIST)
		return sp_err_sys(e, SP_E_IO, "mkdir '%s'", dir);
	return 0;
}

/* A new key and certificate, key first: a crash between the two leaves a
 * half-made pair, which is refused rather than silently made again. */
static int
ca_make(const char *dir, const char *node, struct sp_err *e)
{
	EVP_PKEY *key;
	X509 *cert = NULL;
	int ret = -1;

	if ((key = EVP_EC_gen("P-256")) == NULL)
		return tls_fail(e, SP_E_INTERNAL, "generate the CA key");
	if ((cert = ca_cert(key, node, e)) == NULL ||
	    pem_write(dir, "ca.key", 0600, key, NULL, e) == -1 ||
	    pem_write(dir, "ca.crt", 0644, NULL, cert, e) == -1)
		goto out;
	ret = 0;
out:
	X509_free(cert);
	EVP_PKEY_free(key);
	return ret;
}

int
sp_tls_ca_create(const char *root, const char *node, int *made,
    struct sp_err *e)
{
	char dir[SP_PATH_MAX];
	struct sp_tls_ca *ca = NULL;
	int fd, have, ret = -1;

	*made = 0;
	if (ca_dir(root, dir, sizeof dir, e) == -1)
		return -1;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return sp_err_sys(e, SP_E_IO, "open '%s'", dir);
	/* Two space-init at once must not make two CAs. */
	while (flock(fd, LOCK_EX) == -1) {
		if (errno != EINTR) {
			sp_err_sys(e, SP_E_IO, "lock '%s'", dir);
			goto out;
		}
	}
	if (pair_state(root, &have, e) == -1)
		goto out;
	if (have) {
		/* Already there: only checked, so that a node with a broken
		 * or exposed CA says so now and not at its first TLS. */
		ret = sp_tls_ca_load(root, &ca, e);
		goto out;
	}
	if (ca_make(dir, node, e) == -1)
		goto out;
	if (fsync(fd) == -1) {
		sp_err_sys(e, SP_E_IO, "fsync '%s'", dir);
		goto out;
	}
	*made = 1;
	ret = 0;
out:
	sp_tls_ca_free(ca);
	close(fd);
	return ret;
}

int
sp_tls_ca_load(const char *root, struct sp_tls_ca **out, struct sp_err *e)
{
	char key[SP_PATH_MAX], crt[SP_PATH_MAX];
	struct sp_tls_ca *ca;
	int have;

	*out = NULL;
	if (pair_state(root, &have, e) == -1)
		return -1;
	if (!have)
		return sp_err_set(e, SP_E_NOT_FOUND, 0, "no node CA under "
		    "'%s/%s' (space-init makes it)", root, SP_TLS_CA_DIR);
	if (ca_file(root, "ca.key", key, sizeof key, e) == -1 ||
	    ca_file(root, "ca.crt", crt, sizeof crt, e) == -1)
		return -1;
	if ((ca = calloc(1, sizeof *ca)) == NULL)
		return sp_err_sys(e, SP_E_INTERNAL, "load the node CA");
	if (pthread_mutex_init(&ca->mu, NULL) != 0) {
		free(ca);
		return sp_err_set(e, SP_E_INTERNAL, 1, "pthread_mutex_init");
	}
	if (pem_read(key, &ca->key, NULL, e) == -1 ||
	    pem_read(crt, NULL, &ca->cert, e) == -1)
		goto fail;
	if (X509_check_private_key(ca->cert, ca->key) != 1) {
		ERR_clear_error();
		sp_err_set(e, SP_E_CORRUPT, 0, "node CA key '%s' does not match "
		    "its certificate '%s'", key, crt);
		goto fail;
	}
	if (X509_check_ca(ca->cert) == 0) {
		sp_err_set(e, SP_E_CORRUPT, 0, "node CA certificate '%s' is not "
		    "a CA", crt);
		goto fail;
	}
	*out = ca;
	return 0;
fail:
	sp_tls_ca_free(ca);
	return -1;
}

/* ---- the cache of leaf contexts ---- */

static size_t
host_hash(const char *s)
{
	uint32_t h = 2166136261u;	/* FNV-1a */

	while (*s != '\0')
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h & (BUCKETS - 1);
}

static void
lru_unlink(struct sp_tls_ca *ca, struct leaf *l)
{
	if (l->newer != NULL)
		l->newer->older = l->older;
	else
		ca->newest = l->older;
	if (l->older != NULL)
		l->older->newer = l->newer;
	else
		ca->oldest = l->newer;
	l->newer = l->older = NULL;
}

static void
lru_push(struct sp_tls_ca *ca, struct leaf *l)
{
	l->older = ca->newest;
	l->newer = NULL;
	if (ca->newest != NULL)
		ca->newest->newer = l;
	ca->newest = l;
	if (ca->oldest == NULL)
		ca->oldest = l;
}

/* The cache's reference goes; callers' references keep a context alive. */
static void
leaf_drop(struct sp_tls_ca *ca, struct leaf *l)
{
	struct leaf **p;

	for (p = &ca->bucket[host_hash(l->host)]; *p != l; p = &(*p)->chain)
		;
	*p = l->chain;
	lru_unlink(ca, l);
	SSL_CTX_free(l->ctx);
	free(l);
	ca->n--;
}

/* The cached context of host, made the newest; a stale one is dropped.
 * Called with the lock held. */
static struct leaf *
leaf_find(struct sp_tls_ca *ca, const char *host)
{
	struct leaf *l;

	for (l = ca->bucket[host_hash(host)]; l != NULL; l = l->chain)
		if (strcmp(l->host, host) == 0)
			break;
	if (l == NULL)
		return NULL;
	if (time(NULL) >= l->renew) {
		leaf_drop(ca, l);
		return NULL;
	}
	lru_unlink(ca, l);
	lru_push(ca, l);
	return l;
}

/* Caches fresh for host unless a concurrent caller got there first;
 * returns the cached context with a reference for the caller. */
static SSL_CTX *
leaf_keep(struct sp_tls_ca *ca, const char *host, SSL_CTX *fresh)
{
	struct leaf *l;
	SSL_CTX *ctx = fresh;

	pthread_mutex_lock(&ca->mu);
	if ((l = leaf_find(ca, host)) != NULL) {
		SSL_CTX_free(fresh);
		ctx = l->ctx;
		SSL_CTX_up_ref(ctx);
	} else if ((l = calloc(1, sizeof *l)) != NULL) {
		/* Out of memory only costs the caching. */
		snprintf(l->host, sizeof l->host, "%s", host);
		l->ctx = fresh;
		l->renew = time(NULL) + (time_t)LEAF_DAYS * 86400 - RENEW;
		l->chain = ca->bucket[host_hash(host)];
		ca->bucket[host_hash(host)] = l;
		lru_push(ca, l);
		if (++ca->n > SP_TLS_CACHE_MAX)
			leaf_drop(ca, ca->oldest);
		SSL_CTX_up_ref(ctx);
	}
	pthread_mutex_unlock(&ca->mu);
	return ctx;
}

/* ---- contexts ---- */

static SSL_CTX *
leaf_ctx(struct sp_tls_ca *ca, const char *host, int ip, struct sp_err *e)
{
	EVP_PKEY *key;
	X509 *x = NULL;
	SSL_CTX *ctx = NULL;

	if ((key = EVP_EC_gen("P-256")) == NULL) {
		tls_fail(e, SP_E_INTERNAL, "generate a leaf key");
		return NULL;
	}
	if ((x = leaf_cert(ca, key, host, ip, e)) == NULL)
		goto out;
	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL ||
	    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_use_certificate(ctx, x) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, key) != 1) {
		tls_fail(e, SP_E_INTERNAL, "server context");
		SSL_CTX_free(ctx);
		ctx = NULL;
		goto out;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
out:
	X509_free(x);
	EVP_PKEY_free(key);
	return ctx;
}

SSL_CTX *
sp_tls_server_ctx(struct sp_tls_ca *ca, const char *host, struct sp_err *e)
{
	char h[HOST_MAX + 1];
	struct leaf *l;
	SSL_CTX *ctx = NULL;
	int ip;

	if (host_norm(host, h, &ip, e) == -1)
		return NULL;
	pthread_mutex_lock(&ca->mu);
	if ((l = leaf_find(ca, h)) != NULL) {
		ctx = l->ctx;
		SSL_CTX_up_ref(ctx);
	}
	pthread_mutex_unlock(&ca->mu);
	if (ctx != NULL)
		return ctx;
	/* Minted without the lock, so that one new host does not hold up
	 * the others; two first uses of a host may both mint, and the
	 * later one takes the earlier one's context. */
	if ((ctx = leaf_ctx(ca, h, ip, e)) == NULL)
		return NULL;
	return leaf_keep(ca, h, ctx);
}

SSL_CTX *
sp_tls_client_ctx(const char *cafile, struct sp_err *e)
{
	char what[SP_PATH_MAX + 32];
	struct stat st;
	SSL_CTX *ctx;

	if (cafile != NULL && *cafile != '\0' && stat(cafile, &st) == -1) {
		if (errno == ENOENT)
			sp_err_set(e, SP_E_NOT_FOUND, 0, "CA file '%s' does not "
			    "exist", cafile);
		else
			sp_err_sys(e, SP_E_IO, "CA file '%s'", cafile);
		return NULL;
	}
	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL ||
	    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
		tls_fail(e, SP_E_INTERNAL, "client context");
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	X509_VERIFY_PARAM_set_hostflags(SSL_CTX_get0_param(ctx),
	    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (cafile != NULL && *cafile != '\0') {
		if (SSL_CTX_load_verify_file(ctx, cafile) != 1) {
			snprintf(what, sizeof what, "CA file '%s'", cafile);
			tls_fail(e, SP_E_BAD_INPUT, what);
			SSL_CTX_free(ctx);
			return NULL;
		}
	} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		sp_tls_err(e, "the system trust store");
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

int
sp_tls_client_host(SSL *ssl, const char *host, struct sp_err *e)
{
	char h[HOST_MAX + 1];
	int ip;

	if (host_norm(host, h, &ip, e) == -1)
		return -1;
	/* SNI carries names only (RFC 6066): an address is checked against
	 * the certificate's IP names and not sent. */
	if (ip) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), h) != 1)
			return sp_tls_err(e, "peer address check");
		return 0;
	}
	if (SSL_set_tlsext_host_name(ssl, h) != 1 || SSL_set1_host(ssl, h) != 1)
		return sp_tls_err(e, "peer name check");
	return 0;
}

void
sp_tls_ca_free(struct sp_tls_ca *ca)
{
	if (ca == NULL)
		return;
	while (ca->oldest != NULL)
		leaf_drop(ca, ca->oldest);
	EVP_PKEY_free(ca->key);
	X509_free(ca->cert);
	pthread_mutex_destroy(&ca->mu);
	free(ca);
}

int
sp_tls_leaf_pems(const char *root, const char *host, char **key, char **cert,
    struct sp_err *e)
{
	struct sp_tls_ca *ca;
	SSL_CTX *ctx;
	BIO *kb, *cb;
	char *p;
	long n;
	int rc = -1;

	*key = *cert = NULL;
	if (sp_tls_ca_load(root, &ca, e) == -1)
		return -1;
	ctx = sp_tls_server_ctx(ca, host, e);
	sp_tls_ca_free(ca);
	if (ctx == NULL)
		return -1;
	kb = BIO_new(BIO_s_mem());
	cb = BIO_new(BIO_s_mem());
	if (kb == NULL || cb == NULL ||
	    !PEM_write_bio_PrivateKey(kb, SSL_CTX_get0_privatekey(ctx), NULL,
	    NULL, 0, NULL, NULL) ||
	    !PEM_write_bio_X509(cb, SSL_CTX_get0_certificate(ctx))) {
		sp_tls_err(e, "writing the API's certificate");
		goto out;
	}
	n = BIO_get_mem_data(kb, &p);
	*key = strndup(p, n);
	n = BIO_get_mem_data(cb, &p);
	*cert = strndup(p, n);
	rc = *key && *cert ? 0 : sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
out:
	BIO_free(kb);
	BIO_free(cb);
	SSL_CTX_free(ctx);
	return rc;
}
