/*
 * sp_tls.h: the node CA and the TLS contexts of the network gateway
 * (design.md).  Included from sp_net.h.
 *
 * The CA is made once by space-init (sp_tls_ca_create) under
 * $SPACE_ROOT/ca/: ca.crt (0644, PEM) and ca.key (0600, PEM; a key file
 * that group or others may read, or that another user owns, is refused).
 * Templates built on the node trust it (sp_template_import adds ca.crt to
 * the guest's /etc/ssl/certs/ca-certificates.crt).  Nodes that move
 * sandboxes between them share one CA: copy the directory.
 *
 * The gateway terminates a guest's TLS to HOST with a leaf certificate for
 * HOST that it mints on first use (sp_tls_server_ctx, cached), and talks to
 * the real HOST over TLS verified against the system trust store, or the CA
 * file SPACE_GATEWAY_UPSTREAM_CA names (tests).
 */
#ifndef SP_TLS_H
#define SP_TLS_H

#include <openssl/ssl.h>

struct sp_err;
struct sp_tls_ca;

#define SP_TLS_CA_DIR	"ca"		/* under $SPACE_ROOT */
#define SP_TLS_CACHE_MAX 1024		/* leaf contexts kept per CA */

/* Makes root/ca/ca.crt and ca.key (ECDSA P-256, 10 years, CN "SPACE node
 * CA <node>", cut to 64 bytes); *made is 0 when both were there already
 * (then nothing is changed, but the pair is loaded as a check), 1 when
 * made.  A half-made pair (one of the two files) is "corrupt"; written to
 * temporary files and renamed, key first. */
int sp_tls_ca_create(const char *root, const char *node, int *made,
    struct sp_err *e);
/* "not-found" without a CA; "corrupt" when half made, unparsable or the key
 * does not match; "bad-input" when the key is open to group or others or
 * owned by another user. */
int sp_tls_ca_load(const char *root, struct sp_tls_ca **ca, struct sp_err *e);
void sp_tls_ca_free(struct sp_tls_ca *ca);
/*
 * A server context presenting a leaf for host (a DNS name, compared without
 * case, or an IPv4 or IPv6 address; subjectAltName DNS or IP), signed by
 * the CA, valid from an hour ago for 30 days, ECDSA P-256, minted once and
 * cached (at most SP_TLS_CACHE_MAX, the oldest dropped; minted again a day
 * before it ends).  Thread-safe.  The caller owns one reference:
 * SSL_CTX_free when done.  Any other host (empty, too long, wildcards,
 * brackets, ports, trailing dots) is "bad-input".
 */
SSL_CTX *sp_tls_server_ctx(struct sp_tls_ca *ca, const char *host,
    struct sp_err *e);
/* The leaf sp_tls_server_ctx mints for host with root's CA, as PEM texts
 * (*key, *cert: the caller frees them). */
int sp_tls_leaf_pems(const char *root, const char *host, char **key,
    char **cert, struct sp_err *e);
/* A client context that verifies peers against cafile, or against the
 * system trust store when cafile is NULL or "" (TLS 1.2 at least).  The
 * caller SSL_CTX_free's it. */
SSL_CTX *sp_tls_client_ctx(const char *cafile, struct sp_err *e);
/* Sets SNI (for a name) and host name (or IP) verification on ssl; hosts
 * as for sp_tls_server_ctx.  Without it only the chain is verified. */
int sp_tls_client_host(SSL *ssl, const char *host, struct sp_err *e);
/* The last OpenSSL error as a message in e (code "tls"), the queue cleared. */
int sp_tls_err(struct sp_err *e, const char *what);

#endif
