/*
 * test-store: the object store.  Always: file:// in a temp dir, and the S3
 * client's retry policy and timeouts against canned answers from a loopback
 * socket of this test.  When SPACE_TEST_S3 names an s3:// store (with
 * SPACE_S3_ENDPOINT and the AWS variables set; tests/store.bats starts
 * s3rver for it), the same round trips run against it too.
 * SPACE_TEST_S3_MODE: full (the default), quick (round trips only), denied
 * (every call must be refused), bench (only what follows).
 * SPACE_TEST_S3_BENCH_MIB: also time a put and a get of that many MiB.
 */
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <netinet/in.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sp.h"
#include "tap.h"

#define MiB	(1024 * 1024)

static struct sp_err e;

/* ---- a byte stream both ends of a pipe can compute ---- */

struct prng {
	uint64_t s;
	unsigned char w[8];
	int used;
};

static void
prng_init(struct prng *p, uint64_t seed)
{
	p->s = seed * 0x9e3779b97f4a7c15ULL + 1;
	p->used = 8;
}

static void
prng_fill(struct prng *p, unsigned char *buf, size_t n)
{
	uint64_t x;

	while (n-- > 0) {
		if (p->used == 8) {
			x = p->s;
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			p->s = x;
			memcpy(p->w, &x, 8);
			p->used = 0;
		}
		*buf++ = p->w[p->used++];
	}
}

/* A child writing n bytes of stream seed into a pipe; the read end. */
static int
feeder(uint64_t n, uint64_t seed, pid_t *pid)
{
	static unsigned char buf[64 * 1024];
	struct prng p;
	int fds[2];
	size_t k;

	if (pipe(fds) == -1)
		return -1;
	if ((*pid = fork()) == 0) {
		close(fds[0]);
		prng_init(&p, seed);
		while (n > 0) {
			k = n < sizeof buf ? (size_t)n : sizeof buf;
			prng_fill(&p, buf, k);
			if (write(fds[1], buf, k) != (ssize_t)k)
				_exit(1);
			n -= k;
		}
		_exit(0);
	}
	close(fds[1]);
	return fds[0];
}

/* A child checking that a pipe carries exactly n bytes of stream seed;
 * the write end. */
static int
checker(uint64_t n, uint64_t seed, pid_t *pid)
{
	static unsigned char buf[64 * 1024], want[64 * 1024];
	struct prng p;
	int fds[2];
	ssize_t r;

	if (pipe(fds) == -1)
		return -1;
	if ((*pid = fork()) == 0) {
		close(fds[1]);
		prng_init(&p, seed);
		while ((r = read(fds[0], buf, sizeof buf)) > 0) {
			if ((uint64_t)r > n)
				_exit(2);
			prng_fill(&p, want, (size_t)r);
			if (memcmp(buf, want, (size_t)r) != 0)
				_exit(3);
			n -= (uint64_t)r;
		}
		_exit(r == 0 && n == 0 ? 0 : 4);
	}
	close(fds[0]);
	return fds[1];
}

static int
reaped_ok(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) == -1)
		if (errno != EINTR)
			return 0;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Puts n bytes of stream seed through a pipe. */
static int
put_stream(struct sp_store *s, const char *key, uint64_t n, uint64_t seed,
    uint64_t *bytes)
{
	pid_t pid;
	int fd, rc;

	*bytes = 0;
	if ((fd = feeder(n, seed, &pid)) == -1)
		return -1;
	rc = sp_store_put(s, key, fd, bytes, &e);
	close(fd);
	reaped_ok(pid);
	return rc;
}

/* Gets key through a pipe: 0 when it is exactly n bytes of stream seed. */
static int
get_stream(struct sp_store *s, const char *key, uint64_t n, uint64_t seed)
{
	uint64_t bytes = 0;
	pid_t pid;
	int fd, rc, ok;

	if ((fd = checker(n, seed, &pid)) == -1)
		return -1;
	rc = sp_store_get(s, key, fd, &bytes, &e);
	close(fd);
	ok = reaped_ok(pid);
	return rc == 0 && ok && bytes == n ? 0 : -1;
}

static int
is(const char *code)
{
	return strcmp(sp_code_name(e.code), code) == 0;
}

/* ---- an fd that fails mid-way ---- */

/* /proc/self/mem over n bytes of stream seed, then a page no read can
 * fault in (a shared mapping past the end of an empty file): read gives
 * the n bytes, then fails with EIO. */
static int
failing_fd(size_t n, uint64_t seed, void **map, size_t *maplen)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	struct prng p;
	unsigned char *m;
	int fd, guard;

	n = (n + pg - 1) / pg * pg;
	m = mmap(NULL, n + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -1;
	*map = m;
	*maplen = n + pg;
	prng_init(&p, seed);
	prng_fill(&p, m, n);
	if ((guard = memfd_create("guard", MFD_CLOEXEC)) == -1 ||
	    mmap(m + n, pg, PROT_READ, MAP_SHARED | MAP_FIXED, guard, 0) ==
	    MAP_FAILED)
		return -1;
	close(guard);
	if ((fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	if (lseek(fd, (off_t)(uintptr_t)m, SEEK_SET) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

static int
put_failing(struct sp_store *s, const char *key, size_t n)
{
	void *map = NULL;
	size_t maplen = 0;
	uint64_t bytes = 0;
	int fd, rc;

	if ((fd = failing_fd(n, 99, &map, &maplen)) == -1) {
		sp_err_set(&e, SP_E_IO, 0, "failing_fd: %s", strerror(errno));
		if (map != NULL)
			munmap(map, maplen);
		return 0;
	}
	rc = sp_store_put(s, key, fd, &bytes, &e);
	close(fd);
	munmap(map, maplen);
	return rc;
}

/* ---- list ---- */

struct seen {
	char keys[16][64];
	uint64_t sizes[16];
	int n, stop_after;
};

static int
collect(const char *key, uint64_t size, void *arg)
{
	struct seen *w = arg;

	if (w->n < 16) {
		snprintf(w->keys[w->n], sizeof w->keys[0], "%s", key);
		w->sizes[w->n] = size;
	}
	w->n++;
	return w->stop_after > 0 && w->n >= w->stop_after;
}

static int
key_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Whether list(prefix) gave exactly want[] (NULL-terminated), in order;
 * with any_order, in the order the server chose (s3rver lists in the order
 * of its directory walk, S3 in byte order). */
static int
listed(struct sp_store *s, const char *prefix, const char **want,
    int stop_after, int any_order)
{
	struct seen w = { .stop_after = stop_after };
	int i;

	if (sp_store_list(s, prefix, collect, &w, &e) == -1)
		return 0;
	if (any_order && w.n <= 16)
		qsort(w.keys, (size_t)w.n, sizeof w.keys[0], key_cmp);
	for (i = 0; want[i] != NULL; i++)
		if (i >= w.n || strcmp(w.keys[i], want[i]) != 0) {
			printf("#   list %s: item %d is %s, want %s\n", prefix, i,
			    i < w.n ? w.keys[i] : "(none)", want[i]);
			return 0;
		}
	if (w.n != i)
		printf("#   list %s: %d items, want %d\n", prefix, w.n, i);
	return w.n == i;
}

/* ---- the suite every backend passes ---- */

static void
key_rules(struct sp_store *s, const char *name)
{
	static const char *bad[] = { "", "/abs", "trail/", "a//b", "..",
	    "../x", "a/../b", ".hidden", "a/.b", "sp ace", "tab\tx",
	    "caf\xc3\xa9", "del\x7f" };
	char longkey[SP_STORE_KEY_MAX + 2], longname[SP_STORE_NAME_MAX + 2];
	uint64_t n;
	size_t i;
	int ok;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ok = sp_store_put(s, bad[i], 0, &n, &e) == -1 &&
		    is("bad-input") &&
		    sp_store_get(s, bad[i], 1, &n, &e) == -1 &&
		    is("bad-input") &&
		    sp_store_head(s, bad[i], &n, &e) == -1 && is("bad-input") &&
		    sp_store_delete(s, bad[i], &e) == -1 && is("bad-input");
		tap_okf(sp_code_name(e.code), e.msg, ok, "%s: key #%zu refused by every call",
		    name, i);
	}
	tap_ok(strchr(e.msg, '\x7f') == NULL,
	    "the message does not echo raw bytes");
	memset(longkey, 'k', sizeof longkey - 1);
	longkey[sizeof longkey - 1] = '\0';
	for (i = 100; i < sizeof longkey - 1; i += 100)
		longkey[i] = '/';
	tap_ok(sp_store_head(s, longkey, &n, &e) == -1 && is("bad-input"),
	    "a key over SP_STORE_KEY_MAX refused");
	memset(longname, 'n', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	tap_ok(sp_store_head(s, longname, &n, &e) == -1 && is("bad-input"),
	    "a component over SP_STORE_NAME_MAX refused");
	tap_ok(sp_store_key_check("templates/min@0a1b/stream.zst", &e) == 0 &&
	    sp_store_key_check("a-b_c~d+e=f,g:h", &e) == 0,
	    "ordinary keys pass");
	tap_ok(sp_store_list(s, "../", collect, NULL, &e) == -1 &&
	    is("bad-input") && sp_store_list(s, "a//", collect, NULL, &e) == -1,
	    "bad list prefixes refused");
}

/* The temporary files a put left in dir (recursively). */
static int
leftovers(const char *dir)
{
	char sub[4096];
	struct dirent *d;
	DIR *dp;
	int n = 0;

	if ((dp = opendir(dir)) == NULL)
		return 0;
	while ((d = readdir(dp)) != NULL) {
		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		if (strstr(d->d_name, ".tmp-") != NULL)
			n++;
		snprintf(sub, sizeof sub, "%s/%s", dir, d->d_name);
		if (d->d_type == DT_DIR)
			n += leftovers(sub);
	}
	closedir(dp);
	return n;
}

/* A field of /proc/self/status, in KiB. */
static long
status_kb(const char *field)
{
	char line[256];
	size_t fl = strlen(field);
	long v = -1;
	FILE *f;

	if ((f = fopen("/proc/self/status", "r")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, field, fl) == 0 && line[fl] == ':')
			v = atol(line + fl + 1);
	fclose(f);
	return v;
}

struct big {
	int put_ok, get_ok;
	uint64_t put_bytes;
	long rss_base_kb, rss_max_kb;
	struct sp_err e;
};

/* In a child (its own high-water mark of memory): n bytes through a pipe
 * into the store and back out through another. */
static void
big_stream(const char *url, const char *name, uint64_t n, long bound_kb)
{
	struct big r = { 0 };
	struct sp_store *s;
	int fds[2], fd;
	pid_t pid;
	ssize_t got;

	if (pipe(fds) == -1)
		return;
	if ((pid = fork()) == 0) {
		close(fds[0]);
		/* The peak starts again from here (not the parent's). */
		fd = open("/proc/self/clear_refs", O_WRONLY);
		if (fd == -1 || write(fd, "5", 1) != 1)
			_exit(1);
		close(fd);
		r.rss_base_kb = status_kb("VmRSS");
		if (sp_store_open(&s, url, &r.e) == 0) {
			r.put_ok = put_stream(s, "big/stream", n, 7,
			    &r.put_bytes) == 0;
			if (!r.put_ok)
				r.e = e;
			r.get_ok = r.put_ok && get_stream(s, "big/stream", n, 7) == 0;
			if (r.put_ok && !r.get_ok)
				r.e = e;
			sp_store_delete(s, "big/stream", &e);
			sp_store_close(s);
		}
		r.rss_max_kb = status_kb("VmHWM");
		_exit(write(fds[1], &r, sizeof r) == sizeof r ? 0 : 1);
	}
	close(fds[1]);
	got = read(fds[0], &r, sizeof r);
	close(fds[0]);
	reaped_ok(pid);
	if (got != sizeof r)
		memset(&r, 0, sizeof r);
	tap_okf(sp_code_name(r.e.code), r.e.msg, r.put_ok && r.put_bytes == n,
	    "%s: a %llu MiB object streamed in from a pipe", name,
	    (unsigned long long)(n / MiB));
	tap_okf(sp_code_name(r.e.code), r.e.msg, r.get_ok,
	    "%s: and streamed back out to a pipe, byte for byte", name);
	tap_okf(sp_code_name(r.e.code), r.e.msg, r.rss_max_kb - r.rss_base_kb < bound_kb,
	    "%s: memory grew by %ld KiB (bound %ld KiB)", name,
	    r.rss_max_kb - r.rss_base_kb, bound_kb);
}

static void
suite(const char *url, const char *name, int s3, int quick)
{
	static const char *all_l[] = { "l/a", "l/b-d", "l/b/c", "l/bz", "l/c",
	    NULL };
	static const char *b_l[] = { "l/b-d", "l/b/c", "l/bz", NULL };
	static const char *bdir_l[] = { "l/b/c", NULL };
	static const char *first_l[] = { "l/a", NULL };
	static const char *none_l[] = { NULL };
	static const char odd[] = "t/x!\"#$%&'()*+,:;<=>?@[\\]^`{|}~";
	static const char *odd_l[] = { odd, NULL };
	static const char *pages_l[] = { "p/1", "p/2", "p/3", "p/4", "p/5",
	    NULL };
	const char *mib = getenv("SPACE_S3_PART_MIB");
	size_t part = (size_t)(s3 && mib != NULL ? atoi(mib) : 8) * MiB;
	struct sp_store *s = NULL, *paged = NULL;
	uint64_t n, size, multi;
	int fd, ok;
	size_t i;

	if (!tap_okf(sp_code_name(e.code), e.msg, sp_store_open(&s, url, &e) == 0,
	    "%s: open", name))
		return;
	if (!quick)
		key_rules(s, name);

	ok = put_stream(s, "t/small", 11, 1, &n) == 0 && n == 11;
	tap_okf(sp_code_name(e.code), e.msg, ok, "%s: put 11 bytes from a pipe", name);
	tap_okf(sp_code_name(e.code), e.msg, sp_store_head(s, "t/small", &size, &e) == 0 &&
	    size == 11, "%s: head says 11", name);
	tap_okf(sp_code_name(e.code), e.msg, get_stream(s, "t/small", 11, 1) == 0,
	    "%s: get gives them back", name);
	ok = put_stream(s, "t/small", 5, 2, &n) == 0 && n == 5 &&
	    get_stream(s, "t/small", 5, 2) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok, "%s: a second put replaces the object", name);
	{
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		uint64_t got = 0;

		sp_store_set_get_max(s, 4);
		ok = sp_store_get(s, "t/small", null, &got, &e) == -1 &&
		    e.code == SP_E_TOO_BIG && got <= 4;
		sp_store_set_get_max(s, 5);
		ok = ok && get_stream(s, "t/small", 5, 2) == 0;
		sp_store_set_get_max(s, 0);
		close(null);
		tap_okf(sp_code_name(e.code), e.msg, ok, "%s: a get stops at its bound (too-big), "
		    "and one of exactly the bound passes", name);
	}
	ok = put_stream(s, odd, 3, 9, &n) == 0 && n == 3 &&
	    sp_store_head(s, odd, &size, &e) == 0 && size == 3 &&
	    get_stream(s, odd, 3, 9) == 0 && listed(s, "t/x", odd_l, 0, 0) &&
	    sp_store_delete(s, odd, &e) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok, "%s: a key of every printable sort "
	    "(encoded once, signed as S3 wants)", name);
	ok = put_stream(s, "t/empty", 0, 3, &n) == 0 && n == 0 &&
	    sp_store_head(s, "t/empty", &size, &e) == 0 && size == 0 &&
	    get_stream(s, "t/empty", 0, 3) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok, "%s: an empty object", name);

	/* Over two parts: a multipart upload of three on S3. */
	multi = 2 * (uint64_t)part + MiB + 7;
	ok = put_stream(s, "t/multi", multi, 4, &n) == 0 && n == multi;
	tap_okf(sp_code_name(e.code), e.msg, ok, "%s: put %llu bytes from a pipe%s", name,
	    (unsigned long long)multi, s3 ? " (a multipart upload of 3 parts)" :
	    "");
	tap_okf(sp_code_name(e.code), e.msg, sp_store_head(s, "t/multi", &size, &e) == 0 &&
	    size == multi, "%s: head of the multipart object", name);
	tap_okf(sp_code_name(e.code), e.msg, get_stream(s, "t/multi", multi, 4) == 0,
	    "%s: get of the multipart object, byte for byte", name);
	{
		int fds[2];
		sigset_t pend;

		/* A reader that went away: EPIPE, and the caller lives on. */
		ok = pipe(fds) == 0 && close(fds[0]) == 0 &&
		    sp_store_get(s, "t/multi", fds[1], &n, &e) == -1 &&
		    is("io") && strstr(e.msg, "Broken pipe") != NULL;
		close(fds[1]);
		sigpending(&pend);
		tap_okf(sp_code_name(e.code), e.msg, ok && !sigismember(&pend, SIGPIPE),
		    "%s: get to a closed pipe fails with EPIPE, no SIGPIPE",
		    name);
	}
	if (!quick) {
		ok = put_stream(s, "t/exact", part, 5, &n) == 0 && n == part &&
		    get_stream(s, "t/exact", part, 5) == 0;
		tap_okf(sp_code_name(e.code), e.msg, ok, "%s: an object of exactly one part",
		    name);
		ok = put_stream(s, "t/exact", part - 1, 6, &n) == 0 &&
		    get_stream(s, "t/exact", part - 1, 6) == 0;
		tap_okf(sp_code_name(e.code), e.msg, ok, "%s: one byte short of a part", name);
	}

	tap_okf(sp_code_name(e.code), e.msg, sp_store_head(s, "t/none", &size, &e) == -1 &&
	    is("not-found"), "%s: head of a missing key is not-found", name);
	fd = memfd_create("get", MFD_CLOEXEC);
	ok = sp_store_get(s, "t/none", fd, &n, &e) == -1 && is("not-found") &&
	    n == 0 && lseek(fd, 0, SEEK_END) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok, "%s: get of a missing key is not-found and "
	    "writes nothing", name);
	close(fd);
	ok = sp_store_delete(s, "t/small", &e) == 0 &&
	    sp_store_head(s, "t/small", &size, &e) == -1 && is("not-found");
	tap_okf(sp_code_name(e.code), e.msg, ok, "%s: delete removes", name);
	tap_okf(sp_code_name(e.code), e.msg, sp_store_delete(s, "t/small", &e) == 0 &&
	    sp_store_delete(s, "never/was", &e) == 0,
	    "%s: delete of what is not there is fine", name);

	ok = 1;
	for (i = 0; all_l[i] != NULL; i++)
		ok &= put_stream(s, all_l[i], i + 1, i, &n) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok, "%s: five keys to list", name);
	tap_okf(sp_code_name(e.code), e.msg, listed(s, "l/", all_l, 0, s3),
	    "%s: list gives them all%s", name, s3 ? "" : ", in byte order");
	tap_okf(sp_code_name(e.code), e.msg, listed(s, "l/b", b_l, 0, s3),
	    "%s: list of a partial name", name);
	tap_okf(sp_code_name(e.code), e.msg, listed(s, "l/b/", bdir_l, 0, s3),
	    "%s: list of a directory-like prefix", name);
	tap_okf(sp_code_name(e.code), e.msg, listed(s, "nothing/", none_l, 0, s3),
	    "%s: list of a prefix with nothing", name);
	tap_okf(sp_code_name(e.code), e.msg, listed(s, "l/", first_l, 1, 0) || (s3 &&
	    listed(s, "l/", (const char *[]){ "l/b/c", NULL }, 1, 0)),
	    "%s: a callback returning non-zero stops the list", name);
	{
		struct seen w = { 0 };

		ok = sp_store_list(s, "l/", collect, &w, &e) == 0 && w.n == 5;
		for (i = 0; ok && i < 5; i++)
			ok = w.sizes[i] == (strcmp(w.keys[i], "l/a") == 0 ? 1 :
			    strcmp(w.keys[i], "l/b-d") == 0 ? 2 :
			    strcmp(w.keys[i], "l/b/c") == 0 ? 3 :
			    strcmp(w.keys[i], "l/bz") == 0 ? 4 : 5);
		tap_okf(sp_code_name(e.code), e.msg, ok, "%s: list gives the sizes", name);
	}
	if (s3) {
		/* Flat keys: s3rver pages correctly only where its own order
		 * is byte order. */
		ok = 1;
		for (i = 0; pages_l[i] != NULL; i++)
			ok &= put_stream(s, pages_l[i], 1, i, &n) == 0;
		setenv("SPACE_S3_LIST_MAX", "2", 1);
		ok = ok && sp_store_open(&paged, url, &e) == 0 &&
		    listed(paged, "p/", pages_l, 0, 0);
		unsetenv("SPACE_S3_LIST_MAX");
		tap_okf(sp_code_name(e.code), e.msg, ok, "%s: pages of 2 keys: continuation "
		    "tokens carry the list through", name);
		sp_store_close(paged);
		for (i = 0; pages_l[i] != NULL; i++)
			sp_store_delete(s, pages_l[i], &e);
	}
	ok = 1;
	for (i = 0; all_l[i] != NULL; i++)
		ok &= sp_store_delete(s, all_l[i], &e) == 0;
	tap_okf(sp_code_name(e.code), e.msg, ok && listed(s, "l/", none_l, 0, 0),
	    "%s: deleted keys leave the list", name);

	if (!quick) {
		/* A put that fails half-way (after a part on S3) leaves the
		 * key as it was. */
		ok = put_stream(s, "t/atomic", 1000, 8, &n) == 0;
		tap_okf(sp_code_name(e.code), e.msg, ok, "%s: an object to overwrite", name);
		ok = put_failing(s, "t/atomic", s3 ? part + MiB : 2 * MiB) == -1;
		tap_okf(sp_code_name(e.code), e.msg, ok && is("io") && strstr(e.msg,
		    "Input/output error") != NULL, "%s: a reader failing "
		    "mid-way fails the put", name);
		tap_okf(sp_code_name(e.code), e.msg, sp_store_head(s, "t/atomic", &size,
		    &e) == 0 && size == 1000 && get_stream(s, "t/atomic", 1000,
		    8) == 0, "%s: the old object is still there, whole", name);
		ok = put_failing(s, "t/atomic-new", s3 ? part + MiB : 2 * MiB) ==
		    -1 && sp_store_head(s, "t/atomic-new", &size, &e) == -1 &&
		    is("not-found");
		tap_okf(sp_code_name(e.code), e.msg, ok, "%s: a failed put of a new key leaves "
		    "no object", name);
		if (!s3)
			tap_ok(leftovers(url + 7) == 0, "file: no temporary "
			    "file is left behind");
		big_stream(url, name, 32 * MiB, 16 * 1024);
	}
	sp_store_delete(s, "t/empty", &e);
	sp_store_delete(s, "t/multi", &e);
	sp_store_delete(s, "t/exact", &e);
	sp_store_delete(s, "t/atomic", &e);
	sp_store_close(s);
}

/* ---- URLs and settings ---- */

static int
open_fails(const char *url)
{
	struct sp_store *s = NULL;
	int rc = sp_store_open(&s, url, &e);

	sp_store_close(s);
	return rc == -1 && is("bad-input") && s == NULL;
}

static void
test_open(void)
{
	static const char *bad[] = { "", "ftp://x", "file://", "file://rel",
	    "s3://", "s3://ab", "s3://Bad_Bucket", "s3://bkt/../x",
	    "s3://bkt//x", "s3://-bkt" };
	struct sp_store *s = NULL;
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		tap_okf(sp_code_name(e.code), e.msg, open_fails(bad[i]), "store URL \"%s\" "
		    "refused", bad[i]);
	tap_ok(sp_store_open(&s, NULL, &e) == -1, "no URL refused");
	tap_okf(sp_code_name(e.code), e.msg, sp_store_open(&s, "s3://bkt/some/prefix/", &e) ==
	    0, "s3://bucket/prefix/ opens (nothing contacted yet)");
	sp_store_close(s);
	setenv("SPACE_S3_ENDPOINT", "http://127.0.0.1:9", 1);
	setenv("SPACE_S3_PART_MIB", "4", 1);
	tap_ok(open_fails("s3://bkt"), "parts under 5 MiB refused");
	setenv("SPACE_S3_PART_MIB", "8x", 1);
	tap_ok(open_fails("s3://bkt"), "a part size that is not a number refused");
	unsetenv("SPACE_S3_PART_MIB");
	setenv("SPACE_S3_ADDRESSING", "sideways", 1);
	tap_ok(open_fails("s3://bkt"), "unknown addressing refused");
	setenv("SPACE_S3_ADDRESSING", "virtual", 1);
	tap_ok(open_fails("s3://bkt"), "virtual-host addressing on an IP "
	    "refused");
	unsetenv("SPACE_S3_ADDRESSING");
	setenv("SPACE_S3_ENDPOINT", "http://user:pw@host", 1);
	tap_ok(open_fails("s3://bkt"), "an endpoint with credentials refused");
	setenv("SPACE_S3_ENDPOINT", "ftp://host", 1);
	tap_ok(open_fails("s3://bkt"), "an endpoint that is not http(s) refused");
	{
		static const char *bad_ep[] = { "host:9000", "http://",
		    "http://host/path", "http://host?x=1", "http://host#f",
		    "http://host:99999", "http://ho st", "http://ho_st",
		    "http://[::1", "http://user@host", "file:///tmp" };
		static const char *good_ep[] = { "http://127.0.0.1:9000",
		    "https://s3.example.com", "HTTPS://S3.Example.com/",
		    "http://[::1]:9000", "http://minio.local:9000/" };
		size_t k;

		for (k = 0; k < sizeof bad_ep / sizeof bad_ep[0]; k++) {
			setenv("SPACE_S3_ENDPOINT", bad_ep[k], 1);
			tap_okf(sp_code_name(e.code), e.msg, open_fails("s3://bkt"),
			    "endpoint \"%s\" refused", bad_ep[k]);
		}
		for (k = 0; k < sizeof good_ep / sizeof good_ep[0]; k++) {
			setenv("SPACE_S3_ENDPOINT", good_ep[k], 1);
			setenv("SPACE_S3_ADDRESSING", "path", 1);
			tap_okf(sp_code_name(e.code), e.msg,
			    sp_store_open(&s, "s3://bkt", &e) == 0,
			    "endpoint \"%s\" taken", good_ep[k]);
			sp_store_close(s);
			s = NULL;
			unsetenv("SPACE_S3_ADDRESSING");
		}
	}
	setenv("SPACE_S3_ENDPOINT", "http://127.0.0.1:9", 1);
	setenv("AWS_SESSION_TOKEN", "tok\r\nX-Injected: 1", 1);
	tap_ok(open_fails("s3://bkt"), "a session token that would split a "
	    "header refused");
	unsetenv("AWS_SESSION_TOKEN");
	setenv("AWS_REGION", "us east", 1);
	tap_ok(open_fails("s3://bkt"), "a bad region refused");
	unsetenv("AWS_REGION");
	unsetenv("SPACE_S3_ENDPOINT");
}

/* ---- canned answers: the retry policy ---- */

struct canned {
	int lfd, port;
	const char *status;	/* "503 Slow Down"; NULL: never answer */
	const char *code;	/* S3's error code in the body */
	volatile int hits;
	pthread_t th;
};

/* Reads a request (headers, then Content-Length bytes of body). */
static int
read_request(int fd)
{
	char buf[8192], *end, *cl;
	size_t len = 0;
	long body = 0;
	ssize_t r;

	while ((end = memmem(buf, len, "\r\n\r\n", 4)) == NULL) {
		if (len == sizeof buf ||
		    (r = read(fd, buf + len, sizeof buf - len)) <= 0)
			return -1;
		len += (size_t)r;
	}
	*end = '\0';
	if ((cl = strcasestr(buf, "\r\ncontent-length:")) != NULL)
		body = atol(cl + 17);
	if (strcasestr(buf, "\r\nexpect: 100-continue") != NULL &&
	    write(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25) != 25)
		return -1;
	body -= (long)(len - (size_t)(end + 4 - buf));
	while (body > 0 && (r = read(fd, buf, sizeof buf)) > 0)
		body -= r;
	return 0;
}

static void *
canned_serve(void *arg)
{
	struct canned *c = arg;
	char resp[512], xml[256];
	int fd, n;

	while ((fd = accept(c->lfd, NULL, NULL)) != -1) {
		__atomic_add_fetch(&c->hits, 1, __ATOMIC_SEQ_CST);
		if (read_request(fd) == 0 && c->status != NULL) {
			snprintf(xml, sizeof xml, "<?xml version=\"1.0\"?>"
			    "<Error><Code>%s</Code><Message>canned &amp; "
			    "sorry</Message></Error>", c->code);
			n = snprintf(resp, sizeof resp, "HTTP/1.1 %s\r\n"
			    "Content-Type: application/xml\r\nContent-Length: "
			    "%zu\r\nConnection: close\r\n\r\n%s", c->status,
			    strlen(xml), xml);
			if (write(fd, resp, (size_t)n) != n)
				c->hits += 1000;	/* fails the test */
		} else if (c->status == NULL) {
			/* A stuck server: says nothing until the client
			 * gives up. */
			while (read(fd, resp, sizeof resp) > 0)
				;
		}
		close(fd);
	}
	return NULL;
}

static int
canned_start(struct canned *c, const char *status, const char *code)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof a;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c->status = status;
	c->code = code;
	c->hits = 0;
	if ((c->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    bind(c->lfd, (struct sockaddr *)&a, sizeof a) == -1 ||
	    listen(c->lfd, 16) == -1 ||
	    getsockname(c->lfd, (struct sockaddr *)&a, &al) == -1)
		return -1;
	c->port = ntohs(a.sin_port);
	return pthread_create(&c->th, NULL, canned_serve, c) == 0 ? 0 : -1;
}

static void
canned_stop(struct canned *c)
{
	shutdown(c->lfd, SHUT_RDWR);
	pthread_join(c->th, NULL);
	close(c->lfd);
}

/* Opens s3://bkt at the canned server's port. */
static struct sp_store *
canned_store(struct canned *c)
{
	struct sp_store *s = NULL;
	char ep[64];

	snprintf(ep, sizeof ep, "http://127.0.0.1:%d", c->port);
	setenv("SPACE_S3_ENDPOINT", ep, 1);
	if (sp_store_open(&s, "s3://bkt/pre", &e) == -1)
		return NULL;
	return s;
}

static void
test_retries(void)
{
	static const struct {
		const char *status, *code, *want;
		int temp, hits;
	} cases[] = {
		{ "503 Slow Down", "SlowDown", "io", 1, 1 + SP_STORE_RETRIES },
		{ "500 Internal Server Error", "InternalError", "io", 1,
		    1 + SP_STORE_RETRIES },
		{ "429 Too Many Requests", "SlowDown", "io", 1,
		    1 + SP_STORE_RETRIES },
		{ "404 Not Found", "NoSuchKey", "not-found", 0, 1 },
		{ "403 Forbidden", "AccessDenied", "denied", 0, 1 },
		{ "400 Bad Request", "InvalidArgument", "io", 0, 1 },
	};
	struct sp_store *s;
	struct canned c;
	uint64_t size, n;
	size_t i;
	int ok;
	struct timespec t0, t1;
	double secs;

	setenv("SPACE_S3_RETRY_MS", "1", 1);
	setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "very-secret-key-8e1d", 1);
	setenv("AWS_SESSION_TOKEN", "session-token-secret-77c2", 1);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (canned_start(&c, cases[i].status, cases[i].code) == -1 ||
		    (s = canned_store(&c)) == NULL) {
			tap_okf(sp_code_name(e.code), e.msg, 0, "canned server %s", cases[i].status);
			continue;
		}
		ok = sp_store_head(s, "k", &size, &e) == -1 && is(cases[i].want) &&
		    e.temp == cases[i].temp;
		tap_okf(sp_code_name(e.code), e.msg, ok && c.hits == cases[i].hits,
		    "HTTP %.3s on head: %s, temp=%d, %d tr%s (served %d)",
		    cases[i].status, cases[i].want, cases[i].temp,
		    cases[i].hits, cases[i].hits == 1 ? "y" : "ies", c.hits);
		c.hits = 0;
		ok = put_stream(s, "k", 1000, 1, &n) == -1 && is(cases[i].want);
		tap_okf(sp_code_name(e.code), e.msg, ok && c.hits == cases[i].hits,
		    "HTTP %.3s on put: %s after %d tr%s (served %d)",
		    cases[i].status, cases[i].want, cases[i].hits,
		    cases[i].hits == 1 ? "y" : "ies", c.hits);
		if (cases[i].code[0] == 'S' || cases[i].code[0] == 'A')
			tap_okf(sp_code_name(e.code), e.msg, strstr(e.msg, cases[i].code) !=
			    NULL && strstr(e.msg, "very-secret") == NULL &&
			    strstr(e.msg, "session-token") == NULL,
			    "the message names S3's code, not the secrets: %s",
			    e.msg);
		sp_store_close(s);
		canned_stop(&c);
	}

	/* Nothing listens: refused connections are retried, then temp. */
	if (canned_start(&c, "200 OK", "") == 0 && (s = canned_store(&c)) != NULL) {
		canned_stop(&c);
		ok = sp_store_head(s, "k", &size, &e) == -1 && is("io") && e.temp;
		tap_okf(sp_code_name(e.code), e.msg, ok && strstr(e.msg, "6 tries") != NULL,
		    "a refused connection: io, temp=1, after 6 tries");
		sp_store_close(s);
	} else
		tap_ok(0, "a refused connection");

	/* A server that accepts and then says nothing cannot hang a call. */
	setenv("SPACE_S3_TIMEOUT_S", "1", 1);
	if (canned_start(&c, NULL, "") == 0 && (s = canned_store(&c)) != NULL) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		ok = sp_store_head(s, "k", &size, &e) == -1 && is("io") && e.temp;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		secs = (double)(t1.tv_sec - t0.tv_sec) +
		    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		tap_okf(sp_code_name(e.code), e.msg, ok && c.hits == 1 + SP_STORE_RETRIES &&
		    secs < 30, "a stuck server times out, is retried, and the "
		    "call ends: %.1f s, %d tries", secs, c.hits);
		sp_store_close(s);
		canned_stop(&c);
	} else
		tap_ok(0, "a stuck server");
}

/* ---- against a real S3 server ---- */

static void
test_denied(const char *url)
{
	struct sp_store *s;
	const char *secret = getenv("AWS_SECRET_ACCESS_KEY");
	uint64_t size, n;

	if (!tap_okf(sp_code_name(e.code), e.msg, sp_store_open(&s, url, &e) == 0,
	    "denied: open"))
		return;
	tap_okf(sp_code_name(e.code), e.msg, sp_store_head(s, "t/x", &size, &e) == -1 &&
	    is("denied") && !e.temp, "denied: head is denied");
	tap_okf(sp_code_name(e.code), e.msg, put_stream(s, "t/x", 100, 1, &n) == -1 &&
	    is("denied"), "denied: put is denied");
	tap_okf(sp_code_name(e.code), e.msg, secret == NULL || strstr(e.msg, secret) == NULL,
	    "denied: the message does not hold the secret");
	sp_store_close(s);
}

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void
bench(const char *url, int mib)
{
	struct sp_store *s;
	uint64_t n = (uint64_t)mib * MiB, got;
	double t0, t1, t2;
	int ok;

	if (sp_store_open(&s, url, &e) == -1)
		return;
	t0 = now();
	ok = put_stream(s, "bench/obj", n, 11, &got) == 0;
	t1 = now();
	ok = ok && get_stream(s, "bench/obj", n, 11) == 0;
	t2 = now();
	tap_okf(sp_code_name(e.code), e.msg, ok, "bench: %d MiB put in %.2f s (%.0f MiB/s), "
	    "get in %.2f s (%.0f MiB/s)", mib, t1 - t0, mib / (t1 - t0),
	    t2 - t1, mib / (t2 - t1));
	sp_store_delete(s, "bench/obj", &e);
	sp_store_close(s);
}

/* What the local tests set; the S3 run's own values come back after. */
static const char *vars[] = { "SPACE_S3_ENDPOINT", "SPACE_S3_ADDRESSING",
    "SPACE_S3_PART_MIB", "SPACE_S3_RETRY_MS", "SPACE_S3_TIMEOUT_S",
    "SPACE_S3_LIST_MAX", "AWS_REGION", "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN" };
static char *saved[sizeof vars / sizeof vars[0]];

static void
env_save(void)
{
	const char *v;
	size_t i;

	for (i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		v = getenv(vars[i]);
		saved[i] = v != NULL ? strdup(v) : NULL;
		unsetenv(vars[i]);
	}
}

static void
env_restore(void)
{
	size_t i;

	for (i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		if (saved[i] != NULL)
			setenv(vars[i], saved[i], 1);
		else
			unsetenv(vars[i]);
		free(saved[i]);
	}
}

int
main(void)
{
	char dir[] = "/tmp/sp-store-XXXXXX", url[64];
	const char *s3 = getenv("SPACE_TEST_S3");
	const char *mode = getenv("SPACE_TEST_S3_MODE");
	const char *mib = getenv("SPACE_TEST_S3_BENCH_MIB");
	char *rm[] = { "rm", "-rf", dir, NULL };

	if (mode == NULL)
		mode = "full";
	env_save();
	if (s3 == NULL || strcmp(mode, "full") == 0) {
		if (mkdtemp(dir) == NULL)
			return 1;
		snprintf(url, sizeof url, "file://%s/objects", dir);
		suite(url, "file", 0, 0);
		sp_proc_run(rm, &e);
		test_open();
		test_retries();
	}
	env_restore();
	if (s3 != NULL) {
		if (strcmp(mode, "denied") == 0)
			test_denied(s3);
		else if (strcmp(mode, "bench") != 0)
			suite(s3, "s3", 1, strcmp(mode, "quick") == 0);
		if (mib != NULL)
			bench(s3, atoi(mib));
	}
	return tap_done();
}
