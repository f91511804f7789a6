#!/usr/bin/env bats
# Clones share the template's extents: creating costs no disk, writing costs
# only what was written, and only in the sandbox that wrote it.
load helper

setup_file() {
	import_minimal
}

teardown_file() {
	remove_listed "$BATS_FILE_TMPDIR/ids"
}

excl() {
	space-ls "$1" | jq -r .disk_exclusive_bytes
}

@test "space-create -n 3 gives three sandboxes that share the template" {
	run space-create --template minimal -n 3 --label suite=clone
	assert_success
	jout -r .id > "$BATS_FILE_TMPDIR/ids"
	[ "$(jout -s 'map(select(.ok and .state == "running")) | length')" -eq 3 ]
	[ "$(sort -u "$BATS_FILE_TMPDIR/ids" | wc -l)" -eq 3 ]
	while read -r id; do
		b=$(excl "$id")
		echo "# $id exclusive $b bytes after boot" >&3
		# Booting writes a little (ext4 journal, superblock); a copy would be
		# the whole image, hundreds of MiB.
		[ "$b" -lt $((2 * 1024 * 1024)) ]
		space-ls "$id" | jq -e '.labels.suite == "clone"'
	done < "$BATS_FILE_TMPDIR/ids"
}

@test "a 10 MiB write inside one sandbox grows only that one" {
	mapfile -t ids < "$BATS_FILE_TMPDIR/ids"
	[ ${#ids[@]} -eq 3 ]
	before0=$(excl "${ids[0]}"); before1=$(excl "${ids[1]}"); before2=$(excl "${ids[2]}")
	run space-exec "${ids[0]}" -- sh -c 'dd if=/dev/urandom of=/root/blob bs=1M count=10 2>/dev/null && sync'
	assert_success
	after0=$(excl "${ids[0]}"); after1=$(excl "${ids[1]}"); after2=$(excl "${ids[2]}")
	echo "# grew by $((after0 - before0)), others by $((after1 - before1)) and $((after2 - before2))" >&3
	[ $((after0 - before0)) -ge $((10 * 1024 * 1024)) ]
	[ $((after0 - before0)) -lt $((12 * 1024 * 1024)) ]
	[ $((after1 - before1)) -lt $((512 * 1024)) ]
	[ $((after2 - before2)) -lt $((512 * 1024)) ]
}
