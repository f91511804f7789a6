/*
 * fuzz-dns: libFuzzer target for the guest's DNS question parser and
 * answer writer (guest/dns.c), which take any program's UDP packets to
 * 127.0.0.1:53 in the sandbox.  A question taken has a name of the allowed
 * length and characters, lower case; an answer fits its buffer, carries the
 * question back, and is never taken for a question.  Built and run by
 * `make fuzz`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dns.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char a[SD_DNS_ANSWER_MAX];
	struct query q, back;
	uint32_t addr = 0;
	size_t n, i, len;
	int rc;

	memset(&q, 0xa5, sizeof q);
	rc = sd_dns_parse(data, size, &q);
	if (rc < -1 || rc > RC_REFUSED)
		abort();
	if (rc == -1)
		return 0;
	len = strnlen(q.name, sizeof q.name);
	if (len > NAME_MAX_ || q.qlen > QUESTION_MAX)
		abort();
	if (rc == RC_OK) {
		if (len == 0 || q.name[0] == '.' || q.name[len - 1] == '.')
			abort();
		for (i = 0; i < len; i++)
			if (!((q.name[i] >= 'a' && q.name[i] <= 'z') ||
			    (q.name[i] >= '0' && q.name[i] <= '9') ||
			    q.name[i] == '-' || q.name[i] == '_' ||
			    q.name[i] == '.'))
				abort();
	}
	if (size >= 4)
		memcpy(&addr, data + size - 4, 4);
	n = sd_dns_answer(&q, rc, addr, a);
	if (n > sizeof a || n < 12 + q.qlen)
		abort();
	if (memcmp(a + 12, q.question, q.qlen) != 0)
		abort();
	/* Never answer an answer: two servers would ping-pong. */
	if (sd_dns_parse(a, n, &back) != -1)
		abort();
	return 0;
}
