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
};
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

#endif
