#!/usr/bin/env bats
# A hostile guest in a real VM: tests/guest/space-hostile puts the daemon out
# of the way and answers on each of the 8 ports with a different misbehaviour
# (see its header).  space-exec, built with ASan/UBSan and LeakSanitizer, must
# fail each call with a clear error within its bounds, and not crash or leak.
load helper

setup_file() {
	import_minimal
	create > "$BATS_FILE_TMPDIR/ids"
	export ID=$(head -n 1 "$BATS_FILE_TMPDIR/ids")
	space-fs "$ID" write -m 755 /root/space-hostile < "$top/build/tests/space-hostile"
	space-exec "$ID" -- sh -c 'setsid /root/space-hostile </dev/null >/dev/null 2>&1 &'
	# It waits 1 s, then takes the ports from the daemon it kills.
	sleep 4
}

teardown_file() {
	remove_listed "$BATS_FILE_TMPDIR/ids"
}

# Runs the ASan space-exec against port $1 (the lower ports held locked, so
# the client takes that one); sets status, stderr and ms.  The locks are
# held on descriptors of this shell, closed after: a process holding one
# would outlive the test, and bats waits for it at the end of the file.
attack() {
	local port=$1 k fd fds=()
	for k in $(seq 0 $((port - 1))); do
		exec {fd}>>"$SPACE_RUN/$ID/space.$k.lock"
		flock -n "$fd"
		fds+=("$fd")
	done
	local t0=$(date +%s%N)
	# stdout (port 5 floods it) goes away: the status and stderr tell.
	# A guest that never answers hello is given 5 s, not the default 30.
	run --separate-stderr sh -c 'ASAN_OPTIONS=detect_leaks=1 \
		SPACE_HELLO_TIMEOUT_MS=5000 exec timeout 90 \
		"$0" "$1" --timeout 3 -- true >/dev/null' \
		"$top/build/asan/bin/space-exec" "$ID"
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	for fd in "${fds[@]}"; do
		exec {fd}>&-
	done
	echo "# port $port: exit $status after $ms ms: ${stderr:0:160}" >&3
}

# What every attack must end in: a failure, said clearly, in time, no crash.
survived() {
	[ "$status" -ne 0 ]
	[ "$status" -lt 128 ]			# not killed by a signal
	[[ "$stderr" == *"space-exec: $ID: "* ]]
	[[ "$stderr" != *Sanitizer* ]]
	[[ "$stderr" != *"runtime error"* ]]
	[ "$ms" -lt 60000 ]
}

# A hello that never came right: a temporary failure (111), said so, when
# SPACE_HELLO_TIMEOUT_MS ran out (5 s; the default is 30).
hello_timed_out() {
	[ "$status" -eq 111 ]
	[[ "$stderr" == *"did not answer hello on port $1 in time"* ]]
	[ "$ms" -ge 5000 ]
	[ "$ms" -lt 30000 ]
}

# A call cut off by --timeout: exit 124, as timeout(1) does.
timed_out() {
	[ "$status" -eq 124 ]
	[[ "$stderr" == *"no exit after the timeout's SIGKILL"* ]]
}

@test "port 0: a frame claiming 2 GiB is refused" {
	attack 0
	survived
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"frame of 2147483642 bytes is over the 1048576 byte limit"* ]]
}

@test "port 1: a truncated frame, then silence: a timeout" {
	attack 1
	survived
	hello_timed_out 1
}

@test "port 2: a hello that is not JSON is refused" {
	attack 2
	survived
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"bad JSON in frame type 1"* ]]
}

@test "port 3: a flood of random bytes is refused" {
	attack 3
	survived
	# Which error depends on the random bytes; each is a protocol error.
	[ "$status" -eq 1 ]
	[[ "$stderr" =~ (byte\ limit|unknown\ frame\ type|bad\ JSON|is\ not\ an\ object) ]]
}

@test "port 4: silence in the middle of a call ends at the call's timeout" {
	attack 4
	survived
	timed_out
}

@test "port 5: an endless flood of output ends at the call's timeout" {
	attack 5
	survived
	timed_out
}

@test "port 6: hellos with the wrong nonce are not taken for an answer" {
	attack 6
	survived
	hello_timed_out 6
}

@test "port 7: a guest that never answers: a timeout" {
	attack 7
	survived
	hello_timed_out 7
}

@test "a SPACE_HELLO_TIMEOUT_MS that is not 1..3600000 ms is bad input, before any call" {
	local bad
	for bad in abc 0 -5 3600001 5s; do
		run --separate-stderr env SPACE_HELLO_TIMEOUT_MS="$bad" space-exec "$ID" -- true
		echo "# '$bad': $status $stderr"
		[ "$status" -eq 100 ]
		[[ "$stderr" == *"SPACE_HELLO_TIMEOUT_MS: not a number of milliseconds 1..3600000"* ]]
	done
}
