/*
 * sp_state: the lifecycle state machine of design.md.  This table is the only
 * place that says which transition is legal; sp_db_transition checks it
 * inside the compare-and-set.
 */
#include <string.h>

#include "sp_core.h"

static const char *const names[SP_ST__COUNT] = {
	[SP_ST_CREATING] = "creating",
	[SP_ST_RUNNING] = "running",
	[SP_ST_PAUSED] = "paused",
	[SP_ST_STOPPED] = "stopped",
	[SP_ST_SUSPENDING] = "suspending",
	[SP_ST_SUSPENDED] = "suspended",
	[SP_ST_RESTORING] = "restoring",
	[SP_ST_FAILED] = "failed",
	[SP_ST_RECOVERING] = "recovering",
	[SP_ST_DESTROYED] = "destroyed",
	[SP_ST_LOST] = "lost",
};

#define T(s) (1u << (s))

/*
 * legal[from] is the set of states reachable from `from` in one step.  The
 * transient states (creating, suspending, restoring, recovering) can go back
 * to where they came from, so a crash halfway can be rolled back as well as
 * finished.  Any state but destroyed may be destroyed.  Every state that
 * holds a VM, or is on the way to or from one, becomes lost when its node's
 * lease lapses; a lost sandbox is restored elsewhere from its backup, or
 * taken back by its node when that comes back first.
 */
#define HELD	T(SP_ST_LOST)
static const unsigned legal[SP_ST__COUNT] = {
	[SP_ST_CREATING] = T(SP_ST_RUNNING) | T(SP_ST_PAUSED) | T(SP_ST_FAILED) |
	    T(SP_ST_DESTROYED) | HELD,
	[SP_ST_RUNNING] = T(SP_ST_PAUSED) | T(SP_ST_STOPPED) |
	    T(SP_ST_SUSPENDING) | T(SP_ST_FAILED) | T(SP_ST_RECOVERING) |
	    T(SP_ST_DESTROYED) | HELD,
	[SP_ST_PAUSED] = T(SP_ST_RUNNING) | T(SP_ST_STOPPED) |
	    T(SP_ST_SUSPENDING) | T(SP_ST_FAILED) | T(SP_ST_RECOVERING) |
	    T(SP_ST_DESTROYED) | HELD,
	[SP_ST_STOPPED] = T(SP_ST_RUNNING) | T(SP_ST_RECOVERING) |
	    T(SP_ST_DESTROYED) | HELD,
	[SP_ST_SUSPENDING] = T(SP_ST_SUSPENDED) | T(SP_ST_RUNNING) |
	    T(SP_ST_PAUSED) | T(SP_ST_FAILED) | T(SP_ST_DESTROYED) | HELD,
	[SP_ST_SUSPENDED] = T(SP_ST_RESTORING) | T(SP_ST_DESTROYED),
	[SP_ST_RESTORING] = T(SP_ST_RUNNING) | T(SP_ST_SUSPENDED) |
	    T(SP_ST_DESTROYED) | HELD,
	[SP_ST_FAILED] = T(SP_ST_RECOVERING) | T(SP_ST_STOPPED) |
	    T(SP_ST_DESTROYED) | HELD,
	[SP_ST_RECOVERING] = T(SP_ST_RUNNING) | T(SP_ST_FAILED) |
	    T(SP_ST_DESTROYED) | HELD,
	[SP_ST_DESTROYED] = 0,
	[SP_ST_LOST] = T(SP_ST_RESTORING) | T(SP_ST_RUNNING) | T(SP_ST_PAUSED) |
	    T(SP_ST_STOPPED) | T(SP_ST_FAILED) | T(SP_ST_DESTROYED),
};

const char *
sp_state_name(enum sp_state s)
{
	if ((unsigned)s >= SP_ST__COUNT)
		return "unknown";
	return names[s];
}

int
sp_state_parse(const char *name)
{
	int i;

	if (name == NULL)
		return -1;
	for (i = 0; i < SP_ST__COUNT; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

int
sp_state_can(enum sp_state from, enum sp_state to)
{
	if ((unsigned)from >= SP_ST__COUNT || (unsigned)to >= SP_ST__COUNT)
		return 0;
	return (legal[from] & T(to)) != 0;
}
