/*
 * daemon-identity: the host hands a new sandbox its identity.  A sandbox made
 * from a template's checkpoint wakes with the checkpoint's memory: its random
 * generator's state, host name and everything else are the same in every
 * copy.  The op "identity" makes this copy its own: a fresh seed from the
 * host is mixed into the kernel's entropy pool and the generator reseeded
 * (two copies then draw different bytes), the host name set, the id and
 * labels written to /run/space/identity.json for the workload, and the
 * sandbox's environment kept for the calls that bring none.  A create's
 * first command may follow on the same connection before the answer (exec
 * with "after_identity"): it runs only when this identity was set.
 *
 * Beneath the sandbox's environment lie its template's defaults, the image
 * config's (/.space/image.json, written at import): read once at start, so
 * that a template's checkpoint wakes with them.
 */
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/random.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"

#define SEED_BYTES	32
#define ENV_LEN_MAX	4096

/* The sandbox's environment for calls that bring none: an array never
 * changed once set, replaced whole, so a caller's reference stays valid. */
static pthread_mutex_t env_mu = PTHREAD_MUTEX_INITIALIZER;
static json_t *ident_env;

json_t *
sd_identity_env(void)
{
	json_t *e;

	pthread_mutex_lock(&env_mu);
	e = json_incref(ident_env);
	pthread_mutex_unlock(&env_mu);
	return e;
}

static json_t *image_conf;	/* never changed after sd_image_load */

/* NAME=VALUE, a name of [A-Za-z0-9_], bounded. */
static int
env_ok(json_t *env)
{
	size_t i, n;
	json_t *v;
	const char *s;

	if (env == NULL)
		return 1;
	if (!json_is_array(env) || json_array_size(env) > SD_ENV_MAX)
		return 0;
	json_array_foreach(env, i, v) {
		if (!json_is_string(v) || json_string_length(v) > ENV_LEN_MAX)
			return 0;
		s = json_string_value(v);
		n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		    "0123456789_");
		if (n == 0 || s[n] != '=')
			return 0;
	}
	return 1;
}
#define IDENTITY_DIR	"/run/space"
#define IDENTITY_FILE	SP_GUEST_IDENTITY_FILE

/* One hex digit's value, or -1. */
static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Exactly 2n hex digits, nothing else (sscanf's "%2x" took signs, spaces
 * and "0x", and cost ~20000 guest instructions a claim under TCG). */
static int
unhex(const char *s, unsigned char *out, size_t n)
{
	size_t i;
	int hi, lo;

	if (strlen(s) != 2 * n)
		return -1;
	for (i = 0; i < n; i++) {
		if ((hi = hexval(s[2 * i])) < 0 ||
		    (lo = hexval(s[2 * i + 1])) < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

/* Mixes seed into the input pool, then rekeys the generator from it. */
static int
reseed(const unsigned char *seed, char *why, size_t n)
{
	struct {
		struct rand_pool_info info;
		unsigned char buf[SEED_BYTES];
	} r;
	int fd, rc = -1;

	if ((fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC)) == -1) {
		snprintf(why, n, "open /dev/urandom: %s", strerror(errno));
		return -1;
	}
	r.info.entropy_count = SEED_BYTES * 8;
	r.info.buf_size = SEED_BYTES;
	memcpy(r.buf, seed, SEED_BYTES);
	if (ioctl(fd, RNDADDENTROPY, &r.info) == -1)
		snprintf(why, n, "RNDADDENTROPY: %s", strerror(errno));
	else if (ioctl(fd, RNDRESEEDCRNG) == -1)
		snprintf(why, n, "RNDRESEEDCRNG: %s", strerror(errno));
	else
		rc = 0;
	explicit_bzero(&r, sizeof r);
	close(fd);
	return rc;
}

/* A host name: 1..63 of [a-z0-9-], not starting or ending with '-'. */
static int
hostname_ok(const char *h)
{
	size_t n = strlen(h);

	return n >= 1 && n <= 63 && h[0] != '-' && h[n - 1] != '-' &&
	    strspn(h, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

/* {"op":"identity","id":ID,"hostname":H,"seed":HEX64,"labels":{...}} */
/* The host's time, in ns since the epoch; absent is fine (older hosts).
 * A guest restored from a checkpoint, or resumed, lives at the time its
 * memory was saved or paused until told. */
static int
set_clock(json_t *v, char *why, size_t n)
{
	struct timespec ts;
	json_int_t ns;

	if (v == NULL)
		return 0;
	/* 2020-01-01 .. 2200-01-01: what a sane host says. */
	if (!json_is_integer(v) || (ns = json_integer_value(v)) <
	    1577836800LL * 1000000000 || ns > 7258118400LL * 1000000000) {
		snprintf(why, n, "time_ns must be ns since the epoch");
		return -1;
	}
	ts.tv_sec = (time_t)(ns / 1000000000);
	ts.tv_nsec = (long)(ns % 1000000000);
	if (clock_settime(CLOCK_REALTIME, &ts) == -1) {
		snprintf(why, n, "clock_settime: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int
sd_op_clock(struct port *p, uint32_t stream, json_t *req)
{
	char why[128];

	if (json_object_get(req, "time_ns") == NULL)
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "clock needs "
		    "time_ns");
	if (set_clock(json_object_get(req, "time_ns"), why, sizeof why) == -1)
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "%s", why);
	return sd_send_json(p, SP_FR_EXIT, stream, json_pack("{s:i}",
	    "status", 0));
}

int
sd_op_identity(struct port *p, uint32_t stream, json_t *req)
{
	unsigned char seed[SEED_BYTES];
	const char *id, *host, *hex;
	char why[256], tmp[64];
	json_t *labels, *rec, *env, *old;
	int rc;

	p->identity_set = 0;
	if (json_unpack(req, "{s:s, s:s, s:s}", "id", &id, "hostname", &host,
	    "seed", &hex) == -1 || strlen(id) > 64 || !hostname_ok(host) ||
	    unhex(hex, seed, sizeof seed) == -1)
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "identity needs id, "
		    "a host name of [a-z0-9-] and a %d-byte hex seed", SEED_BYTES);
	labels = json_object_get(req, "labels");
	if (labels != NULL && !json_is_object(labels))
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "labels must be an "
		    "object");
	env = json_object_get(req, "env");
	if (!env_ok(env))
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "env must be at most "
		    "%d strings NAME=VALUE", SD_ENV_MAX);
	if (set_clock(json_object_get(req, "time_ns"), why, sizeof why) == -1)
		return sd_send_error(p, stream, SP_E_BAD_INPUT, "%s", why);
	rc = reseed(seed, why, sizeof why);
	explicit_bzero(seed, sizeof seed);
	if (rc == -1)
		return sd_send_error(p, stream, SP_E_RESEED_FAILED, "%s", why);
	if (sethostname(host, strlen(host)) == -1)
		return sd_send_error(p, stream, SP_E_IO, "sethostname: %s",
		    strerror(errno));
	/* Written whole, then renamed: a reader never sees half of it. */
	mkdir(IDENTITY_DIR, 0755);
	snprintf(tmp, sizeof tmp, "%s.%d", IDENTITY_FILE, (int)getpid());
	rec = json_pack("{s:s, s:s, s:O}", "id", id, "hostname", host, "labels",
	    labels != NULL ? labels : json_object());
	rc = rec != NULL ? json_dump_file(rec, tmp, JSON_COMPACT) : -1;
	json_decref(rec);
	if (rc == -1 || rename(tmp, IDENTITY_FILE) == -1) {
		unlink(tmp);
		return sd_send_error(p, stream, SP_E_IO, "cannot write %s",
		    IDENTITY_FILE);
	}
	pthread_mutex_lock(&env_mu);
	old = ident_env;
	ident_env = env != NULL ? json_deep_copy(env) : NULL;
	pthread_mutex_unlock(&env_mu);
	json_decref(old);
	p->identity_set = 1;
	return sd_send_json(p, SP_FR_EXIT, stream, json_pack("{s:i, s:b}",
	    "status", 0, "reseeded", 1));
}

void
sd_image_load(void)
{
	json_error_t jerr;
	json_t *j, *v;

	j = json_load_file(SD_IMAGE_FILE, JSON_REJECT_DUPLICATES, &jerr);
	if (j == NULL) {
		if (access(SD_IMAGE_FILE, F_OK) == 0)
			fprintf(stderr, "space-daemon: %s: %s; going on without "
			    "the image's defaults\n", SD_IMAGE_FILE, jerr.text);
		return;
	}
	/* What does not hold is left out, with a word on the console. */
	if (!json_is_object(j) || !env_ok(json_object_get(j, "env")) ||
	    ((v = json_object_get(j, "cwd")) != NULL &&
	    (!json_is_string(v) || json_string_value(v)[0] != '/')) ||
	    ((v = json_object_get(j, "user")) != NULL && !json_is_string(v))) {
		fprintf(stderr, "space-daemon: %s is not what import writes; "
		    "going on without the image's defaults\n", SD_IMAGE_FILE);
		json_decref(j);
		return;
	}
	image_conf = j;
}

json_t *
sd_image_get(const char *key)
{
	return json_object_get(image_conf, key);
}
