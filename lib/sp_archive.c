/* sp_archive: libarchive loaded on first use (see sp_archive.h). */
#include "sp_storage.h"
#include "sp_archive.h"

union sp_archive_fns sp_archive;

static struct sp_dl dl = SP_DL_INIT("libarchive.so.13", "libarchive",
    SP_E_INTERNAL);
static const char *const names[] = {
#define SP_ARCHIVE_NAME(m, f) #f,
	SP_ARCHIVE_FUNCS(SP_ARCHIVE_NAME)
#undef SP_ARCHIVE_NAME
};
SP_DL_TABLE_CHECK(names, sp_archive);

int
sp_archive_load(struct sp_err *e)
{
	return sp_dl_load_table(&dl, names, sp_archive, e);
}
