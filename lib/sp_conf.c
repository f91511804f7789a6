/*
 * sp_conf: configuration.  /etc/space/space.conf holds `KEY = value` lines
 * with the same names as the environment variables, and every key can be
 * overridden by the environment; with nothing set it all runs on one machine.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_core.h"

#define CONF_DEFAULT	"/etc/space/space.conf"

struct key {
	const char *name;
	size_t off, size;
};

#define K(n, f) { n, offsetof(struct sp_conf, f), sizeof(((struct sp_conf *)0)->f) }
static const struct key keys[] = {
	K("SPACE_ROOT", root),
	K("SPACE_DB", db),
	K("SPACE_STORE", store),
	K("SPACE_LIBVIRT_URI", libvirt_uri),
	K("SPACE_NODE", node),
	K("SPACE_RUN", run),
	K("SPACE_VIRT_TYPE", virt_type),
	K("SPACE_RETAIN", retain),
	K("SPACE_IDLE", idle),
	K("SPACE_EVENTS_KEEP", events_keep),
	K("SPACE_KMS", kms),
	K("SPACE_GUEST", guest),
	K("SPACE_JAIL", jail),
	K("SPACE_JAIL_UIDS", jail_uids),
	K("SPACE_MEM_OVERHEAD_MIB", mem_overhead),
	K("SPACE_PIDS_MAX", pids_max),
	K("SPACE_CPU_QUOTA", cpu_quota),
	K("SPACE_IO_WEIGHT", io_weight),
	K("SPACE_KSM", ksm),
	K("SPACE_KSM_RATE", ksm_rate),
};
#define NKEYS (sizeof keys / sizeof keys[0])

static const char *const env_keys[] = {
	"SPACE_S3_ENDPOINT", "SPACE_S3_ADDRESSING", "SPACE_S3_PART_MIB",
	"SPACE_S3_RETRY_MS", "SPACE_S3_TIMEOUT_S", "SPACE_S3_LIST_MAX",
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
	"AWS_REGION", "AWS_DEFAULT_REGION", "SPACE_KMS_TIMEOUT_MS",
	"SPACE_EGRESS_NEVER", "SPACE_EGRESS_ALLOW_NEVER", "SPACE_CRED_VAULT",
	"SPACE_CRED_VAULT_TIMEOUT_MS", "SPACE_GATEWAY_UPSTREAM_CA",
	"SPACE_GATEWAY_HOSTS", "SPACE_NODE_LEASE", "SPACE_HELLO_TIMEOUT_MS",
};

static int
set_key(struct sp_conf *c, const char *name, const char *val, const char *where,
    struct sp_err *e)
{
	size_t i, n = strlen(val);

	for (i = 0; i < NKEYS; i++) {
		if (strcmp(keys[i].name, name) != 0)
			continue;
		if (n >= keys[i].size)
			return sp_err_set(e, SP_E_BAD_INPUT, 0,
			    "%s: %s is longer than %zu bytes", where, name,
			    keys[i].size - 1);
		if (!sp_utf8_valid(val, n))
			return sp_err_set(e, SP_E_BAD_INPUT, 0,
			    "%s: %s is not valid UTF-8", where, name);
		memcpy((char *)c + keys[i].off, val, n + 1);
		return 0;
	}
	/* Settings the modules read from the environment themselves (the
	 * object store, the key service, egress, the vault) may be written
	 * here too; the environment still wins. */
	for (i = 0; i < sizeof env_keys / sizeof env_keys[0]; i++) {
		if (strcmp(env_keys[i], name) != 0)
			continue;
		if (n > 4096 || !sp_utf8_valid(val, n))
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s: %s is not a "
			    "valid value", where, name);
		if (setenv(name, val, 0) == -1)
			return sp_err_sys(e, SP_E_INTERNAL, "setenv %s", name);
		return 0;
	}
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s: unknown key '%.64s'", where, name);
}

static char *
trim(char *s)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t' ||
	    end[-1] == '\n' || end[-1] == '\r'))
		*--end = '\0';
	return s;
}

static int
read_file(struct sp_conf *c, const char *path, struct sp_err *e)
{
	char line[SP_PATH_MAX + 64], where[SP_PATH_MAX + 32], *k, *v, *eq;
	FILE *f;
	int lineno = 0, rc = -1;

	if ((f = fopen(path, "re")) == NULL) {
		if (errno == ENOENT)
			return 0;
		return sp_err_sys(e, SP_E_BAD_INPUT, "%s", path);
	}
	while (fgets(line, sizeof line, f) != NULL) {
		lineno++;
		snprintf(where, sizeof where, "%s:%d", path, lineno);
		if (strchr(line, '\n') == NULL && !feof(f)) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "%s: line too long", where);
			goto out;
		}
		k = trim(line);
		if (*k == '\0' || *k == '#')
			continue;
		if ((eq = strchr(k, '=')) == NULL) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "%s: expected KEY = value", where);
			goto out;
		}
		*eq = '\0';
		v = trim(eq + 1);
		k = trim(k);
		if (set_key(c, k, v, where, e) == -1)
			goto out;
	}
	rc = 0;
out:
	fclose(f);
	return rc;
}

/* An absolute path none of whose components is "..". */
static int
abs_path_ok(const char *p)
{
	const char *c;

	if (p[0] != '/')
		return 0;
	for (c = p; (c = strstr(c, "..")) != NULL; c += 2)
		if (c[-1] == '/' && (c[2] == '/' || c[2] == '\0'))
			return 0;
	return 1;
}

/* A number of conf's, "" for none: 0 then. */
static int
conf_num(const char *what, const char *s, long lo, long hi, long *out,
    struct sp_err *e)
{
	char *end;
	long v;

	*out = 0;
	if (*s == '\0')
		return 0;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < lo || v > hi)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s must be a number "
		    "from %ld to %ld (is '%.32s')", what, lo, hi, s);
	*out = v;
	return 0;
}

/* The jail's settings (sp_jail.c): a slip there would fail every VM's
 * start, so it fails every command at once instead. */
static int
check_jail(struct sp_conf *c, struct sp_err *e)
{
	unsigned long a, b;
	char tail;
	int pct = 0;

	if (strcmp(c->jail, "on") != 0 && strcmp(c->jail, "off") != 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_JAIL must be on or off");
	c->lim.on = strcmp(c->jail, "on") == 0;
	/* Without the jail a VM's run directory and files are libvirt's
	 * user's: only root can use them, so another user is told at once
	 * rather than half-way through a create. */
	if (!c->lim.on && geteuid() != 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_JAIL=off is "
		    "root's alone: without the jail a VM's files are libvirt's "
		    "user's, which only root can use");
	if (sscanf(c->jail_uids, "%lu-%lu%c", &a, &b, &tail) != 2 ||
	    a < 1000 || b < a || b >= 4294967294UL || b - a + 1 < SP_JAIL_PROBES)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_JAIL_UIDS must "
		    "be FIRST-LAST, uids of nobody else's, at least %d of them, "
		    "from 1000 up (is '%.31s')", SP_JAIL_PROBES, c->jail_uids);
	if (a < SP_IMPORT_IDS_FIRST + SP_IMPORT_IDS && b >= SP_IMPORT_IDS_FIRST)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_JAIL_UIDS may not "
		    "hold %lu-%lu, the ids of a template's files while one not "
		    "root unpacks it (is '%.31s')", SP_IMPORT_IDS_FIRST,
		    SP_IMPORT_IDS_FIRST + SP_IMPORT_IDS - 1, c->jail_uids);
	c->lim.first = a;
	c->lim.count = b - a + 1;
	c->lim.mem_overhead_mib = -1;
	if (strcmp(c->mem_overhead, "auto") != 0 &&
	    conf_num("SPACE_MEM_OVERHEAD_MIB", c->mem_overhead, 0, 65536,
	    &c->lim.mem_overhead_mib, e) == -1)
		return -1;
	if (strcmp(c->pids_max, "0") != 0 &&
	    conf_num("SPACE_PIDS_MAX", c->pids_max, 16, 1 << 20,
	    &c->lim.pids_max, e) == -1)
		return -1;
	if (conf_num("SPACE_IO_WEIGHT", c->io_weight, 10, 1000,
	    &c->lim.io_weight, e) == -1)
		return -1;
	c->lim.cpu_quota_pct = 0;
	if (c->cpu_quota[0] != '\0' && sp_cpu_quota_parse("SPACE_CPU_QUOTA",
	    c->cpu_quota, &pct, e) == -1)
		return -1;
	c->lim.cpu_quota_pct = pct;
	return 0;
}

int
sp_cpu_quota_parse(const char *what, const char *s, int *pct,
    struct sp_err *e)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' ||
	    (*pct = sp_cpu_quota_pct(v)) == -1)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "%s must be CPUs from "
		    "0.01 to %d (is '%.15s')", what, SP_CPU_QUOTA_MAX, s);
	return 0;
}

int
sp_cpu_quota_pct(double cpus)
{
	return cpus >= 0.01 && cpus <= SP_CPU_QUOTA_MAX ?
	    (int)(cpus * 100 + 0.5) : -1;
}

static int
check(struct sp_conf *c, struct sp_err *e)
{
	if (!abs_path_ok(c->root))
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "SPACE_ROOT must be an absolute path without '..'");
	if (!abs_path_ok(c->run))
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "SPACE_RUN must be an absolute path without '..'");
	if (strncmp(c->db, "sqlite:", 7) != 0 &&
	    strncmp(c->db, "postgresql:", 11) != 0 &&
	    strncmp(c->db, "postgres://", 11) != 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_DB must be "
		    "sqlite:PATH, postgresql://... or postgresql:CONNINFO");
	if (sp_name_check("SPACE_NODE", c->node, e) == -1)
		return -1;
	if (strcmp(c->virt_type, "auto") != 0 && strcmp(c->virt_type, "kvm") != 0 &&
	    strcmp(c->virt_type, "qemu") != 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "SPACE_VIRT_TYPE must be auto, kvm or qemu");
	if (check_jail(c, e) == -1)
		return -1;
	if (strcmp(c->ksm, "on") != 0 && strcmp(c->ksm, "off") != 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_KSM must be on or "
		    "off");
	c->ksm_on = strcmp(c->ksm, "on") == 0;
	if (conf_num("SPACE_KSM_RATE", c->ksm_rate, 50, 10000000,
	    &c->ksm_pages_per_s, e) == -1)
		return -1;
	/* SPACE_RETAIN is checked by space-gc, its one user, SPACE_IDLE
	 * by space-ls --idle-due and SPACE_EVENTS_KEEP by the reconcile
	 * pass: a slip there must not stop every other command. */
	return 0;
}

int
sp_conf_load(struct sp_conf *c, struct sp_err *e)
{
	const char *path, *v;
	size_t i;
	int n;

	memset(c, 0, sizeof *c);
	path = getenv("SPACE_CONF");
	if (read_file(c, path && *path ? path : CONF_DEFAULT, e) == -1)
		return -1;
	for (i = 0; i < NKEYS; i++)
		if ((v = getenv(keys[i].name)) != NULL && *v != '\0' &&
		    set_key(c, keys[i].name, v, "environment", e) == -1)
			return -1;
	/* Defaults last, since some derive from SPACE_ROOT. */
	if (c->root[0] == '\0')
		strcpy(c->root, "/var/lib/space");
	if (c->db[0] == '\0') {
		n = snprintf(c->db, sizeof c->db, "sqlite:%s/space.db", c->root);
		if (n < 0 || (size_t)n >= sizeof c->db)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_ROOT too long");
	}
	if (c->store[0] == '\0') {
		n = snprintf(c->store, sizeof c->store, "file://%s/objects", c->root);
		if (n < 0 || (size_t)n >= sizeof c->store)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_ROOT too long");
	}
	if (c->libvirt_uri[0] == '\0') {
		strcpy(c->libvirt_uri, "qemu:///system");
		c->libvirt_uri_default = 1;
	}
	if (c->run[0] == '\0')
		strcpy(c->run, "/run/space");
	if (c->virt_type[0] == '\0')
		strcpy(c->virt_type, "auto");
	if (c->retain[0] == '\0')
		strcpy(c->retain, SP_RETAIN_DEFAULT);
	if (c->events_keep[0] == '\0')
		strcpy(c->events_keep, "30d");
	if (c->kms[0] == '\0') {
		n = snprintf(c->kms, sizeof c->kms, "file:%s/keys/default.key",
		    c->root);
		if (n < 0 || (size_t)n >= sizeof c->kms)
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "SPACE_ROOT too long");
	}
	if (c->guest[0] == '\0')
		snprintf(c->guest, sizeof c->guest, "%s", SP_GUEST_DIR);
	if (c->jail[0] == '\0')
		strcpy(c->jail, "on");
	if (c->jail_uids[0] == '\0')
		strcpy(c->jail_uids, SP_JAIL_UIDS_DEFAULT);
	if (c->mem_overhead[0] == '\0')
		strcpy(c->mem_overhead, "auto");
	if (c->pids_max[0] == '\0')
		strcpy(c->pids_max, SP_PIDS_MAX_DEFAULT);
	if (c->ksm[0] == '\0')
		strcpy(c->ksm, "off");
	if (c->ksm_rate[0] == '\0')
		strcpy(c->ksm_rate, SP_KSM_RATE_DEFAULT);
	if (c->node[0] == '\0' && gethostname(c->node, sizeof c->node - 1) == -1)
		strcpy(c->node, "localhost");
	return check(c, e);
}
