/*
 * sp_each: the input loop every command shares, so the output of one command
 * is the input of the next: ids as arguments, or one per line on stdin, either
 * bare or as JSON objects carrying "id".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "sp_cli.h"

static int
worse(int a, int b)
{
	return a > b ? a : b;
}

/* One stdin line: a bare id, or a JSON object with a string "id". */
static int
line1(char *line, size_t n, sp_item_fn fn, void *ctx)
{
	struct sp_err e;
	json_error_t je;
	json_t *rec = NULL, *id;
	int rc;

	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' ||
	    line[n - 1] == ' ' || line[n - 1] == '\t'))
		line[--n] = '\0';
	while (*line == ' ' || *line == '\t') {
		line++;
		n--;
	}
	if (n == 0)
		return 0;
	if (strlen(line) != n || !sp_utf8_valid(line, n)) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "input line is not valid UTF-8 text");
		return sp_out_fail(NULL, &e);
	}
	sp_event_begin();
	if (line[0] != '{')
		return fn(line, NULL, ctx);
	rec = json_loadb(line, n, JSON_REJECT_DUPLICATES, &je);
	if (rec == NULL || !json_is_object(rec)) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "input line is not a JSON object: %s",
		    rec == NULL ? je.text : "not an object");
		json_decref(rec);
		return sp_out_fail(NULL, &e);
	}
	id = json_object_get(rec, "id");
	if (!json_is_string(id)) {
		sp_err_set(&e, SP_E_BAD_INPUT, 0, "input JSON line has no string \"id\"");
		json_decref(rec);
		return sp_out_fail(NULL, &e);
	}
	rc = fn(json_string_value(id), rec, ctx);
	json_decref(rec);
	return rc;
}

/*
 * Reads one line into buf (at most SP_LINE_MAX bytes kept); an overlong line
 * is consumed whole and reported by *over, so memory stays bounded.
 * Returns the stored length, or -1 at end of input.
 */
static ssize_t
read_line(FILE *f, char *buf, int *over)
{
	size_t n = 0;
	int c, any = 0;

	*over = 0;
	while ((c = getc(f)) != EOF) {
		any = 1;
		if (c == '\n')
			break;
		if (n < SP_LINE_MAX)
			buf[n++] = (char)c;
		else
			*over = 1;
	}
	buf[n] = '\0';
	return any ? (ssize_t)n : -1;
}

int
sp_each(int argc, char **argv, sp_item_fn fn, void *ctx)
{
	struct sp_err e;
	char *line;
	ssize_t n;
	int i, over, rc = 0;

	if (argc > 0) {
		for (i = 0; i < argc; i++) {
			sp_event_begin();
			rc = worse(rc, fn(argv[i], NULL, ctx));
		}
		return rc;
	}
	if ((line = malloc(SP_LINE_MAX + 1)) == NULL) {
		sp_err_sys(&e, SP_E_INTERNAL, "out of memory");
		return sp_out_fail(NULL, &e);
	}
	while ((n = read_line(stdin, line, &over)) != -1) {
		if (over) {
			sp_err_set(&e, SP_E_BAD_INPUT, 0,
			    "input line longer than %d bytes", SP_LINE_MAX);
			rc = worse(rc, sp_out_fail(NULL, &e));
			continue;
		}
		rc = worse(rc, line1(line, (size_t)n, fn, ctx));
	}
	free(line);
	return rc;
}

int
sp_ctx_open_ref(struct sp_ctx *x, const char **ref, char buf[SP_ID_LEN + 1],
    struct sp_err *e)
{
	if (sp_ctx_open_db(x, e) == -1)
		return -1;
	if (sp_sandbox_ref(x, *ref, buf, e) == -1) {
		sp_ctx_close(x);
		return -1;
	}
	*ref = buf;
	return 0;
}

/* A sandbox's name, as an operand or a line, is its id to fn. */
struct named {
	struct sp_ctx *x;
	sp_item_fn fn;
	void *arg;
};

static int
by_name(const char *ref, json_t *rec, void *arg)
{
	struct named *n = arg;
	char id[SP_ID_LEN + 1];
	struct sp_err e;

	if (sp_sandbox_ref(n->x, ref, id, &e) == -1)
		return sp_out_fail(ref, &e);
	return n->fn(id, rec, n->arg);
}

int
sp_each_sandbox(int argc, char **argv, struct sp_ctx *x, int with_virt,
    sp_item_fn fn, void *arg)
{
	struct named n = { x, fn, arg };
	struct sp_err e;
	int rc;

	if (sp_ctx_open(x, with_virt, &e) == -1)
		return sp_out_fail(NULL, &e);
	rc = sp_each(argc, argv, by_name, &n);
	sp_ctx_close(x);
	return rc;
}
