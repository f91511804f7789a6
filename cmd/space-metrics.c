/*
 * space-metrics: what sandboxes use, as JSON lines: CPU time, memory, disk
 * written, read and held, the calls their daemons served; from libvirt's
 * counters of every domain (one call), btrfs and each guest's daemon.  With
 * no id, every sandbox of this node and a line of the node's totals.
 * --prom FILE writes the same as a Prometheus text file, atomically, for
 * node_exporter's textfile collector.  --storage adds what the node's
 * snapshots hold and what the object store holds, which takes a walk of
 * both (not for every scrape of a large node).
 */
#include <sys/stat.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp.h"

/* The Prometheus families, each kept whole: the format wants a family's
 * samples together, after its HELP and TYPE. */
enum { F_CPU, F_MEM, F_MEM_MAX, F_WRITTEN, F_READ, F_EXCL, F_CALLS,
	F_EGRESS_SENT, F_EGRESS_RECEIVED,
	F_STATES, F_PODS, F_SNAPS, F_SNAP_BYTES, F_STORE_BYTES, F_STORE_OBJS,
	F__COUNT };
static const struct {
	const char *name, *type, *help;
} fam[F__COUNT] = {
	{ "space_sandbox_cpu_seconds_total", "counter",
	    "CPU time of the sandbox's VM since it was started or restored." },
	{ "space_sandbox_memory_bytes", "gauge",
	    "Memory the sandbox's VM holds on the host (its resident set)." },
	{ "space_sandbox_memory_max_bytes", "gauge",
	    "The sandbox's guest memory." },
	{ "space_sandbox_disk_written_bytes_total", "counter",
	    "Bytes the guest wrote to its disks since its VM was started." },
	{ "space_sandbox_disk_read_bytes_total", "counter",
	    "Bytes the guest read from its disks since its VM was started." },
	{ "space_sandbox_disk_exclusive_bytes", "gauge",
	    "Bytes of the sandbox's disk that no template or snapshot shares." },
	{ "space_sandbox_calls_total", "counter",
	    "Calls the guest's daemon says it served (its own count)." },
	{ "space_sandbox_egress_sent_bytes_total", "counter",
	    "Bytes the gateway sent upstream for the sandbox since its VM "
	    "started." },
	{ "space_sandbox_egress_received_bytes_total", "counter",
	    "Bytes the gateway received from upstream for the sandbox since its "
	    "VM started." },
	{ "space_node_sandboxes", "gauge",
	    "Sandboxes of this node in each state." },
	{ "space_node_pods", "gauge",
	    "Warm pods of this node's pools." },
	{ "space_node_snapshots", "gauge",
	    "Snapshots of this node's sandboxes." },
	{ "space_node_snapshot_bytes", "gauge",
	    "Bytes that only the snapshots of this node's sandboxes hold." },
	{ "space_node_store_bytes", "gauge",
	    "Bytes in the object store (SPACE_STORE)." },
	{ "space_node_store_objects", "gauge",
	    "Objects in the object store (SPACE_STORE)." },
};

struct metrics {
	struct sp_ctx x;
	json_t *stats;		/* libvirt's, by domain */
	const char *prom;	/* NULL: no file */
	int storage;		/* --storage */
	char *buf[F__COUNT];	/* each family's samples */
	size_t len[F__COUNT];
	FILE *f[F__COUNT];
};

static void
usage(void)
{
	fprintf(sp_usage_stream(),
	    "usage: space-metrics [--prom FILE] [--storage] [ID...]\n");
	sp_usage_exit();
}

/* A sample of family k, with its labels (names and values alternate). */
static void
sample(struct metrics *m, int k, double v, const char *l1, const char *v1,
    const char *l2, const char *v2)
{
	FILE *f = m->f[k];
	const char *lv[4] = { l1, v1, l2, v2 }, *p;
	int i;

	if (f == NULL)
		return;
	fputs(fam[k].name, f);
	for (i = 0; i < 4 && lv[i] != NULL; i += 2) {
		fprintf(f, "%c%s=\"", i == 0 ? '{' : ',', lv[i]);
		for (p = lv[i + 1]; *p != '\0'; p++) {
			if (*p == '\\' || *p == '"')
				fputc('\\', f);
			if (*p == '\n')
				fputs("\\n", f);
			else
				fputc(*p, f);
		}
		fputc('"', f);
	}
	/* Counts as integers, exactly; seconds to the nanosecond. */
	fprintf(f, v == (double)(long long)v ? "%s %.0f\n" : "%s %.9f\n",
	    l1 != NULL ? "}" : "", v);
}

/* An integer counter of a domain's record, or -1. */
static long long
stat_int(json_t *dom, const char *key)
{
	json_t *v = json_object_get(dom, key);

	return json_is_integer(v) && json_integer_value(v) >= 0 ?
	    json_integer_value(v) : -1;
}

/* The sum of block.N.KEY over the domain's disks, or -1. */
static long long
block_sum(json_t *dom, const char *key)
{
	long long n = stat_int(dom, "block.count"), sum = 0, v;
	char k[64];
	long long i;

	if (n < 0)
		return -1;
	for (i = 0; i < n && i < 64; i++) {
		snprintf(k, sizeof k, "block.%lld.%s", i, key);
		if ((v = stat_int(dom, k)) >= 0)
			sum += v;
	}
	return sum;
}

/* What space-gatewayd counted of the sandbox's egress (sp_gw_stream.c):
 * -1 each when it has not (no connection yet, or no gateway). */
static void
egress_counts(struct metrics *m, const char *id, long long *sent,
    long long *received)
{
	char path[SP_PATH_MAX], buf[256];
	json_t *j;
	size_t n;
	FILE *f;

	*sent = *received = -1;
	if (snprintf(path, sizeof path, "%s/egress-counts/%s.json",
	    m->x.conf.run, id) >= (int)sizeof path ||
	    (f = fopen(path, "re")) == NULL)
		return;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	if ((j = json_loads(buf, 0, NULL)) == NULL)
		return;
	*sent = stat_int(j, "sent");
	*received = stat_int(j, "received");
	json_decref(j);
}

static void
put(json_t *o, const char *key, long long v)
{
	json_object_set_new(o, key, v >= 0 ? json_integer(v) : json_null());
}

/* One sandbox's line (and samples). */
static int
one(struct metrics *m, const struct sp_sandbox_row *r)
{
	char dom[SP_ID_LEN + 4], dir[SP_PATH_MAX];
	long long cpu, rss, cur, max, wr, rd, idle, calls, sent, received;
	json_t *o, *d;
	struct sp_err e;
	uint64_t excl;
	const char *node = m->x.conf.node;

	o = json_pack("{s:s, s:b, s:s, s:s}", "id", r->id, "ok", 1, "state",
	    sp_state_name(r->state), "node", r->node);
	if (o == NULL)
		return -1;
	/* Another node's sandbox is measured there. */
	if (strcmp(r->node, node) != 0)
		return sp_out_json(o);
	sp_sandbox_domain(r->id, dom);
	d = json_object_get(m->stats, dom);
	cpu = stat_int(d, "cpu.time");
	rss = stat_int(d, "balloon.rss");
	cur = stat_int(d, "balloon.current");
	max = stat_int(d, "balloon.maximum");
	wr = block_sum(d, "wr.bytes");
	rd = block_sum(d, "rd.bytes");
	idle = calls = -1;
	if (r->state == SP_ST_RUNNING && d != NULL)
		sp_sandbox_activity(&m->x, r->id, &idle, &calls);
	excl = 0;
	if (sp_sandbox_dir(&m->x, r->id, dir, sizeof dir, &e) == -1 ||
	    !sp_subvol_exists(dir) ||
	    sp_subvol_exclusive_bytes(dir, &excl, &e) == -1)
		excl = (uint64_t)-1;
	put(o, "cpu_ns", cpu);
	put(o, "memory_bytes", rss >= 0 ? rss * 1024 : cur >= 0 ? cur * 1024 :
	    -1);
	put(o, "memory_max_bytes", max >= 0 ? max * 1024 :
	    (long long)r->memory_mib << 20);
	put(o, "disk_written_bytes", wr);
	put(o, "disk_read_bytes", rd);
	put(o, "disk_exclusive_bytes", excl == (uint64_t)-1 ? -1 :
	    (long long)excl);
	put(o, "calls", calls);
	egress_counts(m, r->id, &sent, &received);
	put(o, "egress_sent_bytes", sent);
	put(o, "egress_received_bytes", received);
	if (cpu >= 0)
		sample(m, F_CPU, cpu / 1e9, "id", r->id, "node", node);
	if (rss >= 0 || cur >= 0)
		sample(m, F_MEM, (double)(rss >= 0 ? rss : cur) * 1024, "id",
		    r->id, "node", node);
	sample(m, F_MEM_MAX, max >= 0 ? (double)max * 1024 :
	    (double)r->memory_mib * 1048576, "id", r->id, "node", node);
	if (wr >= 0)
		sample(m, F_WRITTEN, (double)wr, "id", r->id, "node", node);
	if (rd >= 0)
		sample(m, F_READ, (double)rd, "id", r->id, "node", node);
	if (excl != (uint64_t)-1)
		sample(m, F_EXCL, (double)excl, "id", r->id, "node", node);
	if (calls >= 0)
		sample(m, F_CALLS, (double)calls, "id", r->id, "node", node);
	if (sent >= 0)
		sample(m, F_EGRESS_SENT, (double)sent, "id", r->id, "node",
		    node);
	if (received >= 0)
		sample(m, F_EGRESS_RECEIVED, (double)received, "id", r->id,
		    "node", node);
	return sp_out_json(o);
}

static int
by_id(const char *ref, json_t *rec, void *arg)
{
	struct metrics *m = arg;
	struct sp_sandbox_row r;
	char id[SP_ID_LEN + 1];
	struct sp_err e;
	int rc;

	(void)rec;
	if (sp_sandbox_ref(&m->x, ref, id, &e) == -1 ||
	    sp_db_sandbox_get(m->x.db, id, &r, &e) == -1)
		return sp_out_fail(ref, &e);
	if (r.pod) {
		sp_db_row_release(&r);
		sp_err_set(&e, SP_E_NOT_FOUND, 0, "no such sandbox");
		return sp_out_fail(id, &e);
	}
	rc = one(m, &r);
	sp_db_row_release(&r);
	return rc == -1 ? SP_EXIT_TEMP : 0;
}

struct totals {
	struct metrics *m;
	int states[SP_ST__COUNT];
	int pods, snaps;
	uint64_t snap_bytes, store_bytes, store_objs;
	int failed;
};

static int
each_row(const struct sp_sandbox_row *r, void *arg)
{
	struct totals *t = arg;

	if (strcmp(r->node, t->m->x.conf.node) != 0)
		return 0;
	if (r->pod) {
		t->pods++;
		return 0;
	}
	if (r->state >= 0 && r->state < SP_ST__COUNT)
		t->states[r->state]++;
	if (one(t->m, r) == -1)
		t->failed = 1;
	return 0;
}

static int
each_snap(const struct sp_snap_row *s, void *arg)
{
	struct totals *t = arg;
	char dir[SP_PATH_MAX];
	uint64_t bytes;
	struct sp_err e;

	t->snaps++;
	/* A snapshot being taken or deleted meanwhile counts what is there. */
	if (t->m->storage && snprintf(dir, sizeof dir, "%s/snapshots/%s/%s",
	    t->m->x.conf.root, s->id, s->snap) < (int)sizeof dir &&
	    sp_subvol_exists(dir) &&
	    sp_subvol_exclusive_bytes(dir, &bytes, &e) == 0)
		t->snap_bytes += bytes;
	return 0;
}

static int
each_object(const char *key, uint64_t size, void *arg)
{
	struct totals *t = arg;

	t->store_bytes += size;
	t->store_objs++;
	return 0;
}

/* The object store's bytes and objects (--storage). */
static int
store_totals(struct totals *t, struct sp_err *e)
{
	struct sp_store *s;
	int rc;

	if (sp_store_open(&s, t->m->x.conf.store, e) == -1)
		return -1;
	rc = sp_store_list(s, "", each_object, t, e);
	sp_store_close(s);
	return rc;
}

/* Every sandbox of this node, then the node's line. */
static int
all(struct metrics *m)
{
	struct totals t = { .m = m };
	const char *node = m->x.conf.node;
	json_t *o, *states;
	struct sp_err e;
	int s;

	if (sp_db_sandbox_each(m->x.db, SP_DB_WITH_PODS, each_row, &t, &e) ==
	    -1 || sp_db_snap_each(m->x.db, NULL, node, each_snap, &t, &e) == -1 ||
	    (m->storage && store_totals(&t, &e) == -1))
		return sp_out_fail(NULL, &e);
	states = json_object();
	for (s = 0; s < SP_ST__COUNT; s++) {
		json_object_set_new(states, sp_state_name(s),
		    json_integer(t.states[s]));
		sample(m, F_STATES, t.states[s], "node", node, "state",
		    sp_state_name(s));
	}
	sample(m, F_PODS, t.pods, "node", node, NULL, NULL);
	sample(m, F_SNAPS, t.snaps, "node", node, NULL, NULL);
	o = json_pack("{s:s, s:b, s:o, s:i, s:i, s:i}", "node", node, "ok", 1,
	    "sandboxes", states, "pods", t.pods, "snapshots", t.snaps, "vms",
	    (int)json_object_size(m->stats));
	if (o != NULL && m->storage) {
		json_object_set_new(o, "snapshot_bytes",
		    json_integer((json_int_t)t.snap_bytes));
		json_object_set_new(o, "store_bytes",
		    json_integer((json_int_t)t.store_bytes));
		json_object_set_new(o, "store_objects",
		    json_integer((json_int_t)t.store_objs));
		sample(m, F_SNAP_BYTES, (double)t.snap_bytes, "node", node,
		    NULL, NULL);
		sample(m, F_STORE_BYTES, (double)t.store_bytes, "node", node,
		    NULL, NULL);
		sample(m, F_STORE_OBJS, (double)t.store_objs, "node", node,
		    NULL, NULL);
	}
	if (o == NULL || sp_out_json(o) == -1)
		return SP_EXIT_TEMP;
	return t.failed ? SP_EXIT_TEMP : 0;
}

/* FILE, whole or not at all: a temporary file beside it, renamed over it. */
static int
write_prom(struct metrics *m, struct sp_err *e)
{
	char tmp[SP_PATH_MAX];
	FILE *f;
	int k, fd, bad;

	if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", m->prom) >= (int)sizeof tmp)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "--prom: path too long");
	if ((fd = mkstemp(tmp)) == -1)
		return sp_err_sys(e, SP_E_IO, "--prom: %s", tmp);
	if ((f = fdopen(fd, "w")) == NULL) {
		close(fd);
		unlink(tmp);
		return sp_err_sys(e, SP_E_IO, "--prom: %s", tmp);
	}
	for (k = 0; k < F__COUNT; k++) {
		fclose(m->f[k]);
		m->f[k] = NULL;
		if (m->len[k] == 0)
			continue;
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", fam[k].name,
		    fam[k].help, fam[k].name, fam[k].type);
		fwrite(m->buf[k], 1, m->len[k], f);
	}
	bad = fflush(f) == EOF || ferror(f) || fsync(fileno(f)) == -1 ||
	    fchmod(fileno(f), 0644) == -1;
	if (fclose(f) == EOF)
		bad = 1;
	if (bad || rename(tmp, m->prom) == -1) {
		sp_err_sys(e, SP_E_IO, "--prom: %s", m->prom);
		unlink(tmp);
		return -1;
	}
	return 0;
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "prom", required_argument, NULL, 'p' },
		{ "storage", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct metrics m = { .prom = NULL };
	struct sp_err e;
	int ch, k, rc;

	sp_cli_init(argc, argv, usage);
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (ch == 's')
			m.storage = 1;
		else if (ch == 'p' && *optarg != '\0')
			m.prom = optarg;
		else
			usage();
	}
	argc -= optind;
	argv += optind;
	for (k = 0; m.prom != NULL && k < F__COUNT; k++)
		if ((m.f[k] = open_memstream(&m.buf[k], &m.len[k])) == NULL) {
			sp_err_sys(&e, SP_E_INTERNAL, "out of memory");
			return sp_out_fail(NULL, &e);
		}
	if (sp_ctx_open(&m.x, 1, &e) == -1 ||
	    sp_virt_stats(m.x.virt, &m.stats, &e) == -1) {
		rc = sp_out_fail(NULL, &e);
		goto out;
	}
	/* Ids on the command line, or every sandbox here (stdin is not read:
	 * a scraper's stdin is no list). */
	if (argc > 0)
		rc = sp_each(argc, argv, by_id, &m);
	else
		rc = all(&m);
	if (m.prom != NULL && write_prom(&m, &e) == -1)
		rc = sp_out_fail(NULL, &e);
out:
	for (k = 0; k < F__COUNT; k++) {
		if (m.f[k] != NULL)
			fclose(m.f[k]);
		free(m.buf[k]);
	}
	json_decref(m.stats);
	if (m.x.db != NULL)
		sp_ctx_close(&m.x);
	return rc;
}
