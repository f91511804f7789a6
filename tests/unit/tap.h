/* tap.h: the few TAP helpers the C unit tests share. */
#ifndef TAP_H
#define TAP_H

#include <stdarg.h>
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

/* tap_ok with a formatted name; on failure it shows the library's last error
 * (code and msg are read when the line is printed, after cond was evaluated). */
static int tap_okf(const char *code, const char *msg, int cond, const char *fmt,
    ...) __attribute__((format(printf, 4, 5), unused));

static int
tap_okf(const char *code, const char *msg, int cond, const char *fmt, ...)
{
	char name[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof name, fmt, ap);
	va_end(ap);
	if (!tap_ok(cond, name))
		printf("#   last error: %s: %s\n", code, msg);
	return cond;
}

static int
tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
