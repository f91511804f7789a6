/*
 * sp_ctx_virt: a command's context with libvirt, opened when the command
 * first needs it.
 */
#include "sp_vm.h"

int
sp_ctx_open(struct sp_ctx *x, int with_virt, struct sp_err *e)
{
	if (sp_ctx_open_db(x, e) == -1)
		return -1;
	if (with_virt && sp_ctx_virt(x, e) == -1) {
		sp_ctx_close(x);
		return -1;
	}
	return 0;
}

int
sp_ctx_virt(struct sp_ctx *x, struct sp_err *e)
{
	if (x->virt != NULL)
		return 0;
	if (sp_virt_open(&x->virt, x->conf.libvirt_uri, e) == -1)
		return -1;
	x->virt_close = sp_virt_close;
	return sp_virt_pick_type(x->virt, x->conf.virt_type, x->virt_type, e);
}
