#!/usr/bin/env bats
# Volumes (space-volume): disks apart from sandboxes, mounted in them,
# read-write in one or read-only in many, kept through pause, snapshots,
# rollback, stop and start, a crash, suspend and restore, and their
# sandboxes' removal.  Real VMs, real btrfs; a move to another node is in
# cluster.bats.
load helper

setup_file() {
	import_minimal
	: > "$BATS_FILE_TMPDIR/ids"
}

teardown_file() {
	suite_sandboxes_removed
	space-volume ls | jq -r '.volume' | while read -r v; do
		space-volume rm "$v" >/dev/null 2>&1 || true
	done
	space-volume ls --tenant vt | jq -r '.volume' | while read -r v; do
		space-volume rm --tenant vt "$v" >/dev/null 2>&1 || true
	done
}

# The mounts of volume $1 as "sandbox:path:ro" lines, sorted.
mounts_of() {
	space-volume ls "$1" | jq -r '.mounts[] | "\(.sandbox):\(.path):\(.ro)"' |
	    sort
}

@test "create, ls, snapshots and rm of a volume; bad input loses nothing" {
	run space-volume create v-basic --size 64M
	assert_success
	jout -e '.ok and .volume == "v-basic" and .bytes == 67108864 and
	    .mounts == [] and .snaps == [] and .tenant == null'
	vid=$(jout -r .id)
	[ -f "$SPACE_ROOT/volumes/$vid/disk.raw" ]
	# An ext4 filesystem the size asked, root's alone.
	run blkid -o value -s TYPE "$SPACE_ROOT/volumes/$vid/disk.raw"
	assert_output ext4
	[ "$(stat -c %a "$SPACE_ROOT/volumes/$vid/disk.raw")" = 600 ]
	space-volume ls v-basic | jq -e --arg id "$vid" '.id == $id'
	space-volume ls "$vid" | jq -e '.volume == "v-basic"'
	run space-volume create v-basic
	assert_failure 1
	jout -e '.error == "exists"'
	# Another tenant has names of its own.
	space-volume create v-basic --tenant vt --size 16M | jq -e '.tenant == "vt"'
	space-volume ls --tenant vt | jq -s -e 'length == 1 and .[0].tenant == "vt"'
	# Two tenants' volume of one name is ambiguous without a tenant.
	run space-volume ls v-basic
	assert_failure 100
	jout -e '.error == "bad-input"'
	# Snapshots: read-only subvolumes, listed with the volume.
	space-volume snap v-basic s1 | jq -e '.ok and .snap == "s1" and .consistent'
	run space-volume snap v-basic s1
	assert_failure 1
	jout -e '.error == "exists"'
	[ "$(btrfs property get -ts "$SPACE_ROOT/volumes/$vid@s1" ro)" = ro=true ]
	space-volume ls "$vid" | jq -e '.snaps | map(.snap) == ["s1"]'
	# A writable copy of a snapshot is a volume of its own.
	space-volume create v-copy --from v-basic@s1 | jq -e '.origin == "v-basic@s1" and .bytes == 67108864'
	run space-volume create v-none --from v-basic@nope
	assert_failure 1
	jout -e '.error == "not-found"'
	space-volume rm v-basic@s1 | jq -e '.removed'
	[ ! -e "$SPACE_ROOT/volumes/$vid@s1" ]
	space-volume rm v-basic v-copy | jq -s -e 'all(.removed)'
	[ ! -e "$SPACE_ROOT/volumes/$vid" ]
	space-volume rm --tenant vt v-basic | jq -e '.removed'
	# Bad input: usage or bad-input, and nothing made.
	for a in "create" "create BAD_NAME" "create aaaaaaaaaaaa" "create x --size 1K" \
	    "create x --size 12.5M" "create x --size 5T" "create x --size -1" \
	    "snap x ../y" "rm" "attach a b" "attach a b relative --ro" \
	    "detach a" "create x --ro" "ls --size 1G" "nosuch" \
	    "create x --from y@z --size 1G" "create x --tenant ../t"; do
		run space-volume $a
		[ "$status" = 100 ] || [ "$status" = 1 ] || {
			echo "space-volume $a: $status"; false; }
	done
	space-volume ls | jq -s -e 'length == 0'
	run space-volume rm no-such
	assert_failure 1
	jout -e '.error == "not-found"'
}

@test "a volume mounts read-write in one sandbox: data is there after pause, snapshot, rollback, stop and start" {
	a=$(own)
	space-volume create v-rw --size 64M >/dev/null
	run space-volume attach "$a" v-rw /data
	assert_success
	jout -e '.ok and .changed and .path == "/data" and .ro == false'
	# Again as it is: nothing changes; elsewhere in it: exists.
	space-volume attach "$a" v-rw /data | jq -e '.changed == false'
	run space-volume attach "$a" v-rw /other
	assert_failure 1
	jout -e '.error == "exists"'
	[ "$(mounts_of v-rw)" = "$a:/data:false" ]
	# Its VM has one free PCIe port: a second volume is full, and its
	# row is as it was.
	space-volume create v-two --size 16M >/dev/null
	run space-volume attach "$a" v-two /two
	assert_failure 1
	jout -e '.error == "full"'
	[ -z "$(mounts_of v-two)" ]
	space-volume rm v-two >/dev/null
	space-exec "$a" -- sh -c 'grep " /data ext4 rw" /proc/mounts &&
	    echo one > /data/f && sync'
	space-pause "$a" >/dev/null
	space-resume "$a" >/dev/null
	[ "$(space-exec "$a" -- cat /data/f)" = one ]
	# A full checkpoint holds the volume as it is at that instant.
	snap=$(space-snap --full "$a" | jq -r .snap)
	[ -f "$SPACE_ROOT/snapshots/$a/$snap/volumes.json" ]
	space-exec "$a" -- sh -c 'echo two > /data/f && echo x > /data/g && sync'
	space-rollback "$a" "$snap" | jq -e '.ok'
	[ "$(space-exec "$a" -- cat /data/f)" = one ]
	run space-exec "$a" -- ls /data/g
	assert_failure
	# The volume's own snapshot freezes its filesystem in the guest: it
	# is clean, no journal to replay.
	space-exec "$a" -- sh -c 'echo three > /data/f'
	space-volume snap v-rw clean | jq -e '.consistent'
	vid=$(space-volume ls v-rw | jq -r .id)
	run e2fsck -n "$SPACE_ROOT/volumes/$vid@clean/disk.raw"
	assert_success
	# A cold boot mounts it again where the row says.
	space-stop "$a" >/dev/null
	space-start "$a" | jq -e '.state == "running"'
	[ "$(space-exec "$a" -- cat /data/f)" = three ]
	# Nobody else mounts it while it is mounted read-write.
	b=$(own)
	run space-volume attach "$b" v-rw /data --ro
	assert_failure 1
	jout -e '.error == "in-use"'
	run space-volume rm v-rw
	assert_failure 1
	jout -e '.error == "in-use"'
	# Detach: busy while a process holds a file there, and nothing changes.
	pid=$(space-exec -d "$a" -- sh -c 'cd /data && exec sleep 600' | jq -r .pid)
	sleep 1
	run space-volume detach "$a" v-rw
	assert_failure 111
	jout -e '.error == "busy"'
	[ "$(mounts_of v-rw)" = "$a:/data:false" ]
	space-kill "$a" "$pid" >/dev/null
	sleep 1
	space-volume detach "$a" v-rw | jq -e '.changed'
	space-volume detach "$a" v-rw | jq -e '.changed == false'
	[ -z "$(mounts_of v-rw)" ]
	# Each attach and detach is an event of the sandbox, busy included.
	space-events --id "$a" | jq -s -e '[.[] | select(.action | startswith("volume.")) |
	    "\(.action):\(.ok):\(.error // "")"] | index(["volume.attach:true:",
	    "volume.attach:true:", "volume.attach:false:exists"]) != null and
	    (map(select(. == "volume.detach:false:busy")) | length) == 1'
	run space-exec "$a" -- grep /data /proc/mounts
	assert_failure
	space-exec "$a" -- sh -c 'ls /sys/block | grep -c vd' | grep -qx 1
}

@test "read-only in many sandboxes: data written by one is read by others, who cannot write it; the jail's ACL names each VM" {
	a=$(own)
	b=$(own)
	c=$(own)
	space-volume create v-ro --size 64M >/dev/null
	vid=$(space-volume ls v-ro | jq -r .id)
	space-volume attach "$a" v-ro /w >/dev/null
	head -c 1048576 /dev/urandom > "$BATS_TEST_TMPDIR/blob"
	space-cp "$BATS_TEST_TMPDIR/blob" "$a:/w/blob" >/dev/null
	space-exec "$a" -- sync
	space-volume detach "$a" v-ro >/dev/null
	space-volume attach "$b" v-ro /r --ro | jq -e '.ro'
	space-volume attach "$c" v-ro /data/ro --ro | jq -e '.ro'
	space-cp "$b:/r/blob" "$BATS_TEST_TMPDIR/b" >/dev/null
	space-cp "$c:/data/ro/blob" "$BATS_TEST_TMPDIR/c" >/dev/null
	cmp "$BATS_TEST_TMPDIR/blob" "$BATS_TEST_TMPDIR/b"
	cmp "$BATS_TEST_TMPDIR/blob" "$BATS_TEST_TMPDIR/c"
	run space-exec "$b" -- touch /r/x
	assert_failure
	assert_output --partial "Read-only"
	# Read-write waits for the readers to go.
	run space-volume attach "$a" v-ro /w
	assert_failure 1
	jout -e '.error == "in-use"'
	# The image is root's 0600; with the jail on, its ACL lets in the uid
	# of each VM that mounts it (read), none other: the owner, two users,
	# the group, the mask and others, 8 bytes each after a 4-byte header.
	if [ "${SPACE_JAIL:-on}" = on ]; then
		n=$(python3 -c 'import os, sys
print(len(os.getxattr(sys.argv[1], "system.posix_acl_access")))' \
		    "$SPACE_ROOT/volumes/$vid/disk.raw")
		[ "$n" = $((4 + 6 * 8)) ]
		# The group bits are the mask: read.
		[ "$(stat -c %a "$SPACE_ROOT/volumes/$vid/disk.raw")" = 640 ]
	fi
	# A full checkpoint of a reader, and a fork of it, share it read-only.
	snap=$(space-snap --full "$b" | jq -r .snap)
	fork=$(space-fork "$b" "$snap" | jq -r .id)
	echo "$fork" >> "$BATS_FILE_TMPDIR/ids"
	space-cp "$fork:/r/blob" "$BATS_TEST_TMPDIR/f" >/dev/null
	cmp "$BATS_TEST_TMPDIR/blob" "$BATS_TEST_TMPDIR/f"
	[ "$(mounts_of v-ro | wc -l)" = 3 ]
	# Removal of a reader lets its mount go, and the volume stays.
	space-rm "$c" "$fork" >/dev/null
	[ "$(mounts_of v-ro)" = "$b:/r:true" ]
	space-volume detach "$b" v-ro >/dev/null
	space-volume attach "$a" v-ro /w | jq -e '.ro == false'
	cmp "$BATS_TEST_TMPDIR/blob" <(space-fs "$a" cat /w/blob)
}

@test "a fork of a checkpoint with a read-write volume is refused, and nothing is left of it" {
	a=$(own)
	space-volume create v-nofork --size 32M >/dev/null
	space-volume attach "$a" v-nofork /d >/dev/null
	snap=$(space-snap --full "$a" | jq -r .snap)
	n=$(space-ls | jq -s length)
	run space-fork "$a" "$snap"
	assert_failure
	assert_output --partial "read-write"
	[ "$(space-ls | jq -s length)" = "$n" ]
	[ "$(mounts_of v-nofork)" = "$a:/d:false" ]
}

@test "a volume survives its sandbox's crash, suspend and restore, and removal" {
	a=$(own)
	space-volume create v-life --size 64M >/dev/null
	space-volume attach "$a" v-life /data >/dev/null
	space-exec "$a" -- sh -c 'echo before > /data/f && sync'
	space-snap --full "$a" >/dev/null
	# A QEMU that dies: reconcile brings it back from its newest full
	# checkpoint, the volume with it (as it was then).
	space-exec "$a" -- sh -c 'echo after > /data/f && sync'
	pkill -9 -f "guest=sp-$a"
	for _ in $(seq 50); do
		[ "$(virsh domstate "sp-$a" 2>/dev/null)" != running ] && break
		sleep 0.1
	done
	space-reconcile --once | jq -s -e --arg id "$a" \
	    'any(.id == $id and .action == "recovered")'
	[ "$(space-exec "$a" -- cat /data/f)" = before ]
	space-exec "$a" -- sh -c 'echo suspended > /data/f && sync'
	space-suspend "$a" | jq -e '.state == "suspended"'
	# Still its: nobody else takes it meanwhile.
	[ "$(mounts_of v-life)" = "$a:/data:false" ]
	space-restore "$a" | jq -e '.state == "running"'
	[ "$(space-exec "$a" -- cat /data/f)" = suspended ]
	space-exec "$a" -- grep -q " /data ext4 rw" /proc/mounts
	space-rm "$a" >/dev/null
	[ -z "$(mounts_of v-life)" ]
	b=$(own)
	space-volume attach "$b" v-life /again --ro >/dev/null
	[ "$(space-exec "$b" -- cat /again/f)" = suspended ]
}

@test "a tenant's sandbox mounts only its tenant's volumes" {
	a=$(own --label tenant=vt)
	space-volume create v-mine --size 16M >/dev/null
	run space-volume attach "$a" v-mine /x
	assert_failure 1
	jout -e '.error == "not-found"'
	space-volume create v-mine --tenant vt --size 16M >/dev/null
	space-volume attach "$a" v-mine /x | jq -e '.ok'
	space-volume ls --tenant vt v-mine | jq -e --arg a "$a" '.mounts[0].sandbox == $a'
	[ -z "$(mounts_of v-mine)" ]
}

@test "reconcile removes a volume's subvolume that no row claims" {
	btrfs subvolume create "$SPACE_ROOT/volumes/aaaaaaaaaaaa" >/dev/null
	touch -d '2 minutes ago' "$SPACE_ROOT/volumes/aaaaaaaaaaaa"
	space-volume create v-keep --size 16M >/dev/null
	vid=$(space-volume ls v-keep | jq -r .id)
	touch -d '2 minutes ago' "$SPACE_ROOT/volumes/$vid"
	space-reconcile --once | jq -s -e 'any(.action == "volumes-removed")'
	[ ! -e "$SPACE_ROOT/volumes/aaaaaaaaaaaa" ]
	[ -d "$SPACE_ROOT/volumes/$vid" ]
}

@test "space-create --volume mounts it before the command runs; a create that cannot mount it leaves no sandbox" {
	space-volume create v-create --size 16M >/dev/null
	run space-create --template minimal --volume v-create:/vc -- sh -c 'grep -c " /vc ext4 rw" /proc/mounts; echo made > /vc/x'
	assert_success
	jout -r .id >> "$BATS_FILE_TMPDIR/ids"
	jout -e '.volume == {"volume": "v-create", "path": "/vc", "ro": false}'
	assert_line 1
	a=$(jout -r .id)
	n=$(space-ls | jq -s length)
	run space-create --template minimal --volume v-create:/vc:ro
	assert_failure 1
	jout -e '.error == "in-use"'
	run space-create --template minimal --volume no-such:/x
	assert_failure 1
	jout -e '.error == "not-found"'
	[ "$(space-ls | jq -s length)" = "$n" ]
	for v in "v-create" "v-create:rel" "v-create:/" "v-create:/a/../b" "v-create:/x:ro --volume v-create:/y"; do
		run space-create --template minimal --volume $v
		assert_failure 100
	done
	run space-create --anywhere --template minimal --volume v-create:/x
	assert_failure 100
	space-volume detach "$a" v-create >/dev/null
	run space-create --template minimal --volume v-create:/vc:ro -- cat /vc/x
	assert_success
	jout -r .id >> "$BATS_FILE_TMPDIR/ids"
	assert_line made
	[ "$(space-ls | jq -s length)" = $((n + 1)) ]
}

@test "a checkpoint's volume that another sandbox wrote since is not taken back: the rollback is refused while the VM runs" {
	a=$(own)
	b=$(own)
	space-volume create v-epoch --size 32M >/dev/null
	space-volume attach "$a" v-epoch /d >/dev/null
	space-exec "$a" -- sh -c 'echo a1 > /d/f && sync'
	snap=$(space-snap --full "$a" | jq -r .snap)
	# Its own detach and attach again keep the checkpoint good.
	space-volume detach "$a" v-epoch >/dev/null
	space-volume attach "$a" v-epoch /d >/dev/null
	space-exec "$a" -- sh -c 'echo a2 > /d/f && sync'
	space-rollback "$a" "$snap" | jq -e '.ok'
	[ "$(space-exec "$a" -- cat /d/f)" = a1 ]
	# Another writer since: refused, and the sandbox runs on untouched.
	space-volume detach "$a" v-epoch >/dev/null
	space-volume attach "$b" v-epoch /d >/dev/null
	space-exec "$b" -- sh -c 'echo b > /d/f && sync'
	space-volume detach "$b" v-epoch >/dev/null
	run space-rollback "$a" "$snap"
	assert_failure 1
	jout -e --arg b "$b" '.error == "bad-state" and (.msg | contains($b))'
	space-ls "$a" | jq -e '.state == "running"'
	space-exec "$a" -- true
	space-volume attach "$a" v-epoch /d >/dev/null
	[ "$(space-exec "$a" -- cat /d/f)" = b ]
	# Nor is it let go by a sandbox whose memory holds it mounted.
	space-pause "$a" >/dev/null
	run space-volume detach "$a" v-epoch
	assert_failure 1
	jout -e '.error == "bad-state"'
	space-resume "$a" >/dev/null
	[ "$(mounts_of v-epoch)" = "$a:/d:false" ]
}
