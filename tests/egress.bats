#!/usr/bin/env bats
# space-egress end to end (design.md), on a plain temporary SPACE_ROOT: no
# space-init, no VM, no packet.  The addresses the gateway would resolve are
# given with --addr; the examples are documentation ranges and loopback.
load helper

ID=k3j5x7aa2mqd
ID2=b6yq4fh2ntza

setup() {
	export SPACE_ROOT="$BATS_TEST_TMPDIR/root"
	export SPACE_DB="sqlite:$SPACE_ROOT/space.db"
	export SPACE_CONF=/dev/null
	unset SPACE_EGRESS_NEVER SPACE_EGRESS_ALLOW_NEVER SPACE_CRASH_AT
	mkdir -p "$SPACE_ROOT"
	runners "$SPACE_ROOT"
}

# The decision of check as "decision/reason".
decision() {
	space-egress check "$@" | jq -r '"\(.decision)/\(.reason)"'
}

@test "set, then show: the policy in canonical form, from the sandbox, in its file" {
	run space-egress set "$ID" --allow API.Example.com:443 '*.example.org' \
	    203.0.113.0/24:443 '[2001:DB8::]/32:443' --deny bad.example.org
	assert_success
	jout -e --arg id "$ID" '.id == $id and .ok and
	    .allow == ["api.example.com:443", "*.example.org", "203.0.113.0/24:443", "[2001:db8::]/32:443"] and
	    .deny == ["bad.example.org"]'
	run space-egress show "$ID"
	assert_success
	jout -e --arg id "$ID" '.id == $id and .ok and .source == "sandbox" and
	    .tenant == "default" and (.template | not) and (.allow | length) == 4 and
	    .deny == ["bad.example.org"] and .updated > 0'
	f=$SPACE_ROOT/egress/$ID.json
	jq -e '.version == 1 and (.allow | length) == 4 and (.deny | length) == 1 and (.updated | type) == "number"' "$f"
	# Root's alone, its directory too: no VM's jail reads a policy.
	[ "$(stat -c %a "$f")" = 600 ]
	[ "$(stat -c %a "$SPACE_ROOT/egress")" = 700 ]
	# Written through a temporary file and renamed: none is left.
	[ -z "$(find "$SPACE_ROOT/egress" -name '.*' -type f)" ]
}

@test "set replaces the whole policy; --allow and --deny take lists, repeated or with commas" {
	space-egress set "$ID" --allow a.example b.example >/dev/null
	run space-egress set "$ID" --allow c.example,d.example --allow 'e.example f.example' --deny g.example --deny h.example
	assert_success
	run space-egress show "$ID"
	jout -e '.allow == ["c.example", "d.example", "e.example", "f.example"] and .deny == ["g.example", "h.example"]'
	# The same rule twice, in two spellings, is kept once.
	space-egress set "$ID" --allow x.example X.EXAMPLE. x.example:* >/dev/null
	[ "$(space-egress show "$ID" | jq -c .allow)" = '["x.example"]' ]
	# No rule at all is a policy too: it denies everything.
	run space-egress set "$ID"
	assert_success
	jout -e '.allow == [] and .deny == []'
	space-egress show "$ID" | jq -e '.source == "sandbox" and .allow == []'
}

@test "a bad rule is bad input (exit 100), quoted in the message, and changes nothing" {
	space-egress set "$ID" --allow good.example >/dev/null
	before=$(cat "$SPACE_ROOT/egress/$ID.json")
	for rule in 'a..example' 'good.example:0' 'good.example:65536' 'good.example:443-80' \
	    '*.*.example' 'ex*mple.com' '2001:db8::/32' '[2001:db8::1]/32' '203.0.113.5/24' \
	    '203.0.113.0/33' '127.1' '0x7f.1' "$(printf 'b\xc3\xbccher.example')" \
	    "$(printf 'a\x01b')" ':443' '[192.0.2.1]' "$(head -c 301 /dev/zero | tr '\0' a)"; do
		run space-egress set "$ID" --allow good.example "$rule"
		[ "$status" -eq 100 ] || { echo "accepted: $rule"; false; }
		jout -e '.ok == false and .error == "bad-input" and (.msg | test("egress rule \""))'
		[ "$(cat "$SPACE_ROOT/egress/$ID.json")" = "$before" ]
	done
	run space-egress set "$ID" --deny 'good.example:99999'
	[ "$status" -eq 100 ]
	jout -e '.msg | contains("\"good.example:99999\"")'
	[ "$(cat "$SPACE_ROOT/egress/$ID.json")" = "$before" ]
}

@test "bad ids, names and usage are exit 100; no file is made" {
	for id in not_an_id ../../etc/passwd AAAAAAAAAAAA k3j5x7aa2mq.; do
		run space-egress set "$id" --allow a.example
		[ "$status" -eq 100 ]
		jout -e '.error == "bad-input"'
	done
	# A sandbox's name goes where its id does, looked up in the state DB:
	# this root has none (input.bats: one nobody has is not-found).
	for verb in "set no-such-name --allow a.example" "show no-such-name" \
	    "clear no-such-name" "check no-such-name a.example 443"; do
		# shellcheck disable=SC2086
		run space-egress $verb
		[ "$status" -eq 1 ]
		jout -e '.error == "not-initialized" and (.msg | test("space-init"))'
	done
	run space-egress set --tenant 'a/b' --allow a.example
	[ "$status" -eq 100 ]
	run space-egress set --template '..' --allow a.example
	[ "$status" -eq 100 ]
	run space-egress show 'x/y'
	[ "$status" -eq 100 ]
	[ ! -e "$SPACE_ROOT/egress" ] || [ -z "$(ls -A "$SPACE_ROOT/egress")" ]
	run space-egress
	[ "$status" -eq 100 ]
	run space-egress frob "$ID"
	[ "$status" -eq 100 ]
	run space-egress set "$ID" --allow a.example --bogus
	[ "$status" -eq 100 ]
	run space-egress set "$ID" --tenant acme --allow a.example	# two targets
	[ "$status" -eq 100 ]
	run space-egress set "$ID" "$ID2" --allow a.example
	[ "$status" -eq 100 ]
	run space-egress set --allow a.example				# no target
	[ "$status" -eq 100 ]
	run space-egress check "$ID" a.example				# no port
	[ "$status" -eq 100 ]
	run space-egress check "$ID" a.example 0
	[ "$status" -eq 100 ]
	run space-egress check "$ID" a.example 65536
	[ "$status" -eq 100 ]
	run space-egress check "$ID" 'a..example' 443
	[ "$status" -eq 100 ]
	run space-egress check "$ID" a.example 443 --addr not-an-address
	[ "$status" -eq 100 ]
	run space-egress check "$ID" a.example --dns --addr 203.0.113.5
	[ "$status" -eq 100 ]
	[ ! -e "$SPACE_ROOT/egress" ] || [ -z "$(ls -A "$SPACE_ROOT/egress")" ]
}

@test "defaults: sandbox > tenant > template > none, each cleared in turn" {
	run space-egress set --template base --allow template.example
	assert_success
	jout -e '.ok and .template == "base" and .allow == ["template.example"] and (.id | not)'
	run space-egress set --tenant acme --allow tenant.example
	assert_success
	jout -e '.ok and .tenant == "acme"'
	space-egress set "$ID" --allow sandbox.example >/dev/null
	[ -f "$SPACE_ROOT/egress/template-base.json" ]
	[ -f "$SPACE_ROOT/egress/tenant-acme.json" ]

	run space-egress show "$ID" --tenant acme --template base
	jout -e '.source == "sandbox" and .allow == ["sandbox.example"] and .tenant == "acme" and .template == "base"'
	run space-egress clear "$ID"
	assert_success
	jout -e --arg id "$ID" '.id == $id and .ok and .removed == true'
	run space-egress show "$ID" --tenant acme --template base
	jout -e '.source == "tenant" and .allow == ["tenant.example"]'
	run space-egress clear --tenant acme
	assert_success
	jout -e '.ok and .tenant == "acme" and .removed == true'
	run space-egress show "$ID" --tenant acme --template base
	jout -e '.source == "template" and .allow == ["template.example"]'
	run space-egress clear --template base
	jout -e '.ok and .template == "base" and .removed == true'
	run space-egress show "$ID" --tenant acme --template base
	assert_success
	jout -e '.source == "none" and .allow == [] and .deny == [] and (.updated | not)'
	[ "$(decision "$ID" --tenant acme template.example 443)" = deny/not-allowed ]
	run space-egress clear --template base
	jout -e '.removed == false'
}

@test "a sandbox without a record is of tenant default; the defaults shown alone" {
	space-egress set --tenant default --allow '*.example.com:443' >/dev/null
	run space-egress show "$ID"
	jout -e '.source == "tenant" and .tenant == "default" and .allow == ["*.example.com:443"]'
	run space-egress show --tenant default
	jout -e '.source == "tenant" and .tenant == "default" and (.id | not)'
	run space-egress show --template nothing-here
	assert_success
	jout -e '.source == "none" and .template == "nothing-here"'
}

@test "a sandbox's record in the state DB names its tenant and template" {
	space-egress set --tenant acme --allow tenant.example >/dev/null
	space-egress set --template base --allow template.example >/dev/null
	# An empty DB file: the first command to open it makes the schema.
	sqlite3 "$SPACE_ROOT/space.db" 'PRAGMA user_version'
	runners "$SPACE_ROOT/space.db"
	space-egress show "$ID" | jq -e '.source == "none" and .tenant == "default"'
	sqlite3 "$SPACE_ROOT/space.db" "INSERT INTO sandboxes (id, state, template, node, created, updated, memory_mib, vcpus, labels) VALUES
	    ('$ID', 'running', 'base@0123abcd', 'check', 0, 0, 256, 1, '{\"tenant\":\"acme\"}'),
	    ('$ID2', 'running', 'base@0123abcd', 'check', 0, 0, 256, 1, '{}')"
	run space-egress show "$ID" "$ID2"
	assert_success
	jout -s -e '.[0].source == "tenant" and .[0].tenant == "acme" and .[0].template == "base" and .[0].allow == ["tenant.example"]'
	jout -s -e '.[1].source == "template" and .[1].tenant == "default" and .[1].template == "base" and .[1].allow == ["template.example"]'
	[ "$(decision "$ID" tenant.example 443 --addr 203.0.113.5)" = allow/allowed ]
	[ "$(decision "$ID2" tenant.example 443 --addr 203.0.113.5)" = deny/not-allowed ]
	# --tenant and --template say otherwise than the record.
	space-egress show "$ID" --tenant nobody | jq -e '.source == "template" and .tenant == "nobody"'
}

@test "show and clear take many ids, or ids and JSON lines on stdin" {
	space-egress set "$ID" --allow a.example >/dev/null
	space-egress set "$ID2" --allow b.example >/dev/null
	run space-egress show "$ID" "$ID2"
	assert_success
	[ "$(jout -s -c 'map(.allow[0])')" = '["a.example","b.example"]' ]
	run bash -c "printf '%s\n{\"id\":\"%s\"}\n' $ID $ID2 | space-egress clear"
	assert_success
	jout -s -e 'length == 2 and all(.removed)'
	[ -z "$(ls -A "$SPACE_ROOT/egress")" ]
	run bash -c "printf 'bad-id\n%s\n' $ID | space-egress clear"
	[ "$status" -eq 100 ]
	jout -s -e '.[0].error == "bad-input" and .[1].removed == false'
}

@test "check: names before and after resolving, deny over allow, ports, addresses, DNS" {
	space-egress set "$ID" --allow api.example.com:443 '*.example.org:8000-8999' \
	    203.0.113.0/24:443 '[2001:db8::]/32' --deny bad.example.org 203.0.113.128/25 >/dev/null
	# Without addresses: the decision taken before resolving.
	run space-egress check "$ID" api.example.com 443
	assert_success
	jout -e '.decision == "allow" and .reason == "resolve" and .rule == "api.example.com:443" and .addrs == [] and .source == "sandbox" and .port == 443'
	[ "$(decision "$ID" api.example.com 80)" = deny/not-allowed ]
	[ "$(decision "$ID" API.EXAMPLE.COM. 443)" = allow/resolve ]
	[ "$(decision "$ID" other.example.com 443)" = deny/not-allowed ]
	[ "$(decision "$ID" x.example.org 8000)" = allow/resolve ]
	[ "$(decision "$ID" x.example.org 8999)" = allow/resolve ]
	[ "$(decision "$ID" x.example.org 9000)" = deny/not-allowed ]
	[ "$(decision "$ID" example.org 8000)" = deny/not-allowed ]
	[ "$(decision "$ID" bad.example.org 8000)" = deny/denied-by-rule ]
	# With the addresses the gateway resolved: only those that pass.
	run space-egress check "$ID" api.example.com 443 --addr 203.0.113.5 10.0.0.5 198.51.100.7
	jout -e '.decision == "allow" and .reason == "allowed" and .addrs == ["203.0.113.5", "198.51.100.7"]'
	run space-egress check "$ID" api.example.com 443 --addr 10.0.0.5 --addr 169.254.169.254 ::1
	jout -e '.decision == "deny" and .reason == "never-list" and .rule == "10.0.0.0/8" and .addrs == []'
	run space-egress check "$ID" api.example.com 443 --addr 203.0.113.200
	jout -e '.decision == "deny" and .reason == "denied-by-rule" and .rule == "203.0.113.128/25"'
	# Address hosts: the network rules.
	[ "$(decision "$ID" 203.0.113.9 443)" = allow/allowed ]
	[ "$(decision "$ID" ::ffff:203.0.113.9 443)" = allow/allowed ]
	[ "$(decision "$ID" 203.0.113.9 80)" = deny/not-allowed ]
	[ "$(decision "$ID" 203.0.113.200 443)" = deny/denied-by-rule ]
	[ "$(decision "$ID" '[2001:db8::7]' 22)" = allow/allowed ]
	[ "$(decision "$ID" 2001:db8::7 22)" = allow/allowed ]
	[ "$(decision "$ID" 198.51.100.7 443)" = deny/not-allowed ]
	# DNS: a name no rule allows does not resolve.
	run space-egress check "$ID" api.example.com --dns
	jout -e '.dns == true and .decision == "allow" and (.port | not)'
	[ "$(decision "$ID" x.example.org --dns)" = allow/allowed ]
	[ "$(decision "$ID" bad.example.org --dns)" = deny/denied-by-rule ]
	[ "$(decision "$ID" secret-data.attacker.example --dns)" = deny/not-allowed ]
	# No policy at all: deny.
	[ "$(decision "$ID2" api.example.com 443 --addr 203.0.113.5)" = deny/not-allowed ]
}

@test "the never-list: loopback refused unless SPACE_EGRESS_ALLOW_NEVER excepts it" {
	space-egress set "$ID" --allow '*' >/dev/null
	for a in 127.0.0.1 10.1.2.3 172.16.0.1 192.168.1.1 100.64.0.1 169.254.169.254 \
	    0.0.0.0 224.0.0.1 255.255.255.255 ::1 fe80::1 fc00::1 ff02::1 \
	    ::ffff:127.0.0.1 '[::ffff:169.254.169.254]' ::ffff:10.0.0.1; do
		[ "$(decision "$ID" "$a" 8443)" = deny/never-list ] || { echo "reached: $a"; false; }
	done
	[ "$(decision "$ID" 198.51.100.1 8443)" = allow/allowed ]
	[ "$(decision "$ID" localhost 8443 --addr 127.0.0.1)" = deny/never-list ]
	export SPACE_EGRESS_ALLOW_NEVER=127.0.0.1:8443
	[ "$(decision "$ID" 127.0.0.1 8443)" = allow/allowed ]
	[ "$(decision "$ID" ::ffff:127.0.0.1 8443)" = allow/allowed ]
	[ "$(decision "$ID" localhost 8443 --addr 127.0.0.1 ::1)" = allow/allowed ]
	[ "$(decision "$ID" 127.0.0.1 8444)" = deny/never-list ]
	[ "$(decision "$ID" 127.0.0.2 8443)" = deny/never-list ]
	# An exception lifts the never-list; the policy still decides.
	space-egress set "$ID" --allow 198.51.100.0/24 >/dev/null
	[ "$(decision "$ID" 127.0.0.1 8443)" = deny/not-allowed ]
}

@test "SPACE_EGRESS_NEVER replaces the list; the node's own addresses stay; bad values are exit 100" {
	space-egress set "$ID" --allow '*' >/dev/null
	run env SPACE_EGRESS_NEVER=198.51.100.0/24 space-egress check "$ID" 198.51.100.1 443
	jout -e '.reason == "never-list" and .rule == "198.51.100.0/24"'
	run env SPACE_EGRESS_NEVER=198.51.100.0/24 space-egress check "$ID" 240.0.0.5 443
	jout -e '.decision == "allow"'
	run env SPACE_EGRESS_NEVER='default 198.51.100.0/24' space-egress check "$ID" 10.0.0.1 443
	jout -e '.reason == "never-list"'
	# 127.0.0.1 is an address of this node (lo): never, whatever the list.
	run env SPACE_EGRESS_NEVER=none space-egress check "$ID" 127.0.0.1 443
	jout -e '.reason == "never-list" and .rule == "node-address"'
	run env SPACE_EGRESS_NEVER=none space-egress check "$ID" 240.0.0.5 443
	jout -e '.decision == "allow"'
	for bad in 'internal.example' 'none 10.0.0.0/8' '10.0.0.0/33'; do
		run env "SPACE_EGRESS_NEVER=$bad" space-egress check "$ID" 198.51.100.1 443
		[ "$status" -eq 100 ]
		jout -e '.error == "bad-input" and (.msg | contains("SPACE_EGRESS_NEVER"))'
	done
	run env SPACE_EGRESS_ALLOW_NEVER='localhost:8443' space-egress check "$ID" 198.51.100.1 443
	[ "$status" -eq 100 ]
}

@test "a change applies to the next decision at once" {
	space-egress set "$ID" --allow api.example.com:443 >/dev/null
	[ "$(decision "$ID" api.example.com 443 --addr 203.0.113.5)" = allow/allowed ]
	space-egress set "$ID" --allow api.example.com:443 --deny api.example.com >/dev/null
	[ "$(decision "$ID" api.example.com 443 --addr 203.0.113.5)" = deny/denied-by-rule ]
	space-egress clear "$ID" >/dev/null
	[ "$(decision "$ID" api.example.com 443 --addr 203.0.113.5)" = deny/not-allowed ]
}

@test "kill -9 of set before its rename: the old policy stays, whole" {
	space-egress set "$ID" --allow old.example >/dev/null
	run env SPACE_CRASH_AT=egress-before-rename space-egress set "$ID" --allow new.example
	[ "$status" -eq 137 ]
	space-egress show "$ID" | jq -e '.allow == ["old.example"]'
}

@test "a policy file that does not read: corrupt (exit 1), and no fallback to a wider default" {
	space-egress set --tenant default --allow '*' >/dev/null
	space-egress set "$ID" --allow a.example >/dev/null
	for text in '{"version":1,"allow":["*"]' '{"version":1,"allow":[],"deny":[],"x":1}' \
	    '{"version":1,"allow":["a..b"],"deny":[]}' ''; do
		printf '%s' "$text" > "$SPACE_ROOT/egress/$ID.json"
		run space-egress show "$ID"
		[ "$status" -eq 1 ]
		jout -e '.ok == false and .error == "corrupt"'
		run space-egress check "$ID" api.example.com 443 --addr 203.0.113.5
		[ "$status" -eq 1 ]
		jout -e '.error == "corrupt"'
	done
	ln -sf /etc/passwd "$SPACE_ROOT/egress/$ID.json"
	run space-egress show "$ID"
	[ "$status" -eq 1 ]
	jout -e '.error == "corrupt"'
	run space-egress clear "$ID"
	assert_success
	[ -e /etc/passwd ]
}

@test "the completions know space-egress" {
	run bash -c "source '$top/completion/space.bash'
		COMP_WORDS=(space-egress ''); COMP_CWORD=1; _space; echo \"\${COMPREPLY[*]}\"
		COMP_WORDS=(space-egress set $ID --a); COMP_CWORD=3; _space; echo \"\${COMPREPLY[*]}\"
		complete -p space-egress"
	assert_success
	assert_line --index 0 'set show clear check'
	assert_line --index 1 '--allow'
	grep -q 'space-egress' "$top/completion/_space"
}
