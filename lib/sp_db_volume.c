/*
 * sp_db_volume.c: the rows of volumes (space-volume, design.md "Volumes").
 * A volume is its id, a name unique in its tenant, the node whose disk
 * holds it, its size, and two JSON arrays written together under a
 * generation: where it is mounted ([{"sandbox":ID,"path":P,"ro":B}]) and
 * its snapshots ([{"snap":NAME,"created":T}]); and the last sandbox that
 * mounted it read-write with an epoch bumped each time that changes, so a
 * checkpoint can tell whether anyone else wrote it since.  Every change is one UPDATE
 * that compares the generation, so of two attaches racing for one volume,
 * on one node or two, one wins and the other reads again.  Written in the
 * SQL both engines take (sp_db_int.h).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sp_core.h"
#include "sp_db_int.h"

#define VOLUME_COLS "id, name, COALESCE(tenant, ''), node, bytes, created, " \
	"gen, COALESCE(origin, ''), mounts, snaps, COALESCE(writer, ''), epoch"

void
sp_db_volume_release(struct sp_volume_row *v)
{
	free(v->mounts);
	free(v->snaps);
	v->mounts = v->snaps = NULL;
}

static int
volume_from(struct sp_db_q *q, void *arg)
{
	struct sp_volume_row *v = arg;
	const char *s;

	memset(v, 0, sizeof *v);
	sp_db_q_copy(v->id, sizeof v->id, q, 0);
	sp_db_q_copy(v->name, sizeof v->name, q, 1);
	sp_db_q_copy(v->tenant, sizeof v->tenant, q, 2);
	sp_db_q_copy(v->node, sizeof v->node, q, 3);
	v->bytes = sp_db_q_int(q, 4);
	v->created = sp_db_q_int(q, 5);
	v->gen = sp_db_q_int(q, 6);
	sp_db_q_copy(v->origin, sizeof v->origin, q, 7);
	s = sp_db_q_text(q, 8);
	v->mounts = strdup(s != NULL ? s : "[]");
	s = sp_db_q_text(q, 9);
	v->snaps = strdup(s != NULL ? s : "[]");
	sp_db_q_copy(v->writer, sizeof v->writer, q, 10);
	v->epoch = sp_db_q_int(q, 11);
	if (v->mounts == NULL || v->snaps == NULL) {
		sp_db_volume_release(v);
		return -1;
	}
	return 0;
}

int
sp_db_volume_insert(struct sp_db *db, const struct sp_volume_row *v,
    struct sp_err *e)
{
	if (sp_db_q_write(db, "add volume", "INSERT INTO volumes (id, name,"
	    " tenant, node, bytes, created, gen, origin, mounts, snaps) VALUES"
	    " ($1, $2, NULLIF($3, ''), $4, $5, $6, 0, NULLIF($7, ''), '[]',"
	    " '[]')", e, "ssssIIs", v->id, v->name, v->tenant, v->node,
	    v->bytes, v->created, v->origin) >= 0)
		return 0;
	if (e->code == SP_E_EXISTS)
		sp_err_set(e, SP_E_EXISTS, 0, "a volume named %s exists%s%s",
		    v->name, v->tenant[0] != '\0' ? " in tenant " : "",
		    v->tenant);
	return -1;
}

int
sp_db_volume_get(struct sp_db *db, const char *tenant, const char *ref,
    struct sp_volume_row *v, struct sp_err *e)
{
	struct sp_db_q q;
	struct sp_volume_row second;
	int rc;

	memset(v, 0, sizeof *v);
	/* Without a tenant, any tenant's: two are one too many. */
	if (sp_db_q_start(db, &q, "get volume", "SELECT " VOLUME_COLS " FROM"
	    " volumes WHERE (id = $1 OR name = $1) AND ($2 IS NULL OR"
	    " COALESCE(tenant, '') = $2) ORDER BY id LIMIT 2", e, "ss", ref,
	    tenant) == -1)
		return -1;
	if ((rc = sp_db_q_step(&q, "get volume", e)) == 1 &&
	    volume_from(&q, v) == -1)
		rc = sp_err_sys(e, SP_E_NOMEM, "volume row");
	if (rc == 1 && (rc = sp_db_q_step(&q, "get volume", e)) == 1) {
		if (volume_from(&q, &second) == 0)
			sp_db_volume_release(&second);
		sp_db_volume_release(v);
		rc = sp_err_set(e, SP_E_BAD_INPUT, 0, "volumes of more than one "
		    "tenant are named '%s': name it by its id", ref);
	} else if (rc == 0 && v->id[0] == '\0')
		rc = sp_err_set(e, SP_E_NOT_FOUND, 0, "no volume %s", ref);
	sp_db_q_end(&q);
	return rc == -1 ? -1 : 0;
}

int
sp_db_volume_set(struct sp_db *db, const struct sp_volume_row *v,
    const char *mounts, const char *snaps, const char *node,
    struct sp_err *e)
{
	int64_t n;

	n = sp_db_q_write(db, "set volume", "UPDATE volumes SET mounts = $3,"
	    " snaps = $4, node = $5, writer = NULLIF($6, ''), epoch = $7,"
	    " gen = gen + 1 WHERE id = $1 AND gen = $2", e, "sIssssI", v->id,
	    v->gen, mounts, snaps, node, v->writer, v->epoch);
	if (n == 0)
		return sp_err_set(e, SP_E_BUSY, 1, "volume %s changed meanwhile",
		    v->name);
	return n < 0 ? -1 : 0;
}

int
sp_db_volume_delete(struct sp_db *db, const struct sp_volume_row *v,
    struct sp_err *e)
{
	int64_t n;

	n = sp_db_q_write(db, "remove volume", "DELETE FROM volumes WHERE"
	    " id = $1 AND gen = $2 AND mounts = '[]'", e, "sI", v->id, v->gen);
	if (n == 0)
		return sp_err_set(e, SP_E_BUSY, 1, "volume %s changed meanwhile",
		    v->name);
	return n < 0 ? -1 : 0;
}

struct each_volume {
	int (*fn)(const struct sp_volume_row *, void *);
	void *arg;
};

static int
one_volume(struct sp_db_q *q, void *arg)
{
	struct each_volume *a = arg;
	struct sp_volume_row v;
	int rc;

	if (volume_from(q, &v) == -1)
		return -2;
	rc = a->fn(&v, a->arg);
	sp_db_volume_release(&v);
	return rc;
}

int
sp_db_volume_each(struct sp_db *db, const char *node, const char *tenant,
    int (*fn)(const struct sp_volume_row *, void *), void *arg,
    struct sp_err *e)
{
	struct each_volume a = { fn, arg };
	struct sp_db_q q;

	if (sp_db_q_start(db, &q, "list volumes", "SELECT " VOLUME_COLS " FROM"
	    " volumes WHERE ($1 IS NULL OR node = $1) AND ($2 IS NULL OR"
	    " COALESCE(tenant, '') = $2) ORDER BY COALESCE(tenant, ''), name",
	    e, "ss", node, tenant) == -1)
		return -1;
	return sp_db_q_each(&q, "list volumes", one_volume, &a, e);
}
