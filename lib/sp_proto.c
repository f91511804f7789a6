/*
 * sp_proto: the frame format between the host and the guest daemon.  This
 * file is linked into both the host library and the static guest daemon, so
 * it depends on nothing in lib/ but sp_err.  On the host every byte it
 * decodes comes from a hostile guest: the decoder is strict and bounded.
 */
#include <sys/socket.h>
#include <sys/uio.h>

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_vm.h"

/* One frame plus one feed: the most the decoder ever holds. */
#define DEC_BOUND	((size_t)SP_FRAME_HDR + SP_FRAME_MAX + SP_FRAME_CHUNK)
#define DEC_MIN		4096

static int
is_json_type(unsigned int type)
{
	return type == SP_FR_HELLO || type == SP_FR_REQ ||
	    type == SP_FR_EXIT || type == SP_FR_ERROR ||
	    type == SP_FR_OPEN || type == SP_FR_ANSWER ||
	    type == SP_FR_STARTED;
}

void
sp_frame_dec_init(struct sp_frame_dec *d)
{
	memset(d, 0, sizeof *d);
}

void
sp_frame_dec_release(struct sp_frame_dec *d)
{
	free(d->buf);
	memset(d, 0, sizeof *d);
}

int
sp_frame_dec_feed(struct sp_frame_dec *d, const void *p, size_t n,
    struct sp_err *e)
{
	size_t have, cap;
	unsigned char *nb;

	if (n == 0)
		return 0;
	have = d->len - d->off;
	if (n > DEC_BOUND - have)
		return sp_err_set(e, SP_E_PROTOCOL, 0,
		    "frame decoder overflow: %zu bytes buffered, %zu more fed",
		    have, n);
	/* Compact first, so that the buffer never holds consumed bytes. */
	if (d->off > 0) {
		if (have > 0)
			memmove(d->buf, d->buf + d->off, have);
		d->off = 0;
		d->len = have;
	}
	if (have + n > d->cap) {
		cap = d->cap < DEC_MIN ? DEC_MIN : d->cap;
		while (cap < have + n)
			cap *= 2;
		if (cap > DEC_BOUND)
			cap = DEC_BOUND;
		if ((nb = realloc(d->buf, cap)) == NULL)
			return sp_err_sys(e, SP_E_NOMEM, "frame decoder");
		d->buf = nb;
		d->cap = cap;
	}
	memcpy(d->buf + d->len, p, n);
	d->len += n;
	return 0;
}

int
sp_frame_dec_next(struct sp_frame_dec *d, struct sp_frame *f,
    struct sp_err *e)
{
	const unsigned char *h;
	size_t have = d->len - d->off;
	uint32_t flen, plen;

	/* Each field is checked as soon as it arrives, so that a bad header
	 * fails before its payload is waited for. */
	if (have < 4)
		return 0;
	h = d->buf + d->off;
	flen = sp_be32_get(h);
	if (flen < 5)
		return sp_err_set(e, SP_E_PROTOCOL, 0,
		    "frame length %u is shorter than a header", flen);
	plen = flen - 5;
	if (plen > SP_FRAME_MAX)
		return sp_err_set(e, SP_E_PROTOCOL, 0,
		    "frame of %u bytes is over the %d byte limit", plen,
		    SP_FRAME_MAX);
	if (have < 5)
		return 0;
	if (h[4] == 0 || h[4] > SP_FR__MAX)
		return sp_err_set(e, SP_E_PROTOCOL, 0, "unknown frame type %u",
		    h[4]);
	if (is_json_type(h[4]) && plen > SP_JSON_MAX)
		return sp_err_set(e, SP_E_PROTOCOL, 0,
		    "JSON frame of %u bytes is over the %d byte limit", plen,
		    SP_JSON_MAX);
	if (have < (size_t)4 + flen)
		return 0;
	f->type = h[4];
	f->stream = sp_be32_get(h + 5);
	f->len = plen;
	f->data = d->buf + d->off + SP_FRAME_HDR;
	d->off += (size_t)4 + flen;
	return 1;
}

void
sp_frame_hdr(unsigned char h[SP_FRAME_HDR], uint8_t type, uint32_t stream,
    size_t n)
{
	sp_be32_put(h, (uint32_t)(n + 5));
	h[4] = type;
	sp_be32_put(h + 5, stream);
}

/* Writes the iovecs out whole.  Sockets get MSG_NOSIGNAL so that a vanished
 * peer is an EPIPE error and not a signal; other descriptors (the guest's
 * virtio port) take writev.  A nonblocking descriptor is waited on. */
static int
write_iov(int fd, struct iovec *iov, int iovcnt)
{
	struct msghdr mh;
	struct pollfd pfd;
	ssize_t w;
	int sock = 1;

	while (iovcnt > 0) {
		if (iov->iov_len == 0) {
			iov++;
			iovcnt--;
			continue;
		}
		if (sock) {
			memset(&mh, 0, sizeof mh);
			mh.msg_iov = iov;
			mh.msg_iovlen = iovcnt;
			w = sendmsg(fd, &mh, MSG_NOSIGNAL);
			if (w == -1 && errno == ENOTSOCK) {
				sock = 0;
				continue;
			}
		} else
			w = writev(fd, iov, iovcnt);
		if (w == -1) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				pfd.fd = fd;
				pfd.events = POLLOUT;
				if (poll(&pfd, 1, -1) == -1 && errno != EINTR)
					return -1;
				continue;
			}
			return -1;
		}
		while (w > 0 && iovcnt > 0) {
			if ((size_t)w >= iov->iov_len) {
				w -= iov->iov_len;
				iov++;
				iovcnt--;
			} else {
				iov->iov_base = (char *)iov->iov_base + w;
				iov->iov_len -= w;
				w = 0;
			}
		}
	}
	return 0;
}

int
sp_frame_write(int fd, uint8_t type, uint32_t stream, const void *p,
    size_t n, struct sp_err *e)
{
	unsigned char h[SP_FRAME_HDR];
	struct iovec iov[2];

	if (type == 0 || type > SP_FR__MAX)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "unknown frame type %u",
		    type);
	if (n > SP_FRAME_MAX || (is_json_type(type) && n > SP_JSON_MAX))
		return sp_err_set(e, SP_E_BAD_INPUT, 0,
		    "frame of %zu bytes is over the limit", n);
	sp_frame_hdr(h, type, stream, n);
	iov[0].iov_base = h;
	iov[0].iov_len = sizeof h;
	iov[1].iov_base = (void *)p;
	iov[1].iov_len = n;
	if (write_iov(fd, iov, 2) == -1)
		return sp_err_sys(e, SP_E_IO, "frame write");
	return 0;
}

int
sp_frame_write_json(int fd, uint8_t type, uint32_t stream, const json_t *j,
    struct sp_err *e)
{
	char *s;
	int rc;

	if ((s = json_dumps(j, JSON_COMPACT)) == NULL)
		return sp_err_set(e, SP_E_NOMEM, 1, "cannot encode a JSON frame");
	rc = sp_frame_write(fd, type, stream, s, strlen(s), e);
	free(s);
	return rc;
}

/* Copies jansson's message keeping printable ASCII only: it may quote the
 * guest's bytes, and our messages must stay clean text. */
static void
clean_text(char *dst, size_t n, const char *src)
{
	size_t i = 0;

	for (; *src != '\0' && i + 1 < n; src++)
		dst[i++] = (*src >= 0x20 && *src < 0x7f) ? *src : '?';
	dst[i] = '\0';
}

int
sp_frame_json(const struct sp_frame *f, json_t **out, struct sp_err *e)
{
	json_error_t jerr;
	json_t *j;
	char why[JSON_ERROR_TEXT_LENGTH];

	*out = NULL;
	if (f->len > SP_JSON_MAX)
		return sp_err_set(e, SP_E_PROTOCOL, 0,
		    "JSON frame of %u bytes is over the %d byte limit", f->len,
		    SP_JSON_MAX);
	/* Without JSON_DECODE_ANY, JSON_ALLOW_NUL or JSON_DISABLE_EOF_CHECK
	 * jansson takes exactly one array or object of valid UTF-8 with no
	 * NUL and nothing after it; nesting is bounded by the library. */
	j = json_loadb((const char *)f->data, f->len, JSON_REJECT_DUPLICATES,
	    &jerr);
	if (j == NULL) {
		clean_text(why, sizeof why, jerr.text);
		return sp_err_set(e, SP_E_PROTOCOL, 0,
		    "bad JSON in frame type %u at byte %d: %s", f->type,
		    jerr.position, why);
	}
	if (!json_is_object(j)) {
		json_decref(j);
		return sp_err_set(e, SP_E_PROTOCOL, 0,
		    "JSON in frame type %u is not an object", f->type);
	}
	*out = j;
	return 0;
}
