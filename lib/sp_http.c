/*
 * sp_http: reads the requests a sandbox sends through the gateway, one head
 * at a time, with nodejs/http-parser.  The parser is paused at the end of
 * each head and of each message, so that the caller can rewrite the head and
 * forward body bytes untouched; the head's last byte ('\n') is left unread
 * by the parser when it pauses there, and is given back to it from a
 * constant before the body.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sp_net.h"

enum { ST_HEAD, ST_BODY, ST_UPGRADE, ST_BROKEN };

static int
add_text(struct sp_http *h, const char *at, size_t n)
{
	char *t;
	size_t size;

	if (h->len + n > SP_HTTP_HEAD_MAX) {
		snprintf(h->err, sizeof h->err, "request head over %d bytes",
		    SP_HTTP_HEAD_MAX);
		return -1;
	}
	if (h->len + n > h->size) {
		size = h->size == 0 ? 1024 : h->size;
		while (size < h->len + n)
			size *= 2;
		if ((t = realloc(h->text, size)) == NULL) {
			snprintf(h->err, sizeof h->err, "out of memory");
			return -1;
		}
		h->text = t;
		h->size = size;
	}
	memcpy(h->text + h->len, at, n);
	h->len += n;
	return 0;
}

static struct sp_http *
of(http_parser *p)
{
	return p->data;
}

static int
on_url(http_parser *p, const char *at, size_t n)
{
	struct sp_http *h = of(p);

	if (h->url_len + n > SP_HTTP_URL_MAX) {
		snprintf(h->err, sizeof h->err, "url over %d bytes",
		    SP_HTTP_URL_MAX);
		return -1;
	}
	h->url_len += n;
	return add_text(h, at, n);
}

static int
on_field(http_parser *p, const char *at, size_t n)
{
	struct sp_http *h = of(p);

	/* A name arrives in pieces; a new one begins after a value. */
	if (h->nh == 0 || h->in_value) {
		if (h->nh == SP_HTTP_HEADERS_MAX) {
			snprintf(h->err, sizeof h->err, "over %d headers",
			    SP_HTTP_HEADERS_MAX);
			return -1;
		}
		h->h[h->nh].name = h->len;
		h->h[h->nh].name_len = 0;
		h->h[h->nh].value = h->len;
		h->h[h->nh].value_len = 0;
		h->nh++;
		h->in_value = 0;
	}
	h->h[h->nh - 1].name_len += n;
	return add_text(h, at, n);
}

static int
on_value(http_parser *p, const char *at, size_t n)
{
	struct sp_http *h = of(p);

	if (h->nh == 0)
		return -1;
	if (!h->in_value) {
		h->h[h->nh - 1].value = h->len;
		h->in_value = 1;
	}
	h->h[h->nh - 1].value_len += n;
	return add_text(h, at, n);
}

static int
on_headers_complete(http_parser *p)
{
	struct sp_http *h = of(p);

	snprintf(h->method, sizeof h->method, "%s",
	    http_method_str((enum http_method)p->method));
	h->major = p->http_major;
	h->minor = p->http_minor;
	http_parser_pause(p, 1);
	return 0;
}

static int
on_message_complete(http_parser *p)
{
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings settings = {
	.on_url = on_url,
	.on_header_field = on_field,
	.on_header_value = on_value,
	.on_headers_complete = on_headers_complete,
	.on_message_complete = on_message_complete,
};

static void
head_reset(struct sp_http *h)
{
	h->len = h->url_len = 0;
	h->nh = h->in_value = 0;
	h->method[0] = '\0';
}

void
sp_http_init(struct sp_http *h)
{
	memset(h, 0, sizeof *h);
	http_parser_init(&h->p, HTTP_REQUEST);
	h->p.data = h;
	h->state = ST_HEAD;
}

void
sp_http_release(struct sp_http *h)
{
	free(h->text);
	memset(h, 0, sizeof *h);
}

static int
broken(struct sp_http *h, struct sp_err *e)
{
	enum http_errno no = HTTP_PARSER_ERRNO(&h->p);

	h->state = ST_BROKEN;
	if (h->err[0] != '\0')
		return sp_err_set(e, strncmp(h->err, "out of", 6) == 0 ?
		    SP_E_NOMEM : SP_E_TOO_BIG, 0, "%s", h->err);
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "malformed request: %s",
	    http_errno_description(no));
}

/* After a message: the next head, or the end of HTTP. */
static int
message_done(struct sp_http *h)
{
	http_parser_pause(&h->p, 0);
	if (h->p.upgrade) {
		h->state = ST_UPGRADE;
		return SP_HTTP_UPGRADE;
	}
	h->state = ST_HEAD;
	return SP_HTTP_END;
}

int
sp_http_feed(struct sp_http *h, const char *in, size_t n, size_t *used,
    struct sp_err *e)
{
	size_t c;

	*used = 0;
	h->p.data = h;
	switch (h->state) {
	case ST_UPGRADE:
		*used = n;
		return SP_HTTP_UPGRADE;
	case ST_BROKEN:
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "request stream broken");
	case ST_HEAD:
		c = http_parser_execute(&h->p, &settings, in, n);
		if (HTTP_PARSER_ERRNO(&h->p) == HPE_PAUSED) {
			/* Paused on the head's last '\n', not yet taken. */
			if (c >= n || in[c] != '\n')
				return broken(h, e);
			*used = c + 1;
			h->lf_pending = 1;
			h->state = ST_BODY;
			return SP_HTTP_HEAD;
		}
		if (HTTP_PARSER_ERRNO(&h->p) != HPE_OK || c != n)
			return broken(h, e);
		*used = n;
		return SP_HTTP_NEED;
	default:
		break;
	}
	/* ST_BODY: the head, now seen by the caller, is done with. */
	if (h->lf_pending) {
		h->lf_pending = 0;
		head_reset(h);
		http_parser_pause(&h->p, 0);
		c = http_parser_execute(&h->p, &settings, "\n", 1);
		if (HTTP_PARSER_ERRNO(&h->p) == HPE_PAUSED)
			return message_done(h);
		if (HTTP_PARSER_ERRNO(&h->p) != HPE_OK || c != 1)
			return broken(h, e);
	}
	if (n == 0)
		return SP_HTTP_BODY;
	c = http_parser_execute(&h->p, &settings, in, n);
	if (HTTP_PARSER_ERRNO(&h->p) == HPE_PAUSED) {
		*used = c;
		return message_done(h) == SP_HTTP_UPGRADE ? SP_HTTP_UPGRADE :
		    SP_HTTP_END;
	}
	if (HTTP_PARSER_ERRNO(&h->p) != HPE_OK || c != n)
		return broken(h, e);
	*used = n;
	return SP_HTTP_BODY;
}

const char *
sp_http_url(const struct sp_http *h, size_t *len)
{
	*len = h->url_len;
	return h->text != NULL ? h->text : "";
}

int
sp_http_header(const struct sp_http *h, int i, const char **name,
    size_t *nlen, const char **value, size_t *vlen)
{
	if (i < 0 || i >= h->nh)
		return -1;
	*name = h->text + h->h[i].name;
	*nlen = h->h[i].name_len;
	*value = h->text + h->h[i].value;
	*vlen = h->h[i].value_len;
	return 0;
}

int
sp_http_find(const struct sp_http *h, const char *name)
{
	size_t n = strlen(name);
	int i;

	for (i = 0; i < h->nh; i++)
		if (h->h[i].name_len == n &&
		    strncasecmp(h->text + h->h[i].name, name, n) == 0)
			return i;
	return -1;
}
