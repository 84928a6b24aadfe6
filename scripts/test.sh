#!/usr/bin/env bash
# Runs every test: installs what is missing, then the unit, integration, CLI and doc
# tests of the workspace (guest components are built from source by tests/build.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

cargo test "$@"
