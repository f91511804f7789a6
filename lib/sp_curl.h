/*
 * sp_curl: libcurl, loaded on first use (sp_curl.c).  With what it pulls in
 * (33 shared objects) it would slow the start of every process; only the
 * commands that fetch or store over HTTP need it.  The pointers keep
 * libcurl's own prototypes, so every call is type-checked; the option
 * setter is variadic like curl_easy_setopt (without curl's compile-time
 * check of each option's type).
 */
#ifndef SP_CURL_H
#define SP_CURL_H

/* curl_easy_setopt and _getinfo are macros otherwise, and the members
 * of struct sp_curl_fns could not bear their names. */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#include "sp_storage.h"

#define SP_CURL_FUNCS(F) \
	F(curl_easy_cleanup) \
	F(curl_easy_getinfo) \
	F(curl_easy_init) \
	F(curl_easy_perform) \
	F(curl_easy_reset) \
	F(curl_easy_setopt) \
	F(curl_easy_strerror) \
	F(curl_free) \
	F(curl_slist_append) \
	F(curl_slist_free_all) \
	F(curl_url) \
	F(curl_url_cleanup) \
	F(curl_url_get) \
	F(curl_url_set)

union sp_curl_fns {
	struct {
#define SP_CURL_PTR(n) __typeof__(n) *n;
		SP_CURL_FUNCS(SP_CURL_PTR)
#undef SP_CURL_PTR
	};
	void *slot[0 SP_CURL_FUNCS(SP_DL_ONE)];	/* what sp_dl_load fills */
};

extern union sp_curl_fns sp_curl;

/* Loads libcurl once; every sp_curl pointer is set after it succeeds. */
int sp_curl_load(struct sp_err *e);

#endif
