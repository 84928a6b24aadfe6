#!/usr/bin/env bash
# Installs the system packages skillhost needs beyond the Rust toolchain, idempotently:
# the wasm32-wasip2 Rust target, bubblewrap (the sandbox of server skills), Node.js
# with npm (for componentize-js), and PostgreSQL and HAProxy (the team gateway's shared
# state and a load balancer, for its tests and deploy/local/try-team.sh). Sourced by
# run.sh and setup.sh.
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

# PostgreSQL: the shared state of a team gateway (`[state] url = "postgres://..."`).
# The package's own cluster and service are never used: each test (and
# deploy/local/try-team.sh) makes a throwaway cluster in a temporary directory, as the
# `postgres` user when root (host/store/src/postgres/cluster.rs). Debian keeps initdb and
# postgres under /usr/lib/postgresql/VERSION/bin, off PATH.
have_postgres() { command -v postgres >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; }
if ! have_postgres; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing postgresql (the shared state of a team gateway, for its tests)" >&2
        apt-get install -y postgresql >&2 || { apt-get update >&2 && apt-get install -y postgresql >&2; }
    else
        echo "setup: PostgreSQL is missing; install it (apt-get install postgresql) for the team gateway's tests" >&2
    fi
fi

# HAProxy: the load balancer in front of the replicas in deploy/local/try-team.sh and the
# team gateway's tests, each with its own generated haproxy.cfg.
if ! command -v haproxy >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing haproxy (the load balancer of the team gateway's tests)" >&2
        apt-get install -y haproxy >&2 || { apt-get update >&2 && apt-get install -y haproxy >&2; }
    else
        echo "setup: haproxy is missing; install it (apt-get install haproxy) for the team gateway's tests" >&2
    fi
fi

# The packages enable system services (PostgreSQL's main cluster on :5432, HAProxy) and
# start them where systemd runs; the tests start their own and need none of them.
# `systemctl disable` works without a running systemd too (it removes the links).
if [ "$(id -u)" = 0 ] && command -v systemctl >/dev/null 2>&1; then
    for service in postgresql haproxy; do
        if systemctl is-active --quiet "$service" 2>/dev/null; then
            echo "setup: stopping the $service service (the tests start their own)" >&2
            systemctl stop "$service" >&2 || true
        fi
        if systemctl is-enabled --quiet "$service" 2>/dev/null; then
            echo "setup: disabling the $service service (the tests start their own)" >&2
            systemctl disable "$service" >&2 2>/dev/null || true
        fi
    done
fi

# rustfmt and clippy: scripts/test.sh checks formatting and lints before the tests.
for component in rustfmt clippy; do
    if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
        echo "setup: adding the $component component" >&2
        rustup component add "$component" >&2
    fi
done
