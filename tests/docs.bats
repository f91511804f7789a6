#!/usr/bin/env bats
# The documentation a user's clone has: README and docs/ whose links stay in
# the repository and lead somewhere, and for every command a line in the
# README, a man page that formats without a warning, and completions.
load helper

@test "README and docs/*.md: every link stays in the repository and leads somewhere" {
	run "$top/tests/check-links"
	echo "$output"
	assert_success
	[ -f "$top/docs/design.md" ]
	[ -f "$top/docs/operations.md" ]
	[ -f "$top/docs/benchmarks.md" ]
}

@test "check-links finds a link that leaves, a missing file and a missing heading" {
	local md=$top/docs/check-links-test.md
	printf '# Here\n[a](https://example.org) [b](../no-such-file) [c](#there)\n[d](#here) and http://bare.example\n' >"$md"
	run "$top/tests/check-links" "$md"
	rm -f "$md"
	echo "$output"
	assert_failure
	[ "$(grep -c 'leaves the repository' <<<"$output")" -eq 1 ]
	[ "$(grep -c 'no such file' <<<"$output")" -eq 1 ]
	[ "$(grep -c 'no heading #there' <<<"$output")" -eq 1 ]
	[ "$(grep -c 'a URL in the text' <<<"$output")" -eq 1 ]
	[ "$(grep -c '#here' <<<"$output")" -eq 0 ]
}

@test "the README is for a new user: short, and it names every command" {
	[ "$(wc -l <"$top/README.md")" -le 320 ]
	local c missing=()
	for c in $(commands); do
		grep -q "$c" "$top/README.md" || missing+=("$c")
	done
	echo "not in the README: ${missing[*]}"
	[ ${#missing[@]} -eq 0 ]
}

@test "every command has a man page that formats without a warning" {
	local c out
	for c in $(commands); do
		[ -f "$top/cmd/$c.1" ] || { echo "no cmd/$c.1"; false; }
		out=$(groff -mandoc -ww -z "$top/cmd/$c.1" 2>&1)
		[ -z "$out" ] || { echo "$c.1: $out"; false; }
		grep -q '^\.Sh EXIT STATUS' "$top/cmd/$c.1" || { echo "$c.1: no EXIT STATUS"; false; }
	done
}

@test "every command has bash and zsh completions" {
	local c
	for c in $(commands); do
		grep -q "$c" "$top/completion/space.bash" || { echo "bash: $c"; false; }
		grep -q "$c" "$top/completion/_space" || { echo "zsh: $c"; false; }
	done
}
