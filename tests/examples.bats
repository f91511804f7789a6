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

@test "examples/pause-idle pauses nothing that is busy" {
	run "$top/examples/pause-idle" 86400
	assert_success
	[ -z "$output" ]
}
