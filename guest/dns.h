/*
 * dns.h: DNS questions and answers on the wire, for the guest's resolver on
 * 127.0.0.1:53 (daemon-egress.c).  Pure functions of their bytes, so that
 * they can be fuzzed on the host (tests/fuzz/fuzz-dns.c).
 */
#ifndef DNS_H
#define DNS_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#define NAME_MAX_	253		/* a DNS name without its final dot */
#define QUESTION_MAX	(255 + 4)	/* a wire name, type and class */

enum { RC_OK = 0, RC_FORMERR = 1, RC_SERVFAIL = 2, RC_NXDOMAIN = 3,
    RC_NOTIMP = 4, RC_REFUSED = 5 };
enum { T_A = 1, T_AAAA = 28, T_ANY = 255 };

/* A question of the guest's, as it came and as it is asked. */
struct query {
	struct sockaddr_in peer;
	uint16_t id, flags, qtype;
	unsigned char question[QUESTION_MAX];
	size_t qlen;
	char name[NAME_MAX_ + 1];
};

/* The one question of a query of n bytes, its name in lower case without
 * the final dot.  Returns an rcode to answer with (RC_OK: ask), or -1 to
 * drop the packet unanswered. */
int sd_dns_parse(const unsigned char *b, size_t n, struct query *q);

/* The most an answer takes: a header, the question, one A record. */
#define SD_DNS_ANSWER_MAX	(12 + QUESTION_MAX + 16)
/* Writes the answer to q with rcode, and addr as an A record when not 0,
 * into r; returns its length. */
size_t sd_dns_answer(const struct query *q, int rcode, uint32_t addr,
    unsigned char r[SD_DNS_ANSWER_MAX]);

#endif
