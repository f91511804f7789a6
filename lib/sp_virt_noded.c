/*
 * sp_virt_noded: a libvirt call made through space-noded, for a process that
 * may not reach libvirt itself (it runs as the user space, or
 * SPACE_LIBVIRT_URI says "noded").  One connection a call: a request line
 * out, an answer line back ({"ok":true,"value":...} or the error's token,
 * message and whether it is worth a retry).  A call waits as long as
 * libvirt does: a restore under TCG takes seconds.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_vm.h"

#define ANSWER_MAX	(4 << 20)	/* a domain's XML is ~10 KiB */

/* noded went away or never came: worth a retry. */
static int
gone(struct sp_err *e, const char *sock, const char *what)
{
	sp_err_sys(e, SP_E_LIBVIRT, "space-noded at %s%s", sock, what);
	if (e != NULL)
		e->temp = 1;
	return -1;
}

static int
connect_to(const char *sock, struct sp_err *e)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(sock) >= sizeof sun.sun_path)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "socket path too long: "
		    "%s", sock);
	strcpy(sun.sun_path, sock);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return sp_err_sys(e, SP_E_IO, "socket");
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) == -1) {
		gone(e, sock, "");
		close(fd);
		return -1;
	}
	return fd;
}

/* The answer's line, NUL-terminated in *out (the caller frees it). */
static int
read_answer(int fd, const char *sock, char **out, struct sp_err *e)
{
	size_t n = 0, cap = 4096;
	char *buf = malloc(cap), *grown;
	ssize_t got;

	while (buf != NULL) {
		if (n + 1 == cap) {
			if (cap >= ANSWER_MAX ||
			    (grown = realloc(buf, cap * 2)) == NULL)
				break;
			buf = grown;
			cap *= 2;
		}
		got = read(fd, buf + n, cap - 1 - n);
		if (got == -1 && errno == EINTR)
			continue;
		if (got <= 0) {
			free(buf);
			return gone(e, sock, ": no answer");
		}
		n += (size_t)got;
		if (memchr(buf + n - (size_t)got, '\n', (size_t)got) != NULL) {
			buf[n] = '\0';
			*out = buf;
			return 0;
		}
	}
	free(buf);
	return sp_err_set(e, SP_E_PROTOCOL, 0, "space-noded at %s: an answer "
	    "over %d bytes", sock, ANSWER_MAX);
}

/* req's line out on a new connection, fd (when not -1) passed with its
 * first byte (SCM_RIGHTS). */
int
sp_noded_request(const char *sock, json_t *req, int fd, struct sp_err *e)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	char *line = NULL;
	int conn = -1;
	ssize_t sent;
	size_t len;

	if (req == NULL || (line = json_dumps(req, JSON_COMPACT)) == NULL) {
		sp_err_sys(e, SP_E_NOMEM, "space-noded request");
		goto out;
	}
	len = strlen(line);
	line[len] = '\n';		/* over the NUL: sent by length */
	if ((conn = connect_to(sock, e)) == -1)
		goto out;
	iov = (struct iovec){ line, fd >= 0 ? 1 : len + 1 };
	if (fd >= 0) {
		memset(&cm, 0, sizeof cm);
		m.msg_control = cm.b;
		m.msg_controllen = sizeof cm.b;
		cm.h.cmsg_level = SOL_SOCKET;
		cm.h.cmsg_type = SCM_RIGHTS;
		cm.h.cmsg_len = CMSG_LEN(sizeof fd);
		memcpy(CMSG_DATA(&cm.h), &fd, sizeof fd);
	}
	while ((sent = sendmsg(conn, &m, MSG_NOSIGNAL)) == -1 && errno == EINTR)
		;
	if (sent <= 0 || sp_write_all(conn, line + sent, len + 1 -
	    (size_t)sent) == -1) {
		gone(e, sock, "");
		close(conn);
		conn = -1;
	}
out:
	json_decref(req);
	free(line);
	return conn;
}

int
sp_noded_answer(int conn, const char *sock, json_t **value, struct sp_err *e)
{
	const char *token = NULL, *msg = "";
	enum sp_code code;
	json_t *a = NULL, *v;
	char *ans = NULL;
	int rc = -1, temp = 0;

	if (value != NULL)
		*value = NULL;
	if (read_answer(conn, sock, &ans, e) == -1)
		goto out;
	if ((a = json_loads(ans, 0, NULL)) == NULL || !json_is_object(a) ||
	    !json_is_boolean(json_object_get(a, "ok"))) {
		sp_err_set(e, SP_E_PROTOCOL, 0, "space-noded at %s: not an answer",
		    sock);
		goto out;
	}
	if (json_is_false(json_object_get(a, "ok"))) {
		json_unpack(a, "{s?s, s?s, s?b}", "error", &token, "msg", &msg,
		    "temp", &temp);
		if (token == NULL || sp_code_of(token, &code) == -1)
			code = SP_E_INTERNAL;
		sp_err_set(e, code, temp, "%s", msg);
		goto out;
	}
	if (value != NULL && (v = json_object_get(a, "value")) != NULL)
		*value = json_incref(v);
	rc = 0;
out:
	close(conn);
	json_decref(a);
	free(ans);
	return rc;
}

/* Whether a process goes through space-noded: here, beside the client,
 * so that what asks (sp_subvol.c, sp_ctx_virt.c) needs no context. */
int
sp_virt_uri_noded(const char *uri)
{
	return strcmp(uri, "noded") == 0 || strncmp(uri, "noded:", 6) == 0;
}

/* 1 when a space-noded accepts a connection at sock (one that is busy
 * too): a socket left by one that died is not it. */
static int
answers(const char *sock)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd, ok;

	if (strlen(sock) >= sizeof a.sun_path ||
	    (fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0)) == -1)
		return 0;
	memcpy(a.sun_path, sock, strlen(sock) + 1);
	ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 ||
	    errno == EAGAIN;
	close(fd);
	return ok;
}

/*
 * Through space-noded: when SPACE_LIBVIRT_URI says so; when the process is
 * not root and it is qemu:///system (only root may use that); and for root
 * when it is not set, the jail is on and the node's space-noded answers, so
 * that what a command does does not depend on who runs it.  Root acts
 * itself with SPACE_LIBVIRT_URI=qemu:///system, with SPACE_JAIL=off (whose
 * VMs space-noded refuses), and when no space-noded runs.
 */
int
sp_noded_for(const struct sp_conf *c, char sock[SP_PATH_MAX],
    struct sp_err *e)
{
	if (strncmp(c->libvirt_uri, "noded:", 6) == 0)
		return sp_path_fmt(sock, SP_PATH_MAX, e, "%s",
		    c->libvirt_uri + 6) == -1 ? -1 : 1;
	if (!sp_virt_uri_noded(c->libvirt_uri) &&
	    strcmp(c->libvirt_uri, "qemu:///system") != 0)
		return 0;
	if (sp_path_fmt(sock, SP_PATH_MAX, e, "%s/" SP_NODED_SOCK,
	    c->run) == -1)
		return -1;
	if (sp_virt_uri_noded(c->libvirt_uri) || geteuid() != 0)
		return 1;
	return c->libvirt_uri_default && c->lim.on && answers(sock);
}

int
sp_virt_noded_call(const char *sock, json_t *req, json_t **value,
    struct sp_err *e)
{
	int conn;

	if (value != NULL)
		*value = NULL;
	if ((conn = sp_noded_request(sock, req, -1, e)) == -1)
		return -1;
	return sp_noded_answer(conn, sock, value, e);
}
