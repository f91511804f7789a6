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
	# Root acts itself here but where a test names a space-noded (beside
	# the node's, root's commands would go through that one).
	export SPACE_LIBVIRT_URI=${SPACE_LIBVIRT_URI:-qemu:///system}
}

teardown_file() {
	[ -f "$BATS_FILE_TMPDIR/proxy.pid" ] && kill "$(cat "$BATS_FILE_TMPDIR/proxy.pid")" 2>/dev/null
	remove_listed "$BATS_FILE_TMPDIR/ids"
	kill "$(cat "$BATS_FILE_TMPDIR/pid")" 2>/dev/null || true
	for s in nd-a nd-b nd-c nd-flood nd-ro nd-t nd-t2 nd-take nd-u; do
		btrfs subvolume delete "$T/$s" >/dev/null 2>&1 || true
	done
	for s in "$T"/nd-recv/* "$T/nd-open/ro" "$T/nd-s1" "$T/nd-s2" "$T/nd-s"; do
		btrfs subvolume delete "$s" >/dev/null 2>&1 || true
	done
	rm -rf "$T/nd-ulink" "$T/nd-udir" "$T/nd-dir" "$T/nd-d" "$T/nd-link" "$T/nd-vm" "$T/nd-hl" "$T/nd-gw" "$T/nd-own" \
		"$T/nd-disk" "$T/nd-other" \
		"$T/nd-recv" "$T/nd-recv2" "$T/nd-open"
}

# A proxy in front of space-noded at $PROXY: it writes each request line it
# passes on to $BATS_FILE_TMPDIR/requests.
proxy() {
	export PROXY=$BATS_FILE_TMPDIR/proxy.sock
	[ -S "$PROXY" ] && return 0
	python3 - "$PROXY" "$SOCK" "$BATS_FILE_TMPDIR/requests" <<'EOF' &
import socket, sys, threading
path, to, log = sys.argv[1:4]
srv = socket.socket(socket.AF_UNIX); srv.bind(path); srv.listen(16)
lock = threading.Lock()
def one(c):
    req = c.makefile("rb").readline()
    with lock, open(log, "ab") as f:
        f.write(req)
    n = socket.socket(socket.AF_UNIX); n.connect(to); n.sendall(req)
    c.sendall(n.makefile("rb").readline()); c.close(); n.close()
while True:
    threading.Thread(target=one, args=(srv.accept()[0],), daemon=True).start()
EOF
	echo $! > "$BATS_FILE_TMPDIR/proxy.pid"
	for _ in $(seq 50); do [ -S "$PROXY" ] && break; sleep 0.1; done
	[ -S "$PROXY" ]
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

# The domains of this node: those whose XML names a path under its root
# (another node on the host, as tests/run-all's second, has its own).
node_domains() {
	local d
	for d in $(virsh -c qemu:///system list --all --name); do
		virsh -c qemu:///system dumpxml "$d" 2>/dev/null |
		    grep -q "$SPACE_ROOT/" && echo "$d"
	done | sort
}

# Runs its arguments as the user space, let into this file's space-noded
# by its group, every privileged act through it.
as_space() {
	setpriv --reuid=space --regid=space --groups="$GROUP" \
		env SPACE_LIBVIRT_URI=noded:$SOCK "$@"
}

# stream REQUEST HOW [FILE]: sends one request with a descriptor passed
# beside it (SCM_RIGHTS), as a send or a receive needs; prints the answer
# (to stderr with HOW stdout). HOW: w (FILE opened to write), r (to read),
# stdout (this process's fd 1), socket (a socket's), none (no descriptor).
stream() {
	python3 - "$SOCK" "$@" <<'EOF'
import os, socket, sys
path, req, how = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX)
s.connect(path)
line = req.encode() + b"\n"
out = sys.stdout
if how == "none":
    s.sendall(line)
else:
    if how == "w":
        fd = os.open(sys.argv[4], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    elif how == "r":
        fd = os.open(sys.argv[4], os.O_RDONLY)
    elif how == "stdout":
        fd = os.dup(1)
        out = sys.stderr
    else:
        other = socket.socket(socket.AF_UNIX)
        fd = os.dup(other.fileno())
    socket.send_fds(s, [line], [fd])
    os.close(fd)
    if how == "stdout":
        os.close(1)
print(s.makefile("rb").readline().decode().strip(), file=out)
EOF
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
	[ ! -e "$T/nd-b" ] && [ ! -e "$T/nd-c" ] || false
	grep -q '"uid":0,"op":"subvol-snapshot","path":"tmp/nd-b","ok":true' "$BATS_FILE_TMPDIR/log"
}

@test "subvol-readonly flips the flag; subvol-delete takes a tree whose parts are read-only, and nothing beside it" {
	run call '{"op":"subvol-create","path":"tmp/nd-t"}' \
		'{"op":"subvol-create","path":"tmp/nd-t2"}' \
		'{"op":"subvol-readonly","path":"tmp/nd-t2","readonly":true}'
	[ "$output" = $'{"ok":true}\n{"ok":true}\n{"ok":true}' ]
	[ "$(btrfs property get -ts "$T/nd-t2" ro)" = "ro=true" ]
	run call '{"op":"subvol-readonly","path":"tmp/nd-t2","readonly":false}'
	[ "$output" = '{"ok":true}' ]
	[ "$(btrfs property get -ts "$T/nd-t2" ro)" = "ro=false" ]
	# A tree: nd-t holds a/b, each read-only, and a file; nd-t2 beside it.
	mkdir "$T/nd-t/d"
	btrfs subvolume create "$T/nd-t/d/a" >/dev/null
	btrfs subvolume create "$T/nd-t/d/a/b" >/dev/null
	echo x > "$T/nd-t/d/a/b/f"
	btrfs property set -ts "$T/nd-t/d/a/b" ro true
	btrfs property set -ts "$T/nd-t/d/a" ro true
	btrfs property set -ts "$T/nd-t" ro true
	run call '{"op":"subvol-delete","path":"tmp/nd-t"}'
	[ "$output" = '{"ok":true}' ]
	[ ! -e "$T/nd-t" ] && [ -d "$T/nd-t2" ] || false
	run call '{"op":"subvol-readonly","path":"tmp/nd-t"}' \
		'{"op":"subvol-readonly","path":"tmp/nd-t","readonly":true}' \
		'{"op":"subvol-readonly","path":"tmp/nd-t2","readonly":"yes"}'
	[ "$(sed -n 1p <<<"$output" | jq -r .error)" = bad-input ]
	[ "$(sed -n 2p <<<"$output" | jq -r .error)" = not-found ]
	[ "$(sed -n 3p <<<"$output" | jq -r .error)" = bad-input ]
	run call '{"op":"subvol-delete","path":"tmp/nd-t2"}'
	[ "$output" = '{"ok":true}' ]
}

@test "dir-create makes a directory and those above it, root's; dir-remove takes an empty one; symlinks and out-of-area paths refused" {
	ln -sfn /etc "$T/nd-link"
	run call '{"op":"dir-create","path":"tmp/nd-d/x/y"}' '{"op":"dir-create","path":"tmp/nd-d/x/y"}' \
		'{"op":"dir-create","path":"tmp/nd-link/x"}' '{"op":"dir-create","path":"ca/x"}' \
		'{"op":"dir-remove","path":"tmp/nd-d/x"}' '{"op":"dir-remove","path":"tmp/nd-d/x/y"}' \
		'{"op":"dir-remove","path":"tmp/nd-d/x/y"}' '{"op":"dir-remove","path":"tmp/nd-link/x"}'
	echo "$output" | sed 's/^/# /' >&3
	[ "$(sed -n 1p <<<"$output")" = '{"ok":true}' ]
	[ "$(sed -n 2p <<<"$output")" = '{"ok":true}' ]
	[ "$(sed -n 3p <<<"$output" | jq -r .error)" = bad-input ]
	[ "$(sed -n 4p <<<"$output" | jq -r .error)" = bad-input ]
	[[ "$(sed -n 5p <<<"$output")" == *"not empty"* ]]	# x holds y
	[ "$(sed -n 6p <<<"$output")" = '{"ok":true}' ]
	[ "$(sed -n 7p <<<"$output" | jq -r .error)" = not-found ]
	[ "$(sed -n 8p <<<"$output" | jq -r .error)" = bad-input ]
	[ "$(stat -c '%U %a' "$T/nd-d/x")" = "root 755" ]
	[ ! -e "$T/nd-d/x/y" ] && [ ! -e /etc/x ] || false
	rm -rf "$T/nd-d"
}

@test "a command's own subvolumes go through space-noded: a volume made, snapshotted and removed, each act its op in the log" {
	export SPACE_LIBVIRT_URI=noded:$SOCK
	cp "$BATS_FILE_TMPDIR/log" "$BATS_FILE_TMPDIR/log.before"
	run space-volume create nd-vol --size 16M
	assert_success
	vid=$(jq -r .id <<<"$output")
	space-volume snap nd-vol s1 >/dev/null
	[ "$(btrfs property get -ts "$SPACE_ROOT/volumes/$vid@s1" ro)" = "ro=true" ]
	space-volume rm nd-vol@s1 nd-vol >/dev/null
	[ ! -e "$SPACE_ROOT/volumes/$vid" ] && [ ! -e "$SPACE_ROOT/volumes/$vid@s1" ] || false
	new=$(diff "$BATS_FILE_TMPDIR/log.before" "$BATS_FILE_TMPDIR/log" | sed -n 's/^> //p')
	echo "$new" | sed 's/^/# /' >&3
	grep -q "\"op\":\"subvol-create\",\"path\":\"volumes/$vid\",\"ok\":true" <<<"$new"
	grep -q "\"op\":\"subvol-snapshot\",\"path\":\"volumes/$vid@s1\",\"ok\":true" <<<"$new"
	grep -q "\"op\":\"subvol-delete\",\"path\":\"volumes/$vid@s1\",\"ok\":true" <<<"$new"
	grep -q "\"op\":\"subvol-delete\",\"path\":\"volumes/$vid\",\"ok\":true" <<<"$new"
}

@test "run as the user space, space-volume makes, snapshots, lists and removes a volume: its subvolumes through space-noded, space's until read-only" {
	space-init >/dev/null
	run as_space space-volume create nd-svol --size 16M
	assert_success
	vid=$(jq -r .id <<<"$output")
	[ "$(stat -c %U "$SPACE_ROOT/volumes/$vid")" = space ]
	[ "$(stat -c %U "$SPACE_ROOT/volumes/$vid/disk.raw")" = space ]
	run as_space space-volume snap nd-svol s1
	assert_success
	[ "$(stat -c '%U %G %a' "$SPACE_ROOT/volumes/$vid@s1")" = "root space 750" ]
	[ "$(btrfs property get -ts "$SPACE_ROOT/volumes/$vid@s1" ro)" = "ro=true" ]
	run as_space space-volume ls nd-svol
	assert_success
	[ "$(jq -r '.snaps[0].snap' <<<"$output")" = s1 ]
	run as_space space-volume rm nd-svol@s1 nd-svol
	assert_success
	[ ! -e "$SPACE_ROOT/volumes/$vid" ] && [ ! -e "$SPACE_ROOT/volumes/$vid@s1" ] || false
	for op in subvol-create subvol-snapshot subvol-delete; do
		grep -q "\"uid\":$(id -u space),\"op\":\"$op\",\"path\":\"volumes/$vid" "$BATS_FILE_TMPDIR/log"
	done
	# Without space-noded, btrfs keeps space from deleting what it made.
	run as_space space-volume create nd-svol2 --size 16M
	assert_success
	vid=$(jq -r .id <<<"$output")
	run setpriv --reuid=space --regid=space --clear-groups btrfs subvolume delete "$SPACE_ROOT/volumes/$vid"
	[ "$status" -ne 0 ]
	run as_space space-volume rm nd-svol2
	assert_success
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
	[ -d "$T/nd-dir" ] && [ -L "$T/nd-link" ] && [ ! -e "$T/nd-b" ] || false
	alive
}

@test "unknown ops, unknown fields, non-UTF-8, bad JSON and NULs are refused; it goes on serving" {
	run call '{"op":"rm-rf","path":"tmp/x"}' '{"op":"ping","path":"tmp/x"}' \
		'{"op":"subvol-create","path":"tmp/x","mode":"0777"}' \
		$'{"op":"subvol-create","path":"tmp/\xff"}' 'not json' '[]' \
		'{"op":"subvol-create","path":"tmp/x\u0000y"}' \
		'{"op":"subvol-create","path":"tmp/x","op":"ping"}' \
		'{"op":"subvol-snapshot","src":"tmp/nd-a","path":"tmp/x","readonly":"yes"}' \
		'{"op":"pids-sweep","path":"tmp/x"}'
	echo "$output" | sed 's/^/# /' >&3
	[ "$(wc -l <<<"$output")" -eq 10 ]
	[ "$(jq -s 'map(select(.ok == false and .error == "bad-input")) | length' <<<"$output")" -eq 10 ]
	[ ! -e "$T/x" ]
	alive
}

@test "an overlong request ends its connection, a peer gone mid-request is forgotten, a flood is served; others go on" {
	run python3 - "$SOCK" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b'{"op":"ping","x":"' + b"a" * 30000)
print(s.makefile("rb").readline().decode().strip())
try:					# then closed (reset: it left bytes unread)
    print("closed" if s.recv(10) == b"" else "open")
except ConnectionResetError:
    print("closed")
EOF
	echo "$output" | sed 's/^/# /' >&3
	[[ "${lines[0]}" == *'"error":"bad-input"'*"at most 24576 bytes"* ]]
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

@test "send and receive: a read-only subvolume's stream out to a descriptor passed with the request, and in again beneath the root" {
	btrfs subvolume create "$T/nd-s" >/dev/null
	head -c 1048576 /dev/urandom > "$T/nd-s/one"
	btrfs subvolume snapshot -r "$T/nd-s" "$T/nd-s1" >/dev/null
	echo two > "$T/nd-s/two"
	btrfs subvolume snapshot -r "$T/nd-s" "$T/nd-s2" >/dev/null
	run stream '{"op":"subvol-send","path":"tmp/nd-s1"}' w "$BATS_FILE_TMPDIR/s1"
	[ "$output" = '{"ok":true}' ]
	run stream '{"op":"subvol-send","path":"tmp/nd-s2","parent":"tmp/nd-s1"}' w "$BATS_FILE_TMPDIR/s2"
	[ "$output" = '{"ok":true}' ]
	# The full stream holds the MiB, the delta only what changed.
	[ "$(stat -c %s "$BATS_FILE_TMPDIR/s1")" -gt 1048576 ]
	[ "$(stat -c %s "$BATS_FILE_TMPDIR/s2")" -lt 4096 ]
	btrfs receive --dump < "$BATS_FILE_TMPDIR/s2" | grep -q 'write.*nd-s2/two'
	mkdir "$T/nd-recv"
	run stream '{"op":"subvol-receive","path":"tmp/nd-recv"}' r "$BATS_FILE_TMPDIR/s1"
	[ "$output" = '{"ok":true}' ]
	run stream '{"op":"subvol-receive","path":"tmp/nd-recv"}' r "$BATS_FILE_TMPDIR/s2"
	[ "$output" = '{"ok":true}' ]
	cmp "$T/nd-s/one" "$T/nd-recv/nd-s2/one"
	[ "$(cat "$T/nd-recv/nd-s2/two")" = two ]
	[ "$(btrfs property get -ts "$T/nd-recv/nd-s2" ro)" = "ro=true" ]
	grep -q '"uid":0,"op":"subvol-receive","path":"tmp/nd-recv","ok":true' "$BATS_FILE_TMPDIR/log"
	# A member of the socket's group, whom btrfs send refuses (it needs
	# CAP_SYS_ADMIN), has the stream sent into its own pipe.
	run setpriv --reuid=nobody --regid=nogroup --clear-groups btrfs send "$T/nd-s1"
	[ "$status" -ne 0 ]
	setpriv --reuid=nobody --regid=nogroup --groups="$GROUP" bash -c \
		"$(declare -f stream); SOCK=$SOCK; stream "'"$@"' _ \
		'{"op":"subvol-send","path":"tmp/nd-s1"}' stdout \
		2> "$BATS_FILE_TMPDIR/s1.answer" | cat > "$BATS_FILE_TMPDIR/s1.nobody"
	[ "$(cat "$BATS_FILE_TMPDIR/s1.answer")" = '{"ok":true}' ]
	cmp "$BATS_FILE_TMPDIR/s1" "$BATS_FILE_TMPDIR/s1.nobody"
	grep -q "\"uid\":$(id -u nobody),\"op\":\"subvol-send\"" "$BATS_FILE_TMPDIR/log"
}

@test "send and receive refuse a missing or wrong descriptor, a writable source, a path out of bounds and a bad stream; nothing changed" {
	[ -e "$T/nd-s1" ] && [ -s "$BATS_FILE_TMPDIR/s1" ] || false	# the test before's
	ln -sfn /etc "$T/nd-link"
	mkdir -p "$T/nd-recv2"
	head -c 4096 /dev/urandom > "$BATS_FILE_TMPDIR/junk"
	run stream '{"op":"subvol-send","path":"tmp/nd-s1"}' none
	[[ "$output" == *'"error":"bad-input"'*"needs a descriptor"* ]]
	run stream '{"op":"ping"}' w "$BATS_FILE_TMPDIR/x"
	[[ "$output" == *'"error":"bad-input"'*"ping takes no descriptor"* ]]
	run stream '{"op":"subvol-send","path":"tmp/nd-s"}' w "$BATS_FILE_TMPDIR/x"
	[[ "$output" == *'"error":"bad-state"'*"not read-only"* ]]
	run stream '{"op":"subvol-send","path":"tmp/nd-s1","parent":"tmp/nd-s"}' w "$BATS_FILE_TMPDIR/x"
	[[ "$output" == *'"error":"bad-state"'*"not read-only"* ]]
	run stream '{"op":"subvol-send","path":"tmp/nd-s1"}' r "$BATS_FILE_TMPDIR/s1"
	[[ "$output" == *'"error":"bad-input"'*"not open for writing"* ]]
	run stream '{"op":"subvol-receive","path":"tmp/nd-recv2"}' w "$BATS_FILE_TMPDIR/x"
	[[ "$output" == *'"error":"bad-input"'*"not open for reading"* ]]
	run stream '{"op":"subvol-send","path":"tmp/nd-s1"}' socket
	[[ "$output" == *'"error":"bad-input"'*"not a pipe or a regular file"* ]]
	run stream '{"op":"subvol-send","path":"pool/nd-s1"}' w "$BATS_FILE_TMPDIR/x"
	[[ "$output" == *'"error":"bad-input"'* ]]
	run stream '{"op":"subvol-send","path":"tmp/../../etc"}' w "$BATS_FILE_TMPDIR/x"
	[[ "$output" == *'"error":"bad-input"'* ]]
	run stream '{"op":"subvol-send","path":"tmp/nd-s1","src":"tmp/nd-s"}' w "$BATS_FILE_TMPDIR/x"
	[[ "$output" == *'"error":"bad-input"'*"takes no 'src'"* ]]
	run stream '{"op":"subvol-send","path":"tmp/nd-link"}' w "$BATS_FILE_TMPDIR/x"
	[[ "$output" == *'"error":"bad-input"'* ]]
	run stream '{"op":"subvol-receive","path":"tmp/nd-link"}' r "$BATS_FILE_TMPDIR/s1"
	[[ "$output" == *'"error":"bad-input"'* ]]
	run stream '{"op":"subvol-receive","path":"etc"}' r "$BATS_FILE_TMPDIR/s1"
	[[ "$output" == *'"error":"bad-input"'* ]]
	# btrfs opens what was checked again by its path: only where nobody
	# but root can change a directory above it.
	mkdir -p "$T/nd-open/in"
	btrfs subvolume snapshot -r "$T/nd-s" "$T/nd-open/ro" >/dev/null
	chmod 0777 "$T/nd-open"
	run stream '{"op":"subvol-send","path":"tmp/nd-open/ro"}' w "$BATS_FILE_TMPDIR/x"
	[[ "$output" == *'"error":"bad-input"'*"nd-open may be changed by others than root"* ]]
	run stream '{"op":"subvol-receive","path":"tmp/nd-open/in"}' r "$BATS_FILE_TMPDIR/s1"
	[[ "$output" == *'"error":"bad-input"'*"nd-open may be changed by others than root"* ]]
	[ -z "$(ls -A "$T/nd-open/in")" ]
	run stream '{"op":"subvol-receive","path":"tmp/nd-recv2"}' r "$BATS_FILE_TMPDIR/junk"
	[[ "$output" == *'"error":"io"'*"btrfs receive"* ]]
	[ -z "$(ls -A "$T/nd-recv2")" ]
	[ ! -e /etc/nd-s1 ]
	# Descriptors flooded in (three a message, a byte each, no line
	# ended), then the peer gone: space-noded holds none of them.
	local pid fds
	pid=$(cat "$BATS_FILE_TMPDIR/pid")
	fds=$(ls /proc/"$pid"/fd | wc -l)
	python3 - "$SOCK" <<'EOF'
import os, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
r, w = os.pipe()
for _ in range(300):
    socket.send_fds(s, [b"{"], [r, w, r])
s.close()
EOF
	sleep 0.5
	alive
	[ "$(ls /proc/"$pid"/fd | wc -l)" -eq "$fds" ]
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
	# In it: the snapshot is made, and is its maker's to fill; an act
	# off the list is not.
	run setpriv --reuid=nobody --regid=nogroup --groups="$GROUP" bash -c "$(declare -f call); SOCK=$SOCK; call "'"$@"' _ \
		'{"op":"subvol-snapshot","src":"templates/'"$t"'","path":"tmp/nd-flood"}' \
		'{"op":"chown","path":"tmp/nd-flood","uid":65534}'
	echo "$output" | sed 's/^/# /' >&3
	[ "${lines[0]}" = '{"ok":true}' ]
	[[ "${lines[1]}" == *'"error":"bad-input"'*"unknown op"* ]]
	[ "$(stat -c '%u %g' "$T/nd-flood")" = "$(id -u nobody) $(getent group nogroup | cut -d: -f3)" ]
	setpriv --reuid=nobody --regid=nogroup --clear-groups touch "$T/nd-flood/mine"
	grep -q "\"uid\":$(id -u nobody),\"op\":\"subvol-snapshot\"" "$BATS_FILE_TMPDIR/log"
	# Read-only, it is root's: its maker cannot clear the flag again.
	run setpriv --reuid=nobody --regid=nogroup --groups="$GROUP" bash -c "$(declare -f call); SOCK=$SOCK; call "'"$@"' _ \
		'{"op":"subvol-snapshot","src":"tmp/nd-flood","path":"tmp/nd-ro","readonly":true}' \
		'{"op":"subvol-readonly","path":"tmp/nd-flood","readonly":true}'
	[ "$output" = $'{"ok":true}\n{"ok":true}' ]
	for s in nd-ro nd-flood; do
		[ "$(stat -c '%u %g %a' "$T/$s")" = "0 $(getent group nogroup | cut -d: -f3) 750" ]
		[ "$(btrfs property get -ts "$T/$s" ro)" = "ro=true" ]
		[ -e "$T/$s/mine" ]
	done
	run setpriv --reuid=nobody --regid=nogroup --clear-groups btrfs property set -ts "$T/nd-flood" ro false
	[ "$status" -ne 0 ]
	[ "$(btrfs property get -ts "$T/nd-flood" ro)" = "ro=true" ]
	# libvirt itself is closed to it, even read-only; its VMs are
	# listed through the socket.
	run setpriv --reuid=nobody --regid=nogroup --groups="$GROUP" virsh -c qemu:///system list --all
	[ "$status" -ne 0 ]
	run setpriv --reuid=nobody --regid=nogroup --groups="$GROUP" virsh -r -c qemu:///system list --all
	[ "$status" -ne 0 ]
	run setpriv --reuid=nobody --regid=nogroup --groups="$GROUP" bash -c "$(declare -f call); SOCK=$SOCK; call "'"$@"' _ '{"op":"vm-list"}'
	[ "$(command jq -r '.ok, (.value | type)' <<<"$output")" = $'true\narray' ]
}

@test "a sandbox's life through space-noded: made, run, stopped, started, checkpointed, rolled back and removed; each libvirt call one of its ops" {
	space-template ls | jq -e 'select(.template == "minimal")' >/dev/null || import_minimal
	proxy
	: > "$BATS_FILE_TMPDIR/requests"
	export SPACE_LIBVIRT_URI=noded:$PROXY
	id=$(create --no-pool)
	[ -n "$id" ]
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	space-exec "$id" -- sh -c 'echo before > /root/mark; sync'
	space-stop "$id" >/dev/null
	space-start "$id" >/dev/null
	snap=$(space-snap --full "$id" | jq -r .snap)
	space-exec "$id" -- sh -c 'echo after > /root/mark; sync'
	space-rollback "$id" "$snap" >/dev/null
	[ "$(space-exec "$id" -- cat /root/mark)" = before ]
	space-rm "$id" >/dev/null
	[ "$(virsh -c qemu:///system domstate "sp-$id" 2>&1)" != running ]
	echo "# ops: $(command jq -r .op "$BATS_FILE_TMPDIR/requests" | sort -u | tr '\n' ' ')" >&3
	for op in vm-define vm-start vm-destroy vm-undefine vm-save-memory vm-restore vm-state \
	    subvol-snapshot subvol-readonly subvol-delete vm-release; do
		command jq -se --arg op "$op" 'any(.[]; .op == $op)' "$BATS_FILE_TMPDIR/requests" >/dev/null
	done
	grep -q "\"op\":\"vm-restore\",\"path\":\"sp-$id\",\"ok\":true" "$BATS_FILE_TMPDIR/log"
	# A define names its domain in the log too (taken from its XML).
	grep -q "\"op\":\"vm-define\",\"path\":\"sp-$id\",\"ok\":true" "$BATS_FILE_TMPDIR/log"
}

@test "a suspend and restore through space-noded: its btrfs send and receive are space-noded's, and the files come back" {
	space-template ls | jq -e 'select(.template == "minimal")' >/dev/null || import_minimal
	export SPACE_LIBVIRT_URI=noded:$SOCK
	export SPACE_STORE=file://$BATS_FILE_TMPDIR/store
	export SPACE_KMS=file:$BATS_FILE_TMPDIR/keys/default.key
	id=$(create --no-pool)
	[ -n "$id" ]
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	space-exec "$id" -- sh -c 'head -c 65536 /dev/urandom > /root/mark; sync'
	sum=$(space-exec "$id" -- sha256sum /root/mark)
	run space-suspend "$id"
	assert_success
	grep -q "\"op\":\"subvol-send\",\"path\":\"snapshots/$id/[a-z0-9]*\",\"ok\":true" "$BATS_FILE_TMPDIR/log"
	grep -q '"op":"subvol-send","path":"templates/minimal@[0-9a-f]*","ok":true' "$BATS_FILE_TMPDIR/log"
	run space-restore "$id"
	assert_success
	grep -q "\"op\":\"subvol-receive\",\"path\":\"snapshots/$id\",\"ok\":true" "$BATS_FILE_TMPDIR/log"
	[ "$(space-exec "$id" -- sha256sum /root/mark)" = "$sum" ]
	space-rm "$id" >/dev/null
}

@test "run as the user space, a sandbox's life through space-noded: made, run, paused, stopped, started, snapshotted and removed, nothing left" {
	space-template ls | jq -e 'select(.template == "minimal")' >/dev/null || import_minimal
	space-init >/dev/null
	run as_space space-create --template minimal --no-pool
	assert_success
	id=$(jq -r .id <<<"$output")
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	run as_space space-exec "$id" -- sh -c 'echo kept > /root/mark; sync; cat /root/mark'
	assert_success
	[ "$output" = kept ]
	for c in space-pause space-resume space-stop space-start; do
		run as_space "$c" "$id"
		assert_success
	done
	run as_space space-ls "$id"
	[ "$(jq -r .state <<<"$output")" = running ]
	run as_space space-exec "$id" -- cat /root/mark
	[ "$output" = kept ]
	# A disk snapshot: its directory made by space-noded, root's.
	run as_space space-snap "$id"
	assert_success
	snap=$(jq -r .snap <<<"$output")
	[ "$(stat -c %U "$SPACE_ROOT/snapshots/$id")" = root ]
	[ "$(btrfs property get -ts "$SPACE_ROOT/snapshots/$id/$snap" ro)" = "ro=true" ]
	run as_space space-rm "$id"
	assert_success
	[ ! -e "$SPACE_ROOT/sandboxes/$id" ] && [ ! -e "$SPACE_RUN/$id" ] || false
	[ ! -e "$SPACE_ROOT/snapshots/$id" ]
	[ "$(virsh -c qemu:///system domstate "sp-$id" 2>&1)" != running ]
	local u
	u=$(id -u space)
	for op in subvol-snapshot vm-prepare vm-define vm-start vm-destroy subvol-delete vm-release \
	    dir-create dir-remove; do
		grep -q "\"uid\":$u,\"op\":\"$op\",.*\"ok\":true" "$BATS_FILE_TMPDIR/log"
	done
	# Not while its VM runs: the run directory stays.
	sid=$(create --no-pool)
	echo "$sid" >> "$BATS_FILE_TMPDIR/ids"
	run call '{"op":"vm-release","name":"sp-'"$sid"'"}'
	[ "$(jq -r .error <<<"$output")" = bad-state ]
	[ -d "$SPACE_RUN/$sid" ]
	space-rm "$sid" >/dev/null
}

@test "run as the user space: made from the checkpoint, a full checkpoint, rollbacks, a fork, suspend and restore, a pool's pod, reconcile, usage" {
	space-template ls | jq -e 'select(.template == "minimal")' >/dev/null || import_minimal
	space-template warm minimal >/dev/null
	space-init >/dev/null
	local gid
	gid=$(getent group space | cut -d: -f3)
	# From the template's checkpoint, which space may search and whose
	# image it may read (the memory restored, not a boot).
	run as_space space-create --template minimal --no-pool
	assert_success
	id=$(jq -r .id <<<"$output")
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	[ "$(jq -r .path <<<"$output")" = checkpoint ]
	[ ! -e "$SPACE_ROOT/sandboxes/$id/mem.sav" ]
	as_space space-exec "$id" -- sh -c 'echo one > /root/v; sync'
	# A full checkpoint: its directory and image root's, the group's to
	# read; read-only.
	run as_space space-snap --full "$id"
	assert_success
	full=$(jq -r .snap <<<"$output")
	[ "$(jq -r .exclusive_bytes <<<"$output")" -ge 0 ]
	d=$SPACE_ROOT/snapshots/$id/$full
	[ "$(stat -c '%u %g %a' "$d")" = "0 $gid 750" ]
	[ "$(stat -c '%u %g %a' "$d/mem.sav")" = "0 $gid 640" ]
	[ "$(btrfs property get -ts "$d" ro)" = "ro=true" ]
	grep -q "\"uid\":$(id -u space),\"op\":\"vm-save-memory\",.*\"ok\":true" "$BATS_FILE_TMPDIR/log"
	# Back to it, and to a disk snapshot.
	as_space space-exec "$id" -- sh -c 'echo two > /root/v; sync'
	run as_space space-rollback "$id" "$full"
	assert_success
	[ "$(as_space space-exec "$id" -- cat /root/v)" = one ]
	run as_space space-snap "$id"
	assert_success
	disk=$(jq -r .snap <<<"$output")
	as_space space-exec "$id" -- sh -c 'echo three > /root/v; sync'
	run as_space space-rollback "$id" "$disk"
	assert_success
	[ "$(as_space space-exec "$id" -- cat /root/v)" = one ]
	# A fork of the full checkpoint: its image re-identified by
	# space-noded, which the manager cannot write.
	run as_space space-fork "$id" "$full"
	assert_success
	fid=$(jq -r .id <<<"$output")
	echo "$fid" >> "$BATS_FILE_TMPDIR/ids"
	[ "$(as_space space-exec "$fid" -- cat /root/v)" = one ]
	[ "$(as_space space-exec "$fid" -- hostname)" = "$fid" ]
	# Suspended to the store and restored, its temporary files in
	# tmp/transfer, space's.
	[ "$(stat -c %U "$SPACE_ROOT/tmp/transfer")" = space ]
	run as_space space-suspend "$fid"
	assert_success
	[ "$(as_space space-ls "$fid" | jq -r .state)" = suspended ]
	run as_space space-restore "$fid"
	assert_success
	[ "$(as_space space-exec "$fid" -- cat /root/v)" = one ]
	# What root sends to the store space owns is space's too.
	rid=$(create --no-pool)
	echo "$rid" >> "$BATS_FILE_TMPDIR/ids"
	run space-suspend "$rid"
	assert_success
	[ -z "$(find "$SPACE_ROOT/objects" -user root)" ]
	space-rm "$rid" >/dev/null
	# The usage of what the VMs alone may read, counted by space-noded.
	[ "$(as_space space-ls "$id" | jq -r .disk_exclusive_bytes)" -ge 0 ]
	grep -q "\"uid\":$(id -u space),\"op\":\"subvol-usage\",.*\"ok\":true" "$BATS_FILE_TMPDIR/log"
	# A pool's pod, made and claimed.
	run as_space space-pool set --template minimal --size 1
	assert_success
	run as_space space-pool fill
	assert_success
	run as_space space-create --template minimal
	assert_success
	pid=$(jq -r .id <<<"$output")
	echo "$pid" >> "$BATS_FILE_TMPDIR/ids"
	[ "$(jq -r .path <<<"$output")" = pool ]
	run as_space space-pool set --template minimal --size 0
	assert_success
	# A reconcile pass finds nothing it cannot do (volumes/ is listed).
	run as_space space-reconcile --once
	assert_success
	echo "$output" | sed 's/^/# /' >&3
	[ -z "$(grep -v '"ok":true' <<<"$output")" ]
	# The node's beat and a scheduler pass (its units' jobs): the
	# node is alive, so nothing of it is lost.
	run as_space space-node beat
	assert_success
	run as_space space-schedule
	assert_success
	! grep -q '"lost"' <<<"$output" || false
	[ "$(space-ls "$id" | jq -r .state)" = running ]
	run as_space space-rm "$id" "$fid" "$pid"
	assert_success
}

@test "what a command run as root makes, space goes on with: a credential, egress, a port, the key; its snapshots to roll back to and fork" {
	space-template ls | jq -e 'select(.template == "minimal")' >/dev/null || import_minimal
	space-template warm minimal >/dev/null
	space-init >/dev/null
	local id fid full disk d p
	id=$(as_space space-create --template minimal --no-pool | jq -r .id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	# Root, straight to libvirt and btrfs, in space's stores.
	space-cred rm nd-root >/dev/null 2>&1 || true
	echo tok | space-cred add --name nd-root --scope global --host a.example \
	    --inject 'header:Authorization:Bearer {}' >/dev/null
	space-egress set "$id" --allow a.example:443 >/dev/null
	read -r p < <(free_ports 1)
	space-port "$id" 8080 --listen "127.0.0.1:$p" >/dev/null
	space-exec "$id" -- sh -c 'echo one > /root/v; sync'
	full=$(space-snap --full "$id" | jq -r .snap)
	space-exec "$id" -- sh -c 'echo dsk > /root/v; sync'
	disk=$(space-snap "$id" | jq -r .snap)
	# Nothing of space's stores is root's now (but the gateway's own
	# decision log: it runs as root).
	run find "$SPACE_ROOT/creds" "$SPACE_ROOT/egress" "$SPACE_ROOT/ports" \
	    "$SPACE_ROOT/keys" "$SPACE_ROOT/api" ! -user space ! -name decisions.log
	echo "$output" | sed 's/^/# root'"'"'s: /' >&3
	[ -z "$output" ]
	run as_space space-cred ls
	assert_success
	grep -q nd-root <<<"$output"
	run as_space space-egress set "$id" --allow b.example:443
	assert_success
	run as_space space-port rm "$id" 8080
	assert_success
	# Root's snapshots: root's and space's group's, as space-noded
	# leaves those it takes for space (their directory the group's to
	# list, not the VMs'); space rolls back to them and forks one.
	d=$SPACE_ROOT/snapshots/$id
	[ "$(stat -c '%U %G %a' "$d")" = "root space 750" ]
	[ "$(stat -c '%U %G %a' "$d/$full")" = "root space 750" ]
	[ "$(stat -c '%U %G %a' "$d/$full/mem.sav")" = "root space 640" ]
	[ "$(stat -c '%U %G %a' "$d/$disk")" = "root space 750" ]
	[ "$(btrfs property get -ts "$d/$disk" ro)" = ro=true ]
	as_space space-exec "$id" -- sh -c 'echo two > /root/v; sync'
	run as_space space-rollback "$id" "$disk"
	assert_success
	[ "$(as_space space-exec "$id" -- cat /root/v)" = dsk ]
	run as_space space-rollback "$id" "$full"
	assert_success
	[ "$(as_space space-exec "$id" -- cat /root/v)" = one ]
	run as_space space-fork "$id" "$full"
	assert_success
	fid=$(jq -r .id <<<"$output")
	echo "$fid" >> "$BATS_FILE_TMPDIR/ids"
	[ "$(as_space space-exec "$fid" -- cat /root/v)" = one ]
	run as_space space-rm "$id" "$fid"
	assert_success
	space-cred rm nd-root >/dev/null
}

@test "userns-map maps only a client's own child's new user namespace, once: 0..65535 to the import's ids, 65536 to the client" {
	run setpriv --reuid=space --regid=space --groups="$GROUP" /usr/bin/python3 - "$SOCK" <<'EOF'
import ctypes, os, socket, sys
def ask(req):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
    f = s.makefile("rwb"); f.write(req.encode() + b"\n"); f.flush()
    print(f.readline().decode().strip(), flush=True); s.close()
def child(unshare):
    r, w = os.pipe(); go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        if unshare and ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:
            os._exit(1)
        os.write(w, b"u"); os.read(go_r, 1)
        with open("/proc/self/uid_map") as m:
            os.write(w, m.read().encode())
        os._exit(0)
    os.read(r, 1)
    return pid, r, go_w
ask('{"op":"userns-map","pid":%d}' % os.getppid())
ask('{"op":"userns-map","pid":4194303}')
pid, r, go = child(False)
ask('{"op":"userns-map","pid":%d}' % pid)
os.write(go, b"g"); os.waitpid(pid, 0)
pid, r, go = child(True)
ask('{"op":"userns-map","pid":%d}' % pid)
ask('{"op":"userns-map","pid":%d}' % pid)
os.write(go, b"g"); os.waitpid(pid, 0)
print(" ".join(os.read(r, 4096).decode().split()))
EOF
	echo "$output" | sed 's/^/# /' >&3
	[[ "${lines[0]}" == *'"error":"denied"'*"not a child of the client's"* ]]
	[[ "${lines[1]}" == *'"error":"not-found"'* ]]
	[[ "${lines[2]}" == *'"error":"bad-input"'*"not in a user namespace of its own"* ]]
	[ "${lines[3]}" = '{"ok":true}' ]
	[[ "${lines[4]}" == *'"error":"bad-input"'*"uid_map is written already"* ]]
	[ "${lines[5]}" = "0 1800000000 65536 65536 $(id -u space) 1" ]
	# Root's own import unpacks owners itself; a bad pid is refused.
	run call '{"op":"userns-map","pid":'$$'}' '{"op":"userns-map","pid":"1"}' \
		'{"op":"userns-map","pid":0}' '{"op":"userns-map","pid":4194305}' \
		'{"op":"userns-map"}' '{"op":"userns-map","pid":2,"uid":0}'
	echo "$output" | sed 's/^/# /' >&3
	[ "$(jq -s 'map(select(.ok == false and .error == "bad-input")) | length' <<<"$output")" -eq 6 ]
	[[ "${lines[0]}" == *"for a client other than root"* ]]
	alive
}

@test "with no more capabilities than its unit gives it, space-noded maps an import's user namespace: a template imported as space" {
	local caps s=$SPACE_RUN/noded-unit-caps.sock pid
	caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$top/units/space-noded.service" |
	    tr ' ' '\n' | sed 's/^CAP_/+/' | tr 'A-Z' 'a-z' | paste -sd,)
	[[ "$caps" == *+setuid*+setgid* ]]
	setpriv --bounding-set=-all,"$caps" --no-new-privs space-noded --socket "$s" \
	    >"$BATS_FILE_TMPDIR/unit-caps.log" 2>&1 &
	pid=$!
	for _ in $(seq 50); do [ -S "$s" ] && break; sleep 0.1; done
	run setpriv --reuid=space --regid=space --init-groups env SPACE_LIBVIRT_URI="noded:$s" \
	    "$top/build/bin/space-template" import --name nd-caps --disk-extra "$((RANDOM % 1000 + 100))M" \
	    "$SPACE_GUEST/rootfs.tar.zst"
	kill "$pid"
	echo "$output" | sed 's/^/# /' >&3
	assert_success
	jout -e '.ok and .reused == false'
	grep -q '"op":"userns-map","path":"","ok":true' "$BATS_FILE_TMPDIR/unit-caps.log"
	space-template rm nd-caps >/dev/null
}

@test "run as root with SPACE_LIBVIRT_URI unset, a command goes through the node's space-noded when one answers; SPACE_LIBVIRT_URI=qemu:///system, SPACE_JAIL=off or a space-noded gone leave it acting itself" {
	local rundir pid
	rundir=$(mktemp -d /run/sp-route-XXXXXX)
	# A node's run directory of its own, its space-noded on its default
	# socket there: space-ls asks libvirt for its VMs' states.
	SPACE_RUN=$rundir space-noded >"$BATS_FILE_TMPDIR/route.log" 2>&1 &
	pid=$!
	for _ in $(seq 50); do [ -S "$rundir/noded.sock" ] && break; sleep 0.1; done
	env -u SPACE_LIBVIRT_URI SPACE_RUN="$rundir" space-ls >/dev/null
	grep -q '^{"uid":0,"op":"virt-type"' "$BATS_FILE_TMPDIR/route.log"
	: >"$BATS_FILE_TMPDIR/route.log"
	SPACE_LIBVIRT_URI=qemu:///system SPACE_RUN="$rundir" space-ls >/dev/null
	env -u SPACE_LIBVIRT_URI SPACE_JAIL=off SPACE_RUN="$rundir" space-ls >/dev/null
	[ ! -s "$BATS_FILE_TMPDIR/route.log" ]
	# Killed, it leaves its socket: nobody answers there, root acts itself.
	kill -9 "$pid"
	wait "$pid" 2>/dev/null || true
	[ -S "$rundir/noded.sock" ]
	run env -u SPACE_LIBVIRT_URI SPACE_RUN="$rundir" space-ls
	assert_success
	rm -rf "$rundir"
}

@test "a sqlite3 run as root takes the state DB's WAL: run as space, a command says so and what to do; space-init makes it again" {
	[ -e "$SPACE_ROOT/space.db-wal" ]
	sqlite3 "$SPACE_ROOT/space.db" 'SELECT count(*) FROM templates' >/dev/null
	[ ! -e "$SPACE_ROOT/space.db-wal" ]
	run setpriv --reuid=space --regid=space --init-groups "$top/build/bin/space-ls"
	[ "$status" -ne 0 ]
	jout -e '.error == "db" and (.msg | contains("WAL")) and (.msg | contains("run space-init"))'
	space-init >/dev/null
	[ "$(stat -c %U "$SPACE_ROOT/space.db-wal")" = space ]
	run setpriv --reuid=space --regid=space --init-groups "$top/build/bin/space-ls"
	assert_success
}

@test "space-noded's subvol-usage: a subvolume's own bytes, beneath the root only" {
	btrfs subvolume create "$T/nd-u" >/dev/null
	head -c 1048576 /dev/urandom > "$T/nd-u/f"
	sync
	run call '{"op":"subvol-usage","path":"tmp/nd-u"}'
	[ "$(jq -r .value <<<"$output")" -ge 1048576 ]
	ln -sfn "$T/nd-u" "$T/nd-ulink"
	mkdir -p "$T/nd-udir"
	run call '{"op":"subvol-usage","path":"tmp/nd-ulink"}' \
		'{"op":"subvol-usage","path":"tmp/../etc"}' \
		'{"op":"subvol-usage","path":"tmp/nd-udir"}' \
		'{"op":"subvol-usage","path":"tmp/nd-u","readonly":true}' \
		'{"op":"subvol-usage","path":"pool/x"}'
	echo "$output" | sed 's/^/# /' >&3
	[ "$(jq -r .error <<<"${lines[0]}")" = bad-input ]
	[ "$(jq -r .error <<<"${lines[1]}")" = bad-input ]
	[ "$(jq -r .error <<<"${lines[2]}")" = bad-state ]
	[ "$(jq -r .error <<<"${lines[3]}")" = bad-input ]
	[ "$(jq -r .error <<<"${lines[4]}")" = bad-input ]
	rm -f "$T/nd-ulink"
	rmdir "$T/nd-udir"
	btrfs subvolume delete "$T/nd-u" >/dev/null
}

@test "space-noded's tls-leaf: a leaf the node CA signs, for an address of this host only" {
	[ -f "$SPACE_ROOT/ca/ca.key" ] || space-init >/dev/null
	run call '{"op":"tls-leaf","host":"127.0.0.1"}'
	jq -r .value.cert <<<"$output" > "$BATS_TEST_TMPDIR/leaf.crt"
	jq -r .value.key <<<"$output" > "$BATS_TEST_TMPDIR/leaf.key"
	# Signed by the CA, for that address, and the key is the leaf's.
	openssl verify -CAfile "$SPACE_ROOT/ca/ca.crt" "$BATS_TEST_TMPDIR/leaf.crt"
	openssl x509 -in "$BATS_TEST_TMPDIR/leaf.crt" -noout -ext subjectAltName | grep -q 'IP Address:127.0.0.1'
	[ "$(openssl pkey -in "$BATS_TEST_TMPDIR/leaf.key" -pubout)" = \
	  "$(openssl x509 -in "$BATS_TEST_TMPDIR/leaf.crt" -noout -pubkey)" ]
	run call '{"op":"tls-leaf","host":"::1"}' '{"op":"tls-leaf","host":"0.0.0.0"}'
	[ "$(jq -r .ok <<<"${lines[0]}")" = true ]
	[ "$(jq -r .ok <<<"${lines[1]}")" = true ]
	# Another host's address or a name would pass for a server the
	# templates' trust of the CA reaches: refused, as is what is no host.
	run call '{"op":"tls-leaf","host":"192.0.2.1"}' \
		'{"op":"tls-leaf","host":"example.com"}' \
		'{"op":"tls-leaf","host":"127.0.0.1","path":"tmp/x"}' \
		'{"op":"tls-leaf"}' \
		'{"op":"tls-leaf","host":""}' \
		"{\"op\":\"tls-leaf\",\"host\":\"$(printf '1%.0s' $(seq 60))\"}" \
		'{"op":"tls-leaf","host":["127.0.0.1"]}'
	echo "$output" | sed 's/^/# /' >&3
	[ "${#lines[@]}" -eq 7 ]
	for l in "${lines[@]}"; do [ "$(jq -r .error <<<"$l")" = bad-input ]; done
	grep -q 'not an address of this host' <<<"${lines[0]}"
	alive
}

@test "a save into a directory its client made: taken first (root's, the client's group's, 0750); one holding a mem.sav already is refused" {
	as_nobody() {
		setpriv --reuid=nobody --regid=nogroup --groups="$GROUP" bash -c "$(declare -f call); SOCK=$SOCK; call "'"$@"' _ "$@"
	}
	local save='{"op":"vm-save-memory","name":"sp-aaaaaaaaaaaa","file":"'"$T"'/nd-take/mem.sav"}'
	run as_nobody '{"op":"subvol-create","path":"tmp/nd-take"}'
	[ "$output" = '{"ok":true}' ]
	setpriv --reuid=nobody --regid=nogroup --clear-groups touch "$T/nd-take/mem.sav"
	run as_nobody "$save"
	echo "$output" | sed 's/^/# /' >&3
	[ "$(jq -r .error <<<"$output")" = bad-input ]
	[[ "$output" == *"a save image is there already"* ]]
	[ "$(stat -c %U "$T/nd-take")" = nobody ]
	setpriv --reuid=nobody --regid=nogroup --clear-groups rm "$T/nd-take/mem.sav"
	# Taken, then libvirt has no such domain to save.
	run as_nobody "$save"
	echo "$output" | sed 's/^/# /' >&3
	[ "$(jq -r .ok <<<"$output")" = false ]
	[ "$(stat -c '%u %g %a' "$T/nd-take")" = "0 $(getent group nogroup | cut -d: -f3) 750" ]
	run setpriv --reuid=nobody --regid=nogroup --clear-groups touch "$T/nd-take/planted"
	[ "$status" -ne 0 ]
	btrfs subvolume delete "$T/nd-take" >/dev/null
}

@test "space-noded defines only space's own domain XML, for a sandbox of this node: forged ones are refused, nothing changed" {
	space-template ls | jq -e 'select(.template == "minimal")' >/dev/null || import_minimal
	proxy
	: > "$BATS_FILE_TMPDIR/requests"
	id=$(SPACE_LIBVIRT_URI=noded:$PROXY create --no-pool)
	[ -n "$id" ]
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	# Files that are not a VM's, where a VM's would be.
	mkdir -p "$T/nd-vm" "$T/nd-hl" "$T/nd-gw" "$T/nd-own"
	ln -sfn /etc/shadow "$T/nd-vm/disk.raw"
	ln -sfn /etc/passwd "$T/nd-vm/mem.sav"
	ln -f "$SPACE_ROOT/ca/ca.key" "$T/nd-hl/disk.raw"
	# A VM's very files, in directories where others than root could swap
	# them between the check and libvirt's open.
	for d in nd-gw nd-own; do
		head -c 1048576 /dev/zero > "$T/$d/disk.raw"
		head -c 4096 /dev/zero > "$T/$d/mem.sav"
	done
	chmod 0775 "$T/nd-gw"
	chown nobody "$T/nd-own"
	for d in nd-vm nd-hl nd-gw nd-own; do
		cp "$SPACE_ROOT/sandboxes/$id/vmlinuz" "$SPACE_ROOT/sandboxes/$id/initrd.img" "$T/$d/"
	done
	local shadow key doms
	shadow=$(stat -c '%u %g %a' /etc/shadow)
	key=$(stat -c '%u %g %a' "$SPACE_ROOT/ca/ca.key")
	doms=$(node_domains)
	run python3 - "$SOCK" "$BATS_FILE_TMPDIR/requests" "$SPACE_ROOT" "$SPACE_RUN" <<'EOF'
import json, re, socket, sys
sock, reqs, root, run = sys.argv[1:5]
xml = next(r["xml"] for r in map(json.loads, open(reqs)) if r["op"] == "vm-define")
name = re.search("<name>(.*)</name>", xml).group(1); id = name[3:]
disk = re.search("<source file='([^']*)'", xml).group(1)
d = disk.rsplit("/", 1)[0]
label = r"<label>\+\d+:\+\d+</label>"
forged = [
    ("a host device", xml.replace("<devices>\n", "<devices>\n    <hostdev mode='subsystem' type='pci'/>\n")),
    ("a comment", xml.replace("</domain>", "<!-- -->\n</domain>")),
    ("another QEMU argument", xml.replace("ioeventfd=off'/>", "ioeventfd=off'/>\n    <qemu:arg value='-S'/>")),
    ("an escaped disk path", xml.replace("disk.raw'", "disk&#46;raw'")),
    ("/etc/shadow as its disk", xml.replace(disk, "/etc/shadow")),
    ("a disk through ..", xml.replace(disk, d + "/../" + id + "/disk.raw")),
    ("a disk outside any area", xml.replace(d, root + "/ca")),
    ("a symlink as its disk", xml.replace(d, root + "/tmp/nd-vm")),
    ("a hard link as its disk", xml.replace(d, root + "/tmp/nd-hl")),
    ("a directory others may write", xml.replace(d, root + "/tmp/nd-gw")),
    ("a directory not root's", xml.replace(d, root + "/tmp/nd-own")),
    ("root's uid", re.sub(label, "<label>+0:+0</label>", xml)),
    ("an unreserved jail uid", re.sub(label, "<label>+1900000001:+1900000001</label>", xml)),
    ("another's channel directory", xml.replace(run + "/" + id, run + "/x")),
    ("another name", xml.replace("<name>" + name, "<name>sp-aaaaaaaaaaaa")),
    ("a name not sp-<id>", xml.replace("<name>" + name, "<name>evil")),
]
def ask(req):
    s = socket.socket(socket.AF_UNIX); s.connect(sock)
    s.sendall(json.dumps(req).encode() + b"\n")
    return json.loads(s.makefile("rb").readline())
for what, x in forged:
    assert x != xml, what
    a = ask({"op": "vm-define", "xml": x})
    print(json.dumps({"what": what, "error": a.get("error"), "msg": a.get("msg")}))
for what, req in [
    ("restore of /etc/passwd", {"op": "vm-restore", "file": "/etc/passwd", "xml": xml}),
    ("restore of a symlink", {"op": "vm-restore", "file": root + "/tmp/nd-vm/mem.sav", "xml": xml}),
    ("restore from a directory others may write", {"op": "vm-restore", "file": root + "/tmp/nd-gw/mem.sav", "xml": xml}),
    ("save to /etc", {"op": "vm-save", "name": name, "file": "/etc/mem.sav"}),
    ("save to ca", {"op": "vm-save-memory", "name": name, "file": root + "/ca/x/mem.sav"}),
    ("a name with ..", {"op": "vm-start", "name": "../x"}),
    ("a disk not vda", {"op": "vm-resize", "name": name, "disk": "sda", "bytes": 1}),
]:
    a = ask(req)
    print(json.dumps({"what": what, "error": a.get("error"), "msg": a.get("msg")}))
# The very XML it was made with is taken again; an absent domain is absent.
print(json.dumps(ask({"op": "vm-define", "xml": xml})))
print(json.dumps(ask({"op": "vm-state", "name": "sp-aaaaaaaaaaaa"})))
EOF
	echo "$output" | sed 's/^/# /' >&3
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 25 ]
	[ "$(printf '%s\n' "${lines[@]:0:23}" | command jq -s 'map(select(.error == "bad-input")) | length')" -eq 23 ]
	[ "$(printf '%s\n' "${lines[@]:0:23}" | command jq -s 'map(select(.msg | test("may be changed by others than root$"))) | length')" -eq 3 ]
	[ "${lines[23]}" = '{"ok": true}' ]
	[ "${lines[24]}" = '{"ok": true, "value": "absent"}' ]
	[ "$(stat -c '%u %g %a' /etc/shadow)" = "$shadow" ]
	[ "$(stat -c '%u %g %a' "$SPACE_ROOT/ca/ca.key")" = "$key" ]
	[ "$(node_domains)" = "$doms" ]
	[ "$(space-exec "$id" -- echo still)" = still ]
	alive
}

@test "a VM's host side through space-noded: its directories, cgroup and qgroup limits only for a sandbox's own paths; symlinks and others' uids refused" {
	mkdir -p "$T/nd-dir"
	ln -sfn /etc "$T/nd-link"
	ln -sfn /etc "$SPACE_RUN/bbbbbbbbbbbb"
	local etc
	etc=$(stat -c '%u %g %a' /etc)
	run call '{"op":"vm-prepare","name":"sp-aaaaaaaaaaaa","dir":"/etc","uid":0}' \
		'{"op":"vm-prepare","name":"sp-aaaaaaaaaaaa","dir":"'"$T"'/nd-link","uid":0}' \
		'{"op":"vm-prepare","name":"sp-aaaaaaaaaaaa","dir":"'"$T"'/nd-dir","uid":1900000001}' \
		'{"op":"vm-prepare","name":"sp-aaaaaaaaaaaa","dir":"'"$T"'/nd-dir","uid":500}' \
		'{"op":"vm-prepare","name":"sp-bbbbbbbbbbbb","dir":"'"$T"'/nd-dir","uid":0}' \
		'{"op":"disk-limit","dir":"/etc","bytes":1048576}' \
		'{"op":"disk-limit","dir":"'"$T"'/nd-link","bytes":1048576}' \
		'{"op":"disk-limit","dir":"'"$T"'/nd-dir","bytes":0}' \
		'{"op":"vm-limit","name":"sp-aaaaaaaaaaaa","bytes":0,"pids":99999999}' \
		'{"op":"vm-limit","name":"sp-aaaaaaaaaaaa","bytes":0,"pids":64}'
	echo "$output" | sed 's/^/# /' >&3
	rm -f "$SPACE_RUN/bbbbbbbbbbbb"
	[ "$(command jq -s 'map(select(.error == "bad-input")) | length' <<<"$output")" -eq 9 ]
	[ "$(sed -n 10p <<<"$output" | command jq -r .error)" = not-running ]
	[ "$(stat -c '%u %g %a' /etc)" = "$etc" ]
	alive
	# A VM's host side needs no libvirt: with none to reach, a VM op fails
	# and vm-prepare still does its work.
	local nolv=$SPACE_RUN/noded-nolv.sock pid
	SPACE_LIBVIRT_URI='qemu+unix:///system?socket=/nonexistent' \
		space-noded --socket "$nolv" >/dev/null 2>&1 &
	pid=$!
	for _ in $(seq 50); do [ -S "$nolv" ] && break; sleep 0.1; done
	run env SOCK="$nolv" bash -c "$(declare -f call); call '{\"op\":\"vm-state\",\"name\":\"sp-cccccccccccc\"}' \
		'{\"op\":\"vm-prepare\",\"name\":\"sp-cccccccccccc\",\"dir\":\"$T/nd-dir\",\"uid\":0}'"
	kill "$pid"
	echo "$output" | sed 's/^/# /' >&3
	[ "$(sed -n 1p <<<"$output" | command jq -r .ok)" = false ]
	[ "$(sed -n 2p <<<"$output")" = '{"ok":true}' ]
	[ -d "$SPACE_RUN/cccccccccccc" ]
	rm -rf "$SPACE_RUN/cccccccccccc"
}

@test "vm-plug takes only a volume's own disk, a regular file of one link, into a VM with a jail; bad forms refused" {
	local id vols=$SPACE_ROOT/volumes passwd
	id=$(create --no-pool)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	passwd=$(stat -c '%u %g %a' /etc/passwd)
	mkdir -p "$vols/yyyyyyyyyyyy" "$vols/xxxxxxxxxxxx"
	ln -sfn /etc/passwd "$vols/yyyyyyyyyyyy/disk.raw"
	: >"$T/nd-other"
	ln -f "$T/nd-other" "$vols/xxxxxxxxxxxx/disk.raw"
	run call '{"op":"vm-plug","name":"sp-'"$id"'","volume":"zzzzzzzzzzzz","disk":"vdb"}' \
		'{"op":"vm-plug","name":"sp-'"$id"'","volume":"yyyyyyyyyyyy","disk":"vdb"}' \
		'{"op":"vm-plug","name":"sp-'"$id"'","volume":"xxxxxxxxxxxx","disk":"vdb"}' \
		'{"op":"vm-plug","name":"sp-'"$id"'","volume":"../x","disk":"vdb"}' \
		'{"op":"vm-plug","name":"sp-'"$id"'","volume":"ABC","disk":"vdb"}' \
		'{"op":"vm-plug","name":"sp-'"$id"'","volume":"zzzzzzzzzzzz","disk":"vda"}' \
		'{"op":"vm-plug","name":"sp-'"$id"'","volume":"zzzzzzzzzzzz","disk":"vdB"}' \
		'{"op":"vm-plug","name":"sp-'"$id"'","volume":"zzzzzzzzzzzz","disk":"vdb","readonly":"yes"}' \
		'{"op":"vm-plug","name":"sp-'"$id"'","volume":"zzzzzzzzzzzz","disk":"vdb","xml":"<disk/>"}' \
		'{"op":"vm-plug","name":"sp-'"$id"'","volume":"zzzzzzzzzzzzzzzzzzzzz","disk":"vdb"}' \
		'{"op":"vm-plug","name":"sp-'"$id"'","volume":"zzzzzzzzzzzzz","disk":"vdb"}' \
		'{"op":"vm-unplug","name":"sp-'"$id"'","volume":"zzzzzzzzzzzz"}'
	echo "$output" | sed 's/^/# /' >&3
	[ "$(sed -n 1p <<<"$output" | command jq -r .error)" = not-found ]
	[ "$(sed -n 2,11p <<<"$output" | command jq -s 'map(select(.error == "bad-input")) | length')" -eq 10 ]
	# Not plugged: an unplug has nothing to wait for.
	[ "$(sed -n 12p <<<"$output")" = '{"ok":true}' ]
	run virsh -c qemu:///system dumpxml "sp-$id"
	[[ "$output" != *ua-vol-* ]]
	[ "$(stat -c '%u %g %a' /etc/passwd)" = "$passwd" ]
	# A VM without a jail: libvirt would chown the disk for its shared
	# QEMU user, whatever is at that path; root plugs those.
	local un
	un=$(SPACE_JAIL=off create --no-pool)
	echo "$un" >> "$BATS_FILE_TMPDIR/ids"
	: >"$T/nd-disk"
	rm -f "$vols/xxxxxxxxxxxx/disk.raw"
	cp "$T/nd-disk" "$vols/xxxxxxxxxxxx/disk.raw"
	run call '{"op":"vm-plug","name":"sp-'"$un"'","volume":"xxxxxxxxxxxx","disk":"vdb"}'
	[ "$(command jq -r .error <<<"$output")" = bad-state ]
	rm -rf "$vols/yyyyyyyyyyyy" "$vols/xxxxxxxxxxxx"
	alive
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
	# The node's state is space's alone; a command run as root keeps
	# it so (SQLite gives the WAL files it makes the database's owner).
	[ "$(stat -c '%U %G %a' "$SPACE_ROOT/space.db")" = "space space 600" ]
	space-ls >/dev/null
	for f in "$SPACE_ROOT"/space.db-*; do
		[ "$(stat -c '%U %a' "$f")" = "space 600" ]
	done
}

@test "space-init makes every area space-noded makes subvolumes in, root's, on a node just made" {
	local fresh=$SPACE_ROOT/tmp/fresh-$$ areas a
	# The areas, as sp_noded_parse.c lists them: space-noded makes what is
	# below one, never the area itself.
	areas=$(sed -n '/^static const char \*const target_areas\[\] = {$/,/^};$/p' \
	    "$top/lib/sp_noded_parse.c" | grep -o '"[a-z]*"' | tr -d '"')
	[ "$(wc -w <<<"$areas")" -ge 7 ]
	mkdir "$fresh"
	SPACE_ROOT=$fresh SPACE_RUN=$BATS_TEST_TMPDIR/run space-init >/dev/null
	for a in $areas; do
		[ -d "$fresh/$a" ] || { echo "no $a/"; rm -rf "$fresh"; false; }
		# root's, written by no one else: drwxr-xr-x, say.
		[[ "$(stat -c '%u %A' "$fresh/$a")" == 0\ d????-??-? ]] ||
		    { stat -c "$a: %u %A" "$fresh/$a"; rm -rf "$fresh"; false; }
	done
	rm -rf "$fresh"
}
