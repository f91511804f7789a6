/* sp_curl: libcurl loaded on first use (see sp_curl.h). */
#include <dlfcn.h>
#include <pthread.h>

#include "sp_curl.h"

struct sp_curl_fns sp_curl;

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static int loaded;

int
sp_curl_load(struct sp_err *e)
{
	void *h;
	int rc = -1;

	pthread_mutex_lock(&load_mu);
	if (loaded) {
		rc = 0;
		goto out;
	}
	if ((h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL)) == NULL) {
		sp_err_set(e, "internal", 0, "cannot load libcurl: %s",
		    dlerror());
		goto out;
	}
#define SP_CURL_SYM(n) \
	if ((sp_curl.n = (__typeof__(n) *)dlsym(h, #n)) == NULL) { \
		sp_err_set(e, "internal", 0, "libcurl has no %s", #n); \
		goto out; \
	}
	SP_CURL_FUNCS(SP_CURL_SYM)
#undef SP_CURL_SYM
	loaded = 1;
	rc = 0;
out:
	pthread_mutex_unlock(&load_mu);
	return rc;
}
