/*
 * fuzz-api: libFuzzer target for what a client of space-apid sends that the
 * server parses itself (lib/sp_api_parse.c): a method and path to a route,
 * a JSON body, a Connect envelope, a guest path, a query's %-encoding, an
 * environment variable.  The input's first byte picks which; the rest is
 * the client's bytes.  What comes back must hold what callers rely on: a
 * route's sandbox id is an id, a guest path is absolute and normal, a body
 * is an object.  Built and run by `make fuzz`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sp_api.h"

static void
check_path(const char *p)
{
	if (p[0] != '/' || strstr(p, "//") != NULL || strstr(p, "/./") != NULL ||
	    strstr(p, "/../") != NULL || strlen(p) >= SP_PATH_MAX ||
	    (strlen(p) > 1 && p[strlen(p) - 1] == '/'))
		abort();
	if (strlen(p) >= 3 && strcmp(p + strlen(p) - 3, "/..") == 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sp_api_route r;
	struct sp_err e;
	char *s, *nl, out[SP_PATH_MAX];
	json_t *j = NULL;

	if (size < 1)
		return 0;
	if ((s = malloc(size)) == NULL)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	switch (data[0] % 6) {
	case 0:		/* "METHOD\nPATH" */
		if ((nl = strchr(s, '\n')) == NULL)
			break;
		*nl = '\0';
		if (sp_api_route(s, nl + 1, &r, &e) == 0) {
			if (r.name == NULL || (r.id[0] && !sp_id_valid(r.id)) ||
			    (r.ref[0] && (r.id[0] || !sp_handle_valid(r.ref))))
				abort();
		} else if (e.code != SP_E_NOT_FOUND &&
		    e.code != SP_E_BAD_STATE)
			abort();
		break;
	case 1:
		if (sp_api_body_json(data + 1, size - 1, &j, &e) == 0 &&
		    !json_is_object(j))
			abort();
		break;
	case 2:
		if (sp_connect_unwrap(data + 1, size - 1, &j, &e) == 0 &&
		    !json_is_object(j))
			abort();
		break;
	case 3:		/* "HOME\nPATH" */
		if ((nl = strchr(s, '\n')) == NULL)
			break;
		*nl = '\0';
		if (s[0] == '/' && sp_api_guest_path(nl + 1, s, out, sizeof out,
		    &e) == 0)
			check_path(out);
		break;
	case 4:
		if (sp_api_url_decode(s, out, sizeof out) == 0 &&
		    strlen(out) >= sizeof out)
			abort();
		break;
	case 5:		/* "NAME\nVALUE" */
		if ((nl = strchr(s, '\n')) == NULL)
			break;
		*nl = '\0';
		if (sp_api_env_check(s, nl + 1, &e) == 0 && (s[0] == '\0' ||
		    strchr(s, '=') != NULL))
			abort();
		break;
	}
	json_decref(j);
	free(s);
	return 0;
}
