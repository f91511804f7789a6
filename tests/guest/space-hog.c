/*
 * space-hog: a memory hog, for tests/jail.bats.  Run inside a sandbox, it
 * takes memory 4 MiB at a time and writes to every page of it, until the
 * guest's OOM killer ends it (or, should the guest refuse it memory, it
 * exits 3).  The host's side must not notice.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define CHUNK	(4 << 20)

int
main(void)
{
	unsigned long mib = 0;
	char *p;

	for (;;) {
		p = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			fprintf(stderr, "space-hog: no more memory after %lu MiB\n",
			    mib);
			return 3;
		}
		memset(p, 0xa5, CHUNK);
		mib += CHUNK >> 20;
	}
}
