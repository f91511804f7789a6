#!/usr/bin/env bats
# The event log: every verb and state change of a scripted session, in order
# and with its outcome; space-events' choices, -f, and retention.
load helper

setup_file() {
	suite_sandbox
}

teardown_file() {
	suite_sandboxes_removed
}

# The sequence number of the newest event (0: none yet).
last_seq() {
	space-events | tail -n 1 | jq -r '.seq // 0'
}

@test "a scripted session: every verb and change of state, in order, with its outcome" {
	after=$(last_seq)
	id=$(own)
	[ -n "$id" ]
	space-exec "$id" -- true
	run space-exec "$id" -- sh -c 'exit 3'
	[ "$status" -eq 3 ]
	echo hello | space-fs "$id" write /tmp/greeting >/dev/null
	[ "$(space-fs "$id" cat /tmp/greeting)" = hello ]
	space-pause "$id" >/dev/null
	space-resume "$id" >/dev/null
	space-snap --tag one "$id" >/dev/null
	space-snap ls "$id" >/dev/null
	space-ps "$id" >/dev/null
	run space-rollback "$id" aaaaaaaaaaaa
	[ "$status" -ne 0 ]
	space-ttl "$id" 1h >/dev/null
	space-stop "$id" >/dev/null
	space-rm "$id" >/dev/null
	space-events --after "$after" --id "$id" > "$BATS_TEST_TMPDIR/ev"
	# The verbs, in the order they ran, each with its outcome.
	jq -c 'select(.action != "state") | [.action, .ok, .error]' \
	    "$BATS_TEST_TMPDIR/ev" > "$BATS_TEST_TMPDIR/verbs"
	cat > "$BATS_TEST_TMPDIR/want" <<-'EOF'
	["create",true,null]
	["exec",true,null]
	["exec",true,null]
	["fs.write",true,null]
	["fs.cat",true,null]
	["pause",true,null]
	["resume",true,null]
	["snap",true,null]
	["snap.ls",true,null]
	["ps",true,null]
	["rollback",false,"not-found"]
	["ttl",true,null]
	["stop",true,null]
	["rm",true,null]
	EOF
	diff -u "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/verbs"
	# The exec that exited 3 says so; a verb says how long it took.
	jq -se '[.[] | select(.action == "exec")] | map(.exit) == [0, 3]' "$BATS_TEST_TMPDIR/ev"
	jq -se 'all(.[] | select(.action != "state"); (.ms | type) == "number" and .ms >= 0)' "$BATS_TEST_TMPDIR/ev"
	# The states it went through, each from the one before, to its removal.
	jq -r 'select(.action == "state") | .to' "$BATS_TEST_TMPDIR/ev" > "$BATS_TEST_TMPDIR/states"
	grep -qx paused "$BATS_TEST_TMPDIR/states"
	grep -qx stopped "$BATS_TEST_TMPDIR/states"
	[ "$(tail -n 1 "$BATS_TEST_TMPDIR/states")" = removed ]
	jq -se '[.[] | select(.action == "state" and .from != null)] |
	    [range(1; length) as $i | .[$i].from == .[$i - 1].to] | all' "$BATS_TEST_TMPDIR/ev"
	# Who, where, through what; numbered in order.
	jq -se --arg uid "uid:$(id -u ${SPACE_AS_SPACE_BIN:+space})" '
	    all(.[]; .actor == $uid and (.via | startswith("space-")) and
	    .id != null and (.node | length) > 0) and
	    ([.[].seq] | . == sort and . == unique)' "$BATS_TEST_TMPDIR/ev"
	# A verb's event comes after the change of state it made.
	jq -se '(map(.action == "pause") | index(true)) >
	    (map(.action == "state" and .to == "paused") | index(true))' "$BATS_TEST_TMPDIR/ev"
}

@test "--since, --id and --after choose; bad values are refused" {
	space-exec "$ID" -- true
	run space-events --id "$ID"
	assert_success
	jout -se --arg id "$ID" 'length > 0 and all(.[]; .id == $id)'
	last=$(jout -s -r 'last.seq')
	run space-events --after "$last"
	assert_success
	[ -z "$(grep '^{' <<<"$output")" ] || jout -se --argjson s "$last" 'all(.[]; .seq > $s)'
	# In a year's time, the last hour has none of today's.
	run env SPACE_NOW=$(($(date +%s) + 366 * 86400)) space-events --since 1h
	assert_success
	[ -z "$(grep '^{' <<<"$output")" ]
	run space-events --since "$(($(date +%s) - 3600))" --id "$ID"
	assert_success
	jout -se 'length > 0'
	for bad in "--since 0m" "--since yesterday" "--since -5" "--after x" \
	    "--after -1" "--id ../../etc" "--id" "stray"; do
		run space-events $bad
		[ "$status" -eq 100 ]
	done
}

@test "-f prints an event written after it started" {
	space-events -f --since now > "$BATS_TEST_TMPDIR/f" &
	follower=$!
	sleep 0.5
	t0=$(date +%s%N)
	space-exec "$ID" -- true
	for _ in $(seq 100); do
		grep -q '"action":"exec"' "$BATS_TEST_TMPDIR/f" && break
		sleep 0.1
	done
	t1=$(date +%s%N)
	kill "$follower"
	echo "# -f saw the exec $(((t1 - t0) / 1000000)) ms after it began" >&3
	jq -se --arg id "$ID" 'map(select(.action == "exec")) | length == 1 and .[0].id == $id' \
	    "$BATS_TEST_TMPDIR/f"
	# --since now: nothing from before it started.
	jq -se --argjson t0 "$((t0 / 1000000 - 1000))" 'all(.[]; .time_ms >= $t0)' "$BATS_TEST_TMPDIR/f"
}

@test "retention: a reconcile pass deletes what SPACE_EVENTS_KEEP no longer keeps, but the newest" {
	space-exec "$ID" -- true
	before=$(last_seq)
	[ "$before" -gt 0 ]
	# A bad setting fails the pass with a clear message; nothing goes.
	run env SPACE_EVENTS_KEEP=forever space-reconcile --once
	[ "$status" -ne 0 ]
	jout -se 'any(.[]; .action == "events-prune" and .error == "bad-input")'
	[ "$(space-events | jq -s length)" -gt 1 ]
	# A month on, the default 30d keeps none of them but the newest.
	run env SPACE_NOW=$(($(date +%s) + 31 * 86400)) space-reconcile --once
	assert_success
	jout -se 'any(.[]; .action == "events-pruned")'
	run space-events
	assert_success
	jout -se --argjson b "$before" 'length == 1 and .[0].seq >= $b'
	# Numbers go on from there: none is given twice.
	space-exec "$ID" -- true
	space-events | jq -se --argjson b "$before" 'length >= 2 and all(.[]; .seq >= $b) and
	    ([.[].seq] | . == unique)'
}

@test "a verb on a sandbox that is not there is an event too, and a listing is none" {
	after=$(last_seq)
	run space-pause aaaaaaaaaaaa
	[ "$status" -ne 0 ]
	space-ls >/dev/null
	space-events --after "$after" | jq -se 'length == 1 and .[0].action == "pause" and
	    .[0].ok == false and .[0].error == "not-found" and .[0].id == "aaaaaaaaaaaa"'
}
