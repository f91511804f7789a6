/*
 * test-boost: which cgroup file a claim's boost writes, found from a vCPU
 * thread's /proc/TID/cgroup and /proc/self/mountinfo (sp_boost_weight_path),
 * and the jail's memory cgroup found the same way (sp_cgroup_parse); what a
 * pod record or boost mark may name (sp_boost_file_ok).
 * tests/pool.bats boosts real VMs, on this machine's cgroup v1 cpu
 * controller; these are the layouts it cannot show: libvirt's under cgroup
 * v2, with and without systemd, and the texts a parser must not trip on.
 * The v1 case is this machine's own mountinfo and libvirt's naming here.
 */
#include <stdlib.h>
#include <string.h>

#include "sp.h"
#include "tap.h"

#define ID	"xd2ofxkc2zof"

/* This machine: v1 controllers each on its own mount, v2 beside them. */
static const char v1_mounts[] =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup "
    "rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
static const char v1_cgroup[] =
    "12:pids:/machine/qemu-157-sp-" ID ".libvirt-qemu\n"
    "11:cpuacct:/machine/qemu-157-sp-" ID ".libvirt-qemu/vcpu0\n"
    "10:cpu:/machine/qemu-157-sp-" ID ".libvirt-qemu/vcpu0\n"
    "1:name=systemd:/\n"
    "0::/\n";

/* cgroup v2 alone, as systemd mounts it. */
static const char v2_mounts[] =
    "24 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
    "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - "
    "cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n";

static int
found(const char *cgroup, const char *mounts, const char *id, char *out,
    size_t n)
{
	char *c = strdup(cgroup), *m = strdup(mounts);
	int rc;

	out[0] = '\0';
	rc = c != NULL && m != NULL ?
	    sp_boost_weight_path(c, m, id, out, n) : -1;
	free(c);
	free(m);
	return rc;
}

int
main(void)
{
	char out[SP_PATH_MAX], *longline;
	size_t n, at;

	tap_ok(found(v1_cgroup, v1_mounts, ID, out, sizeof out) == 0 &&
	    strcmp(out, "/sys/fs/cgroup/cpu/machine/qemu-157-sp-" ID
	    ".libvirt-qemu/cpu.shares") == 0,
	    "v1 (this machine): the cpu controller's, the domain's directory");
	printf("#   %s\n", out);

	/* libvirt under systemd: a scope whose name escapes '-'. */
	tap_ok(found("0::/machine.slice/machine-qemu\\x2d3\\x2dsp\\x2d" ID
	    ".scope/libvirt/vcpu0\n", v2_mounts, ID, out, sizeof out) == 0 &&
	    strcmp(out, "/sys/fs/cgroup/machine.slice/machine-qemu\\x2d3"
	    "\\x2dsp\\x2d" ID ".scope/cpu.weight") == 0,
	    "v2 under systemd: the machine scope's cpu.weight");
	printf("#   %s\n", out);

	/* libvirt without systemd on v2. */
	tap_ok(found("0::/machine/qemu-3-sp-" ID ".libvirt-qemu/vcpu0\n",
	    v2_mounts, ID, out, sizeof out) == 0 &&
	    strcmp(out, "/sys/fs/cgroup/machine/qemu-3-sp-" ID
	    ".libvirt-qemu/cpu.weight") == 0,
	    "v2 without systemd: the domain's directory's cpu.weight");

	/* The topmost directory that names the domain, not the deepest. */
	tap_ok(found("0::/machine/qemu-3-sp-" ID ".libvirt-qemu/sp-" ID
	    "/vcpu0\n", v2_mounts, ID, out, sizeof out) == 0 &&
	    strcmp(out, "/sys/fs/cgroup/machine/qemu-3-sp-" ID
	    ".libvirt-qemu/cpu.weight") == 0,
	    "a domain named at two levels: the topmost");

	/* Another sandbox's thread: nothing of this one's to write. */
	tap_ok(found(v1_cgroup, v1_mounts, "aaaaaaaaaaaa", out,
	    sizeof out) == -1, "another domain's thread: none");
	tap_ok(found("0::/user.slice/session-1.scope\n", v2_mounts, ID, out,
	    sizeof out) == -1, "a thread outside any domain: none");

	/* No cpu controller mounted (v1 without it, no v2). */
	tap_ok(found(v1_cgroup, "32 31 0:29 / /sys/fs/cgroup/memory rw - "
	    "cgroup cgroup rw,memory\n", ID, out, sizeof out) == -1,
	    "no cpu controller: none");

	/* A path that climbs: refused, whatever names it holds. */
	tap_ok(found("0::/machine/../../etc/sp-" ID "/vcpu0\n", v2_mounts, ID,
	    out, sizeof out) == -1, "a path with .. in it: none");

	/* Texts without a final newline, empty, or with lines that are not
	 * fields at all. */
	tap_ok(found("0::/machine/qemu-3-sp-" ID ".libvirt-qemu/vcpu0",
	    "35 24 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw", ID, out,
	    sizeof out) == 0, "no final newline: still read");
	tap_ok(found("", "", ID, out, sizeof out) == -1 &&
	    found("garbage\n::\n:\n\n", "garbage - \n - \n\n", ID, out,
	    sizeof out) == -1, "empty or garbled texts: none, no crash");

	/* A mount line far longer than a line buffer (an overlay's options),
	 * after the cgroup ones, whose tail looks like a cpu mount: read
	 * whole, it is the overlay's; cut into pieces, it would move the cpu
	 * controller to /evil. */
	n = 8192;
	if ((longline = malloc(sizeof v1_mounts + n + 128)) != NULL) {
		strcpy(longline, v1_mounts);
		strcat(longline, "50 24 0:50 / /var/lib/x rw - overlay overlay "
		    "rw,lowerdir=");
		at = strlen(longline);
		memset(longline + at, 'a', n);
		longline[at + n] = '\0';
		strcat(longline, " 2 3 / /evil rw - cgroup cgroup rw,cpu\n");
		tap_ok(found(v1_cgroup, longline, ID, out, sizeof out) == 0 &&
		    strcmp(out, "/sys/fs/cgroup/cpu/machine/qemu-157-sp-" ID
		    ".libvirt-qemu/cpu.shares") == 0,
		    "a mount line of 8 KiB: read whole, not as lines of its own");
		free(longline);
	} else
		tap_ok(0, "a mount line of 8 KiB (out of memory)");

	/* The jail's lookup: QEMU's memory cgroup, by the same rules. */
	{
		char c[] = "12:pids:/\n7:memory:/machine/qemu-157-sp-" ID
		    ".libvirt-qemu\n10:cpu,cpuacct:/machine/qemu-157-sp-" ID
		    ".libvirt-qemu/emulator\n0::/\n";
		char m[sizeof v1_mounts];
		struct sp_cgroup cg;

		memcpy(m, v1_mounts, sizeof m);
		tap_ok(sp_cgroup_parse(c, m, "memory", ID, &cg) == 0 &&
		    strcmp(cg.mount, "/sys/fs/cgroup/memory") == 0 &&
		    strcmp(cg.path, "/machine/qemu-157-sp-" ID
		    ".libvirt-qemu") == 0 && !cg.v2,
		    "v1 memory: its own hierarchy, the domain's directory");
	}
	{
		char c[] = "0::/machine/qemu-3-sp-" ID ".libvirt-qemu/emulator\n";
		char m[sizeof v2_mounts];
		struct sp_cgroup cg;

		memcpy(m, v2_mounts, sizeof m);
		tap_ok(sp_cgroup_parse(c, m, "memory", ID, &cg) == 0 &&
		    strcmp(cg.mount, "/sys/fs/cgroup") == 0 &&
		    strcmp(cg.path, "/machine/qemu-3-sp-" ID ".libvirt-qemu") ==
		    0 && cg.v2,
		    "v2 memory: QEMU's emulator cgroup's domain directory");
	}
	/* Controllers mounted together (cpu,cpuacct): found by either. */
	tap_ok(found("4:cpu,cpuacct:/machine/qemu-1-sp-" ID ".libvirt-qemu/"
	    "vcpu0\n", "30 23 0:27 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup "
	    "cgroup rw,cpu,cpuacct\n", ID, out, sizeof out) == 0 &&
	    strcmp(out, "/sys/fs/cgroup/cpu,cpuacct/machine/qemu-1-sp-" ID
	    ".libvirt-qemu/cpu.shares") == 0,
	    "cpu and cpuacct on one hierarchy: the cpu controller's");

	/* An out buffer too small for the path: refused, not cut. */
	tap_ok(found(v1_cgroup, v1_mounts, ID, out, 20) == -1,
	    "a path longer than the buffer: none");

	/* What a pod record or a boost mark may name (sp_boost_file_ok):
	 * both are space's to write, and a claim or a repair run as root
	 * writes the file they name. */
	tap_ok(sp_boost_file_ok("/sys/fs/cgroup/cpu/machine/qemu-157-sp-" ID
	    ".libvirt-qemu/cpu.shares", ID) &&
	    sp_boost_file_ok("/sys/fs/cgroup/machine.slice/machine-qemu\\x2d3"
	    "\\x2dsp\\x2d" ID ".scope/cpu.weight", ID),
	    "a weight file: the VM's cpu.shares or cpu.weight");
	tap_ok(!sp_boost_file_ok("/sys/fs/cgroup/cpu/machine/qemu-157-sp-"
	    "aaaaaaaaaaaa.libvirt-qemu/cpu.shares", ID) &&
	    !sp_boost_file_ok("/sys/fs/cgroup/cpu/machine/qemu-157-sp-" ID
	    ".libvirt-qemu/x/cpu.shares", ID) &&
	    !sp_boost_file_ok("/sys/fs/cgroup/cpu/sp-" ID, ID),
	    "another VM's, one below the domain's directory, no file: refused");
	tap_ok(!sp_boost_file_ok("/sys/fs/cgroup/memory/machine/qemu-1-sp-" ID
	    ".libvirt-qemu/memory.limit_in_bytes", ID) &&
	    !sp_boost_file_ok("/sys/fs/cgroup/cpu/machine/qemu-1-sp-" ID
	    ".libvirt-qemu/cgroup.procs", ID) &&
	    !sp_boost_file_ok("/sys/fs/cgroup/cpu/machine/qemu-1-sp-" ID
	    ".libvirt-qemu/cpu.shares.x", ID),
	    "another file of the VM's cgroup: refused");
	tap_ok(!sp_boost_file_ok("/etc/sp-" ID "/cpu.shares", ID) &&
	    !sp_boost_file_ok("/sys/fs/cgroup/../../etc/sp-" ID "/cpu.shares",
	    ID) && !sp_boost_file_ok("/sys/fs/cgroup/cpu/sp-" ID "/../"
	    "cpu.shares", ID) && !sp_boost_file_ok("", ID) &&
	    !sp_boost_file_ok("cpu.shares", ID),
	    "outside /sys/fs/cgroup, with .., empty, relative: refused");
	return tap_done();
}
