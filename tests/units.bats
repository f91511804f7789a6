#!/usr/bin/env bats
# The systemd units pass systemd-analyze verify (on copies whose ExecStart
# points at this build, since verify wants the binaries it names to exist).
load helper

@test "every unit passes systemd-analyze verify" {
	command -v systemd-analyze
	d=$BATS_TEST_TMPDIR/units
	mkdir -p "$d"
	for u in "$top"/units/*; do
		sed "s|/usr/local/bin/|$top/build/bin/|g" "$u" > "$d/${u##*/}"
	done
	ls "$d" | sed 's/^/# /' >&3
	[ "$(ls "$d" | wc -l)" -ge 5 ]
	run systemd-analyze verify --man=no "$d"/*.service "$d"/*.timer
	echo "$output"
	assert_success
	# An unknown key or a bad value is only a warning (exit 0): none allowed.
	[ -z "$output" ]
}
