/*
 * sp_ctx_virt: a command's context with libvirt, opened when the command
 * first needs it.  libvirt's system daemon lets only root in, and root
 * there is root anywhere (a domain XML opens any file as any uid): a
 * process of the user space goes through space-noded, which takes only
 * space's own XML (sp_noded_virt.c); so does any process when
 * SPACE_LIBVIRT_URI is "noded" (or "noded:SOCKET", a socket of another
 * path).
 */
#include <string.h>
#include <unistd.h>

#include "sp_vm.h"

int
sp_virt_connect(const struct sp_conf *c, struct sp_virt **v,
    struct sp_err *e)
{
	char sock[SP_PATH_MAX];
	int via;

	if ((via = sp_noded_for(c, sock, e)) == -1)
		return -1;
	if (!via)
		return sp_virt_open(v, c->libvirt_uri, e);
	return sp_virt_open_noded(v, sock, e);
}

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
	if (sp_virt_connect(&x->conf, &x->virt, e) == -1)
		return -1;
	x->virt_close = sp_virt_close;
	return sp_virt_pick_type(x->virt, x->conf.virt_type, x->virt_type, e);
}
