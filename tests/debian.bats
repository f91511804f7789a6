#!/usr/bin/env bats
# The Debian template for agents (guest/build-debian, design.md): it boots
# under TCG with space-daemon as its init and is warmed; python3, git, pip
# and node work; and installing software goes through the sandbox's egress
# policy: `pip install` from a package index and `apt-get install` from an
# apt repository (made here with dpkg-scanpackages), both served on loopback
# under names the gateway resolves (SPACE_GATEWAY_HOSTS), work when the
# policy allows the name and fail cleanly when it does not; the index's token
# is a credential the gateway injects, which the guest never holds.
load helper

debian=$top/guest/build/debian.tar.zst

setup_file() {
	export T=$BATS_FILE_TMPDIR
	[ -f "$debian" ] || { echo "# no $debian: make guest-debian" >&3; false; }
	space-template import --name debian "$debian" >"$T/import.json"
	space-template warm debian >"$T/warm.json"
	# The package index and the apt repository, one loopback server.
	mkdir -p "$T/www/repo/pkg/DEBIAN" "$T/www/repo/pkg/usr/bin"
	"$top/tests/image-tool" wheel "$T/www"
	cat >"$T/www/repo/pkg/DEBIAN/control" <<-EOF
	Package: space-hello
	Version: 1.0
	Architecture: all
	Maintainer: SPACE tests <tests@localhost>
	Description: says hello, for tests/debian.bats
	EOF
	printf '#!/bin/sh\necho hello from apt\n' >"$T/www/repo/pkg/usr/bin/space-hello"
	chmod 755 "$T/www/repo/pkg/usr/bin/space-hello"
	dpkg-deb --root-owner-group --build "$T/www/repo/pkg" \
	    "$T/www/repo/space-hello_1.0_all.deb" >/dev/null
	rm -rf "$T/www/repo/pkg"
	(cd "$T/www/repo" && dpkg-scanpackages --multiversion . /dev/null >Packages 2>/dev/null)
	read -r P < <(free_ports 1)
	export P
	: >"$T/www.log"
	"$top/tests/files-server" "$T/www" "$P" "$T/www.log" >"$T/www.out" 2>&1 &
	echo $! >"$T/www.pid"
	printf '127.0.0.1 pypi.test apt.test\n' >"$T/hosts"
	space_reads "$T/hosts"
	space-create --template debian | jq -r 'select(.ok) | .id' >"$T/ids"
	export ID=$(head -n 1 "$T/ids")
	SPACE_EGRESS_ALLOW_NEVER="127.0.0.1:$P" SPACE_GATEWAY_HOSTS="$T/hosts" \
	    space-gatewayd --scan-ms 100 >"$T/gateway.out" 2>"$T/gateway.err" &
	echo $! >"$T/gateway.pid"
	for _ in $(seq 50); do
		grep -q '"gateway"' "$T/gateway.out" && break
		sleep 0.1
	done
}

teardown_file() {
	kill "$(cat "$T/gateway.pid")" "$(cat "$T/www.pid")" 2>/dev/null || true
	space-cred rm index --scope "sandbox/$ID" >/dev/null 2>&1 || true
	space-egress clear "$ID" >/dev/null 2>&1 || true
	remove_listed "$T/ids"
}

guest() {
	space-exec "$ID" -- bash -c "$1"
}

@test "the Debian template imports, warms, and creates from its checkpoint with space-daemon as init" {
	jq -e '.ok and .config == {}' "$T/import.json"
	jq -e '.ok' "$T/warm.json"
	[ -n "$ID" ]
	run space-ls "$ID"
	jout -e '.state == "running"'
	run guest 'cat /proc/1/comm; . /etc/os-release; echo "$ID $VERSION_ID"; id -un; getent passwd user | cut -d: -f3,6'
	assert_success
	assert_output $'space-daemon\ndebian 12\nroot\n1000:/home/user'
}

@test "python3, git, node and a compiler work" {
	run guest 'python3 -c "import sys; print(6 * 7, sys.version_info[0])"'
	assert_output "42 3"
	run guest 'cd /tmp && git init -q proj && cd proj && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m one && git log --format=%s'
	assert_success
	assert_output one
	run guest 'node -e "console.log([1, 2, 3].map(x => x * 2).join())"'
	assert_output "2,4,6"
	run guest 'printf "int main(void) { return 7; }\n" >/tmp/m.c && cc -o /tmp/m /tmp/m.c && /tmp/m; echo $?'
	assert_output 7
}

@test "pip installs a wheel copied in" {
	space-cp "$T/www/space_demo-1.0-py3-none-any.whl" "$ID:/tmp/" >/dev/null
	run guest 'python3 -m venv /tmp/venv && /tmp/venv/bin/pip install -q --no-index /tmp/space_demo-1.0-py3-none-any.whl && /tmp/venv/bin/python -c "import space_demo; print(space_demo.hello())"'
	assert_success
	assert_output "hello from a wheel"
}

@test "pip install from an index goes through the egress policy: refused, then allowed" {
	local pip="/tmp/venv2/bin/pip install -q --timeout 5 --retries 0 --trusted-host pypi.test --index-url http://pypi.test:$P/simple space-demo"
	space-egress clear "$ID" >/dev/null 2>&1 || true
	run guest "python3 -m venv /tmp/venv2 && $pip"
	assert_failure
	assert_output --partial "No matching distribution found for space-demo"
	run guest '/tmp/venv2/bin/python -c "import space_demo"'
	assert_failure
	# Refused before it reached the server.
	run grep -c 'GET /simple/' "$T/www.log"
	assert_output 0
	space-egress set "$ID" --allow "pypi.test:$P" >/dev/null
	printf 'index-secret' | space-cred add --name index --scope "sandbox/$ID" \
	    --host pypi.test --inject 'header:X-Index-Token:{}' >/dev/null
	run guest "$pip && /tmp/venv2/bin/python -c 'import space_demo; print(space_demo.hello())'"
	assert_success
	assert_output "hello from a wheel"
	# Every request of pip's carried the token, put in by the gateway.
	run grep -E '^GET /(simple/space-demo/|space_demo-1.0-py3-none-any.whl)' "$T/www.log"
	assert_line --regexp '^GET /simple/space-demo/ 200 index-secret$'
	assert_line --regexp '^GET /space_demo-1.0-py3-none-any.whl 200 index-secret$'
	run guest 'grep -rl index-secret /tmp/venv2 /root 2>/dev/null; env | grep -c index-secret'
	assert_output 0
	space-cred rm index --scope "sandbox/$ID" >/dev/null
}

@test "apt-get install from a repository goes through the egress policy: refused cleanly, then allowed" {
	local apt="apt-get -q -o Dir::Etc::SourceList=/etc/apt/test.list -o Dir::Etc::SourceParts=/etc/apt/none.d -o Acquire::Retries=0"
	guest "echo 'deb [trusted=yes] http://apt.test:$P/repo ./' >/etc/apt/test.list && mkdir -p /etc/apt/none.d"
	space-egress clear "$ID" >/dev/null 2>&1 || true
	run guest "$apt update && $apt install -y space-hello"
	assert_failure
	run guest 'command -v space-hello'
	assert_failure
	run grep -c 'GET /repo/' "$T/www.log"
	assert_output 0
	space-egress set "$ID" --allow "apt.test:$P" >/dev/null
	run guest "$apt update >/dev/null && DEBIAN_FRONTEND=noninteractive $apt install -y space-hello >/dev/null 2>&1 && space-hello"
	assert_success
	assert_output "hello from apt"
	grep -q '^GET /repo/.*space-hello_1.0_all.deb 200 ' "$T/www.log"
}
