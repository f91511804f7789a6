#!/usr/bin/env bats
# pause, resume, stop, start on a real VM: each idempotent, illegal moves are
# bad-state and change nothing, and pause really stops the guest.
load helper

setup_file() {
	import_minimal
	create --env SUITE=lifecycle > "$BATS_FILE_TMPDIR/ids"
	export ID=$(head -n 1 "$BATS_FILE_TMPDIR/ids")
}

teardown_file() {
	remove_listed "$BATS_FILE_TMPDIR/ids"
}

state() {
	space-ls "$ID" | jq -r '"\(.state)/\(.vm)"'
}

counter() {
	space-exec "$ID" -- cat /tmp/counter
}

@test "pause stops the guest: a counter does not advance while paused" {
	space-exec "$ID" -- sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.2; done >/dev/null 2>&1 </dev/null & echo $! > /tmp/counter.pid'
	sleep 2
	c1=$(counter)
	run space-pause "$ID"
	assert_success
	jout -e '.ok and .state == "paused" and .changed == true'
	[ "$(state)" = "paused/paused" ]
	sleep 3
	run space-resume "$ID"
	assert_success
	jout -e '.ok and .state == "running" and .changed == true'
	c2=$(counter)
	echo "# counter $c1 before pause, $c2 right after 3 s paused" >&3
	# Running, 3 s would add ~15; paused it adds what ran around the calls.
	[ $((c2 - c1)) -le 4 ]
	sleep 2
	c3=$(counter)
	echo "# and $c3 after 2 s running again" >&3
	[ $((c3 - c2)) -ge 4 ]
	space-exec "$ID" -- sh -c 'kill $(cat /tmp/counter.pid)'
}

@test "pause and resume are idempotent" {
	run space-pause "$ID"
	jout -e '.changed == true'
	run space-pause "$ID"
	assert_success
	jout -e '.ok and .changed == false and .state == "paused"'
	run space-resume "$ID"
	jout -e '.changed == true'
	run space-resume "$ID"
	assert_success
	jout -e '.ok and .changed == false and .state == "running"'
}

@test "two racing pauses: both succeed, exactly one changed it" {
	space-pause "$ID" > "$BATS_TEST_TMPDIR/a" &
	space-pause "$ID" > "$BATS_TEST_TMPDIR/b" &
	wait
	[ "$(cat "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b" | jq -s 'map(select(.ok)) | length')" -eq 2 ]
	[ "$(cat "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b" | jq -s 'map(select(.changed)) | length')" -eq 1 ]
	[ "$(state)" = "paused/paused" ]
	space-resume "$ID"
}

@test "exec into a paused sandbox is refused clearly" {
	space-pause "$ID"
	run --separate-stderr space-exec "$ID" -- true
	space-resume "$ID"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"paused, not running"* ]]
}

@test "stop shuts the guest down, data on disk survives, start boots it again" {
	space-exec "$ID" -- sh -c 'echo kept > /root/marker; sync'
	boot1=$(space-exec "$ID" -- cat /proc/sys/kernel/random/boot_id)
	run space-stop "$ID"
	assert_success
	jout -e '.ok and .state == "stopped" and .changed == true and .forced == false'
	[ "$(state)" = "stopped/shutoff" ]
	run space-stop "$ID"
	assert_success
	jout -e '.changed == false'
	run space-start "$ID"
	assert_success
	jout -e '.ok and .state == "running" and .changed == true'
	run space-exec "$ID" -- cat /root/marker
	assert_output kept
	# A cold boot is told again who it is, its environment too.
	run space-exec "$ID" -- hostname
	assert_output "$ID"
	run space-exec "$ID" -- sh -c 'echo "$SUITE"'
	assert_output lifecycle
	boot2=$(space-exec "$ID" -- cat /proc/sys/kernel/random/boot_id)
	[ "$boot1" != "$boot2" ]
	run space-start "$ID"
	assert_success
	jout -e '.changed == false'
}

@test "illegal moves are bad-state and change nothing" {
	space-stop "$ID" >/dev/null
	for verb in space-pause space-resume; do
		run $verb "$ID"
		[ "$status" -eq 1 ]
		jout -e '.ok == false and .error == "bad-state"'
		[ "$(state)" = "stopped/shutoff" ]
	done
	space-start "$ID" >/dev/null
	space-pause "$ID" >/dev/null
	run space-start "$ID"
	[ "$status" -eq 1 ]
	jout -e '.error == "bad-state"'
	[ "$(state)" = "paused/paused" ]
	space-resume "$ID" >/dev/null
	[ "$(state)" = "running/running" ]
}

@test "lifecycle commands take ids on stdin, as JSON lines too" {
	run bash -c "space-ls $ID | space-pause"
	assert_success
	jout -e '.state == "paused"'
	run bash -c "echo $ID | space-resume"
	assert_success
	jout -e '.state == "running"'
	run space-pause aaaaaaaaaaaa
	[ "$status" -eq 1 ]
	jout -e '.error == "not-found"'
	run space-pause 'bad id'
	[ "$status" -eq 100 ]
}

@test "space-ls --idle-over | space-pause pauses only what was idle" {
	space-exec "$ID" -- true
	run space-ls --idle-over 3600
	assert_success
	refute_output --partial "$ID"
	# A loaded host slows the guest's sampler: wait (bounded) until idle.
	# The series is printed if the test fails.
	for _ in $(seq 10); do
		sleep 2
		idle=$(space-ls "$ID" | jq -r '.idle_s // 0')
		echo "idle_s $idle at $(date +%T.%N)"
		[ "$idle" -ge 4 ] && break
	done
	# Only this file's sandbox: the pipeline, not a sweep of the node.
	run bash -c "space-ls --idle-over 3 | jq -c 'select(.id == \"$ID\")' | space-pause"
	echo "pipeline at $(date +%T.%N): $output"
	space-ls "$ID"
	assert_success
	jout -se --arg id "$ID" 'map(select(.id == $id and .state == "paused")) | length == 1'
	space-resume "$ID" >/dev/null
	run space-ls --idle-over x
	[ "$status" -eq 100 ]
}
