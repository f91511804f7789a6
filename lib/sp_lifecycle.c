/*
 * sp_lifecycle: pause, resume, stop and start (design.md).  Each verb claims
 * its move in the DB by compare-and-set first, so of two commands racing on
 * one sandbox exactly one acts; then it drives libvirt, and puts the claim
 * back when libvirt refuses.  A sandbox already where the verb leads is left
 * alone: running a verb twice ends in the same place.
 */
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sp_sandbox.h"

#define T(s) (1u << (s))
#define SHUTDOWN_ASK_MS	3000
#define STATE_POLL_MS	50

/*
 * Claims the move of id from one of the states in `from` to `to`: 1 when
 * claimed (*was is the state it left), 0 when it is already at `to`, -1 on
 * error (bad-state when it is somewhere the verb does not start from).
 */
static int
claim(struct sp_ctx *x, const char *id, unsigned from, enum sp_state to,
    const char *verb, enum sp_state *was, struct sp_err *e)
{
	struct sp_sandbox_row r;
	struct sp_err lost;

	if (sp_id_check(id, e) == -1 || sp_db_sandbox_get(x->db, id, &r, e) == -1)
		return -1;
	sp_db_row_release(&r);
	*was = r.state;
	if (r.state == to)
		return 0;
	if (!(from & T(r.state)))
		return sp_err_set(e, SP_E_BAD_STATE, 0, "cannot %s a sandbox that "
		    "is %s", verb, sp_state_name(r.state));
	if (sp_db_transition(x->db, id, to, r.gen, NULL, e) == 0) {
		sp_crashpoint("verb-after-claim");
		return 1;
	}
	/* Another command moved it first: fine if it went where we go. */
	if (e->code != SP_E_BAD_STATE ||
	    sp_db_sandbox_get(x->db, id, &r, &lost) == -1)
		return -1;
	sp_db_row_release(&r);
	return r.state == to ? 0 : -1;
}

/* Puts a claim back after libvirt refused; the first error is the one told. */
static void
unclaim(struct sp_ctx *x, const char *id, enum sp_state back)
{
	struct sp_err ignored;

	sp_db_transition(x->db, id, back, -1, NULL, &ignored);
}

/* What a verb is given and tells; each runs holding the sandbox's lock. */
struct verb {
	int timeout_ms;
	int changed, forced;
};

/* Pause and resume: one move between running and paused, and the VM made
 * to agree (also when the DB already said so). */
static int
flip(struct sp_ctx *x, const char *id, struct verb *v, int pause,
    struct sp_err *e)
{
	char dom[SP_ID_LEN + 4];
	struct sp_err lost;
	enum sp_state was;
	int c, rc;

	if (sp_ctx_virt(x, e) == -1 ||
	    (c = claim(x, id, T(pause ? SP_ST_RUNNING : SP_ST_PAUSED),
	    pause ? SP_ST_PAUSED : SP_ST_RUNNING, pause ? "pause" : "resume",
	    &was, e)) == -1)
		return -1;
	sp_sandbox_domain(id, dom);
	rc = pause ? sp_virt_pause(x->virt, dom, e) :
	    sp_virt_resume(x->virt, dom, e);
	if (rc == -1) {
		if (c == 1)
			unclaim(x, id, was);
		return -1;
	}
	/* Its clock lost the time it was paused.  A guest that does not
	 * answer is still resumed: the next call to it will say so. */
	if (!pause && c == 1)
		sp_sandbox_sync_clock(x, id, &lost);
	v->changed = c;
	return 0;
}

static int
pause_locked(struct sp_ctx *x, const char *id, struct verb *v,
    struct sp_err *e)
{
	return flip(x, id, v, 1, e);
}

static int
resume_locked(struct sp_ctx *x, const char *id, struct verb *v,
    struct sp_err *e)
{
	return flip(x, id, v, 0, e);
}

/* Waits until the domain is off; 1 when it is, 0 at the deadline. */
static int
wait_off(struct sp_ctx *x, const char *dom, int64_t deadline, struct sp_err *e)
{
	char st[16];

	for (;;) {
		if (sp_virt_state(x->virt, dom, st, e) == -1)
			return -1;
		if (strcmp(st, "shutoff") == 0 || strcmp(st, "absent") == 0 ||
		    strcmp(st, "crashed") == 0)
			return 1;
		if (sp_clock_ms() >= deadline)
			return 0;
		usleep(STATE_POLL_MS * 1000);
	}
}

/* The guest shuts down by itself when asked through its daemon (the minimal
 * guest has no ACPI daemon, so libvirt's shutdown request would be ignored).
 * The daemon dies on the way, so the call's own result does not matter. */
static void
ask_poweroff(struct sp_ctx *x, const char *id)
{
	char *argv[] = { "poweroff", NULL };
	struct sp_err ignored;
	int status;

	sp_sandbox_exec_quiet(x, id, argv, SHUTDOWN_ASK_MS, 0, &status,
	    &ignored);
}

static int
stop_locked(struct sp_ctx *x, const char *id, struct verb *v, struct sp_err *e)
{
	char dom[SP_ID_LEN + 4], st[16];
	enum sp_state was;
	int c, off;

	if (sp_ctx_virt(x, e) == -1 || (c = claim(x, id, T(SP_ST_RUNNING) |
	    T(SP_ST_PAUSED) | T(SP_ST_FAILED), SP_ST_STOPPED, "stop", &was, e)) == -1)
		return -1;
	sp_sandbox_domain(id, dom);
	if (sp_virt_state(x->virt, dom, st, e) == -1)
		return -1;
	off = 1;
	if (strcmp(st, "running") == 0 || strcmp(st, "paused") == 0) {
		/* A paused guest cannot shut itself down: let it run first. */
		if (strcmp(st, "paused") == 0 && sp_virt_resume(x->virt, dom, e) == -1)
			return -1;
		ask_poweroff(x, id);
		if ((off = wait_off(x, dom, sp_clock_ms() + v->timeout_ms, e)) == -1)
			return -1;
	}
	if (!off) {
		if (sp_virt_destroy(x->virt, dom, e) == -1)
			return -1;
		v->forced = 1;
	}
	v->changed = c;
	return 0;
}

/* A cold boot forgets who the guest was: tell it again, from its record. */
static int
identity_again(struct sp_ctx *x, const char *id, struct sp_err *e)
{
	struct sp_sandbox_row r;
	json_t *labels, *env;
	int rc;

	if (sp_db_sandbox_get(x->db, id, &r, e) == -1)
		return -1;
	labels = json_loads(r.labels ? r.labels : "{}", 0, NULL);
	env = json_loads(r.env ? r.env : "[]", 0, NULL);
	sp_db_row_release(&r);
	rc = sp_sandbox_hand_identity(x, id, labels, env, e);
	json_decref(labels);
	json_decref(env);
	return rc;
}

static int
start_locked(struct sp_ctx *x, const char *id, struct verb *v,
    struct sp_err *e)
{
	char dom[SP_ID_LEN + 4], run[SP_PATH_MAX], dir[SP_PATH_MAX];
	struct sp_err ignored;
	struct sp_jail jail;
	enum sp_state was;
	int c;

	if (sp_ctx_virt(x, e) == -1 ||
	    (c = claim(x, id, T(SP_ST_STOPPED), SP_ST_RUNNING, "start", &was, e)) == -1)
		return -1;
	v->changed = c;
	if (c == 0)
		return sp_chan_wait_ready(x->conf.run, id, v->timeout_ms, e);
	sp_sandbox_domain(id, dom);
	/* The run dir lives on tmpfs: a host reboot took it away. */
	if (sp_sandbox_run_dir(x, id, run, sizeof run, e) == -1 ||
	    sp_sandbox_dir(x, id, dir, sizeof dir, e) == -1 ||
	    sp_jail_of_vm(x, dom, &jail, e) == -1 ||
	    sp_jail_dirs(x, &jail, dir, run, e) == -1 ||
	    sp_virt_start(x->virt, dom, e) == -1 ||
	    sp_jail_started(x, dom, e) == -1 ||
	    sp_chan_wait_ready(x->conf.run, id, v->timeout_ms, e) == -1 ||
	    identity_again(x, id, e) == -1 ||
	    sp_volume_replug(x, id, e) == -1) {	/* a boot has none */
		sp_virt_destroy(x->virt, dom, &ignored);
		unclaim(x, id, was);
		return -1;
	}
	return 0;
}

/* Runs a verb holding the sandbox's lock, so reconcile leaves it alone. */
static int
locked(struct sp_ctx *x, const char *id,
    int (*fn)(struct sp_ctx *, const char *, struct verb *, struct sp_err *),
    struct verb *v, struct sp_err *e)
{
	int fd, rc;

	if (sp_id_check(id, e) == -1 || sp_sandbox_lock(x, id, 1, &fd, e) == -1)
		return -1;
	rc = fn(x, id, v, e);
	sp_sandbox_unlock(fd);
	return rc;
}

int
sp_sandbox_pause(struct sp_ctx *x, const char *id, int *changed,
    struct sp_err *e)
{
	struct verb v = { 0 };
	int rc = locked(x, id, pause_locked, &v, e);

	*changed = v.changed;
	return rc;
}

int
sp_sandbox_resume(struct sp_ctx *x, const char *id, int *changed,
    struct sp_err *e)
{
	struct verb v = { 0 };
	int rc = locked(x, id, resume_locked, &v, e);

	*changed = v.changed;
	return rc;
}

int
sp_sandbox_stop(struct sp_ctx *x, const char *id, int timeout_ms, int *changed,
    int *forced, struct sp_err *e)
{
	struct verb v = { .timeout_ms = timeout_ms };
	int rc = locked(x, id, stop_locked, &v, e);

	*changed = v.changed;
	*forced = v.forced;
	return rc;
}

int
sp_sandbox_start(struct sp_ctx *x, const char *id, int ready_timeout_ms,
    int *changed, struct sp_err *e)
{
	struct verb v = { .timeout_ms = ready_timeout_ms };
	int rc = locked(x, id, start_locked, &v, e);

	*changed = v.changed;
	return rc;
}

/* Whether a paused r wakes on a call: when idle tiers steer it (its own,
 * or the node's SPACE_IDLE), its pause was the platform's, not a user's
 * wish to keep it still. */
static int
wakes_on_call(const struct sp_ctx *x, const struct sp_sandbox_row *r)
{
	struct sp_idle p;
	struct sp_err ignored;

	if (r->state != SP_ST_PAUSED || strcmp(r->node, x->conf.node) != 0 ||
	    sp_idle_of(r->idle, x->conf.idle, &p, &ignored) == -1)
		return 0;
	return p.pause_s > 0 || p.suspend_s > 0 || p.rm_s > 0;
}

int
sp_sandbox_wake(struct sp_ctx *x, const char *id, struct sp_err *e)
{
	struct sp_sandbox_row row;
	int wake, running, changed;

	if (sp_db_sandbox_get(x->db, id, &row, e) == -1)
		return -1;
	running = row.state == SP_ST_RUNNING;
	wake = wakes_on_call(x, &row);
	sp_db_row_release(&row);
	if (running)
		return 0;
	if (!wake)
		return sp_err_set(e, SP_E_BAD_STATE, 0, "sandbox %s is not "
		    "running, and does not wake on a call", id);
	return sp_sandbox_resume(x, id, &changed, e);
}

int
sp_sandbox_chan(struct sp_ctx *x, const char *id, struct sp_chan **c,
    struct sp_err *e)
{
	struct sp_err first, e2;
	int timeout_ms;

	*c = NULL;
	if (sp_env_ms("SPACE_HELLO_TIMEOUT_MS", SP_HELLO_TIMEOUT_MS,
	    &timeout_ms, e) == -1)
		return -1;
	/* A running one (the common case) costs nothing more. */
	if (sp_chan_open_running(x, id, c, timeout_ms, &first) == 0)
		return 0;
	if (first.code != SP_E_BAD_STATE ||
	    sp_sandbox_wake(x, id, &e2) == -1) {
		*e = first;
		return -1;
	}
	return sp_chan_open_running(x, id, c, timeout_ms, e);
}
