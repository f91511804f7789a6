/*
 * sp_vm.h: a sandbox's VM: libvirt and QEMU's monitor, the host<->guest frame
 * format and channel, files in the guest, checkpoint images.  Built on the
 * core and storage.
 */
#ifndef SP_VM_H
#define SP_VM_H

#include <pthread.h>

#include "sp_storage.h"

struct sp_ctx;
struct sp_store;
struct sp_chan;

/* ---- virt: libvirt ---- */
struct sp_virt;
/* A volume's disk in a VM (sp_volume.c). */
struct sp_vm_volume {
	const char *disk;		/* its raw image */
	const char *serial;		/* the volume's id */
	char target[4];			/* vdb .. vdz */
	int ro;
	int bus;			/* its PCIe port's bus, 0: libvirt's pick */
};
struct sp_vm_spec {
	const char *name;		/* sp-<id> */
	int memory_mib;
	int vcpus;
	const char *kernel, *initrd;
	const char *cmdline;		/* NULL or "": SP_VIRT_CMDLINE, or
					 * SP_VIRT_CMDLINE_TCG for qemu */
	const char *disk;		/* raw image */
	const char *chan_dir;		/* /run/space/<id>: space.N.sock, console.log */
	int nports;			/* virtio-serial ports space.0 .. space.N-1 */
	const char *virt_type;		/* "kvm" or "qemu" */
	const char *uuid;		/* NULL: libvirt picks one */
	int shared_vectors;		/* 1: libvirt's default virtio-serial
					 * controller (31 ports, every queue on
					 * one interrupt vector), as VMs saved
					 * before 2026-12 have it; 0: ports for
					 * ours alone, a vector per queue */
	int no_egress;			/* 1: no egress port (VMs saved before
					 * 2026-11-30 have none) */
	int balloon;			/* 1: a virtio balloon that gives the
					 * host back the pages the guest frees
					 * (VMs saved before 2026-12-06 have
					 * none) */
	unsigned jail_uid, jail_gid;	/* 0: libvirt's user for QEMU; else
					 * the VM's own (sp_jail.c) */
	int mergeable;			/* 1: KSM may merge its memory's pages
					 * with any other VM's (SPACE_KSM) */
	int cpu_quota_pct;		/* 0: none; 150: 1.5 CPUs */
	int io_weight;			/* 0: none; else 10..1000 */
	const struct sp_vm_volume *volumes;	/* plugged in when saved */
	int nvolumes;
};
#define SP_PORTS_DEFAULT	8
#define SP_PORTS_MAX		31	/* one virtio-serial controller's */
/* The devices a saved VM must find again when it is restored: QEMU loads
 * its state only into the virtio-serial layout it was saved with. */
struct sp_vm_layout {
	int shared_vectors;		/* as in sp_vm_spec */
	int nports;			/* space.0 .. space.N-1 */
	int egress;			/* has the egress port */
	int balloon;			/* has the balloon */
};
/* What a VM booted, not restored, gets: this build's layout, unless
 * SPACE_VM_LAYOUT says "shared" (the controller of VMs saved before
 * 2026-12), "pre-balloon" (no balloon: VMs saved before 2026-12-06) or
 * "pre-egress" (no balloon, the old controller and no egress port: VMs
 * saved before 2026-11-30) — to test what restoring those needs, or to go
 * back. */
void sp_virt_boot_layout(struct sp_vm_layout *l);
/* 1 when l is this build's layout (either controller), else 0: a template
 * checkpoint of another is stale, its guest made by an older build (or,
 * without the balloon, one whose copies would never give memory back). */
int sp_vm_layout_current(const struct sp_vm_layout *l);
/* Where the daemon writes the sandbox's id, host name and labels for the
 * workload (the identity op). */
#define SP_GUEST_IDENTITY_FILE	"/run/space/identity.json"
/* QEMU's own monitor socket in the run directory (sp_qmp.c). */
#define SP_QMP_SOCK	"qmp.sock"
/* A session on it: connected at open, command mode asked for with the first
 * commands (one write); commands without arguments ("cont", "query-kvm");
 * *ret (when not NULL) takes the answer's "return".  Errors: not-running (no
 * monitor there), timeout, qemu, protocol. */
struct sp_qmp;
int sp_qmp_open(struct sp_qmp **q, const char *run_dir, int timeout_ms,
    struct sp_err *e);
int sp_qmp_cmd(struct sp_qmp *q, const char *cmd, json_t **ret,
    struct sp_err *e);
/* n commands in one write, answered in order; rets (may be NULL) has room
 * for n answers. */
int sp_qmp_cmds(struct sp_qmp *q, const char *const cmds[], size_t n,
    json_t *rets[], struct sp_err *e);
void sp_qmp_close(struct sp_qmp *q);
#define SP_VIRT_CMDLINE	"console=ttyS0 root=/dev/vda panic=-1 quiet"
/*
 * What a guest under TCG (virt type qemu) gets after it, by default: 5-9% less
 * of the guest's CPU per call (guests of each, side by side), and with the
 * last three 7% less again.  TCG runs no guest instruction speculatively, so
 * the Spectre mitigations guard nothing there; the guest kernel need not
 * zero each allocation for itself, count pressure stalls, watch its TSC or
 * its lockups, check its own copies to and from user memory or move its
 * stack on every system call; and of the security modules only Landlock
 * stays, which programs in the sandbox may use to confine themselves.  The
 * sandbox's boundary is the VM, none of these.  Nor is its memory limit a
 * cgroup in the guest: the VM's size is the limit, and without the memory
 * controller the guest's kernel charges no page it hands out.  Nor does it
 * compact its memory ahead of need (kcompactd looked twice a second, waking
 * an idle guest): it still compacts when an allocation asks.
 */
#define SP_VIRT_CMDLINE_TCG	SP_VIRT_CMDLINE " mitigations=off " \
	"init_on_alloc=0 psi=0 tsc=reliable nowatchdog lsm=landlock " \
	"cgroup_disable=memory hardened_usercopy=off randomize_kstack_offset=off " \
	"sysctl.vm.compaction_proactiveness=0"
/* The guest kernel's command line of a VM booted here, when its spec names
 * none: SPACE_VM_CMDLINE when set, else SP_VIRT_CMDLINE_TCG for virt type
 * "qemu" and SP_VIRT_CMDLINE for "kvm".  A template checkpoint booted with
 * another is stale (sp_ckpt_current). */
const char *sp_virt_boot_cmdline(const char *virt_type);
/* Opens the connection with a quiet error handler. */
int sp_virt_open(struct sp_virt **v, const char *uri, struct sp_err *e);
void sp_virt_close(struct sp_virt *v);
/* "kvm" when /dev/kvm exists and libvirt offers kvm, else "qemu"; want is
 * "auto", "kvm" or "qemu". */
int sp_virt_pick_type(struct sp_virt *v, const char *want, char out[16],
    struct sp_err *e);
/* The domain XML of a spec; the caller frees *xml. */
int sp_virt_domain_xml(const struct sp_vm_spec *s, char **xml, struct sp_err *e);
/* space-noded's libvirt side (sp_noded_virt.c): its connection to libvirt
 * (uri), opened at the first VM op, shared by the threads that serve. */
struct sp_noded_vm {
	int root_fd;			/* SPACE_ROOT, O_PATH */
	const struct sp_conf *conf;
	const char *uri;
	pthread_mutex_t lock;
	struct sp_virt *virt;
};
/* Carries out a VM op r (sp_noded_parse took it), its XML and files checked
 * first; *value (NULL when none) is what it answers. */
int sp_noded_vm_do(struct sp_noded_vm *c, const struct sp_noded_req *r,
    json_t **value, struct sp_err *e);
/* A connection that asks space-noded at sock (sp_virt_noded.c): every
 * sp_virt_* call on it goes there as one request. */
int sp_virt_open_noded(struct sp_virt **v, const char *sock, struct sp_err *e);
/* Its socket when v goes through space-noded, else NULL. */
const char *sp_virt_noded_sock(const struct sp_virt *v);
/* What c says: libvirt itself, or space-noded at $SPACE_RUN/noded.sock
 * when SPACE_LIBVIRT_URI is "noded", or for a process not root when it is
 * qemu:///system; at SOCKET when it is "noded:SOCKET" (sp_ctx_virt.c). */
int sp_virt_uri_noded(const char *uri);		/* 1 or 0 */
int sp_virt_connect(const struct sp_conf *c, struct sp_virt **v,
    struct sp_err *e);
/* One request to space-noded (req taken, even on error); *value (may be
 * NULL) takes what it answered, or NULL. */
int sp_virt_noded_call(const char *sock, json_t *req, json_t **value,
    struct sp_err *e);
/* The strings of a spec read back from its XML. */
#define SP_VM_VOLUMES_MAX	16	/* volumes' disks in a domain XML */
struct sp_vm_spec_text {
	char name[64], uuid[37], virt_type[8], cmdline[1024];
	char kernel[SP_PATH_MAX], initrd[SP_PATH_MAX], disk[SP_PATH_MAX];
	char chan_dir[SP_PATH_MAX];
	struct sp_vm_volume volumes[SP_VM_VOLUMES_MAX];
	char volume_disks[SP_VM_VOLUMES_MAX][SP_PATH_MAX];
	char volume_serials[SP_VM_VOLUMES_MAX][24];
};
/* The spec xml was written of (its strings in t), when xml is exactly what
 * sp_virt_domain_xml writes of it; bad-input for any other text.  What
 * space-noded lets through to libvirt. */
int sp_virt_xml_spec(const char *xml, struct sp_vm_spec *s,
    struct sp_vm_spec_text *t, struct sp_err *e);
int sp_virt_define(struct sp_virt *v, const char *xml, struct sp_err *e);
int sp_virt_start(struct sp_virt *v, const char *name, struct sp_err *e);
/* destroy and undefine: absent (or not running) is not an error. */
int sp_virt_destroy(struct sp_virt *v, const char *name, struct sp_err *e);
int sp_virt_undefine(struct sp_virt *v, const char *name, struct sp_err *e);
int sp_virt_pause(struct sp_virt *v, const char *name, struct sp_err *e);
int sp_virt_resume(struct sp_virt *v, const char *name, struct sp_err *e);
int sp_virt_save(struct sp_virt *v, const char *name, const char *path,
    struct sp_err *e);
/* The memory state to path, the domain left as it was (running or paused). */
int sp_virt_save_memory(struct sp_virt *v, const char *name, const char *path,
    struct sp_err *e);
/* The domain's UUID as text. */
/* Grows a running VM's disk (its target, "vda") to bytes; the guest's
 * kernel is told. */
/* A volume's <disk> (jailed: the VM runs as its own uid, and reaches the
 * file through the volume's ACL, not libvirt's chown). */
int sp_virt_volume_xml(const struct sp_vm_volume *d, int jailed, char **xml,
    struct sp_err *e);
/* Plugs volume d's disk into running VM name (its XML sp_virt_volume_xml's;
 * through space-noded, written there for its own path of d's volume, and
 * only into a VM with a jail); unplugs the volume of that serial and waits
 * up to SP_VOLUME_UNPLUG_MS for the guest to let go (gone already is
 * done). */
#define SP_VOLUME_UNPLUG_MS	15000
int sp_virt_volume_plug(struct sp_virt *v, const char *name,
    const struct sp_vm_volume *d, int jailed, struct sp_err *e);
int sp_virt_volume_unplug(struct sp_virt *v, const char *name,
    const char *serial, struct sp_err *e);
/* 1 when a domain's XML has the volume of that serial plugged (its disk's
 * alias ua-vol-SERIAL). */
int sp_virt_volume_in(const char *xml, const char *serial);
int sp_virt_block_resize(struct sp_virt *v, const char *name, const char *disk,
    uint64_t bytes, struct sp_err *e);
/* The VM's memory, as its domain says. */
int sp_virt_memory_kib(struct sp_virt *v, const char *name,
    unsigned long long *kib, struct sp_err *e);
int sp_virt_uuid(struct sp_virt *v, const char *name, char out[37],
    struct sp_err *e);
/* Restores a save image (xml, may be NULL, replaces its domain XML, e.g.
 * for other paths); with name, the domain named is made to run also when
 * the image was saved paused. */
int sp_virt_restore(struct sp_virt *v, const char *path, const char *xml,
    const char *name, struct sp_err *e);
/* libvirt's counters of every domain of this toolkit (sp-*), one call:
 * {"sp-ID": {"state.state": 1, "cpu.time": NS, "balloon.rss": KIB,
 * "block.0.wr.bytes": N, ...}, ...}. */
int sp_virt_stats(struct sp_virt *v, json_t **out, struct sp_err *e);
/* Every domain's name, to fn; a non-zero return from fn stops. */
int sp_virt_list(struct sp_virt *v, int (*fn)(const char *, void *),
    void *arg, struct sp_err *e);
/* The domain's XML as libvirt has it; the caller frees *xml. */
int sp_virt_xml(struct sp_virt *v, const char *name, char **xml,
    struct sp_err *e);
/* libvirt's version and the hypervisor's, e.g. "libvirt 9.0.0, QEMU 7.2.0". */
int sp_virt_version(struct sp_virt *v, char *out, size_t n, struct sp_err *e);
/* "running", "paused", "shutoff", "crashed", "absent", ... */
int sp_virt_state(struct sp_virt *v, const char *name, char out[16],
    struct sp_err *e);

/* ---- proto: the host<->guest frame format (design.md), both sides ---- */
/* A frame on the wire: u32 length (big endian) of what follows, u8 type,
 * u32 stream (big endian), payload.  length = 5 + payload length. */
#define SP_PROTO_VERSION	1
#define SP_FRAME_MAX		(1024 * 1024)	/* payload bound */
#define SP_JSON_MAX		(64 * 1024)	/* control message bound */
#define SP_FRAME_HDR		9
#define SP_FRAME_CHUNK		(64 * 1024)	/* data frame and read size */
enum sp_frame_type {
	SP_FR_HELLO = 1,	/* host->guest {"op":"hello","nonce":s}; guest->host
				   {"version":n,"boot_id":s,"nonce":s} */
	SP_FR_REQ = 2,		/* host->guest JSON request, e.g. {"op":"exec",...} */
	SP_FR_STDIN = 3,	/* host->guest data; empty payload = EOF */
	SP_FR_STDOUT = 4,	/* guest->host data */
	SP_FR_STDERR = 5,	/* guest->host data */
	SP_FR_EXIT = 6,		/* guest->host {"status":n} or {"signal":n} */
	SP_FR_ERROR = 7,	/* either way {"error":token,"msg":s} */
	/* The egress port only (space.egress; see "egress tunnel" below). */
	SP_FR_OPEN = 8,		/* guest->host JSON: a new stream */
	SP_FR_DATA = 9,		/* either way: bytes; empty payload = EOF */
	SP_FR_WINDOW = 10,	/* either way: u32 (big endian) more bytes */
	SP_FR_CLOSE = 11,	/* either way: the stream is over; empty */
	SP_FR_ANSWER = 12,	/* host->guest JSON: the answer to a dns OPEN */
	SP_FR_STARTED = 13,	/* guest->host {"pid":n}: an exec asked with
				   "announce" has started (before its output) */
	SP_FR__MAX = 13
};
struct sp_frame {
	uint8_t type;
	uint32_t stream;
	uint32_t len;
	unsigned char *data;	/* points into the decoder's buffer */
};
/* Incremental decoder: feed bytes, take frames; strict and bounded.  Take
 * every frame (sp_frame_dec_next until 0) before feeding again: a feed may
 * move the buffer, and the decoder holds at most one frame plus one feed of
 * up to SP_FRAME_CHUNK bytes.  After an error, release and init it again. */
struct sp_frame_dec {
	unsigned char *buf;
	size_t len, cap, off;
};
void sp_frame_dec_init(struct sp_frame_dec *d);
void sp_frame_dec_release(struct sp_frame_dec *d);
int sp_frame_dec_feed(struct sp_frame_dec *d, const void *p, size_t n,
    struct sp_err *e);
/* 1 and a frame, 0 when more bytes are needed, -1 on a protocol error
 * (oversize, unknown type, JSON frame over SP_JSON_MAX). */
int sp_frame_dec_next(struct sp_frame_dec *d, struct sp_frame *f,
    struct sp_err *e);
/* The header of a frame of n payload bytes (n <= SP_FRAME_MAX), for callers
 * that queue frames themselves on nonblocking descriptors. */
void sp_frame_hdr(unsigned char h[SP_FRAME_HDR], uint8_t type,
    uint32_t stream, size_t n);
/* Writes one whole frame to fd (blocking fd, EINTR-safe). */
int sp_frame_write(int fd, uint8_t type, uint32_t stream, const void *p,
    size_t n, struct sp_err *e);
int sp_frame_write_json(int fd, uint8_t type, uint32_t stream,
    const json_t *j, struct sp_err *e);
/* Parses a JSON frame payload strictly (object, bounded); caller decrefs. */
int sp_frame_json(const struct sp_frame *f, json_t **out, struct sp_err *e);

/*
 * ---- the egress tunnel (design.md) ----
 * The port named space.egress (host socket RUN/ID/egress.sock, served by
 * QEMU; space-gatewayd connects to it) carries every network connection of
 * the guest as a stream of frames.  The host sends HELLO {"op":"hello",
 * "nonce":s} when it connects, the guest answers HELLO {"version":n,
 * "boot_id":s,"nonce":s,"egress":1,"inbound":1}; every stream of an
 * earlier host connection is gone then, on both sides.
 *
 * Streams are opened by the guest only, with an id of its choosing (not 0,
 * not one open now):
 *	OPEN {"kind":"tcp","host":H,"port":P}	a TCP connection to H:P (a DNS
 *		name, or an IPv4 address in dotted form): what the guest's
 *		transparent redirect caught
 *	OPEN {"kind":"proxy"}	a client of the guest's HTTP proxy: the
 *		host reads the HTTP request (CONNECT or absolute form) itself
 *	OPEN {"kind":"dns","name":N}	may N be resolved?  The host answers
 *		ANSWER {"name":N,"allow":true} or {"name":N,"allow":false,
 *		"reason":R} (N exactly as asked), and the stream is over; a
 *		guest that waited too long (3 s) sends CLOSE for it instead.
 *	OPEN {"kind":"inbound","ref":R}	the connection the host asked for
 *		with R (below), made: the guest's daemon connected to
 *		127.0.0.1:PORT in the guest.  OPEN {"kind":"inbound","ref":R,
 *		"error":"refused"} says it could not be made, and opens nothing.
 * The host asks for inbound connections (space-port) with OPEN
 * {"kind":"inbound","port":PORT,"ref":R} on stream 0 (R positive, new),
 * of a guest whose hello answer said "inbound":1.  A guest with no slot
 * left says nothing: the host gives up after 15 s.  The host CLOSEs an
 * inbound OPEN for a ref nobody waits for (given up, answered, never
 * asked).
 * A tcp, proxy or inbound stream then carries DATA both ways.  Each side
 * may have SP_EGRESS_WINDOW bytes of DATA payload unacknowledged; the
 * receiver sends WINDOW (4 bytes: how many more) as it hands data on.
 * DATA payloads are 1..SP_FRAME_CHUNK bytes, or empty for EOF (nothing more from that side;
 * the other may still send).  A stream is over for a side once it has sent
 * and received EOF, or sent or received CLOSE (an abort: what arrives for it
 * afterwards is dropped).  A refusal is an HTTP 403 response in DATA, then
 * EOF.  Frames for a stream that is not open are dropped; an OPEN of an id
 * in use, a DATA over the window or any other frame breaks the connection
 * (the guest says so with ERROR {"error":"protocol"} on stream 0 and waits
 * for the next HELLO; the host connects again).  The host closes (CLOSE)
 * what is over SP_EGRESS_STREAMS_MAX.  Each side sends WINDOW once it has
 * handed on SP_EGRESS_WINDOW_BATCH bytes not yet announced: a side that has
 * handed on all it got leaves the other at least the window less that to
 * send, so a stream never stalls on it, and a small request and its answer
 * cost no WINDOW frame either way (each is a virtio buffer, an interrupt
 * and a wake-up in the guest).
 */
#define SP_EGRESS_PORT_NAME	"space.egress"
#define SP_EGRESS_SOCK		"egress.sock"
#define SP_EGRESS_WINDOW	(256 * 1024)
#define SP_EGRESS_WINDOW_BATCH	(32 * 1024)
#define SP_EGRESS_STREAMS_MAX	1024
/* In the guest: the HTTP proxy the workload's HTTP_PROXY names, the port the
 * transparent redirect sends other TCP to, and where names resolve. */
#define SP_EGRESS_PROXY_PORT	3128
#define SP_EGRESS_REDIRECT_PORT	3129
#define SP_EGRESS_FAKE_NET	"198.18.0.0"	/* /15: answers to lookups */

/* ---- chan: the host end of a sandbox's channel ---- */
struct sp_chan;
struct sp_ctx;
/* Takes a free port of the sandbox (flock on run/<id>/space.N.lock, waiting
 * up to timeout_ms for one), connects and exchanges hello. */
int sp_chan_open(struct sp_chan **c, const char *run, const char *id,
    int timeout_ms, struct sp_err *e);
/* As sp_chan_open, with req (a REQ frame, on the stream put in *stream) in
 * the same write as the hello: its answer (sp_chan_recv) comes a turn of
 * the guest sooner.  Only for a request that may run twice: when the hello
 * is not answered in time and must be said again on a new connection, req
 * is sent again too, and the first may still run. */
int sp_chan_open_req(struct sp_chan **c, const char *run, const char *id,
    int timeout_ms, const json_t *req, uint32_t *stream, struct sp_err *e);
struct sp_exec;
/* As sp_chan_open_req, with first's exec request (after_identity) and its
 * stdin's end, when that is at hand, in the same write as the hello and
 * req: the guest goes from the hello to the op to the command in one turn.
 * The daemon must know after_identity (a claim knows it from the pod's
 * record).  Never sent twice: an unanswered hello is waited on until
 * timeout_ms, then an error.  *sent says whether any of it went (the guest
 * may run it); the next sp_chan_exec, with the same x, goes on with it. */
int sp_chan_open_req_first(struct sp_chan **c, const char *run,
    const char *id, int timeout_ms, const json_t *req, uint32_t *stream,
    const struct sp_exec *first, int *sent, struct sp_err *e);
void sp_chan_close(struct sp_chan *c);
/* The guest's hello ({"version","boot_id",...}); borrowed reference. */
json_t *sp_chan_hello(struct sp_chan *c);
/* Waits until the guest daemon answers hello on the sandbox's port 0. */
int sp_chan_wait_ready(const char *run, const char *id, int timeout_ms,
    struct sp_err *e);
/* Connects to a unix socket QEMU listens on (a channel port, its monitor),
 * non-blocking; waits out a full backlog (QEMU takes one client at a time)
 * until deadline (ms of sp_clock_ms, -1 none).  not-running when nothing
 * listens there. */
int sp_qemu_connect(const char *path, int64_t deadline, int *fd,
    struct sp_err *e);
struct sp_exec {
	char *const *argv;
	char *const *env;	/* "K=V", NULL-terminated, may be NULL */
	int env_add;		/* env is set over the sandbox's own and the
				 * defaults, instead of replacing them */
	const char *cwd;	/* may be NULL */
	int in_fd, out_fd, err_fd;	/* in_fd -1: no stdin */
	/* Zero (as in `= { 0 }`) means the default for each of these. */
	const char *user;	/* a name or a decimal uid in the guest */
	int tty;		/* 1: a pty of rows x cols; out_fd carries it */
	int rows, cols;
	int timeout_ms;		/* > 0: SIGKILL after it, code "timed-out" */
	int ctl_fd;		/* > 0: struct sp_exec_ctl records to forward */
	/* Non-NULL: the guest says the command's pid as it starts (a daemon
	 * whose hello has "announce"; else the call fails, bad-state), and
	 * started gets it before any output. */
	void (*started)(void *arg, pid_t pid);
	void *started_arg;
	int *signaled;		/* non-NULL: 1 when a signal ended it */
};
/* What a caller (a signal handler, say) writes whole to ctl_fd while the
 * call runs: sig > 0 sends that signal to the command's process group,
 * sig 0 sets its pty's size to rows x cols. */
struct sp_exec_ctl {
	int sig, rows, cols;
};
/* Runs a command; *status is the wait status style result: exit code, or
 * 128+signal.  Platform failures are -1 with e set; "exec-failed" when the
 * command could not start, "timed-out" when timeout_ms passed. */
int sp_chan_exec(struct sp_chan *c, const struct sp_exec *x, int *status,
    struct sp_err *e);
/* Sends x's exec request now, on a channel whose open carried an identity
 * op (sp_chan_open_req), before that op is answered: the guest runs it once
 * the identity is set and refuses it when the identity failed, and so goes
 * from one to the other without waiting for the host.  The next
 * sp_chan_exec, with the same x, goes on with that call.  0 sent; 1 when
 * nothing was sent (the guest's daemon is an older one, or the request
 * could not be made: the plain sp_chan_exec says why); -1 when sending
 * failed, and the guest may have it. */
int sp_chan_exec_ahead(struct sp_chan *c, const struct sp_exec *x,
    struct sp_err *e);
/* For a command-line caller of sp_chan_exec: SIGINT, SIGTERM, SIGHUP and
 * SIGQUIT (and SIGWINCH, for the size of stdin's terminal, with tty) become
 * sp_exec_ctl records on the fd returned, the call's ctl_fd; -1 on error. */
int sp_exec_forward_signals(int tty, struct sp_err *e);
/* Starts a detached command (in_fd, out_fd, err_fd, timeout_ms and ctl_fd
 * unused): it outlives the call, its output kept in the guest's ring
 * buffer; *pid is its pid in the guest. */
int sp_chan_detach(struct sp_chan *c, const struct sp_exec *x, pid_t *pid,
    struct sp_err *e);
/* The guest daemon's processes: fn gets each as a checked object
 * {"pid","argv","state":"running"|"exited","started","detached","tty",
 * "status"|"signal"} (borrowed); a non-zero return from fn stops. */
int sp_chan_ps(struct sp_chan *c, int (*fn)(json_t *, void *), void *arg,
    struct sp_err *e);
/* Writes a detached process's kept output to fd; with follow, what comes
 * after too, until it exits.  *running (may be NULL) is 1 when it still
 * runs; not-found for a pid the daemon did not detach. */
int sp_chan_logs(struct sp_chan *c, pid_t pid, int follow, int fd,
    int *running, struct sp_err *e);
/* Sends sig to the process group of a running process the daemon started;
 * not-found for any other pid, bad-state when it has exited. */
int sp_chan_kill(struct sp_chan *c, pid_t pid, int sig, struct sp_err *e);
/* sp_chan_open on a sandbox the state DB says is running. */
int sp_chan_open_running(struct sp_ctx *x, const char *id,
    struct sp_chan **c, int timeout_ms, struct sp_err *e);

/* The generic exchange other call types are built on.  A stream number per
 * call; sends queue one frame (payload <= SP_FRAME_CHUNK) and wait until it is
 * written; recv returns the next frame, valid until the next recv.  A timeout
 * or protocol error closes the channel (timeout_ms < 0: no timeout). */
uint32_t sp_chan_stream_new(struct sp_chan *c);
int sp_chan_send(struct sp_chan *c, uint8_t type, uint32_t stream,
    const void *p, size_t n, int timeout_ms, struct sp_err *e);
int sp_chan_send_json(struct sp_chan *c, uint8_t type, uint32_t stream,
    const json_t *j, int timeout_ms, struct sp_err *e);
int sp_chan_recv(struct sp_chan *c, struct sp_frame *f, int timeout_ms,
    struct sp_err *e);
/* Turns a guest's ERROR frame into e (its token when well-formed, else
 * "guest"; the message sanitized).  Always returns -1. */
int sp_chan_error_frame(const struct sp_frame *f, struct sp_err *e);
/* One call answered by a single EXIT: req (taken) goes on a fresh stream,
 * and the EXIT's JSON comes back in *answer (the caller's to free) unless
 * answer is NULL.  The guest's ERROR becomes e. */
int sp_chan_call(struct sp_chan *c, json_t *req, int timeout_ms,
    json_t **answer, struct sp_err *e);

/* ---- fs: files and trees in a sandbox, through its guest daemon ---- */
/* Every call waits at most sp_fs_timeout_ms (SP_FS_TIMEOUT_MS; a test of
 * a silent guest shortens it) for each frame of the guest; memory stays a
 * frame whatever the size of the data.  Guest paths are absolute, without
 * NUL, under SP_PATH_MAX bytes.  After a call failed mid-stream the channel
 * may be closed (sp_chan_* says so): open another. */
#define SP_FS_TIMEOUT_MS	30000
extern int sp_fs_timeout_ms;
#define SP_FS_LIST_MAX		100000
int sp_fs_path_check(const char *path, struct sp_err *e);
/* The file's bytes to out_fd; *size (may be NULL) gets their count. */
int sp_fs_read(struct sp_chan *c, const char *path, int out_fd,
    uint64_t *size, struct sp_err *e);
/* in_fd's bytes to the file until EOF: an atomic replace, or appended when
 * append; mode < 0 keeps the old file's (0644 for a new one). */
int sp_fs_write(struct sp_chan *c, const char *path, int in_fd, int mode,
    int append, uint64_t *size, struct sp_err *e);
/* *out: {"type","size","mode","uid","gid","mtime"[,"target"]}; caller
 * decrefs.  follow: stat the symlink's target. */
int sp_fs_stat(struct sp_chan *c, const char *path, int follow,
    json_t **out, struct sp_err *e);
/* fn gets each entry ({"name",...the stat fields}, borrowed) and may stop
 * the walk by returning -1; *truncated (may be NULL) says whether the guest
 * cut the list at SP_FS_LIST_MAX. */
int sp_fs_list(struct sp_chan *c, const char *path,
    int (*fn)(json_t *ent, void *arg), void *arg, int *truncated,
    struct sp_err *e);
int sp_fs_mkdir(struct sp_chan *c, const char *path, int parents, int mode,
    struct sp_err *e);
int sp_fs_remove(struct sp_chan *c, const char *path, int recursive,
    struct sp_err *e);
int sp_fs_rename(struct sp_chan *c, const char *from, const char *to,
    struct sp_err *e);
/* Raw tar streams: the guest's path packed (pax) to out_fd, its top entry
 * named name (NULL: path's last component); in_fd's tar unpacked into the
 * guest's directory dir. */
int sp_fs_tar_out(struct sp_chan *c, const char *path, const char *name,
    int out_fd, struct sp_err *e);
int sp_fs_tar_in(struct sp_chan *c, const char *dir, int in_fd,
    struct sp_err *e);
/* Copies a host path into the guest's directory dir under name (NULL: the
 * last component of src); symlinks are copied as symlinks. */
int sp_fs_put(struct sp_chan *c, const char *src, const char *dir,
    const char *name, struct sp_err *e);
/* Copies the guest's path into the host directory dir under name (NULL:
 * the last component of path).  The guest's stream is hostile: entries
 * outside name, absolute, with "..", or through symlinks are refused. */
int sp_fs_get(struct sp_chan *c, const char *path, const char *dir,
    const char *name, struct sp_err *e);
/* Unpacks a tar stream from in_fd into the host directory dir with the same
 * checks (top: the one top-level name allowed, NULL: any). */
int sp_fs_untar(int in_fd, const char *dir, const char *top,
    struct sp_err *e);

/* ---- ckpt: a template's booted checkpoint ---- */
struct sp_ckpt_info {
	char id[SP_ID_LEN + 1];		/* the id it was booted under */
	char uuid[37];
	int memory_mib, vcpus;		/* what it was booted with */
};
/* templates/<name>@<digest>.ckpt under root. */
int sp_ckpt_path(const char *root, const struct sp_template_row *t,
    char *out, size_t n, struct sp_err *e);
int sp_ckpt_read(const char *ckpt, struct sp_ckpt_info *ci, struct sp_err *e);
int sp_ckpt_uuid_new(char out[37], struct sp_err *e);
/* The layout of the VM saved at path (a libvirt save image), read from its
 * header: what a restore with a fresh XML must give it again. */
int sp_ckpt_layout(const char *path, struct sp_vm_layout *l, struct sp_err *e);
/* The uid a domain's XML (what names it) or a save image's header runs
 * its QEMU as (sp_jail.c): 0 when it has no jail of ours. */
int sp_vm_xml_jail(const char *xml, const char *what, unsigned *uid,
    struct sp_err *e);
int sp_ckpt_jail(const char *path, unsigned *uid, struct sp_err *e);
/* 1 when the template checkpoint ckpt (a directory) has this build's layout
 * (sp_vm_layout_current) and was booted with the command line a VM of its
 * virt type boots with now (sp_virt_boot_cmdline), 0 when it is stale, -1
 * when it cannot be read. */
int sp_ckpt_current(const char *ckpt, struct sp_err *e);
/* The libvirt save image at path named name and uuid in its header, whose
 * name and uuid (of the same lengths) are rewritten if they are others. */
int sp_ckpt_identify(const char *path, const char *name, const char *uuid,
    struct sp_err *e);

/* ---- trim: a guest's free memory back to the host (sp_trim.c) ---- */
/* Sandbox id's guest (running, on this node) takes and lets go its free
 * memory, less a reserve, which its balloon's free page reporting hands
 * back to the host.  With once, not again while the same QEMU runs it
 * (*out then says "trimmed": false).  *out: the fields of its line. */
int sp_trim(struct sp_ctx *x, const char *id, int once, json_t **out,
    struct sp_err *e);
/* The trim op on an open channel (a VM with no sandbox row): the guest's
 * answer (free_kib, taken_kib, balloon). */
int sp_trim_chan(struct sp_chan *c, json_t **answer, struct sp_err *e);

/* ---- ctx_virt: a command's libvirt connection (sp_ctx_virt.c) ---- */
/* Loads the config, opens the DB and, when with_virt, libvirt. */
int sp_ctx_open(struct sp_ctx *x, int with_virt, struct sp_err *e);
/* Opens libvirt on first need, and picks the virt type. */
int sp_ctx_virt(struct sp_ctx *x, struct sp_err *e);

/* ---- boost ---- */
/* sp_boost.c: a claim's VM at ten times the CPU weight of the node's other
 * sandboxes until its create is done. */
struct sp_boost {
	int fd;			/* the VM cgroup's weight file, or -1 */
	int markfd;		/* run/pods/ID.boost, locked while boosted */
	char old[24];		/* the weight to put back */
	size_t oldlen;
	char mark[SP_PATH_MAX];
};
/* $SPACE_RUN's directory of what is kept of each sandbox beside its VM:
 * a pod's record (ID.json, sp_pool_claim.c), a claim's boost mark
 * (ID.boost), which QEMU a trim saw (ID.trimmed, sp_trim.c) and a fence's
 * mark (ID.fenced, sp_reconcile.c).  The user space's (space-init), as
 * those run as space write there and a VM's own run directory is its
 * jail's. */
#define SP_PODS_DIR	"pods"
#define SP_POD_TRIMMED	"trimmed"
#define SP_POD_FENCED	"fenced"
/* run_dir/pods/ID.WHAT. */
int sp_pod_file(const char *run_dir, const char *id, const char *what,
    char *out, size_t n, struct sp_err *e);
/* Removes sandbox id's record and mark, if any (its VM is going). */
void sp_pod_forget(const char *run_dir, const char *id);
/* 1 when file may be sandbox id's weight file: a cpu.shares or cpu.weight
 * under /sys/fs/cgroup in a directory named for its domain, no "..".  What
 * a record or a mark says is checked with it: both are space's to write,
 * and root may read them. */
int sp_boost_file_ok(const char *file, const char *id);
/* Run as root: the weight file of the VM whose QEMU is pid, the user
 * space's, so that a claim run as space may boost it (nothing to do without
 * that user). */
int sp_boost_give(pid_t pid, const char *id, struct sp_err *e);
void sp_boost_init(struct sp_boost *b);
/* Boosts the VM of sandbox id whose vCPU thread is tid; -1 (nothing
 * changed, best effort) when its cgroup cannot be found or written. */
int sp_boost_start(struct sp_boost *b, const char *run_dir, const char *id,
    pid_t tid);
/* The same with the weight file found before (sp_boost_weight_file). */
int sp_boost_start_file(struct sp_boost *b, const char *run_dir,
    const char *id, const char *file);
/* The writable weight file of sandbox id's VM whose vCPU thread is tid. */
int sp_boost_weight_file(pid_t tid, const char *id, char *out, size_t n);
/* Puts the weight back; async-signal-safe, and may be called again. */
void sp_boost_restore(const struct sp_boost *b);
/* Puts it back and forgets it (sp_boost_init). */
void sp_boost_end(struct sp_boost *b);
/* Puts back what a booster that died left: 1 when it did, 0 when there was
 * nothing to do (none, or its booster is alive), -1 on error. */
int sp_boost_repair(const char *run_dir, const char *id, struct sp_err *e);
/* The weight file of sandbox id's VM (cpu.shares under cgroup v1, cpu.weight
 * under v2: the topmost directory of the thread's cgroup whose name holds
 * the domain's), from the texts of a vCPU thread's /proc/TID/cgroup and of
 * /proc/self/mountinfo, both changed in place; -1 when none is found. */
int sp_boost_weight_path(char *cgroup, char *mountinfo, const char *id,
    char *out, size_t n);

/* ---- cgroup: where a VM's cgroup is (sp_cgroup.c) ---- */
struct sp_cgroup {
	char mount[SP_PATH_MAX];	/* its hierarchy's mount point */
	char path[SP_PATH_MAX];		/* the domain's directory in it */
	int v2;				/* 1: cgroup v2's hierarchy */
};
/* Sandbox id's VM cgroup under controller ("cpu", "memory"): the v1
 * hierarchy that has it, else v2's; the topmost directory of the task's
 * cgroup whose name holds the domain's.  From the texts of the task's
 * /proc/TID/cgroup and of /proc/self/mountinfo, both changed in place; -1
 * when none is found (another domain's task, no such controller, a path
 * with "..", one too long). */
int sp_cgroup_parse(char *cgroup, char *mountinfo, const char *controller,
    const char *id, struct sp_cgroup *cg);
/* The same from the live /proc files of task tid. */
int sp_cgroup_of(pid_t tid, const char *controller, const char *id,
    struct sp_cgroup *cg);
/* Does the path's last component name the domain of sandbox id (sp-ID, or
 * systemd's escape of it)? */
int sp_cgroup_names_domain(const char *path, const char *id);
/* The mount point of the v1 hierarchy with controller, else (*v2 1) of
 * cgroup v2; -1 when neither is mounted. */
int sp_cgroup_mount(const char *controller, char *out, size_t n, int *v2);

/* ---- tar: packing a tree, on both sides (sp_tar.c) ---- */
struct archive;
#define SP_TAR_ONE_FS	1	/* do not cross into other mounts */
/* src packed into w (opened by the caller) as entries named from top (its
 * last component replaced by top); bad-input, not-found or io. */
int sp_tar_pack(struct archive *w, const char *src, const char *top,
    int flags, struct sp_err *e);

#endif
