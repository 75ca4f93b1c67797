#!/usr/bin/env bash
# The symbol order file the release build BIN was linked with (Makefile): scripts/firing-musl.order
# for a musl build, scripts/firing.order for a glibc one. Prints its path relative to the checkout.
#
# Usage: scripts/order-file.sh BIN
set -euo pipefail
case $(realpath "$1") in
*-linux-musl/*) echo scripts/firing-musl.order ;;
*) echo scripts/firing.order ;;
esac
