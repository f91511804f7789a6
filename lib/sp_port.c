/*
 * sp_port: a sandbox's inbound ports (space-port, design.md "Inbound
 * ports"), as the node keeps them: one file per port,
 * ROOT/ports/ID/PORT, holding the host address it is served on
 * ("ADDR:PORT\n").  space-port writes them; space-gatewayd reads them each
 * round, listens, and writes what it serves to RUN/gateway/ports.json.  A
 * sandbox's ports are this node's: they go with the sandbox's removal and
 * do not follow it to another node.
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_net.h"

int
sp_port_listen_parse(const char *s, struct sockaddr_in *sa, struct sp_err *e)
{
	char addr[INET_ADDRSTRLEN];
	const char *colon;
	char *end;
	long port;

	memset(sa, 0, sizeof *sa);
	sa->sin_family = AF_INET;
	colon = s != NULL ? strrchr(s, ':') : NULL;
	if (colon == NULL || colon == s ||
	    (size_t)(colon - s) >= sizeof addr)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "listen address '%.64s' "
		    "is not ADDR:PORT (an IPv4 address)", s ? s : "");
	memcpy(addr, s, (size_t)(colon - s));
	addr[colon - s] = '\0';
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || errno != 0 ||
	    port < 0 || port > 65535)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "listen port '%.16s' is "
		    "not 0..65535", colon + 1);
	if (inet_pton(AF_INET, addr, &sa->sin_addr) != 1)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "listen address '%s' is "
		    "not an IPv4 address", addr);
	sa->sin_port = htons((uint16_t)port);
	return 0;
}

int
sp_port_number(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	return s[0] < '1' || s[0] > '9' || *end != '\0' || errno != 0 ||
	    v > 65535 ? -1 : (int)v;
}

void
sp_port_listen_fmt(const struct sockaddr_in *sa, char out[SP_PORT_LISTEN_MAX])
{
	char addr[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &sa->sin_addr, addr, sizeof addr);
	snprintf(out, SP_PORT_LISTEN_MAX, "%s:%u", addr,
	    (unsigned)ntohs(sa->sin_port));
}

static int
port_path(const char *root, const char *id, int port, char *out, size_t n,
    struct sp_err *e)
{
	if (sp_id_check(id, e) == -1)
		return -1;
	if (port < 1 || port > 65535)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "port %d is not 1..65535",
		    port);
	return sp_path_fmt(out, n, e, "%s/ports/%s/%d", root, id, port);
}

int
sp_port_add(const char *root, const struct sp_port *p, struct sp_err *e)
{
	char path[SP_PATH_MAX], dir[SP_PATH_MAX], tmp[SP_PATH_MAX + 8];
	int fd, ok;

	if (port_path(root, p->id, p->port, path, sizeof path, e) == -1 ||
	    sp_path_fmt(dir, sizeof dir, e, "%s/ports/%s", root, p->id) == -1 ||
	    sp_path_fmt(tmp, sizeof tmp, e, "%s.new", path) == -1 ||
	    sp_path_mkdirs(dir, 0755, e) == -1)
		return -1;
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644)) == -1)
		return sp_err_sys(e, SP_E_IO, "create %s", tmp);
	ok = sp_path_adopt(fd, tmp, e) == 0 &&
	    dprintf(fd, "%s\n", p->listen) > 0 && fsync(fd) == 0;
	if (close(fd) == -1 || !ok || rename(tmp, path) == -1) {
		unlink(tmp);
		return sp_err_sys(e, SP_E_IO, "write %s", path);
	}
	return 0;
}

int
sp_port_remove(const char *root, const char *id, int port, int *removed,
    struct sp_err *e)
{
	char path[SP_PATH_MAX];

	*removed = 0;
	if (port_path(root, id, port, path, sizeof path, e) == -1)
		return -1;
	if (unlink(path) == -1)
		return errno == ENOENT ? 0 :
		    sp_err_sys(e, SP_E_IO, "remove %s", path);
	*removed = 1;
	return 0;
}

int
sp_port_forget(const char *root, const char *id, struct sp_err *e)
{
	char dir[SP_PATH_MAX];

	if (sp_id_check(id, e) == -1 ||
	    sp_path_fmt(dir, sizeof dir, e, "%s/ports/%s", root, id) == -1)
		return -1;
	return sp_path_remove_tree(dir, e);
}

/* One file's port, when it is one: its name a port, its text an address. */
static int
port_read(const char *dir, const char *id, const char *name,
    struct sp_port *p)
{
	char path[SP_PATH_MAX], text[SP_PORT_LISTEN_MAX + 2];
	struct sockaddr_in sa;
	struct sp_err e;
	ssize_t n;
	int fd, port;

	if ((port = sp_port_number(name)) == -1 ||
	    snprintf(path, sizeof path, "%s/%s", dir, name) >=
	    (int)sizeof path ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return -1;
	n = read(fd, text, sizeof text - 1);
	close(fd);
	if (n <= 1 || text[n - 1] != '\n')
		return -1;
	text[n - 1] = '\0';
	if (sp_port_listen_parse(text, &sa, &e) == -1)
		return -1;
	snprintf(p->id, sizeof p->id, "%s", id);
	p->port = port;
	sp_port_listen_fmt(&sa, p->listen);
	return 0;
}

static int
list_one(const char *root, const char *id, struct sp_port **out, size_t *n,
    size_t *cap, struct sp_err *e)
{
	char dir[SP_PATH_MAX];
	struct dirent *de;
	struct sp_port p, *np;
	DIR *d;

	if (sp_path_fmt(dir, sizeof dir, e, "%s/ports/%s", root, id) == -1)
		return -1;
	if ((d = opendir(dir)) == NULL)
		return errno == ENOENT || errno == ENOTDIR ? 0 :
		    sp_err_sys(e, SP_E_IO, "read %s", dir);
	while ((de = readdir(d)) != NULL) {
		if (port_read(dir, id, de->d_name, &p) == -1)
			continue;
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 16;
			if ((np = realloc(*out, *cap * sizeof **out)) == NULL) {
				closedir(d);
				return sp_err_sys(e, SP_E_NOMEM, "ports");
			}
			*out = np;
		}
		(*out)[(*n)++] = p;
	}
	closedir(d);
	return 0;
}

static int
port_cmp(const void *a, const void *b)
{
	const struct sp_port *x = a, *y = b;
	int c = strcmp(x->id, y->id);

	return c != 0 ? c : x->port - y->port;
}

int
sp_port_list(const char *root, const char *id, struct sp_port **out,
    size_t *n, struct sp_err *e)
{
	char dir[SP_PATH_MAX];
	struct dirent *de;
	struct sp_err ignored;
	size_t cap = 0;
	DIR *d;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (id != NULL)
		rc = sp_id_check(id, e) == -1 ? -1 :
		    list_one(root, id, out, n, &cap, e);
	else if (sp_path_fmt(dir, sizeof dir, e, "%s/ports", root) == -1)
		rc = -1;
	else if ((d = opendir(dir)) == NULL)
		rc = errno == ENOENT ? 0 : sp_err_sys(e, SP_E_IO, "read %s", dir);
	else {
		while (rc == 0 && (de = readdir(d)) != NULL)
			if (sp_id_check(de->d_name, &ignored) == 0)
				rc = list_one(root, de->d_name, out, n, &cap, e);
		closedir(d);
	}
	if (rc == -1) {
		free(*out);
		*out = NULL;
		*n = 0;
		return -1;
	}
	if (*n > 1)
		qsort(*out, *n, sizeof **out, port_cmp);
	return 0;
}

json_t *
sp_port_status(const char *run)
{
	char path[SP_PATH_MAX];
	json_t *j, *pid;
	struct sp_err e;

	if (sp_path_fmt(path, sizeof path, &e, "%s/" SP_PORT_STATUS, run) == -1 ||
	    (j = json_load_file(path, JSON_REJECT_DUPLICATES, NULL)) == NULL)
		return NULL;
	pid = json_object_get(j, "pid");
	if (!json_is_integer(pid) || json_integer_value(pid) < 1 ||
	    json_integer_value(pid) > (1 << 22) ||
	    (kill((pid_t)json_integer_value(pid), 0) == -1 && errno == ESRCH) ||
	    !json_is_array(json_object_get(j, "ports"))) {
		json_decref(j);
		return NULL;
	}
	return j;
}
