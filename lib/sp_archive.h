/*
 * sp_archive: libarchive, loaded on first use on the host (sp_archive.c).
 * With what it pulls in (icu, libxml2, libstdc++ and seven compressors) it
 * would slow the start of every process; only the commands that unpack a
 * template or copy a tree need it.  The static guest daemon fills the part
 * of the table that lib/sp_tar.c calls at link time (guest/archive-static.c).
 * A member is named after its function without "archive_" (sp_archive.read_new
 * is archive_read_new; errno is a macro, so archive_errno is errno_of) and
 * keeps its prototype, so every call is type-checked.
 */
#ifndef SP_ARCHIVE_H
#define SP_ARCHIVE_H

#include <archive.h>
#include <archive_entry.h>

#include "sp_storage.h"

/* What lib/sp_tar.c calls: both sides. */
#define SP_ARCHIVE_TAR_FUNCS(F) \
	F(entry_clear, archive_entry_clear) \
	F(entry_filetype, archive_entry_filetype) \
	F(entry_free, archive_entry_free) \
	F(entry_new, archive_entry_new) \
	F(entry_pathname, archive_entry_pathname) \
	F(entry_set_pathname, archive_entry_set_pathname) \
	F(entry_size, archive_entry_size) \
	F(errno_of, archive_errno) \
	F(error_string, archive_error_string) \
	F(read_data_block, archive_read_data_block) \
	F(read_disk_descend, archive_read_disk_descend) \
	F(read_disk_new, archive_read_disk_new) \
	F(read_disk_open, archive_read_disk_open) \
	F(read_disk_set_behavior, archive_read_disk_set_behavior) \
	F(read_disk_set_symlink_physical, \
	    archive_read_disk_set_symlink_physical) \
	F(read_free, archive_read_free) \
	F(read_next_header2, archive_read_next_header2) \
	F(write_data, archive_write_data) \
	F(write_header, archive_write_header)

/* The host's alone (templates, space-cp); the guest daemon leaves these
 * unset and does not link them. */
#define SP_ARCHIVE_HOST_FUNCS(F) \
	F(entry_copy_hardlink, archive_entry_copy_hardlink) \
	F(entry_copy_pathname, archive_entry_copy_pathname) \
	F(entry_gid, archive_entry_gid) \
	F(entry_hardlink, archive_entry_hardlink) \
	F(entry_perm, archive_entry_perm) \
	F(entry_rdevmajor, archive_entry_rdevmajor) \
	F(entry_rdevminor, archive_entry_rdevminor) \
	F(entry_set_filetype, archive_entry_set_filetype) \
	F(entry_set_hardlink, archive_entry_set_hardlink) \
	F(entry_set_perm, archive_entry_set_perm) \
	F(entry_set_size, archive_entry_set_size) \
	F(entry_uid, archive_entry_uid) \
	F(read_new, archive_read_new) \
	F(read_next_header, archive_read_next_header) \
	F(read_open, archive_read_open) \
	F(read_open_fd, archive_read_open_fd) \
	F(read_open_filename, archive_read_open_filename) \
	F(read_support_filter_all, archive_read_support_filter_all) \
	F(read_support_format_all, archive_read_support_format_all) \
	F(read_support_format_tar, archive_read_support_format_tar) \
	F(set_error, archive_set_error) \
	F(write_close, archive_write_close) \
	F(write_data_block, archive_write_data_block) \
	F(write_disk_new, archive_write_disk_new) \
	F(write_disk_set_options, archive_write_disk_set_options) \
	F(write_finish_entry, archive_write_finish_entry) \
	F(write_free, archive_write_free) \
	F(write_new, archive_write_new) \
	F(write_open, archive_write_open) \
	F(write_set_bytes_in_last_block, \
	    archive_write_set_bytes_in_last_block) \
	F(write_set_bytes_per_block, archive_write_set_bytes_per_block) \
	F(write_set_format_pax_restricted, \
	    archive_write_set_format_pax_restricted)

#define SP_ARCHIVE_FUNCS(F) SP_ARCHIVE_TAR_FUNCS(F) SP_ARCHIVE_HOST_FUNCS(F)

union sp_archive_fns {
	struct {
#define SP_ARCHIVE_PTR(m, f) __typeof__(f) *m;
		SP_ARCHIVE_FUNCS(SP_ARCHIVE_PTR)
#undef SP_ARCHIVE_PTR
	};
	/* What sp_dl_load fills. */
	void *slot[0 SP_ARCHIVE_FUNCS(SP_DL_ONE)];
};

extern union sp_archive_fns sp_archive;

/* Loads libarchive once; every sp_archive pointer is set after it
 * succeeds.  Whoever makes a struct archive calls it first. */
int sp_archive_load(struct sp_err *e);

#endif
