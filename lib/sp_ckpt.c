/*
 * sp_ckpt: a checkpoint's files (design.md).  A template's booted
 * checkpoint is the read-only subvolume templates/<name>@<digest>.ckpt/
 * (disk.raw, mem.sav, vmlinuz, initrd.img, ckpt.json), made by
 * sp_template_warm.c.  A sandbox made from it is a snapshot of that
 * subvolume (nothing copied) restored from mem.sav: a running guest in the
 * time of a restore instead of a boot.
 *
 * libvirt 9 refuses to restore a save image under another UUID, so each copy
 * of mem.sav is re-identified in place first, by whoever restores it (the
 * manager when it is root, else space-noded, as the image is root's): its
 * XML header's name and UUID are rewritten with those of the domain XML it
 * is restored with, of the same length (ids are fixed-length for this), as
 * bytes, so that the header keeps its size.  What the header says is read
 * with libxml2 (sp_xml.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sp_vm.h"
#include "sp_xml.h"

#define SAVE_MAGIC	"LibvirtQemudSave"
#define SAVE_HDR	(16 + 19 * 4)	/* magic + 19 u32 fields, libvirt 9 */
#define SAVE_XML_MAX	(1024 * 1024)

int
sp_ckpt_path(const char *root, const struct sp_template_row *t, char *out,
    size_t n, struct sp_err *e)
{
	return sp_path_fmt(out, n, e, "%s/templates/%s@%s.ckpt", root, t->name,
	    t->digest);
}

int
sp_ckpt_uuid_new(char out[37], struct sp_err *e)
{
	unsigned char r[16];

	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		return sp_err_sys(e, SP_E_INTERNAL, "getrandom");
	r[6] = (r[6] & 0x0f) | 0x40;	/* version 4 */
	r[8] = (r[8] & 0x3f) | 0x80;	/* RFC 4122 variant */
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
	    "%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5], r[6],
	    r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
	return 0;
}

/* Replaces every `from` by `to` (same length) in buf[0..n). */
static int
replace_all(unsigned char *buf, size_t n, const char *from, const char *to)
{
	size_t k = strlen(from), i;
	int hits = 0;

	for (i = 0; i + k <= n; i++)
		if (memcmp(buf + i, from, k) == 0) {
			memcpy(buf + i, to, k);
			hits++;
			i += k - 1;
		}
	return hits;
}

static uint32_t
get_u32(const unsigned char *p)
{
	uint32_t v;

	/* libvirt writes its header in host order (x86_64 here). */
	memcpy(&v, p, sizeof v);
	return v;
}

/* The XML in the header of the libvirt save image open on fd: *xml (len
 * bytes, NUL-terminated after them) for the caller to free. */
static int
header_xml(int fd, const char *path, char **xml, uint32_t *len,
    struct sp_err *e)
{
	unsigned char hdr[SAVE_HDR];

	*xml = NULL;
	if (pread(fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr ||
	    memcmp(hdr, SAVE_MAGIC, 16) != 0)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "%s is not a libvirt save "
		    "image", path);
	*len = get_u32(hdr + 20);
	if (*len == 0 || *len > SAVE_XML_MAX)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "%s: XML header of %u "
		    "bytes", path, *len);
	if ((*xml = malloc(*len + 1)) == NULL)
		return sp_err_sys(e, SP_E_INTERNAL, "malloc");
	if (pread(fd, *xml, *len, SAVE_HDR) != (ssize_t)*len) {
		free(*xml);
		*xml = NULL;
		return sp_err_sys(e, SP_E_IO, "read %s", path);
	}
	(*xml)[*len] = '\0';
	return 0;
}

/* Which of our ports the elements from n on (and below) name, in document
 * order: space.0 .. space.N-1, each once, and the egress port.  A name out
 * of that order is refused: a header with it was not written by us. */
static int
walk_ports(const xmlNode *n, const char *path, struct sp_vm_layout *l,
    struct sp_err *e)
{
	char type[16], name[256], want[32];

	for (; n != NULL; n = n->next) {
		if (n->type != XML_ELEMENT_NODE)
			continue;
		if (sp_xml_is(n, "target") &&
		    sp_xml_attr(n, "type", type, sizeof type) == 0 &&
		    strcmp(type, "virtio") == 0 &&
		    sp_xml_attr(n, "name", name, sizeof name) == 0) {
			snprintf(want, sizeof want, "space.%d", l->nports);
			if (strcmp(name, SP_EGRESS_PORT_NAME) == 0 && !l->egress)
				l->egress = 1;
			else if (strcmp(name, want) == 0 &&
			    l->nports < SP_PORTS_MAX)
				l->nports++;
			else if (strncmp(name, "space.", 6) == 0)
				return sp_err_set(e, SP_E_BAD_STATE, 0, "%s: port "
				    "%.20s out of order in its header", path,
				    name);
		}
		if (walk_ports(n->children, path, l, e) == -1)
			return -1;
	}
	return 0;
}

/* The first element called name whose attribute attr is value, or NULL. */
static const xmlNode *
find_element(const xmlNode *n, const char *name, const char *attr,
    const char *value)
{
	const xmlNode *f;
	char t[32];

	for (; n != NULL; n = n->next) {
		if (n->type != XML_ELEMENT_NODE)
			continue;
		if (sp_xml_is(n, name) && sp_xml_attr(n, attr, t,
		    sizeof t) == 0 && strcmp(t, value) == 0)
			return n;
		if ((f = find_element(n->children, name, attr, value)) != NULL)
			return f;
	}
	return NULL;
}

/* The header's XML (of the save image at path) as a document: it ends at
 * its first NUL, as libvirt pads it with zeros. */
static int
header_doc(const char *xml, size_t len, const char *path, xmlDocPtr *doc,
    xmlNodePtr *root, struct sp_err *e)
{
	if (sp_xml_read(xml, strnlen(xml, len), path, SP_E_BAD_STATE, doc, root,
	    e) == -1)
		return -1;
	if (!sp_xml_is(*root, "domain")) {
		sp_xml_free(*doc);
		*doc = NULL;
		return sp_err_set(e, SP_E_BAD_STATE, 0, "%s: its header is not "
		    "a domain", path);
	}
	return 0;
}

/* The layout that the header's domain (of the save image at path) names. */
static int
parse_layout(const xmlNode *root, const char *path, struct sp_vm_layout *l,
    struct sp_err *e)
{
	const xmlNode *c;
	char v[16];

	l->nports = l->egress = 0;
	l->balloon = find_element(root, "memballoon", "model", "virtio") != NULL;
	if (walk_ports(root, path, l, e) == -1)
		return -1;
	if (l->nports == 0)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "%s: no space.N port in "
		    "its header", path);
	if ((c = find_element(root, "controller", "type",
	    "virtio-serial")) == NULL)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "%s: no virtio-serial "
		    "controller in its header", path);
	l->shared_vectors = sp_xml_attr(c, "vectors", v, sizeof v) == -1;
	return 0;
}

/* Whether the header's domain was booted with the command line a VM of its
 * type gets now. */
static int
cmdline_current(const xmlNode *root)
{
	char type[8], cmdline[4096];
	const xmlNode *c;

	if (sp_xml_attr(root, "type", type, sizeof type) == -1 ||
	    (c = sp_xml_find(root, "cmdline")) == NULL ||
	    sp_xml_text(c, cmdline, sizeof cmdline) == -1)
		return 0;
	return strcmp(cmdline, sp_virt_boot_cmdline(type)) == 0;
}

static int read_header(const char *path, xmlDocPtr *doc, xmlNodePtr *root,
    struct sp_err *e);

/* The uid of the domain's static DAC label (sp_jail.c): 0 for none (one
 * made before the jail, or with it off: QEMU runs as libvirt's user). */
static unsigned
label_uid(const xmlNode *root)
{
	const xmlNode *n, *l;
	char type[16], model[16], text[64], tail;
	unsigned uid, gid;

	for (n = root->children; n != NULL; n = n->next) {
		if (n->type != XML_ELEMENT_NODE || !sp_xml_is(n, "seclabel") ||
		    sp_xml_attr(n, "type", type, sizeof type) == -1 ||
		    sp_xml_attr(n, "model", model, sizeof model) == -1 ||
		    strcmp(type, "static") != 0 || strcmp(model, "dac") != 0 ||
		    (l = sp_xml_child(n, "label")) == NULL ||
		    sp_xml_text(l, text, sizeof text) == -1)
			continue;
		if (sscanf(text, "+%u:+%u%c", &uid, &gid, &tail) == 2 &&
		    uid == gid && uid >= 1000)
			return uid;
	}
	return 0;
}

int
sp_vm_xml_jail(const char *xml, const char *what, unsigned *uid,
    struct sp_err *e)
{
	xmlDocPtr doc;
	xmlNodePtr root;

	*uid = 0;
	if (header_doc(xml, strlen(xml), what, &doc, &root, e) == -1)
		return -1;
	*uid = label_uid(root);
	sp_xml_free(doc);
	return 0;
}

int
sp_ckpt_jail(const char *path, unsigned *uid, struct sp_err *e)
{
	xmlDocPtr doc;
	xmlNodePtr root;

	*uid = 0;
	if (read_header(path, &doc, &root, e) == -1)
		return -1;
	*uid = label_uid(root);
	sp_xml_free(doc);
	return 0;
}

/* The header's domain of the save image at path, for the caller to free
 * (sp_xml_free). */
static int
read_header(const char *path, xmlDocPtr *doc, xmlNodePtr *root,
    struct sp_err *e)
{
	uint32_t len;
	char *xml;
	int fd, rc;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return sp_err_sys(e, SP_E_IO, "%s", path);
	rc = header_xml(fd, path, &xml, &len, e);
	close(fd);
	if (rc == -1)
		return -1;
	rc = header_doc(xml, len, path, doc, root, e);
	free(xml);
	return rc;
}

int
sp_ckpt_layout(const char *path, struct sp_vm_layout *l, struct sp_err *e)
{
	xmlDocPtr doc;
	xmlNodePtr root;
	int rc;

	if (read_header(path, &doc, &root, e) == -1)
		return -1;
	rc = parse_layout(root, path, l, e);
	sp_xml_free(doc);
	return rc;
}

int
sp_ckpt_current(const char *ckpt, struct sp_err *e)
{
	char p[SP_PATH_MAX];
	struct sp_vm_layout l;
	xmlDocPtr doc;
	xmlNodePtr root;
	int rc;

	if (sp_path_fmt(p, sizeof p, e, "%s/mem.sav", ckpt) == -1 ||
	    read_header(p, &doc, &root, e) == -1)
		return -1;
	if ((rc = parse_layout(root, p, &l, e)) == 0)
		rc = sp_vm_layout_current(&l) && cmdline_current(root);
	sp_xml_free(doc);
	return rc;
}

int
sp_ckpt_identify(const char *path, const char *name, const char *uuid,
    struct sp_err *e)
{
	char old_name[64], old_uuid[37];
	xmlNodePtr root, n, u;
	xmlDocPtr doc = NULL;
	char *xml = NULL;
	uint32_t len;
	int fd, rc = -1;

	if ((fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return sp_err_sys(e, SP_E_IO, "%s", path);
	if (header_xml(fd, path, &xml, &len, e) == -1 ||
	    header_doc(xml, len, path, &doc, &root, e) == -1)
		goto out;
	if ((n = sp_xml_child(root, "name")) == NULL ||
	    (u = sp_xml_child(root, "uuid")) == NULL ||
	    sp_xml_text(n, old_name, sizeof old_name) == -1 ||
	    sp_xml_text(u, old_uuid, sizeof old_uuid) == -1) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "%s: no name or uuid in its "
		    "header", path);
		goto out;
	}
	if (strcmp(old_name, name) == 0 && strcmp(old_uuid, uuid) == 0) {
		rc = 0;
		goto out;
	}
	if (strlen(old_name) != strlen(name) || strlen(old_uuid) !=
	    strlen(uuid)) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "%s: %s is not re-identified "
		    "as %s: their lengths differ", path, old_name, name);
		goto out;
	}
	if (replace_all((unsigned char *)xml, len, old_name, name) == 0 ||
	    replace_all((unsigned char *)xml, len, old_uuid, uuid) == 0) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "%s: name or uuid not in its "
		    "header", path);
		goto out;
	}
	/* Only the header's blocks are written: the rest stays shared. */
	if (pwrite(fd, xml, len, SAVE_HDR) != (ssize_t)len || fsync(fd) == -1) {
		sp_err_sys(e, SP_E_IO, "write %s", path);
		goto out;
	}
	rc = 0;
out:
	sp_xml_free(doc);
	free(xml);
	close(fd);
	return rc;
}

int
sp_ckpt_read(const char *ckpt, struct sp_ckpt_info *ci, struct sp_err *e)
{
	char p[SP_PATH_MAX];
	json_error_t je;
	json_t *j;
	const char *id, *uuid;
	int rc = -1;

	if (sp_path_fmt(p, sizeof p, e, "%s/ckpt.json", ckpt) == -1)
		return -1;
	if ((j = json_load_file(p, JSON_REJECT_DUPLICATES, &je)) == NULL)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "%s: %s", p, je.text);
	if (json_unpack(j, "{s:s, s:s, s:i, s:i}", "id", &id, "uuid", &uuid,
	    "memory_mib", &ci->memory_mib, "vcpus", &ci->vcpus) == -1 ||
	    !sp_id_valid(id) || strlen(uuid) != 36) {
		sp_err_set(e, SP_E_BAD_STATE, 0, "%s: malformed", p);
		goto out;
	}
	memcpy(ci->id, id, SP_ID_LEN + 1);
	memcpy(ci->uuid, uuid, 37);
	rc = 0;
out:
	json_decref(j);
	return rc;
}
