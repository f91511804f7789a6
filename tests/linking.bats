#!/usr/bin/env bats
# What a command loads at its start.  Debian's libraries are linked
# dynamically (their security updates reach the commands); libvirt, libcurl,
# libarchive and libpq are opened only when a command uses them
# (lib/sp_dl.c), so that a short command such as space-ls or a pool claim
# does not map them (nor libpq on a node whose SPACE_DB is SQLite).
load helper

needed() {
	readelf -d "$1" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'
}

@test "no command has libvirt, libcurl, libarchive, libxml2 or libpq among the libraries it needs at start" {
	local c n=0
	for c in "$top"/build/bin/space-*; do
		[[ $c == *.d ]] && continue
		run needed "$c"
		refute_output --partial libvirt
		refute_output --partial libcurl
		refute_output --partial libarchive
		refute_output --partial libxml2
		refute_output --partial libpq
		n=$((n + 1))
	done
	[ "$n" -ge 27 ]
}

@test "jansson, SQLite, libsodium and libbtrfsutil are Debian's shared libraries, not copies" {
	local c
	for c in space-ls space-create space-exec space-suspend; do
		run needed "$top/build/bin/$c"
		assert_line libjansson.so.4
		assert_line libsqlite3.so.0
		# Their functions come from the shared objects: undefined here.
		nm -D "$top/build/bin/$c" | grep -q ' U sqlite3_open_v2$'
		nm -D "$top/build/bin/$c" | grep -q ' U json_dumps@'
		! nm "$top/build/bin/$c" 2>/dev/null | grep -q ' T sqlite3_open_v2$' || false
	done
	run needed "$top/build/bin/space-suspend"
	assert_line libsodium.so.23
	run needed "$top/build/bin/space-init"
	assert_line libbtrfsutil.so.1
}

@test "space-ls and space-create's claim path load no more than they need" {
	local c
	for c in space-ls space-create space-exec; do
		run needed "$top/build/bin/$c"
		echo "$c: $output"
		[ "$(grep -cvE '^(libjansson|libsqlite3|libsodium|libbtrfsutil|libc|libm)\.so' <<<"$output")" -eq 0 ]
	done
	# At run time too: listing templates opens the DB and nothing more.
	# (A claim from the pool loading no libvirt is tested in pool.bats.)
	run env LD_DEBUG=files space-template ls
	refute_output --partial libvirt.so
	refute_output --partial libcurl.so
	refute_output --partial libarchive.so
	refute_output --partial libpq.so
	assert_output --partial libsqlite3.so.0
}
