#!/usr/bin/env bats
# One real sandbox, end to end: its own kernel, exec, ls, rm.
load helper

setup_file() {
	import_minimal
	create > "$BATS_FILE_TMPDIR/ids"
	export ID=$(head -n 1 "$BATS_FILE_TMPDIR/ids")
}

teardown_file() {
	remove_listed "$BATS_FILE_TMPDIR/ids"
}

@test "space-init is idempotent and describes the node" {
	run space-init
	assert_success
	jout -e '.ok and .fs == "btrfs" and .node == "check" and
		(.kvm | type) == "boolean" and (.libvirt | length) > 0' 
	run space-init
	assert_success
}

@test "the sandbox was created and is running" {
	[ -n "$ID" ]
	run space-ls "$ID"
	assert_success
	jout -e --arg id "$ID" '.id == $id and .state == "running" and
		.vm == "running" and (.template | startswith("minimal@")) and
		.node == "check" and .memory_mib == 256 and .vcpus == 1 and
		(.created | type) == "number" and (.disk_exclusive_bytes | type) == "number"'
}

@test "the sandbox runs its own kernel" {
	run space-exec "$ID" -- uname -r
	assert_success
	guest_kernel=$(ls "$SPACE_GUEST"/kernel/*/lib/modules 2>/dev/null | head -n 1)
	[ -n "$guest_kernel" ]
	assert_output "$guest_kernel"
	run space-exec "$ID" -- cat /proc/sys/kernel/random/boot_id
	assert_success
	[ ${#output} -eq 36 ]
	[ "$output" != "$(cat /proc/sys/kernel/random/boot_id)" ]
}

@test "the root disk needs no background work: inode tables zeroed in the image" {
	# Every copy of a checkpoint would otherwise go on zeroing inode tables
	# and prefetching block bitmaps (ext4lazyinit) after its restore.
	template=$(space-ls "$ID" | jq -r .template)
	run dumpe2fs "$SPACE_ROOT/templates/$template/disk.raw"
	assert_success
	groups=$(grep -c '^Group [0-9]' <<<"$output")
	[ "$groups" -gt 0 ]
	[ "$(grep '^Group [0-9]' <<<"$output" | grep -c ITABLE_ZEROED)" -eq "$groups" ]
	run space-exec "$ID" -- sh -c 'grep " / " /proc/mounts
	    for c in /proc/[0-9]*/comm; do cat "$c"; done 2>/dev/null'
	assert_success
	assert_output --regexp '^/dev/vda / ext4 rw,noatime,[^ ]*noinit_itable,no_prefetch_block_bitmaps'
	refute_output --partial ext4lazyinit
}

@test "exec passes stdout, stderr, stdin and the exit status" {
	run --separate-stderr space-exec "$ID" -- sh -c 'echo out; echo err >&2; exit 7'
	[ "$status" -eq 7 ]
	[ "$output" = "out" ]
	[ "$stderr" = "err" ]
	run bash -c "printf 'line1\nline2\n' | space-exec $ID -- wc -l"
	assert_success
	assert_output "2"
	run space-exec "$ID" -e GREETING=hej -w /etc -- sh -c 'echo $GREETING; pwd'
	assert_success
	assert_output $'hej\n/etc'
}

@test "exec of a missing program fails clearly with 127" {
	run -127 --separate-stderr space-exec "$ID" -- /no/such/program
	[ "$status" -eq 127 ]
	[[ "$stderr" == *"/no/such/program"* ]]
}

@test "exec looks the command up in its own PATH, as execvp does" {
	space-exec "$ID" -- sh -c 'mkdir -p /tmp/pa /tmp/pb &&
		echo "echo from-a" > /tmp/pa/tool && chmod 644 /tmp/pa/tool &&
		printf "#!/bin/sh\necho from-b \$1\n" > /tmp/pb/tool &&
		echo "echo plain \$1" > /tmp/pb/plain && chmod 755 /tmp/pb/*'
	# Not executable in the first directory: the second one's runs.
	run space-exec "$ID" -e PATH=/tmp/pa:/tmp/pb -- tool x
	assert_success
	assert_output "from-b x"
	# Only a file that may not run: Permission denied, not "not found".
	run -127 --separate-stderr space-exec "$ID" -e PATH=/tmp/pa -- tool
	[[ "$stderr" == *"Permission denied"* ]]
	# No #! line: /bin/sh runs it.
	run space-exec "$ID" -e PATH=/tmp/pb -- plain y
	assert_success
	assert_output "plain y"
	# An empty element is the working directory; a slash is no search.
	run space-exec "$ID" -e PATH=:/bin -w /tmp/pb -- plain z
	assert_output "plain z"
	run space-exec "$ID" -w /tmp/pb -- ./plain w
	assert_output "plain w"
	run -127 space-exec "$ID" -e PATH=/bin -w /tmp/pb -- plain
	# Without PATH in its environment: /bin:/usr/bin, as glibc's execvp.
	run space-exec "$ID" -e FOO=1 -- busybox echo ok
	assert_output "ok"
}

@test "exec into an unknown or malformed id fails without touching anything" {
	run --separate-stderr space-exec aaaaaaaaaaaa -- true
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"no such sandbox"* ]]
	run space-exec 'AB/../x' -- true
	[ "$status" -eq 100 ]
}

@test "space-ls --state filters" {
	run space-ls --state running
	assert_success
	jout -se --arg id "$ID" 'map(.id) | index($id) != null'
	run space-ls --state stopped
	assert_success
	refute_output --partial "$ID"
	run space-ls --state nonsense
	[ "$status" -eq 100 ]
}

@test "commands pipe: space-ls output feeds space-ls" {
	run bash -c "space-ls $ID | space-ls"
	assert_success
	jout -e --arg id "$ID" '.id == $id'
}

@test "space-rm removes, and removing again says so and succeeds" {
	id=$(create)
	[ -n "$id" ]
	run space-rm "$id"
	assert_success
	jout -e '.ok and .removed == true'
	[ ! -e "$SPACE_ROOT/sandboxes/$id" ]
	[ ! -e "$SPACE_RUN/$id" ]
	run virsh -c qemu:///system domstate "sp-$id"
	assert_failure
	run space-rm "$id"
	assert_success
	jout -e '.ok and .removed == false'
	run space-ls "$id"
	[ "$status" -eq 1 ]
	jout -e '.error == "not-found"'
}

idle() {
	space-ls "$ID" | jq -r .idle_s
}

# Waits up to 20 s for idle_s to reach $1 (a loaded host slows the guest's
# sampler, so the wait is bounded, not fixed); prints the last value.
idle_reaches() {
	local i
	for _ in $(seq 10); do
		sleep 2
		i=$(idle)
		[ "$i" != null ] && [ "$i" -ge "$1" ] && break
	done
	echo "$i"
}

@test "space-ls idle_s: grows while nothing happens; calls and guest work reset it" {
	space-exec "$ID" -- true
	i=$(idle_reaches 4); echo "# idle after quiet: $i" >&3
	[ "$i" -ge 4 ]
	space-exec "$ID" -- true
	[ "$(idle)" -le 1 ]
	# A process started in the background keeps the sandbox busy between calls.
	pid=$(space-exec "$ID" -- sh -c 'yes >/dev/null 2>&1 </dev/null & echo $!')
	sleep 6
	i=$(idle); echo "# idle 6 s into yes(1): $i" >&3
	[ "$i" -le 3 ]
	space-exec "$ID" -- kill "$pid"
	i=$(idle_reaches 4); echo "# idle after it ended: $i" >&3
	[ "$i" -ge 4 ]
}

@test "space-ls idle_s is null when the daemon cannot answer" {
	virsh -c qemu:///system suspend "sp-$ID" >/dev/null
	run space-ls "$ID"
	virsh -c qemu:///system resume "sp-$ID" >/dev/null
	assert_success
	jout -e '.idle_s == null and .vm == "paused"'
}
