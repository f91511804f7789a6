/* sp_xml: libxml2 loaded on first use, and the few walks we need (sp_xml.h). */
#include <string.h>

#include "sp_storage.h"
#include "sp_xml.h"

union sp_xml_fns sp_xml;

static struct sp_dl dl = SP_DL_INIT("libxml2.so.2", "libxml2",
    SP_E_INTERNAL);
static const char *const names[] = {
#define SP_XML_NAME(n) #n,
	SP_XML_FUNCS(SP_XML_NAME)
#undef SP_XML_NAME
};
SP_DL_TABLE_CHECK(names, sp_xml);

/* No network, no DTD, no entity substitution (XML_PARSE_NOENT is not
 * set), nothing printed. */
#define READ_OPTIONS	(XML_PARSE_NONET | XML_PARSE_NOERROR | \
    XML_PARSE_NOWARNING | XML_PARSE_NOCDATA)

int
sp_xml_read(const char *buf, size_t n, const char *what, enum sp_code code,
    xmlDocPtr *doc, xmlNodePtr *root, struct sp_err *e)
{
	*doc = NULL;
	*root = NULL;
	if (sp_dl_load_table(&dl, names, sp_xml, e) == -1)
		return -1;
	if (n > (size_t)INT32_MAX)
		return sp_err_set(e, code, 0, "%s: too long to be read", what);
	*doc = sp_xml.xmlReadMemory(buf, (int)n, NULL, NULL, READ_OPTIONS);
	if (*doc == NULL ||
	    (*root = sp_xml.xmlDocGetRootElement(*doc)) == NULL) {
		sp_xml_free(*doc);
		*doc = NULL;
		return sp_err_set(e, code, 0, "%s: not well-formed XML", what);
	}
	return 0;
}

void
sp_xml_free(xmlDocPtr doc)
{
	if (doc != NULL)
		sp_xml.xmlFreeDoc(doc);
}

int
sp_xml_is(const xmlNode *node, const char *name)
{
	return node != NULL && node->type == XML_ELEMENT_NODE &&
	    strcmp((const char *)node->name, name) == 0;
}

xmlNodePtr
sp_xml_child(const xmlNode *parent, const char *name)
{
	xmlNodePtr c;

	for (c = parent != NULL ? parent->children : NULL; c != NULL;
	    c = c->next)
		if (sp_xml_is(c, name))
			return c;
	return NULL;
}

xmlNodePtr
sp_xml_find(const xmlNode *node, const char *name)
{
	xmlNodePtr c, f;

	if (sp_xml_is(node, name))
		return (xmlNodePtr)node;
	for (c = node != NULL ? node->children : NULL; c != NULL; c = c->next)
		if (c->type == XML_ELEMENT_NODE &&
		    (f = sp_xml_find(c, name)) != NULL)
			return f;
	return NULL;
}

/* The text of the nodes from first on, text and CDATA only, into out. */
static int
text_of(const xmlNode *first, char *out, size_t n)
{
	const xmlNode *c;
	size_t len = 0, k;

	if (n == 0)
		return -1;
	for (c = first; c != NULL; c = c->next) {
		if ((c->type != XML_TEXT_NODE &&
		    c->type != XML_CDATA_SECTION_NODE) || c->content == NULL)
			continue;
		k = strlen((const char *)c->content);
		if (len + k >= n)
			return -1;
		memcpy(out + len, c->content, k);
		len += k;
	}
	out[len] = '\0';
	return 0;
}

int
sp_xml_text(const xmlNode *node, char *out, size_t n)
{
	return text_of(node->children, out, n);
}

int
sp_xml_attr(const xmlNode *node, const char *name, char *out, size_t n)
{
	const xmlAttr *a;

	for (a = node->properties; a != NULL; a = a->next)
		if (strcmp((const char *)a->name, name) == 0)
			return text_of(a->children, out, n);
	return -1;
}
