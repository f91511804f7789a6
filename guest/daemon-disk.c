/*
 * daemon-disk: the root filesystem grows into its disk.  A sandbox created
 * with a disk larger than its template's (space-create --disk-gb) gets its
 * disk resized by the host (libvirt's block resize, which tells the guest
 * kernel through virtio); {"op":"disk-grow","bytes":N} then waits until the
 * kernel sees N bytes (its config-change work runs on its own) and grows
 * the mounted ext4 root online to fill it.  The filesystem is then the
 * sandbox's quota: a guest that fills it gets ENOSPC from its own kernel.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"

/* The kernel's ABI (fs/ext4/ext4.h), not in its exported headers. */
#define EXT4_IOC_RESIZE_FS	_IOW('f', 16, uint64_t)
#define EXT4_MAGIC		0xEF53
#define ROOT_DISK_SIZE		"/sys/block/vda/size"	/* 512-byte sectors */
#define GROW_WAIT_MS		5000

static int64_t
disk_bytes(void)
{
	unsigned long long sectors;
	FILE *f;
	int n;

	if ((f = fopen(ROOT_DISK_SIZE, "re")) == NULL)
		return -1;
	n = fscanf(f, "%llu", &sectors);
	fclose(f);
	return n == 1 ? (int64_t)(sectors * 512) : -1;
}

int
sd_op_disk_grow(struct port *p, uint32_t stream, json_t *req)
{
	struct timespec pause = { 0, 20 * 1000000 };
	json_int_t want;
	struct statfs fs;
	uint64_t blocks;
	int64_t have = -1;
	int fd, waited;

	if (json_unpack(req, "{s:I}", "bytes", &want) == -1 || want <= 0)
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "disk-grow needs "
		    "bytes > 0");
	for (waited = 0; waited <= GROW_WAIT_MS; waited += 20) {
		if ((have = disk_bytes()) >= want)
			break;
		nanosleep(&pause, NULL);
	}
	if (have < want)
		return sd_send_error(p, stream, SP_E_BAD_STATE, "the root disk "
		    "has %lld bytes, not %lld, after %d ms", (long long)have,
		    (long long)want, GROW_WAIT_MS);
	if ((fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return sd_send_error(p, stream, SP_E_IO, "/: %s", strerror(errno));
	if (fstatfs(fd, &fs) == -1 || fs.f_type != EXT4_MAGIC) {
		close(fd);
		return sd_send_error(p, stream, SP_E_BAD_STATE, "the root is not "
		    "ext4: it cannot grow online");
	}
	/* The whole disk; the kernel does nothing when it is that already. */
	blocks = (uint64_t)want / (uint64_t)fs.f_bsize;
	if (ioctl(fd, EXT4_IOC_RESIZE_FS, &blocks) == -1) {
		close(fd);
		return sd_send_error(p, stream, SP_E_IO, "growing / to %llu "
		    "blocks: %s", (unsigned long long)blocks, strerror(errno));
	}
	close(fd);
	return sd_send_json(p, SP_FR_EXIT, stream, json_pack("{s:i, s:I}",
	    "status", 0, "bytes", (json_int_t)want));
}
