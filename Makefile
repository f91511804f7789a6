# SPACE in C: one Makefile, no autotools.
#   make            the library, the commands, the guest daemon and the guest image
#   make check      set the host up (tests/setup-host), then unit + bats tests
#   make demo       the main job on the embedded defaults (examples/demo)
#   make unit       the C unit tests alone: no root, no VM, no setup
#   make install    commands, man pages, completions, units under PREFIX
#   make template-debian   the Debian template for agents, imported and warm

PREFIX ?= /usr/local
DESTDIR ?=
UNITDIR ?= /etc/systemd/system
CC ?= cc
# Debian's shared libraries, so that its security updates reach installed
# commands.  libvirt, libcurl and libarchive are opened on first use
# (sp_dl.c), so a short command does not map them (tests/linking.bats);
# so are libxml2 and libpq, whose headers alone are wanted here.
PKGS = libvirt libarchive libcurl libssl libcrypto jansson sqlite3 libsodium \
    libbtrfsutil libmicrohttpd
VERSION = 0.1.0
CFLAGS ?= -O2 -g
WFLAGS = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
CPPFLAGS += -Ilib -DSP_VERSION='"$(VERSION)"' \
    -DSP_GUEST_DIR='"$(PREFIX)/lib/space"' \
    $(shell pkg-config --cflags libxml-2.0 libpq)
# Each object records the headers it read (.d files), so a header edit
# rebuilds what includes it and nothing else.
DEPFLAGS = -MMD -MP
# --as-needed: a command links only the libraries its objects use.
LIBS = -Wl,--as-needed $(shell pkg-config --libs $(PKGS)) -lm -lhttp_parser \
    -lpthread

B = build
LIB_SRC = $(wildcard lib/sp_*.c)
LIB_OBJ = $(LIB_SRC:lib/%.c=$(B)/lib/%.o)
CMD_SRC = $(wildcard cmd/space-*.c)
CMDS = $(CMD_SRC:cmd/%.c=$(B)/bin/%)
UNIT_SRC = $(wildcard tests/unit/test-*.c)
UNITS = $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
ASAN_UNITS = $(UNIT_SRC:tests/unit/%.c=$(B)/asan/tests/%)
ASAN_OBJ = $(LIB_SRC:lib/%.c=$(B)/asan/lib/%.o)
ASAN_FLAGS = -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# The guest daemon is static and links only what the guest needs.
GUEST_LIB = lib/sp_proto.c lib/sp_err.c lib/sp_io.c lib/sp_tar.c
GUEST_LIBS = -larchive -lacl -lnettle -lxml2 -licuuc -licudata -llzma -lzstd -lbz2 -lz -ljansson -lstdc++ -lm -lpthread
GUEST_DAEMON = $(B)/guest/space-daemon
GUEST_IMAGE = guest/build/rootfs.tar.zst guest/build/vmlinuz guest/build/initrd.img \
    guest/build/space-daemon
BENCH_C = $(wildcard bench/*.c)

# all: what is installed (progs), the tests and the benchmarks.
all: progs $(UNITS) $(BENCH_C:bench/%.c=$(B)/bench/%) \
    $(B)/tests/kms-test $(B)/tests/vault-test $(B)/tests/jail-probe \
    $(B)/tests/space-hog
progs: $(B)/libspace.a $(CMDS) $(GUEST_DAEMON)

$(B)/lib/%.o: lib/%.c
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(CFLAGS) $(CPPFLAGS) $(DEPFLAGS) -c -o $@ $<

$(B)/libspace.a: $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $(LIB_OBJ)

$(B)/bin/%: cmd/%.c $(B)/libspace.a
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(CFLAGS) $(CPPFLAGS) $(DEPFLAGS) $(LDFLAGS) -o $@ $< $(B)/libspace.a $(LIBS)

GUEST_SRC = $(wildcard guest/*.c)
$(GUEST_DAEMON): $(GUEST_SRC) $(wildcard guest/*.h) $(GUEST_LIB) $(wildcard lib/*.h)
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(CFLAGS) $(CPPFLAGS) -static -o $@ $(GUEST_SRC) $(GUEST_LIB) $(GUEST_LIBS)

$(B)/tests/%: tests/unit/%.c $(B)/libspace.a
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(CFLAGS) $(CPPFLAGS) $(DEPFLAGS) $(LDFLAGS) -o $@ $< $(B)/libspace.a $(LIBS)

$(B)/asan/lib/%.o: lib/%.c
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(ASAN_FLAGS) $(CPPFLAGS) $(DEPFLAGS) -c -o $@ $<

$(B)/asan/tests/%: tests/unit/%.c $(ASAN_OBJ)
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(ASAN_FLAGS) $(CPPFLAGS) $(DEPFLAGS) -o $@ $< $(ASAN_OBJ) $(LIBS)

# The guest image: a kernel built for it from Debian's source, an initramfs,
# a busybox root with the daemon.
guest: $(GUEST_IMAGE)
$(GUEST_IMAGE) &: guest/build-image guest/kernel.config $(GUEST_DAEMON) $(shell find guest/rootfs guest/initramfs -type f)
	guest/build-image $(GUEST_DAEMON) guest/build

# The Debian template for agents (guest/build-debian: mmdebstrap with this
# node's apt sources), built once and kept like the kernel; template-debian
# imports and warms it on this node.
# A real Python project with its tests for it to run (tests/examples.bats):
# simplejson as Debian packages it, tests included.
DEBIAN_ROOT = guest/build/debian.tar.zst
SIMPLEJSON_DEB = guest/build/python3-simplejson.deb
guest-debian: $(DEBIAN_ROOT) $(SIMPLEJSON_DEB)
$(DEBIAN_ROOT): guest/build-debian
	guest/build-debian $@
$(SIMPLEJSON_DEB):
	@mkdir -p $(@D)
	cd $(@D) && rm -f python3-simplejson_*.deb && \
	    apt-get download -q python3-simplejson 2>/dev/null && \
	    mv python3-simplejson_*.deb $(@F)

template-debian: progs $(GUEST_IMAGE) $(DEBIAN_ROOT)
	PATH="$(CURDIR)/$(B)/bin:$$PATH" space-template import --name debian $(DEBIAN_ROOT)
	PATH="$(CURDIR)/$(B)/bin:$$PATH" space-template warm debian

# space-exec under ASan/UBSan (LeakSanitizer too), for the hostile-guest test.
$(B)/asan/bin/%: cmd/%.c $(ASAN_OBJ)
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(ASAN_FLAGS) $(CPPFLAGS) $(DEPFLAGS) -o $@ $< $(ASAN_OBJ) $(LIBS)

# The test KMS program test-crypt and tests/suspend.bats run for cmd: keys.
$(B)/tests/kms-test: tests/kms/kms-test.c
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(CFLAGS) -o $@ $< $(shell pkg-config --libs libsodium)

# The test secret manager test-cred and tests/cred.bats run for cmd: vaults.
$(B)/tests/vault-test: tests/vault/vault-test.c
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(CFLAGS) -o $@ $<

# A compromised QEMU, simulated (tests/jail.bats).
$(B)/tests/jail-probe: tests/jail/jail-probe.c
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(CFLAGS) -o $@ $< -lseccomp

# The hostile guest (tests/hostile.bats copies it into a sandbox).
$(B)/tests/space-hostile: tests/guest/space-hostile.c
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(CFLAGS) -static -o $@ $< -lpthread

# The memory hog (tests/jail.bats copies it into a sandbox).
$(B)/tests/space-hog: tests/guest/space-hog.c
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(CFLAGS) -static -o $@ $<

asan: $(ASAN_UNITS) $(B)/asan/bin/space-exec $(B)/asan/bin/space-gatewayd $(B)/tests/space-hostile

# Benchmarks: bench/<name> scripts print JSON lines (benchmarks.md).
$(B)/bench/%: bench/%.c $(B)/libspace.a
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(CFLAGS) $(CPPFLAGS) $(DEPFLAGS) $(LDFLAGS) -o $@ $< $(B)/libspace.a $(LIBS)
# Programs bench scripts copy into a sandbox: static, like the daemon.
$(B)/bench/guest/%: bench/guest/%.c
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(CFLAGS) -static -o $@ $<
bench: all guest $(BENCH_C:bench/%.c=$(B)/bench/%) $(B)/bench/guest/spawn \
    $(B)/bench/guest/http-ok
	for b in bench/*; do case $$b in *.c) ;; *) [ ! -f $$b ] || $$b ;; esac; done

# libFuzzer on the parsers of what others send: the host-side frame parser
# (every guest byte), egress rules (tenants' policies), the guest's DNS
# (any program in the sandbox), the gateway's HTTP (a sandbox's requests),
# what space-apid parses itself of a client's requests (routes, bodies,
# Connect envelopes, paths), what an imported image's index and config say,
# what a client of space-noded asks of the node manager, and the domain XML
# it hands it to define.
# `make fuzz` runs each for FUZZ_SECONDS from its seeds in tests/fuzz/seeds/;
# `make fuzz-NAME` runs one.
FUZZ = proto egress-rule dns http api image noded domain-xml
FUZZ_SECONDS ?= 30
FUZZ_CC = clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 \
    -D_GNU_SOURCE -Ilib -Iguest
$(B)/fuzz/fuzz-proto: tests/fuzz/fuzz-proto.c lib/sp_proto.c lib/sp_err.c \
    lib/sp_io.c $(wildcard lib/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) -o $@ $(filter %.c,$^) -ljansson
$(B)/fuzz/fuzz-egress-rule: tests/fuzz/fuzz-egress-rule.c lib/sp_egress.c \
    lib/sp_err.c lib/sp_id.c lib/sp_io.c lib/sp_path.c lib/sp_proc.c \
    lib/sp_user.c $(wildcard lib/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) -o $@ $(filter %.c,$^) -ljansson -lsodium
$(B)/fuzz/fuzz-dns: tests/fuzz/fuzz-dns.c guest/dns.c guest/dns.h
	@mkdir -p $(@D)
	$(FUZZ_CC) -o $@ $(filter %.c,$^)
$(B)/fuzz/fuzz-http: tests/fuzz/fuzz-http.c lib/sp_http.c lib/sp_err.c \
    $(wildcard lib/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) -o $@ $(filter %.c,$^) -lhttp_parser
$(B)/fuzz/fuzz-api: tests/fuzz/fuzz-api.c lib/sp_api_parse.c lib/sp_err.c \
    lib/sp_id.c lib/sp_io.c $(wildcard lib/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(shell pkg-config --cflags libxml-2.0 libpq) -o $@ \
	    $(filter %.c,$^) -ljansson
$(B)/fuzz/fuzz-image: tests/fuzz/fuzz-image.c lib/sp_image.c lib/sp_layer.c \
    lib/sp_digest.c lib/sp_archive.c lib/sp_dl.c lib/sp_path.c lib/sp_user.c \
    lib/sp_err.c lib/sp_io.c $(wildcard lib/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(shell pkg-config --cflags libxml-2.0 libpq) -o $@ \
	    $(filter %.c,$^) -ljansson -lsodium -ldl
$(B)/fuzz/fuzz-noded: tests/fuzz/fuzz-noded.c lib/sp_noded_parse.c \
    lib/sp_err.c lib/sp_id.c lib/sp_io.c $(wildcard lib/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(shell pkg-config --cflags libxml-2.0 libpq) -o $@ \
	    $(filter %.c,$^) -ljansson
$(B)/fuzz/fuzz-domain-xml: tests/fuzz/fuzz-domain-xml.c lib/sp_virt.c \
    lib/sp_virt_noded.c lib/sp_err.c lib/sp_dl.c lib/sp_id.c lib/sp_io.c \
    lib/sp_path.c lib/sp_user.c $(wildcard lib/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(shell pkg-config --cflags libxml-2.0 libpq) -o $@ \
	    $(filter %.c,$^) -ljansson -ldl
$(FUZZ:%=fuzz-%): fuzz-%: $(B)/fuzz/fuzz-%
	@mkdir -p $(B)/fuzz/corpus-$*
	cp tests/fuzz/seeds/$*/* $(B)/fuzz/corpus-$*/
	cd $(B)/fuzz && ./fuzz-$* -max_total_time=$(FUZZ_SECONDS) \
	    -max_len=70000 corpus-$*
fuzz: $(FUZZ:%=fuzz-%)

# The unit tests alone, as any user, with nothing set up: the ones that need
# a btrfs (SPACE_TEST_BTRFS) or root report what they skip.
unit: $(UNITS)
	tests/run-unit $(UNITS)

# The host is set up first: building needs the -dev packages it installs.
# The parts build side by side: the guest kernel (its own make uses every
# core) takes most of the time, the Debian root mostly waits on downloads.
check:
	tests/setup-host
	$(MAKE) -j$$(nproc) all asan guest guest-debian
	tests/run-all

demo:
	tests/setup-host
	$(MAKE) all guest
	examples/demo

# The units name the commands by their installed path, /usr/local/bin in the
# tree: PREFIX replaces it.  The guest image goes in PREFIX/lib/space.
ZSHDIR ?= $(PREFIX)/share/zsh/site-functions
install: progs $(GUEST_IMAGE)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
	    $(DESTDIR)$(PREFIX)/share/bash-completion/completions \
	    $(DESTDIR)$(ZSHDIR) $(DESTDIR)$(PREFIX)/lib/space
	install -m 755 $(CMDS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 cmd/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 completion/space.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/space
	install -m 644 completion/_space $(DESTDIR)$(ZSHDIR)/_space
	for c in $(CMDS); do ln -sf space $(DESTDIR)$(PREFIX)/share/bash-completion/completions/$${c##*/}; done
	install -m 644 $(GUEST_IMAGE) $(DESTDIR)$(PREFIX)/lib/space/
	install -d $(DESTDIR)$(UNITDIR)
	for u in units/*.service units/*.timer; do \
		sed 's|/usr/local/bin/|$(PREFIX)/bin/|g' $$u >$(DESTDIR)$(UNITDIR)/$${u##*/} && \
		chmod 644 $(DESTDIR)$(UNITDIR)/$${u##*/} || exit 1; \
	done

# guest/build keeps the built kernel (kernel/): only distclean drops it.
clean:
	rm -rf $(B) guest/build/rootfs.tar.zst guest/build/initrd.img guest/build/vmlinuz \
	    guest/build/space-daemon

distclean: clean
	rm -rf guest/build

.PHONY: all progs guest guest-debian template-debian asan fuzz $(FUZZ:%=fuzz-%) unit check demo install clean distclean bench
.SECONDARY:

-include $(shell find $(B) -name '*.d' 2>/dev/null)
