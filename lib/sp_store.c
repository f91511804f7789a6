/*
 * sp_store: the object store (design.md): opening a store by its URL, and
 * the interface, which hands each call to its backend.  file://DIR
 * (sp_store_file.c) keeps each object as a file; s3://BUCKET
 * (sp_store_s3.c) speaks the S3 REST API through libcurl.  Both stream: a
 * put holds at most one part in memory, a get writes what arrives as it
 * arrives.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "sp_storage.h"
#include "sp_store_int.h"

int
sp_store_open(struct sp_store **sp, const char *url, struct sp_err *e)
{
	struct sp_store *s;
	size_t l;
	int rc;

	*sp = NULL;
	if ((s = calloc(1, sizeof *s)) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "store: no memory");
	if (url != NULL && strncmp(url, "file://", 7) == 0) {
		s->kind = STORE_FILE;
		l = strlen(url + 7);
		while (l > 0 && url[7 + l - 1] == '/')
			l--;
		if (url[7] != '/')
			rc = sp_err_set(e, SP_E_BAD_INPUT, 0, "file:// store "
			    "needs an absolute path");
		else if (l + SP_STORE_KEY_MAX + 32 > sizeof s->dir)
			rc = sp_err_set(e, SP_E_BAD_INPUT, 0, "file:// store path "
			    "too long");
		else {
			memcpy(s->dir, url + 7, l);
			s->dir[l] = '\0';
			rc = 0;
		}
	} else if (url != NULL && strncmp(url, "s3://", 5) == 0) {
		s->kind = STORE_S3;
		rc = store_s3_open(s, url + 5, e);
	} else
		rc = sp_err_set(e, SP_E_BAD_INPUT, 0, "store URL must be "
		    "file://DIR or s3://BUCKET[/PREFIX]");
	if (rc == -1) {
		sp_store_close(s);
		return -1;
	}
	*sp = s;
	return 0;
}

void
sp_store_close(struct sp_store *s)
{
	if (s == NULL)
		return;
	if (s->h != NULL)
		sp_curl.curl_easy_cleanup(s->h);
	explicit_bzero(s->secret_key, sizeof s->secret_key);
	explicit_bzero(s->token_hdr, sizeof s->token_hdr);
	free(s);
}

/* ---- the interface ---- */

int
sp_store_put(struct sp_store *s, const char *key, int fd, uint64_t *bytes,
    struct sp_err *e)
{
	if (sp_store_key_check(key, e) == -1)
		return -1;
	if (s->kind == STORE_FILE)
		return store_file_put(s, key, fd, bytes, e);
	return store_s3_put(s, key, fd, bytes, e);
}

/* SIGPIPE is held off meanwhile: a reader of fd gone away is an EPIPE
 * error here and not the death of the caller. */
int
sp_store_get(struct sp_store *s, const char *key, int fd, uint64_t *bytes,
    struct sp_err *e)
{
	struct timespec zero = { 0, 0 };
	sigset_t pipeset, old, pend;
	uint64_t ignored;
	int was_pending, rc;

	if (bytes == NULL)
		bytes = &ignored;
	*bytes = 0;
	if (sp_store_key_check(key, e) == -1)
		return -1;
	sigemptyset(&pipeset);
	sigaddset(&pipeset, SIGPIPE);
	sigpending(&pend);
	was_pending = sigismember(&pend, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipeset, &old);
	if (s->kind == STORE_FILE)
		rc = store_file_get(s, key, fd, bytes, e);
	else
		rc = store_s3_get(s, key, fd, bytes, e);
	if (!was_pending)
		sigtimedwait(&pipeset, NULL, &zero);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int
sp_store_head(struct sp_store *s, const char *key, uint64_t *size,
    struct sp_err *e)
{
	if (sp_store_key_check(key, e) == -1)
		return -1;
	if (s->kind == STORE_FILE)
		return store_file_head(s, key, size, e);
	return store_s3_head(s, key, size, e);
}

int
sp_store_delete(struct sp_store *s, const char *key, struct sp_err *e)
{
	if (sp_store_key_check(key, e) == -1)
		return -1;
	if (s->kind == STORE_FILE)
		return store_file_delete(s, key, e);
	return store_s3_delete(s, key, e);
}

int
sp_store_list(struct sp_store *s, const char *prefix,
    int (*fn)(const char *, uint64_t, void *), void *arg, struct sp_err *e)
{
	if (prefix == NULL)
		prefix = "";
	if (store_prefix_check(prefix, e) == -1)
		return -1;
	if (s->kind == STORE_FILE)
		return store_file_list(s, prefix, fn, arg, e);
	return store_s3_list(s, prefix, fn, arg, e);
}

void
sp_store_set_get_max(struct sp_store *s, uint64_t max)
{
	s->get_max = max;
}
