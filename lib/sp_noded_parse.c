/*
 * sp_noded_parse: what a client of space-noded sends, checked before
 * anything is touched.  A request is one line of JSON, an object with "op"
 * from a closed list and the fields that op takes, no others.  Every path
 * is relative to SPACE_ROOT: 2 to SP_NODED_DEPTH components of
 * [A-Za-z0-9._@+-] (a receive's directory may be an area, one), none "."
 * or "..", the first one an area the op may touch.  Whether a path exists,
 * and that no component of it is a symlink, is sp_noded.c's to find out,
 * beneath the root.  The descriptor a send or a receive needs comes beside
 * the line (space-noded's to attach).
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_storage.h"

/* A part of a path: the longest is a template being imported,
 * .building-NAME@DIGEST-RANDOM (sp_template.c): 10 + 64 + 1 + 64 + 1 + 12. */
#define PART_MAX	(2 * SP_NAME_MAX + 24)

/* The fields of a request. */
enum {
	K_PATH = 1, K_SRC = 2, K_READONLY = 4, K_NAME = 8, K_FILE = 16,
	K_XML = 32, K_WANT = 64, K_DISK = 128, K_BYTES = 256, K_DIR = 512,
	K_UID = 1024, K_PIDS = 2048, K_PARENT = 4096, K_HOST = 8192,
	K_VOLUME = 16384, K_PID = 32768,
};

static const struct {
	const char *name;
	enum sp_noded_op op;
	unsigned need;		/* the fields it must have */
	unsigned may;		/* and those it may */
} ops[] = {
	{ "ping", SP_NODED_PING, 0, 0 },
	{ "subvol-create", SP_NODED_CREATE, K_PATH, 0 },
	{ "subvol-snapshot", SP_NODED_SNAPSHOT, K_PATH | K_SRC, K_READONLY },
	{ "subvol-delete", SP_NODED_DELETE, K_PATH, 0 },
	{ "subvol-readonly", SP_NODED_READONLY, K_PATH | K_READONLY, 0 },
	{ "subvol-usage", SP_NODED_USAGE, K_PATH, 0 },
	{ "userns-map", SP_NODED_USERNS_MAP, K_PID, 0 },
	{ "dir-create", SP_NODED_DIR, K_PATH, 0 },
	{ "dir-remove", SP_NODED_RMDIR, K_PATH, 0 },
	{ "vm-define", SP_NODED_VM_DEFINE, K_XML, 0 },
	{ "vm-start", SP_NODED_VM_START, K_NAME, 0 },
	{ "vm-destroy", SP_NODED_VM_DESTROY, K_NAME, 0 },
	{ "vm-undefine", SP_NODED_VM_UNDEFINE, K_NAME, 0 },
	{ "vm-pause", SP_NODED_VM_PAUSE, K_NAME, 0 },
	{ "vm-resume", SP_NODED_VM_RESUME, K_NAME, 0 },
	{ "vm-save", SP_NODED_VM_SAVE, K_NAME | K_FILE, 0 },
	{ "vm-save-memory", SP_NODED_VM_SAVE_MEMORY, K_NAME | K_FILE, 0 },
	{ "vm-restore", SP_NODED_VM_RESTORE, K_FILE | K_XML, K_NAME },
	{ "vm-resize", SP_NODED_VM_RESIZE, K_NAME | K_DISK | K_BYTES, 0 },
	{ "vm-state", SP_NODED_VM_STATE, K_NAME, 0 },
	{ "vm-xml", SP_NODED_VM_XML, K_NAME, 0 },
	{ "vm-uuid", SP_NODED_VM_UUID, K_NAME, 0 },
	{ "vm-memory", SP_NODED_VM_MEMORY, K_NAME, 0 },
	{ "vm-list", SP_NODED_VM_LIST, 0, 0 },
	{ "vm-stats", SP_NODED_VM_STATS, 0, 0 },
	{ "vm-plug", SP_NODED_VM_PLUG, K_NAME | K_VOLUME | K_DISK, K_READONLY },
	{ "vm-unplug", SP_NODED_VM_UNPLUG, K_NAME | K_VOLUME, 0 },
	{ "virt-type", SP_NODED_VIRT_TYPE, K_WANT, 0 },
	{ "virt-version", SP_NODED_VIRT_VERSION, 0, 0 },
	{ "vm-prepare", SP_NODED_VM_PREPARE, K_NAME | K_DIR | K_UID, 0 },
	{ "vm-limit", SP_NODED_VM_LIMIT, K_NAME | K_BYTES | K_PIDS, 0 },
	{ "disk-limit", SP_NODED_DISK_LIMIT, K_DIR | K_BYTES, 0 },
	{ "vm-release", SP_NODED_VM_RELEASE, K_NAME, 0 },
	{ "pids-sweep", SP_NODED_PIDS_SWEEP, 0, 0 },
	{ "subvol-send", SP_NODED_SEND, K_PATH, K_PARENT },
	{ "subvol-receive", SP_NODED_RECEIVE, K_PATH, 0 },
	{ "tls-leaf", SP_NODED_TLS_LEAF, K_HOST, 0 },
};

static const char *const keys[] = {
	"path", "src", "readonly", "name", "file", "xml", "want", "disk",
	"bytes", "dir", "uid", "pids", "parent", "host", "volume", "pid",
};

/* A disk's size or a limit at most: 16 TiB. */
#define BYTES_MAX	(16ULL << 40)
#define PIDS_MAX	4194304		/* Linux's PID_MAX_LIMIT */
#define UID_MAX		4294967294UL	/* (uid_t)-1 is no uid */

const char *
sp_noded_op_name(enum sp_noded_op op)
{
	size_t i;

	for (i = 0; i < sizeof ops / sizeof ops[0]; i++)
		if (ops[i].op == op)
			return ops[i].name;
	return "";
}

int
sp_noded_op_fd(enum sp_noded_op op)
{
	return op == SP_NODED_SEND ? O_WRONLY : op == SP_NODED_RECEIVE ?
	    O_RDONLY : -1;
}

void
sp_noded_req_free(struct sp_noded_req *r)
{
	free(r->xml);
	r->xml = NULL;
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
}

/* The areas of SPACE_ROOT a path may name: where subvolumes are made and
 * taken apart, and where they are snapshotted from. */
static const char *const target_areas[] = {
	"sandboxes", "snapshots", "templates", "lineages", "pool", "tmp",
	"volumes",
};
static const char *const source_areas[] = {
	"sandboxes", "snapshots", "templates", "lineages", "tmp", "volumes",
};

static int
in(const char *s, size_t n, const char *const *list, size_t count)
{
	size_t i;

	for (i = 0; i < count; i++)
		if (strlen(list[i]) == n && memcmp(list[i], s, n) == 0)
			return 1;
	return 0;
}

int
sp_noded_path_check(const char *what, const char *p, int how,
    struct sp_err *e)
{
	int source = how & SP_NODED_SOURCE;
	static const char ok[] = "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._@+-";
	const char *c = p, *slash;
	size_t n, len = strlen(p);
	int depth = 0;

	if (len == 0 || len > SP_NODED_PATH_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s must be 1 to %d bytes",
		    what, SP_NODED_PATH_MAX);
	for (;;) {
		slash = strchr(c, '/');
		n = slash != NULL ? (size_t)(slash - c) : strlen(c);
		if (n == 0 || n > PART_MAX || strspn(c, ok) < n ||
		    (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' &&
		    c[1] == '.'))
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s '%.64s': each "
			    "part 1 to %d of [A-Za-z0-9._@+-], not . or .., "
			    "relative to SPACE_ROOT", what, p, PART_MAX);
		if (depth == 0 && !(source ? in(c, n, source_areas,
		    sizeof source_areas / sizeof source_areas[0]) :
		    in(c, n, target_areas,
		    sizeof target_areas / sizeof target_areas[0])))
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s '%.64s': not "
			    "in an area space-noded %s", what, p, source ?
			    "snapshots from" : "makes subvolumes in");
		if (++depth > SP_NODED_DEPTH)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s '%.64s': more "
			    "than %d parts", what, p, SP_NODED_DEPTH);
		if (slash == NULL)
			break;
		c = slash + 1;
	}
	if (depth < 2 && !(how & SP_NODED_AREA))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s '%.64s': an area "
		    "itself is not a subvolume space-noded touches", what, p);
	return 0;
}

static int
copy_path(json_t *req, const char *key, int how, char *out,
    struct sp_err *e)
{
	json_t *v = json_object_get(req, key);
	const char *s;

	if (!json_is_string(v))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s must be a string", key);
	s = json_string_value(v);
	if (strlen(s) != json_string_length(v))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s holds a NUL", key);
	if (sp_noded_path_check(key, s, how, e) == -1)
		return -1;
	memcpy(out, s, strlen(s) + 1);
	return 0;
}

/* A string field: no NUL in it, 1 to max bytes. */
static const char *
string_of(json_t *req, const char *key, size_t max, struct sp_err *e)
{
	json_t *v = json_object_get(req, key);
	const char *s;

	if (!json_is_string(v)) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "%s must be a string", key);
		return NULL;
	}
	s = json_string_value(v);
	if (strlen(s) != json_string_length(v) || *s == '\0' ||
	    strlen(s) > max) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "%s must be 1 to %zu bytes, no "
		    "NUL", key, max);
		return NULL;
	}
	return s;
}

/* The fields of a VM op, their form only: what they name, and whether it
 * may be touched, is sp_noded_virt.c's to find out. */
/* An integer field of lo..hi. */
static int
int_of(json_t *req, const char *key, json_int_t lo, json_int_t hi,
    json_int_t *out, struct sp_err *e)
{
	json_t *v = json_object_get(req, key);

	if (!json_is_integer(v) || json_integer_value(v) < lo ||
	    json_integer_value(v) > hi)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s is an integer of "
		    "%lld to %lld", key, (long long)lo, (long long)hi);
	*out = json_integer_value(v);
	return 0;
}

/* An absolute path field, into out (SP_NODED_PATH_MAX + 1 bytes). */
static int
abs_of(json_t *req, const char *key, char *out, struct sp_err *e)
{
	const char *s;

	if ((s = string_of(req, key, SP_NODED_PATH_MAX, e)) == NULL)
		return -1;
	if (*s != '/')
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s '%.64s' is not an "
		    "absolute path", key, s);
	strcpy(out, s);
	return 0;
}

static int
vm_fields(json_t *req, unsigned have, struct sp_noded_req *r,
    struct sp_err *e)
{
	unsigned char addr[16];
	const char *s;
	json_int_t n;

	if (have & K_NAME) {
		if ((s = string_of(req, "name", SP_NAME_MAX, e)) == NULL)
			return -1;
		if (strncmp(s, "sp-", 3) != 0 || !sp_id_valid(s + 3))
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "name '%.64s' is "
			    "not sp-<id>", s);
		strcpy(r->name, s);
	}
	if (((have & K_FILE) && abs_of(req, "file", r->file, e) == -1) ||
	    ((have & K_DIR) && abs_of(req, "dir", r->dir, e) == -1))
		return -1;
	if (have & K_XML) {
		if ((s = string_of(req, "xml", SP_NODED_XML_MAX, e)) == NULL)
			return -1;
		if ((r->xml = strdup(s)) == NULL)
			return sp_err_sys(e, SP_E_NOMEM, "xml");
	}
	if (have & K_WANT) {
		if ((s = string_of(req, "want", sizeof r->want - 1, e)) == NULL)
			return -1;
		if (strcmp(s, "auto") != 0 && strcmp(s, "kvm") != 0 &&
		    strcmp(s, "qemu") != 0)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "want is auto, "
			    "kvm or qemu");
		strcpy(r->want, s);
	}
	/* A numeric address, as space-apid listens on: whether it is
	 * this host's is sp_noded.c's to find out. */
	if (have & K_HOST) {
		if ((s = string_of(req, "host", SP_NODED_HOST_MAX, e)) == NULL)
			return -1;
		if (inet_pton(AF_INET, s, addr) != 1 &&
		    inet_pton(AF_INET6, s, addr) != 1)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "host '%.64s' is "
			    "not an IPv4 or IPv6 address", s);
		strcpy(r->host, s);
	}
	/* A resize's is the root disk; a plug's, one of the others. */
	if (have & K_DISK) {
		if ((s = string_of(req, "disk", 8, e)) == NULL)
			return -1;
		if (r->op != SP_NODED_VM_PLUG && strcmp(s, "vda") != 0)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "disk is vda");
		if (r->op == SP_NODED_VM_PLUG && (strlen(s) != 3 ||
		    strncmp(s, "vd", 2) != 0 || s[2] < 'b' || s[2] > 'z'))
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "disk is vdb to "
			    "vdz");
		strcpy(r->target, s);
	}
	/* A volume's id, as its disk's serial is (sp_virt.c's check_volume). */
	if (have & K_VOLUME) {
		if ((s = string_of(req, "volume", SP_NODED_VOLUME_MAX, e)) ==
		    NULL)
			return -1;
		if (!sp_id_valid(s))
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "volume '%.32s' "
			    "is not an id", s);
		strcpy(r->volume, s);
	}
	/* A memory limit may be none (0); a size or a disk's limit not. */
	if (have & K_BYTES) {
		if (int_of(req, "bytes", r->op == SP_NODED_VM_LIMIT ? 0 : 1,
		    (json_int_t)BYTES_MAX, &n, e) == -1)
			return -1;
		r->bytes = (uint64_t)n;
	}
	if (have & K_PIDS) {
		if (int_of(req, "pids", 0, PIDS_MAX, &n, e) == -1)
			return -1;
		r->pids = (long)n;
	}
	/* A process of the client's: whose, and whether it may be mapped,
	 * is sp_noded_userns.c's to find out. */
	if (have & K_PID) {
		if (int_of(req, "pid", 2, PIDS_MAX, &n, e) == -1)
			return -1;
		r->pid = (long)n;
	}
	if (have & K_UID) {
		if (int_of(req, "uid", 0, (json_int_t)UID_MAX, &n, e) == -1)
			return -1;
		if (n != 0 && n < 1000)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "uid is 0 (no jail) "
			    "or a jail's, from 1000");
		r->uid = (unsigned)n;
	}
	return 0;
}

int
sp_noded_parse(const char *line, size_t n, struct sp_noded_req *r,
    struct sp_err *e)
{
	json_error_t je;
	json_t *req, *v;
	const char *key, *op;
	unsigned have = 0, bit;
	size_t i, k;
	int rc = -1;

	memset(r, 0, sizeof *r);
	r->fd = -1;
	if (n > SP_NODED_LINE_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a request is at most %d "
		    "bytes", SP_NODED_LINE_MAX);
	if (!sp_utf8_valid(line, n))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a request is UTF-8");
	if ((req = json_loadb(line, n, JSON_REJECT_DUPLICATES, &je)) == NULL ||
	    !json_is_object(req)) {
		json_decref(req);
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "a request is one JSON "
		    "object a line");
	}
	if ((op = json_string_value(json_object_get(req, "op"))) == NULL) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "a request names its op");
		goto out;
	}
	for (i = 0; i < sizeof ops / sizeof ops[0]; i++)
		if (strcmp(ops[i].name, op) == 0)
			break;
	if (i == sizeof ops / sizeof ops[0]) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "unknown op '%.32s'", op);
		goto out;
	}
	r->op = ops[i].op;
	/* Nothing the op does not take, all it needs. */
	json_object_foreach(req, key, v) {
		if (strcmp(key, "op") == 0)
			continue;
		for (k = 0; k < sizeof keys / sizeof keys[0]; k++)
			if (strcmp(keys[k], key) == 0)
				break;
		bit = k < sizeof keys / sizeof keys[0] ? 1U << k : 0;
		if (!(bit & (ops[i].need | ops[i].may))) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "%s takes no '%.32s'",
			    op, key);
			goto out;
		}
		have |= bit;
	}
	if ((have & ops[i].need) != ops[i].need) {
		for (k = 0; !(ops[i].need & ~have & (1U << k)); k++)
			;
		sp_err_set(e, SP_E_BAD_INPUT, 0, "%s needs '%s'", op, keys[k]);
		goto out;
	}
	/* A send's path is its source; a receive's, the directory the
	 * stream's subvolume is made in (an area itself too). */
	if ((have & K_PATH) && copy_path(req, "path", r->op == SP_NODED_SEND ||
	    r->op == SP_NODED_USAGE ? SP_NODED_SOURCE : r->op == SP_NODED_RECEIVE ? SP_NODED_AREA : 0,
	    r->path, e) == -1)
		goto out;
	if ((have & K_SRC) && copy_path(req, "src", SP_NODED_SOURCE, r->src,
	    e) == -1)
		goto out;
	if ((have & K_PARENT) && copy_path(req, "parent", SP_NODED_SOURCE,
	    r->parent, e) == -1)
		goto out;
	if ((v = json_object_get(req, "readonly")) != NULL) {
		if (!json_is_boolean(v)) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "readonly is true or false");
			goto out;
		}
		r->readonly = json_is_true(v);
	}
	if (vm_fields(req, have, r, e) == -1)
		goto out;
	rc = 0;
out:
	if (rc == -1)
		sp_noded_req_free(r);
	json_decref(req);
	return rc;
}
