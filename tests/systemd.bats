#!/usr/bin/env bats
# A root that boots systemd (design.md, "Any root filesystem"): Debian's
# minbase with systemd-sysv, made here by mmdebstrap from this node's apt
# sources.  The initramfs keeps systemd as PID 1 and starts space-daemon
# beside it from a runtime unit in /run; the image gets nothing of ours in
# /etc.  It is warmed like any template and sandboxes restore from that.
load helper

setup_file() {
	export T=$BATS_FILE_TMPDIR
	local sources=/etc/apt/sources.list.d/debian.sources
	[ -s "$sources" ] || sources=/etc/apt/sources.list
	mmdebstrap --variant=minbase --quiet --include=systemd-sysv \
	    bookworm "$T/root.tar.zst" "$sources"
	space-template import --name sysd "$T/root.tar.zst" \
	    --kernel "$SPACE_GUEST/vmlinuz" --initrd "$SPACE_GUEST/initrd.img" \
	    --daemon "$SPACE_GUEST/space-daemon" >"$T/import.json"
	: >"$T/ids"
}

teardown_file() {
	remove_listed "$T/ids"
	space-template rm --force sysd >/dev/null 2>&1 || true
}

@test "a cold boot runs systemd as PID 1 and space-daemon as its runtime unit" {
	local id
	jq -e '.ok' "$T/import.json"
	id=$(space-create --template sysd --cold | jq -r 'select(.ok) | .id')
	[ -n "$id" ]
	echo "$id" >>"$T/ids"
	run space-exec "$id" -- cat /proc/1/comm
	assert_output systemd
	run space-exec "$id" -- systemctl show -p ActiveState,SubState,UnitFileState,FragmentPath space-daemon
	assert_success
	assert_line ActiveState=active
	assert_line SubState=running
	assert_line UnitFileState=enabled-runtime
	assert_line FragmentPath=/run/systemd/system/space-daemon.service
	# Nothing of ours went into the image's units or /etc but the
	# resolv.conf import writes.
	run space-exec "$id" -- sh -c 'grep -rl space-daemon /etc /lib/systemd/system 2>/dev/null'
	assert_output /etc/resolv.conf
	# The egress rules the initramfs set: minbase has no iptables, but
	# the nat table exists only once a rule made it.
	run space-exec "$id" -- cat /proc/net/ip_tables_names
	assert_line nat
}

@test "systemd's template warms, and its sandboxes restore with systemd and the daemon running" {
	local id
	run space-template warm sysd
	assert_success
	id=$(space-create --template sysd | jq -r 'select(.ok and .path == "checkpoint") | .id')
	[ -n "$id" ]
	echo "$id" >>"$T/ids"
	run space-exec "$id" -- sh -c 'cat /proc/1/comm; systemctl is-active space-daemon; hostname'
	assert_success
	assert_output $'systemd\nactive\n'"$id"
}
