/*
 * fuzz-domain-xml: libFuzzer target for the domain XML a client hands
 * space-noded (sp_virt_xml_spec, lib/sp_virt.c), the one text of a client's
 * that reaches libvirt.  An XML it takes must be exactly what
 * sp_virt_domain_xml writes of the spec it read: nothing else goes through.
 * Built and run by `make fuzz`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sp_vm.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sp_vm_spec_text t;
	struct sp_vm_spec s;
	struct sp_err e;
	char *xml, *again = NULL;

	if ((xml = malloc(size + 1)) == NULL)
		return 0;
	memcpy(xml, data, size);
	xml[size] = '\0';
	if (sp_virt_xml_spec(xml, &s, &t, &e) == 0) {
		if (sp_virt_domain_xml(&s, &again, &e) == -1 ||
		    strcmp(again, xml) != 0)
			abort();
	} else if (e.code != SP_E_BAD_INPUT || e.msg[0] == '\0')
		abort();
	free(again);
	free(xml);
	return 0;
}
