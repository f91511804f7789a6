#!/usr/bin/env bats
# kill -9 of a command at each of its crash points (SPACE_CRASH_AT), then
# space-reconcile --once: the sandbox ends in a legal state, its VM agrees with
# its record, and what it had on disk is intact.
load helper

setup_file() {
	import_minimal
	create > "$BATS_FILE_TMPDIR/ids"
	export ID=$(head -n 1 "$BATS_FILE_TMPDIR/ids")
	space-exec "$ID" -- sh -c 'echo intact > /root/marker; sync'
}

teardown_file() {
	remove_listed "$BATS_FILE_TMPDIR/ids"
}

state() {
	space-ls "$1" | jq -r '"\(.state)/\(.vm)"'
}

# Runs a command that must die at the crash point $1 (137: SIGKILL).
crash_at() {
	local point=$1; shift
	run env SPACE_CRASH_AT="$point" "$@"
	[ "$status" -eq 137 ]
}

reconcile() {
	run space-reconcile --once
	assert_success
	echo "$output" | sed 's/^/# /' >&3
}

gone() {
	! space-ls "$1" >/dev/null 2>&1 &&
	[ ! -e "$SPACE_ROOT/sandboxes/$1" ] &&
	! virsh -c qemu:///system domstate "sp-$1" >/dev/null 2>&1
}

@test "kill -9 of space-create at each point: rolled back or finished, never half" {
	for point in create-after-row create-after-snapshot create-after-define create-after-start; do
		before=$(space-ls | jq -r .id | sort)
		crash_at "$point" space-create --template minimal
		id=$(comm -13 <(echo "$before") <(space-ls | jq -r .id | sort))
		[ -n "$id" ]
		[ "$(space-ls "$id" | jq -r .state)" = creating ]
		reconcile
		if space-ls "$id" >/dev/null 2>&1; then
			echo "$id" >> "$BATS_FILE_TMPDIR/ids"
			[ "$(state "$id")" = "running/running" ]
			run space-exec "$id" -- true
			assert_success
		else
			gone "$id"
		fi
	done
}

@test "kill -9 of space-rm at each point: the next pass finishes the removal" {
	for point in remove-after-mark remove-after-vm; do
		id=$(create)
		[ -n "$id" ]
		crash_at "$point" space-rm "$id"
		[ "$(space-ls "$id" | jq -r .state)" = destroyed ]
		reconcile
		gone "$id"
	done
}

@test "kill -9 of pause, resume, stop, start after their claim: the VM follows the record" {
	crash_at verb-after-claim space-pause "$ID"
	[ "$(state "$ID")" = "paused/running" ]
	reconcile
	[ "$(state "$ID")" = "paused/paused" ]

	crash_at verb-after-claim space-resume "$ID"
	# The record says running; space-ls shows what it observes.
	[ "$(state "$ID")" = "paused/paused" ]
	reconcile
	[ "$(state "$ID")" = "running/running" ]

	crash_at verb-after-claim space-stop "$ID"
	[ "$(state "$ID")" = "stopped/running" ]
	reconcile
	[ "$(state "$ID")" = "stopped/shutoff" ]

	# The claim said running, but no VM ever started: a live record whose VM
	# is off is a failure, and a failed sandbox stops and starts again.
	crash_at verb-after-claim space-start "$ID"
	reconcile
	[ "$(state "$ID")" = "failed/shutoff" ]
	space-stop "$ID"
	space-start "$ID"
	[ "$(state "$ID")" = "running/running" ]
	run space-exec "$ID" -- cat /root/marker
	assert_output intact
}

@test "QEMU killed with -9: the pass marks the sandbox failed" {
	id=$(create)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	pid=$(pgrep -f "guest=sp-$id" | head -n 1)
	[ -n "$pid" ]
	kill -9 "$pid"
	for _ in $(seq 50); do
		[ "$(space-ls "$id" | jq -r .vm)" != running ] && break
		sleep 0.1
	done
	reconcile
	[ "$(space-ls "$id" | jq -r .state)" = failed ]
	run space-exec "$id" -- true
	[ "$status" -eq 1 ]
}

@test "orphans of this root are removed; another root's domain is left alone" {
	orphan=aaaaaaaaaaa2
	tpl=$(ls -d "$SPACE_ROOT"/templates/minimal@* | head -n 1)
	btrfs -q subvolume snapshot "$tpl" "$SPACE_ROOT/sandboxes/$orphan"
	foreign=aaaaaaaaaaa3
	cat > "$BATS_TEST_TMPDIR/foreign.xml" <<XML
<domain type='qemu'><name>sp-$foreign</name><memory unit='MiB'>64</memory>
<os><type arch='x86_64' machine='q35'>hvm</type></os>
<devices><disk type='file' device='disk'><source file='/elsewhere/sandboxes/$foreign/disk.raw'/>
<target dev='vda' bus='virtio'/></disk></devices></domain>
XML
	virsh -c qemu:///system define "$BATS_TEST_TMPDIR/foreign.xml" >/dev/null
	reconcile
	virsh -c qemu:///system domstate "sp-$foreign"
	virsh -c qemu:///system undefine "sp-$foreign" >/dev/null
	[ ! -e "$SPACE_ROOT/sandboxes/$orphan" ]
}

@test "a sandbox a live command holds is left alone" {
	space-pause "$ID"
	virsh -c qemu:///system resume "sp-$ID" >/dev/null
	[ "$(state "$ID")" = "paused/running" ]
	flock "$SPACE_ROOT/locks/sandbox-$ID.lock" space-reconcile --once > "$BATS_TEST_TMPDIR/out"
	[ "$(state "$ID")" = "paused/running" ]
	! grep -q "$ID" "$BATS_TEST_TMPDIR/out" || false
	reconcile
	[ "$(state "$ID")" = "paused/paused" ]
	space-resume "$ID"
}
