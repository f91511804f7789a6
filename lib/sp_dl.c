/*
 * sp_dl: a library loaded on first use (libvirt, libcurl, libarchive), its
 * functions looked up once into a table.  The tables are unions of the
 * library's own prototypes and the void * slots filled here, so that every
 * call is still type-checked (POSIX dlsym returns functions as void *).
 */
#include <dlfcn.h>

#include "sp_core.h"

int
sp_dl_load(struct sp_dl *dl, const char *const names[], void *slots[],
    size_t n, struct sp_err *e)
{
	void *h;
	size_t i;
	int rc = -1;

	pthread_mutex_lock(&dl->mu);
	if (dl->loaded) {
		rc = 0;
		goto out;
	}
	if ((h = dlopen(dl->soname, RTLD_NOW | RTLD_LOCAL)) == NULL) {
		sp_err_set(e, dl->code, 0, "cannot load %s: %s", dl->name,
		    dlerror());
		goto out;
	}
	for (i = 0; i < n; i++)
		if ((slots[i] = dlsym(h, names[i])) == NULL) {
			sp_err_set(e, dl->code, 0, "%s has no %s", dl->name,
			    names[i]);
			goto out;
		}
	dl->loaded = 1;
	rc = 0;
out:
	pthread_mutex_unlock(&dl->mu);
	return rc;
}
