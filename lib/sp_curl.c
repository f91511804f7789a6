/* sp_curl: libcurl loaded on first use (see sp_curl.h). */
#include "sp_storage.h"
#include "sp_curl.h"

union sp_curl_fns sp_curl;

static struct sp_dl dl = SP_DL_INIT("libcurl.so.4", "libcurl",
    SP_E_INTERNAL);
static const char *const names[] = {
#define SP_CURL_NAME(n) #n,
	SP_CURL_FUNCS(SP_CURL_NAME)
#undef SP_CURL_NAME
};
SP_DL_TABLE_CHECK(names, sp_curl);

int
sp_curl_load(struct sp_err *e)
{
	return sp_dl_load_table(&dl, names, sp_curl, e);
}
