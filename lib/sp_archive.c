/* sp_archive: libarchive loaded on first use (see sp_archive.h). */
#include <dlfcn.h>
#include <pthread.h>

#include "sp_archive.h"

struct sp_archive_fns sp_archive;

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static int loaded;

int
sp_archive_load(struct sp_err *e)
{
	void *h;
	int rc = -1;

	pthread_mutex_lock(&load_mu);
	if (loaded) {
		rc = 0;
		goto out;
	}
	if ((h = dlopen("libarchive.so.13", RTLD_NOW | RTLD_LOCAL)) == NULL) {
		sp_err_set(e, "internal", 0, "cannot load libarchive: %s",
		    dlerror());
		goto out;
	}
#define SP_ARCHIVE_SYM(m, f) \
	if ((sp_archive.m = (__typeof__(f) *)dlsym(h, #f)) == NULL) { \
		sp_err_set(e, "internal", 0, "libarchive has no %s", #f); \
		goto out; \
	}
	SP_ARCHIVE_FUNCS(SP_ARCHIVE_SYM)
#undef SP_ARCHIVE_SYM
	loaded = 1;
	rc = 0;
out:
	pthread_mutex_unlock(&load_mu);
	return rc;
}
