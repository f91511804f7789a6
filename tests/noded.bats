#!/usr/bin/env bats
# space-noded, the node manager, on the test node's real btrfs root: its
# closed list of operations, and clients that send it what they should not.
load helper

setup_file() {
	export SOCK=$SPACE_RUN/noded-test.sock GROUP=spacetest
	getent group "$GROUP" >/dev/null || groupadd "$GROUP"
	space-noded --socket "$SOCK" --group "$GROUP" >"$BATS_FILE_TMPDIR/log" 2>&1 &
	echo $! > "$BATS_FILE_TMPDIR/pid"
	for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
	[ -S "$SOCK" ]
	export T=$SPACE_ROOT/tmp
}

teardown_file() {
	kill "$(cat "$BATS_FILE_TMPDIR/pid")" 2>/dev/null || true
	for s in nd-a nd-b nd-c nd-flood; do
		btrfs subvolume delete "$T/$s" >/dev/null 2>&1 || true
	done
	rm -rf "$T/nd-dir" "$T/nd-link"
}

# Sends each argument as a request line on one connection; prints each
# answer line.
call() {
	python3 - "$SOCK" "$@" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rwb")
for req in sys.argv[2:]:
    f.write(req.encode("utf-8", "surrogateescape") + b"\n"); f.flush()
    print(f.readline().decode().strip())
EOF
}

alive() {
	[ "$(call '{"op":"ping"}')" = '{"ok":true}' ]
}

@test "create, snapshot (read-only too) and delete subvolumes beneath the root, each logged with the peer's uid" {
	run call '{"op":"subvol-create","path":"tmp/nd-a"}' \
		'{"op":"subvol-snapshot","src":"tmp/nd-a","path":"tmp/nd-b","readonly":true}' \
		'{"op":"subvol-snapshot","src":"tmp/nd-b","path":"tmp/nd-c"}'
	[ "$output" = $'{"ok":true}\n{"ok":true}\n{"ok":true}' ]
	btrfs subvolume show "$T/nd-a" >/dev/null
	[ "$(btrfs property get -ts "$T/nd-b" ro)" = "ro=true" ]
	[ "$(btrfs property get -ts "$T/nd-c" ro)" = "ro=false" ]
	run call '{"op":"subvol-delete","path":"tmp/nd-c"}' '{"op":"subvol-delete","path":"tmp/nd-b"}'
	[ "$output" = $'{"ok":true}\n{"ok":true}' ]
	[ ! -e "$T/nd-b" ] && [ ! -e "$T/nd-c" ]
	grep -q '"uid":0,"op":"subvol-snapshot","path":"tmp/nd-b","ok":true' "$BATS_FILE_TMPDIR/log"
}

@test "paths outside the root, with .. or through a symlink, and plain directories: clear errors, nothing changed" {
	mkdir -p "$T/nd-dir"
	ln -sfn /etc "$T/nd-link"
	ls /etc > "$BATS_FILE_TMPDIR/etc.before"
	run call '{"op":"subvol-create","path":"tmp/../../etc/x"}' \
		'{"op":"subvol-create","path":"/etc/x"}' \
		'{"op":"subvol-create","path":"etc/x"}' \
		'{"op":"subvol-create","path":"tmp"}' \
		'{"op":"subvol-create","path":"tmp/nd-link/x"}' \
		'{"op":"subvol-snapshot","src":"tmp/nd-link","path":"tmp/nd-b"}' \
		'{"op":"subvol-delete","path":"tmp/nd-dir"}' \
		'{"op":"subvol-delete","path":"tmp/nd-link"}' \
		'{"op":"subvol-snapshot","src":"templates/no-such@0","path":"tmp/nd-b"}' \
		'{"op":"subvol-snapshot","src":"pool/x","path":"tmp/nd-b"}'
	echo "$output" | sed 's/^/# /' >&3
	[ "$(sed -n 1p <<<"$output" | jq -r .error)" = bad-input ]
	[ "$(sed -n 2p <<<"$output" | jq -r .error)" = bad-input ]
	[ "$(sed -n 3p <<<"$output" | jq -r .error)" = bad-input ]
	[ "$(sed -n 4p <<<"$output" | jq -r .error)" = bad-input ]
	[ "$(sed -n 5p <<<"$output" | jq -r .error)" = bad-input ]	# ELOOP: a symlink
	[ "$(sed -n 6p <<<"$output" | jq -r .error)" = bad-input ]
	[ "$(sed -n 7p <<<"$output" | jq -r .error)" = bad-state ]	# not a subvolume
	[ "$(sed -n 8p <<<"$output" | jq -r .error)" = bad-input ]
	[ "$(sed -n 9p <<<"$output" | jq -r .error)" = not-found ]
	[ "$(sed -n 10p <<<"$output" | jq -r .error)" = bad-input ]	# not a source area
	ls /etc | diff - "$BATS_FILE_TMPDIR/etc.before"
	[ -d "$T/nd-dir" ] && [ -L "$T/nd-link" ] && [ ! -e "$T/nd-b" ]
	alive
}

@test "unknown ops, unknown fields, non-UTF-8, bad JSON and NULs are refused; it goes on serving" {
	run call '{"op":"rm-rf","path":"tmp/x"}' '{"op":"ping","path":"tmp/x"}' \
		'{"op":"subvol-create","path":"tmp/x","mode":"0777"}' \
		$'{"op":"subvol-create","path":"tmp/\xff"}' 'not json' '[]' \
		'{"op":"subvol-create","path":"tmp/x\u0000y"}' \
		'{"op":"subvol-create","path":"tmp/x","op":"ping"}' \
		'{"op":"subvol-snapshot","src":"tmp/nd-a","path":"tmp/x","readonly":"yes"}'
	echo "$output" | sed 's/^/# /' >&3
	[ "$(wc -l <<<"$output")" -eq 9 ]
	[ "$(jq -s 'map(select(.ok == false and .error == "bad-input")) | length' <<<"$output")" -eq 9 ]
	[ ! -e "$T/x" ]
	alive
}

@test "an overlong request ends its connection, a peer gone mid-request is forgotten, a flood is served; others go on" {
	run python3 - "$SOCK" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b'{"op":"ping","x":"' + b"a" * 20000)
print(s.makefile("rb").readline().decode().strip())
try:					# then closed (reset: it left bytes unread)
    print("closed" if s.recv(10) == b"" else "open")
except ConnectionResetError:
    print("closed")
EOF
	echo "$output" | sed 's/^/# /' >&3
	[[ "${lines[0]}" == *'"error":"bad-input"'*"at most 8192 bytes"* ]]
	[ "${lines[1]}" = closed ]
	# Half a request, then gone; and 100 connections at once (64 served).
	python3 - "$SOCK" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b'{"op":"subvol-create","pa'); s.close()
many = []
for _ in range(100):
    c = socket.socket(socket.AF_UNIX)
    try:
        c.connect(sys.argv[1]); many.append(c)
    except OSError:
        pass
for c in many:
    c.close()
EOF
	alive
	# 2000 requests in one write: each answered, in order.
	run python3 - "$SOCK" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b'{"op":"ping"}\n' * 2000)
f = s.makefile("rb")
print(sum(1 for _ in range(2000) if f.readline() == b'{"ok":true}\n'))
EOF
	[ "$output" = 2000 ]
	alive
}

@test "as another user with no help a privileged act fails; through the socket's group only the list's acts succeed" {
	space-template ls | jq -e 'select(.template == "minimal")' >/dev/null || import_minimal
	local t
	t=$(space-template ls | jq -r 'select(.template == "minimal") | "\(.template)@\(.digest)"' | head -n 1)
	[ -n "$t" ]
	run setpriv --reuid=nobody --regid=nogroup --clear-groups \
		btrfs subvolume snapshot "$SPACE_ROOT/templates/$t" "$T/nd-flood"
	[ "$status" -ne 0 ]
	[ ! -e "$T/nd-flood" ]
	# Not in the group: the socket (0660 root:GROUP) is closed to it.
	[ "$(stat -c '%a %U %G' "$SOCK")" = "660 root $GROUP" ]
	run setpriv --reuid=nobody --regid=nogroup --clear-groups python3 -c \
		'import socket,sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "$SOCK"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Permission denied"* ]]
	# In it: the snapshot is made (and is root's), an act off the list is not.
	run setpriv --reuid=nobody --regid=nogroup --groups="$GROUP" bash -c "$(declare -f call); SOCK=$SOCK; call "'"$@"' _ \
		'{"op":"subvol-snapshot","src":"templates/'"$t"'","path":"tmp/nd-flood"}' \
		'{"op":"chown","path":"tmp/nd-flood","uid":65534}'
	echo "$output" | sed 's/^/# /' >&3
	[ "${lines[0]}" = '{"ok":true}' ]
	[[ "${lines[1]}" == *'"error":"bad-input"'*"unknown op"* ]]
	[ "$(stat -c %u "$T/nd-flood")" = 0 ]
	grep -q "\"uid\":$(id -u nobody),\"op\":\"subvol-snapshot\"" "$BATS_FILE_TMPDIR/log"
}

@test "space-init makes the system user and group space, once" {
	space-init >/dev/null
	run getent passwd space
	[ "$status" -eq 0 ]
	[[ "$output" == *":/nonexistent:/usr/sbin/nologin" ]]
	[ "$(id -gn space)" = space ]
	[ "$(id -u space)" -lt 1000 ]			# a system account
	space-init >/dev/null
	[ "$(getent passwd space | wc -l)" -eq 1 ]
}
