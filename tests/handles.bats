#!/usr/bin/env bats
# Handles: a sandbox's name (space-create --name), which stands for its id
# in every command, unique in its tenant; and a create's request id
# (--request-id), which makes a retry give back what the first try made.
# Real VMs, on SQLite here and on PostgreSQL in run-all's second round.
load helper

setup_file() {
	import_minimal
	: > "$BATS_FILE_TMPDIR/ids"
}

teardown_file() {
	space-pool set --template minimal --size 0 >/dev/null 2>&1 || true
	space-pool fill >/dev/null 2>&1 || true
	suite_sandboxes_removed
}

# The id of the one sandbox named $1 (none: fails).
id_of() {
	space-ls | jq -r --arg n "$1" 'select(.name == $n) | .id'
}

@test "--name: the sandbox answers to its name wherever an id goes, and its removal frees the name" {
	run space-create --template minimal --name web-1
	assert_success
	jout -r .id >> "$BATS_FILE_TMPDIR/ids"
	id=$(jout -r .id)
	jout -e '.ok and .name == "web-1" and (has("request_id") | not)'
	space-ls web-1 | jq -e --arg id "$id" '.id == $id and .name == "web-1"'
	run space-exec web-1 -- uname -n
	assert_success
	assert_output "$id"
	echo hello > "$BATS_TEST_TMPDIR/f"
	space-cp "$BATS_TEST_TMPDIR/f" web-1:/tmp/f | jq -e --arg id "$id" '.id == $id'
	[ "$(space-fs web-1 cat /tmp/f)" = hello ]
	space-cp web-1:/tmp/f "$BATS_TEST_TMPDIR/g" >/dev/null
	cmp "$BATS_TEST_TMPDIR/f" "$BATS_TEST_TMPDIR/g"
	pid=$(space-exec web-1 -d -- sleep 600 | jq -r .pid)
	space-ps web-1 | jq -e --arg id "$id" --argjson pid "$pid" \
	    'select(.pid == $pid) | .id == $id'
	run space-logs web-1 "$pid"
	assert_success
	space-kill web-1 "$pid" | jq -e --arg id "$id" '.ok and .id == $id'
	space-pause web-1 | jq -e --arg id "$id" '.id == $id and .state == "paused"'
	space-resume web-1 | jq -e '.state == "running"'
	snap=$(space-snap web-1 | jq -r .snap)
	space-rollback web-1 "$snap" | jq -e --arg id "$id" '.id == $id'
	space-ttl web-1 +1h | jq -e --arg id "$id" '.id == $id and .expires > 0'
	space-metrics web-1 | jq -e --arg id "$id" '.id == $id'
	space-port web-1 8080 | jq -e --arg id "$id" '.ok and .id == $id'
	space-port ls web-1 | jq -e --arg id "$id" '.id == $id and .port == 8080'
	space-port rm web-1 8080 | jq -e '.removed'
	# Names also come on stdin, bare or as a line's "id".
	echo web-1 | space-pause | jq -e --arg id "$id" '.id == $id'
	echo '{"id":"web-1"}' | space-resume | jq -e --arg id "$id" '.id == $id'
	space-events --id web-1 | jq -s -e --arg id "$id" \
	    'length > 10 and all(.id == $id) and any(.action == "rollback")'
	fork=$(space-fork web-1 "$snap" | jq -r .id)
	echo "$fork" >> "$BATS_FILE_TMPDIR/ids"
	# A fork is a sandbox of its own: it has no name.
	space-ls "$fork" | jq -e 'has("name") | not'
	space-rm web-1 | jq -e --arg id "$id" '.id == $id and .removed'
	run space-ls web-1
	[ "$status" -eq 1 ]
	jout -e '.error == "not-found"'
	# The name is free again.
	run space-create --template minimal --name web-1
	assert_success
	jout -r .id >> "$BATS_FILE_TMPDIR/ids"
	jout -e --arg id "$id" '.ok and .id != $id and .name == "web-1"'
	space-rm web-1 >/dev/null
}

@test "a name is unique in its tenant: a second is refused and nothing is made; other tenants may use it" {
	a=$(own --name shared --label tenant=acme)
	[ -n "$a" ]
	before=$(space-ls | wc -l)
	run space-create --template minimal --name shared --label tenant=acme
	[ "$status" -eq 1 ]
	jout -e --arg a "$a" '.error == "exists" and (.msg | contains($a))'
	[ "$(space-ls | wc -l)" -eq "$before" ]
	b=$(own --name shared --label tenant=beta)
	c=$(own --name shared)
	[ -n "$b" ] && [ -n "$c" ] && [ "$a" != "$b" ] && [ "$b" != "$c" ] || false
	space-ls "$c" | jq -e '.name == "shared"'
	# The operator's commands see every tenant: a name three tenants
	# share names no one sandbox.
	run space-exec shared -- true
	[ "$status" -eq 100 ]
	[[ $output == *"more than one tenant"* ]]
	space-rm "$a" "$b" >/dev/null
	space-exec shared -- true
}

@test "bad names and request ids are refused before anything is made" {
	before=$(space-ls | wc -l)
	for bad in "" -web web- Web a_b a.b "a b" "é" abcdefghijkl \
	    "$(printf 'a%.0s' $(seq 64))" "web/1" "web:1"; do
		run space-create --template minimal --name "$bad"
		[ "$status" -eq 100 ]
		[[ $output == *"name"* ]]
	done
	for bad in "" "a b" "a/b" "ü" "k\$" "$(printf 'k%.0s' $(seq 129))"; do
		run space-create --template minimal --request-id "$bad"
		[ "$status" -eq 100 ]
		[[ $output == *"request id"* ]]
	done
	run space-create --template minimal -n 2 --name two
	[ "$status" -eq 100 ]
	run space-create --template minimal -n 2 --request-id two
	[ "$status" -eq 100 ]
	[ "$(space-ls | wc -l)" -eq "$before" ]
	# An operand that is neither an id nor a name.
	for bad in Web a_b "../x" "$(printf 'z%.0s' $(seq 64))"; do
		run space-ls "$bad"
		[ "$status" -eq 100 ]
		[[ $output == *"nor a name"* ]]
	done
	run space-exec no-such-name -- true
	[ "$status" -ne 0 ]
	[[ $output == *"no sandbox named"* ]]
	# A name up to 63 characters, digits and '-' inside, is taken.
	long=a$(printf '0%.0s' $(seq 61))z
	id=$(own --name "$long" --request-id "A-z_0.9:x")
	space-ls "$long" | jq -e --arg id "$id" '.id == $id and .request_id == "A-z_0.9:x"'
}

@test "--request-id: a retry gives back the first try's sandbox and runs no command again; a different create of the key is refused" {
	run space-create --template minimal --request-id job-7 --name job -- \
	    sh -c 'echo ran >> /root/ran; cat /root/ran'
	assert_success
	id=$(jout -r .id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	[ "$(grep -c '^ran$' <<<"$output")" -eq 1 ]
	run space-create --template minimal --request-id job-7 --name job -- \
	    sh -c 'echo ran >> /root/ran; cat /root/ran'
	assert_success
	jout -e --arg id "$id" '.ok and .id == $id and .existing and
	    .request_id == "job-7" and .name == "job"'
	! grep -q '^ran$' <<<"$output" || false
	[ "$(space-exec "$id" -- cat /root/ran)" = ran ]
	# Paused, it is given back as it is.
	space-pause "$id" >/dev/null
	space-create --template minimal --request-id job-7 --name job |
	    jq -e --arg id "$id" '.id == $id and .state == "paused" and .existing'
	space-resume "$id" >/dev/null
	for other in "--name other" "--template nosuch" ""; do
		# shellcheck disable=SC2086
		run space-create --template minimal --request-id job-7 $other
		[ "$status" -ne 0 ]
	done
	# Another tenant's key of the same text is another key.
	id2=$(own --request-id job-7 --label tenant=acme)
	[ -n "$id2" ] && [ "$id2" != "$id" ] || false
	# Once the sandbox is removed, the key makes a new one.
	space-rm "$id" "$id2" >/dev/null
	run space-create --template minimal --request-id job-7 --name job
	assert_success
	jout -r .id >> "$BATS_FILE_TMPDIR/ids"
	jout -e --arg id "$id" '.id != $id and (.existing | not)'
	space-rm job >/dev/null
}

# Eight creates at once, each with the arguments given; their JSON lines
# in $BATS_TEST_TMPDIR/race.
race() {
	local i
	for i in $(seq 8); do
		space-create --template minimal "$@" > "$BATS_TEST_TMPDIR/race.$i" 2>/dev/null &
	done
	wait
	cat "$BATS_TEST_TMPDIR"/race.* > "$BATS_TEST_TMPDIR/race"
	jq -r 'select(.ok) | .id' "$BATS_TEST_TMPDIR/race" >> "$BATS_FILE_TMPDIR/ids"
}

@test "eight creates at once of one request id make one sandbox, from the pool and without it; of one name, one wins and nothing is left of the rest" {
	for pool in 0 3; do
		space-pool set --template minimal --size "$pool" >/dev/null
		space-pool fill >/dev/null
		race --request-id "race-$pool"
		jq -s -e 'length == 8 and all(.ok) and (map(.id) | unique | length == 1)
		    and (map(select(.existing | not)) | length == 1)' "$BATS_TEST_TMPDIR/race"
		space-rm "$(jq -r .id "$BATS_TEST_TMPDIR/race" | head -n 1)" >/dev/null
		race --name "racer-$pool"
		jq -s -e 'length == 8 and (map(select(.ok)) | length == 1) and
		    (map(select(.error == "exists")) | length == 7)' "$BATS_TEST_TMPDIR/race"
		id=$(jq -r 'select(.ok) | .id' "$BATS_TEST_TMPDIR/race")
		space-ls "racer-$pool" | jq -e --arg id "$id" '.id == $id'
		space-rm "$id" >/dev/null
	done
	# Nothing half-made: no sandbox but the pool's pods, no VM but theirs.
	space-pool set --template minimal --size 0 >/dev/null
	space-pool fill >/dev/null
	[ "$(space-ls | jq -s 'map(select(.name // "" | startswith("racer"))) | length')" -eq 0 ]
	run space-reconcile --once
	assert_success
	! grep -q rolled-back <<<"$output"
}

@test "a create with handles killed midway: reconcile rolls it back, and the waiting retry makes it anew" {
	run env SPACE_CRASH_AT=create-after-snapshot space-create --template minimal \
	    --no-pool --name crashy --request-id crash-1
	[ "$status" -eq 137 ]
	dead=$(id_of crashy)
	[ -n "$dead" ]
	space-ls "$dead" | jq -e '.state == "creating" and .request_id == "crash-1"'
	# The retry waits for the row it finds still being made...
	space-create --template minimal --no-pool --name crashy \
	    --request-id crash-1 --timeout 120 > "$BATS_TEST_TMPDIR/retry" &
	retry=$!
	sleep 1
	kill -0 "$retry"
	# ...which reconcile takes back, so the retry makes its own.
	space-reconcile --once | jq -e --arg id "$dead" \
	    'select(.id == $id) | .action == "rolled-back-create"'
	wait "$retry"
	jq -e --arg dead "$dead" '.ok and .id != $dead and .name == "crashy" and
	    (.existing | not)' "$BATS_TEST_TMPDIR/retry"
	jq -r .id "$BATS_TEST_TMPDIR/retry" >> "$BATS_FILE_TMPDIR/ids"
	space-exec crashy -- true
	space-rm crashy >/dev/null
}
