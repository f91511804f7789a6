/*
 * test-subvol: sp_subvol on a real btrfs (the directory SPACE_TEST_BTRFS).
 * Checks snapshots, read-only flags, idempotent deletes and that exclusive
 * bytes report what a clone really costs: nothing right after the snapshot,
 * then exactly what was written into it.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"
#include "tap.h"

#define MiB	(1024ULL * 1024)

static struct sp_err e;

#define ok(cond, ...) tap_okf(sp_code_name(e.code), e.msg, (cond), __VA_ARGS__)

static char *
join(const char *a, const char *b)
{
	char *p;

	if (asprintf(&p, "%s/%s", a, b) == -1) {
		perror("asprintf");
		exit(1);
	}
	return p;
}

/* Writes n bytes of incompressible data at off, then fsyncs. */
static int
write_random(const char *path, off_t off, size_t n, int create)
{
	static unsigned char buf[1024 * 1024];
	static uint64_t x = 88172645463325252ULL;
	size_t i, done;
	int fd;

	fd = open(path, O_WRONLY | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0),
	    0644);
	if (fd == -1)
		return -1;
	for (done = 0; done < n; done += sizeof buf) {
		for (i = 0; i < sizeof buf; i += 8) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			memcpy(buf + i, &x, 8);
		}
		if (pwrite(fd, buf, sizeof buf, off + (off_t)done) !=
		    (ssize_t)sizeof buf) {
			close(fd);
			return -1;
		}
	}
	if (fsync(fd) == -1) {
		close(fd);
		return -1;
	}
	return close(fd);
}

int
main(void)
{
	const char *top = getenv("SPACE_TEST_BTRFS");
	char base[SP_PATH_MAX];
	char *a, *b, *c, *d, *inner, *h, *plain, *f;
	uint64_t ex;
	int fd, r;

	if (top == NULL || *top == '\0') {
		printf("1..0 # SKIP SPACE_TEST_BTRFS not set\n");
		return 0;
	}
	snprintf(base, sizeof base, "%s/test-subvol-%ld", top, (long)getpid());
	if (mkdir(base, 0755) == -1) {
		perror(base);
		return 1;
	}
	a = join(base, "a");
	b = join(base, "b");
	c = join(base, "c");
	d = join(base, "d");
	inner = join(d, "inner");
	h = join(base, "h");
	plain = join(base, "plain");

	ok(sp_subvol_is_btrfs(base) == 1, "is_btrfs on the test directory");
	ok(sp_subvol_is_btrfs("/proc") == 0, "is_btrfs false on /proc");

	ok(sp_subvol_create(a, &e) == 0, "create a");
	ok(sp_subvol_exists(a) == 1, "a exists");
	r = sp_subvol_create(a, &e);
	ok(r == -1 && e.code == SP_E_EXISTS,
	    "create a again: exists (%s)", sp_code_name(e.code));
	ok(sp_subvol_exists(b) == 0, "b does not exist yet");

	f = join(a, "disk.raw");
	ok(write_random(f, 0, 64 * MiB, 1) == 0, "write 64 MiB into a");
	free(f);

	r = sp_subvol_snapshot(d, b, 0, &e);
	ok(r == -1 && e.code == SP_E_NOT_FOUND,
	    "snapshot of a missing source: not-found (%s)", sp_code_name(e.code));
	ok(sp_subvol_snapshot(a, b, 0, &e) == 0, "snapshot a -> b rw");
	ok(sp_subvol_snapshot(a, c, 1, &e) == 0, "snapshot a -> c ro");
	r = sp_subvol_snapshot(a, c, 1, &e);
	ok(r == -1 && e.code == SP_E_EXISTS,
	    "snapshot onto an existing dst: exists (%s)", sp_code_name(e.code));

	f = join(c, "new");
	fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ok(fd == -1 && errno == EROFS, "creating a file in ro snapshot c fails");
	if (fd != -1)
		close(fd);
	free(f);
	f = join(b, "new");
	fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ok(fd != -1, "creating a file in rw snapshot b works");
	if (fd != -1)
		close(fd);
	free(f);

	ex = UINT64_MAX;
	r = sp_subvol_exclusive_bytes(b, &ex, &e);
	ok(r == 0 && ex < MiB, "exclusive bytes of b after snapshot: %llu",
	    (unsigned long long)ex);
	printf("# exclusive_bytes after snapshot of 64 MiB: %llu\n",
	    (unsigned long long)ex);

	f = join(b, "disk.raw");
	ok(write_random(f, 5 * MiB, 10 * MiB, 0) == 0,
	    "overwrite 10 MiB in b's copy");
	free(f);
	ex = 0;
	r = sp_subvol_exclusive_bytes(b, &ex, &e);
	ok(r == 0 && ex >= 10 * MiB && ex <= 10 * MiB + MiB / 2,
	    "exclusive bytes of b after a 10 MiB write: %llu",
	    (unsigned long long)ex);
	printf("# exclusive_bytes after 10 MiB write: %llu\n",
	    (unsigned long long)ex);
	ex = UINT64_MAX;
	r = sp_subvol_exclusive_bytes(a, &ex, &e);
	ok(r == 0 && ex < MiB, "a is still fully shared with c: %llu",
	    (unsigned long long)ex);

	/* Data written without fsync must count too (FIEMAP_FLAG_SYNC). */
	f = join(b, "fresh");
	fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd != -1) {
		static char ones[MiB];

		memset(ones, 1, sizeof ones);
		r = write(fd, ones, sizeof ones) == (ssize_t)sizeof ones;
		close(fd);
	} else
		r = 0;
	free(f);
	ex = 0;
	if (r)
		r = sp_subvol_exclusive_bytes(b, &ex, &e) == 0;
	ok(r && ex >= 11 * MiB && ex <= 11 * MiB + MiB / 2,
	    "unsynced 1 MiB counted: %llu", (unsigned long long)ex);

	/* A hard link is one inode: counted once. */
	ok(sp_subvol_create(h, &e) == 0, "create h");
	f = join(h, "one");
	ok(write_random(f, 0, 2 * MiB, 1) == 0, "write 2 MiB into h");
	{
		char *two = join(h, "two");

		ok(link(f, two) == 0, "hard link in h");
		free(two);
	}
	free(f);
	ex = 0;
	r = sp_subvol_exclusive_bytes(h, &ex, &e);
	ok(r == 0 && ex == 2 * MiB,
	    "hard-linked file counted once: %llu", (unsigned long long)ex);

	/* Small files are inline in metadata: no data extents to own. */
	f = join(h, "small");
	write_random(f, 0, 0, 1);
	fd = open(f, O_WRONLY | O_CLOEXEC);
	r = fd != -1 && write(fd, "tiny\n", 5) == 5 && fsync(fd) == 0;
	if (fd != -1)
		close(fd);
	free(f);
	ok(r && sp_subvol_snapshot(h, d, 1, &e) == 0, "snapshot h -> d");
	ex = UINT64_MAX;
	r = sp_subvol_exclusive_bytes(d, &ex, &e);
	ok(r == 0 && ex == 0, "fresh snapshot with an inline file: %llu",
	    (unsigned long long)ex);
	ok(sp_subvol_delete(d, &e) == 0, "delete d");

	r = sp_subvol_exclusive_bytes("/nonexistent-sp-test", &ex, &e);
	ok(r == -1 && e.code == SP_E_NOT_FOUND,
	    "exclusive bytes of a missing path: not-found (%s)", sp_code_name(e.code));

	ok(sp_subvol_set_readonly(b, 1, &e) == 0, "set b read-only");
	f = join(b, "new2");
	fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ok(fd == -1 && errno == EROFS, "b is read-only now");
	if (fd != -1)
		close(fd);
	free(f);

	ok(sp_subvol_delete(b, &e) == 0, "delete read-only b");
	ok(sp_subvol_exists(b) == 0 && access(b, F_OK) == -1, "b is gone");
	ok(sp_subvol_delete(b, &e) == 0, "delete b again: idempotent");
	ok(sp_subvol_delete(c, &e) == 0, "delete read-only snapshot c");

	/* A read-only subvolume inside a read-only subvolume. */
	ok(sp_subvol_create(d, &e) == 0 && sp_subvol_create(inner, &e) == 0 &&
	    sp_subvol_set_readonly(inner, 1, &e) == 0 &&
	    sp_subvol_set_readonly(d, 1, &e) == 0, "nested ro subvolumes");
	ok(sp_subvol_delete(d, &e) == 0 && access(d, F_OK) == -1,
	    "delete nested ro subvolumes");

	ok(mkdir(plain, 0755) == 0, "plain directory");
	r = sp_subvol_delete(plain, &e);
	ok(r == -1 && e.code == SP_E_BTRFS,
	    "delete of a plain directory refused (%s: %s)", sp_code_name(e.code), e.msg);
	rmdir(plain);

	ok(sp_subvol_delete(a, &e) == 0 && sp_subvol_delete(h, &e) == 0,
	    "delete a and h");
	ok(rmdir(base) == 0, "nothing left in the test directory");

	free(a);
	free(b);
	free(c);
	free(d);
	free(inner);
	free(h);
	free(plain);
	return tap_done();
}
