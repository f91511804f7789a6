#!/usr/bin/env bats
# Suspend to a real S3-compatible server (s3rver on loopback) and restore on
# another node: two nodes on this machine are two SPACE_ROOTs on two loop
# btrfs filesystems with their own SPACE_NODE and SPACE_RUN, one shared DB
# and one bucket (design.md).
load helper

setup_file() {
	import_minimal
	space-template warm minimal >/dev/null
	export ROOT_A=$SPACE_ROOT
	export SPACE_DB="sqlite:$ROOT_A/space.db"
	export ROOT_B=${ROOT_A}-b
	export RUN_B=${SPACE_RUN}-b
	export NODE_B=${SPACE_NODE}-b
	# Node B starts empty, even after a run stopped before its teardown.
	remove_node "$ROOT_B" "$RUN_B"
	SPACE_ROOT=$ROOT_B SPACE_RUN=$RUN_B SPACE_NODE=$NODE_B \
	    space-init --loop-size 6G >/dev/null
	# Each node its own node manager, when the commands go through one
	# (as space they always do).
	if [ "${SPACE_LIBVIRT_URI:-}" = noded ] || [ -n "${SPACE_AS_SPACE_BIN:-}" ]; then
		on_b exec space-noded >"$BATS_FILE_TMPDIR/noded-b.log" 2>&1 3>&- &
		echo $! > "$BATS_FILE_TMPDIR/noded-b.pid"
		for _ in $(seq 50); do [ -S "$RUN_B/noded.sock" ] && break; sleep 0.1; done
	fi
	# The bucket: s3rver on a free loopback port, its files in a temp dir.
	export S3DIR=$BATS_FILE_TMPDIR/s3
	mkdir -p "$S3DIR"
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	s3rver -d "$S3DIR" -a 127.0.0.1 -p "$port" --silent \
	    --configure-bucket spacetest >"$BATS_FILE_TMPDIR/s3rver.log" 2>&1 &
	echo $! > "$BATS_FILE_TMPDIR/s3rver.pid"
	for _ in $(seq 100); do
		curl -s -o /dev/null "http://127.0.0.1:$port/" && break
		sleep 0.1
	done
	export SPACE_S3_ENDPOINT=http://127.0.0.1:$port
	export SPACE_STORE=s3://spacetest/suite
	export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
	export SPACE_KMS=file:$BATS_FILE_TMPDIR/keys/default.key
	: > "$BATS_FILE_TMPDIR/ids"
}

teardown_file() {
	remove_listed "$BATS_FILE_TMPDIR/ids"
	on_b remove_listed "$BATS_FILE_TMPDIR/ids"
	kill "$(cat "$BATS_FILE_TMPDIR/s3rver.pid")" 2>/dev/null || true
	on_b space-reconcile --once >/dev/null 2>&1 || true
	if [ -f "$BATS_FILE_TMPDIR/noded-b.pid" ]; then
		kill "$(cat "$BATS_FILE_TMPDIR/noded-b.pid")" 2>/dev/null || true
	fi
	remove_node "$ROOT_B" "$RUN_B"
}

# Runs a command as node B.
on_b() {
	SPACE_ROOT=$ROOT_B SPACE_RUN=$RUN_B SPACE_NODE=$NODE_B "$@"
}

count() {
	space-exec "$1" -d -- sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.2; done' >/dev/null
	sleep 1
}

# An object straight from and to the bucket (s3rver checks no signature).
s3get() {
	curl -sf -o "$2" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
	    "$SPACE_S3_ENDPOINT/spacetest/suite/$1"
}

s3put() {
	curl -sf -X PUT -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
	    --data-binary @"$2" "$SPACE_S3_ENDPOINT/spacetest/suite/$1" >/dev/null
}

# The stored objects under a key prefix, as s3rver keeps them on disk.
objects() {
	find "$S3DIR/spacetest/suite/$1" -type f -name '*._S3rver_object' 2>/dev/null
}

@test "suspend on node A, restore on node B: files match, the counter goes on" {
	id=$(own)
	space-exec "$id" -- sh -c 'mkdir -p /root/w && head -c 3145728 /dev/urandom > /root/w/r && seq 5000 > /root/w/n && sync'
	sums=$(space-exec "$id" -- sh -c 'sha256sum /root/w/r /root/w/n')
	count "$id"
	run space-suspend "$id"
	assert_success
	echo "# $output" >&3
	jout -e '.ok and .state == "suspended" and .bytes_uploaded > 0 and (.snap | length) == 12'
	c0=$(space-ls "$id" | jq -r .state)
	[ "$c0" = suspended ]
	# Node A keeps nothing of it: no VM, no subvolume.
	[ ! -e "$ROOT_A/sandboxes/$id" ]
	! virsh -c qemu:///system domstate "sp-$id" >/dev/null 2>&1 || false
	# Node B has never seen the template: the restore pulls it.
	run on_b space-restore "$id"
	assert_success
	echo "# $output" >&3
	jout -e --arg n "$NODE_B" '.ok and .state == "running" and .node == $n and .bytes_downloaded > 0'
	[ "$(on_b space-exec "$id" -- sh -c 'sha256sum /root/w/r /root/w/n')" = "$sums" ]
	a=$(on_b space-exec "$id" -- cat /tmp/counter)
	sleep 1
	b=$(on_b space-exec "$id" -- cat /tmp/counter)
	echo "# counter on B: $a then $b" >&3
	[ "$b" -gt "$a" ]
	[ -d "$ROOT_B/sandboxes/$id" ]
	on_b space-ls "$id" | jq -e --arg n "$NODE_B" '.state == "running" and .node == $n'
}

@test "space-template push and pull: once per lineage, then nothing to do" {
	digest=$(space-template ls | jq -r 'select(.template == "minimal" and .local) | .digest' | tail -n 1)
	run space-template push "minimal@$digest"
	assert_success
	jout -e '.ok and .pushed == false and (.lineage | length) == 36'
	lineage=$(jout -r .lineage)
	# Node B received it with the first restore: same lineage, nothing to pull.
	run on_b space-template pull "minimal@$digest"
	assert_success
	jout -e --arg l "$lineage" '.ok and .pulled == false and .lineage == $l'
	run space-template pull "minimal@nothex"
	[ "$status" -eq 100 ]
}

@test "space-restore --node: the named node's reconcile pass restores it there" {
	id=$(own)
	space-exec "$id" -- sh -c 'echo moved > /root/where; sync'
	space-suspend --keep-local "$id" >/dev/null
	[ -d "$ROOT_A/sandboxes/$id" ]
	run space-restore --node "$NODE_B" "$id"
	assert_success
	jout -e --arg n "$NODE_B" '.queued == true and .node == $n'
	# Node A's own pass leaves the sandbox to B, and releases the copy
	# --keep-local kept here: it is of no use to A any more.
	run space-reconcile --once
	assert_success
	[ "$(space-ls "$id" | jq -r .state)" = suspended ]
	jout -s -e --arg id "$id" 'any(.[]; .id == $id and .action == "released-left-behind" and .ok)'
	[ ! -e "$ROOT_A/sandboxes/$id" ]
	[ ! -e "$ROOT_A/snapshots/$id" ]
	run on_b space-reconcile --once
	assert_success
	echo "$output" | sed 's/^/# /' >&3
	jout -s -e --arg id "$id" 'any(.[]; .id == $id and .action == "restored" and .ok)'
	[ "$(on_b space-exec "$id" -- cat /root/where)" = moved ]
	# And A's next pass leaves B's running sandbox alone.
	run space-reconcile --once
	assert_success
	[ "$(on_b space-exec "$id" -- cat /root/where)" = moved ]
}

@test "bytes: 10 MiB written since create cost at most 11 MiB of delta plus the compressed memory; the template goes up once" {
	id=$(own)
	space-exec "$id" -- sh -c 'head -c 10485760 /dev/urandom > /root/ten; sync'
	run space-suspend --keep-local "$id"
	assert_success
	up=$(jout -r .bytes_uploaded)
	tup=$(jout -r .template_bytes_uploaded)
	snap=$(jout -r .snap)
	mem=$(zstd -q -c -3 "$ROOT_A/snapshots/$id/$snap/mem.sav" | wc -c)
	echo "# uploaded $up bytes (template $tup more); the memory alone compresses to $mem" >&3
	[ "$tup" -eq 0 ]
	[ "$up" -le $((11 * 1048576 + mem)) ]
	# --keep-local kept this node's copy: restoring here downloads nothing.
	run space-restore "$id"
	assert_success
	jout -e '.state == "running" and .bytes_downloaded == 0'
}

@test "no plaintext of a marker written in the guest reaches the store" {
	id=$(own)
	marker="space-marker-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	space-exec "$id" -- sh -c "echo $marker > /root/marker; sync"
	space-exec "$id" -d -- sh -c "M=$marker; while :; do sleep 1; done" >/dev/null
	space-suspend "$id" >/dev/null
	n=$(objects "sandboxes/$id" | wc -l)
	[ "$n" -ge 2 ]
	! objects "" | xargs grep -l "$marker" || false
	# The manifest says what there is, and how the key is wrapped.
	m=$(objects "sandboxes/$id" | grep manifest.json)
	jq -e '.version == 1 and (.key.wrapped | startswith("v1:")) and (.artifacts[0].sha256 | length) == 64' "$m"
	run space-restore "$id"
	assert_success
	[ "$(space-exec "$id" -- cat /root/marker)" = "$marker" ]
}

@test "a revoked tenant key: restore fails with key-revoked and changes nothing" {
	key=$BATS_FILE_TMPDIR/keys/revokee.key
	run space-key set revokee "file:$key"
	[ "$status" -ne 0 ]	# no such key file yet
	mkdir -p "$(dirname "$key")"
	head -c 32 /dev/urandom > "$key"
	chmod 600 "$key"
	runners "$key"
	run space-key set revokee "file:$key"
	assert_success
	id=$(own --label tenant=revokee)
	space-suspend "$id" >/dev/null
	rm -f "$key"
	run space-restore "$id"
	[ "$status" -eq 1 ]
	jout -e '.error == "key-revoked"'
	[ "$(space-ls "$id" | jq -r .state)" = suspended ]
}

@test "key rotation re-wraps the data keys: restore works with only the new key" {
	old=$BATS_FILE_TMPDIR/keys/rot-old.key new=$BATS_FILE_TMPDIR/keys/rot-new.key
	mkdir -p "$BATS_FILE_TMPDIR/keys"
	head -c 32 /dev/urandom > "$old"
	head -c 32 /dev/urandom > "$new"
	chmod 600 "$old" "$new"
	runners "$old" "$new"
	space-key set rotor "file:$old" >/dev/null
	id=$(own --label tenant=rotor)
	space-exec "$id" -- sh -c 'echo kept > /root/k; sync'
	space-suspend "$id" >/dev/null
	before=$(objects "sandboxes/$id" | grep -v manifest | xargs sha256sum)
	run space-key rotate rotor "file:$new"
	assert_success
	jout -s -e --arg id "$id" 'any(.[]; .id == $id and .rewrapped)'
	# No data moved: the artifact is the same bytes.
	[ "$(objects "sandboxes/$id" | grep -v manifest | xargs sha256sum)" = "$before" ]
	rm -f "$old"
	run space-restore "$id"
	assert_success
	[ "$(space-exec "$id" -- cat /root/k)" = kept ]
}

@test "kill -9 of space-suspend at each of 8 points: never restorable-but-corrupt; a rerun finishes" {
	local files
	# The delta is a file of no name: a killed suspend leaves none behind.
	files=$(find "$SPACE_ROOT/tmp" -maxdepth 1 -type f | wc -l)
	for point in suspend-after-claim suspend-after-checkpoint \
	    suspend-after-template suspend-before-upload suspend-after-upload \
	    suspend-after-manifest suspend-after-restorable suspend-after-suspended; do
		id=$(own)
		space-exec "$id" -- sh -c "echo $point > /root/p; sync"
		run env SPACE_CRASH_AT=$point space-suspend "$id"
		[ "$status" -eq 137 ]
		[ "$(find "$SPACE_ROOT/tmp" -maxdepth 1 -type f | wc -l)" -eq "$files" ]
		st=$(space-ls "$id" | jq -r .state)
		# Restorable only when it really is: a restore now either works
		# or refuses without harm.
		run space-restore "$id"
		echo "# $point: state $st, restore now: $output" >&3
		if [ "$status" -eq 0 ]; then
			[ "$(space-exec "$id" -- cat /root/p)" = "$point" ]
		else
			jout -e '.error == "bad-state" or .error == "not-restorable"'
		fi
		# Suspending again finishes the job, and that restores.
		if [ "$(space-ls "$id" | jq -r .state)" != running ]; then
			run space-suspend "$id"
			assert_success
		fi
		run space-suspend "$id"
		assert_success
		run space-restore "$id"
		assert_success
		[ "$(space-exec "$id" -- cat /root/p)" = "$point" ]
		space-rm "$id" >/dev/null
	done
}

@test "two sandboxes suspended at once, then restored at once: each gets its own files back" {
	local a b pa pb
	a=$(own)
	b=$(own)
	space-exec "$a" -- sh -c 'head -c 4194304 /dev/urandom > /root/r; md5sum /root/r > /root/sum; sync'
	space-exec "$b" -- sh -c 'head -c 4194304 /dev/urandom > /root/r; md5sum /root/r > /root/sum; sync'
	space-suspend "$a" >"$BATS_TEST_TMPDIR/a" & pa=$!
	space-suspend "$b" >"$BATS_TEST_TMPDIR/b" & pb=$!
	wait "$pa"
	wait "$pb"
	space-restore "$a" >"$BATS_TEST_TMPDIR/a" & pa=$!
	space-restore "$b" >"$BATS_TEST_TMPDIR/b" & pb=$!
	wait "$pa"
	wait "$pb"
	run space-exec "$a" -- md5sum -c /root/sum
	assert_success
	run space-exec "$b" -- md5sum -c /root/sum
	assert_success
	[ "$(space-exec "$a" -- cat /root/sum)" != "$(space-exec "$b" -- cat /root/sum)" ]
	space-rm "$a" "$b" >/dev/null
}

@test "a corrupted or truncated artifact is refused before anything is applied" {
	id=$(own)
	space-exec "$id" -- sh -c 'echo whole > /root/w; sync'
	snap=$(space-suspend "$id" | jq -r .snap)
	delta=sandboxes/$id/$snap/delta.zst.enc man=sandboxes/$id/$snap/manifest.json
	s3get "$delta" "$BATS_FILE_TMPDIR/good"
	s3get "$man" "$BATS_FILE_TMPDIR/man"
	# One byte flipped in the middle.
	python3 - "$BATS_FILE_TMPDIR/good" "$BATS_FILE_TMPDIR/bad" <<-'EOF'
		import sys
		b = bytearray(open(sys.argv[1], 'rb').read())
		b[len(b) // 2] ^= 0x40
		open(sys.argv[2], 'wb').write(b)
	EOF
	s3put "$delta" "$BATS_FILE_TMPDIR/bad"
	run space-restore "$id"
	[ "$status" -eq 1 ]
	jout -e '.error == "corrupt"'
	[ "$(space-ls "$id" | jq -r .state)" = suspended ]
	[ ! -e "$ROOT_A/sandboxes/$id" ]
	# Truncated.
	head -c 1000 "$BATS_FILE_TMPDIR/good" > "$BATS_FILE_TMPDIR/short"
	s3put "$delta" "$BATS_FILE_TMPDIR/short"
	run space-restore "$id"
	[ "$status" -eq 1 ]
	jout -e '.error == "corrupt"'
	# Longer than the manifest says: the download stops at its size.
	cat "$BATS_FILE_TMPDIR/good" "$BATS_FILE_TMPDIR/good" > "$BATS_FILE_TMPDIR/long"
	s3put "$delta" "$BATS_FILE_TMPDIR/long"
	run space-restore "$id"
	[ "$status" -eq 1 ]
	jout -e '.error == "corrupt"'
	# A manifest that is not one of this snapshot.
	s3put "$delta" "$BATS_FILE_TMPDIR/good"
	echo '{"version":1}' > "$BATS_FILE_TMPDIR/badman"
	s3put "$man" "$BATS_FILE_TMPDIR/badman"
	run space-restore "$id"
	[ "$status" -eq 1 ]
	jout -e '.error == "corrupt"'
	# Put back, it restores.
	s3put "$man" "$BATS_FILE_TMPDIR/man"
	run space-restore "$id"
	assert_success
	[ "$(space-exec "$id" -- cat /root/w)" = whole ]
}

@test "space-rm of a suspended sandbox deletes its objects from the store" {
	id=$(own)
	space-suspend "$id" >/dev/null
	[ "$(objects "sandboxes/$id" | wc -l)" -ge 2 ]
	run space-rm "$id"
	assert_success
	[ "$(objects "sandboxes/$id" | wc -l)" -eq 0 ]
	# The template's stream stays for the others.
	[ "$(objects templates | wc -l)" -ge 2 ]
}
