/*
 * sp_source: templates built on first use (design.md).  A template may be
 * known by where it comes from (space-template add) before it is on this
 * node; the first create that needs it fetches and imports it, and every
 * concurrent create of the same template waits for that one and uses its
 * work: a burst of identical requests is one download and one build.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>


#include "sp_storage.h"
#include "sp_curl.h"

#define FETCH_MAX	(16ULL << 30)	/* a rootfs larger than this is refused */

struct sink {
	int fd;
	uint64_t n;
	int failed;
};

static size_t
sink_write(char *p, size_t size, size_t nmemb, void *arg)
{
	struct sink *s = arg;
	size_t n = size * nmemb, off = 0;
	ssize_t w;

	if (s->n + n > FETCH_MAX) {
		s->failed = EFBIG;
		return 0;
	}
	while (off < n) {
		if ((w = write(s->fd, p + off, n - off)) == -1) {
			if (errno == EINTR)
				continue;
			s->failed = errno;
			return 0;
		}
		off += (size_t)w;
	}
	s->n += n;
	return n;
}

static int
is_url(const char *s)
{
	return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0;
}

int
sp_fetch(const char *src, const char *dst, struct sp_err *e)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	struct sink s = { -1, 0, 0 };
	char *cp[] = { "cp", "--reflink=auto", "--", (char *)src, (char *)dst,
	    NULL };
	long code = 0;
	CURLcode r;
	CURL *h;
	int rc = -1;

	if (!is_url(src))
		return sp_proc_run(cp, e);
	if ((s.fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) == -1)
		return sp_err_sys(e, SP_E_IO, "%s", dst);
	if (sp_curl_load(e) == -1)
		goto out;
	if ((h = sp_curl.curl_easy_init()) == NULL) {
		sp_err_set(e, SP_E_INTERNAL, 0, "curl_easy_init");
		goto out;
	}
	sp_curl.curl_easy_setopt(h, CURLOPT_URL, src);
	sp_curl.curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
	sp_curl.curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
	sp_curl.curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	sp_curl.curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
	sp_curl.curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
	/* Only the web: no file://, no other scheme through a redirect. */
	sp_curl.curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	sp_curl.curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	sp_curl.curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
	sp_curl.curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	sp_curl.curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
	sp_curl.curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	r = sp_curl.curl_easy_perform(h);
	sp_curl.curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	sp_curl.curl_easy_cleanup(h);
	if (s.failed != 0) {
		errno = s.failed;
		sp_err_sys(e, SP_E_IO, "fetch %s", src);
	} else if (r != CURLE_OK)
		sp_err_set(e, SP_E_FETCH, 1, "fetch %s: %s", src,
		    errbuf[0] ? errbuf : sp_curl.curl_easy_strerror(r));
	else if (code >= 400)
		sp_err_set(e, SP_E_FETCH, code >= 500, "fetch %s: HTTP %ld", src, code);
	else if (fsync(s.fd) == -1)
		sp_err_sys(e, SP_E_IO, "fsync %s", dst);
	else
		rc = 0;
out:
	close(s.fd);
	if (rc == -1)
		unlink(dst);
	return rc;
}

/* Fetches the three parts into dir and imports them. */
static int
build(struct sp_ctx *x, const struct sp_source_row *src, const char *dir,
    struct sp_template_row *t, struct sp_err *e)
{
	char rootfs[SP_PATH_MAX], kernel[SP_PATH_MAX], initrd[SP_PATH_MAX];
	char daemon[SP_PATH_MAX];
	struct sp_template_src in = { 0 };

	if (sp_path_fmt(rootfs, sizeof rootfs, e, "%s/rootfs", dir) == -1 ||
	    sp_path_fmt(kernel, sizeof kernel, e, "%s/vmlinuz", dir) == -1 ||
	    sp_path_fmt(initrd, sizeof initrd, e, "%s/initrd.img", dir) == -1)
		return -1;
	if (sp_fetch(src->rootfs, rootfs, e) == -1 ||
	    sp_fetch(src->kernel, kernel, e) == -1 ||
	    sp_fetch(src->initrd, initrd, e) == -1)
		return -1;
	in.name = src->name;
	in.rootfs = rootfs;
	in.kernel = kernel;
	in.initrd = initrd;
	/* A root that is not ours gets the node's guest daemon. */
	if (sp_path_fmt(daemon, sizeof daemon, e, "%s/space-daemon",
	    x->conf.guest) == -1)
		return -1;
	if (access(daemon, F_OK) == 0)
		in.daemon = daemon;
	if (sp_template_import(x->conf.root, &in, t, NULL, e) == -1)
		return -1;
	return sp_db_template_insert(x->db, t, e);
}

int
sp_template_materialize(struct sp_ctx *x, const char *ref,
    struct sp_template_row *t, int *built, struct sp_err *e)
{
	char lock[SP_PATH_MAX], dir[SP_PATH_MAX], rnd[SP_ID_LEN + 1];
	struct sp_source_row src;
	struct sp_err ignored;
	int fd, rc = -1;

	*built = 0;
	if (sp_db_template_get(x->db, ref, t, e) == 0)
		return 0;
	if (e->code != SP_E_NOT_FOUND || strchr(ref, '@') != NULL)
		return -1;
	if (sp_db_source_get(x->db, ref, &src, e) == -1)
		return -1;
	if (sp_path_fmt(lock, sizeof lock, e, "%s/locks/materialize-%s.lock",
	    x->conf.root, ref) == -1)
		return -1;
	if (sp_lock_path(lock, 1, &fd, e) == -1)
		return -1;
	/* Whoever held the lock before us may have built it. */
	if (sp_db_template_get(x->db, ref, t, e) == 0) {
		rc = 0;
		goto out;
	}
	if (sp_id_new(rnd, e) == -1 || sp_path_fmt(dir, sizeof dir, e,
	    "%s/tmp/fetch-%s-%s", x->conf.root, ref, rnd) == -1)
		goto out;
	/* A subvolume: tmp/ is root's, and space-noded makes one there for
	 * a create run as space, as the import's own (sp_template.c). */
	if (sp_subvol_create(dir, e) == -1)
		goto out;
	if (chmod(dir, 0700) == -1)
		rc = sp_err_sys(e, SP_E_IO, "chmod '%s'", dir);
	else
		rc = build(x, &src, dir, t, e);
	sp_subvol_delete(dir, &ignored);
	*built = rc == 0;
out:
	close(fd);
	return rc;
}
