#!/usr/bin/env bats
# space-gatewayd against a hostile guest (tests/hostile-guest): random and
# broken frames, lies about lengths, windows overrun, stream floods, garbage
# and endless HTTP heads, odd JSON.  No VM: the attacker sits where QEMU's
# egress socket would.  The gateway must drop what breaks the protocol, keep
# its memory bounded, and go on serving.
load helper

ID=hostilegw2ab

setup() {
	export SPACE_ROOT="$BATS_TEST_TMPDIR/root"
	export SPACE_RUN="$BATS_TEST_TMPDIR/run"
	export SPACE_DB="sqlite:$SPACE_ROOT/space.db"
	export SPACE_CONF=/dev/null
	mkdir -p "$SPACE_ROOT" "$SPACE_RUN/$ID"
	T=$BATS_TEST_TMPDIR
	read -r P_HTTP P_HTTPS P_ECHO < <(free_ports 3)
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	    -keyout "$T/k.pem" -out "$T/c.pem" -days 2 -subj /CN=api.test 2>/dev/null
	"$top/tests/upstream-server" "$T/requests" "$P_HTTP" "$P_HTTPS" "$P_ECHO" \
	    "$T/c.pem" "$T/k.pem" >"$T/up.out" 2>&1 &
	UP=$!
	echo "127.0.0.1 api.test" >"$T/hosts"
	space-egress set "$ID" --allow "api.test:$P_HTTP" >/dev/null
}

teardown() {
	kill "$UP" "${GW:-}" 2>/dev/null || true
}

start_gateway() {
	SPACE_EGRESS_ALLOW_NEVER="127.0.0.1:$P_HTTP 127.0.0.1:$P_ECHO" SPACE_GATEWAY_HOSTS="$T/hosts" \
	    space-gatewayd --scan-ms 20 >"$T/gw.out" 2>"$T/gw.err" &
	GW=$!
}

@test "hostile frames: the gateway drops the connection, stays up, bounded, and serves again" {
	python3 -c 'import time; time.sleep(0.3)'
	start_gateway
	run timeout 300 "$top/tests/hostile-guest" "$SPACE_RUN/$ID/egress.sock" 300 \
	    "${SEED:-$RANDOM}" "http://api.test:$P_HTTP/alive"
	assert_success
	assert_output "HTTP/1.1 200 OK"
	run kill -0 "$GW"
	assert_success
	peak=$(awk '/^VmHWM/ { print $2 }' "/proc/$GW/status")
	echo "# gateway peak RSS ${peak} kB" >&3
	[ "$peak" -lt $((256 * 1024)) ]
	# What the streams used goes back once they are over.
	for _ in $(seq 30); do
		rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$GW/status")
		[ "$rss" -lt $((128 * 1024)) ] && break
		sleep 0.5
	done
	echo "# gateway RSS after ${rss} kB" >&3
	[ "$rss" -lt $((128 * 1024)) ]
	# What broke the protocol is said on stderr, once per connection.
	grep -q "$ID: " "$T/gw.err"
}

@test "a guest may not open more than SP_EGRESS_STREAMS_MAX streams; the gateway closes the rest" {
	start_gateway
	run timeout 120 python3 - "$SPACE_RUN/$ID/egress.sock" <<-'EOF'
	import socket, struct, sys, os, json
	p = sys.argv[1]
	if os.path.exists(p): os.unlink(p)
	s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(1)
	c, _ = s.accept()
	f = lambda t, i, b=b"": struct.pack(">IBI", len(b) + 5, t, i) + b
	# Proxy streams that never send a head: each holds a slot.
	c.sendall(b"".join(f(8, i, b'{"kind":"proxy"}') for i in range(1, 1100)))
	closed, buf = set(), b""
	c.settimeout(10)
	try:
	    while len(closed) < 75:
	        buf += c.recv(65536)
	        while len(buf) >= 9:
	            n, t, i = struct.unpack(">IBI", buf[:9])
	            if len(buf) < 4 + n: break
	            buf = buf[4 + n:]
	            if t == 11: closed.add(i)
	except socket.timeout:
	    pass
	print(len(closed), min(closed) if closed else 0)
	EOF
	assert_success
	assert_output "75 1025"
}

@test "a proxy client that leaves before saying anything gets its EOF, and the stream ends" {
	start_gateway
	run timeout 60 python3 - "$SPACE_RUN/$ID/egress.sock" <<-'EOF2'
	import socket, struct, sys, os
	p = sys.argv[1]
	if os.path.exists(p): os.unlink(p)
	s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(1)
	c, _ = s.accept()
	f = lambda t, i, b=b"": struct.pack(">IBI", len(b) + 5, t, i) + b
	c.sendall(f(8, 5, b'{"kind":"proxy"}') + f(9, 5, b""))
	c.settimeout(10)
	buf = b""
	while True:
	    buf += c.recv(65536)
	    while len(buf) >= 9:
	        n, t, i = struct.unpack(">IBI", buf[:9])
	        if len(buf) < 4 + n: break
	        pl, buf = buf[9:4 + n], buf[4 + n:]
	        if i == 5:
	            print("eof" if t == 9 and pl == b"" else "type %d" % t)
	            sys.exit(0)
	EOF2
	assert_success
	assert_output eof
}

@test "allowed but nobody answers: 502 connect-failed, not 403" {
	kill "$UP"
	wait "$UP" 2>/dev/null || true
	space-egress set "$ID" --allow "api.test:$P_ECHO" >/dev/null
	start_gateway
	run timeout 60 "$top/tests/hostile-guest" "$SPACE_RUN/$ID/egress.sock" 0 1 \
	    "http://api.test:$P_ECHO/"
	assert_success
	assert_output "HTTP/1.1 502 Bad Gateway"
}
