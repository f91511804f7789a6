/* dns: DNS questions and answers on the wire (dns.h). */
#include <arpa/inet.h>
#include <string.h>

#include "dns.h"

static uint16_t
be16(const unsigned char *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void
put16(unsigned char *p, unsigned int v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
}

size_t
sd_dns_answer(const struct query *q, int rcode, uint32_t addr,
    unsigned char r[SD_DNS_ANSWER_MAX])
{
	static const unsigned char rr[] = { 0xc0, 0x0c, 0, T_A, 0, 1,
	    0, 0, 0, 1, 0, 4 };
	size_t n = 12;

	put16(r, q->id);
	/* A response to a standard query, authoritative (there is no other
	 * server), recursion desired copied and available. */
	put16(r + 2, 0x8000 | (q->flags & 0x7800) | 0x0400 |
	    (q->flags & 0x0100) | 0x0080 | rcode);
	put16(r + 4, q->qlen > 0);
	put16(r + 6, addr != 0);
	put16(r + 8, 0);
	put16(r + 10, 0);
	memcpy(r + n, q->question, q->qlen);
	n += q->qlen;
	if (addr != 0) {
		memcpy(r + n, rr, sizeof rr);
		n += sizeof rr;
		addr = htonl(addr);
		memcpy(r + n, &addr, 4);
		n += 4;
	}
	return n;
}

static int
label_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* No compression pointer is taken: the question is the first name of a
 * query, so a pointer there can only be a trick. */
int
sd_dns_parse(const unsigned char *b, size_t n, struct query *q)
{
	size_t off = 12, len = 0, l, i;
	unsigned char c;
	int bad = 0;

	q->qlen = 0;
	q->name[0] = '\0';
	if (n < 12)
		return -1;
	q->id = be16(b);
	q->flags = be16(b + 2);
	/* Never answer an answer: two servers would ping-pong. */
	if (q->flags & 0x8000)
		return -1;
	if ((q->flags >> 11 & 0xf) != 0)
		return RC_NOTIMP;
	if (be16(b + 4) != 1 || be16(b + 6) != 0 || be16(b + 8) != 0 ||
	    be16(b + 10) > 1)
		return RC_FORMERR;
	for (;;) {
		if (off >= n)
			return RC_FORMERR;
		if ((l = b[off]) == 0)
			break;
		if (l > 63 || off + 1 + l >= n || off - 12 + 1 + l + 1 > 255)
			return RC_FORMERR;
		if (len > 0)
			q->name[len++] = '.';
		for (i = 0; i < l; i++) {
			c = b[off + 1 + i];
			bad |= !label_char(c);
			q->name[len++] = c >= 'A' && c <= 'Z' ? c + 32 : c;
		}
		/* Terminated at every step, so that q->name is a string
		 * whatever the answer (the fuzzer found it was not after a
		 * FORMERR; nothing read it then). */
		q->name[len] = '\0';
		off += 1 + l;
	}
	off++;
	if (off + 4 > n)
		return RC_FORMERR;
	q->name[len] = '\0';
	q->qtype = be16(b + off);
	q->qlen = off + 4 - 12;
	memcpy(q->question, b + 12, q->qlen);
	if (bad || len == 0 || be16(b + off + 2) != 1)
		return RC_REFUSED;
	return RC_OK;
}
