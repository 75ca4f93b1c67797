#!/bin/sh
# The heartbeat automation: says it is alive and reports one beat through the runner's result file.
set -eu
echo "heartbeat: alive at $(date -u +%Y-%m-%dT%H:%M:%SZ) as ${AUTOMATION_NAME:-?} (${AUTOMATION_TRIGGER:-?})"
if [ -n "${AUTOMATION_BIN:-}" ]; then
    "$AUTOMATION_BIN" result beats=1 --headline beats
fi
