#!/usr/bin/env bats
# Templates from container images (design.md, "Any root filesystem"): an OCI
# image layout built here with umoci from the minimal guest's busybox root,
# made not ours (no space-daemon, inittab or rcS of its own), in layers that
# delete, replace and hard-link files, one of them written by hand (a hard
# link to a lower layer's file, an opaque directory, a directory replaced by
# a file: umoci raw add-layer).  The template's disk must hold the tree
# umoci's own unpack makes, byte for byte; the same image as a tar and as a
# docker save archive (skopeo) must give the same; hostile layers are
# refused whole; and a sandbox of it boots with space-daemon as its init and
# takes the image's Env, WorkingDir and User.  Nothing is pulled from a
# registry.
load helper

tool=$top/tests/image-tool

setup_file() {
	local d=$BATS_FILE_TMPDIR r
	cd "$d"
	umoci init --layout oci
	umoci new --image oci:img
	umoci unpack --image oci:img bundle >/dev/null
	r=bundle/rootfs
	tar -C "$r" --zstd -xf "$SPACE_GUEST/rootfs.tar.zst"
	rm -f "$r/sbin/space-daemon" "$r/etc/inittab" "$r/etc/init.d/rcS"
	mkdir -p "$r/data/dir" "$r/data/opq" "$r/data/dir2"
	echo one >"$r/data/a"
	ln "$r/data/a" "$r/data/b"
	echo x >"$r/data/dir/x"
	echo 1 >"$r/data/opq/1"
	echo 2 >"$r/data/opq/2"
	echo inside >"$r/data/dir2/f"
	cp "$r/bin/busybox" "$r/data/ping"
	chmod 4755 "$r/data/ping"
	"$tool" caps "$r/data/ping"
	python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.note", b"hello")' "$r/data/a"
	mknod "$r/data/null" c 1 3
	chown 1000:1000 "$r/data/dir"
	umoci repack --image oci:img bundle >/dev/null
	# Layer 2: a deletion (a whiteout) and a file replaced, which parts
	# it from its hard link.
	rm "$r/data/dir/x"
	echo two >"$r/data/a.new"
	mv "$r/data/a.new" "$r/data/a"
	umoci repack --image oci:img bundle >/dev/null
	# Layer 3, by hand.
	"$tool" layer links links.tar
	umoci raw add-layer --image oci:img links.tar >/dev/null
	umoci config --image oci:img --config.env FOO=from-image \
	    --config.env PATH=/usr/sbin:/usr/bin:/sbin:/bin:/opt/image/bin \
	    --config.workingdir /data --config.user 1000:1000 \
	    --config.entrypoint httpd --config.cmd -f --config.cmd -p \
	    --config.cmd 8080 --config.cmd -h --config.cmd /data/opq \
	    --config.label org.example.kind=test >/dev/null
	umoci raw unpack --image oci:img oracle >/dev/null 2>&1
	tree oracle >oracle.tree
	runners "$d/oci"
	space-template import --name oci-img "$d/oci" >import.json
	mkdir -p mnt
}

teardown_file() {
	remove_listed "$BATS_FILE_TMPDIR/ids"
	for t in oci-img oci-tar oci-docker oci-other oci-multi; do
		space-template rm --force "$t" >/dev/null 2>&1 || true
	done
}

# The tree under $1, less what import adds or changes (checked apart).
tree() {
	"$tool" tree "$1" --skip lost+found --skip .space --skip dev \
	    --skip proc --skip sys --skip run --skip tmp --skip etc/hosts \
	    --skip etc/resolv.conf --skip etc/ssl
}

# The tree of a template's disk.
disk_tree() {
	local d=$BATS_FILE_TMPDIR dir
	dir=$(space-template ls | jq -r --arg t "$1" 'select(.template == $t) | .digest')
	# One template of that name: each test imports under its own.
	[ -n "$dir" ] && [ "$(wc -l <<<"$dir")" = 1 ] || false
	mount -o ro,loop,noload "$SPACE_ROOT/templates/$1@$dir/disk.raw" "$d/mnt"
	tree "$d/mnt" >"$d/$1.tree" || true
	ls -A "$d/mnt/.space" "$d/mnt/.space/bin" >"$d/$1.space"
	cat "$d/mnt/etc/resolv.conf" >"$d/$1.resolv"
	umount "$d/mnt"
}

@test "import of an OCI layout reports the image config as the template's defaults" {
	run jq -c .config "$BATS_FILE_TMPDIR/import.json"
	assert_output '{"env":["FOO=from-image","PATH=/usr/sbin:/usr/bin:/sbin:/bin:/opt/image/bin"],"cwd":"/data","user":"1000:1000","cmd":["httpd","-f","-p","8080","-h","/data/opq"],"labels":{"org.example.kind":"test"}}'
}

@test "the template's disk holds the tree umoci's unpack makes: contents, modes, owners, xattrs, capabilities, links, devices" {
	disk_tree oci-img
	run diff "$BATS_FILE_TMPDIR/oracle.tree" "$BATS_FILE_TMPDIR/oci-img.tree"
	assert_success
	# What the layers did, in the tree both agree on.
	run grep -E '^data/(d|b|dir/x|opq/1|opq/3|dir2|ping|null) ' "$BATS_FILE_TMPDIR/oci-img.tree"
	assert_line --regexp '^data/b f 644 0:0 4 .* data/b$'
	assert_line --regexp '^data/d f 644 0:0 4 .* data/b$'
	assert_line --regexp '^data/opq/3 f '
	refute_line --regexp '^data/opq/1 '
	refute_line --regexp '^data/dir/x '
	assert_line --regexp '^data/dir2 f '
	assert_line --regexp '^data/ping f 4755 0:0 .*security.capability=0100000200200000'
	assert_line --regexp '^data/null c 644 0:0 0 1,3 '
	# import's own: the daemon, the defaults, the resolver on loopback.
	run cat "$BATS_FILE_TMPDIR/oci-img.space"
	assert_line bin
	assert_line image.json
	assert_line space-daemon
	run cat "$BATS_FILE_TMPDIR/oci-img.resolv"
	assert_line "nameserver 127.0.0.1"
}

@test "the layout as a tar and as a docker save archive (skopeo) give the same tree" {
	local d=$BATS_FILE_TMPDIR
	tar -C "$d/oci" -cf "$d/oci.tar" .
	run space-template import --name oci-tar "$d/oci.tar"
	assert_success
	skopeo copy --quiet oci:"$d/oci":img docker-archive:"$d/docker.tar":example/img:v1
	run space-template import --name oci-docker --tag example/img:v1 "$d/docker.tar"
	assert_success
	jout -e '.config.user == "1000:1000" and .config.cwd == "/data"'
	disk_tree oci-tar
	disk_tree oci-docker
	run diff "$d/oracle.tree" "$d/oci-tar.tree"
	assert_success
	run diff "$d/oracle.tree" "$d/oci-docker.tree"
	assert_success
}

@test "--tag picks one image of several; without it several are refused, naming the tags" {
	local d=$BATS_FILE_TMPDIR
	cp -a "$d/oci" "$d/two"
	umoci tag --image "$d/two":img other
	runners "$d/two"
	run space-template import --name oci-other "$d/two"
	assert_failure 100
	assert_output --partial "several images: pick one with --tag (img, other)"
	run space-template import --name oci-other --tag nope "$d/two"
	assert_failure 100
	assert_output --partial "no image tagged 'nope' (there are: img, other)"
	run space-template import --name oci-other --tag other "$d/two"
	assert_success
	run space-template import --name oci-other --format docker "$d/two"
	assert_failure 100
	assert_output --partial "is not a docker archive"
	run space-template import --name oci-other --tag x "$SPACE_GUEST/rootfs.tar.zst"
	assert_failure 100
	assert_output --partial "is a root filesystem"
}

@test "an index inside the index (a multi-platform image) gives its linux/amd64 image" {
	local d=$BATS_FILE_TMPDIR m idx hex
	rm -rf "$d/multi"
	cp -a "$d/oci" "$d/multi"
	m=$(jq -c '.manifests[0] | del(.annotations)' "$d/multi/index.json")
	# The amd64 image beside an arm64 one that is not there at all.
	idx=$(jq -nc --argjson m "$m" '{schemaVersion: 2,
	    mediaType: "application/vnd.oci.image.index.v1+json",
	    manifests: [($m + {digest: ("sha256:" + ("0" * 64)),
	        platform: {os: "linux", architecture: "arm64"}}),
	      ($m + {platform: {os: "linux", architecture: "amd64"}})]}')
	printf '%s' "$idx" >"$d/multi/idx"
	hex=$(sha256sum "$d/multi/idx" | cut -d' ' -f1)
	mv "$d/multi/idx" "$d/multi/blobs/sha256/$hex"
	jq -n --arg h "$hex" --argjson n "$(printf '%s' "$idx" | wc -c)" '{schemaVersion: 2,
	    manifests: [{mediaType: "application/vnd.oci.image.index.v1+json",
	      digest: ("sha256:" + $h), size: $n,
	      annotations: {"org.opencontainers.image.ref.name": "multi"}}]}' >"$d/multi/index.json"
	runners "$d/multi"
	run space-template import --name oci-multi "$d/multi"
	assert_success
	jout -e '.config.cwd == "/data"'
	disk_tree oci-multi
	run diff "$d/oracle.tree" "$d/oci-multi.tree"
	assert_success
}

# An image of the layout with one more layer of kind $1; import must fail.
hostile() {
	local d=$BATS_FILE_TMPDIR
	rm -rf "$d/h-$1"
	cp -a "$d/oci" "$d/h-$1"
	"$tool" layer "$1" "$d/$1.tar"
	umoci raw add-layer --image "$d/h-$1":img "$d/$1.tar" >/dev/null
	# The message names the layer: the last, of n.
	n=$(jq '.layers | length' "$d/h-$1/blobs/sha256/$(jq -r '.manifests[0].digest' "$d/h-$1/index.json" | cut -d: -f2)")
	runners "$d/h-$1"
	run space-template import --name "h-$1" "$d/h-$1"
}

# Nothing of a failed import is left: no template, no build, no staging.
nothing_left() {
	run space-template ls
	refute_output --partial "\"h-$1\""
	run bash -c "ls -A '$SPACE_ROOT/templates' | grep -c '^\.building' ; ls -A '$SPACE_ROOT/tmp' | grep -c '^import-'"
	assert_output $'0\n0'
}

@test "hostile layers are refused whole: '..', an absolute hard link, a whiteout of '..', writing through a symlink" {
	hostile dotdot
	assert_failure 100
	assert_output --partial "layer $n of $n (blobs/sha256/"
	assert_output --partial "'..' in path '../escape'"
	nothing_left dotdot
	hostile abs-link
	assert_failure 100
	assert_output --partial "absolute hard link target '/etc/passwd'"
	nothing_left abs-link
	hostile wh-dotdot
	assert_failure 100
	assert_output --partial "whiteout 'data/.wh...' names no file it may remove"
	nothing_left wh-dotdot
	rm -f /tmp/planted
	hostile through
	assert_failure 100
	assert_output --partial "'data/planted' lies under a symlink or a file: nothing is written through one"
	[ ! -e /tmp/planted ]
	nothing_left through
}

@test "a blob that does not match its digest is refused before any layer is applied" {
	local d=$BATS_FILE_TMPDIR blob
	rm -rf "$d/bad"
	cp -a "$d/oci" "$d/bad"
	blob=$(jq -r '.layers[0].digest' "$d/bad/blobs/sha256/$(jq -r '.manifests[0].digest' "$d/bad/index.json" | cut -d: -f2)" | cut -d: -f2)
	printf 'x' >>"$d/bad/blobs/sha256/$blob"
	runners "$d/bad"
	run space-template import --name h-bad "$d/bad"
	assert_failure 100
	assert_output --partial "does not match its digest"
	nothing_left bad
}

@test "a sandbox of the image boots with space-daemon as init and takes the image's Env, WorkingDir and User" {
	local id
	id=$(space-create --template oci-img | jq -r 'select(.ok) | .id')
	[ -n "$id" ]
	echo "$id" >>"$BATS_FILE_TMPDIR/ids"
	run space-exec "$id" -- cat /proc/1/comm
	assert_success
	assert_output space-daemon
	run space-exec "$id" -- sh -c 'echo "$(id -u):$(id -g) $PWD $FOO $PATH"'
	assert_success
	assert_output "1000:1000 /data from-image /usr/sbin:/usr/bin:/sbin:/bin:/opt/image/bin"
	# A call's own user, directory and environment win.
	run space-exec "$id" -u root -w / -e FOO=mine -- sh -c 'echo "$(id -u) $PWD $FOO"'
	assert_success
	assert_output "0 / mine"
	# The guest sees what the layers made.
	run space-exec "$id" -u root -- sh -c 'cat /data/a /data/b /data/d /data/opq/3; ls /data/opq; stat -c "%a %u %g %F" /data/ping /data/null /data/dir'
	assert_success
	assert_output $'two\none\none\nthree\n3\n4755 0 0 regular file\n644 0 0 character special file\n755 1000 1000 directory'
	# The egress redirect the initramfs set up holds here too.
	run space-exec "$id" -u root -- iptables -S OUTPUT
	assert_output --partial "-A OUTPUT ! -d 127.0.0.0/8 -j DROP"
}

@test "warm --start-image --ready: the image's server is up in every sandbox of the checkpoint" {
	local id ready='wget -Y off -q -O /dev/null http://127.0.0.1:8080/3'
	run space-template warm --ready false --ready-timeout 2 oci-img
	assert_failure
	jout -e '.error == "timed-out"'
	assert_output --partial "the ready command did not succeed"
	run space-template ls
	jout -s -e 'map(select(.template == "oci-img")) | length == 1 and .[0].warm == false'
	run space-template warm --start-image --ready "$ready" oci-img
	assert_success
	jout -e '.reused == false'
	# The same again is the same checkpoint (other commands make a new one).
	run space-template warm --start-image --ready "$ready" oci-img
	jout -e '.reused == true'
	id=$(space-create --template oci-img | jq -r 'select(.ok and .path == "checkpoint") | .id')
	[ -n "$id" ]
	echo "$id" >>"$BATS_FILE_TMPDIR/ids"
	run space-exec "$id" -- wget -Y off -q -O - http://127.0.0.1:8080/3
	assert_success
	assert_output three
	run space-exec "$id" -- sh -c 'ps -o user,args | grep "[h]ttpd -f"'
	assert_output --regexp '^ *user +httpd -f -p 8080 -h /data/opq$'
	# Asked to start nothing, it is made anew, without the server.
	run space-template warm oci-img
	jout -e '.reused == false'
}

# Whether the suite's commands run as the user space (tests/run-all).
as_space() { [ -n "${SPACE_AS_SPACE_BIN:-}" ]; }

@test "a tarball's device nodes are in the image (made there by debugfs); a device's name outside [A-Za-z0-9._+@-] is refused" {
	local d=$BATS_FILE_TMPDIR
	python3 - "$d/dev.tar" "$d/odd.tar" <<'EOF'
import sys, tarfile
def tar(path, devs):
    with tarfile.open(path, "w") as t:
        for name, major, minor, mode, uid in devs:
            i = tarfile.TarInfo(name); i.type = tarfile.CHRTYPE
            i.devmajor, i.devminor, i.mode, i.uid, i.gid = major, minor, mode, uid, uid
            t.addfile(i)
        d = tarfile.TarInfo("data"); d.type = tarfile.DIRTYPE; d.mode = 0o755
        t.addfile(d)
tar(sys.argv[1], [("dev/null", 1, 3, 0o666, 0), ("data/tty9", 4, 9, 0o620, 5)])
tar(sys.argv[2], [("dev/odd name", 1, 5, 0o666, 0)])
EOF
	# A root of its own: the guest image's, with the devices over it.
	mkdir -p "$d/devroot"
	tar -C "$d/devroot" --zstd -xf "$SPACE_GUEST/rootfs.tar.zst"
	tar -C "$d/devroot" -xf "$d/dev.tar"
	tar -C "$d/devroot" -cf "$d/devroot.tar" .
	runners "$d/devroot.tar" "$d/odd.tar"
	run space-template import --name img-dev "$d/devroot.tar"
	assert_success
	mount -o ro,loop,noload "$SPACE_ROOT/templates/img-dev@$(jq -r .digest <<<"$output")/disk.raw" "$d/mnt"
	run stat -c '%n %F %t:%T %a %u:%g' "$d/mnt/dev/null" "$d/mnt/data/tty9"
	umount "$d/mnt"
	space-template rm img-dev >/dev/null
	assert_line "$d/mnt/dev/null character special file 1:3 666 0:0"
	assert_line "$d/mnt/data/tty9 character special file 4:9 620 5:5"
	run space-template import --name img-odd "$d/odd.tar"
	assert_failure 100
	assert_output --partial "a device node's name is of [A-Za-z0-9._+@-] parts"
	run space-template ls
	refute_output --partial '"img-odd"'
}

@test "a directory imported keeps its owners and set-id bits; as space, its files (all space's) become root's" {
	local d=$BATS_FILE_TMPDIR
	rm -rf "$d/dirroot"
	mkdir -p "$d/dirroot/data"
	tar -C "$d/dirroot" --zstd -xf "$SPACE_GUEST/rootfs.tar.zst"
	cp "$d/dirroot/bin/busybox" "$d/dirroot/data/su"
	echo mine >"$d/dirroot/data/user"
	chown 1000:1000 "$d/dirroot/data/user"
	runners "$d/dirroot"
	# After runners: a chown clears the set-id bits.
	chmod 4755 "$d/dirroot/data/su"
	run space-template import --name img-dir "$d/dirroot"
	assert_success
	mount -o ro,loop,noload "$SPACE_ROOT/templates/img-dir@$(jq -r .digest <<<"$output")/disk.raw" "$d/mnt"
	run stat -c '%n %a %u:%g' "$d/mnt/data/su" "$d/mnt/data/user" "$d/mnt/bin/busybox"
	umount "$d/mnt"
	space-template rm img-dir >/dev/null
	assert_line "$d/mnt/data/su 4755 0:0"
	assert_line "$d/mnt/bin/busybox 755 0:0"
	if as_space; then
		assert_line "$d/mnt/data/user 644 0:0"
	else
		assert_line "$d/mnt/data/user 644 1000:1000"
	fi
}
