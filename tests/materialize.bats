#!/usr/bin/env bats
# Coalescing: a template known only by its source (here behind a local HTTP
# server that counts what it serves) is fetched and built once by a burst of
# concurrent creates, and all of them run.
load helper

setup_file() {
	export COUNTS=$BATS_FILE_TMPDIR/counts.json
	mkfifo "$BATS_FILE_TMPDIR/stdin"
	# The server lives until its stdin (the fifo, held open below) closes.
	"$top/tests/counting-http-server" "$SPACE_GUEST" "$COUNTS" \
		<"$BATS_FILE_TMPDIR/stdin" >"$BATS_FILE_TMPDIR/port" &
	exec 9>"$BATS_FILE_TMPDIR/stdin"
	for _ in $(seq 50); do [ -s "$BATS_FILE_TMPDIR/port" ] && break; sleep 0.1; done
	export PORT=$(cat "$BATS_FILE_TMPDIR/port")
	export NAME=lazy-$$
}

teardown_file() {
	exec 9>&-
	remove_listed "$BATS_FILE_TMPDIR/ids"
	space-template rm --force "$NAME" >/dev/null 2>&1 || true
}

@test "space-template add records a source without building it" {
	[ -n "$PORT" ]
	run space-template add --name "$NAME" "http://127.0.0.1:$PORT/rootfs.tar.zst"
	assert_success
	jout -e --arg p "$PORT" '.kernel == "http://127.0.0.1:\($p)/vmlinuz"'
	[ "$(space-template ls | jq -s --arg n "$NAME" 'map(select(.template == $n)) | length')" -eq 0 ]
	[ ! -e "$COUNTS" ]
}

@test "8 concurrent creates fetch and build the template once, and all run" {
	for i in $(seq 8); do
		space-create --template "$NAME" > "$BATS_FILE_TMPDIR/c$i" &
	done
	wait
	cat "$BATS_FILE_TMPDIR"/c? | jq -r 'select(.ok) | .id' >> "$BATS_FILE_TMPDIR/ids"
	printf '# served: %s\n' "$(cat "$COUNTS")" >&3
	[ "$(cat "$BATS_FILE_TMPDIR"/c? | jq -s 'map(select(.ok and .state == "running")) | length')" -eq 8 ]
	jq -e '.["/rootfs.tar.zst"] == 1 and .["/vmlinuz"] == 1 and .["/initrd.img"] == 1' "$COUNTS"
	[ "$(space-template ls | jq -s --arg n "$NAME" 'map(select(.template == $n)) | length')" -eq 1 ]
	while read -r id; do
		run space-exec "$id" -- true
		assert_success
	done < "$BATS_FILE_TMPDIR/ids"
}

@test "a source that is not there fails clearly and builds nothing" {
	space-template add --name "$NAME-missing" "http://127.0.0.1:$PORT/no-such.tar" >/dev/null
	run space-create --template "$NAME-missing"
	[ "$status" -eq 1 ]
	jout -e '.error == "fetch" and (.msg | contains("404"))'
	[ "$(space-template ls | jq -s --arg n "$NAME-missing" 'map(select(.template == $n)) | length')" -eq 0 ]
	[ -z "$(ls "$SPACE_ROOT/tmp" | grep fetch-)" ]
	run space-template add --name bad /no/such/path.tar
	[ "$status" -eq 100 ]
}
