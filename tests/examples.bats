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
	[ -n "$idle" ] && [ -n "$busy" ] || false
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
	! grep -q "$busy" "$BATS_TEST_TMPDIR/paused" || false
	space-ls "$idle" | jq -e '.state == "paused"'
	space-ls "$busy" | jq -e '.state == "running"'
	# Nobody has been idle for a day: nothing more is paused.
	space-resume "$idle" >/dev/null
	run "$top/examples/pause-idle" 86400
	assert_success
	[ -z "$output" ]
	space-ls "$idle" | jq -e '.state == "running"'
}

@test "examples/events-webhook posts each new event it keeps to a receiver on loopback" {
	local d=$BATS_TEST_TMPDIR
	create > "$d/ids"
	id=$(head -n 1 "$d/ids")
	[ -n "$id" ]
	# The receiver: each POST's body, a line of a file.
	python3 -u -c '
import http.server, sys
out = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with open(out, "ab") as f:
            f.write(body + b"\n")
        self.send_response(204)
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1])
s.serve_forever()' "$d/posted" > "$d/port" &
	receiver=$!
	for _ in $(seq 50); do [ -s "$d/port" ] && break; sleep 0.1; done
	space-exec "$id" -- true	# before it starts: not sent
	setsid "$top/examples/events-webhook" "http://127.0.0.1:$(cat "$d/port")/hook" \
	    '.action == "exec"' 2>"$d/hook.err" &
	hook=$!
	sleep 1
	run space-exec "$id" -- sh -c 'exit 4'
	[ "$status" -eq 4 ]
	space-pause "$id" >/dev/null
	for _ in $(seq 100); do [ -s "$d/posted" ] && break; sleep 0.1; done
	sleep 0.5
	kill -- -"$hook"
	kill "$receiver"
	cat "$d/hook.err"
	jq -se --arg id "$id" 'length == 1 and .[0].action == "exec" and .[0].id == $id and .[0].exit == 4' "$d/posted"
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
