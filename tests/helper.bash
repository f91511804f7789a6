# helper.bash: what every bats suite shares.  tests/run-all exports SPACE_ROOT,
# SPACE_RUN, SPACE_GUEST and PATH; a suite run alone gets the same defaults.
bats_require_minimum_version 1.5.0
load /usr/lib/bats/bats-support/load.bash
load /usr/lib/bats/bats-assert/load.bash

top=$(cd "$(dirname "${BATS_TEST_FILENAME}")/.." && pwd)
# SPACE_AS_SPACE_BIN: a directory of the commands run as the user space
# (run-all runs most suites so), found before the build's own.
export PATH="${SPACE_AS_SPACE_BIN:+$SPACE_AS_SPACE_BIN:}$top/build/bin:$PATH"
# Those commands read and write the suite's temporary files, as they would
# an operator's own: bats makes its directories root's alone.
if [ -n "${SPACE_AS_SPACE_BIN:-}" ]; then
	chmod 0711 "$BATS_RUN_TMPDIR" "${BATS_FILE_TMPDIR%/*}" \
	    ${BATS_TEST_TMPDIR:+"${BATS_TEST_TMPDIR%/*}"}
	chown space:space "$BATS_FILE_TMPDIR" ${BATS_TEST_TMPDIR:+"$BATS_TEST_TMPDIR"}
fi
export SPACE_ROOT=${SPACE_ROOT:-/var/tmp/space-check}
export SPACE_RUN=${SPACE_RUN:-/run/space-check}
export SPACE_NODE=${SPACE_NODE:-check}
export SPACE_CONF=${SPACE_CONF:-/dev/null}
export SPACE_GUEST=${SPACE_GUEST:-$top/guest/build}

# A file of the suite's that space-gatewayd reads while it serves (a hosts
# file): the gateway runs as space, and bats makes its directories root's.
space_reads() {
	chmod o+x "$BATS_RUN_TMPDIR" "${BATS_FILE_TMPDIR%/*}" "$BATS_FILE_TMPDIR"
	chmod o+r "$@"
}

# Whether space-noded answers on $SPACE_RUN/noded.sock.
noded_answers() {
	/usr/bin/python3 - "$SPACE_RUN/noded.sock" 2>/dev/null <<-'EOF'
	import socket, sys
	socket.socket(socket.AF_UNIX).connect(sys.argv[1])
	EOF
}

# space-noded for a suite whose processes run as space (space-gatewayd
# wakes a sandbox through it), the node's in $SPACE_RUN, unless one answers
# already; noded_down stops only those started here (one a node).
noded_up() {
	noded_answers && return 0
	space-noded >>"$BATS_FILE_TMPDIR/noded.log" 2>&1 3>&- &
	echo $! >>"$BATS_FILE_TMPDIR/noded.pid"
	for _ in $(seq 100); do noded_answers && return 0; sleep 0.1; done
	return 1
}

noded_down() {
	[ ! -f "$BATS_FILE_TMPDIR/noded.pid" ] ||
	    kill $(cat "$BATS_FILE_TMPDIR/noded.pid") 2>/dev/null || true
}

# Files and trees the suite made for its commands: theirs (space's when
# they run as space), as an operator's own files are.
runners() {
	[ -z "${SPACE_AS_SPACE_BIN:-}" ] || chown -R space:space "$@"
}

# sqlite3 on the node's state DB, run as the user that runs the commands:
# run as root, it takes the DB's WAL on its way out, and space may not make
# it again in root's SPACE_ROOT.
db_sql() {
	if [ -n "${SPACE_AS_SPACE_BIN:-}" ]; then
		runuser -u space -- sqlite3 "$SPACE_ROOT/space.db" "$@"
	else
		sqlite3 "$SPACE_ROOT/space.db" "$@"
	fi
}

# The name of every command in cmd/, one per line.
commands() {
	local c
	for c in "$top"/cmd/space-*.c; do
		c=${c##*/}
		echo "${c%.c}"
	done
}

# The guest image as the template "minimal" (built once, reused after).
import_minimal() {
	space-template import --name minimal "$SPACE_GUEST/rootfs.tar.zst" >/dev/null
}

# Creates sandboxes and prints their ids, one per line.
create() {
	space-create --template minimal "$@" | jq -r 'select(.ok) | .id'
}

# Removes the sandboxes whose ids are in the file $1 (one per line).
remove_listed() {
	[ -f "$1" ] && space-rm <"$1" >/dev/null 2>&1 || true
}

# remove_node ROOT RUN: another node's loop btrfs, its image and run dir
# (a suite's second node), gone: also what a run stopped before its
# teardown left.  A process of the node's that is still going (its
# space-noded, just sent SIGTERM) keeps the btrfs busy: it is given 5 s,
# then the btrfs is detached lazily, never removed file by file.
remove_node() {
	for _ in $(seq 50); do
		mountpoint -q "$1" || break
		umount "$1" 2>/dev/null && break
		sleep 0.1
	done
	if mountpoint -q "$1"; then
		umount -l "$1"
	fi
	rm -rf "$1" "$1.img" "$2"
}

# A suite's own sandboxes: one made for the whole file (setup_file calls
# suite_sandbox; its id is $ID), more with own (create's arguments; the id
# on stdout), all removed by suite_sandboxes_removed in teardown_file.
suite_sandbox() {
	import_minimal
	create > "$BATS_FILE_TMPDIR/ids"
	export ID=$(head -n 1 "$BATS_FILE_TMPDIR/ids")
}

own() {
	local id
	id=$(create "$@")
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	echo "$id"
}

suite_sandboxes_removed() {
	remove_listed "$BATS_FILE_TMPDIR/ids"
}

# The CPU weight file of sandbox $1's VM: its QEMU's cgroup, as libvirt made
# it (cgroup v1's cpu controller, or v2).
vm_weight_file() {
	local pid line path
	pid=$(cat "/run/libvirt/qemu/sp-$1.pid")
	if line=$(grep -E '^[0-9]+:([^:]*,)?cpu(,[^:]*)?:' "/proc/$pid/cgroup"); then
		path=${line#*:*:}
		echo "/sys/fs/cgroup/cpu${path%/emulator}/cpu.shares"
	else
		path=$(sed -n 's/^0:://p' "/proc/$pid/cgroup")
		echo "/sys/fs/cgroup${path%/emulator}/cpu.weight"
	fi
}

# jq over the JSON lines of $output (run merges stderr, which holds the
# human messages, into it).
jout() {
	grep '^{' <<<"$output" | jq "$@"
}

# jq 1.6 with -e exits 0 on an input without any JSON value, so a check like
# `space-ls ID | jq -e '.state == "running"'` would pass on no output at all.
# Here -e asks for a value: no output at all is exit 4, as in jq 1.7.
jq() {
	local a exit_status=0 out rc
	for a in "$@"; do
		case $a in
		--exit-status) exit_status=1 ;;
		--*) ;;
		-*) [[ $a =~ ^-[a-zA-Z]+$ && $a == *e* ]] && exit_status=1 ;;
		esac
	done
	if [ "$exit_status" = 0 ]; then
		command jq "$@"
		return
	fi
	out=$(command jq "$@"; rc=$?; echo ".$rc")
	rc=${out##*.}
	out=${out%.*}
	if [ -z "$out" ]; then
		echo "jq -e: no JSON value" >&2
		return 4
	fi
	printf '%s' "$out"
	return "$rc"
}

# N free TCP ports on 127.0.0.1, on one line.
free_ports() {
	python3 -c '
import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])' "$1"
}
