#!/usr/bin/env bats
# Memory on a node (design.md, "Memory"; issue 34): the balloon's free page
# reporting gives back what a restore filled in, space-trim hands over a
# guest's free memory, and with SPACE_KSM=on ten idle clones use less
# memory in all than with it off, and each still works.  Real VMs, QEMU's
# own /proc figures, the kernel's KSM.
load helper

ksm=/sys/kernel/mm/ksm

setup_file() {
	suite_sandbox
	# The node's KSM settings, put back in teardown_file.
	for f in run pages_to_scan sleep_millisecs use_zero_pages; do
		echo "$f $(<"$ksm/$f")"
	done >"$BATS_FILE_TMPDIR/ksm"
}

teardown_file() {
	suite_sandboxes_removed
	[ -s "$BATS_FILE_TMPDIR/ksm" ] || return 0
	# Everything merged unmerged, then the settings as they were.
	echo 2 >"$ksm/run"
	for _ in $(seq 300); do
		[ "$(<"$ksm/pages_shared")" -eq 0 ] && break
		sleep 0.1
	done
	while read -r f v; do
		[ "$f" = run ] || echo "$v" >"$ksm/$f" || true
	done <"$BATS_FILE_TMPDIR/ksm"
	awk '$1 == "run" { print $2 }' "$BATS_FILE_TMPDIR/ksm" >"$ksm/run"
}

qemu_pid() {
	cat "/run/libvirt/qemu/sp-$1.pid"
}

# KiB of sandbox $1's QEMU: its anonymous memory, its PSS.
anon_kib() {
	awk '/^Anonymous:/ { print $2 }' "/proc/$(qemu_pid "$1")/smaps_rollup"
}
pss_kib() {
	awk '/^Pss:/ { print $2 }' "/proc/$(qemu_pid "$1")/smaps_rollup"
}

# Waits (at most $2 s) until sandbox $1's QEMU holds less than $3 KiB of
# anonymous memory; fails with what it holds otherwise.
anon_under() {
	local i
	for i in $(seq "$2"); do
		[ "$(anon_kib "$1")" -lt "$3" ] && return 0
		sleep 1
	done
	echo "sp-$1's QEMU holds $(anon_kib "$1") KiB, not under $3" >&2
	false
}

# The sum of the PSS of the sandboxes listed in file $1, in KiB.
pss_sum() {
	local id sum=0
	while read -r id; do
		sum=$((sum + $(pss_kib "$id")))
	done <"$1"
	echo "$sum"
}

@test "VMs have the balloon and keep KSM off their memory by default" {
	run virsh -c qemu:///system dumpxml "sp-$ID"
	assert_output --partial "<memballoon model='virtio' freePageReporting='on'>"
	assert_output --partial "<nosharepages/>"
	space-exec "$ID" -- test -e /sys/bus/virtio/drivers/virtio_balloon
	space-init | jq -e '.ksm == "off"'
}

@test "a sandbox restored from the checkpoint gives back what its restore filled in" {
	# QEMU reads every page of a restore; on a host that commits a page on
	# a read the whole 256 MiB is resident until the guest reports its
	# free pages (its template trimmed them just before the save).
	id=$(own --no-pool)
	space-ls "$id" | jq -e '.memory_mib == 256'
	anon_under "$id" 60 $((256 * 1024 / 2))
	run space-exec "$id" -- sh -c 'echo "$(hostname) answers"'
	assert_output "$id answers"
}

@test "space-trim hands a guest's free memory over, once per VM with --once" {
	id=$(own --no-pool)
	# Once its restore's pages are reported (a trim while the guest still
	# reports them leaves its free memory in smaller runs, a few MB more),
	# as space-idle.timer trims only sandboxes idle for a minute.
	anon_under "$id" 60 $((256 * 1024 / 2))
	run space-trim "$id"
	assert_success
	jout -e --arg id "$id" '.id == $id and .ok and .trimmed and .balloon and
	    .taken_mib > 100 and .free_mib >= .taken_mib'
	anon_under "$id" 60 $((256 * 1024 / 2))
	# Which QEMU it trimmed, where space (space-idle.timer's user) writes.
	[ -s "$SPACE_RUN/pods/$id.trimmed" ]
	run space-trim --once "$id"
	assert_success
	jout -e '.trimmed == false and (.why | test("since its VM started"))'
	# A new QEMU (stop, start) is trimmed again.
	space-stop "$id" >/dev/null
	space-start "$id" >/dev/null
	run space-trim --once "$id"
	jout -e '.trimmed == true'
	# The guest works on, its memory whole.
	run space-exec "$id" -- sh -c 'head -c 100000000 /dev/zero | wc -c'
	assert_output 100000000
}

@test "space-trim refuses what it cannot trim, and trims the rest of its input" {
	id=$(own --no-pool)
	space-pause "$id" >/dev/null
	run space-trim "$id"
	[ "$status" -ne 0 ]
	jout -e '.ok == false and .error == "bad-state"'
	run space-trim nosuchsandbx
	[ "$status" -ne 0 ]
	jout -e '.error == "not-found"'
	run env SPACE_NODE=elsewhere space-trim "$ID"
	[ "$status" -ne 0 ]
	jout -e '.error == "bad-state" and (.msg | test("on node .check."))'
	run space-trim '../etc'
	[ "$status" -eq 100 ]
	run space-trim --twice "$ID"
	[ "$status" -eq 100 ]
	# One bad line does not stop the others.
	run bash -c "printf '%s\n' nosuchsandbx '$ID' | space-trim"
	[ "$(jout -s 'map(select(.ok)) | length')" -eq 1 ]
	space-resume "$id" >/dev/null
}

@test "space-init refuses a bad SPACE_KSM, and writes KSM's settings for on" {
	run env SPACE_KSM=yes space-init
	[ "$status" -eq 100 ]
	assert_output --partial "SPACE_KSM must be on or off"
	run env SPACE_KSM=on SPACE_KSM_RATE=10 space-init
	[ "$status" -eq 100 ]
	assert_output --partial "SPACE_KSM_RATE"
	SPACE_KSM=on SPACE_KSM_RATE=25000 space-init | jq -e '.ksm == "on"'
	[ "$(<"$ksm/run")" -eq 1 ]
	[ "$(<"$ksm/use_zero_pages")" -eq 1 ]
	[ "$(<"$ksm/sleep_millisecs")" -eq 20 ]
	[ "$(<"$ksm/pages_to_scan")" -eq 500 ]
}

# Ten clones with SPACE_KSM=$1, idle until the kernel has merged what it
# will; their ids in the file $2.
ten_clones() {
	local i
	for i in $(seq 10); do
		SPACE_KSM=$1 space-create --template minimal --no-pool |
		    jq -r 'select(.ok) | .id'
	done >"$2"
	cat "$2" >>"$BATS_FILE_TMPDIR/ids"
	[ "$(wc -l <"$2")" -eq 10 ]
}

# Waits until ksmd has made two full scans more than when called.
two_scans() {
	local from
	from=$(<"$ksm/full_scans")
	for _ in $(seq 300); do
		[ $(($(<"$ksm/full_scans") - from)) -ge 2 ] && return 0
		sleep 1
	done
	false
}

@test "ten idle clones use less memory with SPACE_KSM=on than off, and each works" {
	space-init >/dev/null
	ten_clones off "$BATS_FILE_TMPDIR/off"
	# Every one has given back its restore's fill.
	while read -r id; do
		anon_under "$id" 60 $((256 * 1024 / 2))
	done <"$BATS_FILE_TMPDIR/off"
	off=$(pss_sum "$BATS_FILE_TMPDIR/off")
	space-rm <"$BATS_FILE_TMPDIR/off" >/dev/null

	SPACE_KSM=on space-init | jq -e '.ksm == "on"'
	ten_clones on "$BATS_FILE_TMPDIR/on"
	one=$(head -n 1 "$BATS_FILE_TMPDIR/on")
	! virsh -c qemu:///system dumpxml "sp-$one" | grep -q nosharepages || false
	two_scans
	on=$(pss_sum "$BATS_FILE_TMPDIR/on")
	echo "PSS of ten: off $off KiB, on $on KiB" >&3
	[ "$on" -lt "$off" ]
	[ "$(<"$ksm/pages_sharing")" -gt 0 ]

	# Each works: a call in every one, then a snapshot, a suspend and a
	# restore of one.
	while read -r id; do
		run space-exec "$id" -- sh -c 'echo "$(hostname) answers"'
		assert_output "$id answers"
	done <"$BATS_FILE_TMPDIR/on"
	space-exec "$one" -- sh -c 'echo kept > /root/mark'
	space-snap "$one" | jq -e '.ok'
	space-suspend "$one" | jq -e '.ok'
	SPACE_KSM=on space-restore "$one" | jq -e '.ok'
	run space-exec "$one" -- cat /root/mark
	assert_output kept
	space-rm <"$BATS_FILE_TMPDIR/on" >/dev/null
}
