/*
 * sp_image: container images as the root filesystem of a template: an OCI
 * image layout (image-spec: oci-layout, index.json, blobs/sha256/...), as a
 * directory or unpacked from its tar, and a `docker save` archive
 * (manifest.json naming each image's config and layer files).
 *
 * The image is picked by tag (the only one when none is given); an index may
 * hold an index, whose linux/amd64 image is taken.  Every blob is checked
 * against its digest and size before it is used (docker's layer files against
 * the config's diff_ids), the layers are applied in order by sp_layer, and
 * the config's Env, WorkingDir, User, Entrypoint + Cmd and Labels become the
 * template's defaults.  What the files say is bounded before it is believed.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_storage.h"

#define JSON_MAX	(4 * 1024 * 1024)	/* index, manifest, config */
#define LAYERS_MAX	1024
#define NEST_MAX	4			/* index in index in ... */
#define ENV_MAX		64			/* the guest daemon's bound */
#define STR_MAX		4096
#define LABELS_MAX	256

#define MT_INDEX	"application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_LIST	"application/vnd.docker.distribution.manifest.list.v2+json"

int
sp_image_kind(const char *dir)
{
	char p[SP_PATH_MAX];
	struct stat st;
	struct sp_err e;

	if (sp_path_fmt(p, sizeof p, &e, "%s/oci-layout", dir) == 0 &&
	    lstat(p, &st) == 0 && S_ISREG(st.st_mode))
		return SP_IMAGE_OCI;
	if (sp_path_fmt(p, sizeof p, &e, "%s/manifest.json", dir) == 0 &&
	    lstat(p, &st) == 0 && S_ISREG(st.st_mode))
		return SP_IMAGE_DOCKER;
	return SP_IMAGE_NONE;
}

/* A JSON file of the image, bounded; what is wrong with it is bad input. */
static json_t *
load(const char *dir, const char *rel, const char *what, struct sp_err *e)
{
	char p[SP_PATH_MAX], q[128];
	json_error_t jerr;
	struct stat st;
	json_t *j;
	int fd;

	if (sp_path_fmt(p, sizeof p, e, "%s/%s", dir, rel) == -1)
		return NULL;
	if ((fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY)) == -1) {
		if (errno == ENOENT)
			sp_err_set(e, SP_E_BAD_INPUT, 0, "image: %s '%s' is "
			    "missing", what, sp_quote(rel, q, sizeof q));
		else
			sp_err_sys(e, SP_E_IO, "image: open '%s'", p);
		return NULL;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    st.st_size > JSON_MAX) {
		close(fd);
		sp_err_set(e, SP_E_BAD_INPUT, 0, "image: %s '%s' is not a file "
		    "of at most %d bytes", what, sp_quote(rel, q, sizeof q),
		    JSON_MAX);
		return NULL;
	}
	j = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
	close(fd);
	if (j == NULL)
		sp_err_set(e, SP_E_BAD_INPUT, 0, "image: %s '%s': %s", what,
		    sp_quote(rel, q, sizeof q), jerr.text);
	return j;
}

/* "sha256:<64 hex>" as blobs/sha256/<hex>. */
static int
blob_path(json_t *desc, char *rel, size_t n, char hex[65], json_int_t *size,
    struct sp_err *e)
{
	const char *d;
	char q[128];
	size_t i;

	if (json_unpack(desc, "{s:s, s:I}", "digest", &d, "size", size) == -1 ||
	    *size < 0)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "image: a descriptor "
		    "lacks its digest or size");
	if (strncmp(d, "sha256:", 7) != 0 || strlen(d) != 7 + 64)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "image: digest '%s' is "
		    "not sha256:<64 hex digits>", sp_quote(d, q, sizeof q));
	for (i = 0; i < 64; i++) {
		char c = d[7 + i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "image: digest "
			    "'%s' is not sha256:<64 hex digits>",
			    sp_quote(d, q, sizeof q));
	}
	memcpy(hex, d + 7, 65);
	return sp_path_fmt(rel, n, e, "blobs/sha256/%s", hex);
}

/* The file is what its digest says: every byte read and hashed. */
static int
verify(const char *dir, const char *rel, const char *hex, json_int_t size,
    struct sp_err *e)
{
	char p[SP_PATH_MAX], got[65], q[128];
	struct stat st;
	uint64_t n;

	if (sp_path_fmt(p, sizeof p, e, "%s/%s", dir, rel) == -1)
		return -1;
	if (lstat(p, &st) == -1 || !S_ISREG(st.st_mode))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "image: blob '%s' is "
		    "missing or not a file", sp_quote(rel, q, sizeof q));
	if (sp_digest_file(p, got, &n, e) == -1)
		return -1;
	if (strcmp(got, hex) != 0 || (size >= 0 && n != (uint64_t)size))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "image: blob '%s' does "
		    "not match its digest (sha256 %.12s..., %llu bytes)",
		    sp_quote(rel, q, sizeof q), got, (unsigned long long)n);
	return 0;
}

/* A descriptor's blob, checked, loaded as JSON. */
static json_t *
load_blob(const char *dir, json_t *desc, const char *what, struct sp_err *e)
{
	char rel[SP_PATH_MAX], hex[65];
	json_int_t size;

	if (blob_path(desc, rel, sizeof rel, hex, &size, e) == -1 ||
	    verify(dir, rel, hex, size, e) == -1)
		return NULL;
	return load(dir, rel, what, e);
}

static int
is_index(json_t *desc)
{
	const char *mt = json_string_value(json_object_get(desc, "mediaType"));

	return mt != NULL && (strcmp(mt, MT_INDEX) == 0 ||
	    strcmp(mt, MT_DOCKER_LIST) == 0);
}

/* The tag an index entry carries: OCI's ref.name annotation. */
static const char *
ref_name(json_t *desc)
{
	return json_string_value(json_object_get(json_object_get(desc,
	    "annotations"), "org.opencontainers.image.ref.name"));
}

/* A docker reference without the default registry and namespace docker
 * (and skopeo) add: "docker.io/library/x:t" is "x:t". */
static const char *
short_ref(const char *r)
{
	if (strncmp(r, "docker.io/", 10) == 0)
		r += 10;
	if (strncmp(r, "library/", 8) == 0)
		r += 8;
	return r;
}

/* "name:tag" matches "name:tag" and "tag". */
static int
tag_matches(const char *have, const char *want)
{
	const char *colon;

	if (have == NULL)
		return 0;
	if (strcmp(have, want) == 0 ||
	    strcmp(short_ref(have), short_ref(want)) == 0)
		return 1;
	colon = strrchr(have, ':');
	return colon != NULL && strchr(colon, '/') == NULL &&
	    strcmp(colon + 1, want) == 0;
}

/* The tags there are, for a message. */
static void
tags_of(json_t *arr, const char *(*tag)(json_t *), char *out, size_t n)
{
	json_t *v;
	size_t i, j = 0;
	const char *t;

	out[0] = '\0';
	json_array_foreach(arr, i, v) {
		if ((t = tag(v)) == NULL || j + strlen(t) + 3 >= n)
			continue;
		j += (size_t)snprintf(out + j, n - j, "%s%s", j ? ", " : "", t);
	}
	if (j == 0)
		snprintf(out, n, "(none)");
}

json_t *
sp_image_pick(json_t *manifests, const char *tag, int nested,
    struct sp_err *e)
{
	char tags[512], q[128];
	json_t *m, *found = NULL, *plat;
	size_t i;
	const char *os, *arch;

	if (!json_is_array(manifests) || json_array_size(manifests) == 0) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "image: the index lists no "
		    "manifest");
		return NULL;
	}
	json_array_foreach(manifests, i, m) {
		if (!json_is_object(m))
			continue;
		if (nested) {
			plat = json_object_get(m, "platform");
			os = json_string_value(json_object_get(plat, "os"));
			arch = json_string_value(json_object_get(plat,
			    "architecture"));
			if (os != NULL && arch != NULL &&
			    strcmp(os, "linux") == 0 && strcmp(arch, "amd64") == 0)
				return m;
			continue;
		}
		if (tag != NULL && !tag_matches(ref_name(m), tag))
			continue;
		if (found != NULL) {
			tags_of(manifests, ref_name, tags, sizeof tags);
			sp_err_set(e, SP_E_BAD_INPUT, 0, "image: the layout holds "
			    "several images: pick one with --tag (%s)", tags);
			return NULL;
		}
		found = m;
	}
	if (nested)
		sp_err_set(e, SP_E_BAD_INPUT, 0, "image: the index has no "
		    "linux/amd64 image");
	else if (found == NULL) {
		tags_of(manifests, ref_name, tags, sizeof tags);
		sp_err_set(e, SP_E_BAD_INPUT, 0, "image: no image tagged '%s' "
		    "(there are: %s)", sp_quote(tag ? tag : "", q, sizeof q),
		    tags);
	}
	return found;
}

/* A string of the config, bounded; absent or null is NULL. */
static int
config_str(json_t *c, const char *key, const char **out, struct sp_err *e)
{
	json_t *v = json_object_get(c, key);

	*out = NULL;
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_string(v) || json_string_length(v) > STR_MAX ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "image config: %s must "
		    "be a string of at most %d bytes", key, STR_MAX);
	*out = json_string_value(v);
	return 0;
}

/* NAME=VALUE with a name of [A-Za-z0-9_], as the guest daemon takes it. */
static int
env_ok(const char *t)
{
	size_t n = strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789_");

	return n > 0 && t[n] == '=';
}

/* An array of strings of the config, appended to out; at most max. */
static int
config_strings(json_t *c, const char *key, json_t *out, size_t max,
    int env, struct sp_err *e)
{
	json_t *v = json_object_get(c, key), *s;
	const char *t;
	size_t i;

	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_array(v) || json_array_size(v) + json_array_size(out) >
	    max)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "image config: %s must "
		    "be an array of at most %zu strings", key, max);
	json_array_foreach(v, i, s) {
		t = json_string_value(s);
		if (t == NULL || json_string_length(s) > STR_MAX ||
		    strlen(t) != json_string_length(s) || (env && !env_ok(t)))
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "image config: "
			    "%s[%zu] is not %s", key, i, env ? "NAME=VALUE with "
			    "a NAME of [A-Za-z0-9_]" : "a string");
		if (json_array_append(out, s) == -1)
			return sp_err_set(e, SP_E_INTERNAL, 1, "out of memory");
	}
	return 0;
}

json_t *
sp_image_defaults(json_t *config, struct sp_err *e)
{
	json_t *c, *d, *env, *cmd, *labels, *v, *l;
	const char *cwd, *user, *os, *arch, *k;

	os = json_string_value(json_object_get(config, "os"));
	arch = json_string_value(json_object_get(config, "architecture"));
	if ((os != NULL && strcmp(os, "linux") != 0) ||
	    (arch != NULL && strcmp(arch, "amd64") != 0)) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "image: it is for %s/%s; "
		    "sandboxes run linux/amd64", os ? os : "?",
		    arch ? arch : "?");
		return NULL;
	}
	c = json_object_get(config, "config");
	d = json_object();
	env = json_array();
	cmd = json_array();
	labels = json_object();
	if (d == NULL || env == NULL || cmd == NULL || labels == NULL) {
		sp_err_set(e, SP_E_INTERNAL, 1, "out of memory");
		goto fail;
	}
	if (c != NULL && !json_is_null(c) && !json_is_object(c)) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "image config: config is not "
		    "an object");
		goto fail;
	}
	if (config_strings(c, "Env", env, ENV_MAX, 1, e) == -1 ||
	    config_strings(c, "Entrypoint", cmd, 256, 0, e) == -1 ||
	    config_strings(c, "Cmd", cmd, 256, 0, e) == -1 ||
	    config_str(c, "WorkingDir", &cwd, e) == -1 ||
	    config_str(c, "User", &user, e) == -1)
		goto fail;
	if (cwd != NULL && *cwd != '\0' && *cwd != '/') {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "image config: WorkingDir must "
		    "be an absolute path");
		goto fail;
	}
	l = json_object_get(c, "Labels");
	if (l != NULL && !json_is_null(l)) {
		if (!json_is_object(l) || json_object_size(l) > LABELS_MAX) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "image config: Labels "
			    "must be an object of at most %d strings", LABELS_MAX);
			goto fail;
		}
		json_object_foreach(l, k, v) {
			if (!json_is_string(v) || strlen(k) > 256 ||
			    json_string_length(v) > STR_MAX) {
				sp_err_set(e, SP_E_BAD_INPUT, 0, "image config: "
				    "label values must be strings");
				goto fail;
			}
			json_object_set(labels, k, v);
		}
	}
	if (json_array_size(env) > 0)
		json_object_set(d, "env", env);
	if (cwd != NULL && *cwd != '\0')
		json_object_set_new(d, "cwd", json_string(cwd));
	if (user != NULL && *user != '\0')
		json_object_set_new(d, "user", json_string(user));
	if (json_array_size(cmd) > 0)
		json_object_set(d, "cmd", cmd);
	if (json_object_size(labels) > 0)
		json_object_set(d, "labels", labels);
	json_decref(env);
	json_decref(cmd);
	json_decref(labels);
	return d;
fail:
	json_decref(d);
	json_decref(env);
	json_decref(cmd);
	json_decref(labels);
	return NULL;
}

/* The config's defaults to *out, then the layers, checked before, applied
 * in order; on failure *out is NULL. */
static int
apply(const char *dir, char (*rel)[SP_PATH_MAX], size_t n, json_t *conf,
    const char *rootfs, json_t **out, struct sp_err *e)
{
	char p[SP_PATH_MAX];
	char why[sizeof e->msg];
	size_t i;

	if ((*out = sp_image_defaults(conf, e)) == NULL)
		return -1;
	for (i = 0; i < n; i++)
		if (sp_path_fmt(p, sizeof p, e, "%s/%s", dir, rel[i]) == -1 ||
		    sp_layer_unpack(p, rootfs, 1, e) == -1) {
			/* Which layer, for whoever has to fix the image. */
			snprintf(why, sizeof why, "%s", e->msg);
			snprintf(e->msg, sizeof e->msg, "layer %zu of %zu (%.80s): "
			    "%.360s", i + 1, n, rel[i], why);
			json_decref(*out);
			*out = NULL;
			return -1;
		}
	return 0;
}

static int
oci(const char *dir, const char *tag, const char *rootfs, json_t **out,
    struct sp_err *e)
{
	char (*rel)[SP_PATH_MAX] = NULL;
	char hex[65];
	json_t *index = NULL, *nested = NULL, *man = NULL, *conf = NULL;
	json_t *desc, *layers, *l;
	json_int_t size;
	const char *v;
	size_t i;
	int depth, ret = -1;

	if ((index = load(dir, "oci-layout", "oci-layout", e)) == NULL)
		return -1;
	v = json_string_value(json_object_get(index, "imageLayoutVersion"));
	if (v == NULL || strncmp(v, "1.", 2) != 0) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "image: oci-layout is not of "
		    "version 1.x");
		goto out;
	}
	json_decref(index);
	if ((index = load(dir, "index.json", "index", e)) == NULL ||
	    (desc = sp_image_pick(json_object_get(index, "manifests"), tag, 0,
	    e)) == NULL)
		goto out;
	for (depth = 0; is_index(desc); depth++) {
		json_t *next;

		if (depth == NEST_MAX) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "image: indexes nest "
			    "deeper than %d", NEST_MAX);
			goto out;
		}
		if ((next = load_blob(dir, desc, "index", e)) == NULL)
			goto out;
		json_decref(nested);
		nested = next;
		if ((desc = sp_image_pick(json_object_get(nested, "manifests"),
		    NULL, 1, e)) == NULL)
			goto out;
	}
	if ((man = load_blob(dir, desc, "manifest", e)) == NULL ||
	    (conf = load_blob(dir, json_object_get(man, "config"), "config",
	    e)) == NULL)
		goto out;
	layers = json_object_get(man, "layers");
	if (!json_is_array(layers) || json_array_size(layers) > LAYERS_MAX) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "image: the manifest's layers "
		    "are not an array of at most %d", LAYERS_MAX);
		goto out;
	}
	if ((rel = calloc(json_array_size(layers) + 1, sizeof *rel)) == NULL) {
		sp_err_set(e, SP_E_INTERNAL, 1, "out of memory");
		goto out;
	}
	/* Every blob checked before the first is applied. */
	json_array_foreach(layers, i, l)
		if (blob_path(l, rel[i], sizeof rel[i], hex, &size, e) == -1 ||
		    verify(dir, rel[i], hex, size, e) == -1)
			goto out;
	if (apply(dir, rel, json_array_size(layers), conf, rootfs, out,
	    e) == -1)
		goto out;
	ret = 0;
out:
	free(rel);
	json_decref(index);
	json_decref(nested);
	json_decref(man);
	json_decref(conf);
	return ret;
}

/* A path docker's manifest names: relative, without "..". */
static int
docker_rel(json_t *v, char *out, size_t n, struct sp_err *e)
{
	const char *s = json_string_value(v), *p;
	char q[128];

	if (s == NULL || *s == '\0' || *s == '/' || strlen(s) >= n)
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "image: manifest.json "
		    "names a file oddly");
	for (p = s; (p = strstr(p, "..")) != NULL; p += 2)
		if ((p == s || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
			return sp_err_set(e, SP_E_BAD_INPUT, 0, "image: "
			    "manifest.json names '%s', outside the archive",
			    sp_quote(s, q, sizeof q));
	memcpy(out, s, strlen(s) + 1);
	return 0;
}

static const char *
repo_tag0(json_t *img)
{
	return json_string_value(json_array_get(json_object_get(img,
	    "RepoTags"), 0));
}

static int
docker(const char *dir, const char *tag, const char *rootfs, json_t **out,
    struct sp_err *e)
{
	char (*rel)[SP_PATH_MAX] = NULL;
	char crel[SP_PATH_MAX], tags[512], q[128], p[SP_PATH_MAX], got[65];
	json_t *man, *img = NULL, *m, *t, *layers, *diff, *conf = NULL;
	size_t i, j;
	uint64_t n;
	const char *want;
	int ret = -1;

	if ((man = load(dir, "manifest.json", "manifest", e)) == NULL)
		return -1;
	if (!json_is_array(man) || json_array_size(man) == 0) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "image: manifest.json lists no "
		    "image");
		goto out;
	}
	json_array_foreach(man, i, m) {
		int hit = tag == NULL;

		json_array_foreach(json_object_get(m, "RepoTags"), j, t)
			if (tag != NULL && tag_matches(json_string_value(t), tag))
				hit = 1;
		if (!hit)
			continue;
		if (img != NULL) {
			tags_of(man, repo_tag0, tags, sizeof tags);
			sp_err_set(e, SP_E_BAD_INPUT, 0, "image: the archive "
			    "holds several images: pick one with --tag (%s)",
			    tags);
			goto out;
		}
		img = m;
	}
	if (img == NULL) {
		tags_of(man, repo_tag0, tags, sizeof tags);
		sp_err_set(e, SP_E_BAD_INPUT, 0, "image: no image tagged '%s' "
		    "(there are: %s)", sp_quote(tag, q, sizeof q), tags);
		goto out;
	}
	if (docker_rel(json_object_get(img, "Config"), crel, sizeof crel,
	    e) == -1 || (conf = load(dir, crel, "config", e)) == NULL)
		goto out;
	layers = json_object_get(img, "Layers");
	diff = json_object_get(json_object_get(conf, "rootfs"), "diff_ids");
	if (!json_is_array(layers) || json_array_size(layers) > LAYERS_MAX ||
	    !json_is_array(diff) ||
	    json_array_size(diff) != json_array_size(layers)) {
		sp_err_set(e, SP_E_BAD_INPUT, 0, "image: the layers and the "
		    "config's diff_ids do not match (at most %d)", LAYERS_MAX);
		goto out;
	}
	if ((rel = calloc(json_array_size(layers) + 1, sizeof *rel)) == NULL) {
		sp_err_set(e, SP_E_INTERNAL, 1, "out of memory");
		goto out;
	}
	/* A layer file is the uncompressed layer: its sha256 is its diff_id. */
	json_array_foreach(layers, i, t) {
		want = json_string_value(json_array_get(diff, i));
		if (docker_rel(t, rel[i], sizeof rel[i], e) == -1 ||
		    sp_path_fmt(p, sizeof p, e, "%s/%s", dir, rel[i]) == -1 ||
		    sp_digest_file(p, got, &n, e) == -1)
			goto out;
		if (want == NULL || strncmp(want, "sha256:", 7) != 0 ||
		    strcmp(want + 7, got) != 0) {
			sp_err_set(e, SP_E_BAD_INPUT, 0, "image: layer '%s' does "
			    "not match its diff_id", sp_quote(rel[i], q,
			    sizeof q));
			goto out;
		}
	}
	if (apply(dir, rel, json_array_size(layers), conf, rootfs, out,
	    e) == -1)
		goto out;
	ret = 0;
out:
	free(rel);
	json_decref(man);
	json_decref(conf);
	return ret;
}

int
sp_image_unpack(const char *dir, int kind, const char *tag,
    const char *rootfs, json_t **config, struct sp_err *e)
{
	*config = NULL;
	if (kind == SP_IMAGE_OCI)
		return oci(dir, tag, rootfs, config, e);
	if (kind == SP_IMAGE_DOCKER)
		return docker(dir, tag, rootfs, config, e);
	return sp_err_set(e, SP_E_BAD_INPUT, 0, "image: '%s' is neither an OCI "
	    "layout nor a docker archive", dir);
}
