/*
 * sp_io: the few byte-level helpers both sides share (the guest daemon links
 * this file too, like sp_proto.c).
 */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "sp_core.h"

int
sp_write_all(int fd, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, p, n)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

uint32_t
sp_be32_get(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

void
sp_be32_put(unsigned char *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}
