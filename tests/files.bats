#!/usr/bin/env bats
# Files in one real sandbox: space-cp both ways and space-fs, binary data
# unchanged, trees with modes and symlinks kept, bad paths refused.
load helper

setup_file() {
	import_minimal
	create > "$BATS_FILE_TMPDIR/ids"
	export ID=$(head -n 1 "$BATS_FILE_TMPDIR/ids")
	# Every byte value, and 50 MiB of noise.
	export T="$BATS_FILE_TMPDIR"
	for i in $(seq 0 255); do printf "\\$(printf %03o "$i")"; done > "$T/bytes"
	head -c $((50 << 20)) /dev/urandom > "$T/big"
}

teardown_file() {
	remove_listed "$BATS_FILE_TMPDIR/ids"
}

sum() {
	sha256sum "$1" | cut -d' ' -f1
}

@test "the sandbox is running" {
	[ -n "$ID" ]
	run space-ls "$ID"
	assert_success
	jout -e '.state == "running"'
}

@test "space-fs write and cat: all 256 byte values round-trip" {
	[ "$(stat -c %s "$T/bytes")" -eq 256 ]
	run space-fs "$ID" write /root/bytes < "$T/bytes"
	assert_success
	jout -e --arg id "$ID" '.id == $id and .ok and .path == "/root/bytes" and .size == 256'
	space-fs "$ID" cat /root/bytes > "$T/bytes.back"
	[ "$(sum "$T/bytes")" = "$(sum "$T/bytes.back")" ]
	run space-exec "$ID" -- sha256sum /root/bytes
	[ "${output%% *}" = "$(sum "$T/bytes")" ]
}

@test "space-fs write and cat: 50 MiB round-trip" {
	s=$(date +%s%N)
	space-fs "$ID" write /root/big < "$T/big"
	m=$(date +%s%N)
	space-fs "$ID" cat /root/big > "$T/big.back"
	t=$(date +%s%N)
	echo "# space-fs write 50 MiB: $(( (m - s) / 1000000 )) ms, cat: $(( (t - m) / 1000000 )) ms" >&3
	[ "$(sum "$T/big")" = "$(sum "$T/big.back")" ]
	run space-exec "$ID" -- sha256sum /root/big
	[ "${output%% *}" = "$(sum "$T/big")" ]
	space-fs "$ID" rm /root/big >/dev/null
}

@test "space-cp: a 50 MiB file in and out unchanged" {
	s=$(date +%s%N)
	run space-cp "$T/big" "$ID:/root/big-in"
	m=$(date +%s%N)
	assert_success
	jout -e '.ok and (.to | endswith(":/root/big-in"))'
	run space-exec "$ID" -- sha256sum /root/big-in
	[ "${output%% *}" = "$(sum "$T/big")" ]
	mkdir -p "$T/out"
	runners "$T/out"
	m2=$(date +%s%N)
	run space-cp "$ID:/root/big-in" "$T/out/"
	t=$(date +%s%N)
	assert_success
	echo "# space-cp 50 MiB in: $(( (m - s) / 1000000 )) ms, out: $(( (t - m2) / 1000000 )) ms" >&3
	[ "$(sum "$T/big")" = "$(sum "$T/out/big-in")" ]
	space-fs "$ID" rm /root/big-in >/dev/null
}

@test "space-cp: 256 byte values in and out, to a new name" {
	run space-cp "$T/bytes" "$ID:/root/b2"
	assert_success
	run space-cp "$ID:/root/b2" "$T/b2.back"
	assert_success
	[ "$(sum "$T/bytes")" = "$(sum "$T/b2.back")" ]
}

@test "space-cp: a tree with a symlink and modes, in and out" {
	rm -rf "$T/tree" "$T/back"
	mkdir -p "$T/tree/sub" "$T/back"
	echo hello > "$T/tree/file"
	chmod 0751 "$T/tree/file"
	chmod 0700 "$T/tree/sub"
	cp "$T/bytes" "$T/tree/sub/bytes"
	ln -s file "$T/tree/link"
	runners "$T/tree" "$T/back"
	run space-cp "$T/tree" "$ID:/root"
	assert_success
	run space-exec "$ID" -- stat -c '%a %F' /root/tree/file /root/tree/sub /root/tree/link
	assert_success
	assert_output $'751 regular file\n700 directory\n777 symbolic link'
	run space-exec "$ID" -- readlink /root/tree/link
	assert_output file
	run space-cp "$ID:/root/tree" "$T/back"
	assert_success
	[ "$(stat -c %a "$T/back/tree/file")" = 751 ]
	[ "$(stat -c %a "$T/back/tree/sub")" = 700 ]
	[ "$(readlink "$T/back/tree/link")" = file ]
	[ "$(sum "$T/back/tree/sub/bytes")" = "$(sum "$T/bytes")" ]
}

@test "space-cp: - is a tar stream on stdout and stdin" {
	run bash -c "space-cp $ID:/root/tree - | tar -tf - | sort"
	assert_success
	assert_output $'tree/\ntree/file\ntree/link\ntree/sub/\ntree/sub/bytes'
	space-fs "$ID" mkdir /root/fromtar >/dev/null
	run bash -c "tar -C '$T' -cf - bytes | space-cp - $ID:/root/fromtar"
	assert_success
	run space-exec "$ID" -- sha256sum /root/fromtar/bytes
	[ "${output%% *}" = "$(sum "$T/bytes")" ]
}

@test "space-fs ls, stat, mkdir -p, mv, rm -r" {
	run space-fs "$ID" mkdir -p /root/a/b/c
	assert_success
	jout -e '.ok and .path == "/root/a/b/c"'
	run space-fs "$ID" stat /root/a/b
	assert_success
	jout -e '.ok and .type == "dir" and .mode == 493 and .uid == 0'
	run space-fs "$ID" stat /root/tree/link
	jout -e '.type == "symlink" and .target == "file"'
	run space-fs "$ID" ls /root/tree
	assert_success
	[ "$(jout -s 'map(.name) | sort | join(",")' -r)" = "file,link,sub" ]
	jout -se 'map(select(.name == "file"))[0] | .type == "file" and .mode == 489 and .size == 6'
	run space-fs "$ID" mv /root/a /root/a2
	assert_success
	jout -e '.ok and .to == "/root/a2"'
	run space-fs "$ID" rm /root/a2
	[ "$status" -eq 1 ]
	jout -e '.ok == false and .error == "not-empty"'
	run space-fs "$ID" rm -r /root/a2
	assert_success
	run space-fs "$ID" stat /root/a2
	[ "$status" -eq 1 ]
	jout -e '.error == "not-found"'
}

@test "bad paths are bad input (100)" {
	run space-fs "$ID" stat relative/path
	[ "$status" -eq 100 ]
	jout -e '.error == "bad-input"'
	run space-fs "$ID" cat /root
	[ "$status" -eq 100 ]
	run space-fs "$ID" rm -r /
	[ "$status" -eq 100 ]
	run space-cp "$T/bytes" "$ID:relative"
	[ "$status" -eq 100 ]
	run space-cp "$T/bytes" "$T/other"
	[ "$status" -eq 100 ]
	run space-fs "$ID" frobnicate /x
	[ "$status" -eq 100 ]
	run space-fs aaaaaaaaaaaa stat /
	[ "$status" -eq 1 ]
}
