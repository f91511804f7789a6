/*
 * sp_xml: libxml2, loaded on first use (sp_xml.c), for the XML that others
 * send us: S3's answers (sp_store.c) and libvirt's domain XML in a save image
 * (sp_ckpt.c).  Like libcurl it is not mapped by the commands that never
 * read XML.  Documents are read with no network, no DTD and no entity
 * substitution, and without libxml2 printing its errors: a document that
 * does not parse is an error of ours.  Text is read from a node's own text
 * children, so an entity reference left unexpanded adds nothing.
 */
#ifndef SP_XML_H
#define SP_XML_H

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "sp_storage.h"

#define SP_XML_FUNCS(F) \
	F(xmlReadMemory) \
	F(xmlFreeDoc) \
	F(xmlDocGetRootElement)

union sp_xml_fns {
	struct {
#define SP_XML_PTR(n) __typeof__(n) *n;
		SP_XML_FUNCS(SP_XML_PTR)
#undef SP_XML_PTR
	};
	void *slot[0 SP_XML_FUNCS(SP_DL_ONE)];	/* what sp_dl_load fills */
};

extern union sp_xml_fns sp_xml;

/* Parses buf[0..n) (what, for messages): *root is its root element.  -1 with
 * code when it is not XML (corrupt by default). */
int sp_xml_read(const char *buf, size_t n, const char *what,
    enum sp_code code, xmlDocPtr *doc, xmlNodePtr *root, struct sp_err *e);
void sp_xml_free(xmlDocPtr doc);
/* Whether node is an element called name. */
int sp_xml_is(const xmlNode *node, const char *name);
/* The first child element of parent called name, or NULL. */
xmlNodePtr sp_xml_child(const xmlNode *parent, const char *name);
/* The first element called name at or below node, depth first, or NULL. */
xmlNodePtr sp_xml_find(const xmlNode *node, const char *name);
/* The element's text (its text and CDATA children, in order) into out;
 * -1 when it does not fit. */
int sp_xml_text(const xmlNode *node, char *out, size_t n);
/* The element's attribute name into out; -1 when it has none or it does not
 * fit. */
int sp_xml_attr(const xmlNode *node, const char *name, char *out, size_t n);

#endif
