#!/usr/bin/env bash
# Runs every test: installs what is missing, then the unit, integration, CLI and doc
# tests of the workspace (guest components are built from source by tests/build.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
# CI builds once, from a clean checkout: incremental caches (~5 GB here) would cost only
# disk and time. A developer's repeated runs keep them.
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL=0; fi
source scripts/setup.sh

cargo test "$@"
