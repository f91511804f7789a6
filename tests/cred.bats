#!/usr/bin/env bats
# space-cred end to end (design.md): the credential store on a plain
# temporary SPACE_ROOT -- no VM, no DB, no space-init.  Secrets come in on
# stdin and never come out: not in the output, not in any file but sealed.
# The cmd: vault runs the test secret manager (build/tests/vault-test, or
# $SPACE_VAULT_TEST).  Injection itself, expiry and rate limits on a fake
# clock are in tests/unit/test-cred.c.
load helper

vault_test=${SPACE_VAULT_TEST:-$top/build/tests/vault-test}

setup() {
	export SPACE_ROOT="$BATS_TEST_TMPDIR/root"
	export SPACE_CONF=/dev/null
	unset SPACE_CRED_VAULT VAULT_TEST_MODE
	mkdir -p "$SPACE_ROOT"
	runners "$SPACE_ROOT"
}

# add NAME SCOPE HOSTS [more options], the secret on stdin.
add() {
	space-cred add --name "$1" --scope "$2" --host "$3" \
	    --inject 'header:Authorization:Bearer {}' "${@:4}"
}

# No byte string $1 in any file under $SPACE_ROOT.
nowhere() {
	! grep -rqF -- "$1" "$SPACE_ROOT"
}

# The cmd: vault with the test program, its secrets in $VAULT_TEST_DIR.
use_cmd_vault() {
	[ -x "$vault_test" ] || {
		echo "# $vault_test is not built (see tests/vault/vault-test.c)" >&3
		return 1
	}
	export VAULT_TEST_DIR="$BATS_TEST_TMPDIR/vault"
	mkdir -p "$VAULT_TEST_DIR"
	runners "$VAULT_TEST_DIR"
	export SPACE_CRED_VAULT="cmd:$vault_test"
}

@test "add: the secret from stdin, a record without it, exit 0" {
	run add gh global 'API.GitHub.com,*.GitHubUserContent.com' --rate 100/m \
	    <<<'S3CR3T-add-1'
	assert_success
	refute_output --partial S3CR3T
	jout -e '.ok and .name == "gh" and .scope == "global" and
	    .hosts == ["api.github.com", "*.githubusercontent.com"] and
	    .inject == "header:Authorization:Bearer {}" and .expires == null and
	    .rate == "100/m" and .version == 1 and .created > 0 and
	    .rotated == .created and .vault == "file" and (.ref | startswith("gh."))'
	nowhere S3CR3T-add-1
}

@test "ls: every field but the secret, one line per credential" {
	add gh global api.github.com <<<'S3CR3T-ls-1' >/dev/null
	add gh tenant/acme api.github.com --expires 4102444800 <<<'S3CR3T-ls-2' >/dev/null
	add npm project/acme/web registry.npmjs.org <<<'S3CR3T-ls-3' >/dev/null
	run space-cred ls
	assert_success
	refute_output --partial S3CR3T
	[ "$(grep -c '^{' <<<"$output")" -eq 3 ]
	jout -s -e 'map(keys) | unique == [["created", "expires", "hosts", "inject",
	    "name", "rate", "ref", "rotated", "scope", "vault", "version"]]'
	jout -s -e 'map("\(.name)@\(.scope)") == ["gh@global", "gh@tenant/acme",
	    "npm@project/acme/web"]'
	jout -s -e '.[1].expires == 4102444800'
}

@test "ls on a root without credentials: nothing, exit 0" {
	run space-cred ls
	assert_success
	assert_output ''
}

@test "the file vault: the secret sealed, the store root-only" {
	add gh global api.github.com <<<'S3CR3T-modes' >/dev/null
	nowhere S3CR3T-modes
	[ "$(stat -c %a "$SPACE_ROOT/creds")" = 700 ]
	[ "$(stat -c %a "$SPACE_ROOT/creds/vault.key")" = 600 ]
	[ "$(stat -c %s "$SPACE_ROOT/creds/vault.key")" = 32 ]
	[ "$(stat -c %a "$SPACE_ROOT/creds/scopes/global/gh.json")" = 600 ]
	[ "$(stat -c %a "$SPACE_ROOT/creds/audit.log")" = 600 ]
	run find "$SPACE_ROOT/creds" \( -type d ! -perm 700 \) -o \( -type f ! -perm 600 \)
	assert_output ''
	ref=$(jq -r .ref "$SPACE_ROOT/creds/scopes/global/gh.json")
	[ -f "$SPACE_ROOT/creds/vault/$ref" ]
	head -c 8 "$SPACE_ROOT/creds/vault/$ref" | grep -q spcred1
}

@test "bad input: exit 100, a clear error, nothing changed" {
	set -f	# $args is split, never globbed
	for args in \
	    "--name gh --scope tenant/.. --host a.com --inject basic" \
	    "--name gh --scope sandbox/NOTANID --host a.com --inject basic" \
	    "--name ../gh --scope global --host a.com --inject basic" \
	    "--name gh --scope global --host a_b.com --inject basic" \
	    "--name gh --scope global --host *.com --inject basic" \
	    "--name gh --scope global --host a.com:443 --inject basic" \
	    "--name gh --scope global --host a.com --inject bearer" \
	    "--name gh --scope global --host a.com --inject header:Host:{}" \
	    "--name gh --scope global --host a.com --inject header:X:{}{}" \
	    "--name gh --scope global --host a.com --inject basic --rate 5/w" \
	    "--name gh --scope global --host a.com --inject basic --rate 0/s" \
	    "--name gh --scope global --host a.com --inject basic --expires soon" \
	    "--name gh --scope global --host a.com --inject basic --expires 1000"; do
		run -100 space-cred add $args <<<'u:S3CR3T-bad'
		jout -e '.ok == false and .error == "bad-input" and (.msg | length) > 0'
		refute_output --partial S3CR3T
	done
	run -100 add gh global a.com < /dev/null
	jout -e '.error == "bad-input" and (.msg | test("no secret"))'
	run -100 add gh global a.com <<<''
	run -100 add gh global a.com < <(printf 'S3CR3T\033[0m\n')
	jout -e '.msg | test("control character")'
	run -100 add gh global a.com < <(head -c 9000 /dev/zero | tr '\0' a)
	jout -e '.msg | test("over 8192")'
	run -100 space-cred add --name gh --scope global --host a.com \
	    --inject basic <<<'nocolon'
	jout -e '.msg | test("USER:PASSWORD")'
	run space-cred ls
	assert_output ''
	run find "$SPACE_ROOT" -name '*.json'
	assert_output ''
}

@test "usage errors exit 100; a secret is never taken from argv" {
	run -100 space-cred
	run -100 space-cred frob
	run -100 space-cred ls extra
	run -100 space-cred rm
	run -100 space-cred rotate
	run -100 space-cred rotate a b
	run -100 space-cred resolve api.github.com
	run -100 space-cred resolve --sandbox abcdefghijkl
	run -100 space-cred audit --since
	run -100 space-cred add --name gh --scope global --inject basic
	run -100 space-cred add --name gh --name gh2 --scope global --host a.com --inject basic
	run -100 space-cred add --name gh --scope global --host a.com \
	    --inject basic --secret u:S3CR3T-argv
	run -100 space-cred rm gh --rate 1/s
	assert_output --partial usage
	run space-cred ls
	assert_output ''
}

@test "add of a name a scope holds: exists, exit 1; another scope overrides" {
	add gh global api.github.com <<<'S3CR3T-e1' >/dev/null
	run -1 add gh global api.github.com <<<'S3CR3T-e2'
	jout -e '.error == "exists"'
	run add gh sandbox/abcdefghijkl api.github.com <<<'S3CR3T-e3'
	assert_success
}

@test "rotate: a new secret from stdin, version + 1, the old one gone" {
	use_cmd_vault
	add gh global api.github.com --expires 4102444800 <<<'S3CR3T-r1' >/dev/null
	ref1=$(space-cred ls | jq -r .ref)
	# The program holds the secret exactly: the newline was cut.
	printf 'S3CR3T-r1' | cmp - "$VAULT_TEST_DIR/$ref1"
	run space-cred rotate gh < <(printf 'S3CR3T-r2\r\n')
	assert_success
	refute_output --partial S3CR3T
	jout -e '.ok and .version == 2 and .rotated >= .created and
	    .expires == 4102444800'
	ref2=$(jout -r .ref)
	[ "$ref1" != "$ref2" ]
	[ ! -e "$VAULT_TEST_DIR/$ref1" ]
	printf 'S3CR3T-r2' | cmp - "$VAULT_TEST_DIR/$ref2"
	run space-cred rotate gh --expires 4102444801 <<<'S3CR3T-r3'
	jout -e '.version == 3 and .expires == 4102444801'
	run -1 space-cred rotate nope <<<'S3CR3T-r4'
	jout -e '.error == "not-found"'
	run -100 space-cred rotate gh <<<''
	[ "$(space-cred ls | jq .version)" = 3 ]
	[ -s "$VAULT_TEST_DIR/calls.log" ]
	[ -z "$(grep S3CR3T "$VAULT_TEST_DIR/calls.log")" ]
	nowhere S3CR3T-r
}

@test "the cmd: vault: metadata names the program; a failing one adds nothing" {
	use_cmd_vault
	run add gh global api.github.com <<<'S3CR3T-c1'
	assert_success
	jout -e --arg v "cmd:$vault_test" '.vault == $v'
	VAULT_TEST_MODE=fail run -111 add npm global registry.npmjs.org <<<'S3CR3T-c2'
	jout -e '.error == "vault" and (.msg | test("told to fail"))'
	SPACE_CRED_VAULT=cmd:/nonexistent run -1 add npm global registry.npmjs.org <<<'S3CR3T-c3'
	SPACE_CRED_VAULT=vault9 run -100 add npm global registry.npmjs.org <<<'S3CR3T-c4'
	jout -e '.msg | test("SPACE_CRED_VAULT")'
	[ "$(space-cred ls | jq -r .name)" = gh ]
	# rm removes the secret from the program too.
	ref=$(space-cred ls | jq -r .ref)
	[ -f "$VAULT_TEST_DIR/$ref" ]
	run space-cred rm gh
	assert_success
	[ ! -e "$VAULT_TEST_DIR/$ref" ]
}

@test "rm: secret and metadata gone, idempotent; a name in two scopes wants --scope" {
	add gh global api.github.com <<<'S3CR3T-rm1' >/dev/null
	add gh tenant/acme api.github.com <<<'S3CR3T-rm2' >/dev/null
	run -100 space-cred rm gh
	jout -e '.error == "bad-input" and (.msg | test("global")) and (.msg | test("tenant/acme"))'
	ref=$(jq -r .ref "$SPACE_ROOT/creds/scopes/tenant/acme/gh.json")
	run space-cred rm gh --scope tenant/acme
	assert_success
	jout -e '.ok and .removed == true and .scope == "tenant/acme"'
	[ ! -e "$SPACE_ROOT/creds/vault/$ref" ]
	[ ! -e "$SPACE_ROOT/creds/scopes/tenant" ]
	run space-cred rm gh --scope tenant/acme
	assert_success
	jout -e '.ok and .removed == false'
	run space-cred rm gh nope
	assert_success
	jout -s -e '.[0].removed == true and .[0].scope == "global" and .[1].removed == false'
	run -100 space-cred rm gh --scope nope/x
	run space-cred ls
	assert_output ''
	[ -z "$(ls "$SPACE_ROOT/creds/vault")" ]
}

@test "resolve: the most specific scope wins, then an exact name over a wildcard" {
	sb=abcdefghijkl other=bcdefghijklm
	add g global api.example.com <<<'S3CR3T-g' >/dev/null
	add t tenant/acme api.example.com <<<'S3CR3T-t' >/dev/null
	add p project/acme/web api.example.com <<<'S3CR3T-p' >/dev/null
	add s sandbox/$sb api.example.com <<<'S3CR3T-s' >/dev/null
	add w tenant/acme '*.example.com' <<<'S3CR3T-w' >/dev/null
	which() {
		space-cred resolve "$@" | jq -r 'if .ok then "\(.name)@\(.scope)" else .error end'
	}
	[ "$(which --sandbox $sb --tenant acme --project web api.example.com)" = "s@sandbox/$sb" ]
	[ "$(which --sandbox $other --tenant acme --project web api.example.com)" = p@project/acme/web ]
	[ "$(which --sandbox $other --tenant acme api.example.com)" = t@tenant/acme ]
	[ "$(which --sandbox $other --tenant globex api.example.com)" = g@global ]
	[ "$(which --sandbox $other api.example.com)" = g@global ]
	[ "$(which --sandbox $other --tenant acme www.example.com)" = w@tenant/acme ]
	[ "$(which --sandbox $other --tenant globex www.example.com)" = not-found ]
	run -1 space-cred resolve --sandbox $other --tenant acme API.Example.com. nope.org
	jout -s -e '.[0].ok and .[0].host == "API.Example.com." and .[0].name == "t" and
	    .[0].expired == false and .[1].error == "not-found"'
	refute_output --partial S3CR3T
	run -100 space-cred resolve --sandbox NOTANID api.example.com
	jout -e '.error == "bad-input"'
}

@test "audit: add, rotate and rm recorded as JSON lines, --since filters, no secret" {
	add gh global api.github.com <<<'S3CR3T-a1' >/dev/null
	space-cred rotate gh <<<'S3CR3T-a2' >/dev/null
	space-cred rm gh >/dev/null
	run space-cred audit
	assert_success
	refute_output --partial S3CR3T
	jout -s -e 'map(.op) == ["add", "rotate", "rm"] and
	    all(.[]; .cred == "gh" and .scope == "global" and .decision == "done" and
	        (.time | type) == "number") and
	    map(.version) == [1, 2, 2]'
	t=$(jout -s '.[0].time')
	run space-cred audit --since $((t + 3600))
	assert_success
	assert_output ''
	run space-cred audit --since "$t"
	[ "$(grep -c '^{' <<<"$output")" -eq 3 ]
	run -100 space-cred audit --since yesterday
	nowhere S3CR3T-a
}

@test "the audit log on a root without credentials: nothing, exit 0" {
	run space-cred audit
	assert_success
	assert_output ''
}
