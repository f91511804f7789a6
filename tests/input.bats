#!/usr/bin/env bats
# Bad input gets a clear error and a non-zero exit, and changes nothing.
load helper

# Every command that takes a sandbox id, with X where the id goes.
id_commands=(
	"space-rm X" "space-ls X" "space-exec X -- true" "space-pause X"
	"space-resume X" "space-start X" "space-stop X" "space-snap X"
	"space-snap --full X" "space-rollback X 20260101T000000Z-aaaa"
	"space-fork X" "space-suspend X" "space-restore X" "space-ps X"
	"space-logs X 1" "space-kill X 1" "space-fs X cat /etc/hostname"
	"space-cp X:/etc/hostname /dev/null" "space-cp /etc/hostname X:/tmp/"
	"space-egress show X"
)

@test "an operand neither an id nor a name is bad input (exit 100) for every command" {
	local c n=0
	for c in "${id_commands[@]}"; do
		for bad in not_an_id ../../../etc AAAAAAAAAAAA aaaaaaaaaaa.; do
			run ${c//X/$bad}
			echo "# $c with '$bad': $status ${output:0:100}"
			[ "$status" -eq 100 ]
			# A JSON line says bad-input; a streaming command (exec,
			# logs, fs) says it on stderr alone; space-cp does not take
			# it for an ID:PATH at all.
			case $c in
			space-exec*|space-logs*|space-fs*)
				[[ $output == *"is not a sandbox id"* ]] ;;
			space-cp*)
				[[ $output == *"one side must be ID:PATH"* ]] ;;
			*)
				jout -e '.ok == false and .error == "bad-input"' ;;
			esac
			n=$((n + 1))
		done
	done
	[ "$n" -eq $((${#id_commands[@]} * 4)) ]
}

@test "an unknown id or name is not-found (exit 1) for every command that needs it" {
	local c
	for c in "${id_commands[@]}"; do
		case $c in
		space-rm*|space-egress*|space-rollback*) continue ;;
		esac
		run ${c//X/aaaaaaaaaaaa}
		echo "# $c: $status ${output:0:100}"
		[ "$status" -eq 1 ]
		case $c in
		space-exec*|space-logs*|space-fs*)
			[[ $output == *"aaaaaaaaaaaa: no such sandbox"* ]] ;;
		*)
			jout -e '.id == "aaaaaaaaaaaa" and .error == "not-found"' ;;
		esac
	done
	# A name nobody has, even where an id would be done (rm, egress).
	for c in "${id_commands[@]}"; do
		run ${c//X/nobody-has-this-1}
		echo "# $c: $status ${output:0:100}"
		[ "$status" -eq 1 ]
		[[ $output == *"no sandbox named 'nobody-has-this-1'"* ]]
	done
	# Removing what is not there is done, not an error.
	run space-rm aaaaaaaaaaaa
	assert_success
	jout -e '.removed == false'
}

@test "invalid UTF-8 and broken JSON lines on stdin are refused, good lines go on" {
	run bash -c "printf 'aaaa\xff\xfeaaaaaa\n{\"id\": 5}\n{oops\n' | space-rm"
	[ "$status" -eq 100 ]
	[ "$(jout -s 'map(select(.error == "bad-input")) | length')" -eq 3 ]
	run bash -c "printf '{\"id\":\"aaaaaaaaaaaa\"}\n' | space-rm"
	assert_success
	jout -e '.id == "aaaaaaaaaaaa" and .removed == false'
}

@test "an overlong stdin line is refused without reading it into memory" {
	run bash -c "head -c 200000 /dev/zero | tr '\\0' a | space-rm"
	[ "$status" -eq 100 ]
	jout -e '.error == "bad-input"'
}

@test "bad options are usage errors (exit 100)" {
	run space-create
	[ "$status" -eq 100 ]
	run space-create --template minimal --memory 12
	[ "$status" -eq 100 ]
	run space-create --template 'a/b'
	[ "$status" -eq 100 ]
	run space-create --template minimal --label 'bad key=x'
	[ "$status" -eq 100 ]
	run space-create --template minimal --env '1BAD=x'
	[ "$status" -eq 100 ]
	run space-create --template minimal --env 'NOVALUE'
	[ "$status" -eq 100 ]
	run space-init --loop-size lots
	[ "$status" -eq 100 ]
	run space-template frobnicate
	[ "$status" -eq 100 ]
}

@test "an unknown template is not-found and leaves no sandbox behind" {
	before=$(space-ls | wc -l)
	run space-create --template no-such-template
	[ "$status" -eq 1 ]
	jout -e '.error == "not-found"'
	[ "$(space-ls | wc -l)" -eq "$before" ]
}

# Builds a tar with hostile entry names (python's tarfile writes what it is told).
hostile_tar() {
	python3 - "$1" "$2" <<'PY'
import io, sys, tarfile
out, kind = sys.argv[1], sys.argv[2]
with tarfile.open(out, "w") as t:
    def add(name, data=b"x", typ=tarfile.REGTYPE, link=""):
        i = tarfile.TarInfo(name); i.type = typ; i.linkname = link
        i.size = len(data) if typ == tarfile.REGTYPE else 0
        t.addfile(i, io.BytesIO(data) if typ == tarfile.REGTYPE else None)
    add("etc/ok", b"fine")
    if kind == "dotdot":
        add("../space-evil-dotdot")
    elif kind == "abs":
        add("/tmp/space-evil-abs")
    elif kind == "symlink":
        add("escape", typ=tarfile.SYMTYPE, link="/tmp")
        add("escape/space-evil-symlink")
PY
}

@test "template tarballs that escape the root are rejected and leave nothing" {
	d=$BATS_TEST_TMPDIR
	touch "$d/vmlinuz" "$d/initrd.img"
	for kind in dotdot abs symlink; do
		hostile_tar "$d/$kind.tar" "$kind"
		run space-template import --name "evil-$kind" "$d/$kind.tar"
		[ "$status" -eq 100 ]
		jout -e '.error == "bad-input"'
		run space-template ls
		refute_output --partial "evil-$kind"
	done
	[ ! -e /tmp/space-evil-abs ]
	[ ! -e /tmp/space-evil-symlink ]
	[ ! -e "$SPACE_ROOT/tmp/space-evil-dotdot" ]
	# transfer/: the manager's own, for streams' nameless files.
	[ -z "$(ls "$SPACE_ROOT/tmp" | grep -v -e '^unit$' -e '^transfer$')" ]
	[ -z "$(ls -A "$SPACE_ROOT/tmp/transfer" 2>/dev/null)" ]
	[ -z "$(ls -a "$SPACE_ROOT/templates" | grep building)" ]
}
