#!/usr/bin/env bats
# A cluster on this one machine: three nodes (the suite's own, and two more
# SPACE_ROOTs on loop btrfs filesystems with their own SPACE_NODE and
# SPACE_RUN) share one PostgreSQL server, started here on a Unix socket in a
# temporary directory (tests/pg-server), and one object store.
load helper

setup_file() {
	export PGDIR
	PGDIR=$(mktemp -d /tmp/sp-pg-XXXXXX)
	SPACE_DB=$("$top/tests/pg-server" start "$PGDIR")
	export SPACE_DB
	export SPACE_STORE=file://$BATS_FILE_TMPDIR/store
	export SPACE_KMS=file:$BATS_FILE_TMPDIR/keys/default.key
	export NODE_A=$SPACE_NODE ROOT_A=$SPACE_ROOT RUN_A=$SPACE_RUN
	# Node A is the suite's node: its template, registered in this DB.
	import_minimal
	space-template warm minimal >/dev/null
	space-node beat >/dev/null
	for n in b c; do
		on "$n" space-init --loop-size 6G >/dev/null
	done
	: > "$BATS_FILE_TMPDIR/ids"
}

teardown_file() {
	for n in a b c; do
		on "$n" remove_listed "$BATS_FILE_TMPDIR/ids"
	done
	space-pool set --template minimal --size 0 >/dev/null 2>&1 || true
	space-pool fill >/dev/null 2>&1 || true
	for n in b c; do
		on "$n" space-reconcile --once >/dev/null 2>&1 || true
		umount "$ROOT_A-c$n" 2>/dev/null || true
		rm -rf "$ROOT_A-c$n" "$ROOT_A-c$n.img" "$RUN_A-c$n"
	done
	"$top/tests/pg-server" stop "$PGDIR" || true
	rm -rf "$PGDIR"
}

# on a|b|c COMMAND...: runs it as that node.
on() {
	local n=$1
	shift
	if [ "$n" = a ]; then
		"$@"
	else
		SPACE_ROOT=$ROOT_A-c$n SPACE_RUN=$RUN_A-c$n SPACE_NODE=$NODE_A-c$n "$@"
	fi
}

own() {
	local id
	id=$(create "$@")
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	echo "$id"
}

@test "three nodes register in one PostgreSQL, and each sees all three" {
	run on c space-node ls
	assert_success
	jout -s -e --arg a "$NODE_A" 'map(.node) == [$a, $a + "-cb", $a + "-cc"]'
	jout -s -e 'all(.[]; .alive and .lease_s > 0 and .state == "ready" and
	    .memory_mib > 0 and .vcpus >= 1 and .disk_free_bytes > 0 and
	    (.virt == "qemu" or .virt == "kvm"))'
	# Only node A has the template on its disk.
	jout -s -e '.[0].templates | any(startswith("minimal@"))'
	jout -s -e '.[1].templates == [] and .[2].templates == []'
	jout -s -e --arg r "$ROOT_A-cb" '.[1].root == $r'
}

@test "a lease lapses on the database's clock; forget takes only a node that is gone and empty" {
	SPACE_NODE_LEASE=2 on c space-node beat >/dev/null
	sleep 3
	run space-node ls "$NODE_A-cc"
	assert_success
	jout -e '.alive == false and .lease_s <= 0'
	run space-node forget "$NODE_A"
	assert_failure 1
	jout -e '.error == "bad-state"'
	assert_output --partial "is alive"
	run on b space-node forget "$NODE_A-cc"
	assert_success
	jout -e '.forgotten == true'
	run space-node ls "$NODE_A-cc"
	assert_failure 1
	jout -e '.error == "not-found"'
	# Its next beat brings it back.
	on c space-node beat >/dev/null
	space-node ls "$NODE_A-cc" | jq -e '.alive'
	run space-node forget no-such-node
	assert_failure 1
	jout -e '.error == "not-found"'
	SPACE_NODE_LEASE=1 run space-node beat
	assert_failure 100
	assert_output --partial SPACE_NODE_LEASE
}

@test "a node with sandboxes is not forgotten, even once its lease lapsed" {
	id=$(own)
	SPACE_NODE_LEASE=2 space-node beat >/dev/null
	sleep 3
	run on b space-node forget "$NODE_A"
	assert_failure 1
	jout -e '.error == "bad-state"'
	assert_output --partial "still has 1 sandboxes"
	space-node beat >/dev/null
	space-node ls "$NODE_A" | jq -e '.alive and .sandboxes == 1 and
	    .memory_used_mib == 256 and .vcpus_used == 1'
	space-rm "$id" >/dev/null
}

@test "drain: the node takes nothing new and fills no pod; what runs there keeps running" {
	id=$(own)
	run on b space-node drain "$NODE_A"
	assert_success
	jout -e '.state == "draining" and .changed == true'
	run on c space-node drain "$NODE_A"
	jout -e '.changed == false'
	run space-create --template minimal
	assert_failure 1
	jout -e '.error == "bad-state"'
	assert_output --partial "is draining"
	space-pool set --template minimal --size 1 >/dev/null
	run space-pool fill
	assert_success
	jout -e '.action == "draining"'
	space-node ls "$NODE_A" | jq -e '.state == "draining" and .pods == {}'
	space-ls "$id" | jq -e '.state == "running" and .vm == "running"'
	space-exec "$id" -- true
	run space-node ready
	jout -e '.state == "ready" and .changed == true'
	space-pool fill >/dev/null
	space-node ls "$NODE_A" | jq -e '.pods == {"minimal": 1}'
	space-rm "$id" >/dev/null
}

@test "pools are per node: another node neither counts nor claims this one's pods" {
	space-pool set --template minimal --size 1 >/dev/null
	space-pool fill >/dev/null
	space-pool ls | jq -e 'select(.pool == "minimal") | .ready == 1'
	run on b space-pool ls
	jout -e 'select(.pool == "minimal") | .ready == 0 and .size == 1'
	on b space-node ls "$NODE_A-cb" | jq -e '.pods == {}'
	# Node B has no such template: its create does not take A's pod.
	run on b space-create --template minimal
	assert_failure
	space-node ls "$NODE_A" | jq -e '.pods == {"minimal": 1}'
	# A's own create does.
	run space-create --template minimal
	assert_success
	jout -e '.path == "pool"'
	jout -r .id >> "$BATS_FILE_TMPDIR/ids"
	space-pool set --template minimal --size 0 >/dev/null
	space-pool fill >/dev/null
}

@test "suspend on node A, restore on node B through the shared database and store" {
	id=$(own)
	space-exec "$id" -- sh -c 'echo kept > /root/marker && sync'
	space-suspend "$id" | jq -e '.ok'
	on c space-ls "$id" | jq -e '.state == "suspended"'
	run on b space-restore "$id"
	assert_success
	jout -e --arg b "$NODE_A-cb" '.ok and .node == $b'
	on b space-exec "$id" -- cat /root/marker | grep -qx kept
	space-ls "$id" | jq -e --arg b "$NODE_A-cb" '.node == $b and .state == "running"'
	space-node ls "$NODE_A-cb" | jq -e '.sandboxes == 1'
	on b space-rm "$id" >/dev/null
}

@test "PostgreSQL gone: commands exit 111 and say so, nothing is lost, and all goes on once it is back" {
	id=$(own)
	dom=$(virsh -c qemu:///system list --name | grep -- "$id")
	"$top/tests/pg-server" stop "$PGDIR"
	run space-ls
	assert_failure 111
	jout -e '.error == "db"'
	assert_output --partial PostgreSQL
	run space-pause "$id"
	assert_failure 111
	run space-create --template minimal
	assert_failure 111
	run space-node ls
	assert_failure 111
	# Its VM went on running all along.
	[ "$(virsh -c qemu:///system domstate "$dom")" = running ]
	"$top/tests/pg-server" restart "$PGDIR"
	space-ls "$id" | jq -e '.state == "running" and .vm == "running"'
	run space-reconcile --once
	assert_success
	space-pause "$id" | jq -e '.ok and .changed'
	space-rm "$id" >/dev/null
}

# mid POINT COMMAND...: runs COMMAND until it stops at the crash point POINT
# (SPACE_STOP_AT), stops PostgreSQL, lets the command go on, and starts the
# server again once it has ended; status and output are the command's.
mid() {
	local point=$1 pid s
	shift
	SPACE_STOP_AT=$point "$@" >"$BATS_TEST_TMPDIR/mid.out" 2>&1 &
	pid=$!
	for _ in $(seq 1200); do
		s=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || break
		[ "$s" = T ] && break
		sleep 0.1
	done
	[ "$s" = T ] || { echo "never stopped at $point"; return 1; }
	"$top/tests/pg-server" stop "$PGDIR"
	kill -CONT "$pid"
	status=0
	wait "$pid" || status=$?
	output=$(cat "$BATS_TEST_TMPDIR/mid.out")
	"$top/tests/pg-server" restart "$PGDIR"
}

# Every row of node A in a state no command is in the middle of, and a VM
# for each that runs: what a reconcile pass must leave.
converged() {
	space-ls --pods | jq -se 'all(.[]; (.state | IN("creating", "suspending",
	    "restoring", "recovering") | not) and
	    (if .state == "running" then .vm == "running" else true end))'
}

@test "PostgreSQL stopped in the middle of a create: exit 111, and reconcile converges" {
	before=$(space-ls --pods | jq -r .id | sort)
	mid create-after-row space-create --template minimal --no-pool
	echo "$output"
	[ "$status" -eq 111 ]
	jout -e '.error == "db"'
	space-reconcile --once
	converged
	space-ls --pods | jq -r .id | sort | comm -13 <(echo "$before") - >> "$BATS_FILE_TMPDIR/ids"
	id=$(own)
	space-exec "$id" -- true
}

@test "PostgreSQL stopped in the middle of a snapshot: exit 111, the sandbox and its files are kept" {
	id=$(own)
	space-exec "$id" -- sh -c 'echo kept > /root/marker && sync'
	mid snap-after-row space-snap "$id"
	echo "$output"
	[ "$status" -eq 111 ]
	space-reconcile --once
	converged
	space-snap ls "$id" | jq -se 'all(.[]; .state == "ready")'
	space-exec "$id" -- cat /root/marker | grep -qx kept
	space-snap "$id" | jq -e '.ok'
}

@test "PostgreSQL stopped in the middle of a suspend, then of a restore: exit 111, nothing lost" {
	id=$(own)
	space-exec "$id" -- sh -c 'echo kept > /root/marker && sync'
	mid suspend-after-upload space-suspend "$id"
	echo "$output"
	[ "$status" -eq 111 ]
	space-reconcile --once
	converged
	state=$(space-ls "$id" | jq -r .state)
	echo "after the suspend: $state"
	if [ "$state" != suspended ]; then
		space-suspend "$id" | jq -e '.ok'
	fi
	mid restore-after-download space-restore "$id"
	echo "$output"
	[ "$status" -eq 111 ]
	space-reconcile --once
	converged
	state=$(space-ls "$id" | jq -r .state)
	echo "after the restore: $state"
	if [ "$state" != running ]; then
		space-restore "$id" | jq -e '.ok'
	fi
	space-exec "$id" -- cat /root/marker | grep -qx kept
}
