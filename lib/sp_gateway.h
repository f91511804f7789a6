/*
 * sp_gateway.h: the network gateway's engine (design.md), what
 * space-gatewayd runs.  Included from sp_net.h.
 *
 * One gateway per node serves the egress port of every sandbox there: it
 * connects to RUN/ID/egress.sock, and each stream the guest opens is one
 * connection that it decides by the sandbox's policy (sp_egress), connects,
 * relays, and -- when a credential is bound to the host in the sandbox's
 * scope (sp_cred) -- reads as HTTP (terminating TLS with the node CA,
 * sp_tls) to add the credential on the way.  Every decision is one JSON
 * line in the decision log (sp_egress_log).
 */
#ifndef SP_GATEWAY_H
#define SP_GATEWAY_H

#include <netinet/in.h>

struct sp_err;
struct sp_conf;
struct sp_gateway;

/* Streams of all sandboxes at once; more are closed as they open. */
#define SP_GATEWAY_STREAMS_MAX	8192

struct sp_gateway_opts {
	const struct sp_conf *conf;	/* root, run, db */
	int log_fd;		/* the decision log, appended to */
	const char *upstream_ca;	/* NULL: the system trust store */
	const char *hosts;	/* a hosts(5) file names resolve from first,
				   or NULL */
	int connect_timeout_ms;	/* 0: 10 s */
	/* Wakes sandbox id when an inbound connection finds it paused (its
	 * guest does not answer): 0 when it runs now.  NULL: never. */
	int (*wake)(const char *id, void *arg);
	void *wake_arg;
};
/* What the gateway writes under RUN, in directories of the user space's
 * (it runs as space): what it serves (SP_PORT_STATUS) and each sandbox's
 * byte counts (egress-counts/ID.json). */
#define SP_GATEWAY_DIR		"gateway"
#define SP_GATEWAY_COUNTS_DIR	"egress-counts"
/* Makes both (0755), space's when run as root (space-init, and
 * space-gatewayd before it becomes space). */
int sp_gateway_run_dirs(const char *run, struct sp_err *e);
/* Loads the never-list and, when there is one, the node CA. */
int sp_gateway_new(struct sp_gateway **g, const struct sp_gateway_opts *o,
    struct sp_err *e);
/* Stops serving: closes every tunnel and waits for its streams. */
void sp_gateway_free(struct sp_gateway *g);
/* Connects to the egress socket of every sandbox under run that has none
 * yet; *attached (may be NULL) counts the new ones.  A socket that does
 * not take the connection is tried again next time. */
int sp_gateway_scan(struct sp_gateway *g, int *attached, struct sp_err *e);
/* Serves sock as sandbox id's egress port (what scan does for each). */
int sp_gateway_attach(struct sp_gateway *g, const char *id, const char *sock,
    struct sp_err *e);
/* The sandboxes served now and the streams open, for status lines. */
void sp_gateway_counts(struct sp_gateway *g, int *tunnels, int *streams);
/* Reloads the never-list (the node's addresses change). */
int sp_gateway_reload(struct sp_gateway *g, struct sp_err *e);
/* Listens on every inbound port of ROOT/ports and stops listening on those
 * gone (sp_gw_port.c); writes RUN/gateway/ports.json when what it serves
 * changed.
 * Each connection accepted is a stream the guest's daemon connects to
 * 127.0.0.1:PORT.  One thread calls it (space-gatewayd's loop). */
int sp_gateway_ports(struct sp_gateway *g, struct sp_err *e);

/*
 * Inbound ports (sp_port.c): ROOT/ports/ID/PORT holds the host address
 * "ADDR:PORT" that the guest's PORT is served on.
 */
#define SP_PORT_LISTEN_MAX	24	/* "255.255.255.255:65535" */
#define SP_PORTS_PER_SANDBOX	64
#define SP_PORT_STATUS		SP_GATEWAY_DIR "/ports.json"	/* under RUN */
struct sp_port {
	char id[SP_ID_LEN + 1];
	int port;			/* in the guest */
	char listen[SP_PORT_LISTEN_MAX];
};
/* A port number 1..65535, digits only, no leading zero; -1 when it is not. */
int sp_port_number(const char *s);
/* "ADDR:PORT", ADDR an IPv4 address, PORT 0..65535. */
int sp_port_listen_parse(const char *s, struct sockaddr_in *sa,
    struct sp_err *e);
void sp_port_listen_fmt(const struct sockaddr_in *sa,
    char out[SP_PORT_LISTEN_MAX]);
/* Writes (or replaces) one port's file. */
int sp_port_add(const char *root, const struct sp_port *p, struct sp_err *e);
int sp_port_remove(const char *root, const char *id, int port, int *removed,
    struct sp_err *e);
/* Every port of id goes (its removal). */
int sp_port_forget(const char *root, const char *id, struct sp_err *e);
/* The ports of id, or of every sandbox (id NULL), by id and port; files
 * that are not a port's are passed over.  Caller frees *out. */
int sp_port_list(const char *root, const char *id, struct sp_port **out,
    size_t *n, struct sp_err *e);
/* What the running gateway serves, RUN/ports.json: {"pid","ports":[{"id",
 * "port","listen","error"}]}; NULL when no gateway runs that wrote it. */
json_t *sp_port_status(const char *run);

#endif
