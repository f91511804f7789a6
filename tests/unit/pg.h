/* pg.h: the PostgreSQL server of the C unit tests that run on both DB
 * backends (tests/pg-server, as root, in a temporary directory). */
#ifndef PG_H
#define PG_H

#include <stdio.h>
#include <string.h>

/* Runs tests/pg-server VERB DIR; its output (a SPACE_DB) into out. */
static int
pg_server(const char *verb, const char *dir, char *out, size_t n)
{
	char cmd[256];
	FILE *f;
	int rc;

	snprintf(cmd, sizeof cmd, "tests/pg-server %s %s", verb, dir);
	if ((f = popen(cmd, "r")) == NULL)
		return -1;
	if (out != NULL && fgets(out, (int)n, f) != NULL)
		out[strcspn(out, "\n")] = '\0';
	rc = pclose(f);
	return rc == 0 ? 0 : -1;
}

#endif
