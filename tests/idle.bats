#!/usr/bin/env bats
# Idle tiers: SPACE_IDLE and space-create --idle, space-ls --idle-due, and
# space-idle.service's pipeline carrying them out on real VMs (idleness as
# the guest daemon measures it, SPACE_NOW for the tiers of hours).
load helper

setup_file() {
	suite_sandbox
}

teardown_file() {
	suite_sandboxes_removed
}

# The pipeline space-idle.service runs, with this build's commands.
idle_pipeline() {
	local cmd
	cmd=$(sed -n "s|^ExecStart=/bin/sh -c '\(.*\)'$|\1|p" "$top/units/space-idle.service")
	[ -n "$cmd" ]
	sh -c "${cmd//\/usr\/local\/bin\//}"
}

# Waits until the daemon of $1 says it has been idle at least $2 s.
wait_idle() {
	local i
	for i in $(seq 1 60); do
		[ "$(space-ls "$1" | jq '.idle_s // 0')" -ge "$2" ] && return 0
		sleep 1
	done
	false
}

@test "--idle: the sandbox's own tiers, shown; bad tiers are refused and nothing is made" {
	id=$(own --idle "pause:1h rm:30d")
	space-ls "$id" | jq -e '.idle == "pause:1h rm:30d"'
	space-ls "$ID" | jq -e 'has("idle") | not'
	before=$(space-ls | wc -l)
	for bad in pause nap:5m "suspend:1h pause:5m" "pause:1h suspend:1h" "pause:0s"; do
		run space-create --template minimal --idle "$bad"
		[ "$status" -eq 100 ]
		[[ $output == *"idle tiers"* ]]
	done
	[ "$(space-ls | wc -l)" -eq "$before" ]
	run space-ls --idle-due sleep
	[ "$status" -eq 100 ]
	SPACE_IDLE="pause:1h pause:2h" run space-ls --idle-due pause
	[ "$status" -eq 100 ]
	[[ $output == *SPACE_IDLE* ]]
}

@test "a sandbox idle past its pause tier is paused, then suspended, then removed, by the unit's pipeline" {
	id=$(own --idle "pause:3s suspend:1h rm:2h")
	wait_idle "$id" 3
	run space-ls --here --idle-due pause
	assert_success
	grep -q "$id" <<<"$output"
	# The node's sandbox has no tiers (SPACE_IDLE is not set here).
	! grep -q "$ID" <<<"$output" || false
	run space-ls --here --idle-due suspend
	! grep -q "$id" <<<"$output" || false
	run idle_pipeline
	echo "# $output" >&3
	space-ls "$id" | jq -e '.state == "paused"'
	space-ls "$ID" | jq -e '.state == "running"'
	# A paused one counts as idle since it was paused.
	t=$(date +%s)
	SPACE_NOW=$((t + 3500)) run space-ls --here --idle-due suspend
	! grep -q "$id" <<<"$output" || false
	SPACE_NOW=$((t + 3605)) run idle_pipeline
	echo "# $output" >&3
	space-ls "$id" | jq -e '.state == "suspended"'
	t=$(date +%s)
	SPACE_NOW=$((t + 7205)) run idle_pipeline
	echo "# $output" >&3
	run space-ls "$id"
	[ "$status" -ne 0 ]
	space-ls "$ID" | jq -e '.state == "running"'
}

@test "a busy sandbox is not idle: no tier is due while its guest works" {
	id=$(own --idle "pause:3s")
	space-exec -d "$id" -- sh -c 'while :; do :; done' >/dev/null
	sleep 6
	run space-ls --here --idle-due pause
	assert_success
	! grep -q "$id" <<<"$output" || false
	space-ls "$id" | jq -e '.idle_s < 3'
}

@test "SPACE_IDLE, the node's tiers, hold for sandboxes without their own; --idle none opts out" {
	a=$(own)
	b=$(own --idle none)
	wait_idle "$a" 3
	wait_idle "$b" 3
	SPACE_IDLE="pause:3s" run space-ls --here --idle-due pause
	assert_success
	grep -q "$a" <<<"$output"
	! grep -q "$b" <<<"$output" || false
	SPACE_IDLE="pause:3s" run idle_pipeline
	space-ls "$a" | jq -e '.state == "paused"'
	space-ls "$b" | jq -e '.state == "running"'
}

@test "a call wakes a paused sandbox that idle tiers steer: exec, files, processes; without tiers it is still refused" {
	id=$(own --idle "pause:1h")
	space-exec "$id" -- sh -c 'echo here > /root/f; sync'
	space-pause "$id" >/dev/null
	run space-exec "$id" -- cat /root/f
	assert_success
	assert_output here
	space-ls "$id" | jq -e '.state == "running"'
	space-pause "$id" >/dev/null
	run space-fs "$id" cat /root/f
	assert_success
	space-ls "$id" | jq -e '.state == "running"'
	space-pause "$id" >/dev/null
	run space-cp "$id":/root/f "$BATS_TEST_TMPDIR/f"
	assert_success
	[ "$(cat "$BATS_TEST_TMPDIR/f")" = here ]
	space-pause "$id" >/dev/null
	run space-ps "$id"
	assert_success
	space-ls "$id" | jq -e '.state == "running"'
	# Its clock was set again on waking: the guest's time is the host's.
	space-pause "$id" >/dev/null
	sleep 3
	g=$(space-exec "$id" -- date +%s)
	[ $(( $(date +%s) - g )) -le 2 ]
	# --idle none, and no SPACE_IDLE: a pause is the user's, and holds.
	b=$(own --idle none)
	space-pause "$b" >/dev/null
	run --separate-stderr space-exec "$b" -- true
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"paused, not running"* ]]
	space-ls "$b" | jq -e '.state == "paused"'
	# The node's tiers make every sandbox without its own wake.
	SPACE_IDLE="suspend:1d" run space-exec "$b" -- true
	assert_failure
	c=$(own)
	space-pause "$c" >/dev/null
	SPACE_IDLE="suspend:1d" run space-exec "$c" -- true
	assert_success
	space-ls "$c" | jq -e '.state == "running"'
}
