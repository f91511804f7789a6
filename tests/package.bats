#!/usr/bin/env bats
# The Debian package: built from this tree with dpkg-buildpackage, installed
# on this machine, checked where its files went, and used from the installed
# paths: space-init on a node of its own, the packaged guest image imported
# as a template, a sandbox created and run.  Everything is purged after.
load helper

setup_file() {
	export PKG_DIR=$BATS_FILE_TMPDIR/pkg
	export PKG_ROOT=/var/tmp/space-pkg PKG_RUN=/run/space-pkg
	# A copy of the tree, so that the build's clean step leaves this
	# tree's build/ alone; the guest kernel comes from this tree's cache.
	mkdir -p "$PKG_DIR/space"
	(cd "$top" && git ls-files -co --exclude-standard -z |
	    grep -zv '^guest/build/' | xargs -0 cp --parents -t "$PKG_DIR/space")
	if [ -d "$top/guest/build/kernel" ]; then
		mkdir -p "$PKG_DIR/space/guest/build"
		cp -a "$top/guest/build/kernel" "$PKG_DIR/space/guest/build/"
	fi
	(cd "$PKG_DIR/space" && dpkg-buildpackage -us -uc -b) \
	    >"$PKG_DIR/build.log" 2>&1 || { tail -n 40 "$PKG_DIR/build.log" >&3; return 1; }
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    "$PKG_DIR"/space_*.deb "$PKG_DIR"/space-guest-image_*.deb \
	    >"$PKG_DIR/install.log" 2>&1 || { tail -n 40 "$PKG_DIR/install.log" >&3; return 1; }
}

teardown_file() {
	SPACE_ROOT=$PKG_ROOT SPACE_RUN=$PKG_RUN SPACE_NODE=pkg \
	    /usr/bin/space-ls --pods 2>/dev/null | jq -r .id 2>/dev/null |
	    SPACE_ROOT=$PKG_ROOT SPACE_RUN=$PKG_RUN SPACE_NODE=pkg \
	    /usr/bin/space-rm >/dev/null 2>&1 || true
	mountpoint -q "$PKG_ROOT" && umount "$PKG_ROOT"
	rm -rf "$PKG_ROOT" "$PKG_ROOT.img" "$PKG_RUN"
	DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq space space-guest-image \
	    >/dev/null 2>&1 || true
}

@test "dpkg-buildpackage builds space and space-guest-image, lintian-clean" {
	ls "$PKG_DIR"/space_*.deb "$PKG_DIR"/space-guest-image_*.deb
	run lintian --fail-on error,warning "$PKG_DIR"/space_*.changes
	echo "$output"
	assert_success
}

@test "the package puts commands, man pages, completions and units where they belong" {
	local c
	for c in $(commands); do
		[ -x "/usr/bin/$c" ] || { echo "no /usr/bin/$c"; false; }
		[ "$(man -w "$c")" = "/usr/share/man/man1/$c.1.gz" ]
		[ -e "/usr/share/bash-completion/completions/$c" ]
	done
	[ -f /usr/share/zsh/vendor-completions/_space ]
	[ -f /lib/systemd/system/space-reconcile.timer ]
	grep -q '^ExecStart=/usr/bin/space-gatewayd$' /lib/systemd/system/space-gatewayd.service
	! grep -rq /usr/local /lib/systemd/system/space-* || false
	[ -f /usr/lib/space/rootfs.tar.zst ] && [ -f /usr/lib/space/vmlinuz ] &&
	    [ -f /usr/lib/space/initrd.img ] && [ -f /usr/lib/space/space-daemon ] || false
	# Timers are not enabled by the package: nothing links to them.
	[ -z "$(find /etc/systemd/system -name 'space-*' 2>/dev/null)" ]
	run /usr/bin/space-ls --version
	assert_output "space-ls $(sed -n 's/^VERSION = //p' "$top/Makefile")"
}

@test "the installed commands make a node and run a sandbox from the packaged image" {
	export SPACE_ROOT=$PKG_ROOT SPACE_RUN=$PKG_RUN SPACE_NODE=pkg SPACE_CONF=/dev/null
	run /usr/bin/space-init --loop-size 8G
	assert_success
	jout -e '.ok and .fs == "btrfs"'
	run /usr/bin/space-template import --name pkg /usr/lib/space/rootfs.tar.zst
	assert_success
	run /usr/bin/space-create --template pkg --cold
	assert_success
	id=$(jout -r .id)
	run /usr/bin/space-exec "$id" -- sh -c 'echo "$(hostname) from the package"'
	assert_success
	assert_output "$id from the package"
	run /usr/bin/space-rm "$id"
	assert_success
	jout -e '.removed'
	# A root that is not ours, away from the image: the kernel, initrd
	# and daemon come from the packaged image (SPACE_GUEST's default).
	mkdir -p "$BATS_TEST_TMPDIR/any"
	tar -C "$BATS_TEST_TMPDIR/any" --zstd -xf /usr/lib/space/rootfs.tar.zst
	rm "$BATS_TEST_TMPDIR/any/sbin/space-daemon"
	run /usr/bin/space-template import --name pkg-any "$BATS_TEST_TMPDIR/any"
	assert_success
	jout -e '.ok'
}
