/*
 * space-cp: copy files and trees between the host and a sandbox, as
 * `docker cp` does.  One side is ID:PATH; the other a host path, or "-"
 * for a tar stream on stdin or stdout.  Trees travel as tar streams
 * (libarchive); what comes from the guest is extracted with checks that
 * keep it inside the destination.
 */
#include <sys/stat.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-cp ID:PATH HOSTPATH|-\n"
	    "       space-cp HOSTPATH|- ID:PATH\n");
	sp_usage_exit();
}

/* 1 with ref and path set when s is ID:PATH or NAME:PATH. */
static int
guest_side(const char *s, char ref[SP_HANDLE_MAX + 1], const char **path)
{
	const char *colon = strchr(s, ':');

	if (colon == NULL || colon - s > SP_HANDLE_MAX)
		return 0;
	memcpy(ref, s, (size_t)(colon - s));
	ref[colon - s] = '\0';
	if (!sp_id_valid(ref) && !sp_handle_valid(ref))
		return 0;
	*path = colon + 1;
	return 1;
}

/* dir and last component of a path; "/a" is "/" and "a". */
static int
split(const char *path, char *dir, size_t n, char *name, size_t m,
    struct sp_err *e)
{
	size_t len = strlen(path), i;

	while (len > 1 && path[len - 1] == '/')
		len--;
	for (i = len; i > 0 && path[i - 1] != '/'; i--)
		;
	if (len - i == 0 || len - i >= m || i >= n ||
	    (len - i == 1 && path[i] == '.') ||
	    (len - i == 2 && strncmp(path + i, "..", 2) == 0))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "\"%.200s\" names no file",
		    path);
	memcpy(name, path + i, len - i);
	name[len - i] = '\0';
	if (i == 0)
		snprintf(dir, n, ".");
	else if (i == 1)
		snprintf(dir, n, "/");
	else
		snprintf(dir, n, "%.*s", (int)(i - 1), path);
	return 0;
}

/* A channel into the sandbox ref names; ref becomes its id. */
static int
open_chan(struct sp_ctx *x, char ref[SP_HANDLE_MAX + 1], struct sp_chan **c,
    struct sp_err *e)
{
	char id[SP_ID_LEN + 1];
	const char *r = ref;

	/* sp_chan_open_running wakes a sandbox idle tiers paused. */
	if (sp_ctx_open_ref(x, &r, id, e) == -1)
		return -1;
	memcpy(ref, id, SP_ID_LEN + 1);
	return sp_sandbox_chan(x, id, c, e);
}

/* Host to guest: into dst when it is a directory, else as dst. */
static int
copy_in(struct sp_chan *c, const char *src, const char *dst, struct sp_err *e)
{
	char dir[SP_PATH_MAX], name[256];
	struct stat hs;
	json_t *st = NULL;
	int rc = -1;

	if (lstat(src, &hs) == -1)
		return sp_err_sys(e, errno == ENOENT ? SP_E_NOT_FOUND : SP_E_IO,
		    "\"%.200s\"", src);
	if (sp_fs_stat(c, dst, 1, &st, e) == 0 && strcmp(json_string_value(
	    json_object_get(st, "type")), "dir") == 0) {
		rc = sp_fs_put(c, src, dst, NULL, e);
		goto out;
	}
	if (st == NULL && e->code != SP_E_NOT_FOUND)
		goto out;
	if (st != NULL && S_ISDIR(hs.st_mode)) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "cannot copy a directory onto "
		    "the file \"%.200s\"", dst);
		goto out;
	}
	if (split(dst, dir, sizeof dir, name, sizeof name, e) == -1)
		goto out;
	rc = sp_fs_put(c, src, dir, name, e);
out:
	json_decref(st);
	return rc;
}

/* Guest to host, by the same rule. */
static int
copy_out(struct sp_chan *c, const char *src, const char *dst,
    struct sp_err *e)
{
	char dir[SP_PATH_MAX], name[256];
	struct stat st;

	if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode))
		return sp_fs_get(c, src, dst, NULL, e);
	if (split(dst, dir, sizeof dir, name, sizeof name, e) == -1)
		return -1;
	return sp_fs_get(c, src, dir, name, e);
}

int
main(int argc, char *argv[])
{
	char id[SP_HANDLE_MAX + 1], id2[SP_HANDLE_MAX + 1];
	struct sp_ctx x = { 0 };
	struct sp_chan *c = NULL;
	struct sp_err e;
	const char *src, *dst, *gpath, *g2;
	int64_t t0;
	int in, rc;

	sp_cli_init(argc, argv, usage);
	signal(SIGPIPE, SIG_IGN);
	if (getopt(argc, argv, "") != -1)
		usage();
	argc -= optind;
	argv += optind;
	if (argc != 2)
		usage();
	src = argv[0];
	dst = argv[1];
	in = guest_side(dst, id, &gpath);
	if (in && guest_side(src, id2, &g2)) {
		sp_warn("one side must be a host path");
		return SP_EXIT_USAGE;
	}
	if (!in && !guest_side(src, id, &gpath)) {
		sp_warn("one side must be ID:PATH");
		return SP_EXIT_USAGE;
	}
	t0 = sp_clock_ms();
	if (sp_fs_path_check(gpath, &e) == -1 || open_chan(&x, id, &c, &e) == -1)
		goto fail;
	if (in && strcmp(src, "-") == 0)
		rc = sp_fs_tar_in(c, gpath, 0, &e);
	else if (in)
		rc = copy_in(c, src, gpath, &e);
	else if (strcmp(dst, "-") == 0) {
		/* stdout is the tar: nothing else goes there. */
		if (sp_fs_tar_out(c, gpath, NULL, 1, &e) == -1) {
			sp_warn("%s: %s", id, e.msg);
			rc = sp_err_exit(&e);
		} else
			rc = 0;
		goto out;
	} else
		rc = copy_out(c, gpath, dst, &e);
	if (rc == -1)
		goto fail;
	rc = sp_out_ok(id, json_pack("{s:s,s:s,s:I}", "from", src, "to", dst,
	    "ms", (json_int_t)(sp_clock_ms() - t0)));
	goto out;
fail:
	rc = sp_out_fail(id, &e);
out:
	sp_chan_close(c);
	sp_ctx_close(&x);
	return rc;
}
