# The user interface of automations. Every target here runs a real command; see README.md.
#
#   make automations-run NAME=heartbeat     run one automation now and print a one-line summary
#   make test                               the whole test suite

CARGO ?= cargo
HOST := $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p')

# The binary the automations-* targets and the benchmark use: an optimised build of this
# checkout. On glibc Linux it links musl where this machine can build for it, else glibc; either way
# statically and not position-independent, so a firing starts without the dynamic loader and
# without relocating the image. musl's start-up skips the dozens of `cpuid` queries glibc's makes
# (each a trip to the hypervisor on a VM; mimalloc's start-up makes four), which puts a firing near 0.7 x `flock … timeout …`
# instead of 0.8. Its allocator serves a firing and mimalloc the readers (src/allocator.rs). The
# linker places the functions a firing runs side by side (scripts/firing-musl.order and
# scripts/firing.order, made by `make firing-order`), which halves a firing's peak memory. The
# numbers and the trade-offs: docs/performance.md. `make release LIBC=gnu` builds the glibc one.
ifneq ($(findstring linux-gnu,$(HOST)),)
MUSL := $(subst -linux-gnu,-linux-musl,$(HOST))
SYSROOT := $(shell rustc --print sysroot 2>/dev/null)
# rustup's own lld (what rustc links glibc builds with); else Debian's.
GCC_LD := $(wildcard $(SYSROOT)/lib/rustlib/$(HOST)/bin/gcc-ld/ld.lld)
MUSL_MISSING := $(strip \
	$(if $(wildcard $(SYSROOT)/lib/rustlib/$(MUSL)/lib),,rustup target add $(MUSL);) \
	$(if $(shell command -v musl-gcc),,apt-get install musl-tools;) \
	$(if $(GCC_LD)$(shell command -v ld.lld),,apt-get install lld;))
# `make release LIBC=gnu` chooses glibc; a LIBC in the environment does not.
ifneq ($(origin LIBC),command line)
LIBC := $(if $(MUSL_MISSING),gnu,musl)
endif
ORDERED := -C target-feature=+crt-static -C relocation-model=static -C link-arg=-Wl,--no-warn-symbol-ordering
ifeq ($(LIBC),musl)
TARGET := $(MUSL)
RELEASE := CC_$(subst -,_,$(MUSL))=musl-gcc RUSTFLAGS="$(ORDERED) -C link-arg=-Wl,--symbol-ordering-file=scripts/firing-musl.order $(if $(GCC_LD),-C link-arg=-B$(dir $(GCC_LD))) -C link-arg=-fuse-ld=lld" $(CARGO) build --locked --release --quiet --target $(MUSL)
else
TARGET := $(HOST)
RELEASE := RUSTFLAGS="$(ORDERED) -C link-arg=-Wl,--symbol-ordering-file=scripts/firing.order" $(CARGO) build --locked --release --quiet --target $(HOST)
RELEASE_NOTE := $(if $(filter file,$(origin LIBC)),$(if $(MUSL_MISSING),make release: building against glibc (each firing ~20% slower: docs/performance.md). For the musl build: $(MUSL_MISSING)))
endif
BIN := target/$(TARGET)/release/automations
else
RELEASE := $(CARGO) build --locked --release --quiet
BIN := target/release/automations
endif
AUTOMATIONS := "$(BIN)" --root "$(CURDIR)"
# Where `make automations-install` puts the binary that installed units run: a stable path, never
# a target/ folder that the next build or `cargo clean` replaces.
STABLE_BIN ?= $(HOME)/.local/bin/automations

.PHONY: build release firing-order print-bin print-musl-missing test check check-macos lint bench \
	automations-list automations-defs-check automations-run automations-runs automations-show \
	automations-pause automations-resume automations-ack automations-install automations-uninstall automations-check \
	automations-units automations-plist automations-doctor \
	automations-key-store automations-key-check automations-key-delete \
	automations-health automations-notify-test automations-notify-key-store \
	automations-notify-key-check automations-notify-key-delete dashboard

build:
	$(CARGO) build --locked

release:
	@$(if $(RELEASE_NOTE),echo "$(RELEASE_NOTE)" >&2)
	@$(RELEASE)

# Regenerates the firing's symbol order for the build `make release` makes (scripts/firing-order.sh),
# then relinks with it.
firing-order: release
	scripts/firing-order.sh "$(BIN)"
	touch src/main.rs
	@$(RELEASE)

# The binary `make release` builds, and what this machine lacks for the musl build (empty when
# nothing, or off Linux), for scripts/test.sh.
print-bin:
	@echo "$(BIN)"

print-musl-missing:
	@echo "$(MUSL_MISSING)"

# Checks the test prerequisites first (installing them as root on Debian, else printing the one
# command that does), then runs every test; see scripts/test.sh.
test:
	CARGO="$(CARGO)" scripts/test.sh

# clippy for aarch64-apple-darwin and x86_64-apple-darwin, on Linux (compile and lint only).
check-macos:
	CARGO="$(CARGO)" scripts/check-macos.sh

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

check: lint test automations-defs-check automations-check

bench: release
	scripts/bench.sh "$(BIN)"

automations-list: release
	@$(AUTOMATIONS) list

automations-defs-check: release
	@$(AUTOMATIONS) validate

automations-run: release
	@test -n "$(NAME)" || { echo "usage: make automations-run NAME=<name>" >&2; exit 2; }
	@$(AUTOMATIONS) run "$(NAME)"

automations-runs: release
	@$(AUTOMATIONS) runs $(if $(NAME),"$(NAME)")

automations-show: release
	@test -n "$(RUN)" || { echo "usage: make automations-show RUN=<run id>" >&2; exit 2; }
	@$(AUTOMATIONS) show "$(RUN)"

automations-pause: release
	@test -n "$(NAME)" -a -n "$(REASON)" || { echo "usage: make automations-pause NAME=<name> REASON=\"why\"" >&2; exit 2; }
	@$(AUTOMATIONS) pause "$(NAME)" --reason "$(REASON)"

automations-resume: release
	@test -n "$(NAME)" || { echo "usage: make automations-resume NAME=<name>" >&2; exit 2; }
	@$(AUTOMATIONS) resume "$(NAME)"

automations-ack: release
	@test -n "$(NAME)" || { echo "usage: make automations-ack NAME=<name> [REASON=\"what was fixed\"]" >&2; exit 2; }
	@$(AUTOMATIONS) ack "$(NAME)" $(if $(REASON),--reason "$(REASON)")

# The binary goes in with mkdir + install (BSD install has no -D); install replaces the file
# instead of writing into it, so a firing running the old binary is never disturbed.
automations-install: release
	@test -n "$(NAME)" || { echo "usage: make automations-install NAME=<name> [DRY=1]" >&2; exit 2; }
ifeq ($(DRY),1)
	@$(AUTOMATIONS) install "$(NAME)" --dry-run --bin "$(STABLE_BIN)"
else
	@mkdir -p "$$(dirname "$(STABLE_BIN)")"
	@install -m 0755 "$(BIN)" "$(STABLE_BIN)"
	@echo "installed the binary at $(STABLE_BIN)"
	@"$(STABLE_BIN)" --root "$(CURDIR)" install "$(NAME)"
endif

automations-uninstall: release
	@test -n "$(NAME)" || { echo "usage: make automations-uninstall NAME=<name> [DRY=1]" >&2; exit 2; }
	@$(AUTOMATIONS) uninstall "$(NAME)" $(if $(filter 1,$(DRY)),--dry-run)

automations-check: release
	@$(AUTOMATIONS) check

automations-units: release
	@$(AUTOMATIONS) units

automations-plist: release
	@test -n "$(NAME)" || { echo "usage: make automations-plist NAME=<name>" >&2; exit 2; }
	@$(AUTOMATIONS) render "$(NAME)" --bin "$(STABLE_BIN)"

automations-doctor: release
	@$(AUTOMATIONS) doctor

automations-key-store: release
	@test -n "$(NAME)" || { echo "usage: make automations-key-store NAME=<name>" >&2; exit 2; }
	@$(AUTOMATIONS) key store "$(NAME)"

automations-key-check: release
	@test -n "$(NAME)" || { echo "usage: make automations-key-check NAME=<name>" >&2; exit 2; }
	@$(AUTOMATIONS) key check "$(NAME)"

automations-key-delete: release
	@test -n "$(NAME)" || { echo "usage: make automations-key-delete NAME=<name>" >&2; exit 2; }
	@$(AUTOMATIONS) key delete "$(NAME)"

automations-health: release
	@$(AUTOMATIONS) health $(if $(NAME),"$(NAME)")

automations-notify-test: release
	@$(AUTOMATIONS) notify test

automations-notify-key-store: release
	@$(AUTOMATIONS) notify-key store $(if $(filter 1,$(NTFY)),--ntfy)

automations-notify-key-check: release
	@$(AUTOMATIONS) notify-key check $(if $(filter 1,$(NTFY)),--ntfy)

automations-notify-key-delete: release
	@$(AUTOMATIONS) notify-key delete $(if $(filter 1,$(NTFY)),--ntfy)

dashboard: release
	@$(AUTOMATIONS) dashboard $(if $(PORT),--port "$(PORT)")
