#!/usr/bin/env bats
# What the guest image gives the egress design (design.md), in one real
# sandbox: curl and iptables with their libraries, the kernel's netfilter, the
# redirect of every outbound TCP connection to the daemon's redirect port,
# UDP and ICMP off loopback refused, and names resolved through the DNS
# server resolv.conf names, by static busybox and by dynamic curl alike.
load helper

# SP_EGRESS_REDIRECT_PORT, as the initramfs must have it.
port=$(awk '$2 == "SP_EGRESS_REDIRECT_PORT" { print $3 }' "$top"/lib/sp_*.h)

setup_file() {
	# The guest's DNS server is the daemon, which answers only with a host
	# gateway behind it; this one answers every A question with 198.18.0.9
	# and every other with no address, on the address given.
	cc -static -O2 -o "$BATS_FILE_TMPDIR/dns-answer" -x c - <<'EOF'
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>
int
main(int argc, char *argv[])
{
	static const unsigned char a[] = { 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 1,
	    0, 4, 198, 18, 0, 9 };
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(53) };
	unsigned char b[512 + sizeof a];
	struct sockaddr_in peer;
	socklen_t plen;
	ssize_t n;
	size_t q;
	int s;

	s = socket(AF_INET, SOCK_DGRAM, 0);
	sin.sin_addr.s_addr = inet_addr(argc > 1 ? argv[1] : "127.0.0.1");
	if (s == -1 || bind(s, (struct sockaddr *)&sin, sizeof sin) == -1)
		return 1;
	for (;;) {
		plen = sizeof peer;
		n = recvfrom(s, b, 512, 0, (struct sockaddr *)&peer, &plen);
		if (n < 17)
			continue;
		for (q = 12; q < (size_t)n && b[q] != 0; q += b[q] + 1u)
			;
		q += 5;	/* the root label, QTYPE and QCLASS */
		if (q > (size_t)n)
			continue;
		b[2] = 0x81, b[3] = 0x80;	/* a response, no error */
		b[6] = 0, b[7] = b[q - 4] == 0 && b[q - 3] == 1;
		memset(b + 8, 0, 4);
		if (b[7])
			memcpy(b + q, a, sizeof a);
		sendto(s, b, q + (b[7] ? sizeof a : 0), 0,
		    (struct sockaddr *)&peer, plen);
	}
}
EOF
	import_minimal
	create >"$BATS_FILE_TMPDIR/ids"
	export ID=$(head -n 1 "$BATS_FILE_TMPDIR/ids")
	[ -n "$ID" ]
	space-cp "$BATS_FILE_TMPDIR/dns-answer" "$ID:/root" >/dev/null
}

teardown_file() {
	remove_listed "$BATS_FILE_TMPDIR/ids"
}

# Runs the shell command $2 in the guest, then prints the conntrack entries
# of its TCP connections to $1 (ADDRESS:PORT) that went to 127.0.0.1:$port;
# fails when there is none.  Whoever listens there (the daemon) may refuse
# them: what is checked is where they went, not what they got.
redirected() {
	space-exec "$ID" -- sh -c 'eval "$1" >/dev/null 2>&1
	    grep " tcp .* dst=$2 .* dport=$3 src=127.0.0.1 dst=127.0.0.1 sport=$4 " /proc/net/nf_conntrack' \
	    sh "$2" "${1%:*}" "${1##*:}" "$port"
}

@test "curl and iptables run in the guest, and it has a CA bundle" {
	run space-exec "$ID" -- curl --version
	assert_success
	assert_line --partial "curl 7."
	run space-exec "$ID" -- iptables --version
	assert_success
	assert_output --partial "(legacy)"
	run space-exec "$ID" -- sh -c 'grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt'
	assert_success
	[ "$output" -gt 50 ]
}

@test "the kernel has the netfilter the redirect needs; the initramfs set the rules and the route" {
	[ -n "$port" ]
	# Built into the kernel build-image makes (loaded by the initramfs
	# from a packaged kernel's modules): the tables, REDIRECT, tcp and udp.
	run space-exec "$ID" -- cat /proc/net/ip_tables_names
	assert_success
	assert_line nat
	assert_line filter
	run space-exec "$ID" -- cat /proc/net/ip_tables_targets
	assert_success
	assert_line REDIRECT
	run space-exec "$ID" -- cat /proc/net/ip_tables_matches
	assert_success
	assert_line tcp
	assert_line udp
	run space-exec "$ID" -- iptables -t nat -S OUTPUT
	assert_success
	assert_line -- "-A OUTPUT ! -d 127.0.0.0/8 -p tcp -j REDIRECT --to-ports $port"
	run space-exec "$ID" -- iptables -S OUTPUT
	assert_success
	assert_line -- "-A OUTPUT ! -d 127.0.0.0/8 -j DROP"
	run space-exec "$ID" -- ip route show default
	assert_success
	assert_output --partial "default dev lo"
	assert_output --partial "src 127.0.0.1"
}

@test "TCP to any IPv4 address and port lands on the redirect port of loopback" {
	run redirected 198.18.0.5:9999 'echo hi | nc 198.18.0.5 9999'
	assert_success
	run redirected 192.0.2.77:443 'curl -s --noproxy "*" -m 5 https://192.0.2.77/'
	assert_success
	# Loopback is left alone.
	run space-exec "$ID" -- sh -c 'echo hi | nc 127.0.0.1 9 2>&1'
	assert_output --partial "refused"
}

@test "UDP and ICMP off loopback are refused; on loopback they go" {
	run space-exec "$ID" -- ping -c 1 -W 1 198.18.0.5
	assert_failure
	assert_output --partial "Operation not permitted"
	run space-exec "$ID" -- nslookup example.com 192.0.2.53
	assert_failure
	assert_output --partial "Operation not permitted"
	run space-exec "$ID" -- ping -c 1 -W 2 localhost
	assert_success
}

@test "names resolve through resolv.conf's server: static busybox and dynamic curl" {
	run space-exec "$ID" -- cat /etc/resolv.conf /etc/nsswitch.conf
	assert_line "nameserver 127.0.0.1"
	assert_line "hosts: files dns"
	# The same files, with a server of our own on another loopback address.
	space-exec "$ID" -- sh -c 'cp /etc/resolv.conf /root/resolv.conf.saved &&
	    echo "nameserver 127.0.0.2" >/etc/resolv.conf'
	space-exec "$ID" -d -- /root/dns-answer 127.0.0.2 >/dev/null
	space-exec "$ID" -- sh -c 'for i in $(seq 50); do
	    netstat -lnu | grep -q " 127.0.0.2:53 " && exit 0; sleep 0.1; done; exit 1'
	run space-exec "$ID" -- nslookup one.example.test
	assert_success
	assert_output --partial "198.18.0.9"
	run redirected 198.18.0.9:9001 'echo hi | nc two.example.test 9001'
	assert_success
	run redirected 198.18.0.9:9002 'wget -Y off -q -O - http://three.example.test:9002/'
	assert_success
	run redirected 198.18.0.9:9003 'curl -s --noproxy "*" -m 5 http://four.example.test:9003/'
	assert_success
	space-exec "$ID" -- sh -c 'killall dns-answer; cp /root/resolv.conf.saved /etc/resolv.conf'
}

@test "/etc/profile gives login shells the proxy" {
	run space-exec "$ID" -- env -i sh -l -c 'echo "$HTTP_PROXY $HTTPS_PROXY $https_proxy $NO_PROXY"'
	assert_success
	assert_output "http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128 localhost,127.0.0.1,::1"
}
