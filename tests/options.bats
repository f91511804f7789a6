#!/usr/bin/env bats
# Command-line habits, for every command: --help and --version; options
# before or after the operands, as GNU getopt permutes; only "--" ends them.
load helper

version=$(sed -n 's/^VERSION = //p' "$top/Makefile")

setup_file() {
	import_minimal
	create > "$BATS_FILE_TMPDIR/ids"
}

teardown_file() {
	remove_listed "$BATS_FILE_TMPDIR/ids"
}

@test "--help on every command: its usage on stdout, exit 0, wherever it stands" {
	local c n=0
	[ "$(commands | wc -l)" -ge 27 ]
	for c in $(commands); do
		run --separate-stderr "$c" --help
		echo "# $c --help: $status ${output:0:60}"
		[ "$status" -eq 0 ]
		[[ $output == "usage: $c "* ]]
		[ -z "$stderr" ]
		# After an operand too, and not taken for an operand or a
		# command after "--".
		run --separate-stderr "$c" aaaaaaaaaaaa --help
		[ "$status" -eq 0 ]
		[[ $output == "usage: $c "* ]]
		n=$((n + 1))
	done
	[ "$n" -eq "$(commands | wc -l)" ]
}

@test "--version on every command: its name and the build's version, exit 0" {
	local c
	[ -n "$version" ]
	for c in $(commands); do
		run --separate-stderr "$c" --version
		[ "$status" -eq 0 ]
		[ "$output" = "$c $version" ]
	done
}

@test "an unknown option on every command: usage on stderr, exit 100, nothing on stdout" {
	local c
	for c in $(commands); do
		run --separate-stderr "$c" --no-such-option
		echo "# $c: $status"
		[ "$status" -eq 100 ]
		[ -z "$output" ]
		[[ $stderr == *"usage: $c"* ]]
	done
}

# (jq -e on many lines judges the last alone: jq -s and any() judge them all.)

@test "space-exec: -d, -e, -w before or after the id; after -- all is the guest's" {
	local id pid1 pid2
	id=$(head -n 1 "$BATS_FILE_TMPDIR/ids")
	pid1=$(space-exec -d "$id" -- sleep 30 | jq -r .pid)
	pid2=$(space-exec "$id" -d -- sleep 31 | jq -r .pid)
	space-ps "$id" | jq -se --argjson p "$pid1" 'any(.[]; .pid == $p and .detached and .state == "running")'
	space-ps "$id" | jq -se --argjson p "$pid2" 'any(.[]; .pid == $p and .detached and .state == "running")'
	run space-exec -e A=1 -w /tmp "$id" -- sh -c 'echo "$A $PWD"'
	assert_success
	assert_output "1 /tmp"
	run space-exec "$id" -e A=2 -w /root -- sh -c 'echo "$A $PWD"'
	assert_output "2 /root"
	run space-exec "$id" -- echo -d --help --version -e
	assert_success
	assert_output "-d --help --version -e"
	run space-exec "$id" --timeout 1 -- sleep 5
	[ "$status" -eq 124 ]
	run space-exec --timeout 1 "$id" -- sleep 5
	[ "$status" -eq 124 ]
	# Without "--" a command's own option is taken for ours.
	run space-exec "$id" ls -l
	[ "$status" -eq 100 ]
}

@test "space-kill and space-logs: -s and -f before or after ID PID" {
	local id p1 p2
	id=$(head -n 1 "$BATS_FILE_TMPDIR/ids")
	p1=$(space-exec "$id" -d -- sh -c 'trap "echo got-term; exit 3" TERM; echo up; while :; do sleep 1; done' | jq -r .pid)
	p2=$(space-exec "$id" -d -- sh -c 'trap "echo got-term; exit 3" TERM; echo up; while :; do sleep 1; done' | jq -r .pid)
	sleep 1
	space-kill -s TERM "$id" "$p1" | jq -e '.signal == 15'
	space-kill "$id" "$p2" -s INT | jq -e '.signal == 2'
	run space-logs -f "$id" "$p1"
	assert_output --partial got-term
	run space-logs "$id" "$p2" -f
	assert_output --partial up
	refute_output --partial got-term
}

@test "space-ls, space-fork, space-snap, space-fs: flags on either side of the id" {
	local id a b
	id=$(head -n 1 "$BATS_FILE_TMPDIR/ids")
	a=$(space-ls --state running "$id" | jq -r .id)
	b=$(space-ls "$id" --state running | jq -r .id)
	[ "$a" = "$id" ] && [ "$b" = "$id" ] || false
	[ -z "$(space-ls "$id" --state paused)" ]
	space-fs -p "$id" mkdir /tmp/o/a | jq -e .ok
	space-fs "$id" mkdir /tmp/o/b/c -p -m 700 | jq -e .ok
	space-fs "$id" stat /tmp/o/b/c | jq -e '.mode == 448'
	printf one | space-fs "$id" write /tmp/o/f
	printf two | space-fs -a "$id" write /tmp/o/f
	printf three | space-fs "$id" write /tmp/o/f -a
	[ "$(space-fs "$id" cat /tmp/o/f)" = onetwothree ]
	space-fs "$id" rm /tmp/o -r | jq -e .ok
	run space-fs "$id" stat /tmp/o
	[ "$status" -eq 1 ]
	a=$(space-snap --tag before "$id" | jq -r .snap)
	b=$(space-snap "$id" --tag after | jq -r .snap)
	space-snap ls "$id" | jq -se --arg s "$a" 'any(.[]; .snap == $s and .tag == "before")'
	space-snap ls "$id" | jq -se --arg s "$b" 'any(.[]; .snap == $s and .tag == "after")'
	space-fork -n 2 "$id" | jq -r .id >>"$BATS_FILE_TMPDIR/ids"
	space-fork "$id" -n 2 | jq -r .id >>"$BATS_FILE_TMPDIR/ids"
	[ "$(wc -l <"$BATS_FILE_TMPDIR/ids")" -eq 5 ]
}

@test "space-pool and space-template: a subcommand's options in any order" {
	space-pool set --template minimal --size 0 | jq -e '.size == 0'
	space-pool set --size 0 --template minimal | jq -e '.size == 0'
	run space-template warm minimal --vcpus 1 --memory 256
	assert_success
	run space-template warm --memory 256 minimal --vcpus 1
	assert_success
}

# "space-X FLAGS ID" and "space-X ID FLAGS" for an id that does not exist:
# the same status and the same lines, and not a usage error.
@test "every command that takes an id and a flag: either order, the same result" {
	local nosuch=aaaaaaaaaaaa cases c cmd flags ops a b n=0
	# Each case: the command, the flags, then the operands, split by "|".
	cases=(
		"space-start|--timeout 5|$nosuch"
		"space-stop|--timeout 5|$nosuch"
		"space-snap|--full --tag t|$nosuch"
		"space-suspend|--keep-local|$nosuch"
		"space-restore|--node check|$nosuch"
		"space-ls|--state running|$nosuch"
		"space-fork|-n 2|$nosuch"
		"space-kill|-s 9|$nosuch 12"
		"space-logs|-f|$nosuch 12"
		"space-exec|--timeout 5 -e A=1 -w /tmp|$nosuch"
		"space-fs|-a|$nosuch write /tmp/x"
	)
	for c in "${cases[@]}"; do
		IFS='|' read -r cmd flags ops <<<"$c"
		# shellcheck disable=SC2086
		a=$($cmd $flags $ops </dev/null 2>&1; echo "status $?")
		# shellcheck disable=SC2086
		b=$($cmd $ops $flags </dev/null 2>&1; echo "status $?")
		if [ "$cmd" = space-exec ]; then
			# shellcheck disable=SC2086
			a=$($cmd $flags $ops -- true </dev/null 2>&1; echo "status $?")
			# shellcheck disable=SC2086
			b=$($cmd $ops $flags -- true </dev/null 2>&1; echo "status $?")
		fi
		echo "$cmd: [$a] [$b]"
		[ "$a" = "$b" ]
		[[ $a != *"status 100" ]]
		[[ $a != *"status 0" ]]
		n=$((n + 1))
	done
	[ "$n" -eq 11 ]
}
