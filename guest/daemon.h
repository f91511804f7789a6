/*
 * daemon.h: what the parts of space-daemon share: a port and its call, the
 * senders every op uses, and the ops themselves (one file per kind of op).
 */
#ifndef DAEMON_H
#define DAEMON_H

#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>

#include "sp.h"

#define ARGS_MAX	4096	/* argv and env entries */

struct call {
	pid_t pid;		/* 0 when no call runs */
	int pidfd;
	int in, out, err;	/* our ends of the command's pipes, or -1 */
	uint32_t stream;
	const unsigned char *pend;	/* stdin not yet taken, in the decoder */
	size_t npend;
	int in_eof;		/* close stdin once pend is written */
	int exited, wstatus;
	int master;		/* the pty's master when the call has one, or -1 */
};

/* What a command is started with (op exec). */
#define GROUPS_MAX	64
struct spawn_spec {
	char **argv, **envp;
	const char *cwd;
	int user;		/* 1: switch to uid, gid and groups */
	uid_t uid;
	gid_t gid;
	gid_t groups[GROUPS_MAX];
	int ngroups;
	int tty, rows, cols;	/* a pseudo-terminal of that size */
	int detach;		/* outlives the call, output to a ring buffer */
	int announce;		/* say its pid (STARTED) before its output */
};

struct port {
	char path[256];
	int listening;		/* test mode: dev is a listening socket */
	int dev;
	int fd;			/* the host's end while one is connected */
	struct sp_frame_dec dec;
	struct call call;
	/* This connection's host set the identity (an exec sent ahead of its
	 * answer runs only then: "after_identity"). */
	int identity_set;
	unsigned char buf[SP_FRAME_CHUNK];	/* reads from the host */
	unsigned char out[SP_FRAME_HDR + SP_FRAME_CHUNK];	/* one frame */
};

/* An op a request may name ({"op": name}); the table is in space-daemon.c. */
struct op {
	const char *name;
	int (*run)(struct port *, uint32_t, json_t *);
};

void sd_log(const struct port *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Sends a frame whose n payload bytes are in p->out after the header; -1
 * when the host has gone. */
int sd_send_out(struct port *p, uint8_t type, uint32_t stream, size_t n);
/* Sends j (stolen) as one frame. */
int sd_send_json(struct port *p, uint8_t type, uint32_t stream, json_t *j);
/* ERROR {"error":code,"msg":...}; returns what sd_send_out does, so an op
 * that failed cleanly returns 0 and the connection goes on. */
int sd_send_error(struct port *p, uint32_t stream, enum sp_code code,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Blocks for the host's next frame (for ops that take a stream of data);
 * 1 and a frame (valid until the next call), -1 when the host went or broke
 * the protocol (e says which). */
int sd_recv_frame(struct port *p, struct sp_frame *f, int timeout_ms,
    struct sp_err *e);

/* daemon-activity.c: the time of the last call served and of the last CPU or
 * I/O of the guest's processes; the op that reports idle_s. */
void sd_activity_touch(void);
int sd_activity_start(void);
int sd_op_activity(struct port *p, uint32_t stream, json_t *req);

/* daemon-procs.c: the table of the processes the daemon started, the ring
 * buffers of the detached ones, and the ops over them. */
#define PROCS_MAX	256
#define RING_MAX	(1024 * 1024)
/* Resolves {"user": name or uid} from /etc/passwd and /etc/group (a static
 * daemon has no NSS); -1 with why filled when there is no such user. */
int sd_user_resolve(json_t *v, struct spawn_spec *s, char *home, size_t n,
    char *why, size_t nwhy);
/* A call's process enters the table while it runs. */
int sd_procs_add(pid_t pid, json_t *argv, int tty);
void sd_procs_remove(pid_t pid);
/* Hands a detached process to a thread that keeps its output (outfd, taken)
 * and reaps it; -1 when the table is full of running processes. */
int sd_procs_detach(pid_t pid, int pidfd, int outfd, json_t *argv, int tty);
int sd_op_ps(struct port *p, uint32_t stream, json_t *req);
int sd_op_logs(struct port *p, uint32_t stream, json_t *req);
int sd_op_kill(struct port *p, uint32_t stream, json_t *req);

/* File ops (daemon-fs.c): {"path":...} and what each takes besides. */
int fs_read(struct port *, uint32_t, json_t *);
int fs_write(struct port *, uint32_t, json_t *);	/* mode */
int fs_append(struct port *, uint32_t, json_t *);	/* mode */
int fs_stat(struct port *, uint32_t, json_t *);		/* follow */
int fs_list(struct port *, uint32_t, json_t *);
int fs_mkdir(struct port *, uint32_t, json_t *);	/* parents, mode */
int fs_remove(struct port *, uint32_t, json_t *);	/* recursive */
int fs_rename(struct port *, uint32_t, json_t *);	/* to */
int tar_out(struct port *, uint32_t, json_t *);		/* name */
int tar_in(struct port *, uint32_t, json_t *);

/* daemon-identity.c: a new sandbox's id, host name and a fresh RNG seed,
 * and its environment: a new reference to the array of "K=V" (or NULL). */
#define SD_ENV_MAX	64
int sd_op_identity(struct port *p, uint32_t stream, json_t *req);
/* {"time_ns": n}: the host's time, after a resume. */
int sd_op_clock(struct port *p, uint32_t stream, json_t *req);
/* daemon-disk.c: {"bytes": n}: the root filesystem grows to its disk's n
 * bytes, once the kernel sees them. */
int sd_op_disk_grow(struct port *p, uint32_t stream, json_t *req);
/* daemon-freeze.c: {"timeout_ms": n}: / flushed and frozen for a disk
 * snapshot until a thaw, the timeout or the daemon's death; and the thaw. */
int sd_op_freeze(struct port *p, uint32_t stream, json_t *req);
int sd_op_thaw(struct port *p, uint32_t stream, json_t *req);
/* daemon-volume.c: {"serial":ID,"path":P,"ro":B}: the plugged disk of that
 * serial mounted at P; {"path":P}: unmounted. */
int sd_op_volume_mount(struct port *p, uint32_t stream, json_t *req);
int sd_op_volume_umount(struct port *p, uint32_t stream, json_t *req);
/* daemon-trim.c: {}: the guest's free memory, less a reserve, taken and
 * let go, so that free page reporting hands it to the host. */
int sd_op_trim(struct port *p, uint32_t stream, json_t *req);
json_t *sd_identity_env(void);
/* The template's defaults for calls, read at start: "env" (an array of
 * NAME=VALUE under the sandbox's), "cwd", "user"; NULL when unset. */
/* daemon-init.c: PID 1 of a root without an init of ours or systemd. */
int sd_init_main(void);
#define SD_IMAGE_FILE	"/.space/image.json"
void sd_image_load(void);
json_t *sd_image_get(const char *key);

/* space-daemon.c: the device of the virtio port named name (its /dev node
 * made if missing) into dev; -1 when the guest has no such port. */
int sd_port_find(const char *name, char *dev, size_t n);

/* daemon-egress.c: the guest end of the egress tunnel (design.md), in a
 * thread of its own.  Ports of 0 are not served. */
struct sd_egress_conf {
	const char *sock;	/* test mode: a unix socket standing for the
				   port (NULL: space.egress, found in /sys) */
	const char *boot_id;
	int proxy_port, redirect_port, dns_port;
};
int sd_egress_start(const struct sd_egress_conf *c);
/* The port's host came or went (SIGIO): the tunnel looks again. */
void sd_egress_host_news(void);
/* HTTP_PROXY and the like naming the tunnel's proxy, NULL-terminated, for
 * every command the daemon runs; NULL when the tunnel has no proxy. */
char *const *sd_egress_env(void);

#endif
