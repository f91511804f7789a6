/*
 * sp.h: all of libspace, for cmd/ and the tests.  A module of lib/ includes
 * the header of its own part instead, and so may use only that part and
 * those below it:
 *
 *	sp_core.h	errors, bytes, paths, config, ids, states, the DB
 *	sp_storage.h	btrfs, templates, tar, the object store
 *	sp_vm.h		libvirt, QEMU's monitor, the channel, checkpoints
 *	sp_net.h	egress, credentials, TLS, HTTP, the gateway
 *	sp_sandbox.h	sandboxes: make, pool, lifecycle, snapshots, suspend
 *	sp_cli.h	JSON lines, the input loop, the state verbs
 *	sp_api.h	the HTTP API: keys, what clients send, the server
 *
 * Every symbol is sp_<module>_<verb>; functions return 0 or -1 and fill a
 * struct sp_err; they never print and never exit.
 */
#ifndef SP_H
#define SP_H

#include "sp_api.h"

#endif
