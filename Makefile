# The user interface of automations. Every target here runs a real command; see README.md.
#
#   make automations-run NAME=heartbeat     run one automation now and print a one-line summary
#   make test                               the whole test suite

CARGO ?= cargo

# The binary the automations-* targets, the tests and the benchmark use: cargo's plain release
# build of this checkout, what `cargo install --path . --locked` gives (the release artifact's build,
# static and with its own allocator, is `make dist`'s: docs/performance.md).
RELEASE := $(CARGO) build --locked --release --quiet
BIN := target/release/automations
AUTOMATIONS := "$(BIN)" --root "$(CURDIR)"
# Where `make automations-install` puts the binary that installed units run: a stable path, never
# a target/ folder that the next build or `cargo clean` replaces.
STABLE_BIN ?= $(HOME)/.local/bin/automations

.PHONY: build release test check check-macos check-windows check-aarch64 lint bench dist \
	automations-list automations-defs-check automations-run automations-runs automations-show \
	automations-pause automations-resume automations-ack automations-install automations-uninstall automations-check \
	automations-units automations-plist automations-doctor \
	automations-secret-store automations-secret-check automations-secret-delete automations-secret-list \
	automations-key-store automations-key-check automations-key-delete \
	automations-health automations-notify-test automations-notify-key-store \
	automations-notify-key-check automations-notify-key-delete dashboard

build:
	$(CARGO) build --locked

release:
	@$(RELEASE)

# Checks the test prerequisites first (installing them as root on Debian, else printing the one
# command that does), then runs every test; see scripts/test.sh.
test:
	CARGO="$(CARGO)" scripts/test.sh

# clippy for aarch64-apple-darwin and x86_64-apple-darwin, on Linux (compile and lint only).
check-macos:
	CARGO="$(CARGO)" scripts/check-macos.sh

# clippy for x86_64-pc-windows-gnu (Debian's mingw-w64 for its C parts): the library and the
# program; the tests themselves are Unix's (docs/windows.md). make test lints the same while it
# builds the Windows program its Wine test runs, so CI compiles it once.
check-windows:
	$(CARGO) clippy --locked --profile test-build --target x86_64-pc-windows-gnu -- -D warnings

# The release artifact's build for arm64 Linux (musl, mimalloc), with Debian's cross C compiler for
# its C parts: compiles, runs nothing.
check-aarch64:
	CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc $(CARGO) check --locked --profile dist \
		--target aarch64-unknown-linux-musl --features mimalloc

# clippy in the tests' profile: its proc macros and build scripts are the very ones `make test`
# builds, so CI compiles them once.
lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --profile test-build --all-targets -- -D warnings

check: lint test automations-defs-check automations-check

# The guards of docs/performance.md, as ratios against baselines timed in the same run; make
# dist's binary, when it is built, is measured beside (not held to a target).
DIST_BIN := target/x86_64-unknown-linux-musl/dist/automations
bench: release
	scripts/bench.sh "$(BIN)" $(wildcard $(DIST_BIN))

# The release artifacts, into target/dist/: a static musl binary with mimalloc, its manual pages
# and completions, as a tarball and a .deb, with SHA256SUMS (scripts/dist.sh).
dist:
	CARGO="$(CARGO)" scripts/dist.sh

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

# NAME may name several automations ("a b c"), or ALL=1 every scheduled one: one plan, one y.
# The release binary is copied to STABLE_BIN by the install itself, after the y and only when it
# differs (a copy beside it, then a rename: a firing running the old binary is never disturbed).
automations-install: release
	@test -n "$(NAME)$(ALL)" || { echo "usage: make automations-install NAME=<name> [NAME=\"a b\"] [ALL=1] [DRY=1]" >&2; exit 2; }
	@$(AUTOMATIONS) install $(NAME) $(if $(filter 1,$(ALL)),--all) --bin "$(STABLE_BIN)" --install-binary $(if $(filter 1,$(DRY)),--dry-run)

automations-uninstall: release
	@test -n "$(NAME)$(ALL)" || { echo "usage: make automations-uninstall NAME=<name> [ALL=1] [DRY=1]" >&2; exit 2; }
	@$(AUTOMATIONS) uninstall $(NAME) $(if $(filter 1,$(ALL)),--all) $(if $(filter 1,$(DRY)),--dry-run)

automations-check: release
	@$(AUTOMATIONS) check

automations-units: release
	@$(AUTOMATIONS) units

automations-plist: release
	@test -n "$(NAME)" || { echo "usage: make automations-plist NAME=<name>" >&2; exit 2; }
	@$(AUTOMATIONS) render "$(NAME)" --bin "$(STABLE_BIN)"

automations-doctor: release
	@$(AUTOMATIONS) doctor

# Secrets, one family: SCOPE is an automation's name, notify.DRIVER or healthchecks.ping|api.
automations-secret-store automations-secret-check automations-secret-delete: release
	@test -n "$(SCOPE)" || { echo "usage: make $@ SCOPE=<name|notify.DRIVER|healthchecks.ping|healthchecks.api>" >&2; exit 2; }
	@$(AUTOMATIONS) secret $(patsubst automations-secret-%,%,$@) "$(SCOPE)"

automations-secret-list: release
	@$(AUTOMATIONS) secret list

# The spellings the secret family replaced: each says the new one.
automations-key-store automations-key-check automations-key-delete:
	@echo "make $@ is now: make automations-secret-$(patsubst automations-key-%,%,$@) SCOPE=$(or $(NAME),<name>)" >&2; exit 2

automations-health: release
	@$(AUTOMATIONS) health $(if $(NAME),"$(NAME)")

automations-notify-test: release
	@$(AUTOMATIONS) notify test

automations-notify-key-store automations-notify-key-check automations-notify-key-delete:
	@echo "make $@ is now: make automations-secret-$(patsubst automations-notify-key-%,%,$@) SCOPE=notify.$(if $(filter 1,$(NTFY)),ntfy,$(if $(filter 1,$(WEBHOOK)),webhook,$(if $(filter 1,$(EMAIL)),email,pushover)))" >&2; exit 2

dashboard: release
	@$(AUTOMATIONS) dashboard $(if $(PORT),--port "$(PORT)")
