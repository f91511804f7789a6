/*
 * sp_virt: sandbox VMs as libvirt domains.  It writes the domain XML of a
 * sandbox (direct kernel boot, one virtio-blk disk, virtio-serial channels,
 * no network) and wraps the few domain operations the commands need, turning
 * libvirt's errors into struct sp_err instead of letting libvirt print them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "sp_vm.h"

struct sp_virt {
	virConnectPtr conn;
	char *noded;		/* or space-noded's socket (sp_virt_noded.c) */
};

/* A request to space-noded: op, and name when not NULL. */
static json_t *
nd_req(const char *op, const char *name)
{
	json_t *r = json_pack("{s:s}", "op", op);

	if (r != NULL && name != NULL)
		json_object_set_new(r, "name", json_string(name));
	return r;
}

static int
nd_call(struct sp_virt *v, json_t *req, json_t **value, struct sp_err *e)
{
	return sp_virt_noded_call(v->noded, req, value, e);
}

/* A call that answers a string, copied to out (n bytes). */
static int
nd_string(struct sp_virt *v, json_t *req, char *out, size_t n,
    struct sp_err *e)
{
	json_t *val;
	int rc = 0;

	if (nd_call(v, req, &val, e) == -1)
		return -1;
	if (!json_is_string(val) || json_string_length(val) >= n)
		rc = sp_err_set(e, SP_E_PROTOCOL, 0, "space-noded: an odd answer");
	else
		memcpy(out, json_string_value(val), json_string_length(val) + 1);
	json_decref(val);
	return rc;
}

/*
 * libvirt is loaded when a command first connects, not when it starts: with
 * what it pulls in (57 shared objects) it is the costliest part of starting
 * a process (docs/benchmarks.md), and what never connects (a claim from the
 * warm pool, every command that reaches only the DB or the guest) should not
 * pay for it.  The
 * pointers keep libvirt's own prototypes, so every call is type-checked.
 */
#define VIRT_FUNCS(F) \
	F(virConnSetErrorFunc)\
	F(virConnectClose)\
	F(virConnectGetAllDomainStats)\
	F(virConnectGetDomainCapabilities)\
	F(virConnectGetType)\
	F(virConnectGetVersion)\
	F(virConnectListAllDomains)\
	F(virConnectOpen)\
	F(virDomainAttachDeviceFlags)\
	F(virDomainBlockResize)\
	F(virDomainCreate)\
	F(virDomainDefineXMLFlags)\
	F(virDomainDestroy)\
	F(virDomainDetachDeviceAlias)\
	F(virDomainFree)\
	F(virDomainGetMaxMemory)\
	F(virDomainGetName)\
	F(virDomainGetState)\
	F(virDomainGetUUIDString)\
	F(virDomainGetXMLDesc)\
	F(virDomainIsActive)\
	F(virDomainIsPersistent)\
	F(virDomainLookupByName)\
	F(virDomainRestoreFlags)\
	F(virDomainResume)\
	F(virDomainSaveFlags)\
	F(virDomainSnapshotCreateXML)\
	F(virDomainSnapshotFree)\
	F(virDomainStatsRecordListFree)\
	F(virDomainSuspend)\
	F(virDomainUndefineFlags)\
	F(virGetLastError)\
	F(virGetVersion)\
	F(virInitialize)\
	F(virResetLastError)\
	F(virSetErrorFunc)

static union {
	struct {
#define VIRT_PTR(n) __typeof__(n) *n;
		VIRT_FUNCS(VIRT_PTR)
#undef VIRT_PTR
	};
	void *slot[0 VIRT_FUNCS(SP_DL_ONE)];
} lv;

static struct sp_dl lv_dl = SP_DL_INIT("libvirt.so.0", "libvirt",
    SP_E_LIBVIRT);
static const char *const lv_names[] = {
#define VIRT_NAME(n) #n,
	VIRT_FUNCS(VIRT_NAME)
#undef VIRT_NAME
};
SP_DL_TABLE_CHECK(lv_names, lv);

static int
lv_load(struct sp_err *e)
{
	return sp_dl_load_table(&lv_dl, lv_names, lv, e);
}

#define VIRT_VCPUS_MAX	255
#define VIRT_MEM_MAX	(1024 * 1024)	/* MiB */

static void
quiet(void *arg, virErrorPtr err)
{
	/* Errors reach the caller through struct sp_err, never stderr. */
}

/*
 * Fills e from libvirt's last error of this thread.  A missing domain and an
 * operation the domain's state forbids get their own tokens because callers
 * act on them; a lost connection is worth a retry.
 */
static int
virt_err(struct sp_err *e, const char *what, const char *name)
{
	virErrorPtr le;
	enum sp_code code = SP_E_LIBVIRT;
	const char *msg = "unknown libvirt error";
	int temp = 0;

	le = lv.virGetLastError();
	if (le != NULL) {
		if (le->message != NULL)
			msg = le->message;
		switch (le->code) {
		case VIR_ERR_NO_DOMAIN:
			code = SP_E_NOT_FOUND;
			break;
		case VIR_ERR_OPERATION_INVALID:
			code = SP_E_BAD_STATE;
			break;
		case VIR_ERR_NO_CONNECT:
		case VIR_ERR_RPC:
		case VIR_ERR_OPERATION_TIMEOUT:
			temp = 1;
			break;
		default:
			if (le->domain == VIR_FROM_RPC ||
			    le->domain == VIR_FROM_REMOTE)
				temp = 1;
			break;
		}
	}
	sp_err_set(e, code, temp, "%s '%s': %s", what,
	    name != NULL ? name : "", msg);
	lv.virResetLastError();
	return -1;
}

/* The libvirt error code of the last failure, without consuming it. */
static int
last_code(void)
{
	virErrorPtr le;

	le = lv.virGetLastError();
	return le != NULL ? le->code : VIR_ERR_OK;
}

int
sp_virt_open(struct sp_virt **v, const char *uri, struct sp_err *e)
{
	struct sp_virt *nv = NULL;
	int rc = -1;

	*v = NULL;
	if (lv_load(e) == -1)
		return -1;
	/*
	 * The global handler covers virConnectOpen itself, which reports
	 * before there is a connection to attach a handler to.
	 */
	if (lv.virInitialize() == -1) {
		sp_err_set(e, SP_E_LIBVIRT, 1, "cannot initialize libvirt");
		goto out;
	}
	lv.virSetErrorFunc(NULL, quiet);
	if ((nv = calloc(1, sizeof *nv)) == NULL) {
		sp_err_sys(e, SP_E_NOMEM, "connect '%s'", uri != NULL ? uri : "");
		goto out;
	}
	nv->conn = lv.virConnectOpen(uri);
	if (nv->conn == NULL) {
		virt_err(e, "connect", uri);
		/* Whatever kept us from connecting, the daemon may come back. */
		if (e != NULL)
			e->temp = 1;
		goto out;
	}
	lv.virConnSetErrorFunc(nv->conn, NULL, quiet);
	*v = nv;
	nv = NULL;
	rc = 0;
out:
	free(nv);
	return rc;
}

int
sp_virt_open_noded(struct sp_virt **v, const char *sock, struct sp_err *e)
{
	if ((*v = calloc(1, sizeof **v)) == NULL ||
	    ((*v)->noded = strdup(sock)) == NULL) {
		free(*v);
		*v = NULL;
		return sp_err_sys(e, SP_E_NOMEM, "space-noded at %s", sock);
	}
	return 0;
}

const char *
sp_virt_noded_sock(const struct sp_virt *v)
{
	return v != NULL ? v->noded : NULL;
}

void
sp_virt_close(struct sp_virt *v)
{
	if (v == NULL)
		return;
	free(v->noded);
	if (v->conn != NULL)
		lv.virConnectClose(v->conn);
	free(v);
}

/* Whether KVM here runs on VT-x or AMD-V, the only kinds a stock kernel boots
 * on at speed; builtin or module, each shows up under /sys/module. */
static int
hw_kvm(void)
{
	return access("/sys/module/kvm_intel", F_OK) == 0 ||
	    access("/sys/module/kvm_amd", F_OK) == 0;
}

int
sp_virt_pick_type(struct sp_virt *v, const char *want, char out[16],
    struct sp_err *e)
{
	char *caps = NULL;
	int rc = -1;

	if (want != NULL && strcmp(want, "kvm") == 0) {
		snprintf(out, 16, "kvm");
	} else if (want != NULL && strcmp(want, "qemu") == 0) {
		snprintf(out, 16, "qemu");
	} else if ((want == NULL || strcmp(want, "auto") == 0) && v != NULL &&
	    v->noded != NULL) {
		json_t *req = json_pack("{s:s, s:s}", "op", "virt-type", "want",
		    "auto");

		return nd_string(v, req, out, 16, e);
	} else if (want == NULL || strcmp(want, "auto") == 0) {
		/*
		 * /dev/kvm alone is not enough: it must be backed by the CPU's
		 * virtualization extensions (kvm_pvm, for one, runs an
		 * unmodified guest kernel far slower than TCG), and libvirt
		 * must find a QEMU that accelerates with it for a q35 machine.
		 */
		snprintf(out, 16, "qemu");
		if (access("/dev/kvm", F_OK) == 0 && hw_kvm() && v != NULL) {
			caps = lv.virConnectGetDomainCapabilities(v->conn, NULL,
			    NULL, "q35", "kvm", 0);
			if (caps != NULL)
				snprintf(out, 16, "kvm");
			else
				lv.virResetLastError();
		}
	} else {
		sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "virt type '%s': want auto, kvm or qemu", want);
		goto out;
	}
	rc = 0;
out:
	free(caps);
	return rc;
}

/* Writes s with the five XML special characters escaped. */
static void
xesc(FILE *f, const char *s)
{
	for (; *s != '\0'; s++) {
		switch (*s) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&apos;", f);
			break;
		default:
			fputc(*s, f);
			break;
		}
	}
}

/*
 * A string we put in the XML: present, and free of control characters,
 * which XML 1.0 cannot carry even escaped.  Paths must be absolute because
 * libvirtd resolves them, not us.
 */
static int
check_str(const char *what, const char *s, int path, struct sp_err *e)
{
	const unsigned char *p;

	if (s == NULL || *s == '\0')
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "vm %s is missing", what);
	for (p = (const unsigned char *)s; *p != '\0'; p++)
		if (*p < 0x20 || *p == 0x7f)
			return sp_err_set(e, SP_E_BAD_INPUT, 0,
			    "vm %s has a control character", what);
	if (path && *s != '/')
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "vm %s '%s' is not an absolute path", what, s);
	return 0;
}

/* The guest kernel's command line of the spec: its own, or the default. */
static const char *
spec_cmdline(const struct sp_vm_spec *s)
{
	return s->cmdline != NULL && *s->cmdline != '\0' ? s->cmdline :
	    sp_virt_boot_cmdline(s->virt_type);
}

static int check_volume(const struct sp_vm_volume *, struct sp_err *);
static void write_volume(FILE *, const struct sp_vm_volume *, int);

static int
check_spec(const struct sp_vm_spec *s, struct sp_err *e)
{
	struct sockaddr_un sun;
	char sock[64];
	int i;

	if (check_str("name", s->name, 0, e) == -1 ||
	    check_str("kernel", s->kernel, 1, e) == -1 ||
	    check_str("initrd", s->initrd, 1, e) == -1 ||
	    check_str("disk", s->disk, 1, e) == -1 ||
	    check_str("channel directory", s->chan_dir, 1, e) == -1)
		return -1;
	if (check_str("kernel command line", spec_cmdline(s), 0, e) == -1)
		return -1;
	if (s->nvolumes < 0 || s->nvolumes > SP_VM_VOLUMES_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "vm volumes %d",
		    s->nvolumes);
	for (i = 0; i < s->nvolumes; i++)
		if (check_volume(&s->volumes[i], e) == -1)
			return -1;
	if (s->uuid != NULL && (strlen(s->uuid) != 36 ||
	    strspn(s->uuid, "0123456789abcdef-") != 36))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "vm uuid '%.40s' is not a "
		    "lowercase UUID", s->uuid);
	if (s->virt_type == NULL || (strcmp(s->virt_type, "kvm") != 0 &&
	    strcmp(s->virt_type, "qemu") != 0))
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "vm virt type '%s': want kvm or qemu",
		    s->virt_type != NULL ? s->virt_type : "");
	if (s->memory_mib < 1 || s->memory_mib > VIRT_MEM_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "vm memory %d MiB: want 1..%d", s->memory_mib,
		    VIRT_MEM_MAX);
	if (s->vcpus < 1 || s->vcpus > VIRT_VCPUS_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "vm vcpus %d: want 1..%d", s->vcpus, VIRT_VCPUS_MAX);
	if (s->nports < 1 || s->nports > SP_PORTS_MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "vm ports %d: want 1..%d", s->nports, SP_PORTS_MAX);
	if ((s->jail_uid == 0) != (s->jail_gid == 0) ||
	    (s->jail_uid != 0 && s->jail_uid < 1000))
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "vm jail %u:%u: want both 0 or both from 1000", s->jail_uid,
		    s->jail_gid);
	if (s->cpu_quota_pct < 0 || s->cpu_quota_pct > 102400 ||
	    s->io_weight < 0 || s->io_weight > 1000)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "vm limits out of range "
		    "(cpu %d%%, io weight %d)", s->cpu_quota_pct, s->io_weight);
	/* QEMU's own monitor is a -chardev option: a comma would end it. */
	if (strchr(s->chan_dir, ',') != NULL)
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "vm channel directory '%s' has a comma", s->chan_dir);
	/* QEMU cannot bind a socket whose path does not fit sun_path. */
	snprintf(sock, sizeof sock, "/space.%d.sock", s->nports - 1);
	if (strlen(s->chan_dir) + strlen(sock) >= sizeof sun.sun_path)
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "vm channel directory '%s' is too long for a socket path",
		    s->chan_dir);
	return 0;
}

void
sp_virt_boot_layout(struct sp_vm_layout *l)
{
	const char *v = getenv("SPACE_VM_LAYOUT");

	l->nports = SP_PORTS_DEFAULT;
	l->shared_vectors = v != NULL && (strcmp(v, "shared") == 0 ||
	    strcmp(v, "pre-egress") == 0);
	l->egress = v == NULL || strcmp(v, "pre-egress") != 0;
	l->balloon = v == NULL || strcmp(v, "shared") == 0;
}

const char *
sp_virt_boot_cmdline(const char *virt_type)
{
	const char *v = getenv("SPACE_VM_CMDLINE");

	if (v != NULL && *v != '\0')
		return v;
	return virt_type != NULL && strcmp(virt_type, "qemu") == 0 ?
	    SP_VIRT_CMDLINE_TCG : SP_VIRT_CMDLINE;
}

int
sp_vm_layout_current(const struct sp_vm_layout *l)
{
	return l->nports == SP_PORTS_DEFAULT && l->egress && l->balloon;
}

/*
 * A volume's disk (sp_volume.c): its own virtio-blk device, found in the
 * guest by its serial (the volume's id), named by an alias of ours so it can
 * be unplugged.  The jail's VMs reach its file through an ACL the volume
 * keeps (a volume may be read by many VMs, each of its own uid), so libvirt
 * must not chown it; without the jail libvirt's user takes it as it takes
 * the root disk.  A restored VM finds it again on the PCIe port it was
 * plugged into (bus), which libvirt otherwise picks.
 */
static void
write_volume(FILE *f, const struct sp_vm_volume *d, int jailed)
{
	fputs("    <disk type='file' device='disk'>\n"
	    "      <driver name='qemu' type='raw' discard='unmap'/>\n"
	    "      <source file='", f);
	xesc(f, d->disk);
	fputs(jailed ? "'>\n        <seclabel model='dac' relabel='no'/>\n"
	    "      </source>\n" : "'/>\n", f);
	fprintf(f, "      <target dev='%s' bus='virtio'/>\n", d->target);
	if (d->ro)
		fputs("      <readonly/>\n      <shareable/>\n", f);
	fputs("      <serial>", f);
	xesc(f, d->serial);
	fputs("</serial>\n      <alias name='ua-vol-", f);
	xesc(f, d->serial);
	fputs("'/>\n", f);
	if (d->bus > 0)
		fprintf(f, "      <address type='pci' domain='0x0000' "
		    "bus='0x%02x' slot='0x00' function='0x0'/>\n", d->bus);
	fputs("    </disk>\n", f);
}

static int
check_volume(const struct sp_vm_volume *d, struct sp_err *e)
{
	if (check_str("volume disk", d->disk, 1, e) == -1 ||
	    check_str("volume serial", d->serial, 0, e) == -1)
		return -1;
	if (!sp_id_valid(d->serial))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "volume serial '%.32s' "
		    "is not an id", d->serial);
	if (strlen(d->target) != 3 || strncmp(d->target, "vd", 2) != 0 ||
	    d->target[2] < 'b' || d->target[2] > 'z')
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "volume target '%.8s': "
		    "want vdb..vdz", d->target);
	if (d->bus < 0 || d->bus > 255)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "volume bus %d", d->bus);
	return 0;
}

int
sp_virt_volume_xml(const struct sp_vm_volume *d, int jailed, char **xml,
    struct sp_err *e)
{
	FILE *f;
	size_t len;

	*xml = NULL;
	if (check_volume(d, e) == -1)
		return -1;
	if ((f = open_memstream(xml, &len)) == NULL)
		return sp_err_sys(e, SP_E_NOMEM, "volume xml");
	write_volume(f, d, jailed);
	if (fclose(f) == EOF) {
		free(*xml);
		*xml = NULL;
		return sp_err_sys(e, SP_E_NOMEM, "volume xml");
	}
	return 0;
}

/* The PCIe root ports libvirt gives a VM of ours it defines: one for the
 * virtio-serial controller, one for the root disk, one for the balloon if
 * it has one, and a spare, which a volume takes (sp_volume.c). */
#define ROOT_PORTS(s)	(3 + (s)->balloon)

static void
write_xml(FILE *f, const struct sp_vm_spec *s)
{
	int i, ports;

	fprintf(f, "<domain type='%s' xmlns:qemu="
	    "'http://libvirt.org/schemas/domain/qemu/1.0'>\n", s->virt_type);
	fputs("  <name>", f);
	xesc(f, s->name);
	fputs("</name>\n", f);
	if (s->uuid != NULL) {
		fputs("  <uuid>", f);
		xesc(f, s->uuid);
		fputs("</uuid>\n", f);
	}
	fprintf(f, "  <memory unit='MiB'>%d</memory>\n", s->memory_mib);
	fprintf(f, "  <vcpu placement='static'>%d</vcpu>\n", s->vcpus);
	/* QEMU marks guest memory mergeable unless told not to. */
	if (!s->mergeable)
		fputs("  <memoryBacking>\n"
		    "    <nosharepages/>\n"
		    "  </memoryBacking>\n", f);
	/*
	 * The limits of its cgroup (sp_jail.c).  Not memtune's hard_limit:
	 * libvirt then raises QEMU's RLIMIT_MEMLOCK to it, which needs
	 * CAP_SYS_RESOURCE; the jail writes the cgroup's limit itself.
	 */
	if (s->cpu_quota_pct > 0)
		fprintf(f, "  <cputune>\n"
		    "    <global_period>100000</global_period>\n"
		    "    <global_quota>%d</global_quota>\n"
		    "  </cputune>\n", s->cpu_quota_pct * 1000);
	if (s->io_weight > 0)
		fprintf(f, "  <blkiotune>\n"
		    "    <weight>%d</weight>\n"
		    "  </blkiotune>\n", s->io_weight);
	fputs("  <os>\n"
	    "    <type arch='x86_64' machine='q35'>hvm</type>\n", f);
	fputs("    <kernel>", f);
	xesc(f, s->kernel);
	fputs("</kernel>\n    <initrd>", f);
	xesc(f, s->initrd);
	fputs("</initrd>\n    <cmdline>", f);
	xesc(f, spec_cmdline(s));
	fputs("</cmdline>\n  </os>\n", f);
	/*
	 * ACPI lets the guest power itself off; without S3/S4 it cannot
	 * park itself in a state nobody resumes.  Whatever way the guest
	 * ends, the domain goes away: the platform decides what comes next.
	 */
	fputs("  <features>\n    <acpi/>\n  </features>\n"
	    "  <pm>\n"
	    "    <suspend-to-mem enabled='no'/>\n"
	    "    <suspend-to-disk enabled='no'/>\n"
	    "  </pm>\n"
	    "  <clock offset='utc'/>\n"
	    "  <on_poweroff>destroy</on_poweroff>\n"
	    "  <on_reboot>destroy</on_reboot>\n"
	    "  <on_crash>destroy</on_crash>\n"
	    "  <devices>\n", f);
	/*
	 * Default host caching: O_DIRECT (cache='none') on btrfs can write
	 * blocks that no longer match their checksums when the guest changes
	 * a buffer in flight.  discard lets the guest give blocks back.
	 */
	fputs("    <disk type='file' device='disk'>\n"
	    "      <driver name='qemu' type='raw' discard='unmap'/>\n"
	    "      <source file='", f);
	xesc(f, s->disk);
	fputs("'/>\n"
	    "      <target dev='vda' bus='virtio'/>\n"
	    "    </disk>\n", f);
	for (i = 0; i < s->nvolumes; i++)
		write_volume(f, &s->volumes[i], s->jail_uid != 0);
	fputs("    <controller type='usb' model='none'/>\n", f);
	/*
	 * libvirt's default controller has 31 ports, 64 queues, and Linux
	 * puts them all on one MSI-X vector when it cannot have 65: each
	 * interrupt then walks every queue (~10% of a call's guest CPU under
	 * TCG).  Ports for ours (port 0 is the console's) and the egress
	 * one, and a vector per queue (two a port and two for control) and
	 * one for config.  A saved VM restores only into the layout it was
	 * saved with: a restore says which (sp_ckpt_layout).
	 */
	if (s->shared_vectors)
		fputs("    <controller type='virtio-serial' index='0'/>\n", f);
	else
		fprintf(f, "    <controller type='virtio-serial' index='0' "
		    "ports='%d' vectors='%d'/>\n", s->nports + 1 + !s->no_egress,
		    2 * (s->nports + 1 + !s->no_egress) + 3);
	/*
	 * A VM restored with volumes plugged: libvirt would add a root port
	 * for the bus each is on and then a spare one, which the saved VM
	 * does not have.  So the controllers libvirt gave it are written out
	 * as they were, in libvirt's order (usb, virtio-serial, sata, the
	 * PCIe root, its ports).
	 */
	if (s->nvolumes > 0) {
		for (i = 0, ports = ROOT_PORTS(s); i < s->nvolumes; i++)
			if (s->volumes[i].bus > ports)
				ports = s->volumes[i].bus;
		fputs("    <controller type='sata' index='0'/>\n"
		    "    <controller type='pci' index='0' model='pcie-root'/>\n",
		    f);
		for (i = 1; i <= ports; i++)
			fprintf(f, "    <controller type='pci' index='%d' "
			    "model='pcie-root-port'/>\n", i);
	}
	/*
	 * The console goes through virtlogd, which rotates the file and so
	 * bounds what a hostile guest can write; a file chardev would not.
	 */
	fputs("    <serial type='pty'>\n      <log file='", f);
	xesc(f, s->chan_dir);
	fputs("/console.log' append='on'/>\n"
	    "      <target type='isa-serial' port='0'/>\n"
	    "    </serial>\n"
	    "    <console type='pty'>\n"
	    "      <target type='serial' port='0'/>\n"
	    "    </console>\n", f);
	for (i = 0; i < s->nports; i++) {
		fputs("    <channel type='unix'>\n"
		    "      <source mode='bind' path='", f);
		xesc(f, s->chan_dir);
		fprintf(f, "/space.%d.sock'/>\n"
		    "      <target type='virtio' name='space.%d'/>\n"
		    "    </channel>\n", i, i);
	}
	/* The egress tunnel: space-gatewayd's (design.md). */
	if (!s->no_egress) {
		fputs("    <channel type='unix'>\n"
		    "      <source mode='bind' path='", f);
		xesc(f, s->chan_dir);
		fputs("/" SP_EGRESS_SOCK "'/>\n"
		    "      <target type='virtio' name='" SP_EGRESS_PORT_NAME
		    "'/>\n    </channel>\n", f);
	}
	/*
	 * The balloon is there for its free page reporting: the guest tells
	 * QEMU which runs of pages (4 MiB) it has freed, and QEMU gives them
	 * back to the host.  It is never inflated.
	 */
	if (s->balloon)
		fputs("    <memballoon model='virtio' freePageReporting='on'/>\n",
		    f);
	else
		fputs("    <memballoon model='none'/>\n", f);
	fputs("  </devices>\n", f);
	/*
	 * Its own uid and gid: libvirt chowns the disk, kernel and initrd to
	 * them at each start (and back at the end); no other VM's QEMU can
	 * open them (sp_jail.c).
	 */
	if (s->jail_uid != 0)
		fprintf(f, "  <seclabel type='static' model='dac' relabel='yes'>\n"
		    "    <label>+%u:+%u</label>\n"
		    "  </seclabel>\n", s->jail_uid, s->jail_gid);
	/*
	 * A second QMP monitor of our own, beside libvirt's: a claim resumes
	 * a warm pod through it without loading libvirt.  libvirt hears
	 * QEMU's RESUME event and follows.
	 */
	fputs("  <qemu:commandline>\n"
	    "    <qemu:arg value='-chardev'/>\n"
	    "    <qemu:arg value='socket,id=spqmp,server=on,wait=off,path=", f);
	xesc(f, s->chan_dir);
	fputs("/" SP_QMP_SOCK "'/>\n"
	    "    <qemu:arg value='-mon'/>\n"
	    "    <qemu:arg value='chardev=spqmp,mode=control'/>\n", f);
	/*
	 * The channel's queues without ioeventfds: a guest's kick is then
	 * served by the vCPU thread that made it, not handed to QEMU's main
	 * thread through an eventfd, and a resume does not set up an
	 * eventfd for each of the controller's queues again (QEMU tears
	 * them down at every pause): claims cost QEMU's other threads less
	 * CPU and output through the channel is faster (docs/benchmarks.md,
	 * "The channel").
	 */
	fputs("    <qemu:arg value='-global'/>\n"
	    "    <qemu:arg value='virtio-serial-pci.ioeventfd=off'/>\n"
	    "  </qemu:commandline>\n"
	    "</domain>\n", f);
}

int
sp_virt_domain_xml(const struct sp_vm_spec *s, char **xml, struct sp_err *e)
{
	FILE *f = NULL;
	char *buf = NULL;
	size_t len = 0;
	int rc = -1;

	*xml = NULL;
	if (check_spec(s, e) == -1)
		goto out;
	if ((f = open_memstream(&buf, &len)) == NULL) {
		sp_err_sys(e, SP_E_NOMEM, "domain xml of '%s'", s->name);
		goto out;
	}
	write_xml(f, s);
	if (ferror(f)) {
		sp_err_sys(e, SP_E_NOMEM, "domain xml of '%s'", s->name);
		goto out;
	}
	if (fclose(f) == EOF) {
		f = NULL;
		sp_err_sys(e, SP_E_NOMEM, "domain xml of '%s'", s->name);
		goto out;
	}
	f = NULL;
	*xml = buf;
	buf = NULL;
	rc = 0;
out:
	if (f != NULL)
		fclose(f);
	free(buf);
	return rc;
}

/* The text of xml between the first open and the close after it, into out
 * (cap bytes); 0 when found and it fits, else -1. */
static int
between(const char *xml, const char *open, const char *close, char *out,
    size_t cap)
{
	const char *p, *q;

	if ((p = strstr(xml, open)) == NULL)
		return -1;
	p += strlen(open);
	if ((q = strstr(p, close)) == NULL || (size_t)(q - p) >= cap)
		return -1;
	memcpy(out, p, (size_t)(q - p));
	out[q - p] = '\0';
	return 0;
}

static int
between_int(const char *xml, const char *open, int *out)
{
	char buf[16], *end;
	long v;

	if (between(xml, open, "<", buf, sizeof buf) == -1)
		return -1;
	v = strtol(buf, &end, 10);
	if (end == buf || *end != '\0' || v < 0 || v > 1 << 30)
		return -1;
	*out = (int)v;
	return 0;
}

static int
count(const char *s, const char *what)
{
	int n = 0;

	while ((s = strstr(s, what)) != NULL) {
		n++;
		s += strlen(what);
	}
	return n;
}

/* The volumes' disks of a domain XML, each a <disk> with a <serial> (the
 * root disk has none), into t and s; -1 when one is not whole. */
static int
xml_volumes(const char *xml, struct sp_vm_spec *s, struct sp_vm_spec_text *t)
{
	static const char open[] = "    <disk type='file' device='disk'>\n";
	const char *p = xml, *d, *at, *end;
	struct sp_vm_volume *v;
	char *block, bus[8];
	int rc;

	while ((at = strstr(p, "<serial>")) != NULL) {
		if (s->nvolumes == SP_VM_VOLUMES_MAX)
			return -1;
		for (d = NULL; (p = strstr(p, open)) != NULL && p < at; p++)
			d = p;
		if (d == NULL || (end = strstr(at, "</disk>")) == NULL ||
		    (block = strndup(d, (size_t)(end - d))) == NULL)
			return -1;
		v = &t->volumes[s->nvolumes];
		rc = between(block, "<source file='", "'",
		    t->volume_disks[s->nvolumes], SP_PATH_MAX) == -1 ||
		    between(block, "<target dev='", "'", v->target,
		    sizeof v->target) == -1 ||
		    between(block, "<serial>", "</serial>",
		    t->volume_serials[s->nvolumes], 24) == -1 ? -1 : 0;
		v->disk = t->volume_disks[s->nvolumes];
		v->serial = t->volume_serials[s->nvolumes];
		v->ro = strstr(block, "<readonly/>") != NULL;
		if (rc == 0 && between(block, " bus='0x", "'", bus,
		    sizeof bus) == 0)
			v->bus = (int)strtol(bus, NULL, 16);
		free(block);
		if (rc == -1)
			return -1;
		s->nvolumes++;
		p = end;
	}
	s->volumes = t->volumes;
	return 0;
}

int
sp_virt_xml_spec(const char *xml, struct sp_vm_spec *s,
    struct sp_vm_spec_text *t, struct sp_err *e)
{
	char *again = NULL;
	int rc = -1, quota = 0;

	memset(s, 0, sizeof *s);
	memset(t, 0, sizeof *t);
	if (between(xml, "<domain type='", "'", t->virt_type,
	    sizeof t->virt_type) == -1 ||
	    between(xml, "<name>", "</name>", t->name, sizeof t->name) == -1 ||
	    between_int(xml, "<memory unit='MiB'>", &s->memory_mib) == -1 ||
	    between_int(xml, "<vcpu placement='static'>", &s->vcpus) == -1 ||
	    between(xml, "<kernel>", "</kernel>", t->kernel,
	    sizeof t->kernel) == -1 ||
	    between(xml, "<initrd>", "</initrd>", t->initrd,
	    sizeof t->initrd) == -1 ||
	    between(xml, "<cmdline>", "</cmdline>", t->cmdline,
	    sizeof t->cmdline) == -1 ||
	    between(xml, "<source file='", "'", t->disk, sizeof t->disk) == -1 ||
	    between(xml, "<log file='", "/console.log'", t->chan_dir,
	    sizeof t->chan_dir) == -1)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "not a domain XML of "
		    "space's: a part is missing");
	if (between(xml, "<uuid>", "</uuid>", t->uuid, sizeof t->uuid) == 0)
		s->uuid = t->uuid;
	if (between_int(xml, "<global_quota>", &quota) == 0)
		s->cpu_quota_pct = quota / 1000;
	(void)between_int(xml, "<weight>", &s->io_weight);
	if (strstr(xml, "<label>+") != NULL && sscanf(strstr(xml,
	    "<label>+"), "<label>+%u:+%u<", &s->jail_uid, &s->jail_gid) != 2)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "not a domain XML of "
		    "space's: its label");
	if (xml_volumes(xml, s, t) == -1)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "not a domain XML of "
		    "space's: a volume's disk");
	s->no_egress = strstr(xml, "/" SP_EGRESS_SOCK "'") == NULL;
	s->nports = count(xml, "<target type='virtio' name='space.") -
	    !s->no_egress;
	s->shared_vectors = strstr(xml,
	    "<controller type='virtio-serial' index='0'/>") != NULL;
	s->balloon = strstr(xml, "<memballoon model='virtio'") != NULL;
	s->mergeable = strstr(xml, "<nosharepages/>") == NULL;
	s->name = t->name;
	s->virt_type = t->virt_type;
	s->kernel = t->kernel;
	s->initrd = t->initrd;
	s->cmdline = t->cmdline;
	s->disk = t->disk;
	s->chan_dir = t->chan_dir;
	/* Whatever the parts, only the very text our writer makes of them
	 * passes: an element more, an attribute or an escape is refused. */
	if (sp_virt_domain_xml(s, &again, e) == -1)
		return -1;
	if (strcmp(again, xml) != 0)
		sp_err_set(e, SP_E_BAD_INPUT, 0, "not a domain XML of space's: "
		    "it is not what space writes of its parts");
	else
		rc = 0;
	free(again);
	return rc;
}

/* The text between the first <tag> and </tag> of a domain XML, or NULL. */
static char *
xml_elem(const char *xml, const char *tag)
{
	char otag[32], ctag[32];
	const char *p, *q;

	snprintf(otag, sizeof otag, "<%s>", tag);
	snprintf(ctag, sizeof ctag, "</%s>", tag);
	if ((p = strstr(xml, otag)) == NULL)
		return NULL;
	p += strlen(otag);
	if ((q = strstr(p, ctag)) == NULL)
		return NULL;
	return strndup(p, q - p);
}

/*
 * Defining a name that exists replaces its definition, as long as the new
 * XML carries the existing UUID; ours carry none, so the existing UUID is
 * put in.  That makes a repeated define (say, a create retried after a
 * crash) land where the first one did.
 */
int
sp_virt_define(struct sp_virt *v, const char *xml, struct sp_err *e)
{
	virDomainPtr dom = NULL, old = NULL;
	char *name = NULL, *withuuid = NULL;
	char uuid[VIR_UUID_STRING_BUFLEN];
	const char *p;
	int rc = -1;

	if (v->noded != NULL) {
		json_t *req = nd_req("vm-define", NULL);

		json_object_set_new(req, "xml", json_string(xml));
		return nd_call(v, req, NULL, e);
	}
	name = xml_elem(xml, "name");
	p = strstr(xml, "</name>");
	if (name != NULL && p != NULL && strstr(xml, "<uuid>") == NULL &&
	    (old = lv.virDomainLookupByName(v->conn, name)) != NULL) {
		if (lv.virDomainGetUUIDString(old, uuid) == -1) {
			virt_err(e, "define", name);
			goto out;
		}
		if (asprintf(&withuuid, "%.*s</name>\n  <uuid>%s</uuid>%s",
		    (int)(p - xml), xml, uuid, p + strlen("</name>")) == -1) {
			withuuid = NULL;
			sp_err_sys(e, SP_E_NOMEM, "define '%s'", name);
			goto out;
		}
		xml = withuuid;
	} else
		lv.virResetLastError();
	dom = lv.virDomainDefineXMLFlags(v->conn, xml, VIR_DOMAIN_DEFINE_VALIDATE);
	if (dom == NULL) {
		virt_err(e, "define", name);
		goto out;
	}
	rc = 0;
out:
	if (dom != NULL)
		lv.virDomainFree(dom);
	if (old != NULL)
		lv.virDomainFree(old);
	free(withuuid);
	free(name);
	return rc;
}

static int
lookup(struct sp_virt *v, const char *what, const char *name,
    virDomainPtr *dom, struct sp_err *e)
{
	*dom = lv.virDomainLookupByName(v->conn, name);
	if (*dom == NULL)
		return virt_err(e, what, name);
	return 0;
}

/*
 * Like lookup, for the operations where an absent domain is the goal:
 * 1 found, 0 absent, -1 error.
 */
static int
lookup_maybe(struct sp_virt *v, const char *what, const char *name,
    virDomainPtr *dom, struct sp_err *e)
{
	*dom = lv.virDomainLookupByName(v->conn, name);
	if (*dom != NULL)
		return 1;
	if (last_code() == VIR_ERR_NO_DOMAIN) {
		lv.virResetLastError();
		return 0;
	}
	return virt_err(e, what, name);
}

/* An operation on one domain: what and name are for its messages. */
typedef int (*dom_op)(virDomainPtr dom, const char *what, const char *name,
    void *arg, struct sp_err *e);

/* Looks name up, runs op on it and lets the domain go. */
static int
on_domain(struct sp_virt *v, const char *what, const char *name, dom_op op,
    void *arg, struct sp_err *e)
{
	virDomainPtr dom;
	int rc;

	if (lookup(v, what, name, &dom, e) == -1)
		return -1;
	rc = op(dom, what, name, arg, e);
	lv.virDomainFree(dom);
	return rc;
}

/* Starting a domain that already runs (or is paused) is not an error. */
static int
start_op(virDomainPtr dom, const char *what, const char *name, void *arg,
    struct sp_err *e)
{
	int active;

	if ((active = lv.virDomainIsActive(dom)) == -1)
		return virt_err(e, what, name);
	if (!active && lv.virDomainCreate(dom) == -1) {
		/* Someone else started it in between. */
		if (last_code() != VIR_ERR_OPERATION_INVALID ||
		    lv.virDomainIsActive(dom) != 1)
			return virt_err(e, what, name);
		lv.virResetLastError();
	}
	return 0;
}

int
sp_virt_start(struct sp_virt *v, const char *name, struct sp_err *e)
{
	if (v->noded != NULL)
		return nd_call(v, nd_req("vm-start", name), NULL, e);
	return on_domain(v, "start", name, start_op, NULL, e);
}

int
sp_virt_destroy(struct sp_virt *v, const char *name, struct sp_err *e)
{
	virDomainPtr dom = NULL;
	int rc = -1, found, active;

	if (v->noded != NULL)
		return nd_call(v, nd_req("vm-destroy", name), NULL, e);
	if ((found = lookup_maybe(v, "destroy", name, &dom, e)) <= 0) {
		rc = found;
		goto out;
	}
	if ((active = lv.virDomainIsActive(dom)) == -1 &&
	    last_code() != VIR_ERR_NO_DOMAIN) {
		virt_err(e, "destroy", name);
		goto out;
	}
	/* A transient domain vanishes on destroy: gone is what we want. */
	if (active == 1 && lv.virDomainDestroy(dom) == -1 &&
	    last_code() != VIR_ERR_OPERATION_INVALID &&
	    last_code() != VIR_ERR_NO_DOMAIN) {
		virt_err(e, "destroy", name);
		goto out;
	}
	lv.virResetLastError();
	rc = 0;
out:
	if (dom != NULL)
		lv.virDomainFree(dom);
	return rc;
}

int
sp_virt_undefine(struct sp_virt *v, const char *name, struct sp_err *e)
{
	virDomainPtr dom = NULL;
	int rc = -1, found, persistent;
	unsigned int flags;

	if (v->noded != NULL)
		return nd_call(v, nd_req("vm-undefine", name), NULL, e);
	if ((found = lookup_maybe(v, "undefine", name, &dom, e)) <= 0) {
		rc = found;
		goto out;
	}
	if ((persistent = lv.virDomainIsPersistent(dom)) == -1 &&
	    last_code() != VIR_ERR_NO_DOMAIN) {
		virt_err(e, "undefine", name);
		goto out;
	}
	/*
	 * A managed save image or snapshot metadata would make a plain
	 * undefine fail; neither is worth keeping once the domain goes.
	 */
	flags = VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |
	    VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA;
	if (persistent == 1 && lv.virDomainUndefineFlags(dom, flags) == -1 &&
	    last_code() != VIR_ERR_NO_DOMAIN) {
		virt_err(e, "undefine", name);
		goto out;
	}
	lv.virResetLastError();
	rc = 0;
out:
	if (dom != NULL)
		lv.virDomainFree(dom);
	return rc;
}

/* The domain's libvirt state, or -1 with e set. */
static int
dom_state(virDomainPtr dom, const char *what, const char *name,
    struct sp_err *e)
{
	int st, reason;

	if (lv.virDomainGetState(dom, &st, &reason, 0) == -1)
		return virt_err(e, what, name);
	return st;
}

/*
 * Whether a state has a QEMU process behind it.  Drivers disagree on the
 * error for pausing a stopped domain, so we answer that ourselves.
 */
static int
is_active(int st)
{
	return st != VIR_DOMAIN_SHUTOFF && st != VIR_DOMAIN_CRASHED &&
	    st != VIR_DOMAIN_NOSTATE;
}

/*
 * Pauses (*arg 0) or resumes (*arg 1) the vCPUs.  Pausing a paused domain, or
 * resuming a running one, is not an error: the result is the same.
 */
static int
set_running(virDomainPtr dom, const char *what, const char *name, void *arg,
    struct sp_err *e)
{
	int run = *(int *)arg, st;

	if ((st = dom_state(dom, what, name, e)) == -1)
		return -1;
	if (!is_active(st))
		return sp_err_set(e, SP_E_BAD_STATE, 0, "%s '%s': domain is not "
		    "running", what, name);
	if (st != (run ? VIR_DOMAIN_RUNNING : VIR_DOMAIN_PAUSED) &&
	    (run ? lv.virDomainResume(dom) : lv.virDomainSuspend(dom)) == -1)
		return virt_err(e, what, name);
	return 0;
}

int
sp_virt_pause(struct sp_virt *v, const char *name, struct sp_err *e)
{
	int run = 0;

	if (v->noded != NULL)
		return nd_call(v, nd_req("vm-pause", name), NULL, e);
	return on_domain(v, "pause", name, set_running, &run, e);
}

int
sp_virt_resume(struct sp_virt *v, const char *name, struct sp_err *e)
{
	int run = 1;

	if (v->noded != NULL)
		return nd_call(v, nd_req("vm-resume", name), NULL, e);
	return on_domain(v, "resume", name, set_running, &run, e);
}

/*
 * Saves the memory state to path and stops the domain.  A restore brings it
 * back running or paused, as it was when saved.
 */
static int
save_op(virDomainPtr dom, const char *what, const char *name, void *path,
    struct sp_err *e)
{
	return lv.virDomainSaveFlags(dom, path, NULL, 0) == -1 ?
	    virt_err(e, what, name) : 0;
}

int
sp_virt_save(struct sp_virt *v, const char *name, const char *path,
    struct sp_err *e)
{
	if (v->noded != NULL) {
		json_t *req = nd_req("vm-save", name);

		json_object_set_new(req, "file", json_string(path));
		return nd_call(v, req, NULL, e);
	}
	return on_domain(v, "save", name, save_op, (void *)path, e);
}

/* "vda vdb " for the vd? targets of a domain XML. */
static int
disk_targets(const char *xml, char *out, size_t n)
{
	const char *t = xml;
	size_t used = 0;
	int k;

	out[0] = '\0';
	while ((t = strstr(t, "<target dev='vd")) != NULL) {
		char c = t[strlen("<target dev='vd")];

		t += strlen("<target dev='vd");
		if (c < 'a' || c > 'z')
			continue;
		k = snprintf(out + used, n - used, "vd%c ", c);
		if (k < 0 || (size_t)k >= n - used)
			return -1;
		used += (size_t)k;
	}
	return 0;
}

/*
 * Writes the memory state of a running or paused domain to path and leaves
 * it as it was: a memory-only external snapshot without metadata, whose file
 * virDomainRestore takes like a save image (design.md).  Paused first, the
 * disk can be snapshotted at the same instant.
 */
int
sp_virt_save_memory(struct sp_virt *v, const char *name, const char *path,
    struct sp_err *e)
{
	virDomainSnapshotPtr snap = NULL;
	virDomainPtr dom = NULL;
	char *xml = NULL, *dxml, targets[26 * 4 + 1], one[4];
	const char *t;
	size_t n;
	FILE *f;
	int rc = -1;

	if (v->noded != NULL) {
		json_t *req = nd_req("vm-save-memory", name);

		json_object_set_new(req, "file", json_string(path));
		return nd_call(v, req, NULL, e);
	}
	if (lookup(v, "save memory", name, &dom, e) == -1)
		goto out;
	if ((f = open_memstream(&xml, &n)) == NULL) {
		sp_err_sys(e, SP_E_INTERNAL, "open_memstream");
		goto out;
	}
	fputs("<domainsnapshot>\n  <memory snapshot='external' file='", f);
	xesc(f, path);
	fputs("'/>\n  <disks>", f);
	/* Every disk, or libvirt would snapshot a volume's into a qcow2
	 * overlay: btrfs snapshots them (sp_snap.c, sp_volume.c). */
	if ((dxml = lv.virDomainGetXMLDesc(dom, 0)) != NULL &&
	    disk_targets(dxml, targets, sizeof targets) == 0) {
		for (t = targets; sscanf(t, "%3s", one) == 1; t += 4)
			fprintf(f, "<disk name='%s' snapshot='no'/>", one);
	} else
		fputs("<disk name='vda' snapshot='no'/>", f);
	free(dxml);
	fputs("</disks>\n</domainsnapshot>\n", f);
	if (fclose(f) != 0) {
		sp_err_sys(e, SP_E_INTERNAL, "snapshot XML");
		goto out;
	}
	snap = lv.virDomainSnapshotCreateXML(dom, xml,
	    VIR_DOMAIN_SNAPSHOT_CREATE_NO_METADATA);
	if (snap == NULL) {
		virt_err(e, "save memory", name);
		goto out;
	}
	rc = 0;
out:
	if (snap != NULL)
		lv.virDomainSnapshotFree(snap);
	if (dom != NULL)
		lv.virDomainFree(dom);
	free(xml);
	return rc;
}

static int
uuid_op(virDomainPtr dom, const char *what, const char *name, void *out,
    struct sp_err *e)
{
	char buf[VIR_UUID_STRING_BUFLEN];

	if (lv.virDomainGetUUIDString(dom, buf) == -1)
		return virt_err(e, what, name);
	if (strlen(buf) != 36)
		return sp_err_set(e, SP_E_INTERNAL, 0, "%s: odd uuid", name);
	memcpy(out, buf, 37);
	return 0;
}

int
sp_virt_uuid(struct sp_virt *v, const char *name, char out[37],
    struct sp_err *e)
{
	if (v->noded != NULL)
		return nd_string(v, nd_req("vm-uuid", name), out, 37, e);
	return on_domain(v, "uuid", name, uuid_op, out, e);
}

struct resize {
	const char *disk;
	uint64_t bytes;
};

static int
resize_op(virDomainPtr dom, const char *what, const char *name, void *arg,
    struct sp_err *e)
{
	const struct resize *r = arg;

	if (lv.virDomainBlockResize(dom, r->disk, r->bytes,
	    VIR_DOMAIN_BLOCK_RESIZE_BYTES) == -1)
		return virt_err(e, what, name);
	return 0;
}

int
sp_virt_block_resize(struct sp_virt *v, const char *name, const char *disk,
    uint64_t bytes, struct sp_err *e)
{
	struct resize r = { disk, bytes };

	if (v->noded != NULL) {
		json_t *req = nd_req("vm-resize", name);

		json_object_set_new(req, "disk", json_string(disk));
		json_object_set_new(req, "bytes", json_integer((json_int_t)bytes));
		return nd_call(v, req, NULL, e);
	}
	return on_domain(v, "block resize", name, resize_op, &r, e);
}

static int
plug_op(virDomainPtr dom, const char *what, const char *name, void *arg,
    struct sp_err *e)
{
	if (lv.virDomainAttachDeviceFlags(dom, arg,
	    VIR_DOMAIN_AFFECT_LIVE) == -1)
		return virt_err(e, what, name);
	return 0;
}

int
sp_virt_volume_plug(struct sp_virt *v, const char *name,
    const struct sp_vm_volume *d, int jailed, struct sp_err *e)
{
	json_t *req;
	char *xml;
	int rc;

	/* space-noded writes the XML itself, the disk's path its own. */
	if (v->noded != NULL) {
		if (check_volume(d, e) == -1 || (req = nd_req("vm-plug",
		    name)) == NULL)
			return -1;
		json_object_set_new(req, "volume", json_string(d->serial));
		json_object_set_new(req, "disk", json_string(d->target));
		json_object_set_new(req, "readonly", json_boolean(d->ro));
		return nd_call(v, req, NULL, e);
	}
	if (sp_virt_volume_xml(d, jailed, &xml, e) == -1)
		return -1;
	rc = on_domain(v, "plug a volume", name, plug_op, xml, e);
	free(xml);
	return rc;
}

static int
unplug_op(virDomainPtr dom, const char *what, const char *name, void *arg,
    struct sp_err *e)
{
	if (lv.virDomainDetachDeviceAlias(dom, arg,
	    VIR_DOMAIN_AFFECT_LIVE) == -1) {
		/* Gone already: what an unplug wants. */
		if (last_code() == VIR_ERR_DEVICE_MISSING ||
		    last_code() == VIR_ERR_OPERATION_FAILED) {
			lv.virResetLastError();
			return 0;
		}
		return virt_err(e, what, name);
	}
	return 0;
}

int
sp_virt_volume_in(const char *xml, const char *serial)
{
	char alias[40];

	snprintf(alias, sizeof alias, "'ua-vol-%.20s'", serial);
	return strstr(xml, alias) != NULL;
}

/* Whether VM name has volume serial plugged: 1, 0, or -1 with e set. */
static int
volume_plugged(struct sp_virt *v, const char *name, const char *serial,
    struct sp_err *e)
{
	char *xml = NULL;
	int there;

	if (sp_virt_xml(v, name, &xml, e) == -1)
		return -1;
	there = sp_virt_volume_in(xml, serial);
	free(xml);
	return there;
}

int
sp_virt_volume_unplug(struct sp_virt *v, const char *name, const char *serial,
    struct sp_err *e)
{
	struct timespec ts = { 0, 50 * 1000000 };
	char alias[40];
	int waited, there;
	json_t *req;

	if (v->noded != NULL) {
		if ((req = nd_req("vm-unplug", name)) == NULL)
			return sp_err_set(e, SP_E_NOMEM, 0, "vm-unplug");
		json_object_set_new(req, "volume", json_string(serial));
		return nd_call(v, req, NULL, e);
	}
	/* Not plugged (libvirt 9 calls that an internal error): done. */
	if ((there = volume_plugged(v, name, serial, e)) <= 0)
		return there;
	snprintf(alias, sizeof alias, "ua-vol-%.20s", serial);
	if (on_domain(v, "unplug a volume", name, unplug_op, alias, e) == -1)
		return -1;
	/* The guest lets go of the device in its own time: libvirt waits 5 s
	 * for it, then returns with the request still pending. */
	for (waited = 0; ; waited += 50) {
		if ((there = volume_plugged(v, name, serial, e)) <= 0)
			return there;
		if (waited >= SP_VOLUME_UNPLUG_MS)
			return sp_err_set(e, SP_E_TIMED_OUT, 1, "the guest of %s "
			    "did not let go of volume %s in %d ms", name, serial,
			    SP_VOLUME_UNPLUG_MS);
		nanosleep(&ts, NULL);
	}
}

static int
memory_op(virDomainPtr dom, const char *what, const char *name, void *out,
    struct sp_err *e)
{
	unsigned long kib;

	if ((kib = lv.virDomainGetMaxMemory(dom)) == 0)
		return virt_err(e, what, name);
	*(unsigned long long *)out = (unsigned long long)kib;
	return 0;
}

int
sp_virt_memory_kib(struct sp_virt *v, const char *name,
    unsigned long long *kib, struct sp_err *e)
{
	if (v->noded != NULL) {
		json_t *val;

		if (nd_call(v, nd_req("vm-memory", name), &val, e) == -1)
			return -1;
		*kib = json_is_integer(val) ? (unsigned long long)
		    json_integer_value(val) : 0;
		json_decref(val);
		return *kib > 0 ? 0 : sp_err_set(e, SP_E_PROTOCOL, 0,
		    "space-noded: an odd answer");
	}
	return on_domain(v, "memory", name, memory_op, kib, e);
}

/* xml (may be NULL) replaces the saved domain XML, e.g. to change paths;
 * the domain comes back running. */
int
sp_virt_restore(struct sp_virt *v, const char *path, const char *xml,
    const char *name, struct sp_err *e)
{
	virDomainPtr dom;
	int st, reason, rc = 0;

	if (v->noded != NULL) {
		json_t *req = nd_req("vm-restore", name);

		/* noded restores only with an XML it can check. */
		if (xml == NULL) {
			json_decref(req);
			return sp_err_set(e, SP_E_INTERNAL, 0, "restore '%s': "
			    "space-noded needs its domain XML", path);
		}
		json_object_set_new(req, "file", json_string(path));
		json_object_set_new(req, "xml", json_string(xml));
		return nd_call(v, req, NULL, e);
	}
	if (lv.virDomainRestoreFlags(v->conn, path, xml, 0) == -1)
		return virt_err(e, "restore", path);
	if (name == NULL)
		return 0;
	/* Running, also when it was saved paused (a full checkpoint pauses
	 * first).  VIR_DOMAIN_SAVE_RUNNING would say so, but not every
	 * driver takes it (the test driver does not). */
	if (lookup(v, "restore", name, &dom, e) == -1)
		return -1;
	if (lv.virDomainGetState(dom, &st, &reason, 0) == -1)
		rc = virt_err(e, "restore", name);
	else if (st == VIR_DOMAIN_PAUSED && lv.virDomainResume(dom) == -1)
		rc = virt_err(e, "resume", name);
	lv.virDomainFree(dom);
	return rc;
}

/* A version number of libvirt's, major * 1000000 + minor * 1000 + micro. */
static void
put_version(char *out, size_t n, const char *what, unsigned long ver)
{
	snprintf(out, n, "%s %lu.%lu.%lu", what, ver / 1000000,
	    ver / 1000 % 1000, ver % 1000);
}

int
sp_virt_version(struct sp_virt *v, char *out, size_t n, struct sp_err *e)
{
	char lib[64], hv[64];
	unsigned long libver = 0, hvver = 0;
	const char *type;

	if (v->noded != NULL)
		return nd_string(v, nd_req("virt-version", NULL), out, n, e);
	if (lv.virGetVersion(&libver, NULL, NULL) == -1)
		return virt_err(e, "version", "libvirt");
	if ((type = lv.virConnectGetType(v->conn)) == NULL)
		return virt_err(e, "version", "hypervisor");
	if (lv.virConnectGetVersion(v->conn, &hvver) == -1)
		return virt_err(e, "version", type);
	put_version(lib, sizeof lib, "libvirt", libver);
	put_version(hv, sizeof hv, type, hvver);
	if ((size_t)snprintf(out, n, "%s, %s", lib, hv) >= n)
		return sp_err_set(e, SP_E_INTERNAL, 0, "version '%s, %s' too long",
		    lib, hv);
	return 0;
}

int
sp_virt_state(struct sp_virt *v, const char *name, char out[16],
    struct sp_err *e)
{
	virDomainPtr dom = NULL;
	const char *s;
	int rc = -1, found, st, reason;

	if (v->noded != NULL)
		return nd_string(v, nd_req("vm-state", name), out, 16, e);
	snprintf(out, 16, "absent");
	if ((found = lookup_maybe(v, "state", name, &dom, e)) <= 0) {
		rc = found;
		goto out;
	}
	if (lv.virDomainGetState(dom, &st, &reason, 0) == -1) {
		/* It went away between the lookup and the question. */
		if (last_code() == VIR_ERR_NO_DOMAIN) {
			lv.virResetLastError();
			rc = 0;
		} else
			virt_err(e, "state", name);
		goto out;
	}
	switch (st) {
	case VIR_DOMAIN_NOSTATE:
		s = "nostate";
		break;
	case VIR_DOMAIN_RUNNING:
		s = "running";
		break;
	case VIR_DOMAIN_BLOCKED:
		s = "blocked";
		break;
	case VIR_DOMAIN_PAUSED:
		s = "paused";
		break;
	case VIR_DOMAIN_SHUTDOWN:
		s = "shutdown";
		break;
	case VIR_DOMAIN_SHUTOFF:
		s = "shutoff";
		break;
	case VIR_DOMAIN_CRASHED:
		s = "crashed";
		break;
	case VIR_DOMAIN_PMSUSPENDED:
		s = "pmsuspended";
		break;
	default:
		s = "unknown";
		break;
	}
	snprintf(out, 16, "%s", s);
	rc = 0;
out:
	if (dom != NULL)
		lv.virDomainFree(dom);
	return rc;
}

/* Calls fn with the name of every domain libvirt knows, defined or running;
 * a non-zero return from fn stops the walk. */
int
sp_virt_list(struct sp_virt *v, int (*fn)(const char *, void *), void *arg,
    struct sp_err *e)
{
	virDomainPtr *doms = NULL;
	int i, n, rc = 0;

	if (v->noded != NULL) {
		json_t *val, *one;
		size_t k;

		if (nd_call(v, nd_req("vm-list", NULL), &val, e) == -1)
			return -1;
		json_array_foreach(val, k, one)
			if (json_is_string(one) && fn(json_string_value(one),
			    arg) != 0)
				break;
		json_decref(val);
		return 0;
	}
	if ((n = lv.virConnectListAllDomains(v->conn, &doms, 0)) == -1)
		return virt_err(e, "list", "domains");
	for (i = 0; i < n; i++) {
		if (rc == 0 && fn(lv.virDomainGetName(doms[i]), arg) != 0)
			rc = 1;
		lv.virDomainFree(doms[i]);
	}
	free(doms);
	return 0;
}

/* One typed parameter of a stats record as JSON. */
static json_t *
param_json(const virTypedParameter *p)
{
	switch (p->type) {
	case VIR_TYPED_PARAM_INT:
		return json_integer(p->value.i);
	case VIR_TYPED_PARAM_UINT:
		return json_integer(p->value.ui);
	case VIR_TYPED_PARAM_LLONG:
		return json_integer(p->value.l);
	case VIR_TYPED_PARAM_ULLONG:
		return json_integer(p->value.ul > INT64_MAX ? INT64_MAX :
		    (json_int_t)p->value.ul);
	case VIR_TYPED_PARAM_DOUBLE:
		return json_real(p->value.d);
	case VIR_TYPED_PARAM_BOOLEAN:
		return json_boolean(p->value.b);
	case VIR_TYPED_PARAM_STRING:
		return json_string(p->value.s);
	default:
		return NULL;
	}
}

int
sp_virt_stats(struct sp_virt *v, json_t **out, struct sp_err *e)
{
	virDomainStatsRecordPtr *recs = NULL;
	const char *name;
	json_t *all, *one, *val;
	int i, j, n;

	*out = NULL;
	if (v->noded != NULL)
		return nd_call(v, nd_req("vm-stats", NULL), out, e);
	/* One call for every domain: state, CPU, memory and block counters. */
	if ((n = lv.virConnectGetAllDomainStats(v->conn, VIR_DOMAIN_STATS_STATE |
	    VIR_DOMAIN_STATS_CPU_TOTAL | VIR_DOMAIN_STATS_BALLOON |
	    VIR_DOMAIN_STATS_BLOCK, &recs, 0)) == -1)
		return virt_err(e, "stats of", "domains");
	if ((all = json_object()) == NULL) {
		lv.virDomainStatsRecordListFree(recs);
		return sp_err_sys(e, SP_E_INTERNAL, "out of memory");
	}
	for (i = 0; i < n; i++) {
		name = lv.virDomainGetName(recs[i]->dom);
		/* Only this toolkit's domains. */
		if (name == NULL || strncmp(name, "sp-", 3) != 0 ||
		    (one = json_object()) == NULL)
			continue;
		for (j = 0; j < recs[i]->nparams; j++)
			if ((val = param_json(&recs[i]->params[j])) != NULL)
				json_object_set_new(one, recs[i]->params[j].field,
				    val);
		json_object_set_new(all, name, one);
	}
	lv.virDomainStatsRecordListFree(recs);
	*out = all;
	return 0;
}

/* The domain's XML as libvirt has it; the caller frees *xml. */
static int
xml_op(virDomainPtr dom, const char *what, const char *name, void *xml,
    struct sp_err *e)
{
	if ((*(char **)xml = lv.virDomainGetXMLDesc(dom, 0)) == NULL)
		return virt_err(e, what, name);
	return 0;
}

int
sp_virt_xml(struct sp_virt *v, const char *name, char **xml, struct sp_err *e)
{
	if (v->noded != NULL) {
		json_t *val;

		*xml = NULL;
		if (nd_call(v, nd_req("vm-xml", name), &val, e) == -1)
			return -1;
		if (!json_is_string(val) || (*xml = strdup(json_string_value(val)))
		    == NULL) {
			json_decref(val);
			return sp_err_set(e, SP_E_PROTOCOL, 0, "space-noded: an "
			    "odd answer");
		}
		json_decref(val);
		return 0;
	}
	*xml = NULL;
	return on_domain(v, "dumpxml", name, xml_op, xml, e);
}
