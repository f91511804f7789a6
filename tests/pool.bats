#!/usr/bin/env bats
# The warm pool: pods made ahead, claimed by creates in one DB statement,
# refilled idempotently; a pod is nobody's sandbox until claimed.
load helper

setup_file() {
	import_minimal
	space-template warm minimal >/dev/null
}

teardown_file() {
	space-pool set --template minimal --size 0 >/dev/null
	space-pool fill >/dev/null
	remove_listed "$BATS_FILE_TMPDIR/ids"
}

@test "fill makes the pods, paused and hidden from space-ls; fill again does nothing" {
	run space-pool set --template minimal --size 2
	assert_success
	run space-pool fill
	assert_success
	[ "$(jout -s 'map(select(.action == "made")) | length')" -eq 2 ]
	jout -se 'map(select(.action == "made")) | all(.state == "paused")'
	run space-pool ls
	jout -e '.pool == "minimal" and .size == 2 and .ready == 2'
	[ "$(space-ls | jq -s 'map(select(.pod)) | length')" -eq 0 ]
	[ "$(space-ls --pods | jq -s 'map(select(.pod and .vm == "paused")) | length')" -eq 2 ]
	# space-ls --state paused | space-resume must never wake a pod.
	[ "$(space-ls --state paused | jq -s 'map(select(.pod)) | length')" -eq 0 ]
	run space-pool fill
	assert_success
	[ "$(jout -s 'map(select(.action == "made")) | length')" -eq 0 ]
}

@test "a create takes a pod: running, with its own identity and labels" {
	run space-create --template minimal --label who=pool --env GREETING=hej
	assert_success
	jout -r .id >> "$BATS_FILE_TMPDIR/ids"
	jout -e '.path == "pool" and .state == "running"'
	echo "# create from the pool: $(jout -r .create_ms) ms" >&3
	id=$(jout -r .id)
	run space-exec "$id" -- hostname
	assert_output "$id"
	run space-exec "$id" -- cat /run/space/identity.json
	echo "$output" | jq -e '.labels.who == "pool"'
	space-ls "$id" | jq -e '.state == "running" and (.pod | not) and .labels.who == "pool"'
	# The sandbox's environment, for every call that brings none.
	run space-exec "$id" -- sh -c 'echo "$GREETING $PATH"'
	assert_output "hej /usr/sbin:/usr/bin:/sbin:/bin"
	run space-exec "$id" -e OTHER=1 -- sh -c 'echo "${GREETING:-unset}"'
	assert_output unset
	space-pool ls | jq -e '.ready == 1'
}

@test "a create runs a first command after --: the JSON line, then its output and status" {
	space-pool fill >/dev/null
	# From a pod: stdout, stderr, stdin and the exit status are the
	# command's, as with space-exec; the JSON line comes first.  No
	# libvirt: the command runs on the claim's channel.
	echo from-stdin | LD_DEBUG=files space-create --template minimal \
	    --env GREETING=hej -- sh -c 'hostname; cat; echo "$GREETING"; echo oops >&2; exit 7' \
	    >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" && st=0 || st=$?
	[ "$st" -eq 7 ]
	head -1 "$BATS_TEST_TMPDIR/out" | jq -r .id >> "$BATS_FILE_TMPDIR/ids"
	head -1 "$BATS_TEST_TMPDIR/out" | jq -e '.ok and .path == "pool"'
	id=$(head -1 "$BATS_TEST_TMPDIR/out" | jq -r .id)
	[ "$(sed -n 2,4p "$BATS_TEST_TMPDIR/out")" = "$(printf '%s\nfrom-stdin\nhej' "$id")" ]
	[ "$(wc -l < "$BATS_TEST_TMPDIR/out")" -eq 4 ]
	grep -qx oops "$BATS_TEST_TMPDIR/err"
	! grep -q 'libvirt\.so' "$BATS_TEST_TMPDIR/err" || false
	space-ls "$id" | jq -e '.state == "running"'
	# A command that cannot start: 127, as a shell says; the sandbox stays.
	run -127 space-create --template minimal -- /no/such/program
	id=$(echo "${lines[0]}" | jq -r .id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	echo "${lines[0]}" | jq -e '.ok and .path == "pool"'
	space-ls "$id" | jq -e '.state == "running"'
	# Without a pod the command runs all the same (a channel of its own).
	run space-create --template minimal --no-pool -- sh -c 'echo "$(hostname) ran"'
	assert_success
	echo "${lines[0]}" | jq -r .id >> "$BATS_FILE_TMPDIR/ids"
	echo "${lines[0]}" | jq -e '.ok and .path == "checkpoint"'
	[ "${lines[1]}" = "$(echo "${lines[0]}" | jq -r .id) ran" ]
	# One sandbox only: a command for each of -n N is refused.
	run space-create --template minimal -n 2 -- true
	[ "$status" -eq 100 ]
}

@test "a claim wakes its pod through QEMU's own monitor, without libvirt; an older pod through libvirt" {
	space-pool fill >/dev/null
	space-pool ls | jq -e '.ready == 2'
	# Which shared objects the claim loads: libvirt is not one of them.
	LD_DEBUG=files space-create --template minimal \
	    >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/ld"
	id=$(jq -r .id "$BATS_TEST_TMPDIR/out")
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	jq -e '.ok and .path == "pool" and .virt == "qemu"' "$BATS_TEST_TMPDIR/out"
	! grep -q 'libvirt\.so' "$BATS_TEST_TMPDIR/ld" || false
	run virsh -c qemu:///system domstate --reason "sp-$id"
	assert_output --partial "running (unpaused)"
	run space-exec "$id" -- hostname
	assert_output "$id"
	# A pod without that monitor (as one filled by an older version): the
	# claim resumes it through libvirt instead.
	pod=$(space-ls --pods | jq -r 'select(.pod) | .id')
	[ -S "$SPACE_RUN/$pod/qmp.sock" ]
	rm "$SPACE_RUN/$pod/qmp.sock"
	LD_DEBUG=files space-create --template minimal \
	    >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/ld"
	jq -r .id "$BATS_TEST_TMPDIR/out" >> "$BATS_FILE_TMPDIR/ids"
	jq -e --arg id "$pod" '.ok and .path == "pool" and .id == $id and
		.virt == "qemu"' "$BATS_TEST_TMPDIR/out"
	# Root acting itself, through libvirt (SPACE_LIBVIRT_URI=qemu:///system,
	# or no space-noded on the node); else through space-noded.
	if [ -z "${SPACE_AS_SPACE_BIN:-}" ] && { [ "${SPACE_LIBVIRT_URI:-}" = qemu:///system ] ||
	    [ ! -S "$SPACE_RUN/noded.sock" ]; }; then
		grep -q 'libvirt\.so' "$BATS_TEST_TMPDIR/ld"
	fi
	run virsh -c qemu:///system domstate --reason "sp-$pod"
	assert_output --partial "running (unpaused)"
	run space-exec "$pod" -- hostname
	assert_output "$pod"
}

# Waits (bounded) for a claim's boost mark; prints the sandbox's id.
boosted_id() {
	local m
	for _ in $(seq 100); do
		m=$(ls "$SPACE_RUN"/pods/*.boost 2>/dev/null | head -n 1)
		[ -n "$m" ] && { basename "$m" .boost; return 0; }
		sleep 0.05
	done
	return 1
}

# A create with a short first command: its VM at ten times the weight base
# while the command runs, at base after; the sandbox's id in $id.
boosted_until_done() {
	space-create --template minimal -- sleep 0.6 >"$BATS_TEST_TMPDIR/a" &
	id=$(boosted_id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	[ "$(cat "$(vm_weight_file "$id")")" -eq $(($1 * 10)) ]
	wait
	[ "$(cat "$(vm_weight_file "$id")")" -eq "$1" ]
}

@test "a claim runs its VM at ten times the weight until its first command ends, a second at most; reconcile puts back a killed one's" {
	space-pool set --template minimal --size 2 >/dev/null
	space-pool fill >/dev/null
	pod=$(space-ls --pods | jq -r 'select(.pod) | .id' | head -n 1)
	base=$(cat "$(vm_weight_file "$pod")")
	[ "$base" -gt 0 ]
	# Each pod records what its claim would ask QEMU (KVM or not, the
	# weight file) and that its daemon takes a first command with the
	# hello; the claim takes the record away.
	jq -e --arg f "$(vm_weight_file "$pod")" \
	    '.virt == "qemu" and .weight_file == $f and .after_identity' \
	    "$SPACE_RUN/pods/$pod.json"
	# Both the record and the weight file are space's, whoever filled
	# the pool: a claim run as space reads one and writes the other.
	[ "$(stat -c %U "$SPACE_RUN/pods" "$SPACE_RUN/pods/$pod.json" \
	    "$(vm_weight_file "$pod")" | sort -u)" = space ]
	# Until the first command ends.
	boosted_until_done "$base"
	[ ! -e "$SPACE_RUN/pods/$id.boost" ]
	[ ! -e "$SPACE_RUN/pods/$id.json" ]
	# A record that is not ours names no weight file under /sys/fs/cgroup:
	# the claim asks QEMU instead, and boosts all the same.
	space-pool fill >/dev/null
	for p in $(space-ls --pods | jq -r 'select(.pod) | .id'); do
		echo '{"virt":"qemu","weight_file":"/etc/passwd"}' \
		    >"$SPACE_RUN/pods/$p.json"
	done
	cp /etc/passwd "$BATS_TEST_TMPDIR/passwd"
	boosted_until_done "$base"
	cmp /etc/passwd "$BATS_TEST_TMPDIR/passwd"
	# Nor a FIFO (space's to make there): the claim does not wait on it.
	space-pool fill >/dev/null
	for p in $(space-ls --pods | jq -r 'select(.pod) | .id'); do
		rm -f "$SPACE_RUN/pods/$p.json"
		mkfifo "$SPACE_RUN/pods/$p.json"
	done
	timeout 60 space-create --template minimal >"$BATS_TEST_TMPDIR/f"
	jq -r .id "$BATS_TEST_TMPDIR/f" >> "$BATS_FILE_TMPDIR/ids"
	jq -e '.ok and .path == "pool"' "$BATS_TEST_TMPDIR/f"
	find "$SPACE_RUN/pods" -type p -delete
	# Nor one that names another VM's weight file (space writes the
	# records): each pod's record names the other pod's.
	space-pool fill >/dev/null
	pods=($(space-ls --pods | jq -r 'select(.pod) | .id'))
	[ "${#pods[@]}" -eq 2 ]
	for i in 0 1; do
		jq -n --arg f "$(vm_weight_file "${pods[1 - i]}")" \
		    '{virt: "qemu", weight_file: $f}' >"$SPACE_RUN/pods/${pods[i]}.json"
	done
	space-create --template minimal -- sleep 0.6 >"$BATS_TEST_TMPDIR/a" &
	id=$(boosted_id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	[ "$(cat "$(vm_weight_file "$id")")" -eq $((base * 10)) ]
	for p in "${pods[@]}"; do
		[ "$p" = "$id" ] || [ "$(cat "$(vm_weight_file "$p")")" -eq "$base" ]
	done
	wait
	# A second at most: a long first command runs at the common weight.
	space-create --template minimal -- sleep 3 >"$BATS_TEST_TMPDIR/b" &
	id=$(boosted_id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	sleep 1.5
	[ "$(cat "$(vm_weight_file "$id")")" -eq "$base" ]
	wait
	[ ! -e "$SPACE_RUN/pods/$id.boost" ]
	# Killed while boosted: the next reconcile pass puts it back.
	space-pool fill >/dev/null
	space-create --template minimal -- sleep 30 >"$BATS_TEST_TMPDIR/c" &
	pid=$!
	id=$(boosted_id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	kill -9 "$pid"
	wait "$pid" || :
	[ "$(cat "$(vm_weight_file "$id")")" -eq $((base * 10)) ]
	run space-reconcile --once
	assert_success
	jout -se --arg id "$id" 'map(select(.id == $id and .action == "unboosted" and .ok)) | length == 1'
	[ "$(cat "$(vm_weight_file "$id")")" -eq "$base" ]
	[ ! -e "$SPACE_RUN/pods/$id.boost" ]
	run space-reconcile --once
	jout -se --arg id "$id" 'map(select(.id == $id)) | length == 0'
	# A FIFO for a mark is not one: the pass says so and goes on.
	mkfifo "$SPACE_RUN/pods/$id.boost"
	run timeout 60 space-reconcile --once
	[ "$status" -ne 124 ]
	jout -se --arg id "$id" 'map(select(.id == $id and .action == "unboosted" and (.ok | not))) | length == 1'
	rm "$SPACE_RUN/pods/$id.boost"
	# Killed after it made its mark, before it wrote it: the weight was
	# never raised; the mark goes, and nothing is reported.
	: >"$SPACE_RUN/pods/$id.boost"
	run space-reconcile --once
	assert_success
	jout -se --arg id "$id" 'map(select(.id == $id)) | length == 0'
	[ ! -e "$SPACE_RUN/pods/$id.boost" ]
	[ "$(cat "$(vm_weight_file "$id")")" -eq "$base" ]
}

@test "concurrent creates each get their own pod, then fall back" {
	space-pool fill >/dev/null
	for i in 1 2 3 4; do
		space-create --template minimal > "$BATS_TEST_TMPDIR/c$i" &
	done
	wait
	cat "$BATS_TEST_TMPDIR"/c? | jq -r 'select(.ok) | .id' >> "$BATS_FILE_TMPDIR/ids"
	cat "$BATS_TEST_TMPDIR"/c? | jq -c '{path, create_ms}' | sed 's/^/# /' >&3
	[ "$(cat "$BATS_TEST_TMPDIR"/c? | jq -s 'map(select(.ok)) | length')" -eq 4 ]
	[ "$(cat "$BATS_TEST_TMPDIR"/c? | jq -s 'map(select(.path == "pool")) | length')" -eq 2 ]
	[ "$(cat "$BATS_TEST_TMPDIR"/c? | jq -r .id | sort -u | wc -l)" -eq 4 ]
}

@test "--no-pool leaves the pods alone; shrinking the pool removes extras" {
	space-pool fill >/dev/null
	run space-create --template minimal --no-pool
	assert_success
	jout -r .id >> "$BATS_FILE_TMPDIR/ids"
	jout -e '.path == "checkpoint"'
	space-pool ls | jq -e '.ready == 2'
	space-pool set --template minimal --size 1
	run space-pool fill
	[ "$(jout -s 'map(select(.action == "removed-extra")) | length')" -eq 1 ]
	space-pool ls | jq -e '.ready == 1'
}

@test "space-pool refuses bad input" {
	run space-pool set --template minimal --size -1
	[ "$status" -eq 100 ]
	run space-pool set --template no-such --size 1
	[ "$status" -eq 1 ]
	jout -e '.error == "not-found"'
	run space-pool frob
	[ "$status" -eq 100 ]
}

@test "a pool whose template was removed: fill removes its pods, fails on it until its size is 0, then drops it" {
	space-template import --name poolgone "$SPACE_GUEST/rootfs.tar.zst" >/dev/null
	space-pool set --template poolgone --size 1 >/dev/null
	run space-pool fill
	assert_success
	pod=$(jout -r 'select(.pool == "poolgone" and .action == "made") | .id')
	[ -n "$pod" ]
	run space-template rm --force poolgone
	assert_success
	run space-pool fill
	[ "$status" -eq 1 ]
	jout -se --arg id "$pod" 'any(.[]; .action == "removed-stale" and .id == $id)'
	jout -se 'any(.[]; .pool == "poolgone" and .ok == false and .error == "not-found")'
	jout -se 'any(.[]; .pool == "minimal" and .action == "full")'
	run space-ls --pods "$pod"
	assert_failure
	run space-pool set --template poolgone --size 0
	assert_success
	run space-pool fill
	assert_success
	jout -se 'any(.[]; .pool == "poolgone" and .action == "dropped")'
	run space-pool ls
	refute_output --partial poolgone
}
