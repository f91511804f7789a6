/*
 * sp_template: builds a template (design.md) from a root filesystem, a
 * tarball in any format libarchive reads (sp_layer.c) or a directory, or an
 * OCI image layout or docker archive (sp_image.c), plus a kernel and an
 * initrd.  The result is the read-only subvolume templates/<name>@<digest>
 * holding disk.raw (an ext4 image), vmlinuz, initrd.img and template.json
 * (with the image config's defaults).  A root not made for SPACE gets the
 * guest daemon, a resolv.conf and the directories it mounts on
 * (guest_parts).
 *
 * The digest names the inputs, so importing the same inputs twice gives the
 * same template; a lock per digest makes concurrent imports of the same
 * inputs build it once while the others wait and reuse it.  Archives come
 * from anywhere: an entry that would land outside the root fails the import.
 *
 * On a node with a CA (sp_tls.h) the guest trusts it: its certificate is
 * added to the guest's CA bundle, so that the gateway can terminate the
 * guest's TLS, and it is one of the inputs the digest names.
 */
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <linux/openat2.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sp_storage.h"
#include "sp_archive.h"

#define MiB		(1024ULL * 1024)
#define GiB		(1024 * MiB)
#define TiB		(1024 * GiB)
#define DEFAULT_EXTRA	GiB		/* free space when the caller says 0 */
#define MIN_DISK	(16 * MiB)	/* below this mkfs.ext4 has no journal */
#define MAX_DISK	(16 * TiB)	/* ext4 with 4 KiB blocks */
#define COPY_CHUNK	(4 * MiB)
#define IO_BUF		(1024 * 1024)
#define BLOCK		4096ULL
#define CA_MAX		(64 * 1024)	/* a PEM certificate, generously */
#define CA_BUNDLE	"etc/ssl/certs/ca-certificates.crt"
#define CA_OWN		"space-node-ca.crt"	/* beside the bundle */
#define BUNDLE_MAX	(64 * MiB)	/* Debian's is 200 KiB */
#define DAEMON_MAX	(64 * MiB)	/* the static guest daemon: ~35 MiB */

static int
hash_str(crypto_hash_sha256_state *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
hash_str(crypto_hash_sha256_state *h, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof buf)
		return -1;
	crypto_hash_sha256_update(h, (const unsigned char *)buf, (size_t)n);
	return 0;
}

/*
 * Hashes exactly want bytes of fd.  A file that grows or shrinks while it is
 * read would give a digest of something that never existed, so it is an
 * error.
 */
static int
hash_fd(crypto_hash_sha256_state *h, int fd, uint64_t want, const char *path,
    unsigned char *buf, struct sp_err *e)
{
	uint64_t got = 0;
	ssize_t n;

	for (;;) {
		n = read(fd, buf, IO_BUF);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return sp_err_sys(e, SP_E_IO, "read '%s'", path);
		if (n == 0)
			break;
		crypto_hash_sha256_update(h, buf, (size_t)n);
		got += (uint64_t)n;
	}
	if (got != want)
		return sp_err_set(e, SP_E_IO, 1, "'%s' changed while being read",
		    path);
	return 0;
}

/* One regular input file: a header with its role and size, then its bytes. */
static int
hash_file(crypto_hash_sha256_state *h, const char *role, const char *path,
    unsigned char *buf, struct sp_err *e)
{
	struct stat st;
	int fd, ret = -1;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd == -1) {
		if (errno == ENOENT)
			return sp_err_set(e, SP_E_NOT_FOUND, 0,
			    "%s '%s' does not exist", role, path);
		return sp_err_sys(e, SP_E_IO, "open %s '%s'", role, path);
	}
	if (fstat(fd, &st) == -1) {
		sp_err_sys(e, SP_E_IO, "stat '%s'", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "%s '%s' is not a regular file",
		    role, path);
		goto out;
	}
	if (hash_str(h, "%s %llu\n", role, (unsigned long long)st.st_size)) {
		sp_err_set(e, SP_E_INTERNAL, 0, "hash header too long");
		goto out;
	}
	ret = hash_fd(h, fd, (uint64_t)st.st_size, path, buf, e);
out:
	close(fd);
	return ret;
}

static int
by_name(const FTSENT **a, const FTSENT **b)
{
	return strcmp((*a)->fts_name, (*b)->fts_name);
}

static char
type_char(mode_t m)
{
	if (S_ISREG(m))
		return 'f';
	if (S_ISDIR(m))
		return 'd';
	if (S_ISLNK(m))
		return 'l';
	if (S_ISCHR(m))
		return 'c';
	if (S_ISBLK(m))
		return 'b';
	if (S_ISFIFO(m))
		return 'p';
	return 's';
}

/*
 * A directory input in a canonical order (names sorted at every level): per
 * entry a header with type, mode, owner, size, device number and the length
 * of its relative path, then the path, then the link target or the content.
 * The lengths in the header keep one entry from running into the next.
 */
static int
hash_tree(crypto_hash_sha256_state *h, const char *dir, unsigned char *buf,
    struct sp_err *e)
{
	char *argv[2] = { (char *)dir, NULL };
	char target[SP_PATH_MAX];
	const struct stat *st;
	const char *rel;
	size_t skip = strlen(dir);
	FTS *fts;
	FTSENT *f;
	ssize_t n;
	uint64_t size;
	int fd, r, ret = -1;

	fts = fts_open(argv, FTS_PHYSICAL | FTS_NOCHDIR, by_name);
	if (fts == NULL)
		return sp_err_sys(e, SP_E_IO, "walk '%s'", dir);
	errno = 0;
	while ((f = fts_read(fts)) != NULL) {
		if (f->fts_info == FTS_DP)
			continue;
		if (f->fts_info == FTS_DNR || f->fts_info == FTS_ERR ||
		    f->fts_info == FTS_NS) {
			errno = f->fts_errno;
			sp_err_sys(e, SP_E_IO, "walk '%s'", f->fts_path);
			goto out;
		}
		st = f->fts_statp;
		rel = f->fts_path + skip;
		size = 0;
		n = 0;
		if (S_ISREG(st->st_mode))
			size = (uint64_t)st->st_size;
		if (S_ISLNK(st->st_mode)) {
			n = readlink(f->fts_accpath, target, sizeof target);
			if (n == -1 || (size_t)n >= sizeof target) {
				sp_err_sys(e, SP_E_IO, "readlink '%s'",
				    f->fts_path);
				goto out;
			}
			size = (uint64_t)n;
		}
		if (hash_str(h, "%c %o %u %u %llu %llu %zu\n",
		    type_char(st->st_mode), (unsigned)(st->st_mode & 07777),
		    (unsigned)st->st_uid, (unsigned)st->st_gid,
		    (unsigned long long)size,
		    (unsigned long long)(S_ISCHR(st->st_mode) ||
		    S_ISBLK(st->st_mode) ? st->st_rdev : 0), strlen(rel))) {
			sp_err_set(e, SP_E_INTERNAL, 0, "hash header too long");
			goto out;
		}
		crypto_hash_sha256_update(h, (const unsigned char *)rel,
		    strlen(rel));
		if (S_ISLNK(st->st_mode))
			crypto_hash_sha256_update(h,
			    (const unsigned char *)target, (size_t)n);
		if (S_ISREG(st->st_mode)) {
			fd = open(f->fts_accpath,
			    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
			if (fd == -1) {
				sp_err_sys(e, SP_E_IO, "open '%s'", f->fts_path);
				goto out;
			}
			r = hash_fd(h, fd, size, f->fts_path, buf, e);
			close(fd);
			if (r == -1)
				goto out;
		}
		errno = 0;
	}
	if (errno != 0) {
		sp_err_sys(e, SP_E_IO, "walk '%s'", dir);
		goto out;
	}
	ret = 0;
out:
	fts_close(fts);
	return ret;
}

/*
 * The digest of everything the image is made of: the root filesystem (the
 * archive's bytes, or the canonical walk of a directory), the kernel, the
 * initrd, the free space asked for and the node CA the guest is made to
 * trust, each behind a header naming it.  The CA comes last and only when
 * there is one, so that templates of nodes without a CA keep their digest.
 */
static int
digest_inputs(const struct sp_template_src *src, int isdir, uint64_t extra,
    const char *ca, size_t ca_len, char hex[65], struct sp_err *e)
{
	crypto_hash_sha256_state h;
	unsigned char md[crypto_hash_sha256_BYTES];
	unsigned char *buf;
	int ret = -1;

	if ((buf = malloc(IO_BUF)) == NULL)
		return sp_err_sys(e, SP_E_INTERNAL, "digest");
	crypto_hash_sha256_init(&h);
	hash_str(&h, "space-template 1\n");
	if (isdir) {
		hash_str(&h, "rootfs-dir\n");
		if (hash_tree(&h, src->rootfs, buf, e) == -1)
			goto out;
	} else if (hash_file(&h, "rootfs-archive", src->rootfs, buf, e) == -1)
		goto out;
	if (hash_file(&h, "kernel", src->kernel, buf, e) == -1 ||
	    hash_file(&h, "initrd", src->initrd, buf, e) == -1)
		goto out;
	hash_str(&h, "disk-extra %llu\n", (unsigned long long)extra);
	/* Inputs later versions added, only when given, so that templates of
	 * the inputs before keep their digest. */
	if (src->format != NULL && strcmp(src->format, "auto") != 0 &&
	    hash_str(&h, "format %s\n", src->format) == -1)
		goto toolong;
	if (src->tag != NULL) {
		if (hash_str(&h, "tag %zu\n", strlen(src->tag)) == -1)
			goto toolong;
		crypto_hash_sha256_update(&h, (const unsigned char *)src->tag,
		    strlen(src->tag));
	}
	if (src->daemon != NULL && hash_file(&h, "daemon", src->daemon, buf,
	    e) == -1)
		goto out;
	if (ca_len > 0) {
		hash_str(&h, "node-ca %zu\n", ca_len);
		crypto_hash_sha256_update(&h, (const unsigned char *)ca,
		    ca_len);
	}
	crypto_hash_sha256_final(&h, md);
	sodium_bin2hex(hex, 65, md, sizeof md);
	ret = 0;
	goto out;
toolong:
	sp_err_set(e, SP_E_BAD_INPUT, 0, "template input too long");
out:
	free(buf);
	return ret;
}

/* Fills *t (and *config, when not NULL: its "config", {} when it has
 * none) from a finished template's template.json. */
static int
load_json(const char *dir, struct sp_template_row *t, json_t **config,
    struct sp_err *e)
{
	char path[SP_PATH_MAX];
	json_error_t jerr;
	json_t *j = NULL;
	const char *name, *digest;
	json_int_t created, bytes;
	int ret = -1;

	if (sp_path_fmt(path, sizeof path, e, "%s/template.json", dir) == -1)
		return -1;
	j = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (j == NULL) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "template '%s': %s", path,
		    jerr.text);
		goto out;
	}
	if (json_unpack(j, "{s:s, s:s, s:I, s:I}", "name", &name, "digest",
	    &digest, "created", &created, "disk_bytes", &bytes) == -1 ||
	    strlen(name) >= sizeof t->name || strlen(digest) >= sizeof t->digest) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "template '%s': malformed", path);
		goto out;
	}
	memset(t, 0, sizeof *t);
	memcpy(t->name, name, strlen(name) + 1);
	memcpy(t->digest, digest, strlen(digest) + 1);
	t->created = created;
	t->disk_bytes = bytes;
	if (config != NULL) {
		*config = json_object_get(j, "config");
		if (*config != NULL && !json_is_object(*config)) {
			sp_err_set(e, SP_E_BAD_STATE, 0, "template '%s': config "
			    "is not an object", path);
			*config = NULL;
			goto out;
		}
		*config = *config ? json_incref(*config) : json_object();
	}
	ret = 0;
out:
	json_decref(j);
	return ret;
}

int
sp_template_config(const char *root, const struct sp_template_row *t,
    json_t **config, struct sp_err *e)
{
	struct sp_template_row row;
	char dir[SP_PATH_MAX];

	if (sp_template_path(root, t, dir, sizeof dir, e) == -1)
		return -1;
	return load_json(dir, &row, config, e);
}

static int
write_json(const char *dir, const struct sp_template_row *t, json_t *config,
    struct sp_err *e)
{
	char path[SP_PATH_MAX];
	json_t *j;
	char *s = NULL;
	int fd = -1, ret = -1;

	if (sp_path_fmt(path, sizeof path, e, "%s/template.json", dir) == -1)
		return -1;
	j = json_pack("{s:s, s:s, s:I, s:I, s:s, s:s, s:i, s:O}", "name",
	    t->name, "digest", t->digest, "created", (json_int_t)t->created,
	    "disk_bytes", (json_int_t)t->disk_bytes, "kernel", "vmlinuz",
	    "initrd", "initrd.img", "format", 1, "config", config);
	if (j == NULL || (s = json_dumps(j, JSON_INDENT(2))) == NULL) {
		sp_err_set(e, SP_E_INTERNAL, 0, "template.json: out of memory");
		goto out;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd == -1 || sp_write_all(fd, s, strlen(s)) == -1 ||
	    sp_write_all(fd, "\n", 1) == -1 || fsync(fd) == -1) {
		sp_err_sys(e, SP_E_IO, "write '%s'", path);
		goto out;
	}
	ret = 0;
out:
	if (fd != -1)
		close(fd);
	free(s);
	json_decref(j);
	return ret;
}

/* A directory input: cp keeps owners, modes, links and times, reflinks data
 * on the same btrfs and never follows a symlink inside the tree. */
static int
copy_tree(const char *src, const char *dest, struct sp_err *e)
{
	char from[SP_PATH_MAX];
	char *argv[] = { "cp", "-a", "--reflink=auto", "--", from,
	    (char *)dest, NULL };

	if (sp_path_fmt(from, sizeof from, e, "%s/.", src) == -1)
		return -1;
	return sp_proc_run(argv, e);
}

/*
 * An estimate of what the tree takes in ext4: data rounded up to blocks, a
 * block per directory and per long symlink, a directory entry per name.
 */
static int
tree_size(const char *dir, uint64_t *bytes, uint64_t *inodes,
    struct sp_err *e)
{
	char *argv[2] = { (char *)dir, NULL };
	const struct stat *st;
	uint64_t sum = 0, n = 0;
	FTS *fts;
	FTSENT *f;
	int ret = -1;

	fts = fts_open(argv, FTS_PHYSICAL | FTS_NOCHDIR, NULL);
	if (fts == NULL)
		return sp_err_sys(e, SP_E_IO, "walk '%s'", dir);
	errno = 0;
	while ((f = fts_read(fts)) != NULL) {
		if (f->fts_info == FTS_DP)
			continue;
		if (f->fts_info == FTS_DNR || f->fts_info == FTS_ERR ||
		    f->fts_info == FTS_NS) {
			errno = f->fts_errno;
			sp_err_sys(e, SP_E_IO, "walk '%s'", f->fts_path);
			goto out;
		}
		st = f->fts_statp;
		n++;
		sum += 64;
		if (S_ISREG(st->st_mode))
			sum += ((uint64_t)st->st_size + BLOCK - 1) / BLOCK *
			    BLOCK;
		else if (S_ISDIR(st->st_mode) ||
		    (S_ISLNK(st->st_mode) && st->st_size >= 60))
			sum += BLOCK;
		errno = 0;
	}
	if (errno != 0) {
		sp_err_sys(e, SP_E_IO, "walk '%s'", dir);
		goto out;
	}
	*bytes = sum;
	*inodes = n;
	ret = 0;
out:
	fts_close(fts);
	return ret;
}

/*
 * mkfs.ext4 writes all over its image, so its output is fragmented; the
 * template's disk.raw is a sequential copy of it instead (reflinking a
 * snapshot's extents costs per extent, design.md), with all-zero chunks left
 * as holes.
 */
static int
copy_image(const char *src, const char *dst, uint64_t size, struct sp_err *e)
{
	unsigned char *buf = NULL;
	uint64_t off = 0, want, got;
	off_t data;
	ssize_t n;
	int in = -1, out = -1, ret = -1;

	if ((buf = malloc(COPY_CHUNK)) == NULL) {
		sp_err_sys(e, SP_E_INTERNAL, "copy image");
		goto out;
	}
	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in == -1) {
		sp_err_sys(e, SP_E_IO, "open '%s'", src);
		goto out;
	}
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (out == -1) {
		sp_err_sys(e, SP_E_IO, "create '%s'", dst);
		goto out;
	}
	while (off < size) {
		/* Skip the holes mkfs left without reading them. */
		data = lseek(in, (off_t)off, SEEK_DATA);
		if (data == -1 && errno == ENXIO)
			break;
		if (data == -1) {
			sp_err_sys(e, SP_E_IO, "seek '%s'", src);
			goto out;
		}
		off = (uint64_t)data / COPY_CHUNK * COPY_CHUNK;
		want = size - off < COPY_CHUNK ? size - off : COPY_CHUNK;
		for (got = 0; got < want; got += (uint64_t)n) {
			n = pread(in, buf + got, want - got, (off_t)(off + got));
			if (n == -1 && errno == EINTR) {
				n = 0;
				continue;
			}
			if (n == -1) {
				sp_err_sys(e, SP_E_IO, "read '%s'", src);
				goto out;
			}
			if (n == 0)
				break;
		}
		if (got == 0)
			break;
		if (buf[0] != 0 || memcmp(buf, buf + 1, got - 1) != 0) {
			for (want = 0; want < got; want += (uint64_t)n) {
				n = pwrite(out, buf + want, got - want,
				    (off_t)(off + want));
				if (n == -1 && errno == EINTR) {
					n = 0;
					continue;
				}
				if (n == -1) {
					sp_err_sys(e, SP_E_IO, "write '%s'", dst);
					goto out;
				}
			}
		}
		off += got;
	}
	if (ftruncate(out, (off_t)size) == -1 || fsync(out) == -1) {
		sp_err_sys(e, SP_E_IO, "write '%s'", dst);
		goto out;
	}
	ret = 0;
out:
	if (in != -1)
		close(in);
	if (out != -1)
		close(out);
	free(buf);
	return ret;
}

/* All of src into out (named dst in messages), then fsync. */
static int
copy_into(const char *src, int out, const char *dst, struct sp_err *e)
{
	unsigned char *buf = NULL;
	ssize_t n;
	int in = -1, ret = -1;

	if ((buf = malloc(IO_BUF)) == NULL) {
		sp_err_sys(e, SP_E_INTERNAL, "copy '%s'", src);
		goto out;
	}
	in = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (in == -1) {
		sp_err_sys(e, SP_E_IO, "open '%s'", src);
		goto out;
	}
	for (;;) {
		n = read(in, buf, IO_BUF);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			sp_err_sys(e, SP_E_IO, "read '%s'", src);
			goto out;
		}
		if (n == 0)
			break;
		if (sp_write_all(out, buf, (size_t)n) == -1) {
			sp_err_sys(e, SP_E_IO, "write '%s'", dst);
			goto out;
		}
	}
	if (fsync(out) == -1) {
		sp_err_sys(e, SP_E_IO, "write '%s'", dst);
		goto out;
	}
	ret = 0;
out:
	if (in != -1)
		close(in);
	free(buf);
	return ret;
}

static int
copy_file(const char *src, const char *dst, struct sp_err *e)
{
	int out, ret;

	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (out == -1)
		return sp_err_sys(e, SP_E_IO, "create '%s'", dst);
	ret = copy_into(src, out, dst, e);
	close(out);
	return ret;
}

/*
 * The node CA's certificate when the node has one (*n = 0 when not), read
 * once, so that the digest and the guest get the same bytes; it ends with
 * a line break, as a bundle's entries must.
 */
static int
node_ca(const char *root, char **pem, size_t *n, struct sp_err *e)
{
	char path[SP_PATH_MAX];
	struct sp_err e2;
	struct stat st;
	size_t got = 0;
	ssize_t r;
	int fd, ret = -1;

	*pem = NULL;
	*n = 0;
	if (sp_tls_ca_cert_path(root, path, sizeof path, &e2) == -1) {
		if (e2.code == SP_E_NOT_FOUND)
			return 0;
		return sp_err_set(e, e2.code, e2.temp, "%s", e2.msg);
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) == -1)
		return sp_err_sys(e, SP_E_IO, "open '%s'", path);
	if (fstat(fd, &st) == -1) {
		sp_err_sys(e, SP_E_IO, "stat '%s'", path);
		goto out;
	}
	if (st.st_size <= 0 || st.st_size > CA_MAX) {
		sp_err_set(e, SP_E_CORRUPT, 0, "node CA certificate '%s' has %lld "
		    "bytes", path, (long long)st.st_size);
		goto out;
	}
	if ((*pem = malloc((size_t)st.st_size + 2)) == NULL) {
		sp_err_sys(e, SP_E_INTERNAL, "read '%s'", path);
		goto out;
	}
	while (got < (size_t)st.st_size) {
		r = read(fd, *pem + got, (size_t)st.st_size - got);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = EIO;
			sp_err_sys(e, SP_E_IO, "read '%s'", path);
			goto out;
		}
		got += (size_t)r;
	}
	(*pem)[got] = '\0';
	if (strncmp(*pem, "-----BEGIN CERTIFICATE-----", 27) != 0 ||
	    strlen(*pem) != got ||
	    strstr(*pem, "-----END CERTIFICATE-----") == NULL) {
		sp_err_set(e, SP_E_CORRUPT, 0, "node CA certificate '%s' is not a "
		    "PEM certificate", path);
		goto out;
	}
	if ((*pem)[got - 1] != '\n')
		(*pem)[got++] = '\n';
	*n = got;
	ret = 0;
out:
	close(fd);
	if (ret == -1) {
		free(*pem);
		*pem = NULL;
	}
	return ret;
}

/*
 * Opens path in the tree at rootfd as the guest will see it: symlinks,
 * absolute ones too, and ".." resolve inside the tree and never out of it,
 * whatever the archive put there.
 */
static int
open_in(int rootfd, const char *path, int flags, mode_t mode)
{
	struct open_how how;

	/* openat2 refuses O_PATH with any flag but a few. */
	memset(&how, 0, sizeof how);
	how.flags = (uint64_t)(flags | O_CLOEXEC |
	    ((flags & O_PATH) ? 0 : O_NOCTTY));
	how.mode = (flags & O_CREAT) ? mode : 0;
	how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
	return (int)syscall(SYS_openat2, rootfd, path, &how, sizeof how);
}

/* A failure to open or make something of the guest's: the archive's shape
 * (a file where a directory goes, a dangling link) is bad input. */
static int
guest_err(const char *path, struct sp_err *e)
{
	switch (errno) {
	case ENOENT:
	case EEXIST:
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "rootfs: guest '/%s' is a "
		    "link that leads nowhere in the guest", path);
	case ENOTDIR:
	case ELOOP:
	case EISDIR:
	case EXDEV:
		return sp_err_sys(e, SP_E_BAD_INPUT, "rootfs: guest '/%s'", path);
	default:
		return sp_err_sys(e, SP_E_IO, "rootfs: guest '/%s'", path);
	}
}

/* A directory of the guest's (a path relative to its root), each part made
 * with mode where the rootfs has none. */
static int
guest_dir(int rootfd, const char *path, mode_t mode, struct sp_err *e)
{
	char part[SP_PATH_MAX];
	const char *base, *slash = path;
	int fd = -1, parent = rootfd;

	do {
		slash = strchr(slash + 1, '/');
		snprintf(part, sizeof part, "%.*s", slash ? (int)(slash - path) :
		    (int)strlen(path), path);
		fd = open_in(rootfd, part, O_RDONLY | O_DIRECTORY, 0);
		if (fd == -1 && errno == ENOENT) {
			base = strrchr(part, '/');
			base = base ? base + 1 : part;
			if (mkdirat(parent, base, mode) == 0 &&
			    fchmodat(parent, base, mode, 0) == 0)
				fd = open_in(rootfd, part,
				    O_RDONLY | O_DIRECTORY, 0);
		}
		if (fd == -1)
			guest_err(part, e);
		if (parent != rootfd)
			close(parent);
		if (fd == -1)
			return -1;
		parent = fd;
	} while (slash != NULL);
	return fd;
}

/* A regular file or nothing: opening a device or a FIFO the archive put
 * there could block or touch the host's hardware, so O_PATH looks first. */
static int
open_bundle(int rootfd, struct sp_err *e)
{
	struct stat st;
	int fd;

	if ((fd = open_in(rootfd, CA_BUNDLE, O_PATH, 0)) != -1) {
		if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
			close(fd);
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "rootfs: guest "
			    "'/%s' is not a regular file", CA_BUNDLE);
		}
		close(fd);
	} else if (errno != ENOENT)
		return guest_err(CA_BUNDLE, e);
	fd = open_in(rootfd, CA_BUNDLE, O_RDWR | O_APPEND | O_CREAT, 0644);
	if (fd == -1)
		return guest_err(CA_BUNDLE, e);
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		close(fd);
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "rootfs: guest '/%s' is "
		    "not a regular file", CA_BUNDLE);
	}
	return fd;
}

/*
 * Appends the CA to the guest's bundle (after a line break when its last
 * line lacks one), unless it holds it already, as the rootfs of a sandbox
 * of such a template would.
 */
static int
bundle_add(int rootfd, const char *pem, size_t n, struct sp_err *e)
{
	struct stat st;
	char *old = NULL;
	int fd, ret = -1;

	if ((fd = open_bundle(rootfd, e)) == -1)
		return -1;
	if (fstat(fd, &st) == -1) {
		sp_err_sys(e, SP_E_IO, "rootfs: guest '/%s'", CA_BUNDLE);
		goto out;
	}
	if ((uint64_t)st.st_size > BUNDLE_MAX) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "rootfs: guest '/%s' has %lld "
		    "bytes, too many for a CA bundle", CA_BUNDLE,
		    (long long)st.st_size);
		goto out;
	}
	if ((old = malloc((size_t)st.st_size + 1)) == NULL ||
	    pread(fd, old, (size_t)st.st_size, 0) != st.st_size) {
		sp_err_sys(e, SP_E_IO, "rootfs: read guest '/%s'", CA_BUNDLE);
		goto out;
	}
	if (memmem(old, (size_t)st.st_size, pem, n) != NULL) {
		ret = 0;
		goto out;
	}
	if ((st.st_size > 0 && old[st.st_size - 1] != '\n' &&
	    sp_write_all(fd, "\n", 1) == -1) || sp_write_all(fd, pem, n) == -1) {
		sp_err_sys(e, SP_E_IO, "rootfs: write guest '/%s'", CA_BUNDLE);
		goto out;
	}
	ret = 0;
out:
	free(old);
	close(fd);
	return ret;
}

/* A file of ours in the guest directory dirfd (path names it in messages),
 * root's, of mode, opened for writing: whatever was there is replaced, never
 * written through. */
static int
guest_create(int dirfd, const char *name, const char *path, mode_t mode,
    struct sp_err *e)
{
	int fd;

	if (unlinkat(dirfd, name, 0) == -1 && errno != ENOENT)
		return guest_err(path, e);
	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, mode);
	if (fd == -1)
		return guest_err(path, e);
	if (fchown(fd, 0, 0) == -1 || fchmod(fd, mode) == -1) {
		sp_err_sys(e, SP_E_IO, "rootfs: write guest '/%s'", path);
		close(fd);
		return -1;
	}
	return fd;
}

/* Such a file holding data. */
static int
guest_put(int dirfd, const char *name, const char *path, const void *data,
    size_t n, mode_t mode, struct sp_err *e)
{
	int fd;

	if ((fd = guest_create(dirfd, name, path, mode, e)) == -1)
		return -1;
	if (sp_write_all(fd, data, n) == -1) {
		sp_err_sys(e, SP_E_IO, "rootfs: write guest '/%s'", path);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* Makes the staged rootfs trust the node CA. */
static int
trust_ca(const char *rootfs, const char *pem, size_t n, struct sp_err *e)
{
	int rootfd, certs = -1, ret = -1;

	rootfd = open(rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd == -1)
		return sp_err_sys(e, SP_E_IO, "open '%s'", rootfs);
	/* The CA alone as well, under a name that says what it is. */
	if ((certs = guest_dir(rootfd, "etc/ssl/certs", 0755, e)) == -1 ||
	    bundle_add(rootfd, pem, n, e) == -1 ||
	    guest_put(certs, CA_OWN, "etc/ssl/certs/" CA_OWN, pem, n, 0644,
	    e) == -1)
		goto out;
	ret = 0;
out:
	if (certs != -1)
		close(certs);
	close(rootfd);
	return ret;
}

/* 1 when the guest has a regular file at path (never opened: O_PATH). */
static int
guest_has(int rootfd, const char *path)
{
	struct stat st;
	int fd, ok;

	if ((fd = open_in(rootfd, path, O_PATH | O_NOFOLLOW, 0)) == -1)
		return 0;
	ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	close(fd);
	return ok;
}

/*
 * What a root made for SPACE (with its own /sbin/space-daemon) brings itself,
 * and any other needs to boot as a sandbox (design.md, "Any root
 * filesystem"): /.space/bin/space-daemon, which the initramfs starts (as the
 * guest's init, or beside systemd); the directories the guest mounts on; a
 * resolv.conf naming the daemon's DNS on loopback and a hosts file naming
 * localhost.  Every root gets /.space/image.json, the defaults the daemon
 * gives calls (env, cwd, user).
 */
static int
guest_parts(const char *rootfs, const char *daemon, json_t *config,
    struct sp_err *e)
{
	static const char resolv[] = "# The sandbox's DNS: its space-daemon, "
	    "which asks the node's gateway (egress policy).\nnameserver "
	    "127.0.0.1\n";
	static const char hosts[] = "127.0.0.1\tlocalhost\n::1\tlocalhost\n";
	static const struct { const char *path; mode_t mode; } dirs[] = {
		{ "dev", 0755 }, { "proc", 0555 }, { "sys", 0555 },
		{ "run", 0755 }, { "tmp", 01777 }, { "etc", 0755 },
	};
	struct stat st;
	char *js = NULL;
	size_t i;
	int rootfd, fd = -1, bin = -1, own, ret = -1;

	rootfd = open(rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd == -1)
		return sp_err_sys(e, SP_E_IO, "open '%s'", rootfs);
	own = guest_has(rootfd, "sbin/space-daemon");
	if (!own && daemon == NULL) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "rootfs: it has no "
		    "/sbin/space-daemon of its own and no space-daemon was "
		    "given to put in it (--daemon)");
		goto out;
	}
	if (daemon != NULL && (stat(daemon, &st) == -1 ||
	    !S_ISREG(st.st_mode) || (uint64_t)st.st_size > DAEMON_MAX)) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "'%s' is not a file of at most "
		    "%llu bytes", daemon, (unsigned long long)DAEMON_MAX);
		goto out;
	}
	/* /.space is ours: whatever the image had there goes. */
	if (unlinkat(rootfd, ".space", 0) == -1 && errno != ENOENT &&
	    errno != EISDIR) {
		guest_err(".space", e);
		goto out;
	}
	if ((js = json_dumps(config, JSON_COMPACT)) == NULL) {
		sp_err_set(e, SP_E_INTERNAL, 1, "image.json: out of memory");
		goto out;
	}
	if ((fd = guest_dir(rootfd, ".space", 0755, e)) == -1 ||
	    guest_put(fd, "image.json", ".space/image.json", js, strlen(js),
	    0644, e) == -1)
		goto out;
	close(fd);
	fd = -1;
	/* Copied, not read whole: the static daemon is tens of MiB. */
	if (daemon != NULL && !own && ((fd = guest_dir(rootfd, ".space/bin",
	    0755, e)) == -1 || (bin = guest_create(fd, "space-daemon",
	    ".space/bin/space-daemon", 0755, e)) == -1 ||
	    copy_into(daemon, bin, "guest /.space/bin/space-daemon", e) == -1))
		goto out;
	if (own) {
		ret = 0;
		goto out;
	}
	for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		if (fd != -1)
			close(fd);
		if ((fd = guest_dir(rootfd, dirs[i].path, dirs[i].mode, e)) ==
		    -1)
			goto out;
	}
	/* fd is etc now. */
	if (guest_put(fd, "resolv.conf", "etc/resolv.conf", resolv,
	    sizeof resolv - 1, 0644, e) == -1 ||
	    (!guest_has(rootfd, "etc/hosts") && guest_put(fd, "hosts",
	    "etc/hosts", hosts, sizeof hosts - 1, 0644, e) == -1))
		goto out;
	ret = 0;
out:
	if (bin != -1)
		close(bin);
	if (fd != -1)
		close(fd);
	close(rootfd);
	free(js);
	return ret;
}

/*
 * Builds the ext4 image of rootfs at img.  SIZE = max(2 x content, content +
 * extra) in whole MiB.  mkfs gives one inode per 16 KiB, too few for a root
 * of many small files, so then the inode count is given explicitly.
 */
static int
make_image(const char *rootfs, const char *img, uint64_t extra,
    uint64_t *size, struct sp_err *e)
{
	char sz[32], ninodes[32];
	char *argv[20];
	uint64_t content = 0, inodes = 0, need;
	int fd, i = 0;

	if (tree_size(rootfs, &content, &inodes, e) == -1)
		return -1;
	if (content > MAX_DISK || extra > MAX_DISK)
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "image of %llu + %llu bytes is too large",
		    (unsigned long long)content, (unsigned long long)extra);
	*size = content * 2 > content + extra ? content * 2 : content + extra;
	*size = (*size + MiB - 1) / MiB * MiB;
	if (*size < MIN_DISK)
		*size = MIN_DISK;
	if (*size > MAX_DISK)
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "image of %llu bytes is too large",
		    (unsigned long long)*size);
	fd = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd == -1)
		return sp_err_sys(e, SP_E_IO, "create '%s'", img);
	close(fd);
	snprintf(sz, sizeof sz, "%llum", (unsigned long long)(*size / MiB));
	need = inodes * 2 + 4096;
	argv[i++] = "mkfs.ext4";
	argv[i++] = "-q";
	argv[i++] = "-F";
	argv[i++] = "-t";
	argv[i++] = "ext4";
	argv[i++] = "-d";
	argv[i++] = (char *)rootfs;
	/* Inode tables zeroed here, not by the guest kernel's ext4lazyinit
	 * thread after every boot and restore: in a warm pod it went on
	 * working through the claim.  copy_image leaves the zeros as holes. */
	argv[i++] = "-E";
	argv[i++] = "root_owner=0:0,lazy_itable_init=0,lazy_journal_init=1";
	argv[i++] = "-L";
	argv[i++] = "space-root";
	argv[i++] = "-b";
	argv[i++] = "4096";
	if (need > *size / 16384) {
		snprintf(ninodes, sizeof ninodes, "%llu",
		    (unsigned long long)need);
		argv[i++] = "-N";
		argv[i++] = ninodes;
	}
	argv[i++] = (char *)img;
	argv[i++] = sz;
	argv[i] = NULL;
	return sp_proc_run(argv, e);
}

/*
 * Leftovers of an import of this digest that died: whoever holds the digest's
 * lock is the only one who may be building it, so they are stale.  Removing
 * them is best effort; they only cost space.
 */
static void
remove_stale(const char *root, const char *digest)
{
	const char *sub[2] = { "templates", "tmp" };
	char dir[SP_PATH_MAX], path[SP_PATH_MAX], pat[100];
	struct sp_err e2;
	struct dirent *d;
	DIR *dp;
	int i;

	for (i = 0; i < 2; i++) {
		if (sp_path_fmt(dir, sizeof dir, &e2, "%s/%s", root,
		    sub[i]) == -1 || (dp = opendir(dir)) == NULL)
			continue;
		snprintf(pat, sizeof pat, i == 0 ? "@%s-" : "import-%s-",
		    digest);
		while ((d = readdir(dp)) != NULL) {
			if (i == 0 && strncmp(d->d_name, ".building-", 10) != 0)
				continue;
			if (strstr(d->d_name, pat) == NULL)
				continue;
			if (sp_path_fmt(path, sizeof path, &e2, "%s/%s", dir,
			    d->d_name) == 0)
				sp_subvol_delete(path, &e2);
		}
		closedir(dp);
	}
}

static int
lock_digest(const char *root, const char *digest, int *fd, struct sp_err *e)
{
	char path[SP_PATH_MAX];

	if (sp_path_fmt(path, sizeof path, e, "%s/locks/template-%s.lock",
	    root, digest) == -1)
		return -1;
	return sp_lock_path(path, 1, fd, e);
}

/* What an import builds in its staging directory: the root, then its
 * image, img. */
struct build {
	const struct sp_template_src *src;
	int isdir;
	const char *staging, *rootfs, *img;
	uint64_t extra;
	const char *ca;
	size_t ca_len;
	const char *daemon;	/* the guest daemon to put in, or NULL */
	int src_fd;		/* the archive, open; -1: read by its path */
	int copied;		/* the source directory is in staging/source */
	int cwd_fd;		/* the directory the paths are relative to, or
				 * -1 (in a user namespace: sp_userns.c) */
	int give_back;		/* the image to 65536 there, the caller */
};

/* An id as the import's user namespace sees it when root copied the file
 * in: 0..65535 into the import's range, any other the range's nobody. */
static unsigned
into_range(unsigned id)
{
	return (unsigned)(SP_IMPORT_IDS_FIRST + (id < SP_IMPORT_IDS ? id :
	    SP_IMPORT_IDS - 2));
}

/* A file of the user that copied a directory in, as space (65536 in the
 * namespace): root's, as a tarball made with --owner=0 would have it. */
static unsigned
space_to_root(unsigned id)
{
	return id == SP_IMPORT_IDS ? 0 : id;
}

/* Every owner and group in the tree at dir as map says.  A chown clears
 * the set-id bits, which are put back. */
static int
move_owners(const char *dir, unsigned (*map)(unsigned), struct sp_err *e)
{
	char *paths[] = { (char *)dir, NULL };
	struct stat *st;
	FTSENT *f;
	FTS *fts;
	int rc = 0;

	if ((fts = fts_open(paths, FTS_PHYSICAL | FTS_NOCHDIR, NULL)) == NULL)
		return sp_err_sys(e, SP_E_IO, "walk '%s'", dir);
	while (rc == 0 && (f = fts_read(fts)) != NULL) {
		if (f->fts_info == FTS_DP || (st = f->fts_statp) == NULL ||
		    (map(st->st_uid) == st->st_uid &&
		    map(st->st_gid) == st->st_gid))
			continue;
		if (lchown(f->fts_accpath, map(st->st_uid),
		    map(st->st_gid)) == -1 || (!S_ISLNK(st->st_mode) &&
		    (st->st_mode & 06000) && chmod(f->fts_accpath,
		    st->st_mode & 07777) == -1))
			rc = sp_err_sys(e, SP_E_IO, "own '%s'", f->fts_path);
	}
	fts_close(fts);
	return rc;
}

/*
 * The root filesystem in staging/rootfs: a directory copied, an archive
 * unpacked; when either holds an OCI layout or a docker archive (or the
 * format says so), its image's layers applied instead.  *config gets the
 * image config's defaults ({} for a plain root).
 */
static int
stage_root(const struct build *b, json_t **config, struct sp_err *e)
{
	static const char *const names[] = { "rootfs", "oci", "docker" };
	const struct sp_template_src *src = b->src;
	const char *fmt = src->format ? src->format : "auto", *from;
	char unpacked[SP_PATH_MAX], q[128];
	int kind, want = -1, i, packed = !b->isdir || b->copied;

	for (i = 0; i < 3; i++)
		if (strcmp(fmt, names[i]) == 0)
			want = i;	/* SP_IMAGE_NONE, _OCI, _DOCKER */
	if (want == -1 && strcmp(fmt, "auto") != 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "format '%s' is none of "
		    "auto, rootfs, oci, docker", sp_quote(fmt, q, sizeof q));
	from = src->rootfs;
	/* An archive is unpacked into staging/source; a directory copied
	 * there already is taken as it is. */
	if (packed) {
		if (sp_path_fmt(unpacked, sizeof unpacked, e, "%s/source",
		    b->staging) == -1)
			return -1;
		if (!b->copied && mkdir(unpacked, 0755) == -1)
			return sp_err_sys(e, SP_E_IO, "mkdir '%s'", unpacked);
		if (!b->copied && (b->src_fd >= 0 ? sp_layer_unpack_fd(b->src_fd,
		    src->rootfs, unpacked, 0, e) : sp_layer_unpack(src->rootfs,
		    unpacked, 0, e)) == -1)
			return -1;
		from = unpacked;
	}
	kind = want == SP_IMAGE_NONE ? SP_IMAGE_NONE : sp_image_kind(from);
	if (want > SP_IMAGE_NONE && kind != want)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "'%s' is not %s",
		    sp_quote(src->rootfs, q, sizeof q), want == SP_IMAGE_OCI ?
		    "an OCI image layout (no oci-layout)" : "a docker archive "
		    "(no manifest.json)");
	if (kind == SP_IMAGE_NONE) {
		if (src->tag != NULL)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "--tag picks an "
			    "image of an OCI layout or docker archive, and '%s' "
			    "is a root filesystem", sp_quote(src->rootfs, q,
			    sizeof q));
		if ((*config = json_object()) == NULL)
			return sp_err_set(e, SP_E_INTERNAL, 1, "out of memory");
		if (packed) {
			if (rename(unpacked, b->rootfs) == -1)
				return sp_err_sys(e, SP_E_IO, "rename '%s'",
				    unpacked);
			return 0;
		}
		if (mkdir(b->rootfs, 0755) == -1)
			return sp_err_sys(e, SP_E_IO, "mkdir '%s'", b->rootfs);
		if (copy_tree(src->rootfs, b->rootfs, e) == -1)
			return -1;
		/* Copied by space in its user namespace: its files, all
		 * space's, are root's in the image. */
		return b->give_back ? move_owners(b->rootfs, space_to_root, e) :
		    0;
	}
	if (mkdir(b->rootfs, 0755) == -1)
		return sp_err_sys(e, SP_E_IO, "mkdir '%s'", b->rootfs);
	if (sp_image_unpack(from, kind, src->tag, b->rootfs, config, e) == -1)
		return -1;
	/* The layout's blobs are no longer needed: free their space now. */
	if (packed)
		return sp_path_remove_tree(unpacked, e);
	return 0;
}

/*
 * The device nodes the archive held, made in the image now that one not
 * root unpacked it (sp_layer_defer_devices): each where its stand-in still
 * is, an empty file of that inode (an OCI layer above may have removed or
 * replaced it).  debugfs makes them, and says what failed only on its
 * stderr, so anything there but its banner fails the import.
 */
static int
add_devices(const char *rootfs, const char *staging, const char *img,
    json_t *devices, struct sp_err *e)
{
	char path[SP_PATH_MAX], cmds[SP_PATH_MAX], dir[SP_PATH_MAX];
	char errs[1024], *base, *line;
	char *argv[] = { "debugfs", "-w", "-f", cmds, (char *)img, NULL };
	const char *rel, *type;
	struct stat st;
	json_t *d;
	size_t i;
	ssize_t n;
	FILE *f;
	pid_t pid;
	int made = 0, errfd, rc;

	if (json_array_size(devices) == 0)
		return 0;
	if (sp_path_fmt(cmds, sizeof cmds, e, "%s/devices.debugfs",
	    staging) == -1)
		return -1;
	if ((f = fopen(cmds, "wxe")) == NULL)
		return sp_err_sys(e, SP_E_IO, "create '%s'", cmds);
	json_array_foreach(devices, i, d) {
		rel = json_string_value(json_object_get(d, "path"));
		type = json_string_value(json_object_get(d, "type"));
		if (sp_path_fmt(path, sizeof path, e, "%s/%s", rootfs,
		    rel) == -1 || snprintf(dir, sizeof dir, "/%s", rel) >=
		    (int)sizeof dir) {
			fclose(f);
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "device node "
			    "'%.64s': too long a name", rel);
		}
		if (lstat(path, &st) == -1 || !S_ISREG(st.st_mode) ||
		    st.st_size != 0 || (json_int_t)st.st_ino !=
		    json_integer_value(json_object_get(d, "ino")))
			continue;
		base = strrchr(dir, '/');
		*base++ = '\0';
		fprintf(f, "cd \"%s\"\nrm \"%s\"\nmknod \"%s\" %s %lld %lld\n"
		    "sif \"%s\" mode 0%llo\nsif \"%s\" uid %lld\n"
		    "sif \"%s\" gid %lld\n", *dir ? dir : "/", base, base, type,
		    json_integer_value(json_object_get(d, "major")),
		    json_integer_value(json_object_get(d, "minor")), base,
		    (unsigned long long)((*type == 'c' ? S_IFCHR : S_IFBLK) |
		    (json_integer_value(json_object_get(d, "mode")) & 07777)),
		    base, json_integer_value(json_object_get(d, "uid")), base,
		    json_integer_value(json_object_get(d, "gid")));
		made++;
	}
	if (fclose(f) == EOF)
		return sp_err_sys(e, SP_E_IO, "write '%s'", cmds);
	if (made == 0)
		return 0;
	if ((errfd = sp_proc_errfd(e)) == -1)
		return -1;
	rc = sp_proc_spawn(argv, -1, -1, errfd, &pid, e) == -1 ? -1 :
	    sp_proc_wait(pid, "debugfs", errfd, e);
	n = rc == 0 ? pread(errfd, errs, sizeof errs - 1, 0) : 0;
	close(errfd);
	if (rc == -1)
		return -1;
	errs[n > 0 ? n : 0] = '\0';
	for (line = strtok(errs, "\n"); line != NULL; line = strtok(NULL, "\n"))
		if (strncmp(line, "debugfs ", 8) != 0)
			return sp_err_set(e, SP_E_IO, 0, "device nodes into '%s': "
			    "debugfs: %.200s", img, line);
	return 0;
}

/* *config the image's defaults, *size the image's.  devices: NULL when
 * the archive's device nodes are made as it is unpacked (root), else where
 * they are noted to go into the image. */
static int
build(const struct build *b, json_t *devices, json_t **config,
    uint64_t *size, struct sp_err *e)
{
	sp_layer_defer_devices(devices);
	if (stage_root(b, config, e) == -1 ||
	    guest_parts(b->rootfs, b->daemon, *config, e) == -1 ||
	    (b->ca_len > 0 && trust_ca(b->rootfs, b->ca, b->ca_len, e) == -1) ||
	    make_image(b->rootfs, b->img, b->extra, size, e) == -1)
		return -1;
	return devices == NULL ? 0 : add_devices(b->rootfs, b->staging, b->img,
	    devices, e);
}

/* build, in the user namespace (in its staging directory, when the paths
 * are relative to it): the image handed to its caller when that is 65536
 * there, to copy.  {"config", "size"}. */
static int
build_apart(void *arg, json_t **value, struct sp_err *e)
{
	const struct build *b = arg;
	json_t *config = NULL, *devices = json_array();
	uint64_t size = 0;
	int rc = -1;

	if (devices == NULL)
		return sp_err_set(e, SP_E_INTERNAL, 1, "out of memory");
	if (b->cwd_fd >= 0 && fchdir(b->cwd_fd) == -1)
		sp_err_sys(e, SP_E_IO, "the staging directory");
	else if (build(b, devices, &config, &size, e) == 0) {
		if (b->give_back && chown(b->img, SP_IMPORT_IDS,
		    SP_IMPORT_IDS) == -1)
			sp_err_sys(e, SP_E_IO, "give the image back");
		else if ((*value = json_pack("{s:O, s:I}", "config", config,
		    "size", (json_int_t)size)) == NULL)
			sp_err_set(e, SP_E_INTERNAL, 1, "out of memory");
		else
			rc = 0;
	}
	json_decref(config);
	json_decref(devices);
	return rc;
}

/* Of a directory source: SP_IMAGE_NONE when it is a plain root filesystem
 * (or --format says so), else its image's kind. */
static int
dir_kind(const struct sp_template_src *src)
{
	if (src->format != NULL && strcmp(src->format, "rootfs") == 0)
		return SP_IMAGE_NONE;
	return sp_image_kind(src->rootfs);
}

/*
 * Root's child's view of b: it works in the staging directory, which it is
 * given (its owner the namespace's root), with the archive open, or the
 * image directory copied in (its owners moved into the range), and the
 * daemon copied in: nothing of root's is in its reach.
 */
static int
root_apart(const struct build *b, struct build *in, int *sfd,
    struct sp_err *e)
{
	char p[SP_PATH_MAX];

	*in = *b;
	in->staging = ".";
	in->rootfs = "rootfs";
	in->img = "disk.img";
	if ((*sfd = open(b->staging, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) ==
	    -1 || fchown(*sfd, into_range(0), into_range(0)) == -1)
		return sp_err_sys(e, SP_E_IO, "staging '%s'", b->staging);
	in->cwd_fd = *sfd;
	if (!b->isdir && (in->src_fd = open(b->src->rootfs, O_RDONLY |
	    O_CLOEXEC | O_NOCTTY)) == -1)
		return sp_err_sys(e, SP_E_IO, "open '%s'", b->src->rootfs);
	if (b->isdir) {
		if (sp_path_fmt(p, sizeof p, e, "%s/source", b->staging) == -1)
			return -1;
		if (mkdir(p, 0755) == -1)
			return sp_err_sys(e, SP_E_IO, "mkdir '%s'", p);
		if (copy_tree(b->src->rootfs, p, e) == -1 ||
		    move_owners(p, into_range, e) == -1)
			return -1;
		in->copied = 1;
	}
	if (b->daemon != NULL) {
		if (sp_path_fmt(p, sizeof p, e, "%s/space-daemon",
		    b->staging) == -1 || copy_file(b->daemon, p, e) == -1 ||
		    chown(p, into_range(0), into_range(0)) == -1)
			return sp_err_sys(e, SP_E_IO, "the daemon into '%s'",
			    b->staging);
		in->daemon = "space-daemon";
	}
	return 0;
}

/*
 * The root and its image, in a user namespace of their own, so that
 * nothing that parses an archive or an image runs as root and the
 * archive's owners are kept: one not root has space-noded map it
 * (sp_userns.c); root maps it itself, and gives its child only the staging
 * directory.  A plain directory root copies and makes an image of itself:
 * nothing there is parsed.
 */
static int
build_image(const struct build *b, json_t **config, uint64_t *size,
    struct sp_err *e)
{
	const char *sock = NULL;
	struct build in = *b;
	json_t *v = NULL;
	int sfd = -1, rc = -1;

	if (geteuid() == 0) {
		if (b->isdir && dir_kind(b->src) == SP_IMAGE_NONE)
			return build(b, NULL, config, size, e);
		if (root_apart(b, &in, &sfd, e) == -1)
			goto out;
	} else if ((sock = sp_subvol_noded()) == NULL) {
		return sp_err_set(e, SP_E_DENIED, 0, "an import not run as root "
		    "goes through space-noded, which maps the user namespace "
		    "its owners are unpacked in (SPACE_LIBVIRT_URI=noded)");
	} else
		in.give_back = 1;
	/* libarchive loaded before the fork: a child of a process with
	 * threads (the API server) had better not dlopen. */
	if (sp_archive_load(e) == -1 ||
	    sp_userns_run(sock, build_apart, &in, &v, e) == -1)
		goto out;
	*config = json_incref(json_object_get(v, "config"));
	*size = (uint64_t)json_integer_value(json_object_get(v, "size"));
	if (!json_is_object(*config) || *size == 0)
		sp_err_set(e, SP_E_INTERNAL, 0, "the user namespace's child "
		    "answered no image");
	else
		rc = 0;
out:
	json_decref(v);
	if (in.src_fd >= 0)
		close(in.src_fd);
	if (sfd >= 0)
		close(sfd);
	return rc;
}

/*
 * Returns 0 when it built the template, 1 when it was there already (built
 * before, or by a concurrent import of the same inputs), -1 on error.
 */
int
sp_template_import(const char *root, const struct sp_template_src *src,
    struct sp_template_row *t, json_t **config, struct sp_err *e)
{
	json_t *conf = NULL;
	char dir[SP_PATH_MAX], staging[SP_PATH_MAX], rootfs[SP_PATH_MAX];
	char img[SP_PATH_MAX], building[SP_PATH_MAX], p[SP_PATH_MAX];
	char q[128], rnd[13];
	unsigned char rb[6];
	struct sp_template_row row;
	struct build b;
	struct sp_err e2;
	struct stat st;
	char *rroot = NULL, *ca = NULL;
	size_t ca_len = 0;
	uint64_t extra, size = 0;
	int lockfd = -1, isdir, fd, made_staging = 0, made_building = 0;
	int ret = -1;

	if (src == NULL || t == NULL || src->rootfs == NULL ||
	    src->kernel == NULL || src->initrd == NULL)
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "template import needs a name, a rootfs, a kernel and an "
		    "initrd");
	if (sp_name_check("template name", src->name, e) == -1)
		return -1;
	if (sodium_init() < 0)
		return sp_err_set(e, SP_E_INTERNAL, 0, "libsodium init failed");
	/* libarchive refuses to extract through any symlink, those above
	 * the staging directory included, so the root is resolved first. */
	if ((rroot = realpath(root, NULL)) == NULL) {
		if (errno == ENOENT)
			return sp_err_set(e, SP_E_NOT_FOUND, 0,
			    "root '%s' does not exist", root);
		return sp_err_sys(e, SP_E_IO, "root '%s'", root);
	}
	if (!sp_subvol_is_btrfs(rroot)) {
		sp_err_set(e, SP_E_BTRFS, 0, "root '%s' is not on btrfs", rroot);
		goto out;
	}
	if (stat(src->rootfs, &st) == -1) {
		if (errno == ENOENT)
			sp_err_set(e, SP_E_NOT_FOUND, 0, "rootfs '%s' does not "
			    "exist", sp_quote(src->rootfs, q, sizeof q));
		else
			sp_err_sys(e, SP_E_IO, "rootfs '%s'",
			    sp_quote(src->rootfs, q, sizeof q));
		goto out;
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "rootfs '%s' is neither an archive "
		    "nor a directory", sp_quote(src->rootfs, q, sizeof q));
		goto out;
	}
	isdir = S_ISDIR(st.st_mode);
	extra = src->disk_extra_bytes ? src->disk_extra_bytes : DEFAULT_EXTRA;

	memset(&row, 0, sizeof row);
	snprintf(row.name, sizeof row.name, "%s", src->name);
	if (node_ca(rroot, &ca, &ca_len, e) == -1 ||
	    digest_inputs(src, isdir, extra, ca, ca_len, row.digest, e) == -1)
		goto out;
	if (sp_path_fmt(p, sizeof p, e, "%s/locks", rroot) == -1 ||
	    sp_path_mkdirs(p, 0755, e) == -1 ||
	    sp_path_fmt(p, sizeof p, e, "%s/templates", rroot) == -1 ||
	    sp_path_mkdirs(p, 0755, e) == -1 ||
	    sp_path_fmt(p, sizeof p, e, "%s/tmp", rroot) == -1 ||
	    sp_path_mkdirs(p, 0700, e) == -1)
		goto out;
	if (lock_digest(rroot, row.digest, &lockfd, e) == -1)
		goto out;
	if (sp_template_path(rroot, &row, dir, sizeof dir, e) == -1)
		goto out;
	if (lstat(dir, &st) == 0) {
		if (load_json(dir, &row, config, e) == -1)
			goto out;
		*t = row;
		ret = 1;
		goto out;
	}
	remove_stale(rroot, row.digest);

	randombytes_buf(rb, sizeof rb);
	sodium_bin2hex(rnd, sizeof rnd, rb, sizeof rb);
	if (sp_path_fmt(staging, sizeof staging, e, "%s/tmp/import-%s-%s",
	    rroot, row.digest, rnd) == -1 ||
	    sp_path_fmt(rootfs, sizeof rootfs, e, "%s/rootfs", staging) == -1 ||
	    sp_path_fmt(img, sizeof img, e, "%s/disk.img", staging) == -1 ||
	    sp_path_fmt(building, sizeof building, e,
	    "%s/templates/.building-%s@%s-%s", rroot, row.name, row.digest,
	    rnd) == -1)
		goto out;
	/* A subvolume, so that removing a whole root tree is one call. */
	if (sp_subvol_create(staging, e) == -1)
		goto out;
	made_staging = 1;
	b = (struct build){ src, isdir, staging, rootfs, img, extra, ca,
	    ca_len, src->daemon, -1, 0, -1, 0 };
	if (build_image(&b, &conf, &size, e) == -1)
		goto out;

	if (sp_subvol_create(building, e) == -1)
		goto out;
	made_building = 1;
	if (sp_path_fmt(p, sizeof p, e, "%s/disk.raw", building) == -1 ||
	    copy_image(img, p, size, e) == -1 ||
	    sp_path_fmt(p, sizeof p, e, "%s/vmlinuz", building) == -1 ||
	    copy_file(src->kernel, p, e) == -1 ||
	    sp_path_fmt(p, sizeof p, e, "%s/initrd.img", building) == -1 ||
	    copy_file(src->initrd, p, e) == -1)
		goto out;
	row.created = (int64_t)time(NULL);
	row.disk_bytes = (int64_t)size;
	if (write_json(building, &row, conf, e) == -1)
		goto out;
	/* Read-only before it gets its final name: nobody may see a writable
	 * template. */
	if (sp_subvol_set_readonly(building, 1, e) == -1)
		goto out;
	/* templates/ is root's: one not root has its read-only snapshot
	 * made there by space-noded, and its build deleted. */
	if (geteuid() != 0) {
		if (sp_subvol_snapshot(building, dir, 1, e) == -1)
			goto out;
	} else if (rename(building, dir) == -1) {
		sp_err_sys(e, SP_E_IO, "rename '%s' to '%s'", building, dir);
		goto out;
	} else
		made_building = 0;
	if (sp_path_fmt(p, sizeof p, e, "%s/templates", rroot) == 0 &&
	    (fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		fsync(fd);
		close(fd);
	}
	*t = row;
	if (config != NULL) {
		*config = conf;
		conf = NULL;
	}
	ret = 0;
out:
	json_decref(conf);
	if (made_building)
		sp_subvol_delete(building, &e2);
	if (made_staging)
		sp_subvol_delete(staging, &e2);
	if (lockfd != -1)
		close(lockfd);
	free(ca);
	free(rroot);
	return ret;
}

int
sp_template_path(const char *root, const struct sp_template_row *t,
    char *out, size_t n, struct sp_err *e)
{
	size_t i;

	/* Both parts become a path component: check them wherever they
	 * came from. */
	if (sp_name_check("template name", t->name, e) == -1)
		return -1;
	for (i = 0; i < 64; i++)
		if (!((t->digest[i] >= '0' && t->digest[i] <= '9') ||
		    (t->digest[i] >= 'a' && t->digest[i] <= 'f')))
			break;
	if (i != 64 || t->digest[64] != '\0')
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "template '%s': digest is not 64 hex digits", t->name);
	return sp_path_fmt(out, n, e, "%s/templates/%s@%s", root, t->name,
	    t->digest);
}
