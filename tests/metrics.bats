#!/usr/bin/env bats
# space-metrics: a guest's CPU and disk writes show in its counters, the
# daemon's calls are counted, the node's line adds up, and the Prometheus
# file is whole and passes a strict parser (tests/prom-check).
load helper

setup_file() {
	suite_sandbox
}

teardown_file() {
	suite_sandboxes_removed
}

# One counter of one sandbox.
counter() {
	space-metrics "$1" | jq -e -r --arg k "$2" '.[$k]'
}

@test "a guest burning CPU shows it; an idle one barely" {
	busy=$(own)
	[ -n "$busy" ]
	space-exec -d "$busy" -- sh -c 'while :; do :; done' >/dev/null
	b0=$(counter "$busy" cpu_ns)
	i0=$(counter "$ID" cpu_ns)
	sleep 3
	b1=$(counter "$busy" cpu_ns)
	i1=$(counter "$ID" cpu_ns)
	echo "# 3 s: busy $(((b1 - b0) / 1000000)) ms of CPU, idle $(((i1 - i0) / 1000000)) ms" >&3
	# At least a quarter of a CPU, and three times the idle one's.
	[ $((b1 - b0)) -ge 750000000 ]
	[ $((b1 - b0)) -gt $((3 * (i1 - i0))) ]
	space-rm "$busy" >/dev/null
}

@test "a 100 MiB write shows in the bytes written and the disk the sandbox holds" {
	w0=$(counter "$ID" disk_written_bytes)
	x0=$(counter "$ID" disk_exclusive_bytes)
	space-exec "$ID" -- dd if=/dev/urandom of=/root/big bs=1M count=100 conv=fsync 2>/dev/null
	w1=$(counter "$ID" disk_written_bytes)
	x1=$(counter "$ID" disk_exclusive_bytes)
	echo "# written +$(((w1 - w0) >> 20)) MiB, held +$(((x1 - x0) >> 20)) MiB" >&3
	[ $((w1 - w0)) -ge $((100 << 20)) ]
	[ $((x1 - x0)) -ge $((100 << 20)) ]
	space-exec "$ID" -- rm /root/big
}

@test "the calls the guest's daemon served, its memory, and the line's fields" {
	c0=$(counter "$ID" calls)
	for _ in 1 2 3; do space-exec "$ID" -- true; done
	c1=$(counter "$ID" calls)
	[ $((c1 - c0)) -ge 3 ]
	space-metrics "$ID" | jq -e --arg id "$ID" '.ok and .id == $id and
	    .state == "running" and .node == "check" and
	    .memory_bytes > 0 and .memory_max_bytes == 256 * 1048576 and
	    .disk_read_bytes >= 0 and (.cpu_ns | type) == "number"'
	# A paused one keeps its counters; its daemon is not asked.
	space-pause "$ID" >/dev/null
	space-metrics "$ID" | jq -e '.state == "paused" and .cpu_ns > 0 and .calls == null'
	space-resume "$ID" >/dev/null
}

@test "with no id: every sandbox here and the node's totals, which add up" {
	run space-metrics
	assert_success
	jout -se --arg id "$ID" 'any(.[]; .id == $id)'
	n=$(space-ls | jq -s 'map(select(.node == "check")) | length')
	jout -se --argjson n "$n" 'map(select(.id)) | length == $n'
	jout -se --argjson n "$n" 'map(select(.node and (.id | not)))[0] |
	    .ok and ([.sandboxes[]] | add) == $n and .pods >= 0 and .snapshots >= 0'
	# Warm pods are the pool's, not sandboxes: not listed one by one.
	space-pool set --template minimal --size 1 >/dev/null
	space-pool fill >/dev/null
	run space-metrics
	jout -se 'map(select(.node and (.id | not)))[0].pods >= 1'
	jout -se --argjson n "$n" 'map(select(.id)) | length == $n'
	space-pool set --template minimal --size 0 >/dev/null
	space-pool fill >/dev/null
}

@test "--prom writes a file that a strict parser takes, whole, and replaces it" {
	d=$BATS_TEST_TMPDIR/textfile
	mkdir "$d"
	runners "$d"
	space-metrics --prom "$d/space.prom" >/dev/null
	run "$top/tests/prom-check" "$d/space.prom"
	assert_success
	[ "$output" -gt 5 ]
	grep -q "^space_sandbox_cpu_seconds_total{id=\"$ID\",node=\"check\"} " "$d/space.prom"
	grep -q '^space_node_sandboxes{node="check",state="running"} ' "$d/space.prom"
	grep -q '^# TYPE space_sandbox_disk_written_bytes_total counter$' "$d/space.prom"
	[ "$(stat -c %a "$d/space.prom")" = 644 ]
	# Again: replaced, and nothing else left in the directory.
	ino=$(stat -c %i "$d/space.prom")
	space-metrics --prom "$d/space.prom" >/dev/null
	"$top/tests/prom-check" "$d/space.prom"
	[ "$(stat -c %i "$d/space.prom")" != "$ino" ]
	[ "$(ls "$d")" = space.prom ]
	# A directory that is not there: an error, and no file.
	run space-metrics --prom "$d/no/such/space.prom"
	[ "$status" -ne 0 ]
	jout -se '.[-1].error == "io"'
	[ ! -e "$d/no" ]
}

@test "node_exporter's textfile collector reads the file through a link, as the unit sets it up" {
	# space-metrics.service runs it as space, writing in a directory of
	# space's; node_exporter's directory (root's) holds a link to it.
	local d=$BATS_TEST_TMPDIR/node-exporter s=$BATS_TEST_TMPDIR/metrics port pid
	mkdir -p "$d" "$s"
	runners "$s"
	space-metrics --prom "$s/space.prom" >/dev/null
	ln -s "$s/space.prom" "$d/space.prom"
	port=$(free_ports 1)
	prometheus-node-exporter --collector.disable-defaults --collector.textfile \
	    --collector.textfile.directory="$d" \
	    --web.listen-address="127.0.0.1:$port" >"$BATS_TEST_TMPDIR/ne.log" 2>&1 3>&- &
	pid=$!
	for _ in $(seq 50); do
		curl -sf "http://127.0.0.1:$port/metrics" >"$BATS_TEST_TMPDIR/m" && break
		sleep 0.1
	done
	kill "$pid"
	grep -q '^node_textfile_scrape_error 0$' "$BATS_TEST_TMPDIR/m"
	grep -q "^space_sandbox_cpu_seconds_total{id=\"$ID\",node=\"check\"} " "$BATS_TEST_TMPDIR/m"
	grep -q '^space_node_sandboxes{node="check",state="running"} ' "$BATS_TEST_TMPDIR/m"
}

@test "--storage: the bytes only snapshots hold, and the object store's" {
	id=$(own)
	space-exec "$id" -- dd if=/dev/urandom of=/root/f bs=1M count=20 conv=fsync 2>/dev/null
	space-snap "$id" >/dev/null
	before=$(space-metrics --storage | jq -s 'map(select(.node and (.id | not)))[0]')
	# Written over, the old blocks are the snapshot's alone.
	space-exec "$id" -- dd if=/dev/urandom of=/root/f bs=1M count=20 conv=fsync,notrunc 2>/dev/null
	mid=$(space-metrics --storage | jq -s 'map(select(.node and (.id | not)))[0]')
	jq -e --argjson b "$before" '.snapshot_bytes - $b.snapshot_bytes >= 20 * 1048576' <<<"$mid"
	# Suspended, it is in the object store.
	space-suspend "$id" >/dev/null
	after=$(space-metrics --storage | jq -s 'map(select(.node and (.id | not)))[0]')
	jq -e --argjson b "$mid" '.store_bytes > $b.store_bytes and
	    .store_objects > $b.store_objects and
	    .sandboxes.suspended == $b.sandboxes.suspended + 1' <<<"$after"
	echo "# snapshots: +$(jq -n --argjson a "$mid" --argjson b "$before" '($a.snapshot_bytes - $b.snapshot_bytes) / 1048576 | floor') MiB; store: +$(jq -n --argjson a "$after" --argjson b "$mid" '($a.store_bytes - $b.store_bytes) / 1048576 | floor') MiB" >&3
	# Without --storage the node's line does not walk them.
	space-metrics | jq -se 'map(select(.node and (.id | not)))[0] | has("store_bytes") | not'
	space-metrics --storage --prom "$BATS_TEST_TMPDIR/s.prom" >/dev/null
	"$top/tests/prom-check" "$BATS_TEST_TMPDIR/s.prom"
	grep -q '^space_node_store_bytes{node="check"} [1-9]' "$BATS_TEST_TMPDIR/s.prom"
	space-rm "$id" >/dev/null
}

@test "ids that are not sandboxes are refused; the rest are measured" {
	run space-metrics aaaaaaaaaaaa "$ID" ../x
	[ "$status" -ne 0 ]
	jout -se --arg id "$ID" '.[0].error == "not-found" and .[1].id == $id and .[1].ok and
	    .[2].error == "bad-input"'
	run space-metrics --prom
	[ "$status" -eq 100 ]
	run space-metrics --bogus
	[ "$status" -eq 100 ]
}
