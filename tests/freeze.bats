#!/usr/bin/env bats
# Consistent disk snapshots (design.md, "Snapshots, rollback, fork,
# retention"): the guest's daemon freezes its root (FIFREEZE) around a disk
# snapshot of a running sandbox and thaws it on every path.  A real VM and a
# writer in it that never stops; each snapshot's ext4 image is read on the
# host without replaying its journal.
load helper

setup_file() {
	suite_sandbox
	# Numbered lines, one write each, as fast as the guest goes.
	space-exec -d "$ID" -- sh -c \
	    'i=0; while :; do i=$((i+1)); echo $i >> /root/log; done' >/dev/null
	sleep 1
}

teardown_file() {
	suite_sandboxes_removed
}

# Mounts snapshot $1's disk read-only without its journal at $2.
mount_snap() {
	mkdir -p "$2"
	mount -o ro,noload,loop "$SPACE_ROOT/snapshots/$ID/$1/disk.raw" "$2"
}

@test "snapshots taken while the guest writes are clean and hold a prefix of the writes" {
	local i snap m n last=0
	for i in 1 2 3 4 5; do
		run space-snap "$ID"
		[ "$status" -eq 0 ]
		[ "$(jq -r .consistent <<<"$output")" = true ]
		snap=$(jq -r .snap <<<"$output")
		# No journal to replay: ext4 marked itself clean when frozen.
		! dumpe2fs -h "$SPACE_ROOT/snapshots/$ID/$snap/disk.raw" 2>/dev/null |
		    grep -q needs_recovery || false
		e2fsck -fn "$SPACE_ROOT/snapshots/$ID/$snap/disk.raw" >/dev/null 2>&1
		m="$BATS_TEST_TMPDIR/m$i"
		mount_snap "$snap" "$m"
		# Lines 1..n, whole: a prefix of what the writer wrote.
		n=$(awk 'NR != $0 { print "bad line " NR ": " $0; exit 1 } END { print NR }' "$m/root/log")
		[ "$(tail -c 1 "$m/root/log" | od -An -c | tr -d ' ')" = '\n' ]
		umount "$m"
		echo "# snapshot $i: $n lines" >&3
		[ "$n" -gt "$last" ]
		last=$n
	done
	# The writer went on after each thaw.
	[ "$(space-exec "$ID" -- sh -c 'wc -l < /root/log')" -gt "$last" ]
}

@test "without the freeze (--crash-consistent, or paused) a snapshot needs its journal, and says so" {
	run space-snap --crash-consistent "$ID"
	[ "$status" -eq 0 ]
	[ "$(jq -r .consistent <<<"$output")" = false ]
	# What the freeze spares the others: this one needs its journal.
	dumpe2fs -h "$SPACE_ROOT/snapshots/$ID/$(jq -r .snap <<<"$output")/disk.raw" \
	    2>/dev/null | grep -q needs_recovery
	space-pause "$ID" >/dev/null
	run space-snap "$ID"
	space-resume "$ID" >/dev/null
	[ "$status" -eq 0 ]
	[ "$(jq -r .consistent <<<"$output")" = false ]
	dumpe2fs -h "$SPACE_ROOT/snapshots/$ID/$(jq -r .snap <<<"$output")/disk.raw" \
	    2>/dev/null | grep -q needs_recovery
	run space-snap --full --crash-consistent "$ID"
	[ "$status" -eq 100 ]
}

@test "a snapshot whose command dies while the guest is frozen: the guest thaws by itself" {
	SPACE_STOP_AT=snap-frozen space-snap "$ID" >/dev/null 2>&1 &
	local snapper=$! i
	for i in $(seq 100); do
		[ "$(ps -o stat= -p "$snapper" | cut -c1)" = T ] && break
		sleep 0.1
	done
	[ "$(ps -o stat= -p "$snapper" | cut -c1)" = T ]
	# Frozen: the writer's lines stop.
	local a b
	a=$(space-exec "$ID" -- sh -c 'wc -l < /root/log')
	sleep 1
	b=$(space-exec "$ID" -- sh -c 'wc -l < /root/log')
	[ "$a" -eq "$b" ]
	kill -9 "$snapper"
	wait "$snapper" || true
	# The daemon's watchdog thaws it within its 10 s.
	local t0=$SECONDS
	for i in $(seq 150); do
		[ "$(space-exec "$ID" -- sh -c 'wc -l < /root/log')" -gt "$b" ] && break
		sleep 0.1
	done
	echo "# thawed $((SECONDS - t0)) s after the kill" >&3
	[ "$(space-exec "$ID" -- sh -c 'wc -l < /root/log')" -gt "$b" ]
	# The snapshot it left half made is the reconcile pass's to clear.
	space-reconcile --once >/dev/null
	[ -z "$(space-snap ls "$ID" | jq -r 'select(.state == "taking") | .snap')" ]
	# And the next one is frozen again (the daemon's freeze is over).
	[ "$(space-snap "$ID" | jq -r .consistent)" = true ]
}
