/*
 * daemon-volume: a volume (space-volume) in the guest.  The host plugs the
 * volume's disk into a free PCIe port with the volume's id as its virtio
 * serial; {"op":"volume-mount","serial":ID,"path":P,"ro":B} waits until the
 * kernel has probed a disk of that serial, makes P (and its parents) and
 * mounts the disk's ext4 there, read-only when asked.
 * {"op":"volume-umount","path":P} unmounts it before the host unplugs the
 * disk: busy (a process has a file open there) when it cannot, and the
 * host then keeps the disk where it is.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"

#define SERIAL_MAX	20	/* virtio-blk's */
#define PROBE_WAIT_MS	10000	/* for the kernel to probe a plugged disk */

/* The block device whose serial is serial, made in /dev if missing, into
 * dev; 0 when found. */
static int
disk_of_serial(const char *serial, char *dev, size_t n)
{
	char p[PATH_MAX], s[SERIAL_MAX + 2];
	unsigned maj, min;
	struct dirent *d;
	DIR *dir;
	FILE *f;
	int found = 0;

	if ((dir = opendir("/sys/block")) == NULL)
		return -1;
	while (!found && (d = readdir(dir)) != NULL) {
		if (strncmp(d->d_name, "vd", 2) != 0)
			continue;
		snprintf(p, sizeof p, "/sys/block/%s/serial", d->d_name);
		if ((f = fopen(p, "re")) == NULL)
			continue;
		if (fgets(s, sizeof s, f) != NULL) {
			s[strcspn(s, "\n")] = '\0';
			found = strcmp(s, serial) == 0;
		}
		fclose(f);
		if (!found)
			continue;
		snprintf(p, sizeof p, "/sys/block/%s/dev", d->d_name);
		if ((f = fopen(p, "re")) == NULL || fscanf(f, "%u:%u", &maj,
		    &min) != 2)
			found = 0;
		if (f != NULL)
			fclose(f);
		if (snprintf(dev, n, "/dev/%.32s", d->d_name) >= (int)n)
			found = 0;
		if (found && access(dev, F_OK) == -1 &&
		    mknod(dev, S_IFBLK | 0600, makedev(maj, min)) == -1)
			found = 0;
	}
	closedir(dir);
	return found ? 0 : -1;
}

/* An absolute path, not /, without . or .. components. */
static int
path_ok(const char *path)
{
	const char *c;
	size_t len;

	if (path[0] != '/' || path[1] == '\0' || strlen(path) >= PATH_MAX / 2)
		return 0;
	for (c = path + 1; *c != '\0'; c += len + (c[len] == '/')) {
		len = strcspn(c, "/");
		if (len == 0 || (len == 1 && c[0] == '.') ||
		    (len == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
	}
	return 1;
}

static int
mkdirs(const char *path)
{
	char p[PATH_MAX];
	char *c;

	snprintf(p, sizeof p, "%s", path);
	for (c = p + 1; ; c++)
		if (*c == '/' || *c == '\0') {
			char end = *c;

			*c = '\0';
			if (mkdir(p, 0755) == -1 && errno != EEXIST)
				return -1;
			if ((*c = end) == '\0')
				return 0;
		}
}

int
sd_op_volume_mount(struct port *p, uint32_t stream, json_t *req)
{
	struct timespec pause = { 0, 20 * 1000000 };
	const char *serial, *path;
	char dev[64];
	int ro = 0, waited;

	if (json_unpack(req, "{s:s, s:s, s?b}", "serial", &serial, "path",
	    &path, "ro", &ro) == -1 || strlen(serial) > SERIAL_MAX ||
	    !path_ok(path))
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "volume-mount "
		    "needs a serial of up to %d bytes and an absolute path "
		    "other than /", SERIAL_MAX);
	for (waited = 0; disk_of_serial(serial, dev, sizeof dev) == -1;
	    waited += 20) {
		if (waited >= PROBE_WAIT_MS)
			return sd_send_error(p, stream, SP_E_NOT_FOUND, "no disk "
			    "of serial %s after %d ms", serial, PROBE_WAIT_MS);
		nanosleep(&pause, NULL);
	}
	if (mkdirs(path) == -1)
		return sd_send_error(p, stream, SP_E_IO, "mkdir %s: %s", path,
		    strerror(errno));
	if (mount(dev, path, "ext4", MS_NOATIME | MS_NODEV | MS_NOSUID |
	    (ro ? MS_RDONLY : 0), ro ? "noload" : NULL) == -1)
		return sd_send_error(p, stream, errno == EBUSY ? SP_E_BUSY :
		    SP_E_IO, "mount %s on %s: %s", dev, path, strerror(errno));
	return sd_send_json(p, SP_FR_EXIT, stream, json_pack("{s:i, s:s}",
	    "status", 0, "dev", dev));
}

int
sd_op_volume_umount(struct port *p, uint32_t stream, json_t *req)
{
	const char *path;

	if (json_unpack(req, "{s:s}", "path", &path) == -1 || !path_ok(path))
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "volume-umount "
		    "needs an absolute path other than /");
	if (umount2(path, UMOUNT_NOFOLLOW) == -1 && errno != EINVAL &&
	    errno != ENOENT)
		return sd_send_error(p, stream, errno == EBUSY ? SP_E_BUSY :
		    SP_E_IO, "umount %s: %s", path, strerror(errno));
	sync();
	return sd_send_json(p, SP_FR_EXIT, stream, json_pack("{s:i}",
	    "status", 0));
}
