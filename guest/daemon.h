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
};

struct port {
	char path[256];
	int listening;		/* test mode: dev is a listening socket */
	int dev;
	int fd;			/* the host's end while one is connected */
	struct sp_frame_dec dec;
	struct call call;
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
int sd_send_error(struct port *p, uint32_t stream, const char *code,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Blocks for the host's next frame (for ops that take a stream of data);
 * 1 and a frame (valid until the next call), -1 when the host went or broke
 * the protocol (e says which). */
int sd_recv_frame(struct port *p, struct sp_frame *f, int timeout_ms,
    struct sp_err *e);

#endif
