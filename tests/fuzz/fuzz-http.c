/*
 * fuzz-http: libFuzzer target for the gateway's reading of a sandbox's HTTP
 * requests (lib/sp_http.c over http-parser), fed in chunks whose sizes the
 * input's first byte seeds, as a client's writes arrive.  Each call takes
 * no more than it was given, a head stays within its limits, every header
 * lies inside the head's text, and the reader always moves on or stops.
 * Built and run by `make fuzz`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sp_net.h"

static uint32_t
next_rand(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static void
check_head(const struct sp_http *h)
{
	const char *name, *value, *url;
	size_t nl, vl, ul;
	int i;

	if (h->nh < 0 || h->nh > SP_HTTP_HEADERS_MAX || h->size >
	    SP_HTTP_HEAD_MAX || h->url_len > SP_HTTP_URL_MAX)
		abort();
	url = sp_http_url(h, &ul);
	if (ul > 0 && (url < h->text || url + ul > h->text + h->len))
		abort();
	for (i = 0; i < h->nh; i++) {
		if (sp_http_header(h, i, &name, &nl, &value, &vl) == -1)
			abort();
		if (name + nl > h->text + h->len ||
		    value + vl > h->text + h->len)
			abort();
	}
	if (sp_http_header(h, h->nh, &name, &nl, &value, &vl) != -1)
		abort();
	(void)sp_http_find(h, "host");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sp_http h;
	struct sp_err e;
	const char *in;
	size_t off = 0, k, used;
	uint32_t seed;
	int ev, idle = 0;

	if (size < 1)
		return 0;
	seed = 0x9e3779b9u ^ data[0];
	in = (const char *)data + 1;
	size--;
	sp_http_init(&h);
	while (off < size || (off == size && h.lf_pending && idle < 2)) {
		k = 1 + next_rand(&seed) % 4096;
		if (k > size - off)
			k = size - off;
		ev = sp_http_feed(&h, in + off, k, &used, &e);
		if (ev == -1) {
			if (e.code != SP_E_BAD_INPUT && e.code != SP_E_TOO_BIG &&
			    e.code != SP_E_NOMEM)
				abort();
			break;
		}
		if (used > k)
			abort();
		if (ev == SP_HTTP_HEAD)
			check_head(&h);
		else if (ev == SP_HTTP_NEED && used != k)
			abort();
		if (ev == SP_HTTP_UPGRADE)
			break;
		/* A call that takes nothing must change what the next does. */
		idle = used == 0 ? idle + 1 : 0;
		if (idle > 3)
			abort();
		off += used;
	}
	sp_http_release(&h);
	return 0;
}
