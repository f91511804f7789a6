/*
 * fake-addr.h: the fake addresses the guest's resolver gives names
 * (fake-addr.c).
 */
#ifndef FAKE_ADDR_H
#define FAKE_ADDR_H

#include <stdint.h>

#define SD_FAKE_NONE	UINT32_MAX

/* The table, once at start; -1 without memory. */
int sd_fake_init(void);
/* The index of name's address, given one now if it has none;
 * SD_FAKE_NONE without memory. */
uint32_t sd_fake_get(const char *name);
/* The address of index i, host order. */
uint32_t sd_fake_addr(uint32_t i);
/* The name an address was given to, or NULL. */
const char *sd_fake_name(uint32_t addr);
/* Whether addr (host order) is in the fake net. */
int sd_fake_in_net(uint32_t addr);

#endif
