/*
 * sp_cli.h: what the commands share: JSON lines and usage, the input loop over
 * ids, the body of the state verbs.  Only cmd/ and the tests use it.
 */
#ifndef SP_CLI_H
#define SP_CLI_H

#include "sp_sandbox.h"

/* ---- out: JSON lines on stdout, human lines on stderr ---- */
/*
 * The start of every command's main: sp_out_init (sp_core.h), then --help (usage() on
 * stdout, exit 0) and --version ("prog VERSION", exit 0) wherever they stand
 * before "--".  usage() writes to sp_usage_stream() and ends with
 * sp_usage_exit(): stderr and exit 100 for a mistake, stdout and 0 for help.
 */
void sp_cli_init(int argc, char *argv[], void (*usage)(void));
FILE *sp_usage_stream(void);
/* The operands ID PID (space-kill, space-logs); usage() unless there are
 * two and PID is a positive process id. */
void sp_cli_id_pid(int argc, char *argv[], void (*usage)(void),
    const char **id, pid_t *pid);
_Noreturn void sp_usage_exit(void);
/* Prints obj as one compact line and flushes; steals the reference. */
int sp_out_json(json_t *obj);
/* {"id":id,"ok":false,"error":code,"msg":msg} + "prog: id: msg" on stderr.
 * Returns sp_err_exit(e).  id may be NULL. */
int sp_out_fail(const char *id, const struct sp_err *e);
/* {"id":id,"ok":true, ...fields of extra}; steals extra (may be NULL). */
int sp_out_ok(const char *id, json_t *extra);

/* ---- each: the input loop every command shares ---- */
/* rec is the JSON object of the line when stdin carried JSON lines, else NULL. */
typedef int (*sp_item_fn)(const char *id, json_t *rec, void *ctx);
/* Items from argv, or with argc == 0 one per line on stdin (a bare id, or a
 * JSON object carrying "id").  A malformed line is reported and skipped.
 * Returns the largest status any item returned (0 when all were ok). */
int sp_each(int argc, char **argv, sp_item_fn fn, void *ctx);
#define SP_LINE_MAX	65536	/* one stdin line, JSON included */
/* The body of a command acting on sandbox ids: opens *x (libvirt too when
 * with_virt; x may sit inside arg), runs fn(id, rec, arg) over the items as
 * sp_each does (a sandbox's name given as its id), closes *x; returns the
 * exit status. */
struct sp_ctx;
/* sp_ctx_open_db for a command of one sandbox: *ref (an id or a name)
 * becomes its id, in buf; on a failure *x is closed. */
int sp_ctx_open_ref(struct sp_ctx *x, const char **ref,
    char buf[SP_ID_LEN + 1], struct sp_err *e);
int sp_each_sandbox(int argc, char **argv, struct sp_ctx *x, int with_virt,
    sp_item_fn fn, void *arg);

/* ---- verb: a command that moves sandboxes to one state (sp_verb.c) ---- */
#define SP_VERB_TIMEOUT_MAX_S	3600
struct sp_verb {
	const char *state;	/* the state its JSON line names */
	int timeout_ms;		/* --timeout's default; 0: no --timeout */
	/* Sets *changed, and *forced when the verb can force (else it stays
	 * -1 and the line has no "forced"). */
	int (*act)(struct sp_ctx *x, const char *id, int timeout_ms,
	    int *changed, int *forced, struct sp_err *e);
};
/* The whole command: options, ids from argv or stdin, one line each. */
int sp_verb_main(int argc, char *argv[], const struct sp_verb *v,
    void (*usage)(void));
/* A sandbox of another node (or of none yet): want is recorded as its wish
 * for that node to carry out, and with wait_ms >= 0 waited for (woken by
 * the DB).  1 with *out the line's fields when it was another node's; 0
 * when it is this node's (act here); -1 on an error. */
int sp_cli_elsewhere(struct sp_ctx *x, const char *id, const char *want,
    int wait_ms, json_t **out, struct sp_err *e);
/* --wait [SECONDS] (arg: what followed '=', or NULL): SECONDS may also be
 * an operand of up to 6 digits (no id is), which is taken out of ops[*n];
 * SP_WAIT_DEFAULT_S without.  -1 when SECONDS is not 0..3600. */
#define SP_WAIT_DEFAULT_S	300
int sp_cli_wait_opt(const char *arg, int *n, char **ops, int *wait_ms);

/* ---- exec status: what space-exec and space-create exit with ---- */
/* Says on stderr why a command in sandbox id failed, and returns the exit
 * status a shell would: 127 when it could not start, 124 when it timed out
 * (as timeout(1)), the platform's code otherwise. */
int sp_exec_fail_status(const char *id, const struct sp_err *e);

#endif
