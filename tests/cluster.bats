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
	# A run stopped before its teardown leaves nodes B and C mounted, with
	# the template B restored from: they start empty here, as they must.
	remove_nodes
	for n in b c; do
		on "$n" space-init --loop-size 6G >/dev/null
		# As space, the node's own space-noded, as its unit runs one.
		[ -z "${SPACE_AS_SPACE_BIN:-}" ] || on "$n" noded_up
	done
	# The template in the store: a node without it pulls it from there.
	space-template push minimal >/dev/null
	: > "$BATS_FILE_TMPDIR/ids"
}

teardown_file() {
	stop_agents
	for n in a b c; do
		on "$n" remove_listed "$BATS_FILE_TMPDIR/ids"
	done
	space-pool set --template minimal --size 0 >/dev/null 2>&1 || true
	space-pool fill >/dev/null 2>&1 || true
	for n in b c; do
		on "$n" space-reconcile --once >/dev/null 2>&1 || true
	done
	noded_down
	remove_nodes
	"$top/tests/pg-server" stop "$PGDIR" || true
	rm -rf "$PGDIR"
}

# The other nodes' loop btrfs, image and run dir.
remove_nodes() {
	local n
	for n in b c d; do
		remove_node "$ROOT_A-c$n" "$RUN_A-c$n"
	done
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

# Each node's space-reconcile --listen, which carries out what other nodes
# ask of its sandboxes the moment they ask.  Started by exec in the
# background function's subshell, so that $! is the agent itself: a kill of
# the subshell would leave the agent running on, for later suites to meet.
start_agents() {
	local n
	[ -f "$BATS_FILE_TMPDIR/agents" ] && return 0
	for n in a b c; do
		on "$n" exec space-reconcile --listen --interval 30 \
		    >>"$BATS_FILE_TMPDIR/agent-$n.log" 2>&1 3>&- &
		echo $! >>"$BATS_FILE_TMPDIR/agents"
	done
}

stop_agents() {
	[ -f "$BATS_FILE_TMPDIR/agents" ] || return 0
	xargs kill <"$BATS_FILE_TMPDIR/agents" 2>/dev/null || true
	rm -f "$BATS_FILE_TMPDIR/agents"
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
	# The lease's end by the node's clock, where a beat as space writes.
	[ -s "$RUN_A-cc/node/lease" ]
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
	# Node B's create pulls the template from the store and boots its own.
	run on b space-create --template minimal
	assert_success
	jout -e '.path == "cold"'
	on b space-rm "$(jout -r .id)" >/dev/null
	space-node ls "$NODE_A" | jq -e '.pods == {"minimal": 1}'
	# A's own create does.
	run space-create --template minimal
	assert_success
	jout -e '.path == "pool"'
	space-rm "$(jout -r .id)" >/dev/null
	space-pool set --template minimal --size 0 >/dev/null
	space-pool fill >/dev/null
}

@test "egress policies and credentials are rows of the shared database: set on one node, they hold on every node" {
	local vault_test=${SPACE_VAULT_TEST:-$top/build/tests/vault-test}
	id=$(own --template minimal)
	run space-egress set "$id" --allow api.example.com:443
	assert_success
	[ ! -e "$ROOT_A/egress/$id.json" ]
	run on b space-egress check "$id" api.example.com 443 --addr 203.0.113.5
	assert_success
	jout -e '.decision == "allow" and .source == "sandbox"'
	run on c space-egress clear "$id"
	jout -e '.removed == true'
	run space-egress check "$id" api.example.com 443 --addr 203.0.113.5
	jout -e '.decision == "deny" and .source == "none"'

	# The file vault is a node's disk: refused on a shared database.
	run space-cred add --name gh --scope "sandbox/$id" --host api.github.com \
	    --inject 'header:Authorization:Bearer {}' <<<"t0ken"
	assert_failure 100
	jout -e '.error == "bad-input"'
	export SPACE_CRED_VAULT=cmd:$vault_test VAULT_TEST_DIR=$BATS_TEST_TMPDIR/vault
	mkdir -p "$VAULT_TEST_DIR"
	runners "$VAULT_TEST_DIR"
	run space-cred add --name gh --scope "sandbox/$id" --host api.github.com \
	    --inject 'header:Authorization:Bearer {}' --rate 10/m <<<"t0ken"
	assert_success
	run on b space-cred resolve --sandbox "$id" api.github.com
	assert_success
	jout -e '.name == "gh" and .scope == "sandbox/'"$id"'" and .version == 1'
	run on c space-cred rotate gh <<<"n3w"
	assert_success
	run space-cred ls
	jout -e 'select(.name == "gh") | .version == 2'
	# Removing the sandbox on its node forgets its credentials everywhere.
	space-rm "$id" >/dev/null
	run on b space-cred resolve --sandbox "$id" api.github.com
	jout -e '.error == "not-found"'
	run on c space-cred audit
	assert_success
	[ "$(jq -r 'select(.cred == "gh") | .op' <<<"$output" | tr '\n' ' ')" = "add rotate rm " ]
	[ ! -e "$ROOT_A/creds/scopes" ] && [ ! -e "$ROOT_A/creds/audit.log" ] || false
	[ ! -e "$ROOT_A-cc/creds/audit.log" ]
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

@test "a volume moves with its sandbox's suspend on A and restore on B, and outlives it there" {
	id=$(own)
	space-volume create v-moving --size 64M >/dev/null
	vid=$(space-volume ls v-moving | jq -r .id)
	space-volume attach "$id" v-moving /data >/dev/null
	space-exec "$id" -- sh -c 'echo from-a > /data/f && sync'
	r=$(own)
	space-suspend "$id" | jq -e '.ok'
	run on b space-restore "$id"
	assert_success
	on b space-exec "$id" -- cat /data/f | grep -qx from-a
	# The volume is B's now: its row, its subvolume there.
	on c space-volume ls v-moving | jq -e --arg b "$NODE_A-cb" --arg id "$id" \
	    '.node == $b and .mounts == [{"sandbox": $id, "path": "/data", "ro": false}]'
	[ -f "$ROOT_A-cb/volumes/$vid/disk.raw" ]
	# A's copy is nobody's: its reconcile takes it away (after a grace).
	touch -d '2 minutes ago' "$ROOT_A/volumes/$vid"
	space-reconcile --once >/dev/null
	[ ! -e "$ROOT_A/volumes/$vid" ]
	# A sandbox of A cannot mount a volume of B.
	run space-volume attach "$r" v-moving /r --ro
	assert_failure 1
	jout -e '.error == "bad-state"'
	space-rm "$r" >/dev/null
	on b space-exec "$id" -- sh -c 'echo on-b >> /data/f && sync'
	on b space-rm "$id" >/dev/null
	# It outlives the sandbox; another sandbox on B reads it.
	on c space-volume ls v-moving | jq -e '.mounts == []'
	r2=$(on b space-create --template minimal | jq -r .id)
	echo "$r2" >> "$BATS_FILE_TMPDIR/ids"
	on b space-volume attach "$r2" v-moving /r --ro >/dev/null
	[ "$(on b space-exec "$r2" -- cat /r/f | tr '\n' ' ')" = "from-a on-b " ]
	on b space-rm "$r2" >/dev/null
	on b space-volume rm v-moving | jq -e '.removed'
}

@test "a command for another node's sandbox records a wish; that node carries it out, and --wait waits for it" {
	id=$(own)
	# No agent yet: the wish waits, queued.
	run on b space-pause "$id"
	assert_success
	jout -e --arg a "$NODE_A" '.queued and .want == "paused" and .node == $a and .state == "running"'
	space-ls "$id" | jq -e '.want == "paused" and .state == "running"'
	# As seen from node B, a sandbox of A is its record, not B's libvirt.
	on b space-ls "$id" | jq -e '.vm == null and .state == "running"'
	start_agents
	run on b space-resume --wait 60 "$id"
	assert_success
	jout -e '.state == "running" and .changed and (.waited_ms | type) == "number"'
	[ "$(virsh -c qemu:///system domstate "sp-$id")" = running ]
	run on c space-pause "$id" --wait
	assert_success
	jout -e '.state == "paused" and .changed'
	[ "$(virsh -c qemu:///system domstate "sp-$id")" = paused ]
	space-ls "$id" | jq -e '.state == "paused" and .want == null'
	# One already there is told unchanged, without a wish.
	run on b space-pause "$id"
	jout -e '.changed == false and .want == null'
	run on b space-stop --wait 60 "$id"
	assert_success
	jout -e '.state == "stopped"'
	# A wish its node cannot carry out comes back as that node's error.
	run on b space-pause --wait 60 "$id"
	assert_failure 1
	jout -e '.error == "bad-state"'
	assert_output --partial "node $NODE_A"
	run on c space-rm --wait 60 "$id"
	assert_success
	jout -e '.state == "destroyed"'
	run space-ls "$id"
	assert_failure 1
	! virsh -c qemu:///system domstate "sp-$id" 2>/dev/null || false
	grep -q '"action":"paused","from":"wish"' "$BATS_FILE_TMPDIR/agent-a.log"
}

@test "create --anywhere: placed by fit, then locality, then spread, each saying why, and made by its node" {
	start_agents
	# Every node has the template: the scheduler spreads them.
	for n in b c; do
		on "$n" space-template pull "$(space-template ls | jq -r 'select(.template == "minimal") | "minimal@" + .digest' | tail -n 1)" >/dev/null
		on "$n" space-node beat >/dev/null
	done
	space-node beat >/dev/null
	# Nothing runs anywhere yet, so that spread alone decides.
	space-node ls | jq -se 'all(.[]; .sandboxes == 0)'
	run on b space-create --anywhere --wait 120 --template minimal -n 3
	assert_success
	jout -r .id >> "$BATS_FILE_TMPDIR/ids"
	jout -s -e 'length == 3 and all(.[]; .ok and .state == "running" and
	    .placed.template_there and (.placed.why | test("fits 3 of 3 nodes")))'
	jout -s -e --arg a "$NODE_A" '[.[].node] | sort == [$a, $a + "-cb", $a + "-cc"]'
	for id in $(jout -r .id); do
		node=$(space-ls "$id" | jq -r .node)
		case $node in
		"$NODE_A") run space-exec "$id" -- true ;;
		*-cb) run on b space-exec "$id" -- true ;;
		*-cc) run on c space-exec "$id" -- true ;;
		esac
		assert_success
	done
	# A node that does not fit, and a draining one, take nothing.
	on c space-node drain >/dev/null
	run space-create --anywhere --template minimal --memory 30000
	assert_success
	jout -e '.queued and .node == null and .state == "creating"'
	big=$(jout -r .id)
	run space-schedule
	jout -e --arg id "$big" 'select(.id == $id) | .action == "unplaced" and
	    .error == "full" and (.why | test("2 full, 1 draining"))'
	# Removing one that no node has takes it away at once.
	run space-rm "$big"
	assert_success
	run space-ls "$big"
	assert_failure 1
	run space-create --anywhere --wait 120 --template minimal
	assert_success
	jout -r .id >> "$BATS_FILE_TMPDIR/ids"
	jout -e --arg c "$NODE_A-cc" '.node != $c'
	on c space-node ready >/dev/null
}

@test "create --anywhere takes a warm pod where one waits: its node wakes it and tells it who it is" {
	start_agents
	on b space-template pull "$(space-template ls | jq -r 'select(.template == "minimal") | "minimal@" + .digest' | tail -n 1)" >/dev/null
	on b space-pool set --template minimal --size 1 >/dev/null
	on b space-pool fill >/dev/null
	on b space-node beat >/dev/null
	pod=$(on b space-ls --pods --here | jq -r 'select(.pod) | .id')
	[ -n "$pod" ]
	run space-create --anywhere --wait 120 --template minimal \
	    --label who=far --env GREETING=hello --name far-one \
	    --request-id far-key-1
	assert_success
	jout -r .id >> "$BATS_FILE_TMPDIR/ids"
	jout -e --arg b "$NODE_A-cb" --arg pod "$pod" '.ok and .id == $pod and
	    .node == $b and .state == "running" and .placed.claimed and
	    .placed.pod_waiting and (.placed.why | test("a pod of the template waits"))
	    and .name == "far-one" and .request_id == "far-key-1"'
	run on b space-exec "$pod" -- sh -c 'echo "$GREETING"'
	assert_success
	assert_output hello
	on b space-ls "$pod" | jq -e '.labels.who == "far" and (.pod | not)'
	# Its handles went with it to the pod, and the row it stood in for is
	# gone: the name is the pod's on every node, a retry finds it.
	on c space-ls far-one | jq -e --arg pod "$pod" '.id == $pod'
	[ "$(space-ls | jq -s 'map(select(.name == "far-one")) | length')" -eq 1 ]
	run space-create --anywhere --wait 120 --template minimal \
	    --name far-one --request-id far-key-1
	assert_success
	jout -e --arg pod "$pod" '.ok and .id == $pod and .existing'
	run space-create --anywhere --template minimal --name far-one
	[ "$status" -eq 1 ]
	jout -e '.error == "exists"'
	run space-create --anywhere --template minimal --name far-two \
	    --request-id far-key-1
	[ "$status" -eq 1 ]
	jout -e '.error == "exists" and (.msg | test("not this create"))'
	# One without a pod to take is placed and made as before.
	run space-create --anywhere --wait 120 --template minimal --memory 384
	assert_success
	jout -r .id >> "$BATS_FILE_TMPDIR/ids"
	jout -e '.ok and .state == "running" and (.placed.claimed | not)'
	on b space-pool set --template minimal --size 0 >/dev/null
	on b space-pool fill >/dev/null
}

@test "suspend on A, then restore --anywhere: the scheduler picks a node that fits and it restores there" {
	start_agents
	id=$(own)
	space-exec "$id" -- sh -c 'echo far > /root/marker && sync'
	space-suspend "$id" >/dev/null
	space-node drain >/dev/null
	run on c space-restore --anywhere --wait 120 "$id"
	space-node ready >/dev/null
	echo "$output"
	assert_success
	jout -e --arg a "$NODE_A" '.state == "running" and .node != $a and (.placed.why | length) > 0'
	node=$(space-ls "$id" | jq -r .node)
	n=${node##*-c}
	on "$n" space-exec "$id" -- cat /root/marker | grep -qx far
	on "$n" space-rm "$id" >/dev/null
	stop_agents
}

@test "space-apid of node A forwards a request for node B's sandbox there, signed, and streams back its answer" {
	space-tenant add "fw$$" >/dev/null
	space-tenant add "fx$$" >/dev/null
	key=$(space-tenant key add "fw$$" --rate 0 | jq -r .key)
	other=$(space-tenant key add "fx$$" --rate 0 | jq -r .key)
	read -r pa pb < <(free_ports 2)
	T=$BATS_FILE_TMPDIR
	space-apid --listen "127.0.0.1:$pa" --audit "$T/api-a.log" >"$T/api-a.out" &
	echo $! >"$T/apids"
	on b exec space-apid --listen "127.0.0.1:$pb" --audit "$T/api-b.log" >"$T/api-b.out" 3>&- &
	echo $! >>"$T/apids"
	for _ in $(seq 100); do
		grep -q listen "$T/api-a.out" && grep -q listen "$T/api-b.out" && break
		sleep 0.1
	done
	id=$(on b space-create --template minimal --label "tenant=fw$$" | jq -r .id)
	echo "$id" >>"$T/ids"
	# exec through A: B runs it (the guest's host name is its id), and
	# the output streams back through A.
	out=$(curl -s -N -H "Authorization: Bearer $key" \
	    -d '{"argv":["sh","-c","hostname; echo done"]}' \
	    "http://127.0.0.1:$pa/v1/sandboxes/$id/exec")
	echo "$out"
	[ "$(jq -r 'select(.stdout) | .stdout' <<<"$out" | base64 -d)" = "$(printf '%s\ndone' "$id")" ]
	jq -se '.[-1] == {"exit":0}' <<<"$out"
	# Only B sees its VM: a get through A says what B says.
	curl -s -H "Authorization: Bearer $key" "http://127.0.0.1:$pa/v1/sandboxes/$id" |
	    jq -e '.node != null and .vm == "running"'
	# E2B's connect and guest API through A, with the sandbox's token.
	tok=$(curl -s -X POST -H "X-API-KEY: $key" -H 'Content-Type: application/json' \
	    -d '{"timeout":300}' "http://127.0.0.1:$pa/v2/sandboxes/$id/connect" | jq -r .envdAccessToken)
	[ ${#tok} -eq 64 ]
	curl -s -X POST -H "E2b-Sandbox-Id: $id" -H "X-Access-Token: $tok" \
	    -H 'Content-Type: application/json' -d '{"path":"/etc/hostname"}' \
	    "http://127.0.0.1:$pa/filesystem.Filesystem/Stat" | jq -e '.entry.type == "FILE_TYPE_FILE"'
	# B's audit says who asked, as A authenticated it.
	grep "/v1/sandboxes/$id/exec" "$T/api-b.log" | jq -e --arg t "fw$$" '.tenant == $t and .status == 200'
	# Another tenant gets 404 from A, and nothing reaches B for it.
	n=$(wc -l <"$T/api-b.log")
	code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $other" \
	    "http://127.0.0.1:$pa/v1/sandboxes/$id")
	[ "$code" = 404 ]
	[ "$(wc -l <"$T/api-b.log")" = "$n" ]
	# A forward B cannot verify is refused.
	code=$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Space-Forward-Sig: 00' \
	    -H 'X-Space-Forward-Time: 1' -H "X-Space-Forward-Tenant: fw$$" \
	    -H 'X-Space-Forward-Admin: 1' -H 'X-Space-Forward-Key: -' \
	    "http://127.0.0.1:$pb/v1/sandboxes/$id")
	[ "$code" = 401 ]
	xargs kill <"$T/apids"
	on b space-rm "$id" >/dev/null
	space-tenant rm "fw$$" >/dev/null
	space-tenant rm "fx$$" >/dev/null
}

@test "node B dies (kill -9 of all its processes): its backed-up sandbox comes back on A or C as backed up, B's return removes its copy, nothing runs twice" {
	start_agents
	run on b space-create --template minimal
	assert_success
	id=$(jout -r .id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	run on b space-create --template minimal
	nobackup=$(jout -r .id)
	echo "$nobackup" >> "$BATS_FILE_TMPDIR/ids"
	on b space-exec "$id" -- sh -c 'echo backed > /root/marker && sync'
	run on b space-backup "$id"
	assert_success
	jout -e '.ok and .state == "running" and .bytes_uploaded > 0'
	space-snap ls "$id" | jq -se 'map(select(.remote == "restorable")) | length == 1'
	# Written after the backup: lost with the node.
	on b space-exec "$id" -- sh -c 'echo later > /root/after && sync'
	# Node B dies: its agent, and its VMs' QEMUs, by SIGKILL; its lease
	# was renewed for 2 s last.
	SPACE_NODE_LEASE=2 on b space-node beat >/dev/null
	kill -9 "$(sed -n 2p "$BATS_FILE_TMPDIR/agents")"
	for s in "$id" "$nobackup"; do
		pkill -9 -f "guest=sp-$s," || true
	done
	sleep 3
	space-node ls "$NODE_A-cb" | jq -e '.alive == false'
	run space-schedule --lost-after 1
	assert_success
	jout -s -e --arg id "$id" --arg n "$nobackup" '
	    any(.[]; .id == $id and .action == "lost") and
	    any(.[]; .id == $n and .action == "lost") and
	    any(.[]; .id == $id and .action == "recovering") and
	    (any(.[]; .id == $n and .action == "recovering") | not) and
	    any(.[]; .id == $id and .action == "placed")'
	space-ls "$nobackup" | jq -e --arg b "$NODE_A-cb" '.state == "lost" and .node == $b'
	# The placed node's agent restores it (bounded: 120 s).
	for _ in $(seq 240); do
		[ "$(space-ls "$id" | jq -r .state)" = running ] && break
		sleep 0.5
	done
	space-ls "$id"
	cat "$BATS_FILE_TMPDIR"/agent-*.log | grep -- "$id" || true
	space-ls "$id" | jq -e '.state == "running" and .want == null'
	node=$(space-ls "$id" | jq -r .node)
	[ "$node" = "$NODE_A" ] || [ "$node" = "$NODE_A-cc" ]
	n=a
	[ "$node" = "$NODE_A" ] || n=c
	on "$n" space-exec "$id" -- cat /root/marker | grep -qx backed
	run on "$n" space-exec "$id" -- cat /root/after
	assert_failure
	# B comes back: its copy of what now runs elsewhere goes, the rows
	# stay; the sandbox without a backup is B's again (its VM died).
	run on b space-reconcile --once
	echo "$output"
	jout -s -e --arg id "$id" 'any(.[]; .id == $id and .action == "released-left-behind" and .ok)'
	jout -s -e --arg n "$nobackup" 'any(.[]; .id == $n and .action == "reclaimed" and .ok)'
	space-ls "$id" | jq -e --arg node "$node" '.node == $node and .state == "running"'
	space-ls "$nobackup" | jq -e '.state == "failed"'
	[ ! -e "$ROOT_A-cb/sandboxes/$id" ]
	# One VM of it on this machine, and its disk is the new node's.
	[ "$(virsh -c qemu:///system list --name | grep -c -- "sp-$id")" -eq 1 ]
	virsh -c qemu:///system dumpxml "sp-$id" | grep -q "/sandboxes/$id/disk.raw"
	! virsh -c qemu:///system dumpxml "sp-$id" | grep -q "$ROOT_A-cb/" || false
	on b space-node beat >/dev/null
	on "$n" space-rm "$id" >/dev/null
	on b space-rm "$nobackup" >/dev/null
	stop_agents
}

@test "a node cut off from the database pauses its VMs once its lease ran out, and resumes them when it is back" {
	stop_agents
	run on c space-create --template minimal
	assert_success
	id=$(jout -r .id)
	echo "$id" >> "$BATS_FILE_TMPDIR/ids"
	SPACE_NODE_LEASE=2 on c space-node beat >/dev/null
	# The lease's end by the node's clock, where a beat as space writes.
	[ -s "$RUN_A-cc/node/lease" ]
	sleep 3
	# Node C's database is not there (a socket nobody listens on).
	run env SPACE_DB="postgresql:host=$BATS_FILE_TMPDIR/nowhere dbname=space" \
	    SPACE_ROOT="$ROOT_A-cc" SPACE_RUN="$RUN_A-cc" SPACE_NODE="$NODE_A-cc" \
	    space-reconcile --once
	echo "$output"
	assert_failure 111
	jout -s -e --arg id "$id" 'any(.[]; .id == $id and .action == "fenced" and .ok)'
	[ "$(virsh -c qemu:///system domstate "sp-$id")" = paused ]
	[ -e "$RUN_A-cc/pods/$id.fenced" ]
	# Back: the DB still says it runs on C, so C resumes it.
	run on c space-reconcile --once
	assert_success
	[ "$(virsh -c qemu:///system domstate "sp-$id")" = running ]
	[ ! -e "$RUN_A-cc/pods/$id.fenced" ]
	on c space-exec "$id" -- true
	on c space-rm "$id" >/dev/null
}

@test "on one node with SQLite: create --anywhere --wait, made by the listening reconcile, both woken by writes to the file" {
	# A node of its own (a root belongs to one database): D, on SQLite.
	local pid
	export SPACE_DB=sqlite:$BATS_FILE_TMPDIR/one.db SPACE_ROOT=$ROOT_A-cd \
	    SPACE_RUN=$RUN_A-cd SPACE_NODE=$NODE_A-cd
	space-init --loop-size 6G >/dev/null
	[ -z "${SPACE_AS_SPACE_BIN:-}" ] || noded_up
	import_minimal
	space-template warm minimal >/dev/null
	space-node beat >/dev/null
	space-reconcile --listen --interval 30 \
	    >"$BATS_FILE_TMPDIR/agent-sqlite.log" 2>&1 3>&- &
	pid=$!
	run space-create --anywhere --wait 120 --template minimal
	kill "$pid"
	assert_success
	jout -e --arg d "$NODE_A-cd" '.state == "running" and .node == $d and .placed.template_there'
	id=$(jout -r .id)
	space-exec "$id" -- true
	grep -q "\"id\":\"$id\",\"ok\":true,\"action\":\"created\"" "$BATS_FILE_TMPDIR/agent-sqlite.log"
	space-rm "$id" >/dev/null
	# Its space-noded holds its btrfs.
	[ -z "${SPACE_AS_SPACE_BIN:-}" ] || kill "$(tail -n 1 "$BATS_FILE_TMPDIR/noded.pid")"
	remove_node "$ROOT_A-cd" "$RUN_A-cd"
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
	space-ls --pods | jq -se --arg a "$NODE_A" 'map(select(.node == $a)) |
	    all(.[]; (.state | IN("creating", "suspending", "restoring",
	    "recovering") | not) and
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
