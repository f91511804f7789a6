/*
 * space-template: build templates from a root filesystem (import), or say
 * where one comes from so the first create builds it (add), boot one once and
 * keep its memory state for fast creates (warm), list them (ls) and remove
 * them (rm).
 */
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-template import --name NAME [--format auto|rootfs|oci|docker]\n"
	    "           [--tag TAG] [--kernel F] [--initrd F] [--daemon F]\n"
	    "           [--disk-extra SIZE] ROOTFS.tar[.gz|.zst]|IMAGE.tar|DIR\n"
	    "       space-template add --name NAME [--kernel F|URL --initrd F|URL]\n"
	    "           ROOTFS.tar[.gz|.zst]|URL\n"
	    "       space-template warm [--memory MiB] [--vcpus N] [--start CMD|--start-image]\n"
	    "           [--ready CMD [--ready-timeout S]] NAME[@DIGEST]\n"
	    "       space-template ls\n"
	    "       space-template rm [--force] NAME[@DIGEST]...\n"
	    "       space-template push NAME[@DIGEST]...\n"
	    "       space-template pull NAME@DIGEST...\n");
	sp_usage_exit();
}

/*
 * The guest's kernel, initrd and daemon: beside the root filesystem when they
 * are there (a guest image built with it), else the node's guest image
 * (SPACE_GUEST).  The daemon may be missing: a root of our own has its own.
 */
static int
guest_file(const char *src, const char *guest, const char *file, char *out,
    size_t n, struct sp_err *e)
{
	char copy[SP_PATH_MAX];

	if (sp_path_fmt(copy, sizeof copy, e, "%s", src) == -1 ||
	    sp_path_fmt(out, n, e, "%s/%s", dirname(copy), file) == -1)
		return -1;
	if (access(out, F_OK) == 0)
		return 1;
	if (sp_path_fmt(out, n, e, "%s/%s", guest, file) == -1)
		return -1;
	return access(out, F_OK) == 0;
}

static int
import(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "kernel", required_argument, NULL, 'k' },
		{ "initrd", required_argument, NULL, 'i' },
		{ "daemon", required_argument, NULL, 'd' },
		{ "format", required_argument, NULL, 'f' },
		{ "tag", required_argument, NULL, 't' },
		{ "disk-extra", required_argument, NULL, 'x' },
		{ NULL, 0, NULL, 0 },
	};
	char kernel[SP_PATH_MAX], initrd[SP_PATH_MAX], daemon[SP_PATH_MAX];
	struct sp_template_src src = { 0 };
	struct sp_template_row t;
	struct sp_ctx x;
	struct sp_err e;
	json_t *config = NULL;
	int ch, reused, rc;

	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'n':
			src.name = optarg;
			break;
		case 'k':
			src.kernel = optarg;
			break;
		case 'i':
			src.initrd = optarg;
			break;
		case 'd':
			src.daemon = optarg;
			break;
		case 'f':
			src.format = optarg;
			break;
		case 't':
			src.tag = optarg;
			break;
		case 'x':
			if (sp_size_parse(optarg, &src.disk_extra_bytes, &e) == -1) {
				sp_warn("--disk-extra: %s", e.msg);
				return SP_EXIT_USAGE;
			}
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc != 1 || src.name == NULL)
		usage();
	src.rootfs = argv[0];
	if (sp_name_check("template name", src.name, &e) == -1)
		return sp_out_fail(NULL, &e);
	if (src.tag != NULL && (*src.tag == '\0' || strlen(src.tag) > 255)) {
		sp_warn("--tag: 1 to 255 bytes");
		return SP_EXIT_USAGE;
	}
	if (sp_ctx_open(&x, 0, &e) == -1)
		return sp_out_fail(NULL, &e);
	if ((src.kernel == NULL && guest_file(src.rootfs, x.conf.guest,
	    "vmlinuz", kernel, sizeof kernel, &e) == -1) ||
	    (src.initrd == NULL && guest_file(src.rootfs, x.conf.guest,
	    "initrd.img", initrd, sizeof initrd, &e) == -1)) {
		rc = sp_out_fail(NULL, &e);
		goto out;
	}
	if (src.kernel == NULL)
		src.kernel = kernel;
	if (src.initrd == NULL)
		src.initrd = initrd;
	if (src.daemon == NULL) {
		if ((rc = guest_file(src.rootfs, x.conf.guest, "space-daemon",
		    daemon, sizeof daemon, &e)) == -1) {
			rc = sp_out_fail(NULL, &e);
			goto out;
		}
		if (rc == 1)
			src.daemon = daemon;
	}
	if ((reused = sp_template_import(x.conf.root, &src, &t, &config,
	    &e)) == -1 || sp_db_template_insert(x.db, &t, &e) == -1) {
		rc = sp_out_fail(NULL, &e);
		goto out;
	}
	rc = sp_out_ok(NULL, json_pack("{s:s, s:s, s:s++, s:I, s:b, s:O}",
	    "template", t.name, "digest", t.digest, "ref", t.name, "@",
	    t.digest, "disk_bytes", (json_int_t)t.disk_bytes, "reused", reused,
	    "config", config));
out:
	json_decref(config);
	sp_ctx_close(&x);
	return rc;
}

/* A source as stored: a URL as given, a path made absolute (and existing). */
static int
source(const char *s, char *out, size_t n, struct sp_err *e)
{
	char *abs;
	int rc;

	if (strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0)
		return sp_path_fmt(out, n, e, "%s", s);
	if ((abs = realpath(s, NULL)) == NULL)
		return sp_err_sys(e, SP_E_BAD_INPUT, "%s", s);
	rc = sp_path_fmt(out, n, e, "%s", abs);
	free(abs);
	return rc;
}

/* The kernel and initrd lie beside the root filesystem, path or URL. */
static int
sibling(const char *src, const char *file, char *out, size_t n,
    struct sp_err *e)
{
	const char *slash = strrchr(src, '/');

	if (slash == NULL)
		return sp_path_fmt(out, n, e, "%s", file);
	return sp_path_fmt(out, n, e, "%.*s/%s", (int)(slash - src), src, file);
}

static int
add(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "kernel", required_argument, NULL, 'k' },
		{ "initrd", required_argument, NULL, 'i' },
		{ NULL, 0, NULL, 0 },
	};
	const char *name = NULL, *kernel = NULL, *initrd = NULL;
	struct sp_source_row r;
	struct sp_ctx x;
	struct sp_err e;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'n':
			name = optarg;
			break;
		case 'k':
			kernel = optarg;
			break;
		case 'i':
			initrd = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind != argc - 1 || name == NULL)
		usage();
	memset(&r, 0, sizeof r);
	if (sp_name_check("template name", name, &e) == -1 ||
	    sp_path_fmt(r.name, sizeof r.name, &e, "%s", name) == -1 ||
	    source(argv[optind], r.rootfs, sizeof r.rootfs, &e) == -1)
		return sp_out_fail(NULL, &e);
	if ((kernel != NULL ? source(kernel, r.kernel, sizeof r.kernel, &e) :
	    sibling(r.rootfs, "vmlinuz", r.kernel, sizeof r.kernel, &e)) == -1 ||
	    (initrd != NULL ? source(initrd, r.initrd, sizeof r.initrd, &e) :
	    sibling(r.rootfs, "initrd.img", r.initrd, sizeof r.initrd, &e)) == -1)
		return sp_out_fail(NULL, &e);
	if (sp_ctx_open(&x, 0, &e) == -1)
		return sp_out_fail(NULL, &e);
	if (sp_db_source_set(x.db, &r, &e) == -1)
		rc = sp_out_fail(NULL, &e);
	else
		rc = sp_out_ok(NULL, json_pack("{s:s, s:s, s:s, s:s}", "template",
		    r.name, "rootfs", r.rootfs, "kernel", r.kernel, "initrd",
		    r.initrd));
	sp_ctx_close(&x);
	return rc;
}

/* A decimal number from lo to hi, else the usage. */
static int
in_range(const char *s, long lo, long hi)
{
	char *end;
	long n = strtol(s, &end, 10);

	if (*end != '\0' || n < lo || n > hi)
		usage();
	return (int)n;
}

static int
warm(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "memory", required_argument, NULL, 'm' },
		{ "vcpus", required_argument, NULL, 'c' },
		{ "start", required_argument, NULL, 's' },
		{ "start-image", no_argument, NULL, 'S' },
		{ "ready", required_argument, NULL, 'r' },
		{ "ready-timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	struct sp_warm w = { .memory_mib = 256, .vcpus = 1 };
	struct sp_ctx x;
	struct sp_err e;
	json_t *out;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'm':
			w.memory_mib = in_range(optarg, 64, 65536);
			break;
		case 'c':
			w.vcpus = in_range(optarg, 1, 64);
			break;
		case 's':
			w.start = optarg;
			break;
		case 'S':
			w.start_image = 1;
			break;
		case 'r':
			w.ready = optarg;
			break;
		case 't':
			w.ready_timeout_s = in_range(optarg, 1, 86400);
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc != 1 || (w.start != NULL && w.start_image) ||
	    (w.start != NULL && (*w.start == '\0' || strlen(w.start) > 4096)) ||
	    (w.ready != NULL && (*w.ready == '\0' || strlen(w.ready) > 4096)))
		usage();
	if (sp_ctx_open(&x, 1, &e) == -1)
		return sp_out_fail(NULL, &e);
	if (sp_template_warm(&x, argv[0], &w, &out, &e) == -1)
		rc = sp_out_fail(NULL, &e);
	else
		rc = sp_out_ok(NULL, out);
	sp_ctx_close(&x);
	return rc;
}

static int
ls1(const struct sp_template_row *t, void *arg)
{
	struct sp_ctx *x = arg;
	char p[SP_PATH_MAX], c[SP_PATH_MAX];
	struct sp_err e, ignored;
	json_t *config = NULL;
	int local;

	if (sp_template_path(x->conf.root, t, p, sizeof p, &e) == -1 ||
	    sp_ckpt_path(x->conf.root, t, c, sizeof c, &e) == -1)
		return -1;
	local = sp_subvol_exists(p);
	/* The image's defaults, when the template is here to say them. */
	if (local && sp_template_config(x->conf.root, t, &config, &ignored) == -1)
		config = NULL;
	/* A checkpoint an older build made is not used: not warm. */
	return sp_out_json(json_pack("{s:s, s:s, s:I, s:I, s:b, s:b, s:o*}",
	    "template", t->name, "digest", t->digest, "created",
	    (json_int_t)t->created, "disk_bytes", (json_int_t)t->disk_bytes,
	    "local", local, "warm", sp_subvol_exists(c) &&
	    sp_ckpt_current(c, &ignored) == 1, "config", config));
}

static int
list(int argc, char *argv[])
{
	struct sp_ctx x;
	struct sp_err e;
	int rc = 0;

	if (argc != 1)
		usage();
	if (sp_ctx_open(&x, 0, &e) == -1)
		return sp_out_fail(NULL, &e);
	if (sp_db_template_each(x.db, ls1, &x, &e) == -1)
		rc = sp_out_fail(NULL, &e);
	sp_ctx_close(&x);
	return rc;
}

struct use {
	const struct sp_template_row *t;
	int n;
};

static int
count_use(const struct sp_sandbox_row *r, void *arg)
{
	struct use *u = arg;
	char ref[sizeof r->template];

	snprintf(ref, sizeof ref, "%s@%s", u->t->name, u->t->digest);
	if (strcmp(r->template, ref) == 0)
		u->n++;
	return 0;
}

struct rm_ctx {
	struct sp_ctx x;
	int force;
};

static int
rm1(const char *ref, json_t *rec, void *arg)
{
	struct rm_ctx *c = arg;
	struct sp_template_row t;
	struct use u = { &t, 0 };
	char p[SP_PATH_MAX];
	struct sp_err e;

	if (sp_db_template_get(c->x.db, ref, &t, &e) == -1)
		return sp_out_fail(ref, &e);
	if (sp_db_sandbox_each(c->x.db, -1, count_use, &u, &e) == -1)
		return sp_out_fail(ref, &e);
	if (u.n > 0 && !c->force) {
		sp_err_set(&e, SP_E_IN_USE, 0, "%d sandbox(es) use %s@%.12s (--force "
		    "removes it anyway: their disks are their own)", u.n, t.name,
		    t.digest);
		return sp_out_fail(ref, &e);
	}
	if (sp_ckpt_path(c->x.conf.root, &t, p, sizeof p, &e) == -1 ||
	    sp_subvol_delete(p, &e) == -1 ||
	    sp_template_path(c->x.conf.root, &t, p, sizeof p, &e) == -1 ||
	    sp_subvol_delete(p, &e) == -1 ||
	    sp_db_template_delete(c->x.db, t.name, t.digest, &e) == -1)
		return sp_out_fail(ref, &e);
	return sp_out_ok(NULL, json_pack("{s:s, s:s, s:b}", "template", t.name,
	    "digest", t.digest, "removed", 1));
}

static int
rm(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	struct rm_ctx c = { 0 };
	struct sp_err e;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, "f", opts, NULL)) != -1) {
		if (ch != 'f')
			usage();
		c.force = 1;
	}
	argc -= optind;
	argv += optind;
	if (sp_ctx_open(&c.x, 0, &e) == -1)
		return sp_out_fail(NULL, &e);
	rc = sp_each(argc, argv, rm1, &c);
	sp_ctx_close(&c.x);
	return rc;
}

/* push and pull: full send streams through the object store (SPACE_STORE). */
struct transfer {
	struct sp_ctx x;
	struct sp_store *s;
	int push;
};

static int
transfer1(const char *ref, json_t *rec, void *arg)
{
	struct transfer *t = arg;
	struct sp_err e;
	json_t *out;

	if ((t->push ? sp_template_push(&t->x, t->s, ref, &out, &e) :
	    sp_template_pull(&t->x, t->s, ref, &out, &e)) == -1)
		return sp_out_fail(NULL, &e);
	return sp_out_ok(NULL, out);
}

static int
transfer(int argc, char *argv[], int push)
{
	struct transfer t = { .push = push };
	struct sp_err e;
	int rc;

	if (argc < 2)
		usage();
	if (sp_ctx_open(&t.x, 0, &e) == -1)
		return sp_out_fail(NULL, &e);
	if (sp_store_open(&t.s, t.x.conf.store, &e) == -1) {
		sp_ctx_close(&t.x);
		return sp_out_fail(NULL, &e);
	}
	rc = sp_each(argc - 1, argv + 1, transfer1, &t);
	sp_store_close(t.s);
	sp_ctx_close(&t.x);
	return rc;
}

int
main(int argc, char *argv[])
{
	sp_cli_init(argc, argv, usage);
	if (argc < 2)
		usage();
	if (strcmp(argv[1], "import") == 0)
		return import(argc - 1, argv + 1);
	if (strcmp(argv[1], "add") == 0)
		return add(argc - 1, argv + 1);
	if (strcmp(argv[1], "warm") == 0)
		return warm(argc - 1, argv + 1);
	if (strcmp(argv[1], "ls") == 0)
		return list(argc - 1, argv + 1);
	if (strcmp(argv[1], "rm") == 0)
		return rm(argc - 1, argv + 1);
	if (strcmp(argv[1], "push") == 0 || strcmp(argv[1], "pull") == 0)
		return transfer(argc - 1, argv + 1, strcmp(argv[1], "push") == 0);
	usage();
}
