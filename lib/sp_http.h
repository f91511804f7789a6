/*
 * sp_http.h: the requests a sandbox's HTTP client sends through the network
 * gateway, read one head at a time so that the gateway can check where each
 * goes and add a credential (design.md).  Bodies are never buffered: their
 * bytes are handed back to be forwarded as they came.  nodejs/http-parser
 * does the parsing.  Included from sp_net.h.
 */
#ifndef SP_HTTP_H
#define SP_HTTP_H

#include <stddef.h>
#include <http_parser.h>

struct sp_err;

#define SP_HTTP_HEAD_MAX	(64 * 1024)	/* a request's head, bytes */
#define SP_HTTP_URL_MAX		8192
#define SP_HTTP_HEADERS_MAX	128

enum sp_http_event {
	SP_HTTP_NEED,		/* all of the input taken; more is needed */
	SP_HTTP_HEAD,		/* a head is whole (h->method, url, headers) */
	SP_HTTP_BODY,		/* in[0..used) is body: forward it as it is */
	SP_HTTP_END,		/* in[0..used) ends the request's body */
	SP_HTTP_UPGRADE		/* the request was CONNECT or an Upgrade: what
				   follows is no more HTTP */
};

struct sp_http_header {
	size_t name, name_len, value, value_len;	/* offsets into text */
};
struct sp_http {
	http_parser p;
	int state, lf_pending, in_value;
	/* The head of the request being read. */
	char method[24];
	int major, minor;
	char *text;		/* url, then header names and values */
	size_t len, size;	/* bytes of text used; of the head read */
	size_t url_len;
	struct sp_http_header h[SP_HTTP_HEADERS_MAX];
	int nh;
	char err[128];
};

void sp_http_init(struct sp_http *h);
void sp_http_release(struct sp_http *h);
/*
 * Takes in[0..n): the event and in *used how many bytes it took.  Bytes of
 * a head are kept in h (not to be forwarded); bytes of a body are the
 * caller's to forward.  After SP_HTTP_HEAD, the head is in h until the
 * next call; after SP_HTTP_UPGRADE every later byte is the tunnel's.  -1
 * and bad-input on a malformed request, too-big on a head over the limits.
 */
int sp_http_feed(struct sp_http *h, const char *in, size_t n, size_t *used,
    struct sp_err *e);
/* The url of the head; header i's name and value (not NUL-terminated). */
const char *sp_http_url(const struct sp_http *h, size_t *len);
int sp_http_header(const struct sp_http *h, int i, const char **name,
    size_t *nlen, const char **value, size_t *vlen);
/* The index of the first header called name (any case), or -1. */
int sp_http_find(const struct sp_http *h, const char *name);

#endif
