/*
 * sp_tar: packing a tree as a pax stream, the one loop both sides run (the
 * guest daemon links this file too, like sp_proto.c): space-cp into a
 * sandbox packs on the host, out of one the daemon packs in the guest.
 * Symlinks are stored, not followed; sparse files keep their holes.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>

#include "sp.h"

static const unsigned char zeros[SP_FRAME_CHUNK];

/* An entry's data from disk to the writer: holes become zeros, which the
 * pax writer leaves out again by the entry's sparse map.  -2 when writing
 * failed, else what reading ended with. */
static int
copy_data(struct archive *disk, struct archive *w)
{
	const void *buf;
	size_t size;
	la_int64_t off, at = 0, k;
	int r;

	while ((r = archive_read_data_block(disk, &buf, &size, &off)) ==
	    ARCHIVE_OK) {
		for (; at < off; at += k) {
			k = off - at < SP_FRAME_CHUNK ? off - at : SP_FRAME_CHUNK;
			if (archive_write_data(w, zeros, k) < 0)
				return -2;
		}
		if (size > 0 && archive_write_data(w, buf, size) < 0)
			return -2;
		at = off + size;
	}
	return r == ARCHIVE_EOF ? ARCHIVE_OK : r;
}

int
sp_tar_pack(struct archive *w, const char *src, const char *top, int flags,
    struct sp_err *e)
{
	char root[SP_PATH_MAX], name[2 * SP_PATH_MAX];
	struct archive *disk = NULL;
	struct archive_entry *ent = NULL;
	const char *ep;
	size_t plen;
	int r, rc = -1;

	plen = strlen(src);
	while (plen > 1 && src[plen - 1] == '/')
		plen--;
	if (plen >= sizeof root)
		return sp_err_set(e, "bad-input", 0, "path too long");
	memcpy(root, src, plen);
	root[plen] = '\0';
	if ((disk = archive_read_disk_new()) == NULL ||
	    (ent = archive_entry_new()) == NULL) {
		sp_err_set(e, "nomem", 1, "out of memory");
		goto out;
	}
	archive_read_disk_set_symlink_physical(disk);
	if (flags & SP_TAR_ONE_FS)
		archive_read_disk_set_behavior(disk,
		    ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS);
	if (archive_read_disk_open(disk, root) != ARCHIVE_OK) {
		errno = archive_errno(disk);
		sp_err_set(e, errno == ENOENT ? "not-found" : "io", 0,
		    "\"%.200s\": %s", src, archive_error_string(disk));
		goto out;
	}
	for (;;) {
		archive_entry_clear(ent);
		r = archive_read_next_header2(disk, ent);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			sp_err_set(e, "io", 0, "reading \"%.200s\": %s", src,
			    archive_error_string(disk));
			goto out;
		}
		archive_read_disk_descend(disk);
		ep = archive_entry_pathname(ent);
		if (ep == NULL || strncmp(ep, root, plen) != 0)
			continue;
		snprintf(name, sizeof name, "%s%s", top,
		    plen == 1 ? (ep[1] != '\0' ? ep : "") : ep + plen);
		archive_entry_set_pathname(ent, name);
		if (archive_write_header(w, ent) < ARCHIVE_WARN)
			goto werr;
		if (archive_entry_filetype(ent) != AE_IFREG ||
		    archive_entry_size(ent) == 0)
			continue;
		if ((r = copy_data(disk, w)) == -2)
			goto werr;
		if (r < ARCHIVE_WARN) {
			sp_err_set(e, "io", 0, "reading \"%.200s\": %s", name,
			    archive_error_string(disk));
			goto out;
		}
	}
	rc = 0;
	goto out;
werr:
	sp_err_set(e, "io", 0, "%s", archive_error_string(w));
out:
	archive_entry_free(ent);
	archive_read_free(disk);
	return rc;
}
