/*
 * sp_tar: packing a tree as a pax stream, the one loop both sides run (the
 * guest daemon links this file too, like sp_proto.c): space-cp into a
 * sandbox packs on the host, out of one the daemon packs in the guest.
 * Symlinks are stored, not followed; sparse files keep their holes.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sp_vm.h"
#include "sp_archive.h"

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

	while ((r = sp_archive.read_data_block(disk, &buf, &size, &off)) ==
	    ARCHIVE_OK) {
		for (; at < off; at += k) {
			k = off - at < SP_FRAME_CHUNK ? off - at : SP_FRAME_CHUNK;
			if (sp_archive.write_data(w, zeros, k) < 0)
				return -2;
		}
		if (size > 0 && sp_archive.write_data(w, buf, size) < 0)
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
		return sp_err_set(e, SP_E_BAD_INPUT, 0, "path too long");
	memcpy(root, src, plen);
	root[plen] = '\0';
	if ((disk = sp_archive.read_disk_new()) == NULL ||
	    (ent = sp_archive.entry_new()) == NULL) {
		sp_err_set(e, SP_E_NOMEM, 1, "out of memory");
		goto out;
	}
	sp_archive.read_disk_set_symlink_physical(disk);
	if (flags & SP_TAR_ONE_FS)
		sp_archive.read_disk_set_behavior(disk,
		    ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS);
	if (sp_archive.read_disk_open(disk, root) != ARCHIVE_OK) {
		errno = sp_archive.errno_of(disk);
		sp_err_set(e, errno == ENOENT ? SP_E_NOT_FOUND : SP_E_IO, 0,
		    "\"%.200s\": %s", src, sp_archive.error_string(disk));
		goto out;
	}
	for (;;) {
		sp_archive.entry_clear(ent);
		r = sp_archive.read_next_header2(disk, ent);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			sp_err_set(e, SP_E_IO, 0, "reading \"%.200s\": %s", src,
			    sp_archive.error_string(disk));
			goto out;
		}
		sp_archive.read_disk_descend(disk);
		ep = sp_archive.entry_pathname(ent);
		if (ep == NULL || strncmp(ep, root, plen) != 0)
			continue;
		snprintf(name, sizeof name, "%s%s", top,
		    plen == 1 ? (ep[1] != '\0' ? ep : "") : ep + plen);
		sp_archive.entry_set_pathname(ent, name);
		if (sp_archive.write_header(w, ent) < ARCHIVE_WARN)
			goto werr;
		if (sp_archive.entry_filetype(ent) != AE_IFREG ||
		    sp_archive.entry_size(ent) == 0)
			continue;
		if ((r = copy_data(disk, w)) == -2)
			goto werr;
		if (r < ARCHIVE_WARN) {
			sp_err_set(e, SP_E_IO, 0, "reading \"%.200s\": %s", name,
			    sp_archive.error_string(disk));
			goto out;
		}
	}
	rc = 0;
	goto out;
werr:
	sp_err_set(e, SP_E_IO, 0, "%s", sp_archive.error_string(w));
out:
	sp_archive.entry_free(ent);
	sp_archive.read_free(disk);
	return rc;
}
