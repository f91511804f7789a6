/*
 * test-fs: the file ops end to end, sp_fs against the real guest daemon
 * (build/guest/space-daemon, or $SPACE_DAEMON) in its listening test mode;
 * then a fake guest that sends hostile tar streams, which the host must
 * refuse without writing outside the destination.  TAP output.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "sp.h"
#include "tap.h"

#define ID	"fsfsfsfsfs23"
#define ID2	"fakefakefa23"

static char dir[64];

/* A file of n bytes cycling through all 256 values. */
static int
make_bytes(const char *path, size_t n)
{
	unsigned char b[256];
	size_t i;
	FILE *f;

	for (i = 0; i < 256; i++)
		b[i] = (unsigned char)i;
	if ((f = fopen(path, "w")) == NULL)
		return -1;
	for (i = 0; i < n; i += 256)
		fwrite(b, 1, n - i < 256 ? n - i : 256, f);
	return fclose(f);
}

static int
same_file(const char *a, const char *b)
{
	char cmd[600];

	snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
	return system(cmd) == 0;
}

static int
count1(json_t *ent, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

/* A request as a hostile host would send it: the daemon's own checks. */
static int
raw_call(struct sp_chan *c, const char *req, char *code, size_t n)
{
	struct sp_frame f;
	struct sp_err e;
	json_t *j;
	uint32_t s = sp_chan_stream_new(c);

	j = json_loads(req, 0, NULL);
	if (j == NULL || sp_chan_send_json(c, SP_FR_REQ, s, j, 2000, &e) == -1) {
		json_decref(j);
		return -1;
	}
	json_decref(j);
	if (sp_chan_recv(c, &f, 5000, &e) == -1)
		return -1;
	if (f.type == SP_FR_ERROR) {
		sp_chan_error_frame(&f, &e);
		snprintf(code, n, "%s", sp_code_name(e.code));
	} else
		snprintf(code, n, "type%u", f.type);
	return 0;
}

static void
test_ops(struct sp_chan *c)
{
	char w[128], a[256], b[256], code[32], big[5000];
	struct sp_err e;
	struct stat st;
	uint64_t size;
	json_t *j;
	int fd, n, r, trunc;

	snprintf(w, sizeof w, "%s/w", dir);
	mkdir(w, 0755);
	snprintf(a, sizeof a, "%s/bytes", dir);
	make_bytes(a, 256 * 1000 + 17);

	/* write + read of all 256 byte values */
	snprintf(b, sizeof b, "%s/bin", w);
	fd = open(a, O_RDONLY);
	r = sp_fs_write(c, b, fd, 0640, 0, &size, &e);
	close(fd);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && size == 256 * 1000 + 17,
	    "fs.write of 256000 bytes of every value");
	tap_ok(stat(b, &st) == 0 && (st.st_mode & 07777) == 0640 &&
	    same_file(a, b), "the file is there, mode 0640, same bytes");
	snprintf(a, sizeof a, "%s/back", dir);
	fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	r = sp_fs_read(c, b, fd, &size, &e);
	close(fd);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && size == 256 * 1000 + 17 &&
	    same_file(a, b), "fs.read gives the same bytes back");

	/* an empty write, an append */
	fd = open("/dev/null", O_RDONLY);
	r = sp_fs_write(c, b, fd, -1, 0, &size, &e);
	close(fd);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && size == 0 && stat(b, &st) == 0 &&
	    st.st_size == 0 && (st.st_mode & 07777) == 0640,
	    "an empty replace keeps the mode");
	fd = open(a, O_RDONLY);
	r = sp_fs_write(c, b, fd, -1, 1, &size, &e);
	close(fd);
	fd = open(a, O_RDONLY);
	r |= sp_fs_write(c, b, fd, -1, 1, &size, &e);
	close(fd);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && stat(b, &st) == 0 &&
	    st.st_size == 2 * (256 * 1000 + 17), "fs.append twice");

	fd = open(a, O_RDONLY);
	r = sp_fs_write(c, "/dev/null", fd, -1, 1, &size, &e);
	close(fd);
	tap_okf(sp_code_name(e.code), e.msg, r == 0, "fs.append to a device (no fsync)");

	/* stat */
	r = sp_fs_stat(c, b, 0, &j, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && strcmp(json_string_value(
	    json_object_get(j, "type")), "file") == 0 &&
	    json_integer_value(json_object_get(j, "mode")) == 0640 &&
	    json_integer_value(json_object_get(j, "size")) == st.st_size,
	    "fs.stat: file, mode, size");
	json_decref(j);
	snprintf(a, sizeof a, "%s/link", w);
	symlink("bin", a);
	r = sp_fs_stat(c, a, 0, &j, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && strcmp(json_string_value(
	    json_object_get(j, "type")), "symlink") == 0 &&
	    strcmp(json_string_value(json_object_get(j, "target")), "bin") == 0,
	    "fs.stat of a symlink tells its target");
	json_decref(j);
	snprintf(a, sizeof a, "%s/none", w);
	r = sp_fs_stat(c, a, 0, &j, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_NOT_FOUND,
	    "fs.stat of a missing file: not-found");

	/* mkdir, list, rename, remove */
	snprintf(a, sizeof a, "%s/d1/d2/d3", w);
	r = sp_fs_mkdir(c, a, 1, 0700, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && stat(a, &st) == 0 &&
	    S_ISDIR(st.st_mode), "fs.mkdir with parents");
	r = sp_fs_mkdir(c, a, 1, 0700, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0, "fs.mkdir -p of an existing dir is ok");
	r = sp_fs_mkdir(c, a, 0, 0700, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_EXISTS,
	    "fs.mkdir without parents of an existing dir: exists");
	n = 0;
	r = sp_fs_list(c, w, count1, &n, &trunc, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && n == 3 && !trunc,
	    "fs.list: 3 entries (%d)", n);
	snprintf(b, sizeof b, "%s/many", w);
	mkdir(b, 0755);
	for (n = 0; n < 3000; n++) {
		snprintf(big, sizeof big, "%s/entry-with-a-longish-name-%05d",
		    b, n);
		close(open(big, O_WRONLY | O_CREAT, 0600));
	}
	n = 0;
	r = sp_fs_list(c, b, count1, &n, &trunc, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && n == 3000,
	    "fs.list of 3000 entries over several frames (%d)", n);
	snprintf(a, sizeof a, "%s/d1", w);
	snprintf(b, sizeof b, "%s/d1-moved", w);
	r = sp_fs_rename(c, a, b, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && stat(b, &st) == 0 &&
	    stat(a, &st) == -1, "fs.rename");
	r = sp_fs_remove(c, b, 0, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_NOT_EMPTY,
	    "fs.remove of a full dir without recursion: not-empty");
	/* A symlink into the tree to remove: the link goes, not its target. */
	snprintf(a, sizeof a, "%.200s/d2/outside", b);
	snprintf(big, sizeof big, "%s/bin", w);
	symlink(big, a);
	r = sp_fs_remove(c, b, 1, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && stat(b, &st) == -1 &&
	    stat(big, &st) == 0, "fs.remove -r; a symlink's target stays");

	/* bad input, host side and daemon side */
	r = sp_fs_stat(c, "relative", 0, &j, &e);
	tap_ok(r == -1 && e.code == SP_E_BAD_INPUT,
	    "relative path refused on the host");
	raw_call(c, "{\"op\":\"fs.stat\",\"path\":\"relative\"}", code,
	    sizeof code);
	tap_okf(code, "", strcmp(code, "bad-input") == 0,
	    "relative path refused by the daemon");
	raw_call(c, "{\"op\":\"fs.read\",\"path\":\"\"}", code, sizeof code);
	tap_ok(strcmp(code, "bad-input") == 0, "empty path refused");
	raw_call(c, "{\"op\":\"fs.stat\",\"path\":5}", code, sizeof code);
	tap_ok(strcmp(code, "bad-input") == 0, "non-string path refused");
	memset(big, 'a', sizeof big - 1);
	big[0] = '/';
	big[sizeof big - 1] = '\0';
	j = json_pack("{s:s,s:s}", "op", "fs.stat", "path", big);
	{
		char *s = json_dumps(j, 0);

		raw_call(c, s, code, sizeof code);
		free(s);
	}
	json_decref(j);
	tap_ok(strcmp(code, "bad-input") == 0, "a 5000-byte path refused");
	raw_call(c, "{\"op\":\"fs.mkdir\",\"path\":\"/tmp/x\",\"mode\":-1}",
	    code, sizeof code);
	tap_ok(strcmp(code, "bad-input") == 0, "a bad mode refused");
	r = sp_fs_read(c, w, 1, &size, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_BAD_INPUT,
	    "fs.read of a directory: bad-input");
	r = sp_fs_remove(c, "/", 1, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_BAD_INPUT,
	    "fs.remove of / refused");
	/* The guest fails at once; the host's data that follows is dropped
	 * and the call ends with the guest's reason. */
	snprintf(a, sizeof a, "%s/bytes", dir);
	fd = open(a, O_RDONLY);
	r = sp_fs_write(c, "/no/such/dir/file", fd, -1, 0, &size, &e);
	close(fd);
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_NOT_FOUND,
	    "fs.write into a missing dir: not-found after the data");
	/* after all that the channel still works */
	r = sp_fs_stat(c, w, 0, &j, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0, "the channel still serves calls");
	json_decref(j);
}

static void
test_tar(struct sp_chan *c)
{
	char t[128], p[256], q[256], d[128];
	struct sp_err e;
	struct stat st;
	ssize_t n;
	int fd, r;

	/* A tree: a file with odd mode, a symlink, a subdir, a sparse file. */
	snprintf(t, sizeof t, "%s/tree", dir);
	mkdir(t, 0750);
	snprintf(p, sizeof p, "%s/exe", t);
	make_bytes(p, 70000);
	chmod(p, 0751);
	snprintf(p, sizeof p, "%s/sub", t);
	mkdir(p, 0700);
	snprintf(p, sizeof p, "%s/sub/sparse", t);
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	pwrite(fd, "end", 3, 64 << 20);
	close(fd);
	snprintf(p, sizeof p, "%s/link", t);
	symlink("exe", p);

	/* guest -> host */
	snprintf(d, sizeof d, "%s/out", dir);
	mkdir(d, 0755);
	r = sp_fs_get(c, t, d, NULL, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0, "tar.out of a tree into a host dir");
	snprintf(p, sizeof p, "%s/tree/exe", d);
	snprintf(q, sizeof q, "%s/exe", t);
	tap_ok(stat(p, &st) == 0 && (st.st_mode & 07777) == 0751 &&
	    same_file(p, q), "file and mode kept");
	snprintf(p, sizeof p, "%s/tree/link", d);
	n = readlink(p, q, sizeof q - 1);
	tap_ok(n == 3 && memcmp(q, "exe", 3) == 0, "symlink kept");
	snprintf(p, sizeof p, "%s/tree/sub/sparse", d);
	tap_okf("", "", stat(p, &st) == 0 && st.st_size == (64 << 20) + 3 &&
	    st.st_blocks * 512 < (1 << 20), "sparse file stays sparse "
	    "(%lld blocks)", (long long)st.st_blocks);
	snprintf(p, sizeof p, "%s/tree", d);
	tap_ok(stat(p, &st) == 0 && (st.st_mode & 07777) == 0750,
	    "top dir mode kept");
	r = sp_fs_get(c, t, d, "renamed", &e);
	snprintf(p, sizeof p, "%s/renamed/exe", d);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && stat(p, &st) == 0,
	    "tar.out under another name");

	/* host -> guest */
	snprintf(d, sizeof d, "%s/in", dir);
	mkdir(d, 0755);
	r = sp_fs_put(c, t, d, NULL, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == 0, "tar.in of a tree from the host");
	snprintf(p, sizeof p, "%s/tree/exe", d);
	snprintf(q, sizeof q, "%s/exe", t);
	tap_ok(stat(p, &st) == 0 && (st.st_mode & 07777) == 0751 &&
	    same_file(p, q), "file and mode kept");
	snprintf(p, sizeof p, "%s/tree/link", d);
	n = readlink(p, q, sizeof q - 1);
	tap_ok(n == 3 && memcmp(q, "exe", 3) == 0, "symlink kept");
	snprintf(p, sizeof p, "%s/tree/sub/sparse", d);
	tap_ok(stat(p, &st) == 0 && st.st_size == (64 << 20) + 3 &&
	    st.st_blocks * 512 < (1 << 20), "sparse file stays sparse");
	snprintf(p, sizeof p, "%s/bytes", dir);
	r = sp_fs_put(c, p, d, "one-file", &e);
	snprintf(q, sizeof q, "%s/one-file", d);
	tap_okf(sp_code_name(e.code), e.msg, r == 0 && same_file(p, q),
	    "a single file in under a new name");
	r = sp_fs_put(c, t, "/no/such/dir", NULL, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_NOT_FOUND,
	    "tar.in into a missing dir: not-found");
	r = sp_fs_get(c, "/no/such/thing", d, NULL, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_NOT_FOUND,
	    "tar.out of a missing path: not-found");
}

/* ---- hostile tar streams ---- */

struct tbuf {
	unsigned char *p;
	size_t n;
};

/* A tar in memory of entries "type:name[:target]", data "x". */
static void
make_tar(struct tbuf *b, const char *const *ents)
{
	static unsigned char mem[1 << 16];
	struct archive *w = archive_write_new();
	struct archive_entry *en;
	char spec[256], *name, *target;
	size_t used = 0;

	archive_write_set_format_pax_restricted(w);
	archive_write_set_bytes_in_last_block(w, 1);
	archive_write_open_memory(w, mem, sizeof mem, &used);
	for (; *ents != NULL; ents++) {
		snprintf(spec, sizeof spec, "%s", *ents);
		name = spec + 2;
		if ((target = strchr(name, ':')) != NULL)
			*target++ = '\0';
		en = archive_entry_new();
		archive_entry_set_pathname(en, name);
		archive_entry_set_mtime(en, 1, 0);
		switch (spec[0]) {
		case 'd':
			archive_entry_set_filetype(en, AE_IFDIR);
			archive_entry_set_perm(en, 0755);
			break;
		case 'l':
			archive_entry_set_filetype(en, AE_IFLNK);
			archive_entry_set_symlink(en, target);
			archive_entry_set_perm(en, 0777);
			break;
		case 'h':
			archive_entry_set_filetype(en, AE_IFREG);
			archive_entry_set_hardlink(en, target);
			break;
		case 'c':
			archive_entry_set_filetype(en, AE_IFCHR);
			archive_entry_set_rdev(en, 0x0103);
			archive_entry_set_perm(en, 0666);
			break;
		case 's':
			archive_entry_set_filetype(en, AE_IFREG);
			archive_entry_set_perm(en, 04755);
			archive_entry_set_size(en, 1);
			break;
		default:
			archive_entry_set_filetype(en, AE_IFREG);
			archive_entry_set_perm(en, 0644);
			archive_entry_set_size(en, 1);
		}
		archive_write_header(w, en);
		if (archive_entry_size(en) > 0)
			archive_write_data(w, "x", 1);
		archive_entry_free(en);
	}
	archive_write_close(w);
	archive_write_free(w);
	b->p = mem;
	b->n = used;
}

/* A fake guest: answers hello, then each request with the tar in b. */
static void
fake_guest(int lfd, const struct tbuf *b, int ncalls)
{
	unsigned char buf[8192];
	struct sp_frame_dec d;
	struct sp_frame f;
	struct sp_err e;
	json_t *j, *r;
	size_t off, k;
	ssize_t n;
	int fd, calls = 0, got;

	fd = -1;
	sp_frame_dec_init(&d);
	while (calls < ncalls) {
		got = 0;
		while (!got) {
			while (fd >= 0 &&
			    (got = sp_frame_dec_next(&d, &f, &e)) == 0) {
				if ((n = read(fd, buf, sizeof buf)) <= 0) {
					close(fd);
					fd = -1;
				} else
					sp_frame_dec_feed(&d, buf, n, &e);
			}
			/* The host hung up: take its next connection. */
			if (fd < 0 || got == -1) {
				if (fd >= 0)
					close(fd);
				sp_frame_dec_release(&d);
				sp_frame_dec_init(&d);
				if ((fd = accept(lfd, NULL, NULL)) == -1)
					_exit(1);
				got = 0;
				continue;
			}
			if (f.type == SP_FR_HELLO) {
				sp_frame_json(&f, &j, &e);
				r = json_pack("{s:i,s:s,s:O,s:i}", "version",
				    SP_PROTO_VERSION, "boot_id", "fake",
				    "nonce", json_object_get(j, "nonce"),
				    "ports", 1);
				sp_frame_write_json(fd, SP_FR_HELLO, f.stream, r,
				    &e);
				json_decref(r);
				json_decref(j);
				got = 0;
			} else if (f.type != SP_FR_REQ)
				got = 0;
		}
		for (off = 0; off < b[calls].n; off += k) {
			k = b[calls].n - off < 1000 ? b[calls].n - off : 1000;
			sp_frame_write(fd, SP_FR_STDOUT, f.stream,
			    b[calls].p + off, k, &e);
			/* The last call: half a stream, then silence. */
			if (calls == ncalls - 1 && off > b[calls].n / 2)
				for (;;)
					pause();
		}
		sp_frame_write(fd, SP_FR_EXIT, f.stream, "{\"status\":0}", 12,
		    &e);
		calls++;
	}
	_exit(0);
}

static void
test_hostile(void)
{
	static const char *const dotdot[] = { "d:top", "f:top/../escaped",
	    NULL };
	static const char *const absol[] = { "d:top", "f:/tmp/escaped-abs",
	    NULL };
	static const char *const symw[] = { "d:top", "l:top/link:OUTSIDE",
	    "f:top/link/escaped", NULL };
	static const char *const other[] = { "f:top", "f:other", NULL };
	static const char *const dev[] = { "d:top", "c:top/null", NULL };
	static const char *const hard[] = { "d:top", "h:top/h:/etc/passwd",
	    NULL };
	static const char *const suid[] = { "d:top", "s:top/suid", NULL };
	static const char *const *const tars[] = { dotdot, absol, symw, other,
	    dev, hard, suid };
	static const char *what[] = { "a ../ entry", "an absolute entry",
	    "a write through a symlink", "an entry beside top",
	    "a device node", "a hard link to /etc/passwd", "a set-id file" };
	static unsigned char copies[9][1 << 16];
	struct tbuf b[9];
	struct sockaddr_un sa;
	char sub[100], d[200], p[300], outside[100];
	struct sp_chan *c;
	struct sp_err e;
	struct stat st;
	int64_t t0;
	pid_t pid;
	int lfd, i, r, escaped;

	snprintf(sub, sizeof sub, "%.60s/%s", dir, ID2);
	mkdir(sub, 0700);
	snprintf(outside, sizeof outside, "%.60s/outside", dir);
	mkdir(outside, 0755);
	for (i = 0; i < 7; i++) {
		char spec[3][64];
		const char *ents[4];
		int k;

		/* The symlink's target is this run's outside dir. */
		for (k = 0; tars[i][k] != NULL; k++) {
			if (strstr(tars[i][k], "OUTSIDE") != NULL) {
				snprintf(spec[k], sizeof spec[k],
				    "l:top/link:%.50s", outside);
				ents[k] = spec[k];
			} else
				ents[k] = tars[i][k];
		}
		ents[k] = NULL;
		make_tar(&b[i], ents);
		memcpy(copies[i], b[i].p, b[i].n);
		b[i].p = copies[i];
	}
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%.80s/space.0.sock", sub);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) == -1 ||
	    listen(lfd, 1) == -1) {
		tap_ok(0, "fake guest: listen");
		return;
	}
	/* Noise that is no tar, and a good tar the guest stops sending. */
	for (i = 0; i < 4096; i++)
		copies[7][i] = (unsigned char)(i * 7919 >> 3);
	b[7].p = copies[7];
	b[7].n = 4096;
	b[8] = b[6];
	if ((pid = fork()) == 0)
		fake_guest(lfd, b, 9);
	close(lfd);
	if (sp_chan_open(&c, dir, ID2, 3000, &e) == -1) {
		tap_okf(sp_code_name(e.code), e.msg, 0, "fake guest: open");
		goto out;
	}
	for (i = 0; i < 7; i++) {
		snprintf(d, sizeof d, "%s/h%d", dir, i);
		mkdir(d, 0755);
		r = sp_fs_get(c, "/top", d, NULL, &e);
		snprintf(p, sizeof p, "%s/escaped", outside);
		escaped = stat(p, &st) == 0 ||
		    stat("/tmp/escaped-abs", &st) == 0;
		snprintf(p, sizeof p, "%s/escaped", dir);
		escaped |= stat(p, &st) == 0;
		if (i == 6) {
			snprintf(p, sizeof p, "%s/top/suid", d);
			tap_okf(sp_code_name(e.code), e.msg, r == 0 && stat(p, &st) == 0 &&
			    (st.st_mode & 06000) == 0,
			    "hostile guest: %s loses its set-id bit", what[i]);
			continue;
		}
		if (i == 2) {
			/* With ARCHIVE_EXTRACT_UNLINK libarchive removes the
			 * symlink and makes a directory in its place: safe too. */
			snprintf(p, sizeof p, "%s/top/link", d);
			tap_okf(sp_code_name(e.code), e.msg, !escaped && (r == -1 ||
			    (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))),
			    "hostile guest: %s stays inside (%s)", what[i],
			    r == -1 ? "refused" : "link replaced");
			goto next;
		}
		tap_okf(sp_code_name(e.code), e.msg, r == -1 && !escaped &&
		    e.code == SP_E_BAD_INPUT,
		    "hostile guest: %s is refused, nothing escapes", what[i]);
		if (i == 4) {
			snprintf(p, sizeof p, "%s/top/null", d);
			tap_ok(lstat(p, &st) == -1, "no device node made");
		}
next:
		/* A refused stream leaves the channel mid-call: start over. */
		sp_chan_close(c);
		if (sp_chan_open(&c, dir, ID2, 3000, &e) == -1) {
			tap_okf(sp_code_name(e.code), e.msg, 0, "fake guest: reopen");
			goto out;
		}
	}
	snprintf(d, sizeof d, "%s/h7", dir);
	mkdir(d, 0755);
	r = sp_fs_get(c, "/top", d, NULL, &e);
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_BAD_INPUT,
	    "hostile guest: noise for a tar is refused: %s", e.msg);
	sp_chan_close(c);
	if (sp_chan_open(&c, dir, ID2, 3000, &e) == -1) {
		tap_okf(sp_code_name(e.code), e.msg, 0, "fake guest: reopen");
		goto out;
	}
	/* 3 s of silence, not the 30 the commands wait. */
	sp_fs_timeout_ms = 3000;
	t0 = sp_clock_ms();
	r = sp_fs_get(c, "/top", d, NULL, &e);
	t0 = sp_clock_ms() - t0;
	tap_okf(sp_code_name(e.code), e.msg, r == -1 && e.code == SP_E_TIMED_OUT &&
	    t0 >= sp_fs_timeout_ms - 1000 && t0 < sp_fs_timeout_ms + 5000,
	    "hostile guest: silence mid-stream is a timeout after %lld ms",
	    (long long)t0);
	sp_fs_timeout_ms = SP_FS_TIMEOUT_MS;
	sp_chan_close(c);
out:
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

int
main(void)
{
	char sub[100], sock[300];
	struct sp_chan *c = NULL;
	struct sp_err e;
	const char *daemon;
	pid_t dpid;

	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof dir, "/tmp/test-fs.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(sub, sizeof sub, "%.60s/%s", dir, ID);
	snprintf(sock, sizeof sock, "%s/space.0.sock", sub);
	mkdir(sub, 0700);
	daemon = getenv("SPACE_DAEMON");
	if (daemon == NULL)
		daemon = "build/guest/space-daemon";
	if (access(daemon, X_OK) == -1) {
		printf("ok 1 # SKIP no guest daemon at %s\n", daemon);
		tap_n = 1;
		goto hostile;
	}
	if ((dpid = fork()) == 0) {
		int nul = open("/dev/null", O_WRONLY);

		if (getenv("TEST_VERBOSE") == NULL)
			dup2(nul, 2);
		execl(daemon, daemon, "-l", sock, (char *)NULL);
		_exit(127);
	}
	if (tap_okf(sp_code_name(e.code), e.msg, sp_chan_wait_ready(dir, ID, 5000, &e) == 0 &&
	    sp_chan_open(&c, dir, ID, 2000, &e) == 0, "daemon: ready")) {
		test_ops(c);
		test_tar(c);
	}
	sp_chan_close(c);
	kill(dpid, SIGTERM);
	waitpid(dpid, NULL, 0);
hostile:
	test_hostile();
	snprintf(sub, sizeof sub, "rm -rf '%.60s'", dir);
	(void)!system(sub);
	return tap_done();
}
