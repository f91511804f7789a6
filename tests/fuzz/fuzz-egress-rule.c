/*
 * fuzz-egress-rule: libFuzzer target for the egress policy's rule parser
 * (lib/sp_egress.c), which reads what tenants and operators write.  A rule
 * that parses has a canonical text (sp_egress_rule_format) which must parse
 * again to a rule of the same text; a list of rules is taken whole or not at
 * all.  Built and run by `make fuzz`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sp_net.h"

static void
one_rule(const char *text, size_t n)
{
	struct sp_egress_rule r, r2;
	char out[SP_EGRESS_RULE_MAX + 1], out2[SP_EGRESS_RULE_MAX + 1];
	struct sp_err e;

	if (sp_egress_rule_parse(text, n, &r, &e) == -1) {
		if (e.code != SP_E_BAD_INPUT)
			abort();
		return;
	}
	if (r.port_lo < 1 || r.port_hi > 65535 || r.port_lo > r.port_hi)
		abort();
	sp_egress_rule_format(&r, out);
	if (strlen(out) > SP_EGRESS_RULE_MAX)
		abort();
	/* The canonical text is a rule, and its own canonical text. */
	if (sp_egress_rule_parse(out, strlen(out), &r2, &e) == -1)
		abort();
	sp_egress_rule_format(&r2, out2);
	if (strcmp(out, out2) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sp_egress_rules rs = { 0 };
	struct sp_err e;
	char *list;
	size_t before;

	one_rule((const char *)data, size);
	if ((list = malloc(size + 1)) == NULL)
		return 0;
	memcpy(list, data, size);
	list[size] = '\0';
	/* As a list: every rule in, or none. */
	if (sp_egress_rules_add(&rs, "a.example", &e) == -1)
		abort();
	before = rs.n;
	if (sp_egress_rules_add(&rs, list, &e) == -1 && rs.n != before)
		abort();
	sp_egress_rules_release(&rs);
	free(list);
	return 0;
}
