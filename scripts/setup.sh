#!/usr/bin/env bash
# Installs what skillhost needs beyond the Rust toolchain, idempotently. Sourced by
# run.sh and test.sh; safe to run again and again.
set -euo pipefail

have_target() { rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; }
if ! have_target; then
    echo "setup: adding the wasm32-wasip2 Rust target" >&2
    rustup target add wasm32-wasip2 >&2
fi
