/*
 * sp_store_s3: the s3:// backend of the object store (sp_store.c).  libcurl
 * signs each request (AWS SigV4); we send the SHA-256 of every body.  S3's
 * XML answers (lists, errors, multipart uploads) are read with libxml2
 * (sp_xml.h), within the bound of the answer's size.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sp_storage.h"
#include "sp_store_int.h"
#include "sp_xml.h"

/* ---- S3's XML answers ---- */

/* The text of the first element called name in an answer; -1 when there is
 * none, it does not fit out, or the answer is not XML. */
static int
xml_leaf(const char *p, size_t n, const char *name, char *out, size_t outn)
{
	xmlDocPtr doc;
	xmlNodePtr root, el;
	struct sp_err ignored;
	int rc = -1;

	if (p == NULL || sp_xml_read(p, n, "S3's answer", SP_E_IO, &doc, &root,
	    &ignored) == -1)
		return -1;
	if ((el = sp_xml_find(root, name)) != NULL)
		rc = sp_xml_text(el, out, outn);
	sp_xml_free(doc);
	return rc;
}

/* Whether the answer is XML whose root element is name. */
static int
xml_root(const char *p, size_t n, const char *name)
{
	xmlDocPtr doc;
	xmlNodePtr root;
	struct sp_err ignored;
	int is;

	if (p == NULL || sp_xml_read(p, n, "S3's answer", SP_E_IO, &doc, &root,
	    &ignored) == -1)
		return 0;
	is = sp_xml_is(root, name);
	sp_xml_free(doc);
	return is;
}

/* ---- s3:// requests ---- */

struct xfer {
	CURL *h;
	const char *method;		/* GET HEAD PUT POST DELETE */
	const char *url;
	const unsigned char *body;	/* PUT and POST */
	size_t body_len, body_off;
	const char *content_type;	/* or NULL */
	int fd;				/* a 2xx body goes there, or -1 */
	uint64_t limit;			/* at most that much to fd; 0: any */
	size_t max;			/* else it is kept, up to max bytes */
	/* the answer */
	long code;
	int tries;
	uint64_t written;		/* to fd, over all the tries */
	int werr;			/* errno of a failed write to fd */
	char *buf;
	size_t len, cap;
	int over;			/* the body was longer than max */
	char etag[ETAG_MAX];		/* of this answer */
	char want[ETAG_MAX];		/* of the object a resumed get reads */
	curl_off_t length;		/* Content-Length */
	char cerr[CURL_ERROR_SIZE];
};

static void
xfer_release(struct xfer *x)
{
	free(x->buf);
	x->buf = NULL;
}

static size_t
on_body(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb, keep;
	long code = 0;
	char *nb;

	sp_curl.curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
	if (x->fd >= 0 && code / 100 == 2) {
		if (x->limit > 0 && x->written + n > x->limit) {
			x->werr = EFBIG;
			return 0;
		}
		if (sp_write_all(x->fd, p, n) == -1) {
			x->werr = errno;
			return 0;
		}
		x->written += n;
		return n;
	}
	keep = x->max - x->len < n ? x->max - x->len : n;
	if (keep < n)
		x->over = 1;
	if (x->len + keep + 1 > x->cap) {
		size_t cap = x->cap ? x->cap : 4096;

		while (cap < x->len + keep + 1)
			cap *= 2;
		if ((nb = realloc(x->buf, cap)) == NULL)
			return 0;
		x->buf = nb;
		x->cap = cap;
	}
	memcpy(x->buf + x->len, p, keep);
	x->len += keep;
	x->buf[x->len] = '\0';
	return n;
}

static size_t
on_header(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb, i = 5, j;

	if (n >= 5 && memcmp(p, "HTTP/", 5) == 0)
		x->etag[0] = '\0';
	else if (n > 5 && strncasecmp(p, "etag:", 5) == 0) {
		while (i < n && (p[i] == ' ' || p[i] == '\t'))
			i++;
		j = n;
		while (j > i && (p[j - 1] == '\r' || p[j - 1] == '\n' ||
		    p[j - 1] == ' '))
			j--;
		if (j - i < sizeof x->etag) {
			memcpy(x->etag, p + i, j - i);
			x->etag[j - i] = '\0';
		}
	}
	return n;
}

static size_t
on_read(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb;

	if (n > x->body_len - x->body_off)
		n = x->body_len - x->body_off;
	memcpy(p, x->body + x->body_off, n);
	x->body_off += n;
	return n;
}

/* libcurl rewinds an upload when it resends it on a fresh connection. */
static int
on_seek(void *arg, curl_off_t off, int origin)
{
	struct xfer *x = arg;

	if (origin != SEEK_SET || off < 0 || (uint64_t)off > x->body_len)
		return CURL_SEEKFUNC_FAIL;
	x->body_off = (size_t)off;
	return CURL_SEEKFUNC_OK;
}

/* One try of x; the HTTP status in x->code. */
static CURLcode
s3_once(struct sp_store *s, struct xfer *x, const char *sha_hdr)
{
	struct curl_slist *hd = NULL, *t;
	char line[ETAG_MAX + 32];
	CURLcode r = CURLE_OUT_OF_MEMORY;
	CURL *h = s->h;

	sp_curl.curl_easy_reset(h);
	x->h = h;
	x->code = 0;
	x->len = 0;
	x->over = 0;
	x->werr = 0;
	x->body_off = 0;
	x->etag[0] = '\0';
	x->length = -1;
	x->cerr[0] = '\0';
	if ((hd = sp_curl.curl_slist_append(NULL, sha_hdr)) == NULL)
		goto out;
	if (s->token_hdr[0] != '\0') {
		if ((t = sp_curl.curl_slist_append(hd, s->token_hdr)) == NULL)
			goto out;
		hd = t;
	}
	if (x->content_type != NULL) {
		snprintf(line, sizeof line, "Content-Type: %s",
		    x->content_type);
		if ((t = sp_curl.curl_slist_append(hd, line)) == NULL)
			goto out;
		hd = t;
	}
	/* A get cut short goes on where it stopped, from the same object. */
	if (x->written > 0) {
		sp_curl.curl_easy_setopt(h, CURLOPT_RESUME_FROM_LARGE,
		    (curl_off_t)x->written);
		if (x->want[0] != '\0') {
			snprintf(line, sizeof line, "If-Match: %s", x->want);
			if ((t = sp_curl.curl_slist_append(hd, line)) == NULL)
				goto out;
			hd = t;
		}
	}
	sp_curl.curl_easy_setopt(h, CURLOPT_URL, x->url);
	sp_curl.curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
	sp_curl.curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	sp_curl.curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	sp_curl.curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->cerr);
	sp_curl.curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, s->timeout_s < 10 ?
	    s->timeout_s : 10L);
	sp_curl.curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	sp_curl.curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, s->timeout_s);
	sp_curl.curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	sp_curl.curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	sp_curl.curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	sp_curl.curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	sp_curl.curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	if (s->access_key[0] != '\0') {
		sp_curl.curl_easy_setopt(h, CURLOPT_AWS_SIGV4, s->sigv4);
		sp_curl.curl_easy_setopt(h, CURLOPT_USERNAME, s->access_key);
		sp_curl.curl_easy_setopt(h, CURLOPT_PASSWORD, s->secret_key);
	}
	if (strcmp(x->method, "HEAD") == 0)
		sp_curl.curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	else if (strcmp(x->method, "PUT") == 0) {
		sp_curl.curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		sp_curl.curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		sp_curl.curl_easy_setopt(h, CURLOPT_READDATA, x);
		sp_curl.curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
		sp_curl.curl_easy_setopt(h, CURLOPT_SEEKDATA, x);
		sp_curl.curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
		    (curl_off_t)x->body_len);
	} else if (strcmp(x->method, "POST") == 0) {
		sp_curl.curl_easy_setopt(h, CURLOPT_POST, 1L);
		sp_curl.curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
		    (curl_off_t)x->body_len);
		sp_curl.curl_easy_setopt(h, CURLOPT_POSTFIELDS,
		    x->body != NULL ? (const char *)x->body : "");
	} else if (strcmp(x->method, "DELETE") == 0)
		sp_curl.curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
	r = sp_curl.curl_easy_perform(h);
	sp_curl.curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &x->code);
	sp_curl.curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &x->length);
out:
	sp_curl.curl_slist_free_all(hd);
	return r;
}

/* Failures a new try may cure: the network, the server's timeouts. */
static int
curl_transient(CURLcode r)
{
	switch (r) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return 1;
	default:
		return 0;
	}
}

static int
http_transient(long code)
{
	return code >= 500 || code == 429;
}

static void
backoff(struct sp_store *s, int try)
{
	long ms = s->retry_ms;
	struct timespec ts;

	while (try-- > 0 && ms < BACKOFF_CAP_MS)
		ms *= 2;
	if (ms > BACKOFF_CAP_MS)
		ms = BACKOFF_CAP_MS;
	/* Half of it, and up to as much again at random: clients that failed
	 * together do not all come back together. */
	if (ms > 1)
		ms = ms / 2 + (long)randombytes_uniform((uint32_t)(ms / 2 + 1));
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* The error an HTTP answer means (with S3's code and message). */
static int
http_err(const struct xfer *x, const char *what, const char *key,
    struct sp_err *e)
{
	char code[64] = "", msg[256] = "", b1[64], b2[256], tries[32] = "";
	enum sp_code tok = SP_E_IO;

	if (x->buf != NULL) {
		if (xml_leaf(x->buf, x->len, "Code", code, sizeof code) == -1)
			code[0] = '\0';
		if (xml_leaf(x->buf, x->len, "Message", msg, sizeof msg) == -1)
			msg[0] = '\0';
	}
	if (x->code == 404)
		tok = SP_E_NOT_FOUND;
	else if (x->code == 401 || x->code == 403)
		tok = SP_E_DENIED;
	if (x->tries > 1)
		snprintf(tries, sizeof tries, " after %d tries", x->tries);
	return sp_err_set(e, tok, http_transient(x->code),
	    "%s %s: HTTP %ld%s%s%s%s%s%s", what, key, x->code,
	    code[0] ? " " : "", store_shown(code, b1, sizeof b1),
	    msg[0] ? " (" : "", msg[0] ? store_shown(msg, b2, sizeof b2) : "",
	    msg[0] ? ")" : "", tries);
}

/* Runs x until it has an answer that is not transient, at most
 * 1 + SP_STORE_RETRIES times.  0 with any HTTP status in x->code (a
 * transient one when the tries ran out); -1 when it got no answer. */
static int
s3_call(struct sp_store *s, struct xfer *x, const char *what,
    const char *key, struct sp_err *e)
{
	unsigned char sum[crypto_hash_sha256_BYTES];
	char hex[2 * sizeof sum + 1], sha_hdr[sizeof hex + 32];
	CURLcode r;

	crypto_hash_sha256(sum, x->body != NULL ? x->body : (const unsigned
	    char *)"", x->body_len);
	sodium_bin2hex(hex, sizeof hex, sum, sizeof sum);
	snprintf(sha_hdr, sizeof sha_hdr, "x-amz-content-sha256: %s", hex);
	for (x->tries = 1;; x->tries++) {
		r = s3_once(s, x, sha_hdr);
		if (x->werr == EFBIG)
			return sp_err_set(e, SP_E_TOO_BIG, 0, "%s %s: longer than %llu "
			    "bytes", what, key, (unsigned long long)x->limit);
		if (x->werr != 0) {
			errno = x->werr;
			return sp_err_sys(e, SP_E_IO, "%s %s: write", what, key);
		}
		/* The object the first bytes came from is the one to finish. */
		if (x->want[0] == '\0' && x->written > 0)
			snprintf(x->want, sizeof x->want, "%s", x->etag);
		if (r == CURLE_OK && !http_transient(x->code))
			return 0;
		if (r != CURLE_OK && !curl_transient(r))
			break;
		if (x->tries > SP_STORE_RETRIES)
			break;
		/* What a get wrote stays written; the next try resumes. */
		backoff(s, x->tries - 1);
	}
	if (r == CURLE_OK)
		return 0;
	return sp_err_set(e, SP_E_IO, curl_transient(r), "%s %s: %s (%d tr%s)",
	    what, key, x->cerr[0] ? x->cerr : sp_curl.curl_easy_strerror(r), x->tries,
	    x->tries == 1 ? "y" : "ies");
}

/* base + URI-encoded name (every byte but A-Za-z0-9-._~ and '/'), once: the
 * canonical form SigV4 signs for S3. */
static int
url_enc(char *out, size_t n, size_t *len, const char *s, int keep_slash)
{
	static const char hexd[] = "0123456789ABCDEF";
	const unsigned char *p;
	size_t o = *len;

	for (p = (const unsigned char *)s; *p != '\0'; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' ||
		    *p == '_' || *p == '~' || (keep_slash && *p == '/')) {
			if (o + 1 >= n)
				return -1;
			out[o++] = (char)*p;
		} else {
			if (o + 3 >= n)
				return -1;
			out[o++] = '%';
			out[o++] = hexd[*p >> 4];
			out[o++] = hexd[*p & 15];
		}
	}
	out[o] = '\0';
	*len = o;
	return 0;
}

static int
url_add(char *out, size_t n, size_t *len, const char *s)
{
	size_t l = strlen(s);

	if (*len + l + 1 > n)
		return -1;
	memcpy(out + *len, s, l + 1);
	*len += l;
	return 0;
}

/* The URL of key, with query (already in canonical order) or NULL. */
static int
s3_url(struct sp_store *s, const char *key, const char *query, char *out,
    size_t n, struct sp_err *e)
{
	size_t len = 0;

	if (url_add(out, n, &len, s->base) == -1 ||
	    url_enc(out, n, &len, s->prefix, 1) == -1 ||
	    url_enc(out, n, &len, key, 1) == -1 ||
	    (query != NULL && (url_add(out, n, &len, "?") == -1 ||
	    url_add(out, n, &len, query) == -1)))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "URL of %s too long", key);
	return 0;
}

/* One request of method on key (with query), its answer in x: -1 unless
 * the answer is 2xx, or 404 with gone_ok; S3's error is then said in e. */
static int
s3_simple(struct sp_store *s, const char *method, const char *key,
    const char *query, int gone_ok, struct xfer *x, struct sp_err *e)
{
	const char *what = method[0] == 'H' ? "head" : method[0] == 'D' ?
	    "delete" : method[0] == 'G' ? "get" : "put";
	char url[URL_MAX];

	if (s3_url(s, key, query, url, sizeof url, e) == -1)
		return -1;
	x->method = method;
	x->url = url;
	if (s3_call(s, x, what, key, e) == -1)
		return -1;
	if (x->code / 100 != 2 && !(gone_ok && x->code == 404))
		return http_err(x, what, key, e);
	return 0;
}

int
store_s3_head(struct sp_store *s, const char *key, uint64_t *size, struct sp_err *e)
{
	struct xfer x = { .fd = -1, .max = ERRBODY_MAX };
	int rc = -1;

	if (s3_simple(s, "HEAD", key, NULL, 0, &x, e) == -1)
		goto out;
	if (x.length < 0) {
		sp_err_set(e, SP_E_IO, 0, "head %s: no Content-Length", key);
		goto out;
	}
	*size = (uint64_t)x.length;
	rc = 0;
out:
	xfer_release(&x);
	return rc;
}

int
store_s3_get(struct sp_store *s, const char *key, int fd, uint64_t *bytes,
    struct sp_err *e)
{
	struct xfer x = { .fd = fd, .max = ERRBODY_MAX, .limit = s->get_max };
	int rc;

	rc = s3_simple(s, "GET", key, NULL, 0, &x, e);
	*bytes = x.written;
	xfer_release(&x);
	return rc;
}

int
store_s3_delete(struct sp_store *s, const char *key, struct sp_err *e)
{
	struct xfer x = { .fd = -1, .max = ERRBODY_MAX };
	int rc;

	rc = s3_simple(s, "DELETE", key, NULL, 1, &x, e);
	xfer_release(&x);
	return rc;
}

/* One PUT of a body in memory. */
static int
s3_put_once(struct sp_store *s, const char *key, const unsigned char *buf,
    size_t len, struct sp_err *e)
{
	struct xfer x = { .fd = -1, .max = ERRBODY_MAX, .body = buf,
	    .body_len = len };
	int rc;

	rc = s3_simple(s, "PUT", key, NULL, 0, &x, e);
	xfer_release(&x);
	return rc;
}

struct upload {
	char id[1024];			/* UploadId, URI-encoded */
	char (*etags)[ETAG_MAX];
	int parts;
};

static int
mp_start(struct sp_store *s, const char *key, struct upload *u,
    struct sp_err *e)
{
	struct xfer x = { .fd = -1, .max = SMALL_MAX,
	    .content_type = "application/octet-stream" };
	char url[URL_MAX], id[sizeof u->id / 3];
	size_t len = 0;
	int rc = -1;

	if (s3_url(s, key, "uploads=", url, sizeof url, e) == -1)
		return -1;
	x.method = "POST";
	x.url = url;
	if (s3_call(s, &x, "put", key, e) == -1)
		goto out;
	if (x.code / 100 != 2) {
		http_err(&x, "put", key, e);
		goto out;
	}
	if (x.over || xml_leaf(x.buf, x.len, "UploadId", id, sizeof id) == -1 ||
	    id[0] == '\0' || url_enc(u->id, sizeof u->id, &len, id, 0) == -1) {
		sp_err_set(e, SP_E_IO, 0, "put %s: no UploadId in the answer to "
		    "starting a multipart upload", key);
		goto out;
	}
	rc = 0;
out:
	xfer_release(&x);
	return rc;
}

static int
mp_part(struct sp_store *s, const char *key, struct upload *u,
    const unsigned char *buf, size_t len, struct sp_err *e)
{
	struct xfer x = { .fd = -1, .max = ERRBODY_MAX, .body = buf,
	    .body_len = len };
	char url[URL_MAX], query[sizeof u->id + 64];
	char (*etags)[ETAG_MAX];
	const char *p;
	int rc = -1;

	if (u->parts == PARTS_MAX)
		return sp_err_set(e, SP_E_IO, 0, "put %s: over %d parts of %zu "
		    "bytes (SPACE_S3_PART_MIB)", key, PARTS_MAX, s->part_size);
	snprintf(query, sizeof query, "partNumber=%d&uploadId=%s",
	    u->parts + 1, u->id);
	if (s3_url(s, key, query, url, sizeof url, e) == -1)
		return -1;
	if ((etags = realloc(u->etags, (size_t)(u->parts + 1) *
	    sizeof *etags)) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "put %s: no memory", key);
	u->etags = etags;
	x.method = "PUT";
	x.url = url;
	if (s3_call(s, &x, "put", key, e) == -1)
		goto out;
	if (x.code / 100 != 2) {
		http_err(&x, "put", key, e);
		goto out;
	}
	/* It goes back in the XML that completes the upload. */
	for (p = x.etag; *p > ' ' && *p < 0x7f && *p != '<' && *p != '&'; p++)
		;
	if (x.etag[0] == '\0' || *p != '\0') {
		sp_err_set(e, SP_E_IO, 0, "put %s: part %d has no usable ETag",
		    key, u->parts + 1);
		goto out;
	}
	memcpy(etags[u->parts++], x.etag, sizeof x.etag);
	rc = 0;
out:
	xfer_release(&x);
	return rc;
}

static int
mp_complete(struct sp_store *s, const char *key, struct upload *u,
    uint64_t total, struct sp_err *e)
{
	struct xfer x = { .fd = -1, .max = SMALL_MAX,
	    .content_type = "application/xml" };
	char url[URL_MAX], query[sizeof u->id + 16];
	size_t cap = 128 + (size_t)u->parts * (64 + ETAG_MAX), len;
	uint64_t size;
	char *xml;
	int i, round, retried = 0, rc = -1;

	snprintf(query, sizeof query, "uploadId=%s", u->id);
	if (s3_url(s, key, query, url, sizeof url, e) == -1)
		return -1;
	if ((xml = malloc(cap)) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "put %s: no memory", key);
	len = (size_t)snprintf(xml, cap, "<CompleteMultipartUpload>");
	for (i = 0; i < u->parts; i++)
		len += (size_t)snprintf(xml + len, cap - len, "<Part>"
		    "<PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", i + 1,
		    u->etags[i]);
	len += (size_t)snprintf(xml + len, cap - len,
	    "</CompleteMultipartUpload>");
	x.method = "POST";
	x.url = url;
	x.body = (unsigned char *)xml;
	x.body_len = len;
	for (round = 1;; round++) {
		if (s3_call(s, &x, "put", key, e) == -1)
			goto out;
		retried |= x.tries > 1 || round > 1;
		/* S3 may say 200 and then fail in the body: a retry helps. */
		if (x.code / 100 != 2 || !xml_root(x.buf, x.len, "Error"))
			break;
		x.code = 500;
		if (round > SP_STORE_RETRIES)
			break;
		backoff(s, round - 1);
	}
	/* An answer lost after the upload completed: the object is there. */
	if (x.code == 404 && retried && store_s3_head(s, key, &size, e) == 0 &&
	    size == total)
		x.code = 200;
	if (x.code / 100 != 2) {
		http_err(&x, "put", key, e);
		goto out;
	}
	rc = 0;
out:
	free(xml);
	xfer_release(&x);
	return rc;
}

/* Best effort: the parts of a failed upload should not linger (billed). */
static void
mp_abort(struct sp_store *s, const char *key, struct upload *u)
{
	struct xfer x = { .fd = -1, .max = ERRBODY_MAX };
	char query[sizeof u->id + 16];
	struct sp_err ignored;

	snprintf(query, sizeof query, "uploadId=%s", u->id);
	s3_simple(s, "DELETE", key, query, 1, &x, &ignored);
	xfer_release(&x);
}

int
store_s3_put(struct sp_store *s, const char *key, int fd, uint64_t *bytes,
    struct sp_err *e)
{
	struct upload u = { .etags = NULL, .parts = 0 };
	unsigned char *buf;
	uint64_t total = 0;
	size_t len;
	int started = 0, rc = -1;

	if ((buf = malloc(s->part_size)) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "put %s: no memory for a part "
		    "of %zu bytes", key, s->part_size);
	if (store_fill(fd, buf, s->part_size, &len, "put", key, e) == -1)
		goto out;
	if (len < s->part_size) {
		if (s3_put_once(s, key, buf, len, e) == -1)
			goto out;
		total = len;
	} else {
		if (mp_start(s, key, &u, e) == -1)
			goto out;
		started = 1;
		for (;;) {
			if (mp_part(s, key, &u, buf, len, e) == -1)
				goto out;
			total += len;
			if (len < s->part_size)
				break;
			if (store_fill(fd, buf, s->part_size, &len, "put", key,
			    e) == -1)
				goto out;
			if (len == 0)
				break;
		}
		if (mp_complete(s, key, &u, total, e) == -1)
			goto out;
	}
	if (bytes != NULL)
		*bytes = total;
	rc = 0;
out:
	if (rc == -1 && started)
		mp_abort(s, key, &u);
	free(u.etags);
	free(buf);
	return rc;
}

struct page {
	int truncated;
	char token[TOKEN_MAX];
	int stop;
};

/* One Contents entry of a list page: its key (skipped, like a foreign one,
 * when we cannot take it) and size; -1 when it lacks either. */
static int
page_entry(const xmlNode *c, char *key, size_t kn, uint64_t *size,
    struct sp_err *e)
{
	xmlNodePtr k = sp_xml_child(c, "Key"), z = sp_xml_child(c, "Size");
	char num[24], *endp;

	if (k == NULL || z == NULL)
		return sp_err_set(e, SP_E_IO, 0, "list: an entry without Key or "
		    "Size");
	if (sp_xml_text(k, key, kn) == -1)
		snprintf(key, kn, "/");
	if (sp_xml_text(z, num, sizeof num) == -1 || num[0] < '0' ||
	    num[0] > '9')
		return sp_err_set(e, SP_E_IO, 0, "list: bad Size");
	errno = 0;
	*size = strtoull(num, &endp, 10);
	if (errno != 0 || *endp != '\0')
		return sp_err_set(e, SP_E_IO, 0, "list: bad Size");
	return 0;
}

/* Calls fn for each object of one ListObjectsV2 page. */
static int
s3_page(struct sp_store *s, const char *p, size_t n, struct page *pg,
    int (*fn)(const char *, uint64_t, void *), void *arg, struct sp_err *e)
{
	char key[PREFIX_MAX + SP_STORE_KEY_MAX + 8], flag[8];
	size_t pl = strlen(s->prefix);
	xmlDocPtr doc;
	xmlNodePtr root, c;
	uint64_t size = 0;
	int rc = -1;

	pg->truncated = 0;
	pg->token[0] = '\0';
	if (sp_xml_read(p, n, "list", SP_E_IO, &doc, &root, e) == -1)
		return -1;
	if (!sp_xml_is(root, "ListBucketResult")) {
		sp_err_set(e, SP_E_IO, 0, "list: not a ListBucketResult");
		goto out;
	}
	for (c = root->children; c != NULL; c = c->next) {
		if (sp_xml_is(c, "IsTruncated"))
			pg->truncated = sp_xml_text(c, flag, sizeof flag) == 0 &&
			    strcmp(flag, "true") == 0;
		else if (sp_xml_is(c, "NextContinuationToken")) {
			if (sp_xml_text(c, pg->token, sizeof pg->token) == -1) {
				sp_err_set(e, SP_E_IO, 0, "list: bad "
				    "continuation token");
				goto out;
			}
		}
	}
	for (c = root->children; c != NULL; c = c->next) {
		if (!sp_xml_is(c, "Contents"))
			continue;
		if (page_entry(c, key, sizeof key, &size, e) == -1)
			goto out;
		if (strncmp(key, s->prefix, pl) != 0 ||
		    !store_key_valid(key + pl, SP_STORE_KEY_MAX))
			continue;	/* not one of ours */
		if (fn(key + pl, size, arg) != 0) {
			pg->stop = 1;
			rc = 0;
			goto out;
		}
	}
	if (pg->truncated && pg->token[0] == '\0') {
		sp_err_set(e, SP_E_IO, 0, "list: truncated without a "
		    "continuation token");
		goto out;
	}
	rc = 0;
out:
	sp_xml_free(doc);
	return rc;
}

/* The URL of a list page, its query in SigV4's canonical order: sorted,
 * every value encoded. */
static int
list_url(struct sp_store *s, const char *prefix, const char *token,
    char *url, size_t n)
{
	char fixed[64];
	size_t len = 0;

	if (url_add(url, n, &len, s->base) == -1)
		return -1;
	len = s->list_len;
	snprintf(fixed, sizeof fixed, "list-type=2&max-keys=%d&prefix=",
	    s->list_max);
	if (url_add(url, n, &len, "?") == -1 || (token[0] != '\0' &&
	    (url_add(url, n, &len, "continuation-token=") == -1 ||
	    url_enc(url, n, &len, token, 0) == -1 ||
	    url_add(url, n, &len, "&") == -1)))
		return -1;
	if (url_add(url, n, &len, fixed) == -1 ||
	    url_enc(url, n, &len, s->prefix, 0) == -1 ||
	    url_enc(url, n, &len, prefix, 0) == -1)
		return -1;
	return 0;
}

int
store_s3_list(struct sp_store *s, const char *prefix,
    int (*fn)(const char *, uint64_t, void *), void *arg, struct sp_err *e)
{
	struct xfer x = { .fd = -1, .max = PAGE_MAX, .method = "GET" };
	char url[URL_MAX];
	struct page *pg;
	int rc = -1;

	if ((pg = calloc(1, sizeof *pg)) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "list: no memory");
	x.url = url;
	do {
		if (list_url(s, prefix, pg->token, url, sizeof url) == -1) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "list %s: URL too long",
			    prefix);
			goto out;
		}
		if (s3_call(s, &x, "list", prefix, e) == -1)
			goto out;
		if (x.code / 100 != 2) {
			http_err(&x, "list", prefix, e);
			goto out;
		}
		if (x.over) {
			sp_err_set(e, SP_E_IO, 0, "list %s: a page over %d bytes",
			    prefix, PAGE_MAX);
			goto out;
		}
		if (s3_page(s, x.buf != NULL ? x.buf : "", x.len, pg, fn, arg,
		    e) == -1)
			goto out;
	} while (pg->truncated && !pg->stop);
	rc = 0;
out:
	xfer_release(&x);
	free(pg);
	return rc;
}

/* ---- opening ---- */

static const char *
env(const char *name)
{
	const char *v = getenv(name);

	return v != NULL && v[0] != '\0' ? v : NULL;
}

static int
env_long(const char *name, long dflt, long min, long max, long *out,
    struct sp_err *e)
{
	const char *v = env(name);
	char *end;

	if (v == NULL) {
		*out = dflt;
		return 0;
	}
	errno = 0;
	*out = strtol(v, &end, 10);
	if (errno != 0 || *end != '\0' || *out < min || *out > max)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s must be a number "
		    "from %ld to %ld", name, min, max);
	return 0;
}

/* A value fit for an HTTP header: printable ASCII, bounded. */
static int
header_safe(const char *v, size_t max)
{
	size_t n = 0;

	for (; *v != '\0'; v++)
		if (++n >= max || *v < ' ' || *v >= 0x7f)
			return 0;
	return 1;
}

/* A part of u (libcurl's URL API) into out; an absent part is "". */
static int
url_part(CURLU *u, CURLUPart what, char *out, size_t n)
{
	char *v = NULL;
	CURLUcode rc;
	size_t l;

	out[0] = '\0';
	rc = sp_curl.curl_url_get(u, what, &v, 0);
	if (rc == CURLUE_NO_SCHEME || rc == CURLUE_NO_HOST ||
	    rc == CURLUE_NO_PORT || rc == CURLUE_NO_USER ||
	    rc == CURLUE_NO_PASSWORD || rc == CURLUE_NO_OPTIONS ||
	    rc == CURLUE_NO_QUERY || rc == CURLUE_NO_FRAGMENT)
		return 0;
	if (rc != CURLUE_OK)
		return -1;
	l = strlen(v);
	if (l < n)
		memcpy(out, v, l + 1);
	sp_curl.curl_free(v);
	return l < n ? 0 : -1;
}

/*
 * SPACE_S3_ENDPOINT, "http(s)://HOST[:PORT]" (a path of "/" at most, no user,
 * query or fragment), parsed by libcurl's URL API as libcurl will use it:
 * out gets "scheme://host[:port]" and *scheme_len how long "scheme://" is.
 * The host is a DNS name, an IPv4 address or a bracketed IPv6 one.
 */
static int
endpoint_parse(const char *ep, char *out, size_t n, size_t *scheme_len,
    struct sp_err *e)
{
	char scheme[8], host[256], port[8], path[8], rest[8];
	static const CURLUPart none[] = { CURLUPART_USER, CURLUPART_PASSWORD,
	    CURLUPART_OPTIONS, CURLUPART_QUERY, CURLUPART_FRAGMENT };
	CURLU *u = NULL;
	size_t i;
	int ok = 0;

	if (sp_curl_load(e) == -1)
		return -1;
	if ((u = sp_curl.curl_url()) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "curl_url");
	if (sp_curl.curl_url_set(u, CURLUPART_URL, ep, 0) != CURLUE_OK ||
	    url_part(u, CURLUPART_SCHEME, scheme, sizeof scheme) == -1 ||
	    url_part(u, CURLUPART_HOST, host, sizeof host) == -1 ||
	    url_part(u, CURLUPART_PORT, port, sizeof port) == -1 ||
	    url_part(u, CURLUPART_PATH, path, sizeof path) == -1)
		goto out;
	for (i = 0; i < sizeof none / sizeof none[0]; i++)
		if (url_part(u, none[i], rest, sizeof rest) == -1 ||
		    rest[0] != '\0')
			goto out;
	if ((strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) ||
	    host[0] == '\0' || (path[0] != '\0' && strcmp(path, "/") != 0))
		goto out;
	/* What goes into URLs and the signed Host header as it is. */
	if (host[0] == '[' ? strspn(host + 1, "0123456789abcdefABCDEF:.") !=
	    strlen(host) - 2 || host[strlen(host) - 1] != ']' :
	    strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789.-") != strlen(host))
		goto out;
	if ((size_t)snprintf(out, n, "%s://%s%s%s", scheme, host,
	    port[0] != '\0' ? ":" : "", port) >= n)
		goto out;
	*scheme_len = strlen(scheme) + 3;
	ok = 1;
out:
	sp_curl.curl_url_cleanup(u);
	if (!ok)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_S3_ENDPOINT must "
		    "be http(s)://HOST[:PORT]");
	return 0;
}

static int
bucket_valid(const char *b, size_t n)
{
	size_t i;

	if (n < 3 || n > 63)
		return 0;
	for (i = 0; i < n; i++)
		if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' &&
		    b[i] <= '9') || b[i] == '.' || b[i] == '-'))
			return 0;
	return b[0] != '.' && b[0] != '-' && b[n - 1] != '.' && b[n - 1] != '-';
}

int
store_s3_open(struct sp_store *s, const char *rest, struct sp_err *e)
{
	char ep[512], bucket[64], defep[128];
	const char *slash, *region, *v, *mode, *host;
	size_t bl, pl, scheme = 0;
	long part_mib, list_max;
	int virt;

	slash = strchr(rest, '/');
	bl = slash != NULL ? (size_t)(slash - rest) : strlen(rest);
	if (!bucket_valid(rest, bl))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "bad bucket in the store "
		    "URL (s3://BUCKET[/PREFIX])");
	memcpy(bucket, rest, bl);
	bucket[bl] = '\0';
	if (slash != NULL && slash[1] != '\0') {
		pl = strlen(slash + 1);
		while (pl > 0 && slash[pl] == '/')
			pl--;
		if (pl > PREFIX_MAX)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "store prefix "
			    "over %d bytes", PREFIX_MAX);
		memcpy(s->prefix, slash + 1, pl);
		s->prefix[pl] = '\0';
		if (!store_key_valid(s->prefix, PREFIX_MAX))
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "bad prefix in "
			    "the store URL");
		s->prefix[pl] = '/';
		s->prefix[pl + 1] = '\0';
	}
	if ((region = env("AWS_REGION")) == NULL &&
	    (region = env("AWS_DEFAULT_REGION")) == NULL)
		region = "us-east-1";
	if (strlen(region) > 32 || strspn(region,
	    "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(region))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "bad AWS_REGION");
	snprintf(s->sigv4, sizeof s->sigv4, "aws:amz:%s:s3", region);
	if ((v = env("SPACE_S3_ENDPOINT")) == NULL)
		snprintf(defep, sizeof defep, "https://s3.%s.amazonaws.com",
		    region);
	if (endpoint_parse(v != NULL ? v : defep, ep, sizeof ep, &scheme,
	    e) == -1)
		return -1;
	mode = env("SPACE_S3_ADDRESSING");
	if (mode == NULL)
		virt = v == NULL;
	else if (strcmp(mode, "path") == 0 || strcmp(mode, "virtual") == 0)
		virt = mode[0] == 'v';
	else
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_S3_ADDRESSING must "
		    "be path or virtual");
	host = ep + scheme;
	if (virt && (strchr(bucket, '.') != NULL || host[0] == '[' ||
	    strspn(host, "0123456789.:") == strlen(host)))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "virtual-host addressing "
		    "needs a host name and a bucket without dots");
	if (virt)
		snprintf(s->base, sizeof s->base, "%.*s%s.%s/", (int)scheme, ep,
		    bucket, host);
	else
		snprintf(s->base, sizeof s->base, "%s/%s/", ep, bucket);
	/* The bucket itself: "/bucket" path-style, "/" virtual. */
	s->list_len = strlen(s->base) - (virt ? 0 : 1);
	if ((v = env("AWS_ACCESS_KEY_ID")) != NULL) {
		if (!header_safe(v, sizeof s->access_key) ||
		    strchr(v, ':') != NULL)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "bad "
			    "AWS_ACCESS_KEY_ID");
		snprintf(s->access_key, sizeof s->access_key, "%s", v);
		if ((v = env("AWS_SECRET_ACCESS_KEY")) == NULL ||
		    !header_safe(v, sizeof s->secret_key))
			return sp_err_set(e, SP_E_BAD_INPUT, 0,
			    "AWS_ACCESS_KEY_ID without a valid "
			    "AWS_SECRET_ACCESS_KEY");
		snprintf(s->secret_key, sizeof s->secret_key, "%s", v);
	}
	if ((v = env("AWS_SESSION_TOKEN")) != NULL) {
		if (!header_safe(v, sizeof s->token_hdr - 32))
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "bad "
			    "AWS_SESSION_TOKEN");
		snprintf(s->token_hdr, sizeof s->token_hdr,
		    "x-amz-security-token: %s", v);
	}
	if (env_long("SPACE_S3_PART_MIB", 8, 5, 1024, &part_mib, e) == -1 ||
	    env_long("SPACE_S3_RETRY_MS", 100, 0, 60000, &s->retry_ms,
	    e) == -1 ||
	    env_long("SPACE_S3_TIMEOUT_S", 30, 1, 3600, &s->timeout_s,
	    e) == -1 ||
	    env_long("SPACE_S3_LIST_MAX", 1000, 1, 1000, &list_max, e) == -1)
		return -1;
	s->part_size = (size_t)part_mib << 20;
	s->list_max = (int)list_max;
	if (sodium_init() < 0)
		return sp_err_set(e, SP_E_INTERNAL, 0, "sodium_init failed");
	if (sp_curl_load(e) == -1)
		return -1;
	if ((s->h = sp_curl.curl_easy_init()) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "curl_easy_init failed");
	return 0;
}
