#!/usr/bin/env bats
# The library's modules depend on each other one way: no module uses a
# function of one that uses it back, directly or around a loop, so that a
# reader can take the modules in order (docs/design.md, "Commands and the
# library").  The graph is read from the objects themselves: A -> B when
# A's object needs a symbol B's defines.
load helper

graph() {
	local o s m
	declare -A def
	for o in "$top"/build/lib/*.o; do
		m=${o##*/}
		for s in $(nm --defined-only -g "$o" | awk '{print $3}'); do
			def[$s]=${m%.o}
		done
	done
	for o in "$top"/build/lib/*.o; do
		m=${o##*/}
		m=${m%.o}
		for s in $(nm -u "$o" | awk '{print $2}'); do
			[ -n "${def[$s]:-}" ] && [ "${def[$s]}" != "$m" ] &&
				echo "$m ${def[$s]}"
		done
	done | sort -u
}

# Prints the modules on a loop, if any: tsort reports a cycle on stderr.
loops() {
	graph | tsort 2>&1 >/dev/null | grep -v '^tsort: -: input contains a loop:$' || true
}

@test "the module graph is read from the objects" {
	run graph
	assert_success
	# A few edges that must be there, so that an empty graph cannot pass.
	assert_line "sp_sandbox sp_sandbox_make"
	assert_line "sp_sandbox sp_pool_claim"
	assert_line "sp_gw_conn sp_gw_stream"
	[ "${#lines[@]}" -gt 100 ]
}

@test "no module of lib/ depends on itself through others" {
	run loops
	assert_success
	assert_output ""
}

@test "the loop check finds a loop when there is one" {
	graph() { printf '%s\n' "a b" "b c" "c a" "c d"; }
	run loops
	assert_output --partial "tsort: a"
}

@test "each module includes its own part's header, and none the whole library's" {
	local f n bad=0
	for f in "$top"/lib/sp_*.c; do
		n=$(grep -cE '^#include "sp_(core|storage|vm|net|sandbox|cli|api)\.h"' "$f" || true)
		if [ "$n" -ne 1 ] || grep -q '^#include "sp\.h"' "$f"; then
			echo "${f##*/}: $n part headers"
			bad=1
		fi
	done
	[ "$bad" -eq 0 ]
}
