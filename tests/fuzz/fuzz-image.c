/*
 * fuzz-image: libFuzzer target for what an imported image says
 * (lib/sp_image.c): an image config, whose defaults every call of the
 * template's sandboxes gets, and an index's list of manifests, with or
 * without a tag.  The input's first byte picks which (and the tag); the rest
 * is the JSON.  What comes back must hold what the guest daemon relies on:
 * env entries NAME=VALUE with a NAME of [A-Za-z0-9_], at most 64, a cwd that
 * is absolute, strings for user and labels, and a picked manifest that is
 * one of the list's objects.  Built and run by `make fuzz`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sp_storage.h"

static void
check_defaults(json_t *d)
{
	json_t *v, *s;
	const char *k, *t;
	size_t i, n;

	if (!json_is_object(d))
		abort();
	v = json_object_get(d, "env");
	if (v != NULL && (!json_is_array(v) || json_array_size(v) > 64 ||
	    json_array_size(v) == 0))
		abort();
	json_array_foreach(v, i, s) {
		t = json_string_value(s);
		n = t ? strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") : 0;
		if (t == NULL || n == 0 || t[n] != '=')
			abort();
	}
	v = json_object_get(d, "cwd");
	if (v != NULL && (!json_is_string(v) || json_string_value(v)[0] != '/'))
		abort();
	v = json_object_get(d, "user");
	if (v != NULL && (!json_is_string(v) || json_string_length(v) == 0))
		abort();
	json_object_foreach(json_object_get(d, "labels"), k, v)
		if (!json_is_string(v))
			abort();
	json_array_foreach(json_object_get(d, "cmd"), i, s)
		if (!json_is_string(s))
			abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const tags[] = { NULL, "latest", "img", "a:b" };
	json_t *j, *d, *m, *x;
	struct sp_err e;
	size_t i;
	int found = 0;

	if (size < 1)
		return 0;
	j = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES,
	    NULL);
	if (j == NULL)
		return 0;
	if (data[0] & 1) {
		if ((d = sp_image_defaults(j, &e)) != NULL) {
			check_defaults(d);
			json_decref(d);
		} else if (e.code != SP_E_BAD_INPUT && e.code != SP_E_INTERNAL)
			abort();
	} else {
		m = sp_image_pick(j, tags[(data[0] >> 1) & 3], (data[0] >> 3) & 1,
		    &e);
		if (m != NULL) {
			json_array_foreach(j, i, x)
				found |= x == m;
			if (!found || !json_is_object(m))
				abort();
		} else if (e.code != SP_E_BAD_INPUT)
			abort();
	}
	json_decref(j);
	return 0;
}
