/*
 * test-xml: libxml2 as the library reads others' XML (sp_xml.h): S3's
 * answers and libvirt's domain XML.  Entities are decoded, but nothing is
 * fetched or expanded from a DTD; what is not XML is an error, not a guess.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_storage.h"
#include "sp_xml.h"
#include "tap.h"

static struct sp_err e;

static int
parse(const char *s, xmlDocPtr *doc, xmlNodePtr *root)
{
	return sp_xml_read(s, strlen(s), "test", SP_E_CORRUPT, doc, root, &e);
}

static void
test_walks(void)
{
	static const char page[] = "<?xml version=\"1.0\"?>\n"
	    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	    "<IsTruncated>true</IsTruncated>"
	    "<Contents><Key>a/b&amp;c&lt;&#x41;&#66;</Key><Size>12</Size></Contents>"
	    "<Contents><Key><![CDATA[x<y]]></Key><Size>0</Size></Contents>"
	    "<NextContinuationToken>t+/=</NextContinuationToken>"
	    "</ListBucketResult>";
	char out[64];
	xmlDocPtr doc;
	xmlNodePtr root, c, k;

	if (!tap_okf(sp_code_name(e.code), e.msg, parse(page, &doc, &root) == 0,
	    "a ListObjectsV2 page parses"))
		return;
	tap_ok(sp_xml_is(root, "ListBucketResult"), "its root element by name, "
	    "namespace aside");
	c = sp_xml_child(root, "Contents");
	k = sp_xml_child(c, "Key");
	tap_ok(k != NULL && sp_xml_text(k, out, sizeof out) == 0 &&
	    strcmp(out, "a/b&c<AB") == 0, "entities and character references "
	    "decoded");
	k = sp_xml_child(c->next, "Key");
	tap_ok(k != NULL && sp_xml_text(k, out, sizeof out) == 0 &&
	    strcmp(out, "x<y") == 0, "CDATA is text");
	tap_ok(sp_xml_text(sp_xml_find(root, "NextContinuationToken"), out,
	    sizeof out) == 0 && strcmp(out, "t+/=") == 0, "found below the root");
	tap_ok(sp_xml_text(k, out, 3) == -1, "text that does not fit is refused");
	tap_ok(sp_xml_child(root, "Nothing") == NULL &&
	    sp_xml_find(root, "Nothing") == NULL, "an absent element is NULL");
	sp_xml_free(doc);

	if (parse("<domain type='kvm'><devices><controller "
	    "type='virtio-serial' vectors='9'/></devices></domain>", &doc,
	    &root) == 0) {
		c = sp_xml_find(root, "controller");
		tap_ok(sp_xml_attr(root, "type", out, sizeof out) == 0 &&
		    strcmp(out, "kvm") == 0 && c != NULL &&
		    sp_xml_attr(c, "vectors", out, sizeof out) == 0 &&
		    strcmp(out, "9") == 0 &&
		    sp_xml_attr(c, "model", out, sizeof out) == -1,
		    "attributes, and an absent one");
		sp_xml_free(doc);
	} else
		tap_ok(0, "domain XML parses");
}

static void
test_hostile(void)
{
	static const char *bad[] = { "", "not xml", "<a>", "<a></b>",
	    "<a/><b/>", "<a>&nosuch;</a>", "\xff\xfe<a/>" };
	char xxe[512], out[256], tmp[] = "/tmp/test-xml-XXXXXX";
	xmlDocPtr doc;
	xmlNodePtr root;
	size_t i;
	int fd, r;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		tap_okf(sp_code_name(e.code), e.msg, parse(bad[i], &doc, &root) ==
		    -1 && e.code == SP_E_CORRUPT && doc == NULL,
		    "not XML, refused with the caller's code: \"%s\"", bad[i]);

	/* An external entity names a file of secrets: it is never read. */
	fd = mkstemp(tmp);
	r = fd >= 0 && write(fd, "SECRET", 6) == 6;
	if (fd >= 0)
		close(fd);
	snprintf(xxe, sizeof xxe, "<?xml version=\"1.0\"?><!DOCTYPE r "
	    "[<!ENTITY x SYSTEM \"file://%s\">]><r><Key>a&x;b</Key></r>", tmp);
	if (parse(xxe, &doc, &root) == 0) {
		tap_ok(r && sp_xml_text(sp_xml_find(root, "Key"), out,
		    sizeof out) == 0 && strstr(out, "SECRET") == NULL,
		    "an external entity is not read");
		sp_xml_free(doc);
	} else
		tap_ok(r && e.code == SP_E_CORRUPT,
		    "an external entity is not read (the document refused)");
	unlink(tmp);

	/* Entities that would expand to a billion bytes are not expanded. */
	if (parse("<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY a \"aaaaaaaaaa\">"
	    "<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">"
	    "<!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">"
	    "<!ENTITY d \"&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;\">]>"
	    "<r><Key>&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;</Key></r>", &doc, &root) == 0) {
		tap_ok(sp_xml_text(sp_xml_find(root, "Key"), out, sizeof out) ==
		    0 && strlen(out) < 10, "internal entities are not expanded");
		sp_xml_free(doc);
	} else
		tap_ok(e.code == SP_E_CORRUPT,
		    "internal entities are not expanded (the document refused)");
}

int
main(void)
{
	test_walks();
	test_hostile();
	return tap_done();
}
