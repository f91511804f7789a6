/*
 * sp_ctx: what every command opens first, the config and the DB, and the
 * paths and lock of a sandbox.  libvirt is opened only when a command asks
 * (sp_ctx_virt.c), and loaded then (sp_virt.c), so a command that only
 * talks to a guest never loads it.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sp_storage.h"

int
sp_ctx_open_db(struct sp_ctx *x, struct sp_err *e)
{
	memset(x, 0, sizeof *x);
	if (sp_conf_load(&x->conf, e) == -1)
		return -1;
	if (!sp_subvol_is_btrfs(x->conf.root))
		return sp_err_set(e, SP_E_NOT_INITIALIZED, 0,
		    "%s is not a btrfs filesystem: run space-init first", x->conf.root);
	if (sp_subvol_route(&x->conf, e) == -1 ||
	    sp_db_open(&x->db, &x->conf, e) == -1)
		return -1;
	sp_event_open(x->db);
	return 0;
}

void
sp_ctx_close(struct sp_ctx *x)
{
	if (x->virt != NULL && x->virt_close != NULL)
		x->virt_close(x->virt);
	sp_event_close(x->db);
	sp_db_close(x->db);
	x->virt = NULL;
	x->db = NULL;
}

int
sp_sandbox_dir(const struct sp_ctx *x, const char *id, char *out, size_t n,
    struct sp_err *e)
{
	return sp_path_fmt(out, n, e, "%s/sandboxes/%s", x->conf.root, id);
}

int
sp_sandbox_run_dir(const struct sp_ctx *x, const char *id, char *out, size_t n,
    struct sp_err *e)
{
	return sp_path_fmt(out, n, e, "%s/%s", x->conf.run, id);
}

void
sp_sandbox_domain(const char *id, char out[SP_ID_LEN + 4])
{
	snprintf(out, SP_ID_LEN + 4, "sp-%s", id);
}

int
sp_sandbox_lock(const struct sp_ctx *x, const char *id, int wait, int *fd,
    struct sp_err *e)
{
	char p[SP_PATH_MAX];

	*fd = -1;
	if (sp_path_fmt(p, sizeof p, e, "%s/locks/sandbox-%s.lock", x->conf.root,
	    id) == -1)
		return -1;
	return sp_lock_path(p, wait, fd, e);
}

void
sp_sandbox_unlock(int fd)
{
	if (fd >= 0)
		close(fd);
}
