/*
 * test-template: sp_template_import on a real btrfs (SPACE_TEST_BTRFS).
 * Builds tarballs with libarchive's writer, imports them and reads the
 * resulting ext4 image back with debugfs; feeds hostile archives that try to
 * write outside the root; runs concurrent imports of one input and checks
 * that it was built once; on a node with a CA, checks that the guest trusts
 * it, through the links an archive may lay, and that the CA is in the
 * digest.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <btrfsutil.h>

#include "sp.h"
#include "tap.h"

#define MiB	(1024 * 1024)

static struct sp_err e;
static char top[SP_PATH_MAX], root[SP_PATH_MAX], outside[SP_PATH_MAX];
static char kernel[SP_PATH_MAX], initrd[SP_PATH_MAX], daemon_file[SP_PATH_MAX];

/* tap_ok, with the last library error as a diagnostic when it fails. */
static int
check(int cond, const char *name)
{
	if (!tap_ok(cond, name))
		printf("#   last error: %s: %s\n", sp_code_name(e.code), e.msg);
	return cond;
}

static void
die(const char *what)
{
	perror(what);
	exit(1);
}

static void
pathf(char *out, const char *fmt, const char *a, const char *b)
{
	if ((size_t)snprintf(out, SP_PATH_MAX, fmt, a, b) >= SP_PATH_MAX)
		die("path too long");
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void
write_file(const char *path, const void *p, size_t n)
{
	int fd;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd == -1 || write(fd, p, n) != (ssize_t)n || close(fd) == -1)
		die(path);
}

static char *
read_whole(const char *path, size_t *n)
{
	struct stat st;
	char *p;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return NULL;
	if (fstat(fd, &st) == -1 || (p = malloc(st.st_size + 1)) == NULL ||
	    read(fd, p, st.st_size) != st.st_size)
		die(path);
	close(fd);
	p[st.st_size] = '\0';
	*n = st.st_size;
	return p;
}

/* Deterministic, incompressible bytes. */
static void
fill(unsigned char *p, size_t n, uint64_t seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		p[i] = (unsigned char)seed;
	}
}

/* One archive entry to write; type 'f', 'd', 'l' (symlink) or 'h'. */
struct ent {
	char type;
	const char *path;
	const char *target;		/* symlink or hard link target */
	const void *data;
	size_t len;
	int mode, uid, gid;
};

static void
make_tar(const char *file, int zstd, const struct ent *v, size_t n)
{
	struct archive *a;
	struct archive_entry *ae;
	size_t i;

	if ((a = archive_write_new()) == NULL)
		die("archive_write_new");
	archive_write_set_format_pax_restricted(a);
	if (zstd)
		archive_write_add_filter_zstd(a);
	else
		archive_write_add_filter_gzip(a);
	if (archive_write_open_filename(a, file) != ARCHIVE_OK)
		die(archive_error_string(a));
	for (i = 0; i < n; i++) {
		ae = archive_entry_new();
		archive_entry_set_pathname(ae, v[i].path);
		archive_entry_set_uid(ae, v[i].uid);
		archive_entry_set_gid(ae, v[i].gid);
		archive_entry_set_mtime(ae, 1700000000, 0);
		switch (v[i].type) {
		case 'd':
			archive_entry_set_filetype(ae, AE_IFDIR);
			archive_entry_set_perm(ae, v[i].mode ? v[i].mode : 0755);
			break;
		case 'l':
			archive_entry_set_filetype(ae, AE_IFLNK);
			archive_entry_set_perm(ae, 0777);
			archive_entry_set_symlink(ae, v[i].target);
			break;
		case 'h':
			archive_entry_set_filetype(ae, AE_IFREG);
			archive_entry_set_perm(ae, 0644);
			archive_entry_set_hardlink(ae, v[i].target);
			archive_entry_set_size(ae, v[i].len);
			break;
		default:
			archive_entry_set_filetype(ae, AE_IFREG);
			archive_entry_set_perm(ae, v[i].mode ? v[i].mode : 0644);
			archive_entry_set_size(ae, v[i].len);
			break;
		}
		if (archive_write_header(a, ae) != ARCHIVE_OK)
			die(archive_error_string(a));
		if (v[i].len > 0 &&
		    archive_write_data(a, v[i].data, v[i].len) != (la_ssize_t)v[i].len)
			die(archive_error_string(a));
		archive_entry_free(ae);
	}
	if (archive_write_close(a) != ARCHIVE_OK)
		die(archive_error_string(a));
	archive_write_free(a);
}

/*
 * libarchive's writer drops the data of hard link entries, but its reader
 * honours them in pax archives; so this hostile case is written by hand.
 * Every entry gets a pax header carrying its path and link target.
 */
static void
tar_block(int fd, const void *p, size_t n)
{
	static const char zero[512];

	if (write(fd, p, n) != (ssize_t)n ||
	    (n % 512 && write(fd, zero, 512 - n % 512) !=
	    (ssize_t)(512 - n % 512)))
		die("write tar");
}

static void
tar_header(int fd, char type, const char *name, const char *link,
    size_t size)
{
	unsigned char h[512];
	unsigned sum = 0;
	size_t i;

	memset(h, 0, sizeof h);
	snprintf((char *)h, 100, "%s", name);
	snprintf((char *)h + 100, 8, "%07o", 0644);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	snprintf((char *)h + 124, 12, "%011zo", size);
	snprintf((char *)h + 136, 12, "%011o", 1700000000);
	memset(h + 148, ' ', 8);
	h[156] = (unsigned char)type;
	if (link != NULL)
		snprintf((char *)h + 157, 100, "%s", link);
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	for (i = 0; i < sizeof h; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
	tar_block(fd, h, sizeof h);
}

/* One pax record "LEN key=value\n", LEN counting itself. */
static size_t
pax_record(char *out, size_t cap, const char *key, const char *val)
{
	size_t body = strlen(key) + strlen(val) + 3, len = body + 1;

	while ((size_t)snprintf(NULL, 0, "%zu", len) + body != len)
		len++;
	return (size_t)snprintf(out, cap, "%zu %s=%s\n", len, key, val);
}

static void
raw_entry(int fd, char type, const char *name, const char *link,
    const void *data, size_t len)
{
	char pax[2 * SP_PATH_MAX];
	size_t n;

	n = pax_record(pax, sizeof pax, "path", name);
	if (link != NULL)
		n += pax_record(pax + n, sizeof pax - n, "linkpath", link);
	tar_header(fd, 'x', "PaxHeader", NULL, n);
	tar_block(fd, pax, n);
	tar_header(fd, type, name, link, len);
	if (len > 0)
		tar_block(fd, data, len);
}

/* Runs debugfs -R cmd on an image; returns its stdout (caller frees). */
static char *
debugfs(const char *img, const char *cmd, size_t *len)
{
	char *buf = NULL, *nb;
	size_t cap = 0, n = 0;
	ssize_t r;
	int p[2], status, fd;
	pid_t pid;

	if (pipe(p) == -1)
		die("pipe");
	if ((pid = fork()) == -1)
		die("fork");
	if (pid == 0) {
		fd = open("/dev/null", O_RDWR);
		dup2(fd, 0);
		dup2(fd, 2);
		dup2(p[1], 1);
		close(p[0]);
		execlp("debugfs", "debugfs", "-R", cmd, img, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		if (n + 65536 > cap) {
			cap = cap ? cap * 2 : 1 << 20;
			if ((nb = realloc(buf, cap + 1)) == NULL)
				die("realloc");
			buf = nb;
		}
		r = read(p[0], buf + n, cap - n);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(p[0]);
	waitpid(pid, &status, 0);
	buf[n] = '\0';
	*len = n;
	return buf;
}

static int
is_readonly_subvol(const char *path)
{
	bool ro = false;

	return btrfs_util_get_subvolume_read_only(path, &ro) ==
	    BTRFS_UTIL_OK && ro;
}

/* Entries of a directory whose names start with prefix. */
static int
count_prefix(const char *dir, const char *prefix)
{
	char path[SP_PATH_MAX];
	struct dirent *d;
	DIR *dp;
	int n = 0;

	pathf(path, "%s/%s", root, dir);
	if ((dp = opendir(path)) == NULL)
		return errno == ENOENT ? 0 : -1;
	while ((d = readdir(dp)) != NULL)
		if (strcmp(d->d_name, ".") != 0 &&
		    strcmp(d->d_name, "..") != 0 &&
		    strncmp(d->d_name, prefix, strlen(prefix)) == 0)
			n++;
	closedir(dp);
	return n;
}

static int
exists(const char *dir, const char *name)
{
	char path[SP_PATH_MAX];

	pathf(path, "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

static int
import(const char *name, const char *rootfs, struct sp_template_row *t)
{
	struct sp_template_src src = {
		.name = name, .rootfs = rootfs, .kernel = kernel,
		.initrd = initrd, .daemon = daemon_file, .disk_extra_bytes = 0,
	};

	sp_err_clear(&e);
	return sp_template_import(root, &src, t, NULL, &e);
}

/* A hostile archive must fail with bad-input, leaving nothing behind. */
static void
hostile(const char *what, const char *tar, const struct ent *v, size_t n)
{
	struct sp_template_row t;
	char name[256];
	int r;

	make_tar(tar, 0, v, n);
	r = import("evil", tar, &t);
	snprintf(name, sizeof name, "%s: bad-input", what);
	check(r == -1 && e.code == SP_E_BAD_INPUT, name);
	printf("#   %s: %s\n", sp_code_name(e.code), e.msg);
	snprintf(name, sizeof name, "%s: nothing written outside", what);
	tap_ok(!exists(outside, "evil") && !exists(top, "evil") &&
	    !exists("/abs", "evil") && access("/abs", F_OK) == -1, name);
	snprintf(name, sizeof name, "%s: no staging or building leftovers",
	    what);
	tap_ok(count_prefix("tmp", "") == 0 &&
	    count_prefix("templates", ".building-") == 0 &&
	    count_prefix("templates", "evil@") == 0, name);
}

/* The guest's file path in a template's disk.raw, as debugfs cats it. */
static char *
guest_cat(const struct sp_template_row *t, const char *path, size_t *n)
{
	char dir[SP_PATH_MAX], img[SP_PATH_MAX], cmd[SP_PATH_MAX];

	if (sp_template_path(root, t, dir, sizeof dir, &e) == -1)
		die("template path");
	pathf(img, "%s/%s", dir, "disk.raw");
	pathf(cmd, "%s%s", "cat ", path);
	return debugfs(img, cmd, n);
}

/* An archive whose etc/ssl/certs/ca-certificates.crt is v (after etc/,
 * etc/ssl/ and etc/ssl/certs/ when dirs). */
static int
import_ca_tar(const char *name, const struct ent *v, size_t n,
    struct sp_template_row *t)
{
	char tar[SP_PATH_MAX];

	pathf(tar, "%s/%s.tar.gz", outside, name);
	make_tar(tar, 0, v, n);
	return import(name, tar, t);
}

/* With a node CA, imports make guests that trust it. */
static void
test_node_ca(const char *tar, const char *target)
{
	struct sp_template_row t0, t1, t2;
	char crt[SP_PATH_MAX], p[SP_PATH_MAX], want[8192];
	char *pem, *out;
	size_t pn, n;
	int r, made;

	r = import("base", tar, &t0);
	check(r == 1, "without a CA: the same digest as before");
	check(sp_tls_ca_create(root, "test", &made, &e) == 0 && made == 1,
	    "node CA made");
	pathf(crt, "%s/%s", root, "ca/ca.crt");
	pem = read_whole(crt, &pn);
	r = import("base", tar, &t1);
	check(r == 0 && strcmp(t0.digest, t1.digest) != 0,
	    "with a CA: another digest, built");
	r = import("base", tar, &t2);
	check(r == 1 && strcmp(t1.digest, t2.digest) == 0,
	    "with the same CA: the same digest again");
	out = guest_cat(&t1, "/etc/ssl/certs/space-node-ca.crt", &n);
	tap_ok(n == pn && memcmp(out, pem, n) == 0,
	    "guest /etc/ssl/certs/space-node-ca.crt is ca.crt");
	free(out);
	out = guest_cat(&t1, "/etc/ssl/certs/ca-certificates.crt", &n);
	tap_ok(n == pn && memcmp(out, pem, n) == 0,
	    "guest bundle made where the rootfs had none");
	free(out);
	out = guest_cat(&t1, "/etc/hostname", &n);
	tap_ok(strcmp(out, "space\n") == 0, "the rest of the rootfs is there");
	free(out);

	/* A directory input: its copy is changed, never the directory. */
	pathf(p, "%s/%s", outside, "tree");
	r = import("tree", p, &t2);
	check(r == 0, "a directory input with a CA");
	out = guest_cat(&t2, "/etc/ssl/certs/space-node-ca.crt", &n);
	tap_ok(n == pn && memcmp(out, pem, n) == 0, "its guest trusts the CA");
	free(out);
	pathf(p, "%s/%s", outside, "tree/etc/ssl");
	tap_ok(access(p, F_OK) == -1, "the input directory is untouched");

	{
		const struct ent v[] = {
			{ 'd', "etc", NULL, NULL, 0, 0755, 0, 0 },
			{ 'd', "etc/ssl", NULL, NULL, 0, 0755, 0, 0 },
			{ 'd', "etc/ssl/certs", NULL, NULL, 0, 0755, 0, 0 },
			{ 'f', "etc/ssl/certs/ca-certificates.crt", NULL,
			    "HOST BUNDLE", 11, 0644, 0, 0 },
		};
		r = import_ca_tar("bundle", v, 4, &t2);
		check(r == 0, "a rootfs with a bundle");
		out = guest_cat(&t2, "/etc/ssl/certs/ca-certificates.crt", &n);
		snprintf(want, sizeof want, "HOST BUNDLE\n%s", pem);
		tap_ok(strcmp(out, want) == 0, "its bundle keeps what it had, "
		    "a line break, then the CA");
		free(out);
	}
	{
		/* Links like Fedora's, absolute ones too, resolve inside
		 * the guest. */
		const struct ent v[] = {
			{ 'd', "etc", NULL, NULL, 0, 0755, 0, 0 },
			{ 'd', "etc/pki", NULL, NULL, 0, 0755, 0, 0 },
			{ 'f', "etc/pki/bundle.crt", NULL, "PKI\n", 4, 0644,
			    0, 0 },
			{ 'l', "etc/ssl", "/etc/pki", NULL, 0, 0, 0, 0 },
			{ 'l', "etc/pki/certs", ".", NULL, 0, 0, 0, 0 },
			{ 'l', "etc/pki/ca-certificates.crt", "/etc/pki/bundle.crt",
			    NULL, 0, 0, 0, 0 },
		};
		r = import_ca_tar("links", v, 6, &t2);
		check(r == 0, "a rootfs whose bundle is reached through "
		    "absolute links");
		out = guest_cat(&t2, "/etc/pki/bundle.crt", &n);
		snprintf(want, sizeof want, "PKI\n%s", pem);
		tap_ok(strcmp(out, want) == 0, "the link's guest target got the "
		    "CA");
		free(out);
	}
	{
		const struct ent v[] = {
			{ 'd', "etc", NULL, NULL, 0, 0755, 0, 0 },
			{ 'd', "etc/ssl", NULL, NULL, 0, 0755, 0, 0 },
			{ 'd', "etc/ssl/certs", NULL, NULL, 0, 0755, 0, 0 },
			{ 'l', "etc/ssl/certs/ca-certificates.crt", target,
			    NULL, 0, 0, 0, 0 },
		};
		r = import_ca_tar("evilbundle", v, 4, &t2);
		printf("# bundle -> host file: %s %s\n", r == -1 ? sp_code_name(e.code) :
		    "imported", r == -1 ? e.msg : "");
		out = read_whole(target, &n);
		tap_ok(out && n == 4 && memcmp(out, "orig", 4) == 0,
		    "a bundle linked to a host file: the host file untouched");
		free(out);
	}
	{
		const struct ent v[] = {
			{ 'd', "etc", NULL, NULL, 0, 0755, 0, 0 },
			{ 'l', "etc/ssl", outside, NULL, 0, 0, 0, 0 },
		};
		r = import_ca_tar("evilssl", v, 2, &t2);
		check(r == -1 && e.code == SP_E_BAD_INPUT,
		    "etc/ssl linked to a host directory: bad-input");
		printf("#   %s\n", e.msg);
		pathf(p, "%s/%s", outside, "certs");
		tap_ok(access(p, F_OK) == -1, "nothing made in the host "
		    "directory");
		tap_ok(count_prefix("tmp", "") == 0 &&
		    count_prefix("templates", ".building-") == 0,
		    "no staging or building leftovers");
	}

	/* Another CA, another digest. */
	pathf(p, "%s/%s", root, "ca.old");
	pathf(crt, "%s/%s", root, "ca");
	if (rename(crt, p) == -1)
		die("rename ca");
	check(sp_tls_ca_create(root, "test", &made, &e) == 0 && made == 1,
	    "another node CA made");
	r = import("base", tar, &t2);
	check(r == 0 && strcmp(t2.digest, t1.digest) != 0 &&
	    strcmp(t2.digest, t0.digest) != 0, "another CA: another digest");
	free(pem);
	sp_path_remove_tree(p, &e);
}

static void
remove_all(void)
{
	char path[SP_PATH_MAX];
	struct dirent *d;
	DIR *dp;

	pathf(path, "%s/%s", root, "templates");
	if ((dp = opendir(path)) != NULL) {
		while ((d = readdir(dp)) != NULL) {
			if (strcmp(d->d_name, ".") == 0 ||
			    strcmp(d->d_name, "..") == 0)
				continue;
			pathf(path, "%s/templates/%s", root, d->d_name);
			if (sp_subvol_delete(path, &e) == -1)
				printf("# cleanup: %s\n", e.msg);
		}
		closedir(dp);
	}
	if (sp_path_remove_tree(root, &e) == -1 ||
	    sp_path_remove_tree(outside, &e) == -1)
		printf("# cleanup: %s\n", e.msg);
}

int
main(void)
{
	struct sp_template_row t, t2;
	char tar[SP_PATH_MAX], tar2[SP_PATH_MAX], dir[SP_PATH_MAX];
	char p[SP_PATH_MAX], p2[SP_PATH_MAX], target[SP_PATH_MAX];
	static unsigned char blob[10 * MiB];
	const char *env = getenv("SPACE_TEST_BTRFS");
	unsigned char kbytes[4096];
	struct stat st;
	char *out;
	size_t n;
	double t0, ms;
	int r, i, status, built, reused;
	pid_t pids[4];

	if (env == NULL || *env == '\0') {
		printf("1..0 # SKIP SPACE_TEST_BTRFS not set\n");
		return 0;
	}
	snprintf(top, sizeof top, "%s", env);
	snprintf(p, sizeof p, "test-template-%ld", (long)getpid());
	pathf(root, "%s/%s", top, p);
	pathf(outside, "%s/%s.outside", top, p);
	if (mkdir(root, 0755) == -1 || mkdir(outside, 0755) == -1)
		die(root);
	pathf(kernel, "%s/%s", outside, "vmlinuz");
	pathf(initrd, "%s/%s", outside, "initrd");
	fill(kbytes, sizeof kbytes, 7);
	write_file(kernel, kbytes, sizeof kbytes);
	write_file(initrd, "initrd bytes\n", 13);
	pathf(daemon_file, "%s/%s", outside, "space-daemon");
	write_file(daemon_file, "daemon bytes\n", 13);
	pathf(target, "%s/%s", outside, "target");
	write_file(target, "orig", 4);

	/* A good archive: dirs, files with owners and modes, a symlink, a
	 * hard link and a 10 MiB file. */
	fill(blob, sizeof blob, 42);
	{
		const struct ent good[] = {
			{ 'd', "./", NULL, NULL, 0, 0755, 0, 0 },
			{ 'd', "etc", NULL, NULL, 0, 0755, 0, 0 },
			{ 'f', "etc/hostname", NULL, "space\n", 6, 0644, 0, 0 },
			{ 'l', "etc/link", "hostname", NULL, 0, 0, 0, 0 },
			{ 'l', "etc/abs", "/etc/hostname", NULL, 0, 0, 0, 0 },
			{ 'd', "home/user", NULL, NULL, 0, 0700, 1000, 1000 },
			{ 'f', "home/user/hello", NULL, "hi\n", 3, 0750,
			    1000, 1000 },
			{ 'h', "home/user/hello2", "home/user/hello", NULL, 0,
			    0, 1000, 1000 },
			{ 'f', "data/blob", NULL, blob, sizeof blob, 0600, 0,
			    0 },
		};

		pathf(tar, "%s/%s", outside, "good.tar.gz");
		make_tar(tar, 0, good, sizeof good / sizeof good[0]);
	}

	t0 = now_ms();
	r = import("base", tar, &t);
	ms = now_ms() - t0;
	check(r == 0, "import of a good archive builds it (returns 0)");
	printf("# import of a 10 MiB tar.gz: %.0f ms\n", ms);
	check(strcmp(t.name, "base") == 0 && strlen(t.digest) == 64 &&
	    t.disk_bytes > 0 && t.disk_bytes % MiB == 0 && t.created > 0,
	    "the row has name, digest, disk_bytes, created");
	printf("# digest %s disk_bytes %lld\n", t.digest,
	    (long long)t.disk_bytes);
	check(sp_template_path(root, &t, dir, sizeof dir, &e) == 0,
	    "template path");
	pathf(p, "%s/templates/base@%s", root, t.digest);
	tap_ok(strcmp(p, dir) == 0, "templates/<name>@<digest>");
	tap_ok(sp_subvol_exists(dir) && is_readonly_subvol(dir),
	    "the template is a read-only subvolume");
	pathf(p, "%s/%s", dir, "new");
	tap_ok(open(p, O_WRONLY | O_CREAT, 0644) == -1 && errno == EROFS,
	    "writing into the template fails");
	tap_ok(exists(dir, "disk.raw") && exists(dir, "vmlinuz") &&
	    exists(dir, "initrd.img") && exists(dir, "template.json"),
	    "disk.raw, vmlinuz, initrd.img, template.json");
	pathf(p, "%s/%s", dir, "vmlinuz");
	out = read_whole(p, &n);
	tap_ok(out && n == sizeof kbytes && memcmp(out, kbytes, n) == 0,
	    "vmlinuz is the kernel");
	free(out);
	pathf(p, "%s/%s", dir, "template.json");
	{
		json_t *j = json_load_file(p, 0, NULL);

		tap_ok(j && strcmp(json_string_value(json_object_get(j,
		    "digest")), t.digest) == 0 && json_integer_value(
		    json_object_get(j, "format")) == 1 &&
		    strcmp(json_string_value(json_object_get(j, "name")),
		    "base") == 0 && json_integer_value(json_object_get(j,
		    "disk_bytes")) == t.disk_bytes, "template.json fields");
		json_decref(j);
	}
	pathf(p, "%s/%s", dir, "disk.raw");
	tap_ok(stat(p, &st) == 0 && st.st_size == t.disk_bytes &&
	    (uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size / 4,
	    "disk.raw is sparse");
	printf("# disk.raw: %lld bytes apparent, %lld allocated\n",
	    (long long)st.st_size, (long long)st.st_blocks * 512);

	out = debugfs(p, "cat /etc/hostname", &n);
	tap_ok(strcmp(out, "space\n") == 0, "debugfs: /etc/hostname");
	free(out);
	out = debugfs(p, "cat /data/blob", &n);
	tap_ok(n == sizeof blob && memcmp(out, blob, n) == 0,
	    "debugfs: /data/blob is the 10 MiB written");
	free(out);
	out = debugfs(p, "stat /home/user/hello", &n);
	tap_ok(strstr(out, "User:  1000") && strstr(out, "Group:  1000") &&
	    strstr(out, "Mode:  0750") && strstr(out, "Links: 2"),
	    "debugfs: owner, mode and hard link kept");
	free(out);
	out = debugfs(p, "stat /etc/link", &n);
	tap_ok(strstr(out, "Type: symlink") && strstr(out, "\"hostname\""),
	    "debugfs: symlink kept");
	free(out);

	r = import("base", tar, &t2);
	check(r == 1, "importing the same archive again reuses it (returns 1)");
	tap_ok(strcmp(t.digest, t2.digest) == 0 && t.created == t2.created &&
	    t.disk_bytes == t2.disk_bytes, "same digest, same template");
	tap_ok(count_prefix("templates", "") == 1, "one template directory");

	/* A directory input: the same tree, unpacked by hand. */
	pathf(p, "%s/%s", outside, "tree");
	pathf(p2, "%s/%s", p, "etc");
	if (mkdir(p, 0755) == -1 || mkdir(p2, 0755) == -1)
		die(p2);
	pathf(p2, "%s/%s", p, "etc/hostname");
	write_file(p2, "tree\n", 5);
	pathf(p2, "%s/%s", p, "etc/link");
	if (symlink("/etc/hostname", p2) == -1)
		die(p2);
	r = import("tree", p, &t);
	check(r == 0, "import of a directory");
	r = import("tree", p, &t2);
	check(r == 1 && strcmp(t.digest, t2.digest) == 0,
	    "a directory digest is stable");
	sp_template_path(root, &t, dir, sizeof dir, &e);
	pathf(p2, "%s/%s", dir, "disk.raw");
	out = debugfs(p2, "cat /etc/hostname", &n);
	tap_ok(strcmp(out, "tree\n") == 0, "debugfs: directory content");
	free(out);
	pathf(p2, "%s/%s", p, "etc/hostname");
	chmod(p2, 0600);
	r = import("tree", p, &t2);
	check(r == 0 && strcmp(t.digest, t2.digest) != 0,
	    "a mode change gives another digest");

	/* Bad requests. */
	r = import("../x", tar, &t);
	tap_ok(r == -1 && e.code == SP_E_BAD_INPUT,
	    "a name with '/' is bad-input");
	pathf(p, "%s/%s", outside, "missing.tar");
	r = import("x", p, &t);
	tap_ok(r == -1 && e.code == SP_E_NOT_FOUND,
	    "a missing rootfs is not-found");
	pathf(p, "%s/%s", outside, "garbage.tar");
	write_file(p, "this is not an archive at all", 29);
	r = import("x", p, &t);
	check(r == -1 && e.code == SP_E_BAD_INPUT,
	    "garbage input is bad-input");
	printf("#   %s\n", e.msg);

	/* Hostile archives. */
	pathf(tar2, "%s/%s", outside, "evil.tar.gz");
	{
		const struct ent v[] = {
			{ 'f', "ok", NULL, "x", 1, 0, 0, 0 },
			{ 'f', "../evil", NULL, "x", 1, 0, 0, 0 },
		};
		hostile("entry ../evil", tar2, v, 2);
	}
	{
		const struct ent v[] = {
			{ 'f', "/abs/evil", NULL, "x", 1, 0, 0, 0 },
		};
		hostile("entry /abs/evil", tar2, v, 1);
	}
	{
		const struct ent v[] = {
			{ 'l', "lnk", outside, NULL, 0, 0, 0, 0 },
			{ 'f', "lnk/evil", NULL, "x", 1, 0, 0, 0 },
		};
		hostile("lnk -> outside, then lnk/evil", tar2, v, 2);
	}
	{
		const struct ent v[] = {
			{ 'l', "lnk", "/etc", NULL, 0, 0, 0, 0 },
			{ 'f', "lnk/space-test-evil", NULL, "x", 1, 0, 0, 0 },
		};
		hostile("lnk -> /etc, then lnk/space-test-evil", tar2, v, 2);
		tap_ok(access("/etc/space-test-evil", F_OK) == -1,
		    "nothing written into /etc");
	}
	{
		const struct ent v[] = {
			{ 'f', "a", NULL, "x", 1, 0, 0, 0 },
			{ 'h', "b", "../../../evil", NULL, 0, 0, 0, 0 },
		};
		hostile("hard link to ../../../evil", tar2, v, 2);
	}
	{
		const struct ent v[] = {
			{ 'd', "sub", NULL, NULL, 0, 0, 0, 0 },
			{ 'f', "sub/../../evil", NULL, "x", 1, 0, 0, 0 },
		};
		hostile("entry sub/../../evil", tar2, v, 2);
	}
	{
		/* A hard link to a symlink that points outside, carrying
		 * data: writing it must not follow the symlink. */
		static const char zero[1024];
		struct sp_template_row th;
		int fd;

		pathf(tar2, "%s/%s", outside, "hardlink.tar");
		fd = open(tar2, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd == -1)
			die(tar2);
		raw_entry(fd, '2', "lnk", target, NULL, 0);
		raw_entry(fd, '1', "h", "lnk", "EVIL!", 5);
		tar_block(fd, zero, sizeof zero);
		close(fd);
		r = import("hl", tar2, &th);
		printf("# hard link to symlink with data: %s %s\n",
		    r == -1 ? sp_code_name(e.code) : "imported", r == -1 ? e.msg : "");
		out = read_whole(target, &n);
		tap_ok(out && n == 4 && memcmp(out, "orig", 4) == 0,
		    "hard link to an outside symlink: target untouched");
		free(out);
		tap_ok(count_prefix("tmp", "") == 0 &&
		    count_prefix("templates", ".building-") == 0,
		    "hard link to symlink: no leftovers");
	}

	/* Four concurrent imports of one new input build it once. */
	pathf(tar2, "%s/%s", outside, "conc.tar.zst");
	{
		const struct ent v[] = {
			{ 'f', "conc", NULL, blob, MiB, 0, 0, 0 },
		};
		make_tar(tar2, 1, v, 1);
	}
	for (i = 0; i < 4; i++) {
		if ((pids[i] = fork()) == -1)
			die("fork");
		if (pids[i] == 0) {
			r = import("conc", tar2, &t);
			if (r == -1)
				fprintf(stderr, "child: %s: %s\n", sp_code_name(e.code),
				    e.msg);
			_exit(r == 0 ? 10 : r == 1 ? 11 : 1);
		}
	}
	built = reused = 0;
	for (i = 0; i < 4; i++) {
		if (waitpid(pids[i], &status, 0) == -1)
			die("waitpid");
		if (WIFEXITED(status) && WEXITSTATUS(status) == 10)
			built++;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 11)
			reused++;
	}
	printf("# concurrent: %d built, %d reused\n", built, reused);
	tap_ok(built == 1 && reused == 3,
	    "4 concurrent imports: all succeed, one built it");
	tap_ok(count_prefix("templates", "conc@") == 1,
	    "one template directory for them");
	tap_ok(count_prefix("tmp", "") == 0 &&
	    count_prefix("templates", ".building-") == 0,
	    "no staging or building leftovers");

	test_node_ca(tar, target);
	remove_all();
	return tap_done();
}
