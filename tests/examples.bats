#!/usr/bin/env bats
# The runnable examples keep working.
load helper

setup_file() {
	import_minimal
}

@test "examples/run-project: copy in, build inside, copy the result out" {
	d=$BATS_TEST_TMPDIR/proj
	mkdir -p "$d"
	echo 'echo built > result.txt; echo "hello from $(hostname)"; exit 3' > "$d/build.sh"
	run "$top/examples/run-project" "$d" sh build.sh
	[ "$status" -eq 3 ]
	assert_output --partial "hello from "
	[ "$(cat "$d.out/result.txt")" = built ]
	[ ! -e "$d/result.txt" ]
}

@test "examples/run-project runs a Python project's tests in a sandbox of the Debian template" {
	[ -f "$top/guest/build/debian.tar.zst" ] || { echo "# make guest-debian" >&3; false; }
	space-template import --name debian "$top/guest/build/debian.tar.zst" >/dev/null
	cp -r "$top/examples/python-project" "$BATS_TEST_TMPDIR/"
	TEMPLATE=debian run "$top/examples/run-project" "$BATS_TEST_TMPDIR/python-project" \
	    python3 -m unittest -v
	assert_success
	assert_output --partial "Ran 7 tests"
	assert_output --partial "OK"
	# The bytecode it compiled came back out with the project.
	[ -d "$BATS_TEST_TMPDIR/python-project.out/wordfreq/__pycache__" ]
}

@test "examples/run-project runs a real project's test suite in the Debian template: simplejson's, as Debian ships it" {
	local deb=$top/guest/build/python3-simplejson.deb d=$BATS_TEST_TMPDIR
	[ -f "$deb" ] || { echo "# make guest-debian" >&3; false; }
	space-template import --name debian "$top/guest/build/debian.tar.zst" >/dev/null
	dpkg-deb -x "$deb" "$d/x"
	mkdir "$d/simplejson-project"
	cp -r "$d/x/usr/lib/python3/dist-packages/simplejson" "$d/simplejson-project/"
	TEMPLATE=debian run "$top/examples/run-project" "$d/simplejson-project" \
	    python3 -c 'import simplejson.tests as t; t.main()'
	assert_success
	assert_output --regexp 'Ran [0-9]{3} tests'
	assert_output --partial "OK"
}

teardown() {
	remove_listed "$BATS_TEST_TMPDIR/ids"
}

@test "examples/pause-idle pauses the idle sandbox and not the busy one" {
	create -n 2 > "$BATS_TEST_TMPDIR/ids"
	idle=$(sed -n 1p "$BATS_TEST_TMPDIR/ids")
	busy=$(sed -n 2p "$BATS_TEST_TMPDIR/ids")
	[ -n "$idle" ] && [ -n "$busy" ]
	space-exec "$busy" -d -- sh -c 'while :; do :; done' >/dev/null
	# A loaded host slows the guest's sampler: run it again (bounded) until
	# the idle one is paused; the busy one must never be.
	: >"$BATS_TEST_TMPDIR/paused"
	for _ in $(seq 30); do
		run "$top/examples/pause-idle" 3
		assert_success
		printf '%s\n' "$output" >>"$BATS_TEST_TMPDIR/paused"
		[ "$(space-ls "$idle" | jq -r .state)" = paused ] && break
		sleep 1
	done
	jq -se --arg id "$idle" 'any(.[]; .id == $id and .ok)' "$BATS_TEST_TMPDIR/paused"
	! grep -q "$busy" "$BATS_TEST_TMPDIR/paused"
	space-ls "$idle" | jq -e '.state == "paused"'
	space-ls "$busy" | jq -e '.state == "running"'
	# Nobody has been idle for a day: nothing more is paused.
	space-resume "$idle" >/dev/null
	run "$top/examples/pause-idle" 86400
	assert_success
	[ -z "$output" ]
	space-ls "$idle" | jq -e '.state == "running"'
}

@test "examples/demo keeps every step when its output goes to a file" {
	log=$BATS_TEST_TMPDIR/demo.log
	"$top/examples/demo" >"$log" 2>&1 || { tail -n 20 "$log"; false; }
	# Each step's header, once and in order, and no hole of zero bytes
	# (what a reopen of the log with O_TRUNC left).
	diff <(sed -n 's/^step "\{0,1\}\([a-z-]*\).*/\1/p' "$top/examples/demo") \
	    <(sed -n 's/^\$ \([a-z-]*\).*/\1/p' "$log")
	[ "$(tr -d '\0' <"$log" | wc -c)" -eq "$(wc -c <"$log")" ]
	# The JSON lines the demo shows twice over (for the reader and for jq)
	# are there: the create, the full snapshot, the two forks.
	grep -q '"path":"checkpoint"' "$log"
	grep -q '"snap":' "$log"
	[ "$(grep -c '"from":' "$log")" -ge 2 ]
	tail -n 1 "$log" | jq -e '.ok and .removed'
}
