/*
 * sp_api_forward.c: a request for a sandbox of another node goes to that
 * node's space-apid, which acts on it and answers through this one.  Each
 * space-apid says where it listens in the DB's documents (kind "apid",
 * scope "node", its name); the servers of a cluster share a secret there
 * too (scope "cluster", name "secret": 32 random bytes, made by the first).
 * A forwarded request carries who asked (tenant, admin, key id) and the
 * time, signed with HMAC-SHA256 under that secret over those, the method,
 * the path and query, the sandbox and a hash of the body; the node that
 * receives it trusts what a valid signature says and forwards it no
 * further.  The answer streams back as it comes (libcurl, in a thread).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sp_api.h"
#include "sp_api_int.h"
#include "sp_curl.h"

#define SKEW_S		60	/* a signature's time, either way */
#define SIG_HEADER	"X-Space-Forward-Sig"

static pthread_mutex_t secret_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned char secret[crypto_auth_hmacsha256_KEYBYTES];
static int have_secret;

/* The cluster's secret, made by the first server to want it. */
static int
load_secret(struct sp_db *db, struct sp_err *e)
{
	unsigned char k[crypto_auth_hmacsha256_KEYBYTES];
	char hex[2 * sizeof k + 1], *body = NULL;
	size_t n;
	int rc = -1;

	pthread_mutex_lock(&secret_mu);
	if (have_secret) {
		pthread_mutex_unlock(&secret_mu);
		return 0;
	}
	if (sp_db_doc_get(db, "apid", "cluster", "secret", &body, e) == -1) {
		if (e->code != SP_E_NOT_FOUND)
			goto out;
		randombytes_buf(k, sizeof k);
		sodium_bin2hex(hex, sizeof hex, k, sizeof k);
		/* Two at once: the second finds the first's. */
		if (sp_db_doc_put(db, "apid", "cluster", "secret", hex, 0,
		    e) == -1 && (e->code != SP_E_EXISTS ||
		    sp_db_doc_get(db, "apid", "cluster", "secret", &body,
		    e) == -1))
			goto out;
	}
	if (body != NULL && (sodium_hex2bin(k, sizeof k, body, strlen(body),
	    NULL, &n, NULL) != 0 || n != sizeof k)) {
		sp_err_set(e, SP_E_CORRUPT, 0, "the cluster's API secret is not "
		    "%zu bytes of hex", sizeof k);
		goto out;
	}
	memcpy(secret, k, sizeof k);
	have_secret = 1;
	rc = 0;
out:
	pthread_mutex_unlock(&secret_mu);
	sodium_memzero(k, sizeof k);
	free(body);
	return rc;
}

int
sp_api_forward_init(struct sp_ctx *x, const char *url, struct sp_err *e)
{
	json_t *j = json_pack("{s:s, s:I}", "url", url, "since",
	    (json_int_t)time(NULL));
	char *body = json_dumps(j, JSON_COMPACT);
	CURL *h;
	int rc;

	json_decref(j);
	if (body == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
	rc = sp_db_doc_put(x->db, "apid", "node", x->conf.node, body, 1, e);
	free(body);
	if (rc == -1 || load_secret(x->db, e) == -1)
		return -1;
	/* libcurl's global set-up, here in one thread before the others. */
	if (sp_curl_load(e) == -1)
		return -1;
	if ((h = sp_curl.curl_easy_init()) != NULL)
		sp_curl.curl_easy_cleanup(h);
	return 0;
}

/* An empty header would not be sent (libcurl drops "Name:"): "-", which
 * no tenant or key id is, stands for none. */
static const char *
dash(const char *s)
{
	return s[0] != '\0' ? s : "-";
}

static const char *
undash(const char *s)
{
	return strcmp(s, "-") == 0 ? "" : s;
}

/* The signature of a request, as hex. */
static void
sign(const char *t, const char *method, const char *target,
    const char *tenant, int admin, const char *key, const char *sandbox,
    const void *body, size_t len, char out[65])
{
	unsigned char bh[32], mac[crypto_auth_hmacsha256_BYTES];
	char bhex[65], *msg;
	size_t n;

	crypto_generichash(bh, sizeof bh, body, len, NULL, 0);
	sodium_bin2hex(bhex, sizeof bhex, bh, sizeof bh);
	n = strlen(t) + strlen(method) + strlen(target) + strlen(tenant) +
	    strlen(key) + strlen(sandbox) + 80;
	if ((msg = malloc(n)) == NULL) {
		out[0] = '\0';
		return;
	}
	snprintf(msg, n, "space-forward-v1\n%s\n%s\n%s\n%s\n%d\n%s\n%s\n%s", t,
	    method, target, tenant, admin, key, sandbox, bhex);
	crypto_auth_hmacsha256(mac, (unsigned char *)msg, strlen(msg), secret);
	sodium_bin2hex(out, 65, mac, sizeof mac);
	free(msg);
}

int
sp_api_forward_check(struct sp_api_call *c, struct sp_err *e)
{
	const char *sig = c->header(c, SIG_HEADER), *t, *tenant, *admin, *key,
	    *sb;
	char target[2048], want[65];
	char *end;
	long long when;

	if (sig == NULL)
		return 0;
	t = c->header(c, "X-Space-Forward-Time");
	tenant = c->header(c, "X-Space-Forward-Tenant");
	admin = c->header(c, "X-Space-Forward-Admin");
	key = c->header(c, "X-Space-Forward-Key");
	sb = c->header(c, "E2b-Sandbox-Id");
	if (t == NULL || tenant == NULL || admin == NULL || key == NULL ||
	    load_secret(c->x->db, e) == -1 ||
	    c->target(c, target, sizeof target) == -1)
		goto bad;
	when = strtoll(t, &end, 10);
	if (*t == '\0' || *end != '\0' || llabs(when - (long long)time(NULL)) >
	    SKEW_S)
		goto bad;
	sign(t, c->method, target, tenant, strcmp(admin, "1") == 0, key,
	    sb ? sb : "", c->body, c->body_len, want);
	if (!sp_api_token_equal(sig, want) || strlen(tenant) > SP_NAME_MAX ||
	    strlen(key) > SP_APIKEY_ID_LEN)
		goto bad;
	snprintf(c->tenant, sizeof c->tenant, "%s", undash(tenant));
	c->admin = strcmp(admin, "1") == 0;
	snprintf(c->key.id, sizeof c->key.id, "%s", undash(key));
	c->forwarded = 1;
	return 1;
bad:
	return sp_err_set(e, SP_E_UNAUTHORIZED, 0, "a forwarded request whose "
	    "signature does not hold");
}

/* ---- the relay ---- */

struct relay {
	CURL *h;
	struct curl_slist *hdrs;
	char *url;
	int wfd, rfd;
	pthread_t t;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int head_done, done;
	long status;
	char ctype[128];
	char err[CURL_ERROR_SIZE];
	CURLcode rc;
};

static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	struct relay *r = arg;
	size_t len = size * n;

	if (len >= 13 && strncasecmp(p, "Content-Type:", 13) == 0) {
		snprintf(r->ctype, sizeof r->ctype, "%.*s", (int)(len - 13), p + 13);
		r->ctype[strcspn(r->ctype, "\r\n")] = '\0';
		memmove(r->ctype, r->ctype + strspn(r->ctype, " \t"),
		    strlen(r->ctype + strspn(r->ctype, " \t")) + 1);
	}
	/* The blank line ends the head: the answer's status is known. */
	if (len <= 2 && (p[0] == '\r' || p[0] == '\n')) {
		pthread_mutex_lock(&r->mu);
		sp_curl.curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE,
		    &r->status);
		/* An interim 100 Continue is not the answer. */
		if (r->status >= 200)
			r->head_done = 1;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
	}
	return len;
}

static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	struct relay *r = arg;

	/* Blocking: a slow client slows the node that answers. */
	return sp_write_all(r->wfd, p, size * n) == 0 ? size * n : 0;
}

static void *
relay_run(void *arg)
{
	struct relay *r = arg;

	r->rc = sp_curl.curl_easy_perform(r->h);
	close(r->wfd);
	r->wfd = -1;
	pthread_mutex_lock(&r->mu);
	r->done = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

static ssize_t
relay_read(void *arg, char *buf, size_t max)
{
	struct relay *r = arg;
	ssize_t n = sp_api_fd_read(r->rfd, buf, max);

	if (n == 0 && r->rc != CURLE_OK)
		return -1;	/* cut short: the client must not take it whole */
	return n;
}

static void
relay_free(void *arg)
{
	struct relay *r = arg;

	close(r->rfd);
	pthread_join(r->t, NULL);
	sp_curl.curl_slist_free_all(r->hdrs);
	sp_curl.curl_easy_cleanup(r->h);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	free(r->url);
	free(r);
}

static int
add_header(struct relay *r, const char *name, const char *value)
{
	char line[4096];
	struct curl_slist *l;

	if (value == NULL)
		return 0;
	if (snprintf(line, sizeof line, "%s: %s", name, value) >=
	    (int)sizeof line || (l = sp_curl.curl_slist_append(r->hdrs,
	    line)) == NULL)
		return -1;
	r->hdrs = l;
	return 0;
}

/* The URL node's space-apid said it listens on. */
static int
node_url(struct sp_api_call *c, const char *node, char *out, size_t n,
    struct sp_err *e)
{
	char *body = NULL;
	json_t *j;
	const char *u;
	int rc;

	if (sp_db_doc_get(c->x->db, "apid", "node", node, &body, e) == -1) {
		if (e->code == SP_E_NOT_FOUND)
			sp_err_set(e, SP_E_NOT_RUNNING, 1, "sandbox %s is on node "
			    "%s, whose space-apid is not running", c->sandbox,
			    node);
		return -1;
	}
	j = json_loads(body, 0, NULL);
	free(body);
	u = json_string_value(json_object_get(j, "url"));
	rc = u != NULL && (strncmp(u, "http://", 7) == 0 ||
	    strncmp(u, "https://", 8) == 0) && strlen(u) < n ? 0 :
	    sp_err_set(e, SP_E_CORRUPT, 0, "node %s's API address is not a "
	    "URL", node);
	if (rc == 0)
		snprintf(out, n, "%s", u);
	json_decref(j);
	return rc;
}

int
sp_api_forward(struct sp_api_call *c, const char *node, struct sp_err *e)
{
	static const char *const pass[] = { "Content-Type", "E2b-Sandbox-Id",
	    "Connect-Protocol-Version", "Connect-Timeout-Ms",
	    "Keepalive-Ping-Interval", "Content-Encoding" };
	char base[512], target[2048], t[24], sig[65], ca[SP_PATH_MAX + 32];
	const char *auth = c->header(c, "Authorization");
	struct relay *r;
	size_t i, n;
	int p[2];

	if (c->forwarded)
		return sp_err_set(e, SP_E_BAD_STATE, 1, "sandbox %s is on node %s, "
		    "and a forwarded request goes no further", c->sandbox, node);
	if (node_url(c, node, base, sizeof base, e) == -1 ||
	    c->target(c, target, sizeof target) == -1 ||
	    load_secret(c->x->db, e) == -1)
		return e->code != SP_E_NONE ? -1 : sp_err_set(e, SP_E_BAD_INPUT,
		    0, "the request's path and query are too long");
	if ((r = calloc(1, sizeof *r)) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->wfd = r->rfd = -1;
	n = strlen(base) + strlen(target) + 1;
	if ((r->url = malloc(n)) == NULL || (r->h = sp_curl.curl_easy_init()) ==
	    NULL) {
		sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
		goto fail;
	}
	snprintf(r->url, n, "%s%s", base, target);
	snprintf(t, sizeof t, "%lld", (long long)time(NULL));
	sign(t, c->method, target, dash(c->admin ? "" : c->tenant), c->admin,
	    dash(c->key.id), c->header(c, "E2b-Sandbox-Id") ?
	    c->header(c, "E2b-Sandbox-Id") : "", c->body, c->body_len, sig);
	for (i = 0; i < sizeof pass / sizeof pass[0]; i++)
		if (add_header(r, pass[i], c->header(c, pass[i])) == -1)
			goto nomem;
	/* The guest user rides along; keys and tokens do not: the
	 * signature says who asked. */
	if ((auth != NULL && strncasecmp(auth, "Basic ", 6) == 0 &&
	    add_header(r, "Authorization", auth) == -1) ||
	    add_header(r, SIG_HEADER, sig) == -1 ||
	    add_header(r, "X-Space-Forward-Time", t) == -1 ||
	    add_header(r, "X-Space-Forward-Tenant", dash(c->admin ? "" :
	    c->tenant)) == -1 ||
	    add_header(r, "X-Space-Forward-Admin", c->admin ? "1" : "0") ==
	    -1 || add_header(r, "X-Space-Forward-Key", dash(c->key.id)) == -1 ||
	    add_header(r, "Expect", "") == -1)
		goto nomem;
	sp_curl.curl_easy_setopt(r->h, CURLOPT_URL, r->url);
	sp_curl.curl_easy_setopt(r->h, CURLOPT_CUSTOMREQUEST, c->method);
	sp_curl.curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, r->hdrs);
	if (c->body_len > 0 || strcmp(c->method, "POST") == 0 ||
	    strcmp(c->method, "PUT") == 0) {
		sp_curl.curl_easy_setopt(r->h, CURLOPT_POSTFIELDS,
		    c->body ? (const char *)c->body : "");
		sp_curl.curl_easy_setopt(r->h, CURLOPT_POSTFIELDSIZE_LARGE,
		    (curl_off_t)c->body_len);
	}
	if (strcmp(c->method, "GET") == 0)
		sp_curl.curl_easy_setopt(r->h, CURLOPT_HTTPGET, 1L);
	sp_curl.curl_easy_setopt(r->h, CURLOPT_HEADERFUNCTION, on_header);
	sp_curl.curl_easy_setopt(r->h, CURLOPT_HEADERDATA, r);
	sp_curl.curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, on_body);
	sp_curl.curl_easy_setopt(r->h, CURLOPT_WRITEDATA, r);
	sp_curl.curl_easy_setopt(r->h, CURLOPT_ERRORBUFFER, r->err);
	sp_curl.curl_easy_setopt(r->h, CURLOPT_NOSIGNAL, 1L);
	sp_curl.curl_easy_setopt(r->h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	sp_curl.curl_easy_setopt(r->h, CURLOPT_PROTOCOLS_STR, "http,https");
	/* Between nodes, TLS is verified against the node CA. */
	snprintf(ca, sizeof ca, "%s/%s/ca.crt", c->x->conf.root, SP_TLS_CA_DIR);
	if (strncmp(base, "https://", 8) == 0)
		sp_curl.curl_easy_setopt(r->h, CURLOPT_CAINFO, ca);
	if (pipe2(p, O_CLOEXEC) == -1) {
		sp_err_sys(e, SP_E_IO, "pipe");
		goto fail;
	}
	r->rfd = p[0];
	r->wfd = p[1];
	if (pthread_create(&r->t, NULL, relay_run, r) != 0) {
		close(p[0]);
		close(p[1]);
		r->rfd = r->wfd = -1;
		sp_err_set(e, SP_E_NOMEM, 1, "cannot start a thread");
		goto fail;
	}
	pthread_mutex_lock(&r->mu);
	while (!r->head_done && !r->done)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
	if (!r->head_done) {
		sp_err_set(e, SP_E_NOT_RUNNING, 1, "node %s's space-apid did not "
		    "answer: %s", node, r->err[0] ? r->err :
		    sp_curl.curl_easy_strerror(r->rc));
		relay_free(r);
		return -1;
	}
	c->status = (int)r->status;
	c->ctype = r->ctype[0] ? strdup(r->ctype) : NULL;
	c->ctype_owned = c->ctype != NULL;
	c->reader = relay_read;
	c->reader_free = relay_free;
	c->reader_arg = r;
	return 0;
nomem:
	sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
fail:
	if (r->h != NULL)
		sp_curl.curl_easy_cleanup(r->h);
	sp_curl.curl_slist_free_all(r->hdrs);
	free(r->url);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	free(r);
	return -1;
}
