/*
 * sp_store_int.h: what the object store's parts share: sp_store_key.c (keys
 * and plain I/O), sp_store_file.c (file://), sp_store_s3.c (s3://) and,
 * above them, sp_store.c (opening a store, the interface).  Not part of the
 * library's interface.
 */
#ifndef SP_STORE_INT_H
#define SP_STORE_INT_H

#include "sp_storage.h"
#include "sp_curl.h"

#define COPY_BUF	(1024 * 1024)		/* file backend copies */
#define PREFIX_MAX	256			/* of an s3:// URL */
#define URL_MAX		16384
#define TOKEN_MAX	4096			/* a list continuation token */
#define ETAG_MAX	128
#define PARTS_MAX	10000			/* S3's limit */
#define PAGE_MAX	(8 * 1024 * 1024)	/* one list page */
#define SMALL_MAX	(64 * 1024)		/* any other response body */
#define ERRBODY_MAX	(16 * 1024)		/* what we keep of an error */
#define BACKOFF_CAP_MS	10000

enum { STORE_FILE, STORE_S3 };

struct sp_store {
	int kind;
	char dir[SP_PATH_MAX];		/* file: the root, no trailing '/' */
	/* s3 */
	char prefix[PREFIX_MAX + 2];	/* "" or "a/b/" */
	char base[1024];		/* the URL an object's name follows */
	size_t list_len;		/* the bucket: base[0..list_len) */
	char sigv4[64];			/* aws:amz:REGION:s3 */
	char access_key[256], secret_key[256];
	char token_hdr[4096];		/* "x-amz-security-token: ..." or "" */
	size_t part_size;
	long retry_ms, timeout_s;
	int list_max;
	uint64_t get_max;		/* a get stops past it; 0: no bound */
	CURL *h;
};

/* Whether key is one of ours: components of SP_STORE_NAME_MAX printable
 * bytes, none empty or starting with '.', max bytes in all. */
int store_key_valid(const char *key, size_t max);
/* s, its unprintable bytes as '?', into buf: for messages. */
const char *store_shown(const char *s, char *buf, size_t n);
int store_prefix_check(const char *prefix, struct sp_err *e);
/* Reads fd until buf is full or at its end; *got says how much. */
int store_fill(int fd, unsigned char *buf, size_t cap, size_t *got,
    const char *what, const char *key, struct sp_err *e);

/* The backends: file:// (sp_store_file.c) and s3:// (sp_store_s3.c). */
int store_file_put(struct sp_store *s, const char *key, int fd,
    uint64_t *bytes, struct sp_err *e);
int store_file_get(struct sp_store *s, const char *key, int fd,
    uint64_t *bytes, struct sp_err *e);
int store_file_head(struct sp_store *s, const char *key, uint64_t *size,
    struct sp_err *e);
int store_file_delete(struct sp_store *s, const char *key, struct sp_err *e);
int store_file_list(struct sp_store *s, const char *prefix,
    int (*fn)(const char *, uint64_t, void *), void *arg, struct sp_err *e);
/* Opens s3://rest: the bucket, prefix and what the environment says. */
int store_s3_open(struct sp_store *s, const char *rest, struct sp_err *e);
int store_s3_put(struct sp_store *s, const char *key, int fd,
    uint64_t *bytes, struct sp_err *e);
int store_s3_get(struct sp_store *s, const char *key, int fd,
    uint64_t *bytes, struct sp_err *e);
int store_s3_head(struct sp_store *s, const char *key, uint64_t *size,
    struct sp_err *e);
int store_s3_delete(struct sp_store *s, const char *key, struct sp_err *e);
int store_s3_list(struct sp_store *s, const char *prefix,
    int (*fn)(const char *, uint64_t, void *), void *arg, struct sp_err *e);

#endif
