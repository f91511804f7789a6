#!/usr/bin/env bats
# Snapshots in real VMs (design.md): disk snapshots and full checkpoints,
# rollback (and its undo), fork, retention with a fake clock, crash recovery
# from the newest full checkpoint, and kill -9 of the commands halfway.
load helper

setup_file() {
	import_minimal
	create > "$BATS_FILE_TMPDIR/ids"
	export ID=$(head -n 1 "$BATS_FILE_TMPDIR/ids")
}

teardown_file() {
	remove_listed "$BATS_FILE_TMPDIR/ids"
}

state() {
	space-ls "$1" | jq -r '"\(.state)/\(.vm)"'
}

# Starts a counter in the guest: /tmp/counter goes up 5 times a second.
count() {
	space-exec "$1" -d -- sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.2; done' >/dev/null
	sleep 1
}

counter() {
	space-exec "$1" -- cat /tmp/counter
}

snap_of() {
	space-snap "$@" | jq -r 'select(.ok) | .snap'
}

@test "a disk snapshot: read-only, the VM not paused, listed, removed idempotently" {
	run space-snap "$ID"
	assert_success
	jout -e '.ok and .kind == "disk" and (.snap | length) == 12 and .state == "ready" and (.paused_ms | not) and (.exclusive_bytes >= 0) and (.ms >= 0)'
	s=$(jout -r .snap)
	[ "$(btrfs property get -ts "$SPACE_ROOT/snapshots/$ID/$s" ro)" = "ro=true" ]
	[ "$(state "$ID")" = running/running ]
	run space-snap ls "$ID"
	assert_success
	jout -s -e --arg s "$s" 'any(.[]; .snap == $s and .kind == "disk")'
	run space-snap rm "$ID" "$s"
	assert_success
	jout -e '.ok and .removed == true'
	[ ! -e "$SPACE_ROOT/snapshots/$ID/$s" ]
	run space-snap rm "$ID" "$s"
	assert_success
	jout -e '.ok and .removed == false'
}

@test "a full checkpoint pauses the guest briefly and holds its memory" {
	run space-snap --full --tag keep "$ID"
	assert_success
	jout -e '.ok and .kind == "full" and .tag == "keep" and .paused_ms > 0 and .paused_ms <= .ms'
	s=$(jout -r .snap)
	echo "# paused $(jout -r .paused_ms) ms of $(jout -r .ms) ms" >&3
	[ -s "$SPACE_ROOT/snapshots/$ID/$s/mem.sav" ]
	[ "$(btrfs property get -ts "$SPACE_ROOT/snapshots/$ID/$s" ro)" = "ro=true" ]
	[ "$(state "$ID")" = running/running ]
	space-snap rm "$ID" "$s"
}

@test "rm -rf, then rollback to the disk snapshot before it: the files are back, same checksums" {
	space-exec "$ID" -- sh -c 'mkdir -p /root/work/sub && head -c 1048576 /dev/urandom > /root/work/blob && seq 1000 > /root/work/sub/numbers && ln -s blob /root/work/link && sync'
	before=$(space-exec "$ID" -- sh -c 'cd /root/work && find . -type f | sort | xargs sha256sum')
	s=$(snap_of "$ID")
	space-exec "$ID" -- rm -rf /root/work
	run space-exec "$ID" -- ls /root/work
	[ "$status" -ne 0 ]
	run space-rollback "$ID" "$s"
	assert_success
	jout -e --arg s "$s" '.ok and .snap == $s and .kind == "disk" and .state == "running" and (.saved | length) == 12'
	saved=$(jout -r .saved)
	after=$(space-exec "$ID" -- sh -c 'cd /root/work && find . -type f | sort | xargs sha256sum')
	[ "$before" = "$after" ]
	run space-exec "$ID" -- readlink /root/work/link
	assert_output blob
	space-ls "$ID" | jq -e --arg s "$s" '.state == "running" and .recovered.snap == $s and .recovered.why == "rollback"'
	# The state before the rollback was kept: rolling back to it undoes it.
	space-snap ls "$ID" | jq -s -e --arg s "$saved" 'any(.[]; .snap == $s and .kind == "full")'
	run space-rollback "$ID" "$saved"
	assert_success
	run space-exec "$ID" -- ls /root/work
	[ "$status" -ne 0 ]
}

@test "a counting process, full checkpoint, more counting, rollback: it counts on from the checkpoint" {
	count "$ID"
	s=$(snap_of --full "$ID")
	c1=$(counter "$ID")
	sleep 3
	c2=$(counter "$ID")
	run space-rollback "$ID" "$s"
	assert_success
	jout -e '.kind == "full"'
	c3=$(counter "$ID")
	sleep 1
	c4=$(counter "$ID")
	echo "# after the checkpoint $c1, 3 s later $c2, after the rollback $c3, then $c4" >&3
	[ $((c2 - c1)) -ge 10 ]
	# Back near the checkpoint's value, well below where it had got to.
	[ "$c3" -lt $((c1 + 8)) ]
	[ "$c3" -lt "$c2" ]
	# And the same process goes on counting.
	[ "$c4" -gt "$c3" ]
}

@test "fork of a sandbox running a process: both copies run it, their files diverge, little disk" {
	id=$(own)
	count "$id"
	space-exec "$id" -- sh -c 'echo source > /root/who; sync'
	run space-fork "$id" -n 2
	assert_success
	[ "$(jout -s length)" -eq 2 ]
	jout -s -e --arg id "$id" 'all(.ok and .from == $id and .kind == "full" and .state == "running")'
	mapfile -t forks < <(jout -r .id)
	printf '%s\n' "${forks[@]}" >> "$BATS_FILE_TMPDIR/ids"
	[ "${forks[0]}" != "${forks[1]}" ]
	for f in "${forks[@]}"; do
		a=$(counter "$f")
		sleep 1
		b=$(counter "$f")
		echo "# fork $f counts $a -> $b" >&3
		[ "$b" -gt "$a" ]
		run space-exec "$f" -- hostname
		assert_output "$f"
		space-ls "$f" | jq -e '.state == "running" and .disk_exclusive_bytes < 16777216'
	done
	# Each copy writes its own file; the others do not see it.
	space-exec "${forks[0]}" -- sh -c 'echo fork0 > /root/who'
	space-exec "${forks[1]}" -- sh -c 'echo fork1 > /root/who'
	[ "$(space-exec "$id" -- cat /root/who)" = source ]
	[ "$(space-exec "${forks[0]}" -- cat /root/who)" = fork0 ]
	[ "$(space-exec "${forks[1]}" -- cat /root/who)" = fork1 ]
	# Their random generators were reseeded apart.
	r0=$(space-exec "${forks[0]}" -- sh -c 'head -c 16 /dev/urandom | od -An -tx1')
	r1=$(space-exec "${forks[1]}" -- sh -c 'head -c 16 /dev/urandom | od -An -tx1')
	[ "$r0" != "$r1" ]
	space-rm "${forks[@]}" >/dev/null
}

@test "fork from a disk snapshot boots on that disk" {
	space-exec "$ID" -- sh -c 'echo then > /root/when; sync'
	s=$(snap_of "$ID")
	space-exec "$ID" -- sh -c 'echo now > /root/when'
	run space-fork "$ID" "$s"
	assert_success
	jout -e --arg s "$s" '.ok and .snap == $s and .kind == "disk"'
	f=$(jout -r .id)
	echo "$f" >> "$BATS_FILE_TMPDIR/ids"
	[ "$(space-exec "$f" -- cat /root/when)" = then ]
	[ "$(space-exec "$ID" -- cat /root/when)" = now ]
	space-rm "$f" >/dev/null
}

@test "kill -9 of QEMU: reconcile recovers it from its newest full checkpoint, uptime goes on from there" {
	id=$(own)
	space-snap --full "$id" >/dev/null
	s=$(snap_of --full "$id")
	u0=$(space-exec "$id" -- cut -d. -f1 /proc/uptime)
	sleep 4
	u1=$(space-exec "$id" -- cut -d. -f1 /proc/uptime)
	pid=$(pgrep -f "guest=sp-$id" | head -n 1)
	[ -n "$pid" ]
	kill -9 "$pid"
	for _ in $(seq 50); do
		[ "$(space-ls "$id" | jq -r .vm)" != running ] && break
		sleep 0.1
	done
	run space-reconcile --once
	assert_success
	echo "$output" | sed 's/^/# /' >&3
	jout -s -e --arg id "$id" 'any(.[]; .id == $id and .action == "marked-failed" and .ok)'
	jout -s -e --arg id "$id" --arg s "$s" 'any(.[]; .id == $id and .action == "recovered" and .ok and .snap == $s)'
	[ "$(state "$id")" = running/running ]
	u2=$(space-exec "$id" -- cut -d. -f1 /proc/uptime)
	echo "# uptime at the checkpoint ~$u0, before the kill $u1, after recovery $u2" >&3
	[ "$u2" -ge "$u0" ]
	[ "$u2" -lt "$u1" ]
	space-ls "$id" | jq -e --arg s "$s" '.recovered.why == "crash" and .recovered.snap == $s'
	# The disk as the crash left it was set aside as a disk snapshot.
	saved=$(space-ls "$id" | jq -r .recovered.saved)
	space-snap ls "$id" | jq -s -e --arg s "$saved" 'any(.[]; .snap == $s and .kind == "disk")'
}

@test "kill -9 of space-rollback halfway: reconcile finishes the rollback" {
	id=$(own)
	space-exec "$id" -- sh -c 'echo one > /root/v; sync'
	s=$(snap_of --full "$id")
	for point in rollback-after-claim rollback-after-delete rollback-after-copy; do
		space-exec "$id" -- sh -c 'echo two > /root/v; sync'
		run env SPACE_CRASH_AT=$point space-rollback "$id" "$s"
		[ "$status" -eq 137 ]
		[ "$(space-ls "$id" | jq -r .state)" = recovering ]
		run space-reconcile --once
		assert_success
		echo "# $point: $output" >&3
		jout -s -e --arg id "$id" 'any(.[]; .id == $id and .action == "recovered" and .ok)'
		[ "$(state "$id")" = running/running ]
		[ "$(space-exec "$id" -- cat /root/v)" = one ]
	done
}

@test "kill -9 of space-snap halfway: reconcile drops the snapshot and resumes the VM" {
	id=$(own)
	n0=$(space-snap ls "$id" | wc -l)
	run env SPACE_CRASH_AT=snap-full-paused space-snap --full "$id"
	[ "$status" -eq 137 ]
	[ "$(space-ls "$id" | jq -r .vm)" = paused ]
	run env SPACE_CRASH_AT=snap-after-row space-snap "$id"
	[ "$status" -eq 137 ]
	[ "$(space-snap ls "$id" | jq -s 'map(select(.state == "taking")) | length')" -eq 2 ]
	run space-reconcile --once
	assert_success
	echo "$output" | sed 's/^/# /' >&3
	[ "$(jout -s --arg id "$id" 'map(select(.id == $id and .action == "dropped-snapshot" and .ok)) | length')" -eq 2 ]
	[ "$(state "$id")" = running/running ]
	[ "$(space-snap ls "$id" | wc -l)" -eq "$n0" ]
	[ "$(ls "$SPACE_ROOT/snapshots/$id" | wc -l)" -eq "$n0" ]
}

@test "space-gc with a fake clock: exactly the snapshots the tiers keep survive" {
	id=$(own)
	t0=$((500000 * 3600))	# on the hour
	declare -A snap
	for off in 0 300 600 1200 3600 3900 7200 7500 7800; do
		tag=()
		[ "$off" -eq 300 ] && tag=(--tag pinned)
		snap[$off]=$(SPACE_NOW=$((t0 + off)) snap_of "${tag[@]}" "$id")
		[ -n "${snap[$off]}" ]
	done
	export SPACE_RETAIN="disk:5m:3, disk:1h:2"
	# Newest per 5 min, 3 of them: 7800 7500 7200; newest per hour, 2 of
	# them: 7800 3900; the tag keeps 300.  Gone: 0 600 1200 3600.
	run space-gc --dry-run
	assert_success
	[ "$(jout -s --arg id "$id" 'map(select(.id == $id)) | length')" -eq 4 ]
	jout -s -e --arg id "$id" 'map(select(.id == $id)) | all(.deleted == false)'
	[ "$(space-snap ls "$id" | wc -l)" -eq 9 ]
	run space-gc
	assert_success
	gone=$(jout -r --arg id "$id" 'select(.id == $id and .deleted) | .snap' | sort)
	want=$(printf '%s\n' "${snap[0]}" "${snap[600]}" "${snap[1200]}" "${snap[3600]}" | sort)
	[ "$gone" = "$want" ]
	kept=$(space-snap ls "$id" | jq -r .snap | sort)
	want=$(printf '%s\n' "${snap[300]}" "${snap[3900]}" "${snap[7200]}" "${snap[7500]}" "${snap[7800]}" | sort)
	[ "$kept" = "$want" ]
	for off in 0 600 1200 3600; do
		[ ! -e "$SPACE_ROOT/snapshots/$id/${snap[$off]}" ]
	done
	# A second pass has nothing left to delete.
	run space-gc
	assert_success
	[ "$(jout -s --arg id "$id" 'map(select(.id == $id)) | length')" -eq 0 ]
}

@test "bad input and illegal moves: clear errors, nothing changed" {
	run space-snap rm "$ID" "../../etc"
	[ "$status" -eq 100 ]
	jout -e '.error == "bad-input"'
	run space-rollback "$ID" aaaaaaaaaaaa
	[ "$status" -eq 1 ]
	jout -e '.error == "not-found"'
	[ "$(state "$ID")" = running/running ]
	run space-snap zzzzzzzzzzzz
	[ "$status" -eq 1 ]
	jout -e '.error == "not-found"'
	run space-snap --tag 'a/b' "$ID"
	[ "$status" -eq 100 ]
	run space-fork "$ID" -n 0
	[ "$status" -eq 100 ]
	run env SPACE_RETAIN="disk:5x:1" space-gc
	[ "$status" -eq 100 ]
	run env SPACE_NOW=yesterday space-snap "$ID"
	[ "$status" -eq 100 ]
	id=$(own)
	space-stop "$id" >/dev/null
	run space-snap --full "$id"
	[ "$status" -eq 1 ]
	jout -e '.error == "bad-state"'
	# A stopped sandbox still takes disk snapshots.
	run space-snap "$id"
	assert_success
}

@test "removing a sandbox removes its snapshots, rows and subvolumes" {
	id=$(own)
	space-snap "$id" >/dev/null
	space-snap --full "$id" >/dev/null
	[ "$(ls "$SPACE_ROOT/snapshots/$id" | wc -l)" -eq 2 ]
	space-rm "$id" >/dev/null
	[ ! -e "$SPACE_ROOT/snapshots/$id" ]
	[ "$(db_sql "SELECT count(*) FROM snapshots WHERE id = '$id'")" -eq 0 ]
}
