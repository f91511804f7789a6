#!/usr/bin/env bats
# Each sandbox's QEMU in a jail of its own (sp_jail.c), in real VMs: its own
# uid and gid, no capabilities, seccomp, files and sockets of its own, and
# the limits of its cgroup.  A compromised QEMU is played twice: by
# tests/jail/jail-probe with sandbox A's uid, gid and QEMU's seccomp list,
# and by A's real QEMU, asked through its monitor to open B's files.
load helper

# The node's jail uids (SPACE_JAIL_UIDS; tests/run-all's second node has
# others).
uids=${SPACE_JAIL_UIDS:-1900000000-1900065535}
first_uid=${uids%-*} last_uid=${uids#*-}

setup_file() {
	import_minimal
	create --no-pool -n 2 > "$BATS_FILE_TMPDIR/ids"
	export A=$(sed -n 1p "$BATS_FILE_TMPDIR/ids") B=$(sed -n 2p "$BATS_FILE_TMPDIR/ids")
	[ -n "$A" ] && [ -n "$B" ]
}

teardown_file() {
	remove_listed "$BATS_FILE_TMPDIR/ids"
}

qemu_pid() {
	cat "/run/libvirt/qemu/sp-$1.pid"
}

qemu_uid() {
	stat -c %u "/proc/$(qemu_pid "$1")"
}

# As user $1: connects to the socket $2 and prints "ok" or the error's
# name; then lists $3 and makes a file in it, printing the same for each.
as_user() {
	runuser -u "$1" -- python3 - "$2" "$3" <<'EOF'
import errno, os, socket, sys
def step(f):
    try:
        f(); print("ok")
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)))
s = socket.socket(socket.AF_UNIX)
step(lambda: s.connect(sys.argv[1]))
s.close()
step(lambda: os.listdir(sys.argv[2]))
step(lambda: os.close(os.open(os.path.join(sys.argv[2], "planted"), os.O_CREAT | os.O_WRONLY, 0o600)))
EOF
}

# Sends each QMP command (a JSON text) to the monitor at $1 and prints the
# answer of each, one line apiece.
qmp() {
	python3 - "$@" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rw")
def answer():
    while True:
        m = json.loads(f.readline())
        if "event" not in m:
            return m
f.readline()				# the greeting
f.write(json.dumps({"execute": "qmp_capabilities"}) + "\n"); f.flush()
answer()
for cmd in sys.argv[2:]:
    f.write(cmd + "\n"); f.flush()
    print(json.dumps(answer()))
EOF
}

@test "each VM runs as a uid and gid of its own, with no capabilities, seccomp and no new privileges" {
	local ua ub pid
	ua=$(qemu_uid "$A") ub=$(qemu_uid "$B")
	echo "# A's QEMU runs as $ua, B's as $ub" >&3
	[ "$ua" != "$ub" ]
	for u in "$ua" "$ub"; do
		[ "$u" -ge "$first_uid" ] && [ "$u" -le "$last_uid" ] || false
	done
	for id in "$A" "$B"; do
		pid=$(qemu_pid "$id")
		[ "$(stat -c %g "/proc/$pid")" = "$(stat -c %u "/proc/$pid")" ]
		grep -q '^CapEff:	0000000000000000$' "/proc/$pid/status"
		grep -q '^CapPrm:	0000000000000000$' "/proc/$pid/status"
		grep -q '^NoNewPrivs:	1$' "/proc/$pid/status"
		grep -q '^Seccomp:	2$' "/proc/$pid/status"
		tr '\0' ' ' < "/proc/$pid/cmdline" |
			grep -q -- '-sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny'
		# No group besides its own.
		[ "$(awk '/^Groups:/ { $1 = ""; print }' "/proc/$pid/status" | tr -d ' ')" = \
		  "$(stat -c %g "/proc/$pid")" ]
	done
}

@test "a VM's disk, kernel, run directory and sockets are its uid's alone" {
	local ua dir run
	ua=$(qemu_uid "$A")
	dir=$SPACE_ROOT/sandboxes/$A run=$SPACE_RUN/$A
	[ "$(stat -c '%u %a' "$dir/disk.raw")" = "$ua 600" ]
	[ "$(stat -c '%u %a' "$dir/vmlinuz")" = "$ua 600" ]
	[ "$(stat -c '%u %a' "$dir/initrd.img")" = "$ua 600" ]
	[ "$(stat -c '%u %g %a' "$dir")" = "0 $ua 710" ]
	# 0710: the group bits show the ACL's mask, the search space has.
	[ "$(stat -c '%u %g %a' "$run")" = "$ua $ua 710" ]
	[ "$(stat -c %u "$run/space.0.sock")" = "$ua" ]
	# The manager's user space reaches a socket by name, and can neither
	# list the directory nor plant a file in it; nobody else reaches it.
	run as_user space "$run/space.7.sock" "$run"
	[ "$output" = $'ok\nEACCES\nEACCES' ]
	run as_user nobody "$run/space.7.sock" "$run"
	[ "$output" = $'EACCES\nEACCES\nEACCES' ]
	[ ! -e "$run/planted" ]
	run space-exec "$A" -- echo still
	[ "$output" = still ]
	[ -L "$SPACE_ROOT/jail/$ua" ]
	[ "$(readlink "$SPACE_ROOT/jail/$ua")" = "$A" ]
}

@test "run as the user space, space-exec reaches a jailed sandbox: the DB, its lock and the channel's ports are space's to use" {
	local run=$SPACE_RUN/$A
	# The ports' lock files, made before QEMU by root, readable.
	[ "$(stat -c '%U %a' "$run/space.0.lock")" = "root 644" ]
	[ "$(stat -c '%U %a' "$run/space.30.lock")" = "root 644" ]
	run runuser -u space -- "$top/build/bin/space-exec" "$A" -- sh -c 'echo "$(id -u) $1"' _ hi
	assert_success
	[ "$output" = "0 hi" ]
	# With port 0 held, a second exec as space takes the next one.
	runuser -u space -- "$top/build/bin/space-exec" "$A" -- sleep 3 &
	sleep 1
	run runuser -u space -- "$top/build/bin/space-exec" "$A" -- echo two
	wait
	assert_success
	[ "$output" = two ]
	# A QEMU that swaps a lock file for a FIFO gets a clear refusal,
	# not a command waiting on it.
	mv "$run/space.0.lock" "$run/space.0.lock.was"
	mkfifo "$run/space.0.lock"
	run timeout 20 space-exec "$A" -- true
	rm -f "$run/space.0.lock"
	mv "$run/space.0.lock.was" "$run/space.0.lock"
	[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || false
	[[ "$output" == *"is not a lock file"* ]]
}

@test "a compromised QEMU of A, simulated, reaches nothing of B's nor the node's secrets: EACCES or EPERM" {
	local ua pb key
	ua=$(qemu_uid "$A") pb=$(qemu_pid "$B")
	key=$(find "$SPACE_ROOT/ca" -name ca.key | head -n 1)
	[ -n "$key" ]
	run "$top/build/tests/jail-probe" "$ua" "$ua" \
		read "$SPACE_ROOT/sandboxes/$B/disk.raw" \
		write "$SPACE_ROOT/sandboxes/$B/disk.raw" \
		read "$SPACE_ROOT/sandboxes/$B/vmlinuz" \
		read "$SPACE_ROOT/sandboxes/$B/sandbox.json" \
		list "$SPACE_ROOT/sandboxes/$B" \
		list "$SPACE_RUN/$B" \
		connect "$SPACE_RUN/$B/space.0.sock" \
		connect "$SPACE_RUN/$B/qmp.sock" \
		connect "$SPACE_RUN/$B/egress.sock" \
		read "$SPACE_RUN/$B/console.log" \
		read "$key" \
		list "$SPACE_ROOT/creds" \
		list "$SPACE_ROOT/egress" \
		list "$SPACE_ROOT/jail" \
		read "$SPACE_ROOT/space.db" \
		write "$SPACE_ROOT/space.db" \
		ptrace "$pb" \
		signal "$pb" \
		setuid 0 \
		exec /bin/sh
	echo "$output" | sed 's/^/# /' >&3
	[ "$status" -eq 0 ]
	[ "$(grep -c '^{' <<<"$output")" -eq 20 ]
	# Every try failed, each for want of permission.
	[ "$(jout -s 'map(select(.result != "EACCES" and .result != "EPERM")) | length')" -eq 0 ]
}

@test "the probe itself can do what A's QEMU may: its own disk and sockets" {
	local ua
	ua=$(qemu_uid "$A")
	run "$top/build/tests/jail-probe" "$ua" "$ua" \
		read "$SPACE_ROOT/sandboxes/$A/disk.raw" \
		write "$SPACE_ROOT/sandboxes/$A/disk.raw" \
		list "$SPACE_RUN/$A" \
		connect "$SPACE_RUN/$A/qmp.sock" \
		read /etc/hostname
	[ "$status" -eq 0 ]
	[ "$(jout -s 'map(select(.result == "ok")) | length')" -eq 5 ]
}

@test "A's real QEMU, told through its monitor, cannot open B's disk or reach B's sockets" {
	local b=$SPACE_ROOT/sandboxes/$B
	run qmp "$SPACE_RUN/$A/qmp.sock" \
		'{"execute":"blockdev-add","arguments":{"driver":"file","node-name":"p1","read-only":true,"filename":"'"$b"'/disk.raw"}}' \
		'{"execute":"blockdev-add","arguments":{"driver":"file","node-name":"p2","read-only":true,"filename":"'"$(find "$SPACE_ROOT/ca" -name ca.key | head -n 1)"'"}}' \
		'{"execute":"chardev-add","arguments":{"id":"p3","backend":{"type":"socket","data":{"server":false,"addr":{"type":"unix","data":{"path":"'"$SPACE_RUN/$B"'/space.0.sock"}}}}}}' \
		'{"execute":"blockdev-add","arguments":{"driver":"file","node-name":"p4","read-only":true,"filename":"/etc/hostname"}}' \
		'{"execute":"blockdev-del","arguments":{"node-name":"p4"}}'
	echo "$output" | sed 's/^/# /' >&3
	[ "$status" -eq 0 ]
	[ "$(sed -n 1p <<<"$output" | jq -r .error.desc)" != null ]
	[[ "$(sed -n 1p <<<"$output")" == *"Permission denied"* ]]
	[[ "$(sed -n 2p <<<"$output")" == *"Permission denied"* ]]
	[[ "$(sed -n 3p <<<"$output")" == *"Permission denied"* ]]
	# What A's QEMU may open, it opens: the denials are the jail's.
	[ "$(sed -n 4p <<<"$output" | jq -c .return)" = '{}' ]
	[ "$(sed -n 5p <<<"$output" | jq -c .return)" = '{}' ]
}

@test "each VM's cgroup holds its memory (guest + overhead) and its pids; its CPU weight file alone is space's" {
	local pid cg mib w
	pid=$(qemu_pid "$A")
	mib=$(space-ls "$A" | jq -r .memory_mib)
	# Given as the VM started, for a claim run as space to boost; no
	# other file of the cgroup changes hands, and the jail's uid has none.
	w=$(vm_weight_file "$A")
	[ "$(stat -c '%U %a' "$w")" = "space 644" ]
	[ "$(find "${w%/*}" -mindepth 1 -maxdepth 1 -user space | wc -l)" -eq 1 ]
	[ "$(find "${w%/*}" -mindepth 1 -maxdepth 1 -uid "$(qemu_uid "$A")" | wc -l)" -eq 0 ]
	if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
		cg=/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$pid/cgroup")
		cg=${cg%/emulator}
		[ "$(cat "$cg/memory.max")" -eq $(( (mib + 1280) * 1048576 )) ]
		[ "$(cat "$cg/pids.max")" -eq 512 ]
	else
		cg=$(sed -n 's/^[0-9]*:memory://p' "/proc/$pid/cgroup")
		[ "$(cat "/sys/fs/cgroup/memory$cg/memory.limit_in_bytes")" -eq $(( (mib + 1280) * 1048576 )) ]
		[ "$(sed -n 's/^[0-9]*:pids://p' "/proc/$pid/cgroup")" = "$cg" ]
		[ "$(cat "/sys/fs/cgroup/pids$cg/pids.max")" -eq 512 ]
		[ "$(cat "/sys/fs/cgroup/pids$cg/pids.current")" -ge 3 ]
	fi
}

@test "a memory hog in a guest is the guest's OOM killer's: QEMU lives on, the host limit untouched" {
	local pid cg before
	pid=$(qemu_pid "$A")
	space-fs "$A" write -m 755 /root/space-hog < "$top/build/tests/space-hog"
	run space-exec "$A" -- /root/space-hog
	echo "# space-hog: exit $status" >&3
	[ "$status" -eq 137 ]			# SIGKILL, from the guest's OOM killer
	run space-exec "$A" -- dmesg
	[[ "$output" == *"Out of memory: Killed process"*"(space-hog)"* ]]
	[ "$(qemu_pid "$A")" = "$pid" ]
	kill -0 "$pid"
	run space-exec "$A" -- echo alive
	[ "$output" = alive ]
	if [ "$(stat -f -c %T /sys/fs/cgroup)" != cgroup2fs ]; then
		cg=$(sed -n 's/^[0-9]*:memory://p' "/proc/$pid/cgroup")
		[ "$(cat "/sys/fs/cgroup/memory$cg/memory.failcnt")" -eq 0 ]
	fi
}

@test "a uid is the sandbox's until it is removed, then free; space-reconcile frees one left behind" {
	local ub snap
	ub=$(qemu_uid "$B")
	space-stop "$B" >/dev/null
	space-start "$B" >/dev/null
	[ "$(qemu_uid "$B")" = "$ub" ]
	snap=$(space-snap --full "$B" | jq -r .snap)
	space-rollback "$B" "$snap" >/dev/null
	[ "$(qemu_uid "$B")" = "$ub" ]
	[ "$(stat -c '%u %a' "$SPACE_ROOT/sandboxes/$B/disk.raw")" = "$ub 600" ]
	space-rm "$B" >/dev/null
	[ ! -e "$SPACE_ROOT/jail/$ub" ]
	# One a crash left: its sandbox gone, older than a minute.
	ln -s aaaaaaaaaaaa "$SPACE_ROOT/jail/$last_uid"
	touch -h -d '2 minutes ago' "$SPACE_ROOT/jail/$last_uid"
	# Under cgroup v1, the pids cgroup an ended VM left, swept too.
	local cg stale=/sys/fs/cgroup/pids/machine/qemu-0-sp-aaaaaaaaaaaa.libvirt-qemu
	[ ! -d /sys/fs/cgroup/pids/machine ] || mkdir -p "$stale"
	run space-reconcile --once
	[[ "$output" == *'"jail-uids-freed"'* ]]
	[ ! -e "$SPACE_ROOT/jail/$last_uid" ]
	[ ! -e "$stale" ]
	# A running VM's is left.
	if [ -d /sys/fs/cgroup/pids/machine ]; then
		cg=$(sed -n 's/^[0-9]*:memory://p' "/proc/$(qemu_pid "$A")/cgroup")
		[ "$(cat "/sys/fs/cgroup/pids$cg/pids.max")" = 512 ]
	fi
}

@test "SPACE_JAIL=off: VMs run as libvirt's user, as before the jail, and stay so with it on" {
	local id snap
	# Root's commands alone, also when the suite runs as space: space's are
	# refused without the jail (the next test).
	PATH=${PATH#"${SPACE_AS_SPACE_BIN:-}:"}
	id=$(SPACE_JAIL=off create --no-pool)
	[ -n "$id" ]
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	[ "$(stat -c %U "/proc/$(qemu_pid "$id")")" = libvirt-qemu ]
	run space-exec "$id" -- echo hi
	[ "$output" = hi ]
	# A VM made without the jail (or before it) keeps its definition when
	# the jail is on: stop, start, a snapshot and a rollback bring it back
	# as libvirt's user, its directories as they were.
	space-stop "$id" >/dev/null
	space-start "$id" >/dev/null
	[ "$(stat -c %U "/proc/$(qemu_pid "$id")")" = libvirt-qemu ]
	[ "$(stat -c %G "$SPACE_RUN/$id")" = libvirt-qemu ]
	run as_user space "$SPACE_RUN/$id/space.7.sock" "$SPACE_RUN/$id"
	[ "$output" = $'ok\nEACCES\nEACCES' ]
	snap=$(space-snap --full "$id" | jq -r .snap)
	space-rollback "$id" "$snap" >/dev/null
	[ "$(stat -c %U "/proc/$(qemu_pid "$id")")" = libvirt-qemu ]
	run space-exec "$id" -- echo again
	[ "$output" = again ]
	space-rm "$id" >/dev/null
}

@test "bad jail settings are refused clearly, and nothing is made" {
	local before
	before=$(space-ls --pods | wc -l)
	run env SPACE_JAIL=maybe space-create --template minimal --no-pool
	[ "$status" -eq 100 ]
	[[ "$output" == *"SPACE_JAIL must be on or off"* ]]
	run env SPACE_JAIL_UIDS=5-10 space-create --template minimal --no-pool
	[ "$status" -eq 100 ]
	[[ "$output" == *"SPACE_JAIL_UIDS must be FIRST-LAST"* ]]
	# Nor the ids a template's files have while space imports it.
	run env SPACE_JAIL_UIDS=1799990000-1800000000 space-create --template minimal --no-pool
	[ "$status" -eq 100 ]
	[[ "$output" == *"SPACE_JAIL_UIDS may not hold 1800000000-1800065535"* ]]
	run env SPACE_PIDS_MAX=lots space-create --template minimal --no-pool
	[ "$status" -eq 100 ]
	[[ "$output" == *"SPACE_PIDS_MAX must be a number"* ]]
	run env SPACE_CPU_QUOTA=-1 space-create --template minimal --no-pool
	[ "$status" -eq 100 ]
	[[ "$output" == *"SPACE_CPU_QUOTA must be"* ]]
	run env SPACE_MEM_OVERHEAD_MIB=-5 space-create --template minimal --no-pool
	[ "$status" -eq 100 ]
	[[ "$output" == *"SPACE_MEM_OVERHEAD_MIB must be a number"* ]]
	# Without the jail only root can use a VM's files.
	run runuser -u space -- env SPACE_JAIL=off "$top/build/bin/space-create" \
	    --template minimal --no-pool
	[ "$status" -eq 100 ]
	[[ "$output" == *"SPACE_JAIL=off is root's alone"* ]]
	[ "$(space-ls --pods | wc -l)" -eq "$before" ]
}

# The CPU quota of sandbox $1's domain, in microseconds a 100 ms period
# (-1: none), as libvirt says it.
cpu_quota_us() {
	virsh -c qemu:///system schedinfo "sp-$1" |
		awk '$1 == "global_quota" { print $3 }'
}

@test "SPACE_CPU_QUOTA caps a VM's CPU: the domain's cgroup gets the quota" {
	local id pid cg
	id=$(SPACE_CPU_QUOTA=0.5 create --no-pool)
	[ -n "$id" ]
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	[ "$(cpu_quota_us "$id")" -eq 50000 ]
	pid=$(qemu_pid "$id")
	if [ "$(stat -f -c %T /sys/fs/cgroup)" != cgroup2fs ]; then
		cg=$(sed -n 's/^[0-9]*:cpu\(,cpuacct\)\{0,1\}://p' "/proc/$pid/cgroup")
		cg=${cg%/emulator}
		[ "$(cat "/sys/fs/cgroup/cpu$cg/cpu.cfs_quota_us")" -eq 50000 ]
	fi
	space-rm "$id" >/dev/null
	# Without it, a VM has no quota.
	[ "$(cpu_quota_us "$A")" -le 0 ]
}

@test "--cpu-quota: a sandbox's own quota, over the node's; bad ones refused, nothing made" {
	local id before
	id=$(SPACE_CPU_QUOTA=0.5 space-create --template minimal --cpu-quota 1.25 | jq -r 'select(.ok) | .id')
	[ -n "$id" ]
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	[ "$(cpu_quota_us "$id")" -eq 125000 ]
	[ "$(space-ls "$id" | jq -r .cpu_quota)" = 1.25 ]
	# Not a pod: a pod has the node's quota.
	[ "$(space-ls "$id" | jq -r .pod)" = null ]
	space-rm "$id" >/dev/null
	before=$(space-ls --pods | wc -l)
	for q in 0 -1 0.001 1025 nan inf 1x ""; do
		run space-create --template minimal --cpu-quota "$q"
		[ "$status" -eq 100 ]
		[[ "$output" == *"--cpu-quota must be CPUs from 0.01 to 1024"* ]]
	done
	[ "$(space-ls --pods | wc -l)" -eq "$before" ]
}

# The qgroup limit of sandbox $1's subvolume (its exclusive bytes), as
# btrfs-progs shows it.
disk_limit() {
	btrfs qgroup show -re --raw "$SPACE_ROOT" |
		awk -v p="sandboxes/$1" '$NF == p { print $5 }'
}

# What that limit should be: twice the disk, and 256 MiB.
disk_limit_of() {
	echo $((2 * $(stat -c %s "$SPACE_ROOT/sandboxes/$1/disk.raw") + 268435456))
}

@test "a sandbox's subvolume has a qgroup limit under its disk: past it a write there fails, the host and others go on" {
	local lim other dir=$SPACE_ROOT/sandboxes/$A
	[ "$(space-init | jq -r .quota)" = simple ]
	lim=$(disk_limit "$A")
	[ "$lim" = "$(disk_limit_of "$A")" ]
	# The host's side of what a guest could pin (extents kept whole when
	# partly overwritten): taken in the sandbox's subvolume, refused.
	run fallocate -l $((lim + 1048576)) "$dir/pinned"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Disk quota exceeded"* ]]
	run fallocate -l $((lim / 2)) "$dir/pinned"
	[ "$status" -eq 0 ]
	run fallocate -l $((lim / 2 + 268435456)) "$dir/more"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Disk quota exceeded"* ]]
	# The host and another sandbox go on.
	[ "$(df -k --output=avail "$SPACE_ROOT" | tail -n 1)" -gt $((1024 * 1024)) ]
	other=$(create --no-pool)
	[ -n "$other" ]
	echo "$other" >> "$BATS_FILE_TMPDIR/ids"
	run space-exec "$other" -- sh -c 'dd if=/dev/zero of=/b bs=1M count=8 2>/dev/null && sync && rm /b && echo written'
	[ "$output" = written ]
	space-rm "$other" >/dev/null
	rm -f "$dir/pinned" "$dir/more"
	run space-exec "$A" -- sh -c 'dd if=/dev/zero of=/a bs=1M count=8 2>/dev/null && sync && rm /a && echo written'
	[ "$output" = written ]
}

# The root filesystem's size, in KiB, as the guest sees it.
root_kib() {
	space-exec "$1" -- df -k / | awk 'NR == 2 { print $2 }'
}

@test "--disk-gb: the guest's root is that size, writing past it is ENOSPC in the guest, the host and the others go on" {
	local d
	# A quota that lets the vCPU run whole: under 0.3 the guest's fill
	# took 87 s of TCG.
	d=$(create --no-pool --disk-gb 2 --cpu-quota 1.5)
	[ -n "$d" ]
	echo "$d" >> "$BATS_FILE_TMPDIR/ids"
	echo "$d" > "$BATS_FILE_TMPDIR/disk-id"
	# 2 GiB less what ext4 keeps for itself.
	[ "$(root_kib "$d")" -gt $((1900 * 1024)) ]
	[ "$(root_kib "$d")" -le $((2048 * 1024)) ]
	[ "$(stat -c %s "$SPACE_ROOT/sandboxes/$d/disk.raw")" -eq $((2 * 1024 * 1024 * 1024)) ]
	run space-exec "$d" -- dd if=/dev/zero of=/fill bs=1M
	[ "$status" -ne 0 ]
	[[ "$output" == *"No space left on device"* ]]
	# The file is sparse: the host holds what was written, no more than
	# the disk; its filesystem has room still, and A goes on.
	[ "$(du -k "$SPACE_ROOT/sandboxes/$d/disk.raw" | cut -f1)" -le $((2048 * 1024 + 1024)) ]
	[ "$(df -k --output=avail "$SPACE_ROOT" | tail -n 1)" -gt $((1024 * 1024)) ]
	run space-exec "$A" -- echo other
	[ "$output" = other ]
	# The full guest still answers, and frees its space itself.
	space-exec "$d" -- rm /fill
	run space-exec "$d" -- sh -c 'echo fits > /small && cat /small'
	[ "$output" = fits ]
}

@test "the disk's size, its qgroup limit and the CPU quota hold across stop and start, a snapshot and rollback, a fork, a suspend and restore" {
	local d f snap kib
	d=$(cat "$BATS_FILE_TMPDIR/disk-id")
	kib=$(root_kib "$d")
	[ "$(cpu_quota_us "$d")" -eq 150000 ]
	[ "$(disk_limit "$d")" = $((4 * 1024 * 1024 * 1024 + 268435456)) ]
	space-stop "$d" >/dev/null
	space-start "$d" >/dev/null
	[ "$(root_kib "$d")" -eq "$kib" ]
	[ "$(cpu_quota_us "$d")" -eq 150000 ]
	snap=$(space-snap --full "$d" | jq -r .snap)
	space-rollback "$d" "$snap" >/dev/null
	[ "$(root_kib "$d")" -eq "$kib" ]
	[ "$(cpu_quota_us "$d")" -eq 150000 ]
	[ "$(disk_limit "$d")" = $((4 * 1024 * 1024 * 1024 + 268435456)) ]
	f=$(space-fork "$d" | jq -r 'select(.ok) | .id')
	[ -n "$f" ]
	echo "$f" >> "$BATS_FILE_TMPDIR/ids"
	[ "$(root_kib "$f")" -eq "$kib" ]
	[ "$(cpu_quota_us "$f")" -eq 150000 ]
	[ "$(disk_limit "$f")" = $((4 * 1024 * 1024 * 1024 + 268435456)) ]
	[ "$(space-ls "$f" | jq -r .cpu_quota)" = 1.5 ]
	space-suspend "$d" >/dev/null
	space-restore "$d" >/dev/null
	[ "$(root_kib "$d")" -eq "$kib" ]
	[ "$(cpu_quota_us "$d")" -eq 150000 ]
	[ "$(disk_limit "$d")" = $((4 * 1024 * 1024 * 1024 + 268435456)) ]
	[ "$(stat -c %s "$SPACE_ROOT/sandboxes/$d/disk.raw")" -eq $((2 * 1024 * 1024 * 1024)) ]
}

@test "--disk-gb below the template's disk or over the limit is refused, here or --anywhere, and nothing is made" {
	local before
	before=$(space-ls --pods | wc -l)
	run space-create --template minimal --disk-gb 1
	[ "$status" -eq 100 ]
	[[ "$output" == *"the disk must be from the template's 2 GiB"* ]]
	run space-create --anywhere --template minimal --disk-gb 1
	[ "$status" -eq 100 ]
	[[ "$output" == *"the disk must be from the template's 2 GiB"* ]]
	run space-create --template minimal --disk-gb 16385
	[ "$status" -eq 100 ]
	run space-create --template minimal --disk-gb 2x
	[ "$status" -eq 100 ]
	[ "$(space-ls --pods | wc -l)" -eq "$before" ]
}

@test "--anywhere --disk-gb --cpu-quota: the row carries them to the node the scheduler picks, which makes it so" {
	local id
	id=$(space-create --anywhere --template minimal --disk-gb 3 --cpu-quota 2 | jq -r 'select(.ok) | .id')
	[ -n "$id" ]
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	[ "$(space-ls "$id" | jq -r .disk_gb)" = 3 ]
	[ "$(space-ls "$id" | jq -r .cpu_quota)" = 2 ]
	space-init >/dev/null		# this node's lease, fresh: a candidate
	space-schedule >/dev/null
	[ "$(space-ls "$id" | jq -r .node)" = "$SPACE_NODE" ]
	space-reconcile --once >/dev/null || true
	[ "$(space-ls "$id" | jq -r .state)" = running ]
	[ "$(root_kib "$id")" -gt $((2900 * 1024)) ]
	[ "$(stat -c %s "$SPACE_ROOT/sandboxes/$id/disk.raw")" -eq $((3 * 1024 * 1024 * 1024)) ]
	[ "$(cpu_quota_us "$id")" -eq 200000 ]
}

@test "a tenant's disk quota counts a sandbox's own disk when it is larger than its template's" {
	local t=disk-tenant-$RANDOM
	space-tenant add "$t" --max-disk 3 >/dev/null
	run space-create --template minimal --no-pool --label tenant="$t" --disk-gb 4
	[ "$status" -ne 0 ]
	[[ "$output" == *quota* ]]
	id=$(space-create --template minimal --no-pool --label tenant="$t" --disk-gb 3 | jq -r 'select(.ok) | .id')
	[ -n "$id" ]
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	# 3 GiB of 3 taken: not even the template's own disk fits.
	run space-create --template minimal --no-pool --label tenant="$t"
	[ "$status" -ne 0 ]
	[[ "$output" == *quota* ]]
	space-rm "$id" >/dev/null
}

@test "SPACE_ROOT is mounted nosuid,nodev: a setuid-root program or a device node there gives no one anything" {
	local dir=$SPACE_ROOT/jail-suid-test
	[[ ",$(findmnt -no OPTIONS "$SPACE_ROOT")," == *,nosuid,* ]]
	[[ ",$(findmnt -no OPTIONS "$SPACE_ROOT")," == *,nodev,* ]]
	mkdir -p "$dir"
	chmod 0755 "$dir"
	# What an unpacked layer or a received stream could leave there.
	cp /usr/bin/id "$dir/id"
	chmod 4755 "$dir/id"
	mknod "$dir/mem" c 1 1
	chmod 0666 "$dir/mem"
	run runuser -u nobody -- "$dir/id" -u
	local out=$output st=$status
	run cat "$dir/mem" < /dev/null
	local mem=$status memout=$output
	rm -rf "$dir"
	[ "$st" -eq 0 ]
	[ "$out" = "$(id -u nobody)" ]
	# Not even root opens the device: /dev/mem's numbers, refused.
	[ "$mem" -ne 0 ]
	[[ "$memout" == *"Permission denied"* ]]
}
