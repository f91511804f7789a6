/*
 * space-hostile: a hostile guest, for tests/hostile.bats.  Run inside a
 * sandbox, it puts the real daemon out of the way (so init cannot respawn
 * it) and takes every space.N port itself, answering the host on each with
 * a different misbehaviour.  The host must fail each call with a clear error
 * within its bounds, and not crash or leak.
 *
 *	port 0  a frame header claiming 2 GiB
 *	port 1  a truncated frame, then silence
 *	port 2  a hello whose JSON does not parse
 *	port 3  a flood of random bytes
 *	port 4  a proper hello, then half a frame and silence mid-call
 *	port 5  a proper hello, then an endless flood of valid output frames
 *	port 6  hellos with the wrong nonce, forever
 *	port 7  never a byte
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define SYS	"/sys/class/virtio-ports"

struct port {
	int n, fd;
};

static void
put_hdr(unsigned char *h, uint32_t len, uint8_t type, uint32_t stream)
{
	h[0] = len >> 24; h[1] = len >> 16; h[2] = len >> 8; h[3] = len;
	h[4] = type;
	h[5] = stream >> 24; h[6] = stream >> 16; h[7] = stream >> 8;
	h[8] = stream;
}

static void
send_frame(int fd, uint8_t type, uint32_t stream, const void *p, size_t n)
{
	unsigned char buf[9 + 65536];

	put_hdr(buf, (uint32_t)(5 + n), type, stream);
	memcpy(buf + 9, p, n);
	if (write(fd, buf, 9 + n) < 0)
		return;
}

/* Reads what the host sent; 0 while no host is connected (EOF). */
static ssize_t
host_bytes(int fd, char *buf, size_t n)
{
	ssize_t r = read(fd, buf, n - 1);

	if (r <= 0) {
		usleep(20000);
		return 0;
	}
	buf[r] = '\0';
	return r;
}

/* The nonce of the host's hello, copied out of its JSON by hand. */
static int
nonce(const char *buf, size_t n, char *out, size_t on)
{
	const char *p, *q;
	size_t i;

	for (i = 0; i + 9 < n; i++) {
		if (memcmp(buf + i, "\"nonce\":\"", 9) != 0)
			continue;
		p = buf + i + 9;
		if ((q = memchr(p, '"', n - (p - buf))) == NULL ||
		    (size_t)(q - p) >= on)
			return -1;
		memcpy(out, p, q - p);
		out[q - p] = '\0';
		return 0;
	}
	return -1;
}

static void
hello(int fd, const char *n)
{
	char j[512];

	snprintf(j, sizeof j, "{\"version\":1,\"boot_id\":\"hostile\","
	    "\"nonce\":\"%s\",\"ports\":8}", n);
	send_frame(fd, 1, 0, j, strlen(j));
}

static void *
serve(void *arg)
{
	struct port *p = arg;
	unsigned char junk[65536], hdr[9];
	char buf[8192], nc[256];
	ssize_t r;
	int i;

	for (;;) {
		if ((r = host_bytes(p->fd, buf, sizeof buf)) == 0)
			continue;
		switch (p->n) {
		case 0:
			put_hdr(hdr, 0x7fffffff, 4, 1);
			if (write(p->fd, hdr, sizeof hdr) < 0)
				break;
			break;
		case 1:
			put_hdr(hdr, 100, 1, 0);
			if (write(p->fd, hdr, sizeof hdr) < 0 ||
			    write(p->fd, "{\"ver", 5) < 0)
				break;
			break;
		case 2:
			send_frame(p->fd, 1, 0, "{not json", 9);
			break;
		case 3:
			for (i = 0; i < 400; i++) {
				arc4random_buf(junk, sizeof junk);
				if (write(p->fd, junk, sizeof junk) < 0)
					break;
			}
			break;
		case 4:
			if (nonce(buf, r, nc, sizeof nc) == 0) {
				hello(p->fd, nc);
				continue;
			}
			/* The request: half a frame, and nothing more. */
			put_hdr(hdr, 1000, 4, 1);
			if (write(p->fd, hdr, sizeof hdr) < 0 ||
			    write(p->fd, "partial", 7) < 0)
				break;
			break;
		case 5:
			if (nonce(buf, r, nc, sizeof nc) == 0) {
				hello(p->fd, nc);
				continue;
			}
			memset(junk, 'x', sizeof junk);
			for (;;) {
				uint32_t st = 1;

				send_frame(p->fd, 4, st, junk, sizeof junk - 9);
				/* Gone host: the write fails or blocks; a read
				 * of EOF says so. */
				if (read(p->fd, buf, 0) < 0)
					break;
			}
			break;
		case 6:
			hello(p->fd, "not-your-nonce");
			break;
		default:
			break;	/* silence */
		}
	}
	return NULL;
}

/* Opens /dev/vportNpM of the port whose name is space.N, making the node
 * when no udev did. */
static int
open_port(const char *dev, int *n)
{
	char path[512], name[64], node[256];
	unsigned int maj, min;
	FILE *f;
	int fd;

	snprintf(path, sizeof path, SYS "/%s/name", dev);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	if (fgets(name, sizeof name, f) == NULL || sscanf(name, "space.%d", n) != 1) {
		fclose(f);
		return -1;
	}
	fclose(f);
	snprintf(node, sizeof node, "/dev/%s", dev);
	snprintf(path, sizeof path, SYS "/%s/dev", dev);
	if (access(node, F_OK) == -1 && (f = fopen(path, "r")) != NULL) {
		if (fscanf(f, "%u:%u", &maj, &min) == 2)
			mknod(node, S_IFCHR | 0600, makedev(maj, min));
		fclose(f);
	}
	/* The port opens once: retry while the killed daemon lets go. */
	for (int i = 0; i < 200; i++) {
		if ((fd = open(node, O_RDWR)) >= 0)
			return fd;
		usleep(20000);
	}
	return -1;
}

int
main(void)
{
	static struct port ports[8];
	pthread_t t;
	struct dirent *d;
	DIR *dir;
	int n, fd, got = 0;

	signal(SIGPIPE, SIG_IGN);
	/* Let the call that started us end first. */
	sleep(1);
	rename("/sbin/space-daemon", "/sbin/space-daemon.off");
	if (system("kill -9 $(pidof space-daemon) 2>/dev/null") == -1)
		return 1;
	if ((dir = opendir(SYS)) == NULL)
		return 1;
	while ((d = readdir(dir)) != NULL) {
		if (d->d_name[0] == '.' || (fd = open_port(d->d_name, &n)) == -1 ||
		    n < 0 || n > 7)
			continue;
		ports[n].n = n;
		ports[n].fd = fd;
		pthread_create(&t, NULL, serve, &ports[n]);
		got++;
	}
	closedir(dir);
	fprintf(stderr, "space-hostile: serving %d ports\n", got);
	pause();
	return 0;
}
