#!/usr/bin/env bats
# The network gateway end to end (design.md): one real sandbox, whose only
# way out is its egress port; space-gatewayd on the host; real HTTP, HTTPS
# and TCP servers on 127.0.0.1 (tests/upstream-server).  The test node's
# never-list lets the gateway reach exactly those three ports of loopback;
# names resolve through a hosts file given to the gateway.  Secrets are
# injected by the gateway and must never be seen inside the guest.
load helper

setup_file() {
	export T="$BATS_FILE_TMPDIR"
	import_minimal
	# Three free ports on loopback.
	read -r P_HTTP P_HTTPS P_ECHO < <(free_ports 3)
	export P_HTTP P_HTTPS P_ECHO
	# The upstream's own CA, which only the gateway trusts.
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	    -keyout "$T/up-ca.key" -out "$T/up-ca.crt" -days 2 \
	    -subj "/CN=upstream test CA" 2>/dev/null
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	    -keyout "$T/up.key" -out "$T/up.csr" -subj "/CN=api.test" 2>/dev/null
	printf 'subjectAltName=DNS:api.test,DNS:other.test\n' >"$T/up.ext"
	openssl x509 -req -in "$T/up.csr" -CA "$T/up-ca.crt" \
	    -CAkey "$T/up-ca.key" -CAcreateserial -days 2 \
	    -extfile "$T/up.ext" -out "$T/up.crt" 2>/dev/null
	: >"$T/requests"
	"$top/tests/upstream-server" "$T/requests" "$P_HTTP" "$P_HTTPS" \
	    "$P_ECHO" "$T/up.crt" "$T/up.key" >"$T/upstream.out" 2>&1 &
	echo $! >"$T/upstream.pid"
	for _ in $(seq 100); do
		grep -q ready "$T/upstream.out" 2>/dev/null && break
		sleep 0.1
	done
	# What an earlier run left must not change this one.
	for scope in global tenant/t1 project/t1/p1; do
		space-cred rm tok --scope "$scope" >/dev/null 2>&1 || true
	done
	cat >"$T/hosts" <<-EOF
	127.0.0.1 api.test other.test loop.test
	169.254.169.254 metadata.test
	10.1.2.3 private.test
	EOF
	space_reads "$T/hosts"
	create --label tenant=t1 --label project=p1 >"$T/ids"
	export ID=$(head -n 1 "$T/ids")
	SPACE_EGRESS_ALLOW_NEVER="127.0.0.1:$P_HTTP 127.0.0.1:$P_HTTPS 127.0.0.1:$P_ECHO" \
	SPACE_GATEWAY_HOSTS="$T/hosts" SPACE_GATEWAY_UPSTREAM_CA="$T/up-ca.crt" \
	    space-gatewayd --scan-ms 100 >"$T/gateway.out" 2>"$T/gateway.err" &
	echo $! >"$T/gateway.pid"
	# The guest trusts the upstream's CA only for the tests that relay
	# TLS untouched (no credential: the guest sees the real server).
	space-cp "$T/up-ca.crt" "$ID:/root/up-ca.crt" >/dev/null
}

teardown_file() {
	kill "$(cat "$T/gateway.pid")" "$(cat "$T/upstream.pid")" 2>/dev/null || true
	remove_listed "$T/ids"
	space-cred rm tok --scope global >/dev/null 2>&1 || true
	space-cred rm tok --scope tenant/t1 >/dev/null 2>&1 || true
	space-cred rm tok --scope project/t1/p1 >/dev/null 2>&1 || true
}

# Runs a shell command line in the sandbox.
guest() {
	space-exec "$ID" -- sh -c "$1"
}

# The headers the upstream saw in its last request, as JSON.
last_request() {
	tail -n 1 "$T/requests"
}

@test "the sandbox is running and the gateway serves its egress port" {
	[ -n "$ID" ]
	for _ in $(seq 50); do
		grep -q '"gateway"' "$T/gateway.out" && break
		sleep 0.1
	done
	run kill -0 "$(cat "$T/gateway.pid")"
	assert_success
	# No network device: only loopback inside.
	run guest 'ls /sys/class/net'
	assert_output lo
	# Its clock is the host's, though it came from a checkpoint: TLS
	# depends on it.
	g=$(guest 'date +%s')
	h=$(date +%s)
	[ $((h - g)) -le 5 ] && [ $((g - h)) -le 5 ]
}

@test "started as root, the gateway serves as space: no other group, only CAP_NET_BIND_SERVICE, not dumpable" {
	local pid u g
	pid=$(cat "$T/gateway.pid")
	u=$(id -u space) g=$(id -g space)
	grep -q "\"uid\":$u[,}]" "$T/gateway.out"
	[ "$(awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$pid/status")" = "$u $u $u $u" ]
	[ "$(awk '/^Gid:/ { print $2, $3, $4, $5 }' "/proc/$pid/status")" = "$g $g $g $g" ]
	[ "$(awk '/^Groups:/ { print $2 }' "/proc/$pid/status")" = "$g" ]
	# Bit 10: CAP_NET_BIND_SERVICE, for inbound ports below 1024.
	[ "$(awk '/^CapEff:/ { print $2 }' "/proc/$pid/status")" = 0000000000000400 ]
	[ "$(awk '/^CapPrm:/ { print $2 }' "/proc/$pid/status")" = 0000000000000400 ]
	# Not dumpable: its /proc files stay root's, so another process of
	# space's reads neither its memory nor its environment, and cannot
	# trace it.  The node CA's key it loaded as root stays its own.
	[ "$(stat -c %U "/proc/$pid/mem")" = root ]
	run setpriv --reuid=space --regid=space --init-groups cat "/proc/$pid/environ"
	assert_failure
	run setpriv --reuid=space --regid=space --init-groups cat "$SPACE_ROOT/ca/ca.key"
	assert_failure
	[ "$(stat -c %U "$SPACE_RUN/gateway" "$SPACE_RUN/egress-counts" | sort -u)" = space ]
}

@test "nothing is allowed before a policy says so: curl gets 403 with the reason" {
	space-egress clear "$ID" >/dev/null 2>&1 || true
	run guest "curl -sS -o /dev/null -w '%{http_code}' http://api.test:$P_HTTP/x"
	assert_output --partial 403
	run guest "curl -sS http://api.test:$P_HTTP/x"
	assert_output --partial "not-allowed"
}

@test "an allowed host works over HTTP (curl, wget) and the decision is logged" {
	space-egress set "$ID" --allow "api.test:$P_HTTP" "api.test:$P_HTTPS" "api.test:$P_ECHO" >/dev/null
	run guest "curl -sS http://api.test:$P_HTTP/hello"
	assert_success
	assert_output "ok /hello"
	run guest "wget -q -O - http://api.test:$P_HTTP/wget"
	assert_success
	assert_output "ok /wget"
	grep -F "\"sandbox\":\"$ID\"" "$SPACE_ROOT/egress/decisions.log" |
	    jq -se --arg p "$P_HTTP" 'map(select(.host == "api.test" and .decision == "allow")) | length > 0'
}

@test "space-metrics counts the sandbox's egress: a 10 MiB download, and what was sent for it" {
	# The policy the tests after this one take as set.
	space-egress set "$ID" --allow "api.test:$P_HTTP" "api.test:$P_HTTPS" "api.test:$P_ECHO" >/dev/null
	before=$(space-metrics "$ID")
	run guest "curl -sS -o /dev/null -w '%{size_download}' http://api.test:$P_HTTP/size/$((10 << 20))"
	assert_output "$((10 << 20))"
	# The gateway writes the counts as the connection ends, after curl's.
	for _ in $(seq 50); do
		after=$(space-metrics "$ID")
		jq -e --argjson b "$before" '(.egress_received_bytes // 0) -
		    ($b.egress_received_bytes // 0) >= 10 * 1048576' <<<"$after" >/dev/null && break
		sleep 0.1
	done
	echo "# before $(jq -c '{egress_sent_bytes, egress_received_bytes}' <<<"$before"), after $(jq -c '{egress_sent_bytes, egress_received_bytes}' <<<"$after")" >&3
	jq -e --argjson b "$before" '.egress_received_bytes - ($b.egress_received_bytes // 0) >= 10 * 1048576 and
	    .egress_sent_bytes - ($b.egress_sent_bytes // 0) > 0' <<<"$after"
}

@test "HTTPS without a credential is relayed untouched: the guest sees the real server" {
	run guest "curl -sS --cacert /root/up-ca.crt https://api.test:$P_HTTPS/tls"
	assert_success
	assert_output "ok /tls"
	last_request | jq -e '.scheme == "https" and .path == "/tls" and (.headers.authorization | not)'
}

@test "wget over HTTPS to an allowed host works too" {
	run guest "wget -q -O - https://api.test:$P_HTTPS/wget-tls"
	assert_success
	assert_output "ok /wget-tls"
}

@test "UDP and ICMP do not leave the guest" {
	# Dropped inside the guest (there is no NIC to leave by anyway): the
	# senders fail at once.
	run guest "echo x | nc -u -w 1 192.0.2.1 9999"
	assert_failure
	run guest "ping -c 1 -W 1 192.0.2.1"
	assert_failure
	run guest "iptables -S OUTPUT"
	assert_output --partial "-j DROP"
}

@test "a raw TCP client (nc) reaches an allowed port through the transparent redirect" {
	run guest "echo hello-tcp | nc -w 5 api.test $P_ECHO"
	assert_success
	assert_output hello-tcp
}

@test "the tunnel's thread runs SCHED_FIFO, and exec still answers while a download fills the tunnel" {
	space-egress set "$ID" --allow "api.test:$P_HTTP" "api.test:$P_HTTPS" "api.test:$P_ECHO" >/dev/null
	# Field 41 of a thread's stat is its policy: of the daemon's threads
	# the tunnel's alone is SCHED_FIFO (1), the others SCHED_OTHER (0).
	run guest 'for t in /proc/[0-9]*/task/*; do [ "$(cat $t/comm)" = space-daemon ] && cut -d" " -f41 $t/stat; done | sort | uniq -c'
	assert_success
	[ "$(awk '$2 == 1 { print $1 }' <<<"$output")" = 1 ]
	[ "$(awk '$2 != 0 && $2 != 1' <<<"$output")" = "" ]
	# A download that keeps the tunnel busy (it runs as long as the data
	# comes): commands are served meanwhile, within their timeout.
	space-exec "$ID" -d -- sh -c "curl -sS -o /dev/null -w '%{size_download}' http://api.test:$P_HTTP/size/$((400 << 20)) >/tmp/fill.out 2>&1" >/dev/null
	for _ in $(seq 50); do
		guest "pidof curl" >/dev/null && break
		sleep 0.1
	done
	run guest "pidof curl"
	assert_success
	for _ in 1 2 3; do
		run space-exec "$ID" --timeout 30 -- true
		assert_success
	done
	for _ in $(seq 300); do
		guest "pidof curl" >/dev/null || break
		sleep 0.5
	done
	run guest "cat /tmp/fill.out"
	assert_output "$((400 << 20))"
}

@test "refused: another host, another port, a name on the never-list, DNS of a name not allowed" {
	run guest "curl -sS http://other.test:$P_HTTP/x"
	assert_output --partial "not-allowed"
	# Allowed by policy, but loopback on a port the node does not open.
	space-egress set "$ID" --allow "api.test:$P_HTTP" loop.test metadata.test private.test >/dev/null
	run guest "curl -sS http://loop.test:9/x"
	assert_output --partial "never-list"
	run guest "curl -sS http://metadata.test/latest/meta-data/"
	assert_output --partial "never-list"
	run guest "curl -sS http://private.test/"
	assert_output --partial "never-list"
	# The guest's resolver: a name the policy does not allow does not
	# resolve; an allowed one resolves to an address of the tunnel.
	run guest "nslookup other.test 127.0.0.1"
	assert_failure
	run guest "nslookup api.test 127.0.0.1"
	assert_success
	assert_output --partial "198.1"
	grep -F "\"sandbox\":\"$ID\"" "$SPACE_ROOT/egress/decisions.log" |
	    jq -se 'map(select(.reason == "never-list")) | length >= 3'
}

@test "a policy change applies to the next connection, without a restart" {
	space-egress set "$ID" --allow "api.test:$P_HTTP" >/dev/null
	run guest "curl -sS http://api.test:$P_HTTP/a"
	assert_output "ok /a"
	space-egress set "$ID" --deny api.test >/dev/null
	run guest "curl -sS -o /dev/null -w '%{http_code}' http://api.test:$P_HTTP/b"
	assert_output 403
	space-egress set "$ID" --allow "api.test:$P_HTTP" "api.test:$P_HTTPS" >/dev/null
	run guest "curl -sS http://api.test:$P_HTTP/c"
	assert_output "ok /c"
}

@test "a credential is injected over HTTP and HTTPS; the guest's request had none" {
	secret="tok-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	echo "$secret" >"$T/secret"
	printf '%s' "$secret" | space-cred add --name tok --scope "sandbox/$ID" \
	    --host api.test --inject 'header:Authorization:Bearer {}' >/dev/null
	run guest "curl -sS -v http://api.test:$P_HTTP/plain 2>&1"
	assert_success
	assert_output --partial "ok /plain"
	refute_output --partial "Authorization"
	last_request | jq -e --arg s "Bearer $secret" '.path == "/plain" and .headers.authorization == $s'
	# TLS is terminated with the node CA, which the template trusts.
	run guest "curl -sS -v https://api.test:$P_HTTPS/tls 2>&1"
	assert_success
	assert_output --partial "ok /tls"
	assert_output --partial "SPACE node CA"
	refute_output --partial "Authorization"
	last_request | jq -e --arg s "Bearer $secret" '.scheme == "https" and .path == "/tls" and .headers.authorization == $s'
	# A guest that sets the header itself does not get it through.
	run guest "curl -sS -H 'Authorization: Bearer forged' http://api.test:$P_HTTP/forged"
	last_request | jq -e --arg s "Bearer $secret" '.path == "/forged" and .headers.authorization == $s'
}

@test "no byte of the secret is in the guest's disk or memory" {
	secret=$(cat "$T/secret")
	[ -n "$secret" ]
	guest sync
	disk=$SPACE_ROOT/sandboxes/$ID/disk.raw
	[ -f "$disk" ] || disk=$(find "$SPACE_ROOT" -path "*$ID*" -name disk.raw | head -n 1)
	[ -f "$disk" ]
	! grep -qaF -- "$secret" "$disk" || false
	virsh -c qemu:///system dump --memory-only "sp-$ID" "$T/mem" >/dev/null
	[ "$(stat -c %s "$T/mem")" -gt $((100 << 20)) ]
	! grep -qaF -- "$secret" "$T/mem" || false
	# The check can find it: the bearer header went through the gateway,
	# whose memory is the host's.
	grep -qaF -- "Bearer" "$T/requests"
	rm -f "$T/mem"
}

@test "scope precedence: sandbox over project over tenant over global" {
	printf 'g-secret' | space-cred add --name tok --scope global --host api.test --inject 'header:X-Key:{}' >/dev/null
	printf 't-secret' | space-cred add --name tok --scope tenant/t1 --host api.test --inject 'header:X-Key:{}' >/dev/null
	printf 'p-secret' | space-cred add --name tok --scope project/t1/p1 --host api.test --inject 'header:X-Key:{}' >/dev/null
	guest "curl -sS http://api.test:$P_HTTP/s" >/dev/null
	last_request | jq -e '.headers.authorization | startswith("Bearer tok-")'
	space-cred rm tok --scope "sandbox/$ID" >/dev/null
	guest "curl -sS http://api.test:$P_HTTP/p" >/dev/null
	last_request | jq -e '.headers["x-key"] == "p-secret" and (.headers.authorization | not)'
	space-cred rm tok --scope project/t1/p1 >/dev/null
	guest "curl -sS http://api.test:$P_HTTP/t" >/dev/null
	last_request | jq -e '.headers["x-key"] == "t-secret"'
	space-cred rm tok --scope tenant/t1 >/dev/null
	guest "curl -sS http://api.test:$P_HTTP/g" >/dev/null
	last_request | jq -e '.headers["x-key"] == "g-secret"'
}

@test "rotation: the next request carries the new secret" {
	printf 'g-secret-2' | space-cred rotate tok --scope global >/dev/null
	guest "curl -sS http://api.test:$P_HTTP/r" >/dev/null
	last_request | jq -e '.path == "/r" and .headers["x-key"] == "g-secret-2"'
	space-cred rm tok --scope global >/dev/null
}

@test "an expired credential is not injected; a rate-limited one gets 429" {
	now=$(date +%s)
	printf 'short-lived' | space-cred add --name tok --scope "sandbox/$ID" --host api.test \
	    --inject 'query:key' --expires $((now + 2)) >/dev/null
	guest "curl -sS http://api.test:$P_HTTP/q?x=1" >/dev/null
	last_request | jq -e '.path == "/q?x=1&key=short-lived"'
	sleep 3
	guest "curl -sS http://api.test:$P_HTTP/q2" >/dev/null
	last_request | jq -e '.path == "/q2"'
	space-cred rm tok --scope "sandbox/$ID" >/dev/null
	printf 'limited' | space-cred add --name tok --scope "sandbox/$ID" --host api.test \
	    --inject 'header:X-Key:{}' --rate 2/h >/dev/null
	run guest "for i in 1 2 3; do curl -sS -o /dev/null -w '%{http_code} ' http://api.test:$P_HTTP/l; done"
	assert_output "200 200 429 "
	run guest "curl -sS -D - -o /dev/null http://api.test:$P_HTTP/l"
	assert_output --partial "Retry-After"
	space-cred rm tok --scope "sandbox/$ID" >/dev/null
}

@test "the audit log has every use, with its decision, never a secret" {
	run space-cred audit
	assert_success
	jout -se --arg id "$ID" '[.[] | select(.op == "use" and .sandbox == $id)] |
	    (map(.decision) | index("allowed") != null and index("expired") != null and
	     index("rate-limited") != null) and all(.host == "api.test")'
	refute_output --partial "g-secret"
	refute_output --partial "short-lived"
	refute_output --partial "$(cat "$T/secret")"
}

@test "space-rm forgets the sandbox's credentials and its rate state" {
	printf 'gone-soon' | space-cred add --name tok --scope "sandbox/$ID" --host api.test \
	    --inject 'header:X-Key:{}' --rate 5/h >/dev/null
	guest "curl -sS http://api.test:$P_HTTP/last" >/dev/null
	ls "$SPACE_ROOT"/creds/rate/*/"$ID" >/dev/null
	run space-rm "$ID"
	assert_success
	run space-cred ls
	refute_output --partial "sandbox/$ID"
	! ls "$SPACE_ROOT"/creds/rate/*/"$ID" 2>/dev/null || false
	[ ! -e "$SPACE_ROOT/egress/$ID.json" ]
}
