/*
 * fuzz-noded: libFuzzer target for what a client of space-noded sends, the
 * node manager's request line (lib/sp_noded_parse.c).  A request it takes
 * must hold what sp_noded.c and sp_noded_virt.c rely on: an op of the list,
 * every path relative, of at least two parts (a receive's directory may be
 * an area, one), none "." or "..", in its op's area, and short enough; no
 * descriptor of the line's own; a domain named sp-<id>; a VM's file
 * absolute; a domain XML where its op needs one, and none elsewhere; a
 * host only for tls-leaf, an address; a volume's id and its disk only for
 * a plug.  Built and run by `make fuzz`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sp_storage.h"

/* area: the path may be an area itself, one part (a receive's). */
static void
check_path(const char *p, int area)
{
	const char *c;

	if (p[0] == '\0' || p[0] == '/' || strlen(p) > SP_NODED_PATH_MAX ||
	    (!area && strchr(p, '/') == NULL) || strstr(p, "//") != NULL ||
	    p[strlen(p) - 1] == '/')
		abort();
	for (c = p; c != NULL; c = strchr(c, '/')) {
		if (*c == '/')
			c++;
		if ((c[0] == '.' && (c[1] == '/' || c[1] == '\0')) ||
		    (c[0] == '.' && c[1] == '.' && (c[2] == '/' || c[2] == '\0')))
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sp_noded_req r;
	struct sp_err e;

	if (sp_noded_parse((const char *)data, size, &r, &e) == -1) {
		if (e.code != SP_E_BAD_INPUT || e.msg[0] == '\0')
			abort();
		return 0;
	}
	if ((unsigned)r.op >= SP_NODED__COUNT)
		abort();
	if (r.op == SP_NODED_CREATE || r.op == SP_NODED_SNAPSHOT ||
	    r.op == SP_NODED_DELETE || r.op == SP_NODED_READONLY ||
	    r.op == SP_NODED_DIR || r.op == SP_NODED_RMDIR ||
	    r.op == SP_NODED_SEND || r.op == SP_NODED_RECEIVE ||
	    r.op == SP_NODED_USAGE)
		check_path(r.path, r.op == SP_NODED_RECEIVE);
	else if (r.path[0] != '\0')
		abort();
	if (r.op == SP_NODED_SNAPSHOT)
		check_path(r.src, 0);
	else if (r.src[0] != '\0' || (r.readonly && r.op != SP_NODED_READONLY &&
	    r.op != SP_NODED_VM_PLUG))
		abort();
	if (r.op == SP_NODED_SEND && r.parent[0] != '\0')
		check_path(r.parent, 0);
	else if (r.parent[0] != '\0')
		abort();
	/* The descriptor is the server's to attach, never the line's. */
	if (r.fd != -1)
		abort();
	if (r.name[0] != '\0' && (strncmp(r.name, "sp-", 3) != 0 ||
	    !sp_id_valid(r.name + 3)))
		abort();
	if ((r.file[0] != '\0' && r.file[0] != '/') ||
	    (r.dir[0] != '\0' && r.dir[0] != '/'))
		abort();
	if (r.uid != 0 && (r.uid < 1000 || r.op != SP_NODED_VM_PREPARE))
		abort();
	if (r.pids < 0 || r.pids > 4194304 || (r.op == SP_NODED_DISK_LIMIT &&
	    r.bytes == 0))
		abort();
	/* A pid only for userns-map, of 2 up; never the peer's, which the
	 * server sets. */
	if ((r.op == SP_NODED_USERNS_MAP) != (r.pid != 0) || (r.pid != 0 &&
	    (r.pid < 2 || r.pid > 4194304)) || r.peer_pid != 0)
		abort();
	if ((r.xml != NULL) != (r.op == SP_NODED_VM_DEFINE ||
	    r.op == SP_NODED_VM_RESTORE) || (r.xml != NULL &&
	    (r.xml[0] == '\0' || strlen(r.xml) > SP_NODED_XML_MAX)))
		abort();
	if ((r.op == SP_NODED_VM_START || r.op == SP_NODED_VM_SAVE) &&
	    r.name[0] == '\0')
		abort();
	if (r.op == SP_NODED_VM_RESIZE && (r.bytes == 0 ||
	    r.bytes > (16ULL << 40)))
		abort();
	/* A volume only for a plug or an unplug, an id (12 of a-z, 2-7); a
	 * disk vda for a resize, vdb..vdz for a plug, none elsewhere. */
	if ((r.volume[0] != '\0') != (r.op == SP_NODED_VM_PLUG ||
	    r.op == SP_NODED_VM_UNPLUG) || (r.volume[0] != '\0' &&
	    (strlen(r.volume) != 12 || strspn(r.volume,
	    "abcdefghijklmnopqrstuvwxyz234567") != 12)))
		abort();
	if (r.op == SP_NODED_VM_RESIZE ? strcmp(r.target, "vda") != 0 :
	    r.op == SP_NODED_VM_PLUG ? (strlen(r.target) != 3 ||
	    strncmp(r.target, "vd", 2) != 0 || r.target[2] < 'b' ||
	    r.target[2] > 'z') : r.target[0] != '\0')
		abort();
	/* A host only for tls-leaf, where it is an address's text. */
	if ((r.host[0] != '\0') != (r.op == SP_NODED_TLS_LEAF) ||
	    strlen(r.host) > SP_NODED_HOST_MAX ||
	    strspn(r.host, "0123456789abcdefABCDEF.:") != strlen(r.host))
		abort();
	sp_noded_req_free(&r);
	return 0;
}
