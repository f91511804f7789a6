/* tap.h: the few TAP helpers the C unit tests share. */
#ifndef TAP_H
#define TAP_H

#include <stdio.h>

static int tap_n, tap_failed;

/* Prints one TAP line; returns cond so a test can stop early. */
static int
tap_ok(int cond, const char *name)
{
	tap_n++;
	if (!cond)
		tap_failed++;
	printf("%sok %d - %s\n", cond ? "" : "not ", tap_n, name);
	fflush(stdout);
	return cond;
}

static int
tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
