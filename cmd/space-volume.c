/*
 * space-volume: disks that outlive sandboxes (design.md, "Volumes").
 *   space-volume create NAME [--size SIZE] [--from VOLUME@SNAP] [--tenant T]
 *   space-volume ls [NAME...] [--tenant T]
 *   space-volume rm NAME[@SNAP]... [--tenant T]
 *   space-volume snap NAME SNAP [--tenant T]
 *   space-volume attach SANDBOX NAME PATH [--ro]
 *   space-volume detach SANDBOX NAME
 * A volume is an ext4 image in a btrfs subvolume of this node.  A running
 * sandbox of its tenant mounts it at PATH: read-write in one sandbox, or
 * read-only in any number.  It stays when they go.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp.h"

#define SIZE_DEFAULT	(1LL << 30)

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-volume create NAME [--size SIZE] [--from VOLUME@SNAP] "
	    "[--tenant T]\n"
	    "       space-volume ls [NAME...] [--tenant T]\n"
	    "       space-volume rm NAME[@SNAP]... [--tenant T]\n"
	    "       space-volume snap NAME SNAP [--tenant T]\n"
	    "       space-volume attach SANDBOX NAME PATH [--ro]\n"
	    "       space-volume detach SANDBOX NAME\n");
	sp_usage_exit();
}

/* N with an optional K, M, G or T (powers of 1024); bytes. */
static int64_t
size_arg(const char *s)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	v = strtoull(s, &end, 10);
	switch (*end) {
	case 'K': case 'k': shift = 10; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'G': case 'g': shift = 30; end++; break;
	case 'T': case 't': shift = 40; end++; break;
	}
	if (*s < '0' || *s > '9' || *end != '\0' || v == 0 ||
	    v > (1ULL << (62 - shift))) {
		sp_warn("--size '%.32s': want a number with K, M, G or T", s);
		exit(SP_EXIT_USAGE);
	}
	return (int64_t)(v << shift);
}

static const char *tenant = "";
static const char *from;
static int64_t size = SIZE_DEFAULT;
static int ro, size_given;

/* The options of every verb; operands are left in argv[optind..]. */
static void
options(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "tenant", required_argument, NULL, 't' },
		{ "size", required_argument, NULL, 's' },
		{ "from", required_argument, NULL, 'f' },
		{ "ro", no_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "t:s:f:r", opts, NULL)) != -1)
		switch (c) {
		case 't': tenant = optarg; break;
		case 's': size = size_arg(optarg); size_given = 1; break;
		case 'f': from = optarg; break;
		case 'r': ro = 1; break;
		default: usage();
		}
}

static int
ls_one(const struct sp_volume_row *v, void *arg)
{
	(void)arg;
	sp_out_json(sp_volume_json(v));
	return 0;
}

static int
cmd_ls(struct sp_ctx *x, int argc, char *argv[])
{
	struct sp_volume_row v;
	struct sp_err e;
	int i, rc = 0, r;

	if (argc == 0)
		return sp_db_volume_each(x->db, x->conf.node, *tenant != '\0' ?
		    tenant : NULL, ls_one, NULL, &e) == -1 ?
		    sp_out_fail(NULL, &e) : 0;
	for (i = 0; i < argc; i++) {
		if (sp_db_volume_get(x->db, *tenant != '\0' ? tenant : NULL,
		    argv[i], &v, &e) == -1) {
			if ((r = sp_out_fail(NULL, &e)) > rc)
				rc = r;
			continue;
		}
		sp_out_json(sp_volume_json(&v));
		sp_db_volume_release(&v);
	}
	return rc;
}

/* attach and detach: verbs of a sandbox, under its lock. */
static int
cmd_mount(struct sp_ctx *x, int attach, char *argv[])
{
	const char *ref = argv[0];
	char id[SP_ID_LEN + 1];
	struct sp_err e;
	int fd, changed = 0, rc;

	if (sp_sandbox_ref(x, ref, id, &e) == -1)
		return sp_out_fail(ref, &e);
	if (sp_sandbox_lock(x, id, 1, &fd, &e) == -1)
		return sp_out_fail(id, &e);
	/* A sandbox its idle tiers paused wakes for this, as for a call. */
	rc = attach ? (sp_sandbox_wake(x, id, &e) == -1 ? -1 :
	    sp_volume_attach(x, id, argv[1], argv[2], ro, &changed, &e)) :
	    sp_volume_detach(x, id, argv[1], &changed, &e);
	sp_sandbox_unlock(fd);
	if (rc == -1)
		return sp_out_fail(id, &e);
	return sp_out_ok(id, attach ? json_pack("{s:s, s:s, s:b, s:b}",
	    "volume", argv[1], "path", argv[2], "ro", ro, "changed", changed) :
	    json_pack("{s:s, s:b}", "volume", argv[1], "changed", changed));
}

int
main(int argc, char *argv[])
{
	struct sp_ctx x;
	struct sp_err e;
	json_t *out = NULL;
	const char *verb;
	char action[32];
	int rc = 0, r, i, n;

	sp_cli_init(argc, argv, usage);
	if (argc < 2)
		usage();
	verb = argv[1];
	options(argc - 1, argv + 1);
	argv += 1 + optind;
	n = argc - 1 - optind;
	if (strcmp(verb, "create") == 0 ? n != 1 || (from != NULL &&
	    size_given) : strcmp(verb, "ls") == 0 ? 0 :
	    strcmp(verb, "rm") == 0 ? n < 1 :
	    strcmp(verb, "snap") == 0 ? n != 2 :
	    strcmp(verb, "attach") == 0 ? n != 3 :
	    strcmp(verb, "detach") == 0 ? n != 2 : 1)
		usage();
	if ((ro && strcmp(verb, "attach") != 0) || (strcmp(verb, "create") != 0 &&
	    (size_given || from != NULL)))
		usage();
	if (*tenant != '\0' && sp_name_check("tenant", tenant, &e) == -1) {
		sp_warn("%s", e.msg);
		return SP_EXIT_USAGE;
	}
	if (sp_ctx_open(&x, 0, &e) == -1)
		return sp_out_fail(NULL, &e);
	/* Attach and detach are events of their sandbox (space-events). */
	snprintf(action, sizeof action, "volume.%s", verb);
	sp_event_action(action);
	if (strcmp(verb, "create") == 0) {
		rc = sp_volume_create(&x, argv[0], tenant, size, from, &out,
		    &e) == -1 ? sp_out_fail(NULL, &e) : sp_out_ok(NULL, out);
	} else if (strcmp(verb, "ls") == 0) {
		rc = cmd_ls(&x, n, argv);
	} else if (strcmp(verb, "rm") == 0) {
		for (i = 0; i < n; i++) {
			r = sp_volume_rm(&x, tenant, argv[i], &e) == -1 ?
			    sp_out_fail(NULL, &e) : sp_out_ok(NULL,
			    json_pack("{s:s, s:b}", "volume", argv[i],
			    "removed", 1));
			if (r > rc)
				rc = r;
		}
	} else if (strcmp(verb, "snap") == 0) {
		rc = sp_volume_snap(&x, tenant, argv[0], argv[1], &out,
		    &e) == -1 ? sp_out_fail(NULL, &e) : sp_out_ok(NULL, out);
	} else {
		rc = cmd_mount(&x, strcmp(verb, "attach") == 0, argv);
	}
	sp_ctx_close(&x);
	return rc;
}
