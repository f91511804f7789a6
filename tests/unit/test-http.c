/*
 * test-http: sp_http, the gateway's reader of request heads, fed whole and
 * byte by byte: heads come out whole, body bytes come back exactly as they
 * went in (chunked too), CONNECT ends HTTP, and bad or oversized heads are
 * refused.
 */
#include <stdlib.h>
#include <string.h>

#include "sp.h"
#include "tap.h"

/* Feeds in step bytes at a time; collects "HEAD method url hdrcount|" per
 * head, the body bytes, and "END|" / "UPGRADE|" marks. */
static int
run(const char *in, size_t n, size_t step, char *marks, size_t mn,
    char *body, size_t bn, struct sp_err *e)
{
	struct sp_http h;
	size_t off = 0, k, used, bl = 0, ml = 0;
	const char *url;
	size_t ul;
	int ev, rc = 0, upgraded = 0;

	marks[0] = body[0] = '\0';
	sp_http_init(&h);
	while (off < n || (off == n && !upgraded && h.lf_pending)) {
		k = n - off < step ? n - off : step;
		ev = sp_http_feed(&h, in + off, k, &used, e);
		if (ev == -1) {
			rc = -1;
			break;
		}
		switch (ev) {
		case SP_HTTP_HEAD:
			url = sp_http_url(&h, &ul);
			ml += snprintf(marks + ml, mn - ml, "HEAD %s %.*s %d|",
			    h.method, (int)ul, url, h.nh);
			break;
		case SP_HTTP_BODY:
		case SP_HTTP_END:
			memcpy(body + bl, in + off, used);
			bl += used;
			body[bl] = '\0';
			if (ev == SP_HTTP_END)
				ml += snprintf(marks + ml, mn - ml, "END|");
			break;
		case SP_HTTP_UPGRADE:
			ml += snprintf(marks + ml, mn - ml, "UPGRADE|");
			upgraded = 1;
			break;
		}
		off += used;
		if (upgraded)
			break;
		if (bl >= bn || ml >= mn)
			break;
	}
	sp_http_release(&h);
	return rc;
}

int
main(void)
{
	static const char two[] =
	    "POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "5\r\nhello\r\n0\r\n\r\n"
	    "GET http://a.test:8080/x?y=1 HTTP/1.1\r\nHost: a.test\r\n"
	    "Proxy-Connection: keep-alive\r\n\r\n";
	static const char conn[] =
	    "CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n"
	    "\x16\x03\x01";
	char marks[512], body[512], *big;
	struct sp_http h;
	struct sp_err e;
	size_t step, used, i;
	const char *name, *value;
	size_t nl, vl;
	int ok_all = 1;

	for (step = 1; step <= sizeof two; step = step < 8 ? step + 1 :
	    sizeof two) {
		if (run(two, sizeof two - 1, step, marks, sizeof marks, body,
		    sizeof body, &e) == -1 ||
		    strcmp(marks, "HEAD POST /up 2|END|HEAD GET "
		    "http://a.test:8080/x?y=1 2|END|") != 0 ||
		    strcmp(body, "5\r\nhello\r\n0\r\n\r\n") != 0) {
			ok_all = 0;
			printf("# step %zu: %s / %s\n", step, marks, body);
		}
		if (step == sizeof two)
			break;
	}
	tap_ok(ok_all, "two requests, fed 1..8 bytes at a time and whole: "
	    "heads whole, the chunked body back as it came");

	tap_ok(run(conn, sizeof conn - 1, 7, marks, sizeof marks, body,
	    sizeof body, &e) == 0 &&
	    strcmp(marks, "HEAD CONNECT api.test:443 1|UPGRADE|") == 0,
	    "CONNECT: a head, then no more HTTP");

	sp_http_init(&h);
	tap_ok(sp_http_feed(&h, two, 60, &used, &e) == SP_HTTP_HEAD &&
	    sp_http_find(&h, "transfer-encoding") == 1 &&
	    sp_http_header(&h, 0, &name, &nl, &value, &vl) == 0 &&
	    nl == 4 && memcmp(name, "Host", 4) == 0 && vl == 1 &&
	    value[0] == 'a' && sp_http_find(&h, "cookie") == -1,
	    "headers by index and by name, any case");
	sp_http_release(&h);

	sp_http_init(&h);
	tap_okf(sp_code_name(e.code), e.msg, sp_http_feed(&h, "G@T / HTTP/1.1\r\nHost: x\r\n"
	    "\r\n", 27, &used, &e) == -1 && e.code == SP_E_BAD_INPUT,
	    "a malformed head is bad-input: %s", e.msg);
	tap_ok(sp_http_feed(&h, "GET / HTTP/1.1\r\n\r\n", 18, &used, &e) ==
	    -1, "and the stream stays broken");
	sp_http_release(&h);

	big = malloc(SP_HTTP_HEAD_MAX + 4096);
	strcpy(big, "GET / HTTP/1.1\r\n");
	for (i = strlen(big); i < SP_HTTP_HEAD_MAX + 100; i += 20)
		memcpy(big + i, "X-Pad: aaaaaaaaaaa\r\n", 20);
	sp_http_init(&h);
	used = 0;
	{
		size_t off = 0;
		int ev = SP_HTTP_NEED;

		while (off < i && ev == SP_HTTP_NEED) {
			ev = sp_http_feed(&h, big + off, i - off > 4096 ?
			    4096 : i - off, &used, &e);
			off += used;
		}
		tap_okf(sp_code_name(e.code), e.msg, ev == -1 &&
		    e.code == SP_E_TOO_BIG,
		    "a head over %d bytes is too-big", SP_HTTP_HEAD_MAX);
	}
	sp_http_release(&h);
	free(big);

	sp_http_init(&h);
	tap_ok(sp_http_feed(&h, "GET /a HTTP/1.1\r\n\r\n", 19, &used, &e) ==
	    SP_HTTP_HEAD && used == 19 &&
	    sp_http_feed(&h, "", 0, &used, &e) == SP_HTTP_END && used == 0,
	    "a request without a body ends at its head");
	sp_http_release(&h);
	return tap_done();
}
