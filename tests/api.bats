#!/usr/bin/env bats
# space-apid end to end (docs/api.md): a real server on loopback, real VMs,
# tenants and keys made with space-tenant; the native API driven with curl,
# E2B's REST and guest APIs with E2B's own SDK (tests/e2b, the npm package
# e2b pinned by its package-lock.json, unchanged).
load helper

api() {
	curl -s -S -m 60 -o "$T/body" -w '%{http_code}' "$@"
}

# The server run as SPACE_API_USER when there is one (run-all's round
# through space-noded, as its unit runs it): $AS_API before a command (a
# word list, not a function, so that $! is the server's own pid).
export AS_API=${SPACE_API_USER:+setpriv --reuid=$SPACE_API_USER --regid=$SPACE_API_USER --init-groups}

setup_file() {
	export T="$BATS_FILE_TMPDIR"
	import_minimal
	space-template warm minimal >/dev/null
	export RUN="a$$"
	space-tenant add "$RUN-a" >/dev/null
	space-tenant add "$RUN-b" >/dev/null
	space-tenant add "$RUN-q" --max-running 1 >/dev/null
	export KEY_A=$(space-tenant key add "$RUN-a" --rate 0 | jq -r .key)
	export KEY_B=$(space-tenant key add "$RUN-b" --rate 0 | jq -r .key)
	export KEY_Q=$(space-tenant key add "$RUN-q" --rate 0 | jq -r .key)
	export KEY_SLOW=$(space-tenant key add "$RUN-b" --rate 60 | jq -r .key)
	export KEY_ADMIN=$(space-tenant key add --admin --rate 0 | jq -r .key)
	read -r PORT < <(free_ports 1)
	export PORT URL="http://127.0.0.1:$PORT" AUDIT=$T/audit.log
	# Run as SPACE_API_USER, its audit logs go in a directory of its own.
	if [ -n "${SPACE_API_USER:-}" ]; then
		export AUDIT_DIR
		AUDIT_DIR=$(mktemp -d /tmp/sp-api-XXXXXX)
		chown "$SPACE_API_USER" "$AUDIT_DIR"
		AUDIT=$AUDIT_DIR/audit.log
	fi
	$AS_API space-apid --listen "127.0.0.1:$PORT" --body-max 1048576 \
	    --audit "$AUDIT" >"$T/apid.out" 2>"$T/apid.err" &
	echo $! >"$T/apid.pid"
	for _ in $(seq 100); do
		grep -q '"listen"' "$T/apid.out" 2>/dev/null && break
		sleep 0.1
	done
}

teardown_file() {
	pid=$(cat "$T/apid.pid")
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	for t in a b q; do
		space-ls | jq -r --arg t "$RUN-$t" 'select(.labels.tenant == $t) | .id' |
		    space-rm >/dev/null 2>&1 || true
		space-tenant rm "$RUN-$t" >/dev/null 2>&1 || true
	done
	space-tenant key rm "$(cut -c5-20 <<<"$KEY_ADMIN")" >/dev/null 2>&1 || true
	[ -z "${AUDIT_DIR:-}" ] || rm -rf "$AUDIT_DIR"
}

@test "space-apid says where it listens, and runs as the user it was started as" {
	run jq -e --arg l "127.0.0.1:$PORT" '.ok and .listen == $l and .tls == false' "$T/apid.out"
	[ "$status" -eq 0 ]
	[ "$(ps -o user= -p "$(cat "$T/apid.pid")")" = "${SPACE_API_USER:-root}" ]
}

@test "no key, a wrong key, a removed key: 401, nothing else said" {
	run api "$URL/v1/sandboxes"
	[ "$output" = 401 ]
	jq -e '.error == "unauthorized"' "$T/body"
	run api -H "Authorization: Bearer spk_0123456789abcdef_$(printf '%064d' 0)" "$URL/v1/sandboxes"
	[ "$output" = 401 ]
	run api -H "X-API-KEY: ${KEY_A%?}x" "$URL/v1/sandboxes"
	[ "$output" = 401 ]
	k=$(space-tenant key add "$RUN-a" | jq -r .key)
	run api -H "Authorization: Bearer $k" "$URL/v1/sandboxes"
	[ "$output" = 200 ]
	space-tenant key rm "$(cut -c5-20 <<<"$k")"
	run api -H "Authorization: Bearer $k" "$URL/v1/sandboxes"
	[ "$output" = 401 ]
	# E2B's paths answer in E2B's shape.
	run api "$URL/v2/sandboxes"
	[ "$output" = 401 ]
	jq -e '.code == 401 and (.message | length > 0)' "$T/body"
}

@test "native API: create, get, list, exec with stdin, remove" {
	run api -H "Authorization: Bearer $KEY_A" -d '{"template":"minimal","labels":{"app":"x"},"env":["GREETING=hi"]}' "$URL/v1/sandboxes"
	[ "$output" = 201 ]
	id=$(jq -r .id "$T/body")
	echo "$id" >>"$T/ids"
	run api -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/$id"
	[ "$output" = 200 ]
	jq -e '.state == "running" and .labels == {"app":"x"}' "$T/body"
	run api -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes"
	jq -e --arg id "$id" '[.sandboxes[].id] == [$id]' "$T/body"
	run api -N -H "Authorization: Bearer $KEY_A" -d '{"argv":["sh","-c","echo $GREETING; cat; echo oops >&2; exit 3"],"stdin":"from stdin\n"}' "$URL/v1/sandboxes/$id/exec"
	[ "$output" = 200 ]
	jq -e -s '.[0].pid > 0 and .[-1] == {"exit":3}' "$T/body"
	[ "$(jq -r 'select(.stdout) | .stdout' "$T/body" | base64 -d)" = "$(printf 'hi\nfrom stdin')" ]
	[ "$(jq -r 'select(.stderr) | .stderr' "$T/body" | base64 -d)" = oops ]
	# The sandbox's own space-exec sees what the API made.
	run space-exec "$id" -- sh -c 'echo $GREETING'
	[ "$output" = hi ]
	run api -X DELETE -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/$id"
	[ "$output" = 200 ]
	run space-ls "$id"
	[ "$status" -ne 0 ]
}

@test "native API: a disk, a CPU quota and a lifetime of its own" {
	t0=$(date +%s)
	run api -H "Authorization: Bearer $KEY_A" -d '{"template":"minimal","disk_gb":3,"cpu_quota":0.5,"ttl":"2h","on_expiry":"pause"}' "$URL/v1/sandboxes"
	[ "$output" = 201 ]
	id=$(jq -r .id "$T/body")
	echo "$id" >>"$T/ids"
	run api -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/$id"
	[ "$output" = 200 ]
	jq -e '.disk_gb == 3 and .cpu_quota == 0.5 and .on_expiry == "pause"' "$T/body"
	expires=$(jq .expires "$T/body")
	[ "$expires" -ge $((t0 + 7200)) ] && [ "$expires" -le $(($(date +%s) + 7200)) ] || false
	[ "$(stat -c %s "$SPACE_ROOT/sandboxes/$id/disk.raw")" -eq $((3 * 1024 * 1024 * 1024)) ]
	virsh -c qemu:///system schedinfo "sp-$id" | grep -q 'global_quota *: 50000$'
	run api -X DELETE -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/$id"
	[ "$output" = 200 ]
}

@test "native API: files in and out, a directory, a tar stream" {
	run api -H "Authorization: Bearer $KEY_A" -d '{"template":"minimal"}' "$URL/v1/sandboxes"
	id=$(jq -r .id "$T/body")
	echo "$id" >>"$T/ids"
	head -c 300000 /dev/urandom >"$T/blob"
	run api -X PUT --data-binary @"$T/blob" -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/$id/files?path=/tmp/blob"
	[ "$output" = 200 ]
	run api -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/$id/files?path=/tmp/blob"
	[ "$output" = 200 ]
	cmp "$T/body" "$T/blob"
	run api -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/$id/dir?path=/tmp"
	jq -e '[.entries[] | select(.name == "blob") | .size] == [300000]' "$T/body"
	run api -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/$id/tar?path=/tmp/blob"
	[ "$output" = 200 ]
	mkdir "$T/untar" && tar -C "$T/untar" -xf "$T/body"
	cmp "$T/untar/blob" "$T/blob"
	run api -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/$id/files?path=/tmp/none"
	[ "$output" = 404 ]
	jq -e '.error == "not-found"' "$T/body"
	space-rm "$id" >/dev/null
}

@test "another tenant's sandbox is 404 everywhere, as one that is not" {
	run api -H "Authorization: Bearer $KEY_A" -d '{"template":"minimal"}' "$URL/v1/sandboxes"
	id=$(jq -r .id "$T/body")
	echo "$id" >>"$T/ids"
	for req in "GET /v1/sandboxes/$id" "DELETE /v1/sandboxes/$id" \
	    "POST /v1/sandboxes/$id/pause" "GET /v1/sandboxes/$id/snapshots" \
	    "GET /v1/sandboxes/$id/files?path=/etc/hostname" \
	    "GET /sandboxes/$id" "DELETE /sandboxes/$id" \
	    "POST /sandboxes/$id/pause"; do
		run api -X "${req%% *}" -H "X-API-KEY: $KEY_B" "$URL${req#* }"
		[ "$output" = 404 ] || { echo "$req: $output"; false; }
		mine=$(cat "$T/body")
		run api -X "${req%% *}" -H "X-API-KEY: $KEY_B" "$URL$(sed "s/$id/aaaaaaaaaaaa/" <<<"${req#* }")"
		[ "$output" = 404 ]
		[ "$(cat "$T/body")" = "$mine" ] || { echo "$req: says more than for none"; false; }
	done
	run api -N -X POST -H "X-API-KEY: $KEY_B" -d '{"argv":["true"]}' "$URL/v1/sandboxes/$id/exec"
	[ "$output" = 404 ]
	# The guest API: E2b-Sandbox-Id with another sandbox's token.
	run api -X POST -H "X-API-KEY: $KEY_B" -H 'Content-Type: application/json' -d '{"templateID":"minimal"}' "$URL/v2/sandboxes"
	[ "$output" = 201 ]
	theirs=$(jq -r .sandboxID "$T/body") tok=$(jq -r .envdAccessToken "$T/body")
	echo "$theirs" >>"$T/ids"
	run api -X POST -H "E2b-Sandbox-Id: $id" -H "X-Access-Token: $tok" -H 'Content-Type: application/json' -d '{"path":"/"}' "$URL/filesystem.Filesystem/Stat"
	[ "$output" = 401 ]
	run api -X POST -H "E2b-Sandbox-Id: $id" -H 'Content-Type: application/json' -d '{"path":"/"}' "$URL/filesystem.Filesystem/Stat"
	[ "$output" = 401 ]
	run api -X POST -H "E2b-Sandbox-Id: $theirs" -H "X-Access-Token: $tok" -H 'Content-Type: application/json' -d '{"path":"/"}' "$URL/filesystem.Filesystem/Stat"
	[ "$output" = 200 ]
	jq -e '.entry.type == "FILE_TYPE_DIRECTORY"' "$T/body"
	# What the guest API does not serve says so in Connect's terms.
	run api -X POST -H "E2b-Sandbox-Id: $theirs" -H "X-Access-Token: $tok" -H 'Content-Type: application/json' -d '{"path":"/"}' "$URL/filesystem.Filesystem/CreateWatcher"
	[ "$output" = 501 ]
	jq -e '.code == "unimplemented" and (.message | test("not supported"))' "$T/body"
	# An admin key sees both.
	run api -H "X-API-KEY: $KEY_ADMIN" "$URL/v1/sandboxes/$id"
	[ "$output" = 200 ]
	run api -H "X-API-KEY: $KEY_ADMIN" "$URL/v1/sandboxes/$theirs"
	[ "$output" = 200 ]
	space-rm "$id" "$theirs" >/dev/null
}

@test "native API: a name stands for the id in every path, in its tenant only; a request id's retry gets the first sandbox" {
	run api -H "Authorization: Bearer $KEY_A" -d '{"template":"minimal","name":"api-web","request_id":"rq-1"}' "$URL/v1/sandboxes"
	[ "$output" = 201 ]
	id=$(jq -r .id "$T/body")
	echo "$id" >>"$T/ids"
	jq -e '.name == "api-web" and .request_id == "rq-1"' "$T/body"
	# The retry: 200, the same sandbox.
	run api -H "Authorization: Bearer $KEY_A" -d '{"template":"minimal","name":"api-web","request_id":"rq-1"}' "$URL/v1/sandboxes"
	[ "$output" = 200 ]
	jq -e --arg id "$id" '.id == $id and .existing' "$T/body"
	# Another create of the name: 409.
	run api -H "Authorization: Bearer $KEY_A" -d '{"template":"minimal","name":"api-web"}' "$URL/v1/sandboxes"
	[ "$output" = 409 ]
	jq -e '.error == "exists"' "$T/body"
	run api -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/api-web"
	[ "$output" = 200 ]
	jq -e --arg id "$id" '.id == $id and .name == "api-web"' "$T/body"
	run api -N -X POST -H "Authorization: Bearer $KEY_A" -d '{"argv":["uname","-n"]}' "$URL/v1/sandboxes/api-web/exec"
	[ "$output" = 200 ]
	jq -s -e --arg id "$id" 'map(.stdout // empty | @base64d) | add == $id + "\n"' "$T/body"
	run api -X POST -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/api-web/pause"
	[ "$output" = 200 ]
	jq -e --arg id "$id" '.id == $id and .changed' "$T/body"
	space-ls "$id" | jq -e '.state == "paused"'
	# Tenant B has no sandbox of that name: 404, as for one never made;
	# its own of the same name is another sandbox.
	run api -H "X-API-KEY: $KEY_B" "$URL/v1/sandboxes/api-web"
	[ "$output" = 404 ]
	mine=$(cat "$T/body")
	run api -H "X-API-KEY: $KEY_B" "$URL/v1/sandboxes/never-was"
	[ "$output" = 404 ]
	[ "$(cat "$T/body")" = "$mine" ]
	run api -H "X-API-KEY: $KEY_B" -d '{"template":"minimal","name":"api-web","request_id":"rq-1"}' "$URL/v1/sandboxes"
	[ "$output" = 201 ]
	theirs=$(jq -r .id "$T/body")
	echo "$theirs" >>"$T/ids"
	[ "$theirs" != "$id" ]
	run api -H "X-API-KEY: $KEY_B" "$URL/v1/sandboxes/api-web"
	jq -e --arg t "$theirs" '.id == $t' "$T/body"
	# An admin's key, of any tenant: two have it, so it names none.
	run api -H "X-API-KEY: $KEY_ADMIN" "$URL/v1/sandboxes/api-web"
	[ "$output" = 400 ]
	# Bad handles: 400, nothing made.
	for body in '{"template":"minimal","name":"Bad_Name"}' \
	    '{"template":"minimal","name":"abcdefghij23"}' \
	    '{"template":"minimal","request_id":"a b"}' \
	    '{"template":"minimal","name":5}'; do
		run api -H "Authorization: Bearer $KEY_A" -d "$body" "$URL/v1/sandboxes"
		[ "$output" = 400 ] || { echo "$body: $output"; false; }
	done
	run api -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/Bad_Name"
	[ "$output" = 404 ]
	run api -X DELETE -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/api-web"
	[ "$output" = 200 ]
	run api -X DELETE -H "X-API-KEY: $KEY_B" "$URL/v1/sandboxes/api-web"
	[ "$output" = 200 ]
	run api -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/api-web"
	[ "$output" = 404 ]
}

@test "credentials and egress: a tenant's own, never another's, secrets never shown" {
	run api -H "X-API-KEY: $KEY_A" -d '{"template":"minimal"}' "$URL/v1/sandboxes"
	id=$(jq -r .id "$T/body")
	echo "$id" >>"$T/ids"
	run api -H "X-API-KEY: $KEY_A" -d '{"name":"gh","scope":"tenant","hosts":"api.github.com","inject":"header:Authorization:Bearer {}","secret":"s3cret-a"}' "$URL/v1/credentials"
	[ "$output" = 201 ]
	jq -e --arg s "tenant/$RUN-a" '.scope == $s and (tostring | contains("s3cret") | not)' "$T/body"
	run api -H "X-API-KEY: $KEY_A" -d "{\"name\":\"one\",\"scope\":\"sandbox/$id\",\"hosts\":\"x.test\",\"inject\":\"basic\",\"secret\":\"u:p\"}" "$URL/v1/credentials"
	[ "$output" = 201 ]
	# The gateway would inject it: the store resolves it for the sandbox.
	space-cred resolve --sandbox "$id" --tenant "$RUN-a" api.github.com | jq -e '.name == "gh"'
	# Another tenant: its own list holds neither; a sandbox of A's is 404.
	run api -H "X-API-KEY: $KEY_B" "$URL/v1/credentials"
	jq -e '[.credentials[].name] | (index("gh") == null and index("one") == null)' "$T/body"
	run api -H "X-API-KEY: $KEY_B" -d "{\"name\":\"x\",\"scope\":\"sandbox/$id\",\"hosts\":\"x.test\",\"inject\":\"basic\",\"secret\":\"u:p\"}" "$URL/v1/credentials"
	[ "$output" = 404 ]
	run api -X DELETE -H "X-API-KEY: $KEY_B" "$URL/v1/credentials/gh?scope=tenant"
	[ "$output" = 404 ]
	run api -H "X-API-KEY: $KEY_A" "$URL/v1/credentials"
	jq -e '[.credentials[].name] | sort == ["gh","one"]' "$T/body"
	! grep -q s3cret "$T/body" || false
	run api -X PUT -H "X-API-KEY: $KEY_A" -d '{"scope":"tenant","secret":"s3cret-b"}' "$URL/v1/credentials/gh"
	[ "$output" = 200 ]
	jq -e '.version == 2' "$T/body"
	run api -X DELETE -H "X-API-KEY: $KEY_A" "$URL/v1/credentials/gh?scope=tenant"
	[ "$output" = 200 ]
	# A tenant's egress policy, and a sandbox's own over it.
	run api -X PUT -H "X-API-KEY: $KEY_A" -d '{"allow":["api.github.com:443"]}' "$URL/v1/egress"
	[ "$output" = 200 ]
	space-egress check --tenant "$RUN-a" api.github.com 443 | jq -e '.decision == "allow" and .source == "tenant"'
	run api -X PUT -H "X-API-KEY: $KEY_A" -d '{"allow":["pypi.org:443"]}' "$URL/v1/sandboxes/$id/egress"
	[ "$output" = 200 ]
	run api -H "X-API-KEY: $KEY_A" "$URL/v1/sandboxes/$id/egress"
	jq -e '.allow == ["pypi.org:443"]' "$T/body"
	run api -X PUT -H "X-API-KEY: $KEY_B" -d '{"allow":["*"]}' "$URL/v1/sandboxes/$id/egress"
	[ "$output" = 404 ]
	run api -X PUT -H "X-API-KEY: $KEY_A" -d '{"allow":["x.test:70000"]}' "$URL/v1/egress"
	[ "$output" = 400 ]
	run api -X DELETE -H "X-API-KEY: $KEY_A" "$URL/v1/egress"
	[ "$output" = 200 ]
	space-rm "$id" >/dev/null
}

@test "a tenant's templates: one it may not use is one that is not there" {
	# Names no template on this node has (the node's root outlives a run).
	space-tenant set "$RUN-b" --templates not-here-1,not-here-2 >/dev/null
	run api -H "X-API-KEY: $KEY_B" -d '{"template":"minimal"}' "$URL/v1/sandboxes"
	[ "$output" = 404 ]
	jq -e '.error == "not-found" and (.msg | test("template minimal"))' "$T/body"
	run api -X POST -H "X-API-KEY: $KEY_B" -H 'Content-Type: application/json' -d '{"templateID":"minimal"}' "$URL/v2/sandboxes"
	[ "$output" = 404 ]
	run api -H "X-API-KEY: $KEY_B" "$URL/v1/templates"
	jq -e '.templates == []' "$T/body"
	space-tenant ls | jq -se --arg t "$RUN-b" 'map(select(.tenant == $t)) | .[0].templates == ["not-here-1","not-here-2"]'
	space-tenant set "$RUN-b" --templates all >/dev/null
	run api -H "X-API-KEY: $KEY_B" "$URL/v1/templates"
	jq -e '[.templates[].name] | index("minimal") != null' "$T/body"
}

@test "a quota is checked as the sandbox is created: over it, nothing is made" {
	run api -H "X-API-KEY: $KEY_Q" -d '{"template":"minimal"}' "$URL/v1/sandboxes"
	[ "$output" = 201 ]
	first=$(jq -r .id "$T/body")
	echo "$first" >>"$T/ids"
	before=$(space-ls | jq -s 'length')
	run api -H "X-API-KEY: $KEY_Q" -d '{"template":"minimal"}' "$URL/v1/sandboxes"
	[ "$output" = 429 ]
	jq -e '.error == "quota-exceeded"' "$T/body"
	[ "$(space-ls | jq -s 'length')" = "$before" ]
	run api -H "X-API-KEY: $KEY_Q" "$URL/v1/quota"
	jq -e '.quota.running == 1 and .uses.running == 1' "$T/body"
	# The same quota holds for a create on the command line.
	run space-create --template minimal --label "tenant=$RUN-q"
	[ "$status" -ne 0 ]
	jout -e '.error == "quota-exceeded"'
	# Paused, it runs no more: another may run.
	space-pause "$first" >/dev/null
	run api -H "X-API-KEY: $KEY_Q" -d '{"template":"minimal"}' "$URL/v1/sandboxes"
	[ "$output" = 201 ]
	space-rm "$first" "$(jq -r .id "$T/body")" >/dev/null
}

@test "malformed JSON is 400, a body over the bound is 413, and nothing is made" {
	before=$(space-ls | jq -s 'length')
	for body in '{' '[]' '{"template":"minimal","vcpus":"x"}' '{"template":"minimal","extra":1}' \
	    '{"template":"minimal","labels":{"tenant":"other"}}' '{"template":"minimal","env":["1X=y"]}' \
	    '{"template":"minimal","cpu_quota":-1}' '{"template":"minimal","cpu_quota":1025}' \
	    '{"template":"minimal","cpu_quota":0.001}' '{"template":"minimal","cpu_quota":"1"}' \
	    '{"template":"minimal","disk_gb":-1}' '{"template":"minimal","disk_gb":1.5}' \
	    '{"template":"minimal","ttl":"soon"}' '{"template":"minimal","ttl":60}' \
	    '{"template":"minimal","ttl":"0s"}' '{"template":"minimal","on_expiry":"pause"}' \
	    '{"template":"minimal","ttl":"1h","on_expiry":"explode"}'; do
		run api -H "X-API-KEY: $KEY_A" -d "$body" "$URL/v1/sandboxes"
		[ "$output" = 400 ] || { echo "$body: $output"; false; }
		jq -e '.error == "bad-input"' "$T/body"
	done
	run api -X POST -H "X-API-KEY: $KEY_A" -H 'Content-Type: application/json' -d '{"templateID":' "$URL/v2/sandboxes"
	[ "$output" = 400 ]
	jq -e '.code == 400' "$T/body"
	head -c 2000000 /dev/zero | tr '\0' ' ' >"$T/big"
	run api -H "X-API-KEY: $KEY_A" --data-binary @"$T/big" "$URL/v1/sandboxes"
	[ "$output" = 413 ]
	# Chunked, with no length said: cut at the bound all the same.
	run api -H "X-API-KEY: $KEY_A" -H 'Transfer-Encoding: chunked' --data-binary @"$T/big" "$URL/v1/sandboxes"
	[ "$output" = 413 ]
	[ "$(space-ls | jq -s 'length')" = "$before" ]
	run api -X PATCH -H "X-API-KEY: $KEY_A" "$URL/v1/sandboxes"
	[ "$output" = 405 ]
	run api -H "X-API-KEY: $KEY_A" "$URL/v1/nothing/here"
	[ "$output" = 404 ]
}

@test "a key's rate: over it, 429 rate-limited" {
	codes=$(for _ in $(seq 15); do api -H "X-API-KEY: $KEY_SLOW" "$URL/v1/sandboxes"; echo; done | sort | uniq -c)
	echo "$codes"
	grep -q ' 200$' <<<"$codes"
	grep -q ' 429$' <<<"$codes"
	run api -H "X-API-KEY: $KEY_SLOW" "$URL/v1/sandboxes"
	jq -e '.error == "rate-limited"' "$T/body"
}

@test "headers sent a byte a second hold one connection; others are served" {
	python3 - "$PORT" >"$T/slow.out" 2>&1 <<-'EOF' &
	import socket, sys, time
	s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
	for b in b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 30:
	    s.send(bytes([b])); time.sleep(1)
	EOF
	slow=$!
	sleep 2
	start=$(date +%s%N)
	for _ in $(seq 20); do
		run api -H "X-API-KEY: $KEY_A" "$URL/v1/sandboxes"
		[ "$output" = 200 ]
	done
	ms=$(( ($(date +%s%N) - start) / 1000000 ))
	echo "20 requests in $ms ms beside the slow client"
	kill -0 "$slow"		# it was still sending
	kill "$slow" 2>/dev/null || true
}

@test "100 clients at once are all served" {
	seq 100 | xargs -P 100 -I{} curl -s -o /dev/null -w '%{http_code}\n' -m 60 \
	    -H "X-API-KEY: $KEY_A" "$URL/v1/sandboxes" >"$T/codes"
	[ "$(grep -c '^200$' "$T/codes")" = 100 ]
}

@test "every request is a line of the audit log: who, what, which sandbox, outcome" {
	run api -H "X-API-KEY: $KEY_B" "$URL/v1/sandboxes/aaaaaaaaaaaa"
	sleep 0.2
	line=$(grep aaaaaaaaaaaa "$AUDIT" | tail -n 1)
	jq -e --arg t "$RUN-b" '.tenant == $t and .method == "GET" and .sandbox == "aaaaaaaaaaaa" and .status == 404 and .error == "not-found" and (.key | length == 16) and .ms >= 0' <<<"$line"
	# Nothing of a key's secret is in it.
	! grep -q "${KEY_B#spk_*_}" "$AUDIT" || false
	n=$(wc -l <"$AUDIT")
	[ "$n" -gt 100 ]
}

@test "every call of a known caller is an event: its tenant, route, outcome; and the states it changed" {
	after=$(space-events | tail -n 1 | jq -r '.seq // 0')
	run api -H "Authorization: Bearer $KEY_A" -d '{"template":"minimal"}' "$URL/v1/sandboxes"
	[ "$output" = 201 ]
	id=$(jq -r .id "$T/body")
	echo "$id" >>"$T/ids"
	run api -X POST -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/$id/pause"
	[ "$output" = 200 ]
	run api -H "Authorization: Bearer $KEY_B" "$URL/v1/sandboxes/$id"
	[ "$output" = 404 ]
	run api -X DELETE -H "Authorization: Bearer $KEY_ADMIN" "$URL/v1/sandboxes/$id"
	[ "$output" = 200 ]
	# No key: no event (a flood of strangers does not fill the log).
	run api "$URL/v1/sandboxes/$id"
	[ "$output" = 401 ]
	sleep 0.3
	space-events --after "$after" --id "$id" > "$T/ev"
	jq -c 'select(.action | startswith("api.")) | [.actor, .action, .ok, .status]' "$T/ev" > "$T/calls"
	admin=$(cut -c5-20 <<<"$KEY_ADMIN")
	cat > "$T/want" <<-EOF
	["tenant:$RUN-a","api.create",true,201]
	["tenant:$RUN-a","api.pause",true,200]
	["tenant:$RUN-b","api.get",false,404]
	["admin:$admin","api.remove",true,200]
	EOF
	diff -u "$T/want" "$T/calls"
	jq -se 'map(select(.action == "api.get"))[0].error == "not-found"' "$T/ev"
	# The changes of state the API made name the caller too.
	jq -se --arg a "tenant:$RUN-a" 'any(.[]; .action == "state" and .to == "paused" and .actor == $a and .via == "space-apid")' "$T/ev"
	jq -se --arg a "admin:$admin" 'any(.[]; .action == "state" and .to == "removed" and .actor == $a)' "$T/ev"
}

@test "E2B SDK: create, getInfo, list, setTimeout, pause, connect, kill, timeout" {
	cd "$top/tests/e2b"
	E2B_API_URL=$URL E2B_SANDBOX_URL=$URL E2B_API_KEY=$KEY_A run node lifecycle.mjs
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(grep -c '^ok' <<<"$output")" = 8 ]
}

@test "E2B SDK: commands.run, background, kill, sendStdin, closeStdin, pty" {
	cd "$top/tests/e2b"
	E2B_API_URL=$URL E2B_SANDBOX_URL=$URL E2B_API_KEY=$KEY_A run node commands.mjs
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(grep -c '^ok' <<<"$output")" = 8 ]
}

@test "E2B SDK: files read, write, list, makeDir, remove, rename, exists, getInfo" {
	cd "$top/tests/e2b"
	E2B_API_URL=$URL E2B_SANDBOX_URL=$URL E2B_API_KEY=$KEY_A run node files.mjs
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(grep -c '^ok' <<<"$output")" = 9 ]
}

@test "E2B SDK: a wrong key, another tenant's sandbox, a quota, what is not here" {
	cd "$top/tests/e2b"
	E2B_API_URL=$URL E2B_SANDBOX_URL=$URL E2B_API_KEY=$KEY_A SPACE_E2B_OTHER_KEY=$KEY_B \
	    SPACE_E2B_QUOTA_KEY=$KEY_Q run node errors.mjs
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(grep -c '^ok' <<<"$output")" = 5 ]
}

@test "docs/api.yaml and the server's routes are the same set" {
	space-apid --routes | jq -r '"\(.method) \(.path)"' | sort >"$T/served"
	python3 - "$top/docs/api.yaml" <<-'EOF' | sort >"$T/documented"
	import sys, yaml
	doc = yaml.safe_load(open(sys.argv[1]))
	for path, ops in doc["paths"].items():
	    for m in ops:
	        if m in ("get", "post", "put", "delete", "patch"):
	            print(m.upper(), path)
	EOF
	diff "$T/documented" "$T/served"
}

@test "--tls: a certificate the node CA signs, and no plain HTTP" {
	read -r p < <(free_ports 1)
	# As space, the leaf is space-noded's to mint (tls-leaf): the CA's
	# key is root's alone.
	$AS_API space-apid --tls --listen "127.0.0.1:$p" --audit "${AUDIT_DIR:-$T}/tls.log" >"$T/tls.out" &
	pid=$!
	for _ in $(seq 50); do grep -q listen "$T/tls.out" && break; sleep 0.1; done
	jq -e '.tls == true' "$T/tls.out"
	[ -z "${SPACE_API_USER:-}" ] || ! $AS_API cat "$SPACE_ROOT/ca/ca.key" >/dev/null
	code=$(curl -s -o "$T/body" -w '%{http_code}' --cacert "$SPACE_ROOT/ca/ca.crt" \
	    -H "X-API-KEY: $KEY_A" "https://127.0.0.1:$p/v1/sandboxes")
	[ "$code" = 200 ]
	jq -e '.ok' "$T/body"
	# Without the CA the certificate is not trusted; plain HTTP gets nothing.
	! curl -s -o /dev/null "https://127.0.0.1:$p/v1/sandboxes" || false
	! curl -s -m 5 -o /dev/null "http://127.0.0.1:$p/v1/sandboxes" || false
	kill "$pid"
	wait "$pid" || true
}

@test "the server stops on SIGTERM" {
	read -r p < <(free_ports 1)
	$AS_API space-apid --listen "127.0.0.1:$p" >"$T/stop.out" &
	pid=$!
	for _ in $(seq 50); do grep -q listen "$T/stop.out" && break; sleep 0.1; done
	kill -TERM "$pid"
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	! kill -0 "$pid" 2>/dev/null
}
