/*
 * test-virt: sp_virt without a VM.  Checks the domain XML a spec turns into
 * (channels, no network, escaping, refused specs) and the domain operations
 * against libvirt's test:///default driver, whose state every connection of
 * this process shares, so the test can look behind sp_virt's back.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libvirt/libvirt.h>

#include "sp.h"
#include "tap.h"

#define URI	"test:///default"

static struct sp_err e;

#define ok(cond, ...) tap_okf(sp_code_name(e.code), e.msg, (cond), __VA_ARGS__)

static struct sp_vm_spec
spec(const char *name)
{
	struct sp_vm_spec s = {
		.name = name,
		.memory_mib = 256,
		.vcpus = 1,
		.kernel = "/var/lib/space/templates/t@d/vmlinuz",
		.initrd = "/var/lib/space/templates/t@d/initrd.img",
		.cmdline = NULL,
		.disk = "/var/lib/space/sandboxes/abcdefghijkl/disk.raw",
		.chan_dir = "/run/space/abcdefghijkl",
		.nports = SP_PORTS_DEFAULT,
		.virt_type = "qemu",
	};

	return s;
}

static int
has(const char *xml, const char *needle)
{
	return xml != NULL && strstr(xml, needle) != NULL;
}

/* Expects the spec to be refused as bad input. */
static void
refused(const struct sp_vm_spec *s, const char *why)
{
	char *xml = NULL;
	int rc;

	sp_err_clear(&e);
	rc = sp_virt_domain_xml(s, &xml, &e);
	ok(rc == -1 && xml == NULL && e.code == SP_E_BAD_INPUT,
	    "xml refuses %s", why);
	free(xml);
}

static void
test_xml(void)
{
	struct sp_vm_spec s;
	char *xml = NULL, want[256], longdir[200];
	int i, all;

	s = spec("sp-abcdefghijkl");
	ok(sp_virt_domain_xml(&s, &xml, &e) == 0 && xml != NULL,
	    "xml of a plain spec");
	ok(has(xml, "<domain type='qemu' "
	    "xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>") &&
	    has(xml, "<name>sp-abcdefghijkl</name>") &&
	    has(xml, "machine='q35'") &&
	    has(xml, "<memory unit='MiB'>256</memory>") &&
	    has(xml, "<vcpu placement='static'>1</vcpu>"),
	    "xml has type, name, q35, memory and vcpus");
	ok(has(xml, "<kernel>/var/lib/space/templates/t@d/vmlinuz</kernel>") &&
	    has(xml, "<initrd>/var/lib/space/templates/t@d/initrd.img</initrd>") &&
	    has(xml, "<cmdline>" SP_VIRT_CMDLINE_TCG "</cmdline>"),
	    "xml boots the kernel directly, TCG's default cmdline");
	ok(has(xml, "<source file='/var/lib/space/sandboxes/abcdefghijkl/disk.raw'/>") &&
	    has(xml, "<target dev='vda' bus='virtio'/>") &&
	    has(xml, "type='raw'"),
	    "xml has the raw virtio disk vda");
	all = 1;
	for (i = 0; i < SP_PORTS_DEFAULT; i++) {
		snprintf(want, sizeof want, "<source mode='bind' "
		    "path='/run/space/abcdefghijkl/space.%d.sock'/>", i);
		all &= has(xml, want);
		snprintf(want, sizeof want,
		    "<target type='virtio' name='space.%d'/>", i);
		all &= has(xml, want);
	}
	ok(all && !has(xml, "space.8") &&
	    has(xml, "<controller type='virtio-serial' index='0' ports='10' "
	    "vectors='23'/>"),
	    "xml has channels space.0 to space.7 and no more, on a controller "
	    "of 10 ports with a vector per queue");
	ok(has(xml, "<qemu:arg value='socket,id=spqmp,server=on,wait=off,"
	    "path=/run/space/abcdefghijkl/" SP_QMP_SOCK "'/>") &&
	    has(xml, "<qemu:arg value='chardev=spqmp,mode=control'/>"),
	    "xml gives QEMU a monitor of our own in the run directory");
	ok(has(xml, "<qemu:arg value='-global'/>\n"
	    "    <qemu:arg value='virtio-serial-pci.ioeventfd=off'/>"),
	    "xml has the channel's kicks served by the vCPU thread (no "
	    "ioeventfd)");
	ok(has(xml, "<serial type='pty'>") &&
	    has(xml, "<log file='/run/space/abcdefghijkl/console.log'"),
	    "xml logs the serial console through virtlogd");
	ok(!has(xml, "<interface") && !has(xml, "<graphics") &&
	    !has(xml, "<video") &&
	    has(xml, "<controller type='usb' model='none'/>") &&
	    has(xml, "<memballoon model='none'/>"),
	    "xml has no network, graphics, usb or balloon");
	ok(has(xml, "<on_poweroff>destroy</on_poweroff>") &&
	    has(xml, "<on_reboot>destroy</on_reboot>") &&
	    has(xml, "<on_crash>destroy</on_crash>"),
	    "xml destroys the domain however the guest ends");
	free(xml);
	xml = NULL;

	s = spec("sp-abcdefghijkl");
	s.virt_type = "kvm";
	ok(sp_virt_domain_xml(&s, &xml, &e) == 0 &&
	    has(xml, "<cmdline>" SP_VIRT_CMDLINE "</cmdline>") &&
	    !has(xml, "mitigations=off"), "under kvm the default cmdline keeps "
	    "the kernel's defaults");
	free(xml);
	xml = NULL;
	s.cmdline = "console=ttyS0 a<b";
	s.nports = 2;
	ok(sp_virt_domain_xml(&s, &xml, &e) == 0 &&
	    has(xml, "<domain type='kvm' ") &&
	    has(xml, "<cmdline>console=ttyS0 a&lt;b</cmdline>") &&
	    has(xml, "name='space.1'") && !has(xml, "space.2") &&
	    has(xml, "ports='4' vectors='11'/>"),
	    "xml takes kvm, a cmdline and a port count");
	free(xml);
	xml = NULL;

	s = spec("sp-abcdefghijkl");
	ok(sp_virt_domain_xml(&s, &xml, &e) == 0 &&
	    has(xml, "<memoryBacking>\n    <nosharepages/>\n"
	    "  </memoryBacking>\n"), "xml keeps KSM off the guest's memory");
	free(xml);
	xml = NULL;

	s = spec("sp-abcdefghijkl");
	s.balloon = 1;
	s.mergeable = 1;
	ok(sp_virt_domain_xml(&s, &xml, &e) == 0 &&
	    has(xml, "<memballoon model='virtio' freePageReporting='on'/>") &&
	    !has(xml, "nosharepages"), "xml with a balloon has it report "
	    "freed pages; mergeable memory has no nosharepages");
	free(xml);
	xml = NULL;

	s = spec("sp-abcdefghijkl");
	s.shared_vectors = 1;
	ok(sp_virt_domain_xml(&s, &xml, &e) == 0 &&
	    has(xml, "<controller type='virtio-serial' index='0'/>") &&
	    !has(xml, "vectors="), "xml with shared vectors has libvirt's "
	    "default controller, as VMs saved before");
	free(xml);
	xml = NULL;

	s = spec("sp-abcdefghijkl");
	s.shared_vectors = s.no_egress = 1;
	ok(sp_virt_domain_xml(&s, &xml, &e) == 0 &&
	    has(xml, "name='space.7'") && !has(xml, SP_EGRESS_PORT_NAME) &&
	    !has(xml, SP_EGRESS_SOCK), "xml without egress has the ports and "
	    "no egress channel, as VMs saved before it");
	free(xml);
	xml = NULL;

	s = spec("sp-abcdefghijkl");
	s.disk = "/tmp/it's a \"disk\" & <more>.raw";
	ok(sp_virt_domain_xml(&s, &xml, &e) == 0 &&
	    has(xml, "<source file='/tmp/it&apos;s a &quot;disk&quot; "
	    "&amp; &lt;more&gt;.raw'/>") && !has(xml, "it's"),
	    "xml escapes quotes, ampersands and angle brackets");
	free(xml);
	xml = NULL;

	s = spec("sp-abcdefghijkl");
	s.kernel = "vmlinuz";
	refused(&s, "a relative kernel path");
	s = spec("sp-abcdefghijkl");
	s.disk = NULL;
	refused(&s, "a missing disk");
	s = spec("sp-abc\ndefghijkl");
	refused(&s, "a control character in the name");
	s = spec("sp-abcdefghijkl");
	s.cmdline = "console=ttyS0\tquiet";
	refused(&s, "a control character in the command line");
	s = spec("sp-abcdefghijkl");
	setenv("SPACE_VM_CMDLINE", "console=ttyS0\nquiet", 1);
	refused(&s, "a control character in SPACE_VM_CMDLINE");
	setenv("SPACE_VM_CMDLINE", "console=ttyS0 x=<&>", 1);
	ok(sp_virt_domain_xml(&s, &xml, &e) == 0 &&
	    has(xml, "<cmdline>console=ttyS0 x=&lt;&amp;&gt;</cmdline>"),
	    "SPACE_VM_CMDLINE is the default command line, escaped");
	free(xml);
	xml = NULL;
	unsetenv("SPACE_VM_CMDLINE");
	s = spec("sp-abcdefghijkl");
	s.nports = 0;
	refused(&s, "zero ports");
	s.nports = 32;
	refused(&s, "more ports than one controller has");
	s = spec("sp-abcdefghijkl");
	s.memory_mib = 0;
	refused(&s, "no memory");
	s = spec("sp-abcdefghijkl");
	s.vcpus = 0;
	refused(&s, "no vcpus");
	s = spec("sp-abcdefghijkl");
	s.virt_type = "xen";
	refused(&s, "an unknown virt type");
	memset(longdir, 'a', sizeof longdir - 1);
	longdir[0] = '/';
	longdir[sizeof longdir - 1] = '\0';
	s = spec("sp-abcdefghijkl");
	s.chan_dir = longdir;
	refused(&s, "a channel directory too long for a socket path");
	s = spec("sp-abcdefghijkl");
	s.chan_dir = "/run/space,x/abcdefghijkl";
	refused(&s, "a channel directory with a comma (QEMU's option syntax)");
}

/* The jail's part of the domain (sp_jail.c). */
static void
test_xml_jail(void)
{
	struct sp_vm_spec s;
	char *xml = NULL;

	s = spec("sp-abcdefghijkl");
	ok(sp_virt_domain_xml(&s, &xml, &e) == 0 && !has(xml, "<seclabel") &&
	    !has(xml, "<cputune") && !has(xml, "<blkiotune") &&
	    !has(xml, "<memtune"), "no jail: libvirt's user, no limits");
	free(xml);
	xml = NULL;
	s.jail_uid = s.jail_gid = 1900000042;
	s.cpu_quota_pct = 150;
	s.io_weight = 300;
	ok(sp_virt_domain_xml(&s, &xml, &e) == 0 &&
	    has(xml, "  <seclabel type='static' model='dac' relabel='yes'>\n"
	    "    <label>+1900000042:+1900000042</label>\n  </seclabel>\n") &&
	    has(xml, "<global_period>100000</global_period>") &&
	    has(xml, "<global_quota>150000</global_quota>") &&
	    has(xml, "<blkiotune>\n    <weight>300</weight>") &&
	    !has(xml, "<memtune") &&
	    strstr(xml, "</devices>") < strstr(xml, "<seclabel") &&
	    strstr(xml, "<seclabel") < strstr(xml, "<qemu:commandline>"),
	    "a jail: its own uid and gid (numeric), the CPU quota, the I/O "
	    "weight, in schema order; memory is the cgroup's, not memtune");
	free(xml);
	xml = NULL;
	s.jail_gid = 0;
	refused(&s, "a jail uid without a gid");
	s.jail_uid = s.jail_gid = 999;
	refused(&s, "a jail uid under 1000");
	s = spec("sp-abcdefghijkl");
	s.cpu_quota_pct = -1;
	refused(&s, "a negative CPU quota");
	s = spec("sp-abcdefghijkl");
	s.io_weight = 1001;
	refused(&s, "an I/O weight over 1000");
}

/* Whether sp_virt_xml_spec takes xml back as the spec it was written of. */
static int
round_trip(const struct sp_vm_spec *s)
{
	struct sp_vm_spec_text t;
	struct sp_vm_spec back;
	char *xml = NULL, *again = NULL;
	int rc;

	rc = sp_virt_domain_xml(s, &xml, &e) == 0 &&
	    sp_virt_xml_spec(xml, &back, &t, &e) == 0 &&
	    sp_virt_domain_xml(&back, &again, &e) == 0 &&
	    strcmp(xml, again) == 0 && back.memory_mib == s->memory_mib &&
	    back.vcpus == s->vcpus && back.nports == s->nports &&
	    back.jail_uid == s->jail_uid && back.cpu_quota_pct ==
	    s->cpu_quota_pct && back.io_weight == s->io_weight &&
	    back.no_egress == s->no_egress && back.shared_vectors ==
	    s->shared_vectors && back.balloon == s->balloon &&
	    back.mergeable == s->mergeable && strcmp(back.disk, s->disk) == 0 &&
	    strcmp(back.chan_dir, s->chan_dir) == 0;
	free(xml);
	free(again);
	return rc;
}

/* Expects sp_virt_xml_spec to refuse the XML of s with from replaced by to. */
static void
forged(const struct sp_vm_spec *s, const char *from, const char *to,
    const char *why)
{
	struct sp_vm_spec_text t;
	struct sp_vm_spec back;
	char *xml = NULL, *bad = NULL, *at;
	int rc = -2;

	if (sp_virt_domain_xml(s, &xml, &e) == 0 &&
	    (at = strstr(xml, from)) != NULL &&
	    asprintf(&bad, "%.*s%s%s", (int)(at - xml), xml, to,
	    at + strlen(from)) != -1) {
		sp_err_clear(&e);
		rc = sp_virt_xml_spec(bad, &back, &t, &e);
	} else
		bad = NULL;
	ok(rc == -1 && e.code == SP_E_BAD_INPUT, "xml spec refuses %s", why);
	free(xml);
	free(bad);
}

static void
test_xml_spec(void)
{
	struct sp_vm_spec s = spec("sp-abcdefghijkl");
	struct sp_vm_spec_text t;
	struct sp_vm_spec back;

	ok(round_trip(&s), "xml spec: a plain VM's XML reads back as its spec");
	s.uuid = "0123abcd-0123-4567-89ab-0123456789ab";
	s.jail_uid = s.jail_gid = 1900000042;
	s.cpu_quota_pct = 150;
	s.io_weight = 300;
	s.cmdline = "console=ttyS0 quiet";
	ok(round_trip(&s), "xml spec: uuid, jail, CPU quota, I/O weight and "
	    "a command line read back");
	s = spec("sp-abcdefghijkl");
	s.shared_vectors = 1;
	s.no_egress = 1;
	s.nports = 3;
	ok(round_trip(&s), "xml spec: an older layout (shared vectors, no "
	    "egress, 3 ports) reads back");
	s = spec("sp-abcdefghijkl");
	s.balloon = 1;
	s.mergeable = 1;
	ok(round_trip(&s), "xml spec: a balloon, and memory KSM may merge, "
	    "read back");
	{
		/* Volumes plugged when it was saved (space-noded takes such
		 * an XML to restore it): disks, serials, read-only, buses. */
		struct sp_vm_volume vols[2] = {
			{ "/r/volumes/aaaaaaaaaaaa/disk.raw", "aaaaaaaaaaaa",
			    "vdb", 0, 5 },
			{ "/r/volumes/bbbbbbbbbbbb/disk.raw", "bbbbbbbbbbbb",
			    "vdc", 1, 0 },
		};
		char *xml = NULL;

		s = spec("sp-abcdefghijkl");
		s.jail_uid = s.jail_gid = 1900000042;
		s.volumes = vols;
		s.nvolumes = 2;
		ok(round_trip(&s) && sp_virt_domain_xml(&s, &xml, &e) == 0 &&
		    sp_virt_xml_spec(xml, &back, &t, &e) == 0 &&
		    back.nvolumes == 2 && strcmp(back.volumes[0].disk,
		    vols[0].disk) == 0 && strcmp(back.volumes[1].serial,
		    "bbbbbbbbbbbb") == 0 && back.volumes[0].bus == 5 &&
		    !back.volumes[0].ro && back.volumes[1].ro &&
		    strcmp(back.volumes[1].target, "vdc") == 0,
		    "xml spec: two volumes' disks read back");
		free(xml);
		forged(&s, "<serial>aaaaaaaaaaaa</serial>",
		    "<serial>aaaaaaaaaaaa</serial><serial>x</serial>",
		    "a volume with two serials");
		forged(&s, "<serial>aaaaaaaaaaaa</serial>\n      <alias "
		    "name='ua-vol-aaaaaaaaaaaa'/>", "<serial>aaaaaaaaaaaaa"
		    "</serial>\n      <alias name='ua-vol-aaaaaaaaaaaaa'/>",
		    "a volume serial one letter longer than an id");
		forged(&s, "relabel='no'/>\n      </source>\n      <target dev='vdb'",
		    "relabel='yes'/>\n      </source>\n      <target dev='vdb'",
		    "a volume libvirt would relabel");
		forged(&s, "<target dev='vdb'", "<target dev='vda'",
		    "a volume named as the root disk");
	}
	s = spec("sp-abcdefghijkl");
	s.jail_uid = s.jail_gid = 1900000042;
	forged(&s, "<devices>\n", "<devices>\n    <hostdev mode='subsystem' "
	    "type='pci'/>\n", "a device more");
	forged(&s, "+1900000042:+1900000042", "+0:+0", "root's uid");
	forged(&s, "<seclabel type='static' model='dac' relabel='yes'>",
	    "<seclabel type='none'>", "another seclabel");
	forged(&s, "disk.raw'", "disk&#46;raw'", "an escape");
	forged(&s, "</domain>\n", "</domain>\n<domain/>\n", "a second domain");
	forged(&s, "ioeventfd=off'/>", "ioeventfd=off'/>\n    <qemu:arg "
	    "value='-S'/>", "a QEMU argument more");
	forged(&s, "<name>", "<name>a<!-- -->", "a comment");
	forged(&s, "<memory unit='MiB'>256", "<memory unit='KiB'>256",
	    "another unit");
	sp_err_clear(&e);
	ok(sp_virt_xml_spec("<domain type='qemu'/>", &back, &t, &e) == -1 &&
	    e.code == SP_E_BAD_INPUT, "xml spec refuses a domain without its "
	    "parts");
	ok(sp_virt_xml_spec("", &back, &t, &e) == -1 && e.code ==
	    SP_E_BAD_INPUT, "xml spec refuses nothing");
}

/* A libvirt save image's header (libvirt 9's layout) holding xml. */
static void
fake_image(const char *path, const char *xml)
{
	unsigned char hdr[16 + 19 * 4] = "LibvirtQemudSave";
	uint32_t v = 2, len = (uint32_t)strlen(xml) + 1;
	FILE *f;

	memcpy(hdr + 16, &v, 4);
	memcpy(hdr + 20, &len, 4);
	if ((f = fopen(path, "w")) == NULL ||
	    fwrite(hdr, sizeof hdr, 1, f) != 1 ||
	    fwrite(xml, len, 1, f) != 1 || fclose(f) != 0)
		abort();
}

/* An image's header with a controller (ctl) and n ports, egress or not,
 * a balloon or not. */
static void
fake_layout(const char *path, const char *ctl, int n, int egress, int balloon)
{
	char xml[8192];
	size_t k;
	int i;

	k = (size_t)snprintf(xml, sizeof xml, "<domain><devices>\n%s\n", ctl);
	for (i = 0; i < n; i++)
		k += (size_t)snprintf(xml + k, sizeof xml - k,
		    "    <channel type='unix'>\n      <target type='virtio' "
		    "name='space.%d'/>\n    </channel>\n", i);
	if (egress)
		k += (size_t)snprintf(xml + k, sizeof xml - k,
		    "    <channel type='unix'>\n      <target type='virtio' "
		    "name='" SP_EGRESS_PORT_NAME "'/>\n    </channel>\n");
	if (balloon)
		k += (size_t)snprintf(xml + k, sizeof xml - k,
		    "    <memballoon model='virtio' freePageReporting='on'>\n"
		    "    </memballoon>\n");
	snprintf(xml + k, sizeof xml - k, "</devices></domain>");
	fake_image(path, xml);
}

/* A template checkpoint directory dir whose mem.sav was booted under virt
 * type type with the command line cmdline (as libvirt writes it: escaped),
 * or none when cmdline is NULL, in this build's layout. */
static void
fake_ckpt(const char *dir, const char *type, const char *cmdline)
{
	char xml[8192], path[256];
	size_t k;
	int i;

	k = (size_t)snprintf(xml, sizeof xml, "<domain type='%s'>\n  <os>\n"
	    "    <type arch='x86_64' machine='pc-q35-7.2'>hvm</type>\n", type);
	if (cmdline != NULL)
		k += (size_t)snprintf(xml + k, sizeof xml - k,
		    "    <cmdline>%s</cmdline>\n", cmdline);
	k += (size_t)snprintf(xml + k, sizeof xml - k, "  </os>\n  <devices>\n"
	    "    <controller type='virtio-serial' index='0' ports='10' "
	    "vectors='23'/>\n");
	for (i = 0; i < SP_PORTS_DEFAULT; i++)
		k += (size_t)snprintf(xml + k, sizeof xml - k,
		    "    <target type='virtio' name='space.%d'/>\n", i);
	snprintf(xml + k, sizeof xml - k, "    <target type='virtio' name='"
	    SP_EGRESS_PORT_NAME "'/>\n    <memballoon model='virtio'/>\n"
	    "  </devices>\n</domain>\n");
	snprintf(path, sizeof path, "%s/mem.sav", dir);
	fake_image(path, xml);
}

static void
test_ckpt_cmdline(void)
{
	char dir[] = "/tmp/test-virt-ckpt.XXXXXX", path[256];

	if (mkdtemp(dir) == NULL)
		abort();
	unsetenv("SPACE_VM_CMDLINE");
	fake_ckpt(dir, "qemu", SP_VIRT_CMDLINE_TCG);
	ok(sp_ckpt_current(dir, &e) == 1, "a TCG checkpoint booted with "
	    "SP_VIRT_CMDLINE_TCG is current");
	fake_ckpt(dir, "qemu", SP_VIRT_CMDLINE);
	ok(sp_ckpt_current(dir, &e) == 0, "a TCG checkpoint booted with "
	    "another command line is stale");
	fake_ckpt(dir, "kvm", SP_VIRT_CMDLINE);
	ok(sp_ckpt_current(dir, &e) == 1, "a KVM checkpoint is held to "
	    "SP_VIRT_CMDLINE");
	fake_ckpt(dir, "qemu", SP_VIRT_CMDLINE_TCG " more=1");
	ok(sp_ckpt_current(dir, &e) == 0, "a command line longer than ours "
	    "is stale");
	fake_ckpt(dir, "qemu", "console=ttyS0");
	ok(sp_ckpt_current(dir, &e) == 0, "a shorter one too");
	fake_ckpt(dir, "qemu", NULL);
	ok(sp_ckpt_current(dir, &e) == 0, "a header without a command line "
	    "is stale");
	setenv("SPACE_VM_CMDLINE", "console=ttyS0 x=\"a<b\" y='&'", 1);
	ok(strcmp(sp_virt_boot_cmdline("qemu"), getenv("SPACE_VM_CMDLINE")) == 0 &&
	    strcmp(sp_virt_boot_cmdline("kvm"), getenv("SPACE_VM_CMDLINE")) == 0,
	    "SPACE_VM_CMDLINE is the command line of VMs booted, either type");
	fake_ckpt(dir, "qemu", "console=ttyS0 x=&quot;a&lt;b&quot; "
	    "y=&apos;&amp;&apos;");
	ok(sp_ckpt_current(dir, &e) == 1, "a header's escaped text is "
	    "compared unescaped");
	fake_ckpt(dir, "qemu", SP_VIRT_CMDLINE_TCG);
	ok(sp_ckpt_current(dir, &e) == 0, "with SPACE_VM_CMDLINE set, a "
	    "checkpoint booted with the default is stale");
	unsetenv("SPACE_VM_CMDLINE");
	snprintf(path, sizeof path, "%s/mem.sav", dir);
	unlink(path);
	ok(sp_ckpt_current(dir, &e) == -1, "a checkpoint without mem.sav "
	    "cannot be read");
	rmdir(dir);
}

static void
test_saved_layout(void)
{
	static const char shared[] = "    <controller type='virtio-serial' "
	    "index='0'>\n      <address type='pci' bus='0x02'/>\n"
	    "    </controller>\n    <controller type='pci' index='0' "
	    "model='pcie-root'/>";
	static const char own[] = "    <controller type='virtio-serial' "
	    "index='0' ports='10' vectors='23'>\n    </controller>";
	char path[] = "/tmp/test-virt-image.XXXXXX";
	struct sp_vm_layout l, boot;
	int fd;

	if ((fd = mkstemp(path)) == -1)
		abort();
	close(fd);
	fake_layout(path, shared, 8, 1, 1);
	ok(sp_ckpt_layout(path, &l, &e) == 0 && l.shared_vectors == 1 &&
	    l.nports == 8 && l.egress == 1 && sp_vm_layout_current(&l),
	    "an image saved with libvirt's default controller has shared "
	    "vectors, 8 ports and egress: current");
	fake_layout(path, own, 8, 1, 1);
	ok(sp_ckpt_layout(path, &l, &e) == 0 && l.shared_vectors == 0 &&
	    l.nports == 8 && l.egress == 1 && sp_vm_layout_current(&l),
	    "an image saved with ports and vectors has a vector per queue");
	fake_layout(path, "    <controller type='virtio-serial' index='0'/>\n"
	    "    <controller type='pci' vectors='4'/>", 8, 1, 1);
	ok(sp_ckpt_layout(path, &l, &e) == 0 && l.shared_vectors == 1,
	    "another controller's vectors are not the serial one's");
	fake_layout(path, shared, 8, 0, 1);
	ok(sp_ckpt_layout(path, &l, &e) == 0 && l.nports == 8 &&
	    l.egress == 0 && !sp_vm_layout_current(&l),
	    "an image saved without the egress port is read so, and is stale");
	fake_layout(path, own, 3, 1, 1);
	ok(sp_ckpt_layout(path, &l, &e) == 0 && l.nports == 3 &&
	    !sp_vm_layout_current(&l), "an image with 3 ports is read so, and "
	    "is stale");
	fake_layout(path, own, 8, 1, 0);
	ok(sp_ckpt_layout(path, &l, &e) == 0 && l.balloon == 0 &&
	    l.nports == 8 && l.egress == 1 && !sp_vm_layout_current(&l),
	    "an image saved without the balloon is read so, and is stale");
	fake_image(path, "<domain><devices><controller type='virtio-serial'/>"
	    "<target type='virtio' name='space.0'/>"
	    "<target type='virtio' name='space.2'/></devices></domain>");
	ok(sp_ckpt_layout(path, &l, &e) == -1 && e.code == SP_E_BAD_STATE,
	    "an image with a port missing in the middle is refused");
	fake_image(path, "<domain><devices><controller type='virtio-serial'/>"
	    "<target type='virtio' name='space.0'/>"
	    "<target type='virtio' name='space.0'/></devices></domain>");
	ok(sp_ckpt_layout(path, &l, &e) == -1 && e.code == SP_E_BAD_STATE,
	    "an image with a port twice is refused");
	fake_layout(path, shared, 0, 1, 1);
	ok(sp_ckpt_layout(path, &l, &e) == -1 && e.code == SP_E_BAD_STATE,
	    "an image without our ports is refused");
	fake_layout(path, "", 8, 1, 1);
	ok(sp_ckpt_layout(path, &l, &e) == -1 && e.code == SP_E_BAD_STATE,
	    "an image without a serial controller is refused");
	fd = open(path, O_WRONLY | O_TRUNC);
	if (fd == -1 || write(fd, "not an image at all, not at all, no", 35) != 35)
		abort();
	close(fd);
	ok(sp_ckpt_layout(path, &l, &e) == -1 && e.code == SP_E_BAD_STATE,
	    "a file that is no save image is refused");
	unlink(path);

	unsetenv("SPACE_VM_LAYOUT");
	sp_virt_boot_layout(&boot);
	ok(boot.nports == SP_PORTS_DEFAULT && boot.egress && boot.balloon &&
	    !boot.shared_vectors && sp_vm_layout_current(&boot),
	    "a VM booted gets this build's layout");
	setenv("SPACE_VM_LAYOUT", "shared", 1);
	sp_virt_boot_layout(&boot);
	ok(boot.egress && boot.shared_vectors && boot.balloon &&
	    sp_vm_layout_current(&boot),
	    "SPACE_VM_LAYOUT=shared: the old controller, still current");
	setenv("SPACE_VM_LAYOUT", "pre-balloon", 1);
	sp_virt_boot_layout(&boot);
	ok(boot.egress && !boot.shared_vectors && !boot.balloon &&
	    !sp_vm_layout_current(&boot),
	    "SPACE_VM_LAYOUT=pre-balloon: the layout before the balloon");
	setenv("SPACE_VM_LAYOUT", "pre-egress", 1);
	sp_virt_boot_layout(&boot);
	ok(!boot.egress && boot.shared_vectors && !boot.balloon &&
	    !sp_vm_layout_current(&boot),
	    "SPACE_VM_LAYOUT=pre-egress: the layout before the egress port");
	unsetenv("SPACE_VM_LAYOUT");
}

/* Runs fn with stderr sent to a file; returns how many bytes it wrote. */
static long
stderr_bytes(void (*fn)(void))
{
	char path[] = "/tmp/test-virt-stderr.XXXXXX";
	struct stat st;
	int fd, saved;

	if ((fd = mkstemp(path)) == -1)
		return -1;
	unlink(path);
	fflush(stderr);
	saved = dup(2);
	dup2(fd, 2);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	if (fstat(fd, &st) == -1)
		st.st_size = -1;
	close(fd);
	return (long)st.st_size;
}

static int bad_open_rc, bad_open_temp;
static enum sp_code bad_open_code;

static void
open_bad(void)
{
	struct sp_virt *v = NULL;

	sp_err_clear(&e);
	bad_open_rc = sp_virt_open(&v,
	    "qemu:///system?socket=/nonexistent/libvirt-sock", &e);
	bad_open_temp = e.temp;
	bad_open_code = e.code;
	sp_virt_close(v);
}

static struct sp_virt *quiet_v;
static int quiet_rc;

static void
pause_absent(void)
{
	sp_err_clear(&e);
	quiet_rc = sp_virt_pause(quiet_v, "sp-nosuchdomain", &e);
}

/* The domain's memory as the driver has it, through a connection of ours. */
static unsigned long
max_memory(const char *name)
{
	virConnectPtr c;
	virDomainPtr d;
	unsigned long kib = 0;

	if ((c = virConnectOpen(URI)) == NULL)
		return 0;
	if ((d = virDomainLookupByName(c, name)) != NULL) {
		kib = virDomainGetMaxMemory(d);
		virDomainFree(d);
	}
	virConnectClose(c);
	return kib;
}

/* The disk path as libvirt parsed it back out of our XML. */
static int
disk_round_trips(const char *name, const char *path)
{
	virConnectPtr c;
	virDomainPtr d;
	char *desc = NULL, *want = NULL;
	const char *p;
	size_t n;
	int rc = 0;

	if ((c = virConnectOpen(URI)) == NULL)
		return 0;
	if ((d = virDomainLookupByName(c, name)) != NULL) {
		desc = virDomainGetXMLDesc(d, 0);
		virDomainFree(d);
	}
	virConnectClose(c);
	/* libvirt writes the path back escaped its own way: compare the
	 * file attribute after undoing the five entities. */
	if (desc != NULL && (p = strstr(desc, "<source file=")) != NULL &&
	    (want = malloc(strlen(path) + 1)) != NULL) {
		char q = p[strlen("<source file=")];

		p += strlen("<source file=") + 1;
		for (n = 0; *p != '\0' && *p != q; n++) {
			if (strncmp(p, "&apos;", 6) == 0) {
				want[n] = '\'';
				p += 6;
			} else if (strncmp(p, "&quot;", 6) == 0) {
				want[n] = '"';
				p += 6;
			} else if (strncmp(p, "&amp;", 5) == 0) {
				want[n] = '&';
				p += 5;
			} else if (strncmp(p, "&lt;", 4) == 0) {
				want[n] = '<';
				p += 4;
			} else if (strncmp(p, "&gt;", 4) == 0) {
				want[n] = '>';
				p += 4;
			} else
				want[n] = *p++;
			if (n >= strlen(path))
				break;
		}
		want[n] = '\0';
		rc = strcmp(want, path) == 0;
	}
	free(want);
	free(desc);
	return rc;
}

static void
test_domain(void)
{
	struct sp_virt *v = NULL;
	struct sp_vm_spec s;
	char *xml = NULL, st[16], type[16], ver[128];
	char save[] = "/tmp/test-virt-save.XXXXXX";
	const char *odd = "/tmp/a 'quoted' & \"odd\" <path>.raw";
	const char *dom = "sp-abcdefghijkl";
	int fd;

	ok(stderr_bytes(open_bad) == 0, "a failed open prints nothing");
	ok(bad_open_rc == -1 && bad_open_code == SP_E_LIBVIRT &&
	    bad_open_temp == 1, "a failed open is a temporary libvirt error");

	if (!ok(sp_virt_open(&v, URI, &e) == 0 && v != NULL, "open " URI))
		return;
	ok(sp_virt_version(v, ver, sizeof ver, &e) == 0 &&
	    strncmp(ver, "libvirt ", 8) == 0 && strchr(ver, ',') != NULL,
	    "version '%s'", ver);
	ok(sp_virt_pick_type(v, "qemu", type, &e) == 0 &&
	    strcmp(type, "qemu") == 0, "pick qemu when asked");
	ok(sp_virt_pick_type(v, "kvm", type, &e) == 0 &&
	    strcmp(type, "kvm") == 0, "pick kvm when asked");
	ok(sp_virt_pick_type(v, "auto", type, &e) == 0 &&
	    (strcmp(type, "kvm") == 0 || strcmp(type, "qemu") == 0),
	    "pick auto gives '%s'", type);
	ok(sp_virt_pick_type(v, "vmware", type, &e) == -1 &&
	    e.code == SP_E_BAD_INPUT, "pick refuses an unknown type");

	quiet_v = v;
	ok(stderr_bytes(pause_absent) == 0, "a failed call prints nothing");
	ok(quiet_rc == -1 && e.code == SP_E_NOT_FOUND,
	    "pause of an absent domain is not-found");
	ok(sp_virt_state(v, dom, st, &e) == 0 && strcmp(st, "absent") == 0,
	    "state of an absent domain is absent");
	ok(sp_virt_destroy(v, dom, &e) == 0, "destroy of an absent domain");
	ok(sp_virt_undefine(v, dom, &e) == 0, "undefine of an absent domain");

	s = spec(dom);
	if (sp_virt_domain_xml(&s, &xml, &e) == -1)
		return;
	ok(sp_virt_define(v, xml, &e) == 0, "define");
	ok(sp_virt_state(v, dom, st, &e) == 0 && strcmp(st, "shutoff") == 0,
	    "state after define is shutoff");
	free(xml);
	xml = NULL;
	s.memory_mib = 512;
	s.disk = odd;
	if (sp_virt_domain_xml(&s, &xml, &e) == -1)
		return;
	ok(sp_virt_define(v, xml, &e) == 0 &&
	    max_memory(dom) == 512 * 1024, "define again replaces it");
	ok(disk_round_trips(dom, odd), "an odd disk path survives libvirt");
	free(xml);
	xml = NULL;

	ok(sp_virt_start(v, dom, &e) == 0 &&
	    sp_virt_state(v, dom, st, &e) == 0 && strcmp(st, "running") == 0,
	    "start makes it running");
	ok(sp_virt_start(v, dom, &e) == 0, "start of a running domain");
	ok(sp_virt_pause(v, dom, &e) == 0 &&
	    sp_virt_state(v, dom, st, &e) == 0 && strcmp(st, "paused") == 0,
	    "pause makes it paused");
	ok(sp_virt_pause(v, dom, &e) == 0, "pause of a paused domain");
	ok(sp_virt_resume(v, dom, &e) == 0 &&
	    sp_virt_state(v, dom, st, &e) == 0 && strcmp(st, "running") == 0,
	    "resume makes it running");
	ok(sp_virt_resume(v, dom, &e) == 0, "resume of a running domain");

	if ((fd = mkstemp(save)) != -1) {
		close(fd);
		unlink(save);
	}
	ok(sp_virt_save(v, dom, save, &e) == 0 &&
	    sp_virt_state(v, dom, st, &e) == 0 && strcmp(st, "shutoff") == 0,
	    "save stops it");
	ok(sp_virt_restore(v, save, NULL, dom, &e) == 0 &&
	    sp_virt_state(v, dom, st, &e) == 0 && strcmp(st, "running") == 0,
	    "restore brings it back running");
	unlink(save);
	ok(sp_virt_pause(v, dom, &e) == 0 && sp_virt_save(v, dom, save, &e) == 0 &&
	    sp_virt_restore(v, save, NULL, dom, &e) == 0 &&
	    sp_virt_state(v, dom, st, &e) == 0 && strcmp(st, "running") == 0,
	    "an image saved paused comes back running when named");
	unlink(save);

	ok(sp_virt_destroy(v, dom, &e) == 0 &&
	    sp_virt_state(v, dom, st, &e) == 0 && strcmp(st, "shutoff") == 0,
	    "destroy makes it shutoff");
	ok(sp_virt_destroy(v, dom, &e) == 0, "destroy of a stopped domain");
	ok(sp_virt_pause(v, dom, &e) == -1 && e.code == SP_E_BAD_STATE,
	    "pause of a stopped domain is bad-state");
	ok(sp_virt_resume(v, dom, &e) == -1 && e.code == SP_E_BAD_STATE,
	    "resume of a stopped domain is bad-state");
	ok(sp_virt_undefine(v, dom, &e) == 0 &&
	    sp_virt_state(v, dom, st, &e) == 0 && strcmp(st, "absent") == 0,
	    "undefine makes it absent");
	ok(sp_virt_undefine(v, dom, &e) == 0, "undefine again");
	ok(sp_virt_start(v, dom, &e) == -1 && e.code == SP_E_NOT_FOUND,
	    "start of an absent domain is not-found");
	sp_virt_close(v);
}

int
main(void)
{
	test_xml();
	test_xml_jail();
	test_xml_spec();
	test_saved_layout();
	test_ckpt_cmdline();
	test_domain();
	return tap_done();
}
