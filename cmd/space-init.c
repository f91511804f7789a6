/* space-init: prepare this node (btrfs root, layout, DB, libvirt check,
 * the node CA). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "sp.h"

static void
usage(void)
{
	fprintf(sp_usage_stream(), "usage: space-init [--loop-size SIZE]\n");
	sp_usage_exit();
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "loop-size", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sp_node_info info;
	struct sp_conf c;
	struct sp_err e;
	char ca[SP_PATH_MAX];
	uint64_t loop = 0;
	int ch, ca_made;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (ch) {
		case 'l':
			if (sp_size_parse(optarg, &loop, &e) == -1 || loop < (256u << 20)) {
				sp_warn("--loop-size: need a size of at least 256M, "
				    "like 8G");
				return SP_EXIT_USAGE;
			}
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	if (argc != 0)
		usage();
	/* The CA comes before any template: templates trust it from their
	 * import on (design.md). */
	if (sp_conf_load(&c, &e) == -1 || sp_node_init(&c, loop, &info, &e) == -1 ||
	    sp_tls_ca_create(c.root, c.node, &ca_made, &e) == -1 ||
	    sp_tls_ca_cert_path(c.root, ca, sizeof ca, &e) == -1)
		return sp_out_fail(NULL, &e);
	return sp_out_ok(NULL, json_pack("{s:s, s:s, s:s, s:b, s:s, s:s, s:b, "
	    "s:s, s:b, s:s, s:s}", "node", c.node, "root", c.root, "fs", info.fs,
	    "loop", info.loop, "libvirt", info.libvirt, "virt", info.virt_type,
	    "kvm", info.kvm, "ca", ca, "ca_made", ca_made, "quota",
	    info.quota[0] != '\0' ? info.quota : "none", "ksm", c.ksm));
}
