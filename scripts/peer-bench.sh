#!/usr/bin/env bash
# skillhost against its closest peer, hyper-mcp (a Rust MCP server of Extism wasm plugins),
# the same echo tool served by each over stdio (issue 46). Builds, each step skipped or
# a no-op when done: skillhost (release), hyper-mcp at a pinned version from crates.io,
# the echo skill (`skillhost new` + scripts/peer-bench/echo.rs, `skillhost build`) and
# the echo plugin (scripts/peer-bench/hyper-echo, on the Extism PDK), all under
# TARGET/peer-bench (TARGET: CARGO_TARGET_DIR or ./target) but the echo skill, a standalone
# crate made outside the checkout (in the checkout, `skillhost new` makes a member of this
# repository's workspace): in $XDG_CACHE_HOME/skillhost-peer-bench. Then runs
# scripts/peer-bench/bench.py, which prints the table (with --json, one JSON object).
# Not run by CI: its figures are timings. Run it with nothing else busy on the machine.
#
# Usage: scripts/peer-bench.sh [--json]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

PEER_VERSION=0.8.3
target="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
dir="$target/peer-bench"
mkdir -p "$dir"
say() { echo "peer-bench: $*" >&2; }

say "skillhost (release)"
cargo build --release --quiet -p skillhost-cli
skillhost="$target/release/skillhost"

hyper="$dir/hyper-mcp-$PEER_VERSION/bin/hyper-mcp"
if [ ! -x "$hyper" ]; then
    say "hyper-mcp $PEER_VERSION from crates.io (a few minutes, once)"
    if ! cargo info --quiet "hyper-mcp@$PEER_VERSION" >/dev/null; then
        say "crates.io has no hyper-mcp $PEER_VERSION: pin a version it has in PEER_VERSION"
        exit 1
    fi
    cargo install --quiet --locked hyper-mcp --version "$PEER_VERSION" \
        --root "$dir/hyper-mcp-$PEER_VERSION" --target-dir "$dir/hyper-mcp-build"
fi

# Both echo tools are built for wasm32-wasip2, which a fresh Rust toolchain lacks.
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    say "adding the wasm32-wasip2 Rust target"
    rustup target add wasm32-wasip2 >&2
fi

# The plugin is linked as a core module for Extism; see hyper-echo/src/wasip2.rs for why
# wasm32-wasip2.
say "the echo plugin (Extism PDK)"
cargo build --quiet --release --locked --target wasm32-wasip2 \
    --manifest-path scripts/peer-bench/hyper-echo/Cargo.toml --target-dir "$dir/hyper-echo-build" \
    --config 'target.wasm32-wasip2.rustflags=["-Clink-arg=--skip-wit-component"]'
plugin="$dir/hyper-echo-build/wasm32-wasip2/release/hyper_echo.wasm"

say "the echo skill (skillhost SDK)"
skills="${XDG_CACHE_HOME:-$HOME/.cache}/skillhost-peer-bench"
mkdir -p "$skills"
if [ ! -f "$skills/echo/skill.toml" ]; then
    (cd "$skills" && "$skillhost" --data-dir "$dir/build-data" new echo --lang rust >/dev/null)
    sed -i 's/^description = .*/description = "Echo the text back"/' "$skills/echo/skill.toml"
fi
cmp -s scripts/peer-bench/echo.rs "$skills/echo/src/lib.rs" || cp scripts/peer-bench/echo.rs "$skills/echo/src/lib.rs"
"$skillhost" --data-dir "$dir/build-data" build "$skills/echo" >/dev/null

python3 scripts/peer-bench/bench.py --skillhost "$skillhost" --skill "$skills/echo/skill.wasm" \
    --hyper-mcp "$hyper" --plugin "$plugin" --peer-version "$PEER_VERSION" --work "$dir/run" "$@"
