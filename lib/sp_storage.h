/*
 * sp_storage.h: storage: btrfs subvolumes, trees packed as tar, templates and their
 * sources, and the object store with what moves to and from it (sp_store.h,
 * sp_crypt.h).  Built on the core.
 */
#ifndef SP_STORAGE_H
#define SP_STORAGE_H

#include "sp_core.h"

struct sp_store;
struct sp_chan;

/* ---- ctx: what a command opens first (sp_ctx.c) ---- */
struct sp_virt;
struct sp_ctx {
	struct sp_conf conf;
	struct sp_db *db;
	struct sp_virt *virt;	/* NULL until needed (sp_ctx_virt, sp_vm.h) */
	void (*virt_close)(struct sp_virt *);	/* set with virt */
	char virt_type[16];
};
/* The config and the DB: all a command that never needs libvirt opens. */
int sp_ctx_open_db(struct sp_ctx *x, struct sp_err *e);
void sp_ctx_close(struct sp_ctx *x);
/* <root>/sandboxes/<id>, <run>/<id>, sp-<id>. */
int sp_sandbox_dir(const struct sp_ctx *x, const char *id, char *out, size_t n,
    struct sp_err *e);
int sp_sandbox_run_dir(const struct sp_ctx *x, const char *id, char *out,
    size_t n, struct sp_err *e);
void sp_sandbox_domain(const char *id, char out[SP_ID_LEN + 4]);
/* The per-sandbox lock (<root>/locks/sandbox-<id>.lock) every command that
 * acts on a sandbox holds while it does, so space-reconcile can tell a
 * command at work from one that died halfway.  wait 0: busy when taken. */
int sp_sandbox_lock(const struct sp_ctx *x, const char *id, int wait,
    int *fd, struct sp_err *e);
void sp_sandbox_unlock(int fd);


/* ---- noded: what space-noded, the node manager, takes (sp_noded*.c) ---- */
#define SP_NODED_LINE_MAX	24576	/* a request line, without its \n */
#define SP_NODED_PATH_MAX	512
#define SP_NODED_DEPTH		4	/* parts of a path */
#define SP_NODED_SOCK		"noded.sock"	/* in SPACE_RUN */
enum sp_noded_op {
	SP_NODED_PING, SP_NODED_CREATE, SP_NODED_SNAPSHOT, SP_NODED_DELETE,
	SP_NODED_READONLY,
	/* a plain directory (and those above it) in an area, to hold
	 * subvolumes: a sandbox's snapshots; and one removed, empty */
	SP_NODED_DIR, SP_NODED_RMDIR,
	/* a read-only subvolume's btrfs stream out to, and a stream in from,
	 * a descriptor the client passes with its request (SCM_RIGHTS) */
	SP_NODED_SEND, SP_NODED_RECEIVE,
	/* the bytes a subvolume holds of its own (sp_subvol_exclusive_bytes),
	 * its files the VMs' alone */
	SP_NODED_USAGE,
	/* the id maps of a user namespace the client's child just made, to
	 * unpack a template's owners in (sp_noded_userns.c) */
	SP_NODED_USERNS_MAP,
	/* libvirt's, on the domain sp-<id> of name (sp_noded_virt.c) */
	SP_NODED_VM_DEFINE, SP_NODED_VM_START, SP_NODED_VM_DESTROY,
	SP_NODED_VM_UNDEFINE, SP_NODED_VM_PAUSE, SP_NODED_VM_RESUME,
	SP_NODED_VM_SAVE, SP_NODED_VM_SAVE_MEMORY, SP_NODED_VM_RESTORE,
	SP_NODED_VM_RESIZE, SP_NODED_VM_STATE, SP_NODED_VM_XML,
	SP_NODED_VM_UUID, SP_NODED_VM_MEMORY, SP_NODED_VM_LIST,
	SP_NODED_VM_STATS,
	/* a volume's disk (volumes/<volume>/disk.raw) into and out of a
	 * running VM with a jail */
	SP_NODED_VM_PLUG, SP_NODED_VM_UNPLUG,
	SP_NODED_VIRT_TYPE, SP_NODED_VIRT_VERSION,
	/* a VM's host side: its directories' owners, its cgroup's limits,
	 * its subvolume's qgroup limit */
	SP_NODED_VM_PREPARE, SP_NODED_VM_LIMIT, SP_NODED_DISK_LIMIT,
	/* its run directory gone, once the VM is */
	SP_NODED_VM_RELEASE,
	/* the v1 pids cgroups of VMs that ended removed (root's: the jail
	 * step makes them) */
	SP_NODED_PIDS_SWEEP,
	/* a TLS leaf the node CA signs for one of this host's addresses
	 * (the API server's, run as space: the CA's key is root's); with the
	 * VM ops, in sp_noded_virt.c, where the network part is in reach */
	SP_NODED_TLS_LEAF,
	SP_NODED__COUNT
};
#define SP_NODED_XML_MAX	16384	/* a domain XML in a request */
#define SP_NODED_HOST_MAX	45	/* an IPv6 address's text, at most */
#define SP_NODED_VOLUME_MAX	20	/* a volume's id (its disk's serial) */
struct sp_noded_req {
	enum sp_noded_op op;
	char path[SP_NODED_PATH_MAX + 1];	/* relative to SPACE_ROOT */
	char src[SP_NODED_PATH_MAX + 1];	/* a snapshot's source */
	char parent[SP_NODED_PATH_MAX + 1];	/* a send's parent, or "" */
	int readonly;
	char name[SP_NAME_MAX + 1];		/* a domain: sp-<id> */
	char file[SP_NODED_PATH_MAX + 1];	/* a VM's mem.sav, absolute */
	char dir[SP_NODED_PATH_MAX + 1];	/* a VM's directory, absolute */
	char want[8];				/* a virt type */
	char host[SP_NODED_HOST_MAX + 1];	/* an address of this host */
	char volume[SP_NODED_VOLUME_MAX + 1];	/* a volume's id */
	char target[4];				/* a volume's disk: vdb..vdz */
	uint64_t bytes;				/* a disk's size, a limit */
	unsigned uid;				/* a jail's, or 0 */
	long pids;				/* a pids limit, or 0 */
	long pid;				/* a client's child's */
	char *xml;				/* a domain XML: freed by
						 * sp_noded_req_free */
	int fd;					/* the descriptor passed with
						 * it, or -1: closed by
						 * sp_noded_req_free */
	unsigned peer_uid, peer_gid;		/* who sent it (SO_PEERCRED),
						 * never from the line: 0 */
	long peer_pid;				/* its process, the same */
};
/* The op's name in requests. */
const char *sp_noded_op_name(enum sp_noded_op op);
/* O_WRONLY or O_RDONLY: the descriptor op needs passed with it; else -1. */
int sp_noded_op_fd(enum sp_noded_op op);
void sp_noded_req_free(struct sp_noded_req *r);
/* bad-input unless line (n bytes, no newline) is a request space-noded
 * takes, each path well-formed in an area its op may touch. */
int sp_noded_parse(const char *line, size_t n, struct sp_noded_req *r,
    struct sp_err *e);
/* bad-input unless p is such a path, in the areas of a subvolume made
 * (how 0) or of a snapshot's or a send's source (SP_NODED_SOURCE); with
 * SP_NODED_AREA an area itself too (where a stream is received). */
#define SP_NODED_SOURCE		1
#define SP_NODED_AREA		2
int sp_noded_path_check(const char *what, const char *p, int how,
    struct sp_err *e);
/* Carries out r beneath root_fd (SPACE_ROOT, open O_PATH, named root): no
 * component of a path may be a symlink or leave the root.  *value gets
 * what the op answers, if anything (else NULL). */
int sp_noded_do(int root_fd, const char *root, const struct sp_noded_req *r,
    json_t **value, struct sp_err *e);
/* The maps of the user namespace of r->pid, a child of the client's
 * (sp_noded_userns.c). */
int sp_noded_userns_map(const struct sp_noded_req *r, struct sp_err *e);
/* path (relative) opened beneath root_fd with openat2: nothing outside it,
 * no symlink, no magic link, no other mount; -1 with errno. */
int sp_noded_open_beneath(int root_fd, const char *path, int flags);
/*
 * bad-input unless only root may change the root (root_fd, named root) and
 * each directory from it down to dir (relative; "" for the root alone): a
 * program that opens abs (what) by path after space-noded checked it
 * (libvirt, btrfs send and receive) finds what was checked.
 */
int sp_noded_root_only(int root_fd, const char *root, const char *what,
    const char *abs, const char *dir, struct sp_err *e);
/* A client's request in two halves (sp_virt_noded.c), for one whose
 * stream flows in between: req (taken) sent with fd passed beside it (-1:
 * none), the connection returned; then its answer (*value may be NULL),
 * the connection closed.  sp_virt_noded_call is both at once. */
int sp_noded_request(const char *sock, json_t *req, int fd, struct sp_err *e);
int sp_noded_answer(int conn, const char *sock, json_t **value,
    struct sp_err *e);
/* 1 with space-noded's socket in sock when c sends what needs root there
 * (as sp_virt_connect does libvirt's calls, sp_ctx_virt.c), else 0. */
int sp_noded_for(const struct sp_conf *c, char sock[SP_PATH_MAX],
    struct sp_err *e);

/* ---- subvol: btrfs through libbtrfsutil ---- */
/* From then on this process's subvolume create, snapshot, read-only flag
 * and delete go to space-noded when c sends what needs root there
 * (sp_noded_for), every path beneath c's root; else they stay its own.
 * sp_ctx_open_db calls it. */
int sp_subvol_route(const struct sp_conf *c, struct sp_err *e);
/* space-noded's socket when this process's subvolumes go through it, else
 * NULL. */
const char *sp_subvol_noded(void);
/* dir, a directory in an area to hold subvolumes, and those above it:
 * space-noded's dir-create when routed (root's, 0755), else made here. */
int sp_subvol_mkdirs(const char *dir, mode_t mode, struct sp_err *e);
/* dir removed when empty (gone already: 0), by space-noded when routed. */
int sp_subvol_rmdir(const char *dir, struct sp_err *e);
int sp_subvol_is_btrfs(const char *path);			/* 1 or 0 */
int sp_subvol_create(const char *path, struct sp_err *e);
/* A snapshot of src at dst; readonly 1 or 0.  exists when dst is there. */
int sp_subvol_snapshot(const char *src, const char *dst, int readonly,
    struct sp_err *e);
/* Deletes a subvolume (and subvolumes below it); absent is not an error. */
int sp_subvol_delete(const char *path, struct sp_err *e);
int sp_subvol_set_readonly(const char *path, int readonly, struct sp_err *e);
int sp_subvol_exists(const char *path);				/* 1 or 0 */
int sp_subvol_readonly(const char *path);			/* 1 or 0 */
/* Bytes of data extents under path that no other file or subvolume shares
 * (FIEMAP, as `btrfs filesystem du` counts "exclusive"). */
int sp_subvol_exclusive_bytes(const char *path, uint64_t *out,
    struct sp_err *e);
/* The UUID a send stream against this subvolume names: its received_uuid
 * when it was received (*received 1), else its own UUID. */
int sp_subvol_lineage(const char *path, char out[37], int *received,
    struct sp_err *e);
/* Turns on btrfs's simple quotas on the filesystem at path unless it has
 * quotas already; mode gets "simple", "full" or "" (this kernel has no
 * simple quotas: left off). */
int sp_subvol_quota_enable(const char *path, char mode[8], struct sp_err *e);
/* Caps what the subvolume at path may hold of its own (its qgroup's
 * exclusive bytes): past it a write there fails with EDQUOT.  Nothing is
 * done, and 0 returned, when the filesystem has no quotas. */
int sp_subvol_limit(const char *path, uint64_t bytes, struct sp_err *e);

/* ---- digest: a file's SHA-256 (sp_digest.c) ---- */
/* SHA-256 (hex) and size of a file. */
int sp_digest_file(const char *path, char hex[65], uint64_t *size,
    struct sp_err *e);

/* ---- layer: archives unpacked into a staging tree, checked (sp_layer.c) ---- */
/* Unpacks the archive file (any format libarchive reads) into dest: with
 * oci, as an OCI image layer over what dest holds (whiteouts, a directory
 * replaced by a non-directory).  Entries that would escape dest, hard links
 * out of it and anything written through a symlink are bad-input; dest is
 * then half-written, for the caller to remove. */
int sp_layer_unpack(const char *file, const char *dest, int oci,
    struct sp_err *e);
/* The same, from the archive open at fd (named file in errors). */
int sp_layer_unpack_fd(int fd, const char *file, const char *dest, int oci,
    struct sp_err *e);
/* From then on, in this process, a device node an archive holds is not made
 * (only root may, and only in the host's user namespace): an empty file of
 * its owner and mode stands in its place, and list (an array; NULL: made
 * again) gets {path (relative to dest), type "c" or "b", major, minor,
 * mode, uid, gid, ino (the stand-in's)}.  Its path's parts are of
 * [A-Za-z0-9._+@-], else the archive is bad-input. */
void sp_layer_defer_devices(json_t *list);

/* fn run in a child in a user namespace of its own that space-noded at sock
 * maps (sp_userns.c), or root itself when sock is NULL: root there over
 * 0..65535 (the host's SP_IMPORT_IDS_FIRST..), 65536 being the caller's
 * uid and gid (not root's).  *value gets the JSON fn gives (taken), e the
 * error it sets. */
/* The id maps of the user namespace of the process whose /proc directory
 * pfd is (pid, for errors): 0..65535 to the host's SP_IMPORT_IDS_FIRST..,
 * and with client 65536 to uid (gid). */
int sp_userns_write_maps(int pfd, long pid, int client, unsigned uid,
    unsigned gid, struct sp_err *e);
int sp_userns_run(const char *sock, int (*fn)(void *, json_t **,
    struct sp_err *), void *arg, json_t **value, struct sp_err *e);

/* ---- image: OCI layouts and docker archives (sp_image.c) ---- */
enum { SP_IMAGE_NONE, SP_IMAGE_OCI, SP_IMAGE_DOCKER };
/* What the directory holds: an OCI layout (oci-layout), a docker save
 * archive unpacked (manifest.json), or neither. */
int sp_image_kind(const char *dir);
/* Applies the image tagged tag (NULL: the only one) of the layout or archive
 * in dir to rootfs, every blob checked against its digest first; *config
 * gets the template's defaults from the image config: {"env":[...],
 * "cwd":..., "user":..., "cmd":[...] (Entrypoint then Cmd), "labels":{}},
 * each only when the image sets it. */
int sp_image_unpack(const char *dir, int kind, const char *tag,
    const char *rootfs, json_t **config, struct sp_err *e);
/* What an image says, checked (fuzzed by tests/fuzz/fuzz-image.c): of an
 * index's manifests, the one tagged tag, the only one when tag is NULL, or
 * (nested, an index in the index) the linux/amd64 one, borrowed; NULL with
 * bad-input when none or several fit. */
json_t *sp_image_pick(json_t *manifests, const char *tag, int nested,
    struct sp_err *e);
/* The template's defaults from an image config: {"env":[...], "cwd":...,
 * "user":..., "cmd":[...], "labels":{...}}, each only when the image sets
 * it, bounded and checked (a new reference); NULL with bad-input. */
json_t *sp_image_defaults(json_t *config, struct sp_err *e);

/* ---- template: build templates from root filesystems ---- */
struct sp_template_src {
	const char *name;
	const char *rootfs;		/* tarball (any libarchive format), an
					 * OCI layout or docker archive (or its
					 * tar), or a directory */
	const char *format;		/* "auto" (NULL), "rootfs", "oci",
					 * "docker" */
	const char *tag;		/* the image of a layout or archive */
	const char *kernel, *initrd;	/* required */
	const char *daemon;		/* the static space-daemon put in the
					 * disk as /.space/bin/space-daemon;
					 * NULL: only for a root that has its
					 * own /sbin/space-daemon */
	uint64_t disk_extra_bytes;	/* free space in the ext4 image */
};
/* Builds templates/<name>@<digest>/ (read-only subvolume with disk.raw,
 * vmlinuz, initrd.img, template.json) under root; concurrent builds of the
 * same digest are coalesced by a lock.  Rejects archive entries that would
 * escape the root (bad-input).  Fills *t and, when config is not NULL,
 * *config with the template's defaults (the image config's, {} for a plain
 * root filesystem).  Returns 0 when this call built the template, 1 when it
 * existed already (an earlier or concurrent import of the same inputs built
 * it), -1 on error.  The digest covers the rootfs (archive bytes, or a
 * canonical walk of a directory), format, tag, kernel, initrd, daemon and
 * disk_extra_bytes. */
int sp_template_import(const char *root, const struct sp_template_src *src,
    struct sp_template_row *t, json_t **config, struct sp_err *e);
/* A template's defaults (template.json's "config"; {} when it has none). */
int sp_template_config(const char *root, const struct sp_template_row *t,
    json_t **config, struct sp_err *e);
/* templates/<name>@<digest> under root. */
int sp_template_path(const char *root, const struct sp_template_row *t,
    char *out, size_t n, struct sp_err *e);

/* ---- source: templates built on first use from where they come from ---- */
/* Copies a path or an http(s) URL (libcurl; HTTP errors are errors) to dst. */
int sp_fetch(const char *src, const char *dst, struct sp_err *e);
/* The template ref, materialized from its registered source when it is not
 * here yet: concurrent calls for one name fetch and build it once (a lock
 * per name), the others wait and use it.  *built says who built it. */
int sp_template_materialize(struct sp_ctx *x, const char *ref,
    struct sp_template_row *t, int *built, struct sp_err *e);

/* ---- remote: moving things to and from the object store (design.md) ---- */
struct sp_store;
/* $SPACE_ROOT/tmp/transfer/name (the directory made): the manager's own
 * (space-init gives it to the user space), beside the subvolumes space-noded
 * receives in tmp/, on the same filesystem. */
int sp_remote_tmp(const struct sp_ctx *x, const char *name, char *out,
    size_t n, struct sp_err *e);
/* A file of no name in sp_remote_tmp's directory (O_TMPFILE), *fd open
 * read-write;
 * path (/proc/self/fd/N) opens it again in this process.  Closing *fd is
 * all it leaves: nothing of a call killed on the way, none two calls share. */
int sp_remote_tmpfile(const struct sp_ctx *x, int *fd, char *path, size_t n,
    struct sp_err *e);
/* A JSON object to key (stolen) / from key (bounded to 64 KiB, "corrupt"
 * when it is not one). */
int sp_remote_put_json(struct sp_store *s, const struct sp_ctx *x,
    const char *key, json_t *j, struct sp_err *e);
int sp_remote_get_json(struct sp_store *s, const struct sp_ctx *x,
    const char *key, json_t **out, struct sp_err *e);
/* The key service of a sandbox's tenant (its label "tenant", else
 * "default"): the tenant's row of space-key, else SPACE_KMS, whose default
 * key file is made on first use. */
int sp_remote_keyref(struct sp_ctx *x, const struct sp_sandbox_row *sb,
    char tenant[SP_NAME_MAX + 1], char *keyref, size_t n, struct sp_err *e);
/* `btrfs send [-p parent] subvol` | zstd [| encrypted with key] > out_path. */
int sp_remote_send(const struct sp_ctx *x, const char *parent,
    const char *subvol, const unsigned char *key, const char *out_path,
    struct sp_err *e);
/* in_path [| decrypted with key] | unzstd | `btrfs receive dir`. */
int sp_remote_receive(const struct sp_ctx *x, const char *in_path,
    const unsigned char *key, const char *dir, struct sp_err *e);
/* A file up, with its size and SHA-256; down, checked against them
 * ("corrupt" when it differs). */
int sp_remote_upload(struct sp_store *s, const char *path, const char *key,
    uint64_t *size, char hex[65], struct sp_err *e);
int sp_remote_download(struct sp_store *s, const char *key, const char *path,
    uint64_t size, const char *hex, struct sp_err *e);
/* This node gets template t of the given lineage if it lacks it; base gets
 * the subvolume that deltas of that lineage are received onto. */
int sp_remote_lineage(struct sp_ctx *x, struct sp_store *s,
    const struct sp_template_row *t, const char *lineage, char *base,
    size_t nbase, int *pulled, uint64_t *bytes, struct sp_err *e);
/* space-template push NAME / pull NAME@DIGEST: full send streams. */
int sp_template_push(struct sp_ctx *x, struct sp_store *s, const char *ref,
    json_t **out, struct sp_err *e);
int sp_template_pull(struct sp_ctx *x, struct sp_store *s, const char *ref,
    json_t **out, struct sp_err *e);

#include "sp_store.h"
#include "sp_crypt.h"

#endif
