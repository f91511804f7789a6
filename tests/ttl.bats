#!/usr/bin/env bats
# Lifetimes: space-create --ttl/--on-expiry, space-ttl, and the reconcile
# pass that carries them out, with a fake clock (SPACE_NOW) and a real one.
load helper

setup_file() {
	suite_sandbox
}

teardown_file() {
	suite_sandboxes_removed
}

# The expiry lines of a reconcile pass (run with the clock the caller set).
expired() {
	space-reconcile --once | jq -c 'select(.action == "expired")'
}

@test "--ttl and --on-expiry: the sandbox's line and space-ls say when and what" {
	T=1900000000
	run env SPACE_NOW=$T space-create --template minimal --ttl 90m --on-expiry pause
	assert_success
	id=$(jout -r .id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	jout -e --argjson t $((T + 5400)) '.ok and .expires == $t and .on_expiry == "pause"'
	space-ls "$id" | jq -e --argjson t $((T + 5400)) '.expires == $t and .on_expiry == "pause"'
	# Without --on-expiry it is killed; without --ttl it has no lifetime.
	run env SPACE_NOW=$T space-create --template minimal --ttl 2h
	assert_success
	id=$(jout -r .id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	space-ls "$id" | jq -e --argjson t $((T + 7200)) '.expires == $t and .on_expiry == "kill"'
	space-ls "$ID" | jq -e 'has("expires") | not'
}

@test "bad lifetimes are refused, and nothing is made" {
	before=$(space-ls | wc -l)
	for bad in 0s -5m 10 1y 5m5 "" +; do
		run space-create --template minimal --ttl "$bad"
		[ "$status" -eq 100 ]
		[[ $output == *"--ttl"* ]]
	done
	run space-create --template minimal --ttl 1h --on-expiry stop
	[ "$status" -eq 100 ]
	[[ $output == *"kill, pause or suspend"* ]]
	run space-create --template minimal --on-expiry pause
	[ "$status" -eq 100 ]
	[[ $output == *"only with --ttl"* ]]
	run space-create --anywhere --template minimal --ttl forever
	[ "$status" -eq 100 ]
	[ "$(space-ls | wc -l)" -eq "$before" ]
}

@test "space-ttl sets from now, extends with +, clears with none, changes the action" {
	T=1900000000
	run env SPACE_NOW=$T space-ttl "$ID" 30m
	assert_success
	jout -e --argjson t $((T + 1800)) '.ok and .expires == $t and .on_expiry == "kill"'
	# + counts from the expiry it has.
	run env SPACE_NOW=$((T + 60)) space-ttl "$ID" +1h
	jout -e --argjson t $((T + 1800 + 3600)) '.expires == $t'
	# A plain duration counts from now again.
	run env SPACE_NOW=$((T + 60)) space-ttl --on-expiry pause "$ID" 10m
	jout -e --argjson t $((T + 660)) '.expires == $t and .on_expiry == "pause"'
	space-ls "$ID" | jq -e --argjson t $((T + 660)) '.expires == $t and .on_expiry == "pause"'
	run space-ttl "$ID" none
	assert_success
	jout -e '.expires == null'
	space-ls "$ID" | jq -e 'has("expires") | not'
	# + on a sandbox with no lifetime counts from now.
	run env SPACE_NOW=$T space-ttl "$ID" +5m
	jout -e --argjson t $((T + 300)) '.expires == $t'
	# Ids on stdin, as the other commands take them.
	run bash -c "space-ls '$ID' | space-ttl none"
	assert_success
	jout -e '.id and .expires == null'
}

@test "space-ttl refuses bad input clearly and changes nothing" {
	space-ttl "$ID" none >/dev/null
	for bad in soon 0m +0s 12 "+" "" 3x +-1h; do
		run space-ttl "$ID" "$bad"
		[ "$status" -eq 100 ]
		[[ $output == *"is not a lifetime"* ]]
	done
	run space-ttl --on-expiry explode "$ID" 1h
	[ "$status" -eq 100 ]
	run space-ttl
	[ "$status" -eq 100 ]
	run space-ttl aaaaaaaaaaaa 1h
	[ "$status" -ne 0 ]
	jout -e '.ok == false and .error == "not-found"'
	run space-ttl 'not/an/id' 1h
	[ "$status" -ne 0 ]
	jout -e '.ok == false'
	space-ls "$ID" | jq -e 'has("expires") | not'
}

@test "a fake clock: the pass pauses it at its time, not a second before, and once" {
	id=$(own)
	T=$(date +%s)
	SPACE_NOW=$T space-ttl --on-expiry pause "$id" 1h >/dev/null
	SPACE_NOW=$((T + 3599)) run expired
	assert_success
	[ -z "$(grep "$id" <<<"$output")" ]
	space-ls "$id" | jq -e '.state == "running"'
	SPACE_NOW=$((T + 3600)) run expired
	assert_success
	echo "# $output" >&3
	[ "$(grep -c "$id" <<<"$output")" -eq 1 ]
	grep "$id" <<<"$output" | jq -e '.ok and .on_expiry == "pause" and .changed'
	space-ls "$id" | jq -e '.state == "paused" and (has("expires") | not)'
	# Done: a later pass has nothing of it.
	SPACE_NOW=$((T + 9999)) run expired
	[ -z "$(grep "$id" <<<"$output")" ]
	run space-resume "$id"
	assert_success
	run space-exec "$id" -- true
	assert_success
}

@test "a real 3 s lifetime: the sandbox is there until then, and killed after" {
	run space-create --template minimal --ttl 3s
	assert_success
	id=$(jout -r .id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	expires=$(jout .expires)
	run expired
	[ -z "$(grep "$id" <<<"$output")" ] || [ "$(date +%s)" -ge "$expires" ]
	while [ "$(date +%s)" -lt "$expires" ]; do sleep 0.5; done
	run expired
	assert_success
	echo "# $output" >&3
	grep "$id" <<<"$output" | jq -e '.ok and .on_expiry == "kill" and .changed'
	run space-ls "$id"
	[ "$status" -ne 0 ]
	! virsh -c qemu:///system dominfo "sp-$id" >/dev/null 2>&1 || false
	[ ! -e "$SPACE_ROOT/sandboxes/$id" ]
}

@test "kill -9 of the pass after the action, before the expiry is cleared: the next pass finds it done" {
	id=$(own)
	T=$(date +%s)
	SPACE_NOW=$T space-ttl --on-expiry pause "$id" 1m >/dev/null
	run env SPACE_NOW=$((T + 60)) SPACE_CRASH_AT=expiry-after-act space-reconcile --once
	[ "$status" -eq 137 ]
	# Paused, the expiry still due: the clearing was what died.
	space-ls "$id" | jq -e --argjson t $((T + 60)) '.state == "paused" and .expires == $t'
	SPACE_NOW=$((T + 60)) run expired
	echo "# $output" >&3
	[ "$(grep -c "$id" <<<"$output")" -eq 1 ]
	# Done again changes nothing: the sandbox was paused once.
	grep "$id" <<<"$output" | jq -e '.ok and .changed == false'
	space-ls "$id" | jq -e '.state == "paused" and (has("expires") | not)'
	space-resume "$id" >/dev/null
}

@test "an expiry that cannot be carried out stays due; one whose sandbox cannot take it is cleared" {
	# Pausing a stopped sandbox is bad-state: nothing to do, cleared.
	id=$(own)
	space-stop "$id" >/dev/null
	T=$(date +%s)
	SPACE_NOW=$T space-ttl --on-expiry pause "$id" 1m >/dev/null
	SPACE_NOW=$((T + 60)) run expired
	grep "$id" <<<"$output" | jq -e '.ok == false and .error == "bad-state"'
	space-ls "$id" | jq -e '.state == "stopped" and (has("expires") | not)'
	# Suspending to a store that cannot be opened (a URL of no backend)
	# fails: it stays due, for a pass once the store is mended.
	space-start "$id" >/dev/null
	SPACE_NOW=$T space-ttl --on-expiry suspend "$id" 1m >/dev/null
	SPACE_NOW=$((T + 60)) SPACE_STORE=nowhere:// run expired
	echo "# $output" >&3
	grep "$id" <<<"$output" | jq -e '.ok == false'
	space-ls "$id" | jq -e --argjson t $((T + 60)) '.state == "running" and .expires == $t'
	space-ttl "$id" none >/dev/null
}

@test "--on-expiry suspend: at its time the pass suspends it to the store, and it restores with its files" {
	id=$(own --ttl 1h --on-expiry suspend)
	space-exec "$id" -- sh -c 'echo kept > /root/note; sync'
	T=$(space-ls "$id" | jq .expires)
	SPACE_NOW=$T run expired
	assert_success
	echo "# $output" >&3
	grep "$id" <<<"$output" | jq -e '.ok and .on_expiry == "suspend" and .changed'
	space-ls "$id" | jq -e '.state == "suspended" and (has("expires") | not)'
	run space-restore "$id"
	assert_success
	run space-exec "$id" -- cat /root/note
	assert_output kept
}
