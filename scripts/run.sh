#!/usr/bin/env bash
# Runs the skillhost host with the bundled skills: installs the system packages it needs
# (system.sh), builds the host, runs `skillhost setup` (the venv for Python skills, the
# search model and the guest toolchains, into DATA_DIR, where `serve` and every command
# look; quick once done), builds every skill in skills/ (only what changed), then runs
# `skillhost ARGS` (default: `list`).
# Example: ./scripts/run.sh call text-tools text_stats --input '{"text": "hi there"}'
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/system.sh

cargo build --quiet -p skillhost-cli
bin=target/debug/skillhost
"$bin" setup
for dir in skills/*/; do
    dir=${dir%/}
    [ -f "$dir/Cargo.toml" ] || continue
    # Rebuild a skill only when its sources or the SDK are newer than its skill.wasm.
    if [ ! -f "$dir/skill.wasm" ] || [ -n "$(find "$dir" guest-sdk wit -newer "$dir/skill.wasm" -type f -not -path '*/target/*' -not -name skill.wasm -print -quit)" ]; then
        "$bin" build "$dir"
    fi
done
exec "$bin" --skills skills "${@:-list}"
