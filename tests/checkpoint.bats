#!/usr/bin/env bats
# The template's booted checkpoint: warmed once (concurrent warm-ups coalesce),
# then creates restore from it instead of booting.
load helper

setup_file() {
	import_minimal
}

teardown_file() {
	remove_listed "$BATS_FILE_TMPDIR/ids"
	space-template rm --force layoutold >/dev/null 2>&1 || true
	space-template rm --force layoutpre >/dev/null 2>&1 || true
	space-template rm --force cmdold >/dev/null 2>&1 || true
}

# A sandbox of template NAME (no pool), made by PATH (cold or checkpoint);
# CHECK runs on it (its id as $1), then it goes.
create_checked() {
	local id
	run space-create --template "$1" --no-pool
	assert_success
	id=$(jout -r .id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	jout -e --arg p "$2" '.path == $p'
	"$3" "$id"
	space-rm "$id" >/dev/null
}

# What becomes of a stale template checkpoint: template NAME is warmed under
# the environment assignment ENV, and that checkpoint is not warm; a create
# boots cold past it; warm makes it again (then reuses it), and the next
# create restores from it.  CHECK runs on each sandbox made (its id as $1).
stale_checkpoint_replaced() {
	local name=$1 env=$2 check=$3
	space-template import --name "$name" "$SPACE_GUEST/rootfs.tar.zst" >/dev/null
	run env "$env" space-template warm "$name"
	assert_success
	jout -e '.reused == false'
	space-template ls | jq -s -e --arg n "$name" 'any(.[]; .template == $n and .warm == false)'
	create_checked "$name" cold "$check"
	run space-template warm "$name"
	assert_success
	jout -e '.reused == false'
	space-template ls | jq -s -e --arg n "$name" 'any(.[]; .template == $n and .warm == true)'
	[ "$(find "$SPACE_ROOT/templates" -maxdepth 1 -name '*.stale-*' | wc -l)" -eq 0 ]
	run space-template warm "$name"
	jout -e '.reused == true'
	create_checked "$name" checkpoint "$check"
	space-template rm --force "$name" >/dev/null
}

@test "concurrent warm-ups of one template boot it once" {
	for i in 1 2 3; do
		space-template warm minimal > "$BATS_FILE_TMPDIR/warm$i" &
	done
	wait
	cat "$BATS_FILE_TMPDIR"/warm? | sed 's/^/# /' >&3
	[ "$(cat "$BATS_FILE_TMPDIR"/warm? | jq -s 'map(select(.ok)) | length')" -eq 3 ]
	# One did the work, or an earlier run did (then all three reused it).
	[ "$(cat "$BATS_FILE_TMPDIR"/warm? | jq -s 'map(select(.reused | not)) | length')" -le 1 ]
	space-template ls | jq -e 'select(.template == "minimal") | .warm' | grep -q true
	run space-template warm minimal
	assert_success
	jout -e '.reused == true'
}

@test "a create from the checkpoint restores a running guest, faster than a boot" {
	run space-create --template minimal
	assert_success
	jout -r .id >> "$BATS_FILE_TMPDIR/ids"
	jout -e '.path == "checkpoint" and .state == "running"'
	ms=$(jout -r .create_ms)
	echo "# create from checkpoint: $ms ms" >&3
	id=$(jout -r .id)
	run space-exec "$id" -- cat /etc/os-release
	assert_success
	assert_output --partial "SPACE minimal guest"
	[ ! -e "$SPACE_ROOT/sandboxes/$id/mem.sav" ]
	space-ls "$id" | jq -e '.disk_exclusive_bytes < 2097152'
	# The channel's controller has ports for ours and a vector per queue:
	# the guest's interrupts name each queue, not one for all of them.
	virsh -c qemu:///system dumpxml "sp-$id" |
	    grep -q "<controller type='virtio-serial' index='0' ports='10' vectors='23'>"
	run space-exec "$id" -- cat /proc/interrupts
	assert_output --partial virtio0-input
	refute_output --partial virtio0-virtqueues
}

@test "a checkpoint saved with the old device layout (one vector for all queues) restores into it" {
	# SPACE_VM_LAYOUT=shared boots as the code before 2026-12 did: a
	# checkpoint of that time.  A restore reads the layout from the save
	# image, so such checkpoints (and suspended sandboxes, snapshots) keep
	# working.
	space-template import --name layoutold "$SPACE_GUEST/rootfs.tar.zst" >/dev/null
	SPACE_VM_LAYOUT=shared space-template warm layoutold >/dev/null
	run space-create --template layoutold --no-pool
	assert_success
	id=$(jout -r .id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	jout -e '.path == "checkpoint"'
	virsh -c qemu:///system dumpxml "sp-$id" |
	    grep -q "<controller type='virtio-serial' index='0'>"
	! virsh -c qemu:///system dumpxml "sp-$id" | grep -q "vectors=" || false
	run space-exec "$id" -- sh -c 'echo "$(hostname) answers"'
	assert_output "$id answers"
	space-rm "$id" >/dev/null
	space-template rm --force layoutold >/dev/null
	# The setting is for boots: a restore takes its image's layout.
	run env SPACE_VM_LAYOUT=shared space-create --template minimal --no-pool
	assert_success
	id=$(jout -r .id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	jout -e '.path == "checkpoint"'
	virsh -c qemu:///system dumpxml "sp-$id" | grep -q "vectors='23'"
}

# Today's ports, egress among them, and a daemon that answers.
has_egress_port() {
	virsh -c qemu:///system dumpxml "sp-$1" | grep -q "name='space.egress'"
	run space-exec "$1" -- sh -c 'echo "$(hostname) answers"'
	assert_output "$1 answers"
}

@test "a checkpoint made before the egress port is stale: creates boot cold past it, warm replaces it" {
	# SPACE_VM_LAYOUT=pre-egress boots as the code before 2026-11-30 did:
	# no egress port.  QEMU restores a VM only into the ports it was saved
	# with, and a template's sandboxes need today's, so such a checkpoint
	# is not used (libvirt would refuse it: "channel count 9 does not
	# match source 8"), and warm makes it again.
	stale_checkpoint_replaced layoutpre SPACE_VM_LAYOUT=pre-egress has_egress_port
}

# Today's balloon, and a daemon that answers.
has_balloon() {
	virsh -c qemu:///system dumpxml "sp-$1" |
	    grep -q "<memballoon model='virtio' freePageReporting='on'>"
	run space-exec "$1" -- sh -c 'echo "$(hostname) answers"'
	assert_output "$1 answers"
}

@test "a checkpoint made before the balloon is stale: creates boot cold past it, warm replaces it" {
	# SPACE_VM_LAYOUT=pre-balloon boots as the code before 2026-12-06
	# did: no balloon, so copies of its checkpoint would never give the
	# host back what they free (and libvirt restores a VM only into the
	# devices it was saved with).
	stale_checkpoint_replaced layoutpb SPACE_VM_LAYOUT=pre-balloon has_balloon
}

@test "a sandbox booted before the balloon snapshots and rolls back into its layout" {
	run env SPACE_VM_LAYOUT=pre-balloon space-create --template minimal --cold
	assert_success
	id=$(jout -r .id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	virsh -c qemu:///system dumpxml "sp-$id" | grep -q "<memballoon model='none'/>"
	space-exec "$id" -- sh -c 'echo before > /root/mark'
	snap=$(space-snap --full "$id" | jq -r .snap)
	space-exec "$id" -- sh -c 'echo after > /root/mark'
	run space-rollback "$id" "$snap"
	assert_success
	run space-exec "$id" -- cat /root/mark
	assert_output before
	virsh -c qemu:///system dumpxml "sp-$id" | grep -q "<memballoon model='none'/>"
	# It takes a trim, and says the host gets nothing of it.
	run space-trim "$id"
	assert_success
	jout -e '.balloon == false and .taken_mib == 0'
}

# Booted with this build's command line, not the old one.
has_build_cmdline() {
	run space-exec "$1" -- cat /proc/cmdline
	assert_success
	refute_output --partial "space.test=old"
	assert_output --partial "root=/dev/vda"
}

@test "a checkpoint booted with another kernel command line is stale: creates boot cold past it, warm replaces it" {
	# The guest's command line changes with a build (SP_VIRT_CMDLINE_TCG)
	# or with SPACE_VM_CMDLINE; a checkpoint keeps the one it was booted
	# with, so one of another is not used, and warm makes it again.
	stale_checkpoint_replaced cmdold \
	    "SPACE_VM_CMDLINE=console=ttyS0 root=/dev/vda panic=-1 quiet space.test=old" \
	    has_build_cmdline
}

@test "a sandbox booted before the egress port forks: the copies restore into its ports" {
	run env SPACE_VM_LAYOUT=pre-egress space-create --template minimal --cold
	assert_success
	id=$(jout -r .id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	! virsh -c qemu:///system dumpxml "sp-$id" | grep -q "space.egress" || false
	space-exec "$id" -- sh -c 'echo before > /root/mark'
	run space-fork "$id"
	assert_success
	fid=$(jout -r 'select(.ok) | .id')
	echo "$fid" >> "$BATS_FILE_TMPDIR/ids"
	[ -n "$fid" ]
	! virsh -c qemu:///system dumpxml "sp-$fid" | grep -q "space.egress" || false
	[ "$(virsh -c qemu:///system dumpxml "sp-$fid" | grep -c "name='space\.[0-9]*'")" -eq 8 ]
	run space-exec "$fid" -- cat /root/mark
	assert_output before
	space-rm "$id" "$fid" >/dev/null
}

@test "checkpoint clones are independent: a file in one is not in the other" {
	run space-create --template minimal -n 2
	assert_success
	mapfile -t ids < <(jout -r .id)
	printf '%s\n' "${ids[@]}" >> "$BATS_FILE_TMPDIR/ids"
	[ ${#ids[@]} -eq 2 ]
	space-exec "${ids[0]}" -- sh -c 'echo mine > /root/only-here; sync'
	run space-exec "${ids[1]}" -- cat /root/only-here
	[ "$status" -ne 0 ]
	run space-exec "${ids[0]}" -- cat /root/only-here
	assert_output mine
}

# The checkpoint is saved after a sync in the guest: a copy restored from it
# has no journal to commit, nor anything else of the boot's to write.
no_disk_writes() {
	local before after
	before=$(space-exec "$1" -- cat /sys/block/vda/stat)
	sleep 6	# past ext4's 5 s commit interval
	after=$(space-exec "$1" -- cat /sys/block/vda/stat)
	[ "$(awk '{ print $5 }' <<<"$before")" -gt 0 ]	# the sync's
	[ "$(awk '{ print $5 }' <<<"$after")" = "$(awk '{ print $5 }' <<<"$before")" ]
}

@test "a copy of the checkpoint writes nothing to its disk in its first seconds" {
	create_checked minimal checkpoint no_disk_writes
}

@test "--cold boots from the disk even when the template is warm" {
	run space-create --template minimal --cold
	assert_success
	jout -r .id >> "$BATS_FILE_TMPDIR/ids"
	jout -e '.path == "cold"'
	echo "# cold create: $(jout -r .create_ms) ms" >&3
	# Under TCG the guest's kernel runs without what guards nothing there
	# (SP_VIRT_CMDLINE_TCG): no Spectre mitigations, Landlock the only LSM,
	# no memory controller (not in the kernel build-image builds; a
	# packaged kernel's is off: /proc/cgroups memory ... enabled 0), no
	# proactive compaction.
	id=$(jout -r .id)
	[ "$(jout -r .virt)" = qemu ] || skip "the settings are TCG's; this is $(jout -r .virt)"
	run space-exec "$id" -- sh -c 'cat /proc/cmdline;
	    cat /sys/devices/system/cpu/vulnerabilities/spectre_v2;
	    mount -t securityfs none /sys/kernel/security 2>/dev/null;
	    echo "lsm: $(cat /sys/kernel/security/lsm)";
	    echo "proactive compaction: $(cat /proc/sys/vm/compaction_proactiveness)";
	    echo "memcg: $(grep ^memory /proc/cgroups)"'
	assert_success
	assert_output --partial "mitigations=off init_on_alloc=0"
	assert_output --partial "hardened_usercopy=off randomize_kstack_offset=off"
	assert_output --partial "proactive compaction: 0"
	assert_output --regexp "memcg: (memory[[:space:]]+[0-9]+[[:space:]]+[0-9]+[[:space:]]+0)?$"
	assert_output --partial "Vulnerable"
	assert_output --regexp "lsm: [a-z,]*landlock"
	refute_output --partial apparmor
	refute_output --partial yama
}

@test "a create asking other memory than the checkpoint's boots cold" {
	run space-create --template minimal --memory 320
	assert_success
	jout -r .id >> "$BATS_FILE_TMPDIR/ids"
	jout -e '.path == "cold"'
	id=$(jout -r .id)
	space-ls "$id" | jq -e '.memory_mib == 320'
}

@test "each checkpoint clone gets its own identity and random stream" {
	run space-create --template minimal -n 2 --label team=infra --env PATH=/bin:/sbin --env ROLE=worker
	assert_success
	mapfile -t ids < <(jout -r .id)
	printf '%s\n' "${ids[@]}" >> "$BATS_FILE_TMPDIR/ids"
	jout -se 'map(.path) == ["checkpoint", "checkpoint"]'
	run space-exec "${ids[0]}" -- sh -c 'echo "$ROLE $PATH $HOME"'
	assert_output "worker /bin:/sbin /root"
	for id in "${ids[@]}"; do
		run space-exec "$id" -- hostname
		assert_output "$id"
		run space-exec "$id" -- cat /run/space/identity.json
		echo "$output" | jq -e --arg id "$id" '.id == $id and .labels.team == "infra"'
	done
	# Both woke from one memory image: without the fresh seed their
	# generators would be in the same state and give the same bytes.
	r0=$(space-exec "${ids[0]}" -- sh -c 'head -c 32 /dev/urandom | od -An -tx1')
	r1=$(space-exec "${ids[1]}" -- sh -c 'head -c 32 /dev/urandom | od -An -tx1')
	[ -n "$r0" ] && [ "$r0" != "$r1" ]
}
