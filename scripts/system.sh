#!/usr/bin/env bash
# Installs the system packages skillhost needs beyond the Rust toolchain, idempotently:
# the wasm32-wasip2 Rust target, bubblewrap (the sandbox of server skills) and Node.js
# with npm (for componentize-js). Sourced by run.sh and setup.sh.
set -euo pipefail

have_target() { rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; }
if ! have_target; then
    echo "setup: adding the wasm32-wasip2 Rust target" >&2
    rustup target add wasm32-wasip2 >&2
fi

# The sandbox runtime (Python/FastMCP skills) needs bubblewrap.
if ! command -v bwrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing bubblewrap" >&2
        apt-get install -y bubblewrap >&2 || { apt-get update >&2 && apt-get install -y bubblewrap >&2; }
    else
        echo "setup: bubblewrap (bwrap) is missing; install it to run Python skills and their tests" >&2
    fi
fi

# componentize-js and jco, which `skillhost build` uses for JavaScript skills, come from npm.
if ! command -v npm >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Node.js and npm (for componentize-js)" >&2
    apt-get install -y nodejs npm >&2 || { apt-get update >&2 && apt-get install -y nodejs npm >&2; } || true
fi

# A root host runs sandboxes as an unprivileged uid, which must reach the venv's base
# Python: `skillhost setup` then makes the venv from /usr/bin/python3, which needs venv.
if [ "$(id -u)" = 0 ] && [ -x /usr/bin/python3 ] && ! /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null \
    && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing python3-venv (the sandbox's uid runs the system Python)" >&2
    apt-get install -y python3-venv >&2 || { apt-get update >&2 && apt-get install -y python3-venv >&2; } || true
fi

# git: `skillhost install git+URL` fetches through the system git (never a shell).
if ! command -v git >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing git (for git skill sources)" >&2
    apt-get install -y git >&2 || { apt-get update >&2 && apt-get install -y git >&2; } || true
fi

# jq: the `--help` examples pipe `--json` output through it (their test runs them).
if ! command -v jq >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing jq" >&2
    apt-get install -y jq >&2 || { apt-get update >&2 && apt-get install -y jq >&2; } || true
fi

# rustfmt and clippy: scripts/test.sh checks formatting and lints before the tests.
for component in rustfmt clippy; do
    if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
        echo "setup: adding the $component component" >&2
        rustup component add "$component" >&2
    fi
done
