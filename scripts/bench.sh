#!/usr/bin/env bash
# Runs the criterion benchmarks (all of them, or those selected by cargo arguments such as
# `-p skillhost-index`), then writes BENCHMARKS.md from the results on disk.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

if [ "$#" -eq 0 ]; then set -- --workspace; fi
cargo bench "$@"
cargo run -q -p skillhost-tests --bin bench-report -- target BENCHMARKS.md
