#!/usr/bin/env bats
# Inbound ports end to end (design.md, "Inbound ports"): a real sandbox with
# busybox httpd and nc inside, space-gatewayd on the host listening on
# loopback, real clients (curl, python sockets) on the host.  The guest has
# no network device: every byte rides the sandbox's egress channel.
load helper

setup_file() {
	export T="$BATS_FILE_TMPDIR"
	import_minimal
	# Idle tiers steer it, so a connection wakes it from a pause.
	create --idle pause:1h >"$T/ids"
	export ID=$(head -n 1 "$T/ids")
	# The gateway runs as space: it wakes a sandbox through space-noded.
	noded_up
	space-gatewayd --scan-ms 100 >"$T/gateway.out" 2>"$T/gateway.err" &
	echo $! >"$T/gateway.pid"
	space-exec "$ID" -- sh -c 'mkdir -p /srv && echo hello > /srv/index.html &&
	    head -c 65536 /dev/urandom > /srv/f &&
	    busybox httpd -p 127.0.0.1:8080 -h /srv' >/dev/null
	read -r P_WEB P_OTHER P_NONE < <(free_ports 3)
	export P_WEB P_OTHER P_NONE
}

teardown_file() {
	kill "$(cat "$T/gateway.pid")" 2>/dev/null || true
	remove_listed "$T/ids"
	noded_down
}

# The sha256 of a file in the guest.
guest_sha() {
	space-exec "$ID" -- sha256sum "$1" | cut -d' ' -f1
}

@test "space-port serves a guest port on a host address: the gateway listens and says so" {
	run space-port "$ID" 8080 --listen "127.0.0.1:$P_WEB"
	[ "$status" -eq 0 ]
	[ "$(jq -r '.ok, .port, .listen, .state' <<<"$output" | paste -sd' ')" = \
	    "true 8080 127.0.0.1:$P_WEB listening" ]
	[ "$(curl -sS "http://127.0.0.1:$P_WEB/index.html")" = hello ]
	run space-port ls
	[ "$status" -eq 0 ]
	[ "$(jq -r "select(.id == \"$ID\") | \"\(.port) \(.listen) \(.state)\"" <<<"$output")" = \
	    "8080 127.0.0.1:$P_WEB listening" ]
	# The file the gateway writes is what ls read.
	jq -e --arg id "$ID" '.ports[] | select(.id == $id and .port == 8080)' \
	    "$SPACE_RUN/gateway/ports.json" >/dev/null
	# It is an event of the sandbox.
	space-events --id "$ID" --since 60 | jq -e 'select(.action == "port" and
	    .port == 8080 and .state == "listening" and .ok)' >/dev/null
}

@test "1,000 requests over 50 concurrent connections arrive byte-exact" {
	local want
	want=$(guest_sha /srv/f)
	mkdir -p "$T/par"
	curl -sS --parallel --parallel-max 50 "http://127.0.0.1:$P_WEB/f?[1-1000]" \
	    -o "$T/par/o_#1" 2>/dev/null
	[ "$(ls "$T/par" | wc -l)" -eq 1000 ]
	[ "$(sha256sum "$T"/par/* | cut -d' ' -f1 | sort -u)" = "$want" ]
	rm -rf "$T/par"
}

@test "a 100 MiB download through the port is byte-exact" {
	space-exec "$ID" -- dd if=/dev/urandom of=/srv/big bs=1M count=100 2>/dev/null
	local want
	want=$(guest_sha /srv/big)
	curl -sS -o "$T/big" "http://127.0.0.1:$P_WEB/big"
	[ "$(sha256sum "$T/big" | cut -d' ' -f1)" = "$want" ]
	rm -f "$T/big"
	space-exec "$ID" -- rm -f /srv/big
}

@test "20 MiB up into the guest (nc) arrive whole: backpressure toward the guest" {
	space-port "$ID" 9000 --listen "127.0.0.1:$P_OTHER" >/dev/null
	space-exec "$ID" -d -- sh -c 'nc -l -p 9000 > /tmp/up' >/dev/null
	sleep 0.5
	head -c $((20 << 20)) /dev/urandom >"$T/up"
	python3 - "$P_OTHER" "$T/up" <<-'EOF'
	import socket, sys
	s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
	s.sendall(open(sys.argv[2], "rb").read())
	s.shutdown(socket.SHUT_WR)
	s.recv(1)
	EOF
	local i
	for i in $(seq 50); do
		[ "$(space-exec "$ID" -- sh -c 'wc -c < /tmp/up')" -eq $((20 << 20)) ] && break
		sleep 0.2
	done
	[ "$(guest_sha /tmp/up)" = "$(sha256sum "$T/up" | cut -d' ' -f1)" ]
	space-port rm "$ID" 9000 >/dev/null
	rm -f "$T/up"
}

@test "nothing listening on the guest port: the client is reset, and the port serves again after" {
	space-port "$ID" 9999 --listen "127.0.0.1:$P_NONE" >/dev/null
	run curl -sS "http://127.0.0.1:$P_NONE/"
	[ "$status" -eq 56 ]	# connection reset
	space-exec "$ID" -- busybox httpd -p 127.0.0.1:9999 -h /srv
	[ "$(curl -sS "http://127.0.0.1:$P_NONE/index.html")" = hello ]
	space-port rm "$ID" 9999 >/dev/null
}

@test "a sandbox paused by its idle tiers wakes on a connection" {
	space-pause "$ID" >/dev/null
	[ "$(space-ls "$ID" | jq -r .state)" = paused ]
	[ "$(curl -sS "http://127.0.0.1:$P_WEB/index.html")" = hello ]
	[ "$(space-ls "$ID" | jq -r .state)" = running ]
	space-events --id "$ID" --since 60 |
	    jq -e 'select(.via == "space-gatewayd" and .action == "state" and
	        .to == "running")' >/dev/null
}

@test "a sandbox a user paused (no idle tiers) stays paused: the client is reset" {
	local id
	id=$(own)
	space-exec "$id" -- sh -c 'mkdir -p /srv && echo x > /srv/x && busybox httpd -p 127.0.0.1:80 -h /srv'
	space-port "$id" 80 >"$T/own.json"
	local at
	at=$(jq -r .listen "$T/own.json")
	[ "$(curl -sS "http://$at/x")" = x ]
	space-pause "$id" >/dev/null
	run curl -sS --max-time 30 "http://$at/x"
	[ "$status" -eq 56 ]
	[ "$(space-ls "$id" | jq -r .state)" = paused ]
	# Its removal takes its ports: the gateway stops listening.
	space-rm "$id" >/dev/null
	[ ! -e "$SPACE_ROOT/ports/$id" ]
	local i
	for i in $(seq 30); do
		run curl -sS "http://$at/x"
		[ "$status" -eq 7 ] && break	# refused: nobody listens
		sleep 0.1
	done
	[ "$status" -eq 7 ]
}

@test "space-port rm stops the listener; ls no longer shows it" {
	local p
	p=$(free_ports 1)
	space-port "$ID" 8080 --listen "127.0.0.1:$p" >/dev/null
	[ "$(curl -sS "http://127.0.0.1:$p/index.html")" = hello ]
	run space-port rm "$ID" 8080
	[ "$status" -eq 0 ]
	[ "$(jq -r .removed <<<"$output")" = true ]
	local i
	for i in $(seq 30); do
		run curl -sS "http://127.0.0.1:$p/index.html"
		[ "$status" -eq 7 ] && break
		sleep 0.1
	done
	[ "$status" -eq 7 ]
	[ -z "$(space-port ls "$ID" | jq -r 'select(.port == 8080)')" ]
	run space-port rm "$ID" 8080
	[ "$status" -ne 0 ]
	[ "$(jq -r .error <<<"$output")" = not-found ]
	[ "$(space-events --id "$ID" --since 60 | jq -c 'select(.action == "port.rm") |
	    [.port, .ok, .error]' | tail -n 2 | paste -sd' ')" = \
	    '[8080,true,null] [null,false,"not-found"]' ]
	# Back as it was, for the tests after.
	space-port "$ID" 8080 --listen "127.0.0.1:$P_WEB" >/dev/null
}

@test "an address something else holds is refused, and nothing of the wish stays" {
	local p
	p=$(free_ports 1)
	python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
print("up", flush=True); time.sleep(30)' "$p" >"$T/holder" &
	local holder=$!
	for _ in $(seq 50); do grep -q up "$T/holder" && break; sleep 0.1; done
	run space-port "$ID" 7000 --listen "127.0.0.1:$p"
	[ "$status" -ne 0 ]
	[ "$(jq -r .error <<<"$output")" = io ]
	[[ "$(jq -r .msg <<<"$output")" == *"in use"* ]]
	[ ! -e "$SPACE_ROOT/ports/$ID/7000" ]
	# A port moved to a held address keeps the one it had.
	run space-port "$ID" 8080 --listen "127.0.0.1:$p"
	kill "$holder"
	[ "$status" -ne 0 ]
	[ "$(cat "$SPACE_ROOT/ports/$ID/8080")" = "127.0.0.1:$P_WEB" ]
	# The gateway listens there again within a round.
	for _ in $(seq 30); do
		curl -sS "http://127.0.0.1:$P_WEB/index.html" 2>/dev/null && break
		sleep 0.1
	done
	[ "$(curl -sS "http://127.0.0.1:$P_WEB/index.html")" = hello ]
	# Two ports on one address: the second is refused.
	run space-port "$ID" 8081 --listen "127.0.0.1:$P_WEB"
	[ "$status" -ne 0 ]
	[ "$(jq -r .error <<<"$output")" = exists ]
}

@test "bad input: ports, addresses, ids, a sandbox that is not there" {
	local args
	for args in "$ID 0" "$ID 65536" "$ID x" "$ID -1" "$ID 80 --listen" \
	    "$ID" "" "rm $ID" "rm $ID 0"; do
		run space-port $args
		[ "$status" -eq 100 ] || { echo "space-port $args: $status"; return 1; }
	done
	for args in "x:80" "127.0.0.1" "127.0.0.1:65536" "::1:80" ":80" \
	    "127.0.0.1:8x" "300.1.1.1:80"; do
		run space-port "$ID" 80 --listen "$args"
		[ "$status" -ne 0 ] && [ "$(jq -r .error <<<"$output")" = bad-input ] ||
		    { echo "--listen $args: $status $output"; return 1; }
	done
	run space-port NOT-AN-ID 80
	[ "$(jq -r .error <<<"$output")" = bad-input ]
	run space-port aaaaaaaaaaaa 80
	[ "$status" -ne 0 ]
	[ "$(jq -r .error <<<"$output")" = not-found ]
	[ ! -e "$SPACE_ROOT/ports/aaaaaaaaaaaa" ]
	run space-port ls NOT-AN-ID
	[ "$(jq -r .error <<<"$output")" = bad-input ]
}
