#!/usr/bin/env bats
# The guest end of the egress tunnel (guest/daemon-egress.c, design.md) on the
# host, no VM: space-daemon in its test mode listens on a unix socket standing
# for the port space.egress, and on high loopback ports for its proxy,
# redirect and DNS; tests/fake-gateway plays space-gatewayd and carries the
# streams to a real loopback server.  Real clients (curl, sockets) on the
# host stand for the guest's programs.
load helper

gw=$top/tests/fake-gateway
# SPACE_DAEMON may name another build (e.g. one with sanitizers).
daemon=${SPACE_DAEMON:-$top/build/guest/space-daemon}

# Waits until the file $1 holds the text $2.
wait_for() {
	local i
	for i in $(seq 100); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "# no \"$2\" in $1" >&3
	return 1
}

# Starts the fake gateway (options for it in "$@").
start_gateway() {
	: >"$D/gw.log"
	"$gw" gateway --sock "$D/egress.sock" --upstream "$UP" \
	    --allow allowed.test,example.com --silent slow.test \
	    --log "$D/gw.log" "$@" 2>>"$D/gw.err" 3>&- &
	echo $! >"$D/gw.pid"
	wait_for "$D/gw.log" '"ev": "hello"'
}

# Stops the fake gateway and waits until the daemon saw it go.
stop_gateway() {
	local n i
	n=$(grep -c 'host gone' "$D/daemon.err" || true)
	kill "$(cat "$D/gw.pid")" 2>/dev/null || true
	for i in $(seq 100); do
		[ "$(grep -c 'host gone' "$D/daemon.err" || true)" -gt "$n" ] && return 0
		sleep 0.1
	done
	echo "# the daemon did not see the gateway go" >&3
	return 1
}

# The iptables rule of the SO_ORIGINAL_DST test: first in the chain, and
# for one port nobody else uses (others may test with 198.18/15 on this
# host too).
nat_rule() {
	iptables -t nat "$1" OUTPUT $2 -p tcp -d 198.18.0.0/15 --dport "$UP" \
	    -j REDIRECT --to-ports "$RP" -m comment --comment egress-guest.bats
}

daemon_alive() {
	kill -0 "$(cat "$D/daemon.pid")"
}

setup_file() {
	export D=$BATS_FILE_TMPDIR
	local p
	p=($(free_ports 4))
	export PP=${p[0]} RP=${p[1]} DP=${p[2]} UP=${p[3]}
	head -c 50M /dev/urandom >"$D/big"
	"$gw" upstream --port "$UP" --file "$D/big" 2>"$D/up.err" 3>&- &
	echo $! >"$D/up.pid"
	# The tunnel and one ordinary port, for what commands see.
	"$daemon" -e "$D/egress.sock" -p "$PP" -r "$RP" \
	    -d "$DP" -l "$D/space.0.sock" 2>"$D/daemon.err" 3>&- &
	echo $! >"$D/daemon.pid"
	start_gateway
}

teardown_file() {
	local f
	for f in gw up daemon; do
		[ -f "$D/$f.pid" ] && kill "$(cat "$D/$f.pid")" 2>/dev/null
	done
	nat_rule -D 2>/dev/null
	true
}

# Sends stdin through a raw TCP connection to 127.0.0.1:$1 (or host $2),
# reading at the same time (the far end echoes), and prints what came back
# once the far end closed.
echo_via() {
	# A client the daemon closes at once may see the reset while it still
	# waits for its connect to finish (seen on a faster machine): that is
	# nothing received too.
	python3 -c '
import socket, sys, threading
try:
    s = socket.create_connection((sys.argv[2], int(sys.argv[1])), 10)
except ConnectionResetError:
    sys.exit(0)
s.settimeout(60)
def send():
    try:
        s.sendall(sys.stdin.buffer.read())
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
t = threading.Thread(target=send)
t.start()
try:
    while (b := s.recv(65536)):
        sys.stdout.buffer.write(b)
except ConnectionResetError:
    pass
t.join()' "$1" "${2:-127.0.0.1}"
}

@test "hello: the daemon answers with the version, its boot id, the nonce and egress 1" {
	run jq -e 'select(.ev == "hello") | .answer |
	    .version == 1 and .egress == 1 and (.boot_id | length) > 0 and
	    (.nonce | startswith("fake-"))' "$D/gw.log"
	assert_success
}

@test "proxy: curl through the proxy reaches the upstream as a proxy stream" {
	run curl -sS --max-time 10 -x "http://127.0.0.1:$PP" "http://127.0.0.1:$UP/hi"
	assert_success
	assert_output "hello from upstream http://127.0.0.1:$UP/hi"
	run jq -e 'select(.ev == "open") | .open | select(.kind == "proxy") | keys == ["kind"]' "$D/gw.log"
	assert_success
}

@test "redirect: a connection to the redirect port is a tcp stream to where it went (getsockname)" {
	run echo_via "$RP" <<<"ping through the redirect"
	assert_success
	assert_output "ping through the redirect"
	run jq -e --argjson rp "$RP" 'select(.ev == "open") | .open |
	    select(.kind == "tcp") | .host == "127.0.0.1" and .port == $rp' "$D/gw.log"
	assert_success
}

@test "dns: an allowed name gets one address of 198.18.0.0/15, TTL 1, the same every time" {
	run "$gw" dns --port "$DP" allowed.test
	assert_success
	a1=$(jq -r '.answers[0]' <<<"$output")
	jq -e '.rcode == 0 and .id_ok and .qr and (.answers | length) == 1 and .ttl == 1' <<<"$output"
	[[ "$a1" == 198.1[89].* ]]
	run "$gw" dns --port "$DP" ALLOWED.Test.
	jq -e --arg a "$a1" '.rcode == 0 and .answers == [$a]' <<<"$output"
	run "$gw" dns --port "$DP" example.com 255	# ANY is taken for A
	a2=$(jq -r '.answers[0]' <<<"$output")
	[[ "$a2" == 198.1[89].* && "$a2" != "$a1" ]]
	run "$gw" dns --port "$DP" allowed.test
	jq -e --arg a "$a1" '.answers == [$a]' <<<"$output"
	# The host was asked in lower case without the final dot.
	run jq -e 'select(.ev == "open" and .open.kind == "dns") | .open.name' "$D/gw.log"
	refute_output --partial ALLOWED
	refute_output --partial 'test."'
}

@test "dns: AAAA of an allowed name is NOERROR with no answer; other types too" {
	run "$gw" dns --port "$DP" allowed.test 28
	jq -e '.rcode == 0 and .answers == []' <<<"$output"
	run "$gw" dns --port "$DP" allowed.test 15
	jq -e '.rcode == 0 and .answers == []' <<<"$output"
}

@test "dns: a refused name is NXDOMAIN, AAAA too" {
	run "$gw" dns --port "$DP" evil.test
	jq -e '.rcode == 3 and .answers == []' <<<"$output"
	run "$gw" dns --port "$DP" evil.test 28
	jq -e '.rcode == 3' <<<"$output"
}

@test "dns: a lookup the host does not answer is SERVFAIL after 3 s, and CLOSEd" {
	t0=$(date +%s%N)
	run "$gw" dns --port "$DP" slow.test
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	jq -e '.rcode == 2' <<<"$output"
	[ "$ms" -ge 2500 ] && [ "$ms" -lt 5000 ] || false
	id=$(jq -r 'select(.ev == "open" and .open.name == "slow.test") | .stream' "$D/gw.log")
	run jq -e --argjson id "$id" 'select(.ev == "close") | .stream == $id' "$D/gw.log"
	assert_success
}

@test "dns: malformed queries get FORMERR, REFUSED or nothing, and the daemon lives" {
	local q hdr=123401000001000000000000
	# Too short for a header: dropped.
	run "$gw" dns --timeout 0.5 --port "$DP" --raw 1234
	jq -e '.timeout' <<<"$output"
	# A response (QR set): never answered.
	run "$gw" dns --timeout 0.5 --port "$DP" --raw 123481000001000000000000036162630000010001
	jq -e '.timeout' <<<"$output"
	# A compression pointer in the question, to itself.
	run "$gw" dns --port "$DP" --raw ${hdr}c00c00010001
	jq -e '.rcode == 1' <<<"$output"
	# A label longer than 63, a name cut short, no type and class.
	run "$gw" dns --port "$DP" --raw ${hdr}41616161
	jq -e '.rcode == 1' <<<"$output"
	run "$gw" dns --port "$DP" --raw ${hdr}03616263
	jq -e '.rcode == 1' <<<"$output"
	run "$gw" dns --port "$DP" --raw ${hdr}036162630000
	jq -e '.rcode == 1' <<<"$output"
	# Two questions.
	run "$gw" dns --port "$DP" --raw 123401000002000000000000036162630000010001036162630000010001
	jq -e '.rcode == 1' <<<"$output"
	# A name over 255 bytes on the wire.
	q=$(python3 -c 'print(("3f" + "61" * 63) * 5 + "00" + "00010001")')
	run "$gw" dns --port "$DP" --raw "$hdr$q"
	jq -e '.rcode == 1' <<<"$output"
	# Not a host name (a space, a byte over 127); class CH.
	run "$gw" dns --port "$DP" --raw ${hdr}036120620000010001
	jq -e '.rcode == 5' <<<"$output"
	run "$gw" dns --port "$DP" --raw ${hdr}03a162630000010001
	jq -e '.rcode == 5' <<<"$output"
	run "$gw" dns --port "$DP" --raw ${hdr}036162630000010003
	jq -e '.rcode == 5' <<<"$output"
	# Random bytes.
	for q in $(seq 20); do
		"$gw" dns --timeout 0.2 --port "$DP" --raw "$(head -c $((RANDOM % 600 + 1)) /dev/urandom | od -An -tx1 | tr -d ' \n')" >/dev/null
	done
	daemon_alive
	run "$gw" dns --port "$DP" allowed.test
	jq -e '.rcode == 0 and (.answers | length) == 1' <<<"$output"
}

@test "windows: 50 MiB down through the proxy arrive intact" {
	want=$(sha256sum <"$D/big" | cut -d' ' -f1)
	got=$(curl -sS --max-time 120 -x "http://127.0.0.1:$PP" "http://127.0.0.1:$UP/file" | sha256sum | cut -d' ' -f1)
	[ "$got" = "$want" ]
	! grep -q violation "$D/gw.log" || false
	kill -0 "$(cat "$D/gw.pid")"
}

@test "windows: 50 MiB up through the proxy arrive intact" {
	want=$(sha256sum <"$D/big" | cut -d' ' -f1)
	run curl -sS --max-time 120 -x "http://127.0.0.1:$PP" --data-binary "@$D/big" \
	    -H 'Content-Type: application/octet-stream' "http://127.0.0.1:$UP/sha256"
	assert_success
	assert_output "$want"
	! grep -q violation "$D/gw.log" || false
	kill -0 "$(cat "$D/gw.pid")"
}

@test "windows: 50 MiB both ways at once through the redirect, and 8 streams side by side" {
	want=$(sha256sum <"$D/big" | cut -d' ' -f1)
	got=$(echo_via "$RP" <"$D/big" | sha256sum | cut -d' ' -f1)
	[ "$got" = "$want" ]
	head -c 3M "$D/big" >"$D/small"
	want=$(sha256sum <"$D/small" | cut -d' ' -f1)
	for i in $(seq 8); do
		echo_via "$RP" <"$D/small" | sha256sum | cut -d' ' -f1 >"$D/par.$i" &
	done
	wait
	[ "$(cat "$D"/par.* | sort -u)" = "$want" ]
	! grep -q violation "$D/gw.log"
}

@test "redirect: a fake address maps back to its name (SO_ORIGINAL_DST, iptables)" {
	[ "$(id -u)" = 0 ] || skip "needs root for an iptables REDIRECT"
	nat_rule -I 1 || skip "no iptables nat here"
	run "$gw" dns --port "$DP" example.com
	a=$(jq -r '.answers[0]' <<<"$output")
	run echo_via "$UP" "$a" <<<"to example.com"
	assert_output "to example.com"
	run jq -e --argjson p "$UP" 'select(.ev == "open") | .open |
	    select(.kind == "tcp" and .host == "example.com") | .port == $p' "$D/gw.log"
	assert_success
	# An address of the range that was never given: the client is closed.
	run echo_via "$UP" 198.19.255.254 <<<"nowhere"
	assert_output ""
	run grep -c '"host": "198.19.255.254"' "$D/gw.log"
	assert_output 0
	nat_rule -D
}

@test "limit: 1024 streams at once; a client over that is closed at once" {
	stop_gateway
	start_gateway --hold-tcp
	# A client over the limit is reset as soon as the daemon accepts it,
	# which may be before connect() has looked at the socket again: then
	# connect() itself says so.  Either way it counts as closed.
	run python3 -c '
import errno, socket, sys, time
cs = []
closed = 0
for _ in range(1030):
    try:
        cs.append(socket.create_connection(("127.0.0.1", int(sys.argv[1])), 10))
    except ConnectionResetError:
        closed += 1
time.sleep(1.5)
for c in cs:
    c.setblocking(False)
    try:
        closed += c.recv(1) == b""
    except BlockingIOError:
        pass
    except ConnectionResetError:
        closed += 1
print(closed)' "$RP"
	assert_success
	assert_output 6
	[ "$(jq -s 'map(select(.ev == "open")) | length' "$D/gw.log")" -eq 1024 ]
	daemon_alive
	stop_gateway
	start_gateway
	run echo_via "$RP" <<<"room again"
	assert_output "room again"
}

@test "exec: commands get the proxy variables, unless their env sets them" {
	run "$gw" exec --sock "$D/space.0.sock" -- sh -c 'env | sort'
	assert_success
	assert_line "HTTP_PROXY=http://127.0.0.1:$PP"
	assert_line "https_proxy=http://127.0.0.1:$PP"
	assert_line "NO_PROXY=localhost,127.0.0.1,::1"
	assert_line "no_proxy=localhost,127.0.0.1,::1"
	run "$gw" exec --sock "$D/space.0.sock" --env HTTP_PROXY=http://mine:1 \
	    --env PATH=/usr/bin:/bin -- sh -c 'env | sort'
	assert_success
	assert_line "HTTP_PROXY=http://mine:1"
	refute_line "HTTP_PROXY=http://127.0.0.1:$PP"
	assert_line "HTTPS_PROXY=http://127.0.0.1:$PP"
	assert_line "PATH=/usr/bin:/bin"
}

@test "host gone: streams are reset, new clients refused, DNS SERVFAIL; a new host is served" {
	# A stream open when the host goes is reset.
	python3 -c '
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
s.sendall(b"hold\n")
assert s.recv(100) == b"hold\n"
open(sys.argv[2], "w").close()
s.settimeout(10)
try:
    b = s.recv(100)
except ConnectionResetError:
    b = b""
sys.exit(0 if b == b"" else 1)' "$RP" "$D/held" &
	held=$!
	for i in $(seq 50); do [ -f "$D/held" ] && break; sleep 0.1; done
	stop_gateway
	wait "$held"
	run curl -sS --max-time 5 -x "http://127.0.0.1:$PP" "http://127.0.0.1:$UP/hi"
	assert_output "space egress: the gateway is not connected"
	run curl -sS --max-time 5 -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$PP" "http://127.0.0.1:$UP/hi"
	assert_output 503
	run echo_via "$RP" <<<"nobody there"
	assert_output ""
	run "$gw" dns --port "$DP" allowed.test
	jq -e '.rcode == 2' <<<"$output"
	daemon_alive
	start_gateway
	run curl -sS --max-time 10 -x "http://127.0.0.1:$PP" "http://127.0.0.1:$UP/again"
	assert_success
	assert_output "hello from upstream http://127.0.0.1:$UP/again"
	# Addresses outlive the host: the same name, the same address.
	run "$gw" dns --port "$DP" allowed.test
	jq -e '.answers[0] | startswith("198.18.")' <<<"$output"
}

@test "fuzz: random and broken frames from the host do not crash the daemon" {
	stop_gateway
	run "$gw" fuzz --sock "$D/egress.sock" --redirect-port "$RP" \
	    --dns-port "$DP" --rounds 60 --frames 300 --seed "$RANDOM"
	assert_success
	echo "# $output" >&3
	daemon_alive
	start_gateway
	run curl -sS --max-time 10 -x "http://127.0.0.1:$PP" "http://127.0.0.1:$UP/after-fuzz"
	assert_success
	assert_output "hello from upstream http://127.0.0.1:$UP/after-fuzz"
	grep -c 'protocol error' "$D/daemon.err" | sed 's/^/# protocol errors logged: /' >&3
}

@test "inbound: the host's OPEN on stream 0 becomes a connection to 127.0.0.1:PORT, a refusal, or a protocol error" {
	stop_gateway
	run timeout 60 python3 - "$D/egress.sock" "$(free_ports 1)" <<-'EOF2'
	import json, socket, struct, sys, threading
	def frame(t, sid, p=b""):
	    return struct.pack(">IBI", 5 + len(p), t, sid) + p
	def jframe(t, sid, o):
	    return frame(t, sid, json.dumps(o).encode())
	buf = bytearray()
	def read_frame(s):
	    global buf
	    while True:
	        if len(buf) >= 4:
	            (n,) = struct.unpack(">I", buf[:4])
	            if len(buf) >= 4 + n:
	                t = buf[4]; (sid,) = struct.unpack(">I", buf[5:9])
	                p = bytes(buf[9:4 + n]); del buf[:4 + n]
	                return t, sid, p
	        b = s.recv(65536)
	        if not b:
	            raise SystemExit("daemon hung up")
	        buf += b
	# A server in "the guest" (here, the host: the test mode).
	srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
	port = srv.getsockname()[1]
	def serve():
	    c, _ = srv.accept()
	    data = b""
	    while (b := c.recv(4096)):
	        data += b
	    c.sendall(b"pong:" + data); c.close()
	threading.Thread(target=serve, daemon=True).start()
	s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
	s.sendall(jframe(1, 0, {"op": "hello", "nonce": "in-1"}))
	t, sid, p = read_frame(s)
	assert t == 1 and json.loads(p)["inbound"] == 1, p
	s.sendall(jframe(8, 0, {"kind": "inbound", "port": port, "ref": 7}))
	t, sid, p = read_frame(s)
	assert t == 8 and json.loads(p) == {"kind": "inbound", "ref": 7}, (t, p)
	assert sid != 0
	s.sendall(frame(9, sid, b"ping") + frame(9, sid))
	got = b""
	while True:
	    t, fsid, p = read_frame(s)
	    if t == 9 and fsid == sid and p == b"":
	        break
	    if t == 9 and fsid == sid:
	        got += p
	assert got == b"pong:ping", got
	print("served")
	# Nothing listens there: a refusal and no stream, or (the connect
	# still under way) the stream and its CLOSE.
	s.sendall(jframe(8, 0, {"kind": "inbound", "port": int(sys.argv[2]),
	                        "ref": 8}))
	t, sid, p = read_frame(s)
	o = json.loads(p)
	assert t == 8 and o["ref"] == 8, (t, p)
	if "error" not in o:
	    t, fsid, p = read_frame(s)
	    assert t == 11 and fsid == sid, (t, fsid, p)
	print("refused")
	# An OPEN on a stream, or one without a port: the protocol is broken
	# (the test mode then closes the connection; the port would wait for
	# the next hello).
	s.close()
	for bad in (jframe(8, 5, {"kind": "inbound", "port": port, "ref": 9}),
	            jframe(8, 0, {"kind": "inbound", "ref": 9}),
	            jframe(8, 0, {"kind": "tcp", "port": port, "ref": 9}),
	            jframe(8, 0, {"kind": "inbound", "port": 0, "ref": 9}),
	            jframe(8, 0, {"kind": "inbound", "port": port, "ref": -1})):
	    buf = bytearray()
	    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
	    s.sendall(jframe(1, 0, {"op": "hello", "nonce": "again"}))
	    t, sid, p = read_frame(s)
	    assert t == 1, (t, p)
	    s.sendall(bad)
	    t, sid, p = read_frame(s)
	    assert t == 7 and json.loads(p)["error"] == "protocol", (t, p)
	    s.close()
	print("protocol")
	EOF2
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	[ "$output" = "$(printf 'served\nrefused\nprotocol')" ]
	daemon_alive
	start_gateway
}
