#!/usr/bin/env bats
# The suites' own checks: each one can fail its test (tests/check-can-fail).
load helper

@test "every negated check and every && list of tests in the suites can fail its test" {
	run "$top/tests/check-can-fail"
	echo "$output"
	assert_success
}

@test "check-can-fail finds the checks that cannot fail, and lets be those that can" {
	local f=$BATS_TEST_TMPDIR/t.bats
	# Each line of the file after its "|" (bats would take a line that
	# starts with @test here for a test of this file).
	sed 's/^[[:blank:]]*|//' >"$f" <<-'B'
	|@test "a" {
	|	! grep -q x /dev/null
	|	[ -e /a ] && [ -e /b ]
	|	[[ -e /a && -e /b ]]
	|	[ -e /a ] && [ -e /b ] || false	# a comment
	|	true
	|}
	|@test "b" {
	|	! grep -q x /dev/null || false
	|	! grep -q x /dev/null |
	|	    cat
	|	[ -e /a ] &&
	|	    [ -e /b ]
	|	[ -e /a ] && break
	|	true
	|}
	|@test "c" {
	|	true
	|	[ -e /a ] && [ -e /b ]
	|}
	|f() {
	|	! grep -q x /dev/null
	|}
	B
	run "$top/tests/check-can-fail" "$f"
	echo "$output"
	assert_failure
	[ "${#lines[@]}" -eq 4 ]
	[[ "${lines[0]}" == "$f:2: "* ]]
	[[ "${lines[1]}" == "$f:3: "* ]]
	[[ "${lines[2]}" == "$f:10: "* ]]
	[[ "${lines[3]}" == "$f:12: "* ]]
}
