/*
 * sp_store.h: the object store (design.md) that suspended sandboxes and
 * templates travel through.  Two backends behind one interface:
 *
 *   file://DIR           the embedded default: a key is a path under DIR
 *   s3://BUCKET[/PREFIX] S3 or a compatible server, signed with AWS SigV4
 *
 * S3 is configured by the environment: SPACE_S3_ENDPOINT (default
 * https://s3.REGION.amazonaws.com), AWS_REGION or AWS_DEFAULT_REGION
 * (default us-east-1), AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
 * AWS_SESSION_TOKEN, SPACE_S3_ADDRESSING=path|virtual (default path when
 * SPACE_S3_ENDPOINT is set, else virtual).  Tuning, mostly for tests:
 * SPACE_S3_PART_MIB (multipart part size, 5..1024, default 8: the memory a
 * put holds), SPACE_S3_RETRY_MS (first backoff, default 100),
 * SPACE_S3_TIMEOUT_S (how long a transfer may stall, default 30),
 * SPACE_S3_LIST_MAX (keys per list page, default 1000).
 *
 * Keys are 1..SP_STORE_KEY_MAX bytes of printable ASCII without spaces,
 * made of '/'-separated components that are never empty, never longer than
 * SP_STORE_NAME_MAX and never start with '.' (so no "..", no hidden files,
 * and no clash with a put's temporary file, .NAME.tmp-XXXXXX beside the
 * object).  Anything else is bad-input.  file:// keeps keys as paths, so
 * it cannot hold both "a/b" and "a/b/c"; S3 can.
 *
 * Errors: not-found (no such key), denied (HTTP 401/403), bad-input (a bad
 * URL, key or setting), io (temp=1 when the failure was transient: HTTP
 * 5xx, 429, a lost connection or a timeout, still there after the retries).
 * Every S3 request is retried up to SP_STORE_RETRIES times with exponential
 * backoff and jitter; secrets never appear in a message.
 *
 * A store is for one thread at a time (S3: one libcurl handle, whose
 * connection is kept between calls).
 */
#ifndef SP_STORE_H
#define SP_STORE_H

#include <stdint.h>

#define SP_STORE_KEY_MAX	512
#define SP_STORE_NAME_MAX	200
#define SP_STORE_RETRIES	5

struct sp_err;
struct sp_store;

/* Opens a store by URL; nothing is contacted yet. */
int sp_store_open(struct sp_store **s, const char *url, struct sp_err *e);
/* Closes it and wipes the credentials it held; s may be NULL. */
void sp_store_close(struct sp_store *s);
/* bad-input unless key is a valid key (rules above). */
int sp_store_key_check(const char *key, struct sp_err *e);

/* Reads fd to EOF (a pipe is fine: the size need not be known) and stores
 * it under key, replacing what was there.  Atomic: until it returns 0 the
 * key shows its old object, or none; a failed put leaves nothing behind.
 * file:// writes a temporary file, fsyncs it, renames it into place and
 * fsyncs the directory.  S3 memory stays bounded by one part: an object
 * smaller than a part goes as one PUT, a larger one as a multipart upload
 * of at most 10000 parts (78 GiB with 8 MiB parts), aborted on failure.
 * *bytes (may be NULL) gets the size stored. */
int sp_store_put(struct sp_store *s, const char *key, int fd, uint64_t *bytes,
    struct sp_err *e);
/* Writes the object to fd as it arrives (a pipe is fine); not-found when
 * there is none.  An S3 transfer cut short is resumed where it stopped (a
 * Range request, If-Match the first answer's ETag).  A reader of fd that
 * went away is an io error (EPIPE), not a SIGPIPE.  *bytes (may be NULL)
 * gets the bytes written, also on failure. */
/* Gets stop with the error too-big once an object has given more than max
 * bytes: a store that sends more than the manifest says
 * cannot fill the disk.  0 lifts the bound. */
void sp_store_set_get_max(struct sp_store *s, uint64_t max);
int sp_store_get(struct sp_store *s, const char *key, int fd, uint64_t *bytes,
    struct sp_err *e);
/* The object's size; not-found when there is none. */
int sp_store_head(struct sp_store *s, const char *key, uint64_t *size,
    struct sp_err *e);
/* Removes the object; a key that is not there is not an error. */
int sp_store_delete(struct sp_store *s, const char *key, struct sp_err *e);
/* Calls fn for every object whose key starts with prefix ("" for all), in
 * byte order of the keys (file:// and S3; another S3-compatible server may
 * keep its own order); a non-zero return from fn stops the walk (and
 * sp_store_list returns 0).  Objects whose keys are not valid keys (written
 * by something else) are left out.  An S3 list reads pages of up to
 * SPACE_S3_LIST_MAX keys, following continuation tokens. */
int sp_store_list(struct sp_store *s, const char *prefix,
    int (*fn)(const char *key, uint64_t size, void *arg), void *arg,
    struct sp_err *e);

#endif
