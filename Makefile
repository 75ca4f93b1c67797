# The user interface of automations. Every target here runs a real command; see README.md.
#
#   make automations-run NAME=heartbeat     run one automation now and print a one-line summary
#   make test                               the whole test suite

CARGO ?= cargo
# The binary the automations-* targets use: an optimised build of this checkout.
BIN := target/release/automations
AUTOMATIONS := $(BIN) --root $(CURDIR)

.PHONY: build release test check lint automations-list automations-defs-check

build:
	$(CARGO) build --locked

release:
	$(CARGO) build --locked --release --quiet

test:
	$(CARGO) test --locked

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

check: lint test automations-defs-check

automations-list: release
	@$(AUTOMATIONS) list

automations-defs-check: release
	@$(AUTOMATIONS) validate
