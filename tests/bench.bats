#!/usr/bin/env bats
# The bench's own tools: what bench/create's figures are timed with.
load helper

at_once=$top/build/bench/at-once

@test "at-once starts N copies at once and times each to its exit" {
	# Each copy waits until all N have started: a tool that ran them one
	# after another would never see the third, and the copies time out.
	dir=$(mktemp -d)
	run "$at_once" 3 bash -c 'touch "$1/$$"; for _ in $(seq 200); do
		[ "$(ls "$1" | wc -l)" -ge 3 ] && { echo "{\"pid\":$$}"; exit 0; }
		sleep 0.01; done; exit 1' _ "$dir"
	rm -rf "$dir"
	assert_success
	[ "${#lines[@]}" -eq 3 ]
	for l in "${lines[@]}"; do
		[[ $l =~ ^[0-9]+\.[0-9]{3}$'\t'\{\"pid\":[0-9]+\}$ ]]
	done
	# Three different processes answered.
	[ "$(printf '%s\n' "${lines[@]}" | cut -f2 | sort -u | wc -l)" -eq 3 ]
}

@test "at-once times a copy to its own exit, not the slowest's" {
	# Two copies: one sleeping 0.5 s, the other not at all.
	run "$at_once" 2 sh -c 'if mkdir "$1" 2>/dev/null; then sleep 0.5; fi
		echo x' _ "$BATS_TEST_TMPDIR/first"
	assert_success
	fast=$(printf '%s\n' "${lines[@]}" | cut -f1 | sort -n | head -n 1)
	slow=$(printf '%s\n' "${lines[@]}" | cut -f1 | sort -n | tail -n 1)
	awk -v f="$fast" -v s="$slow" 'BEGIN { exit !(s >= 500 && f < s - 200) }'
}

@test "at-once exits non-zero when a copy fails, and still reports every copy" {
	run "$at_once" 2 sh -c 'if mkdir "$1" 2>/dev/null; then exit 3; fi
		echo ok' _ "$BATS_TEST_TMPDIR/one"
	assert_failure 1
	[ "${#lines[@]}" -eq 2 ]
}

@test "at-once refuses a bad count or a missing command (exit 2)" {
	for n in 0 65 x 3x ''; do
		run "$at_once" "$n" true
		assert_failure 2
		assert_output --partial usage
	done
	run "$at_once" 2
	assert_failure 2
	run "$at_once" 2 /nonexistent/command
	assert_failure 1
	assert_output --partial "at-once: /nonexistent/command"
}
