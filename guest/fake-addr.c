/*
 * fake-addr: the addresses the guest's resolver gives names (daemon-egress.c),
 * from SP_EGRESS_FAKE_NET (a /15), kept for the daemon's life: a connection
 * to one is a connection to its name.  When all are given, the least
 * recently used is taken back.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sp.h"
#include "fake-addr.h"

#define FAKE_MAX	65536		/* names with an address of the net */

/* A name given an address, in the LRU list; index FAKE_MAX is its head. */
struct fake {
	char *name;
	uint32_t older, newer, hnext;
};

static struct fake *fakes;
static uint32_t *fake_hash;
static uint32_t fake_used, fake_seed, fake_base;

static uint32_t
fake_hash_of(const char *name)
{
	uint32_t h = 2166136261u ^ fake_seed;

	for (; *name != '\0'; name++)
		h = (h ^ (unsigned char)*name) * 16777619u;
	return h & (FAKE_MAX - 1);
}

static void
fake_unlink(uint32_t i)
{
	fakes[fakes[i].older].newer = fakes[i].newer;
	fakes[fakes[i].newer].older = fakes[i].older;
}

/* The newest end of the list: reused last. */
static void
fake_touch(uint32_t i)
{
	fake_unlink(i);
	fakes[i].older = fakes[FAKE_MAX].older;
	fakes[i].newer = FAKE_MAX;
	fakes[fakes[FAKE_MAX].older].newer = i;
	fakes[FAKE_MAX].older = i;
}

static void
fake_unhash(uint32_t i)
{
	uint32_t *p = &fake_hash[fake_hash_of(fakes[i].name)];

	while (*p != SD_FAKE_NONE && *p != i)
		p = &fakes[*p].hnext;
	if (*p == i)
		*p = fakes[i].hnext;
}

/* The index of name's address, given one now if it has none: the oldest
 * is taken back once all are given. */
uint32_t
sd_fake_get(const char *name)
{
	uint32_t h = fake_hash_of(name), i;
	char *copy;

	for (i = fake_hash[h]; i != SD_FAKE_NONE; i = fakes[i].hnext)
		if (strcmp(fakes[i].name, name) == 0) {
			fake_touch(i);
			return i;
		}
	if ((copy = strdup(name)) == NULL)
		return SD_FAKE_NONE;
	if (fake_used < FAKE_MAX) {
		i = fake_used++;
		fakes[i].older = fakes[i].newer = i;
	} else {
		i = fakes[FAKE_MAX].newer;
		fake_unhash(i);
		free(fakes[i].name);
	}
	fakes[i].name = copy;
	fakes[i].hnext = fake_hash[h];
	fake_hash[h] = i;
	fake_touch(i);
	return i;
}

uint32_t
sd_fake_addr(uint32_t i)
{
	return fake_base + 1 + i;
}

/* The name an address was given to, or NULL. */
const char *
sd_fake_name(uint32_t addr)
{
	uint32_t i = addr - fake_base - 1;

	if (addr <= fake_base || i >= fake_used || fakes[i].name == NULL)
		return NULL;
	fake_touch(i);
	return fakes[i].name;
}

int
sd_fake_init(void)
{
	struct timespec ts;
	struct in_addr a;
	uint32_t i;

	if (inet_pton(AF_INET, SP_EGRESS_FAKE_NET, &a) != 1 ||
	    (fakes = calloc(FAKE_MAX + 1, sizeof *fakes)) == NULL ||
	    (fake_hash = malloc(FAKE_MAX * sizeof *fake_hash)) == NULL)
		return -1;
	fake_base = ntohl(a.s_addr);
	for (i = 0; i < FAKE_MAX; i++)
		fake_hash[i] = SD_FAKE_NONE;
	fakes[FAKE_MAX].older = fakes[FAKE_MAX].newer = FAKE_MAX;
	/* A guest that could choose colliding names would make every
	 * lookup walk one long chain. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	fake_seed = (uint32_t)(ts.tv_sec * 1000 + ts.tv_nsec / 1000000) *
	    2654435761u ^ (uint32_t)getpid();
	return 0;
}

int
sd_fake_in_net(uint32_t addr)
{
	return (addr & 0xfffe0000u) == fake_base;
}
