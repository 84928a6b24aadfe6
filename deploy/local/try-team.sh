#!/usr/bin/env bash
# Try the team gateway on one machine: a PostgreSQL cluster of its own, two
# `skillhost serve --http` replicas sharing it, and HAProxy balancing between them, all on
# 127.0.0.1, in one temporary directory that Ctrl-C removes with everything it started.
#
#   deploy/local/try-team.sh                                  # replicas serve the built-in tools
#   TEAM_LOCK=~/.local/share/skillhost/skills.lock deploy/local/try-team.sh   # what a lock pins
#   SKILLHOST=target/debug/skillhost SKILLHOST_SKILLS=$PWD/skills deploy/local/try-team.sh
#
# Environment: SKILLHOST (the binary, default `skillhost` on PATH), TEAM_LOCK (a skills.lock
# both replicas serve), SKILLHOST_SKILLS (a skills folder both replicas serve), TEAM_PORT
# (the balancer, default 8780; the replicas take the next two ports for MCP, 8781 and 8782,
# and 1000 above those for their ops listeners, 9781 and 9782; its stats page 8790), TEAM_PG_PORT (55432), TEAM_DIR (use this directory and
# keep it, instead of a temporary one that is removed), TEAM_DRAIN (the replicas'
# --drain-timeout, 10s). Needs postgresql (initdb, postgres, psql) and haproxy:
# scripts/system.sh installs both. As root, PostgreSQL runs as the `postgres` user.
set -euo pipefail

SKILLHOST=${SKILLHOST:-skillhost}
# The first skillhost with the team gateway: `serve --ops`, `--state`, `[state]`, `[team]`.
NEEDS="a skillhost whose serve has --ops, --log-format and --drain-timeout, and the global --state"
port=${TEAM_PORT:-8780}
pg_port=${TEAM_PG_PORT:-55432}
drain=${TEAM_DRAIN:-10s}
ports=("$((port + 1))" "$((port + 2))")
ops=("$((port + 1001))" "$((port + 1002))")
names=(a b)
stats_port=$((port + 10))

die() { echo "try-team: $*" >&2; exit 2; }

# --- what it needs -------------------------------------------------------------------
command -v "$SKILLHOST" >/dev/null 2>&1 || die "no skillhost binary: \`$SKILLHOST\` is not on PATH (SKILLHOST=path/to/skillhost)"
if ! help=$("$SKILLHOST" serve --help 2>&1) || ! grep -q -- '--ops' <<<"$help"; then
    die "$("$SKILLHOST" --version 2>/dev/null || echo "$SKILLHOST") cannot serve a team: this needs $NEEDS"
fi
# Debian installs it in /usr/sbin, off a user's PATH.
haproxy=$(command -v haproxy 2>/dev/null || echo /usr/sbin/haproxy)
[ -x "$haproxy" ] || die "haproxy is missing: apt-get install haproxy (scripts/system.sh does)"
pg_bin=""
if command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then
    pg_bin=$(dirname "$(readlink -f "$(command -v postgres)")")
else
    pg_bin=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -1)   # the newest installed
fi
[ -n "$pg_bin" ] && [ -x "$pg_bin/initdb" ] && [ -x "$pg_bin/postgres" ] \
    || die "PostgreSQL is missing (initdb, postgres): apt-get install postgresql (scripts/system.sh does)"
psql=$pg_bin/psql; [ -x "$psql" ] || psql=psql
[ -z "${TEAM_LOCK:-}" ] || [ -f "$TEAM_LOCK" ] || die "TEAM_LOCK=$TEAM_LOCK is not a file"
[ -z "${TEAM_LOCK:-}" ] || TEAM_LOCK=$(readlink -f "$TEAM_LOCK")
if [ -n "${SKILLHOST_SKILLS:-}" ]; then SKILLHOST_SKILLS=$(readlink -f "$SKILLHOST_SKILLS"); export SKILLHOST_SKILLS; fi
SKILLHOST=$(command -v "$SKILLHOST"); SKILLHOST=$(readlink -f "$SKILLHOST")

in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "$port" "${ports[@]}" "${ops[@]}" "$pg_port" "$stats_port"; do
    ! in_use "$p" || die "port $p on 127.0.0.1 is taken: pick other ports with TEAM_PORT=... TEAM_PG_PORT=..."
done

# --- one directory for everything -----------------------------------------------------
if [ -n "${TEAM_DIR:-}" ]; then
    dir=$(mkdir -p "$TEAM_DIR" && cd "$TEAM_DIR" && pwd); keep=1
else
    dir=$(mktemp -d "${TMPDIR:-/tmp}/skillhost-team.XXXXXX"); keep=0
fi
# Searchable by others: the postgres user, and a root host's sandbox uid (65534), which
# must reach the replicas' data dirs.
chmod 755 "$dir"
pids=()
pg_pid=""
cleanup() {
    trap - INT TERM EXIT
    echo >&2
    echo "try-team: stopping (replicas drain, up to $drain)" >&2
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ -n "$pg_pid" ]; then kill -INT "$pg_pid" 2>/dev/null || true; wait "$pg_pid" 2>/dev/null || true; fi
    if [ "$keep" = 0 ]; then rm -rf "$dir"; else echo "try-team: kept $dir" >&2; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

hex32() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
secret_file() { ( umask 077; hex32 > "$1" ); }

# --- PostgreSQL: a cluster of its own ---------------------------------------------------
# initdb and postgres refuse root: as root they run as `postgres` (setpriv execs, so the
# pid below is the postmaster's own, and SIGINT is its fast shutdown). Every server runs in
# a session of its own (setsid execs too): Ctrl-C reaches this script alone, which stops
# them in order: the balancer, then the replicas (they drain), then PostgreSQL.
as_pg=()
mkdir -p "$dir/pg" "$dir/pg-socket"
# Local connections are trusted (the script's own psql): only the cluster's owner may reach
# its socket, never another local user.
chmod 700 "$dir/pg-socket"
if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || die "running as root, PostgreSQL needs the \`postgres\` user (apt-get install postgresql makes it)"
    chown postgres: "$dir/pg" "$dir/pg-socket"
    as_pg=(setpriv --reuid=postgres --regid=postgres --clear-groups --)
fi
pg_password=$(hex32)
secret_file "$dir/pg-superuser"
[ "$(id -u)" != 0 ] || chown postgres "$dir/pg-superuser"
echo "try-team: PostgreSQL on 127.0.0.1:$pg_port ($pg_bin)" >&2
"${as_pg[@]}" "$pg_bin/initdb" -D "$dir/pg" -U postgres --pwfile="$dir/pg-superuser" \
    --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; die "initdb failed (above)"; }
setsid "${as_pg[@]}" "$pg_bin/postgres" -D "$dir/pg" -k "$dir/pg-socket" -p "$pg_port" \
    -c listen_addresses=127.0.0.1 -c unix_socket_permissions=0700 >"$dir/postgres.log" 2>&1 &
pg_pid=$!
for _ in $(seq 100); do
    "$pg_bin/pg_isready" -q -h "$dir/pg-socket" -p "$pg_port" && break
    kill -0 "$pg_pid" 2>/dev/null || { cat "$dir/postgres.log" >&2; die "postgres did not start (above)"; }
    sleep 0.1
done
"$psql" -q -h "$dir/pg-socket" -p "$pg_port" -U postgres -v ON_ERROR_STOP=1 \
    -c "CREATE ROLE skillhost LOGIN PASSWORD '$pg_password'" -c "CREATE DATABASE skillhost OWNER skillhost" >&2
state_url="postgres://skillhost:$pg_password@127.0.0.1:$pg_port/skillhost"

# --- the shared secrets and the configs -----------------------------------------------
secret_file "$dir/keys"      # signs approval handles and requestState; every replica has it
secret_file "$dir/token"     # the bearer token agents send; every replica accepts it
config() { # NAME [REPLICA]
    ( umask 077
      { echo "[state]"
        echo "url = \"$state_url\""
        [ -z "${2:-}" ] || echo "replica = \"$2\""
        echo "keys = \"$dir/keys\""
        if [ -n "${TEAM_LOCK:-}" ]; then echo; echo "[team]"; echo "lock = \"$TEAM_LOCK\""; fi
      } > "$dir/$1.toml" )
}
config team              # for the CLI: approvals, audit, stats against the shared state
for i in 0 1; do config "${names[$i]}" "${names[$i]}"; done

# --- two replicas ---------------------------------------------------------------------
for i in 0 1; do
    name=${names[$i]}
    mkdir -p "$dir/$name"
    echo "try-team: replica $name on 127.0.0.1:${ports[$i]} (ops 127.0.0.1:${ops[$i]}), log $dir/$name.log" >&2
    ( cd "$dir" && SKILLHOST_CONFIG="$dir/$name.toml" exec setsid "$SKILLHOST" --data-dir "$dir/$name" serve \
        --http "127.0.0.1:${ports[$i]}" --ops "127.0.0.1:${ops[$i]}" --token-file "$dir/token" \
        --log-format json --drain-timeout "$drain" ) >"$dir/$name.log" 2>&1 &
    pids+=("$!")
done

# --- HAProxy ------------------------------------------------------------------------
cat > "$dir/haproxy.cfg" <<CFG
# Generated by deploy/local/try-team.sh: round robin over two skillhost replicas.
global
    log stdout format raw local0
    maxconn 1024

defaults
    mode http
    log global
    option httplog
    timeout connect 2s
    timeout http-request 10s
    timeout http-keep-alive 10s
    timeout queue 10s
    timeout check 2s
    # A tool call may run for minutes, and SSE streams (progress, notifications) idle.
    timeout client 10m
    timeout server 10m
    timeout tunnel 1h

frontend mcp
    bind 127.0.0.1:$port
    default_backend replicas

backend replicas
    balance roundrobin
    # A replica is in rotation while its ops listener's /readyz says 200: it leaves it
    # when draining (SIGTERM) or when its skills differ from the lock.
    option httpchk
    http-check send meth GET uri /readyz
    http-check expect status 200
    default-server inter 1s fall 2 rise 2
    # Retry on another replica only what no replica ran: a connection that failed, an
    # idle connection the replica closed as the request was sent, and the 503 a draining
    # replica answers new requests with. Never on a response timeout: the call may have
    # run, and would run twice.
    retries 2
    option redispatch 1
    retry-on conn-failure empty-response 503
    # Clients of the session era (Mcp-Session-Id) stay on the replica that holds their
    # session; 2026-07-28 clients send no session and go to any replica.
    stick-table type string len 128 size 100k expire 1h
    stick on req.hdr(mcp-session-id)
    stick store-response res.hdr(mcp-session-id)
    server ${names[0]} 127.0.0.1:${ports[0]} check port ${ops[0]}
    server ${names[1]} 127.0.0.1:${ports[1]} check port ${ops[1]}

listen stats
    bind 127.0.0.1:$stats_port
    stats enable
    stats uri /
    stats refresh 2s
CFG
"$haproxy" -q -c -f "$dir/haproxy.cfg" || die "haproxy refused $dir/haproxy.cfg (above)"
setsid "$haproxy" -W -db -f "$dir/haproxy.cfg" >"$dir/haproxy.log" 2>&1 &
pids=("$!" "${pids[@]}")   # stopped first: no new requests while the replicas drain

# --- ready? --------------------------------------------------------------------------
ready() { command -v curl >/dev/null 2>&1 && curl -fs -o /dev/null --max-time 1 "$1"; }
for i in 0 1; do
    for _ in $(seq 300); do
        ready "http://127.0.0.1:${ops[$i]}/readyz" && break
        kill -0 "${pids[$((i + 1))]}" 2>/dev/null || { tail -20 "$dir/${names[$i]}.log" >&2; die "replica ${names[$i]} stopped (above; all of it in $dir/${names[$i]}.log)"; }
        sleep 0.2
    done
done

cat <<INFO

  MCP endpoint   http://127.0.0.1:$port/mcp
  bearer token   $(cat "$dir/token")
                 (Authorization: Bearer <token>; the file is $dir/token)
  balancer       http://127.0.0.1:$stats_port/   (which replica is up, requests per replica)
  replicas       a: 127.0.0.1:${ports[0]}  b: 127.0.0.1:${ports[1]}
                 /healthz /readyz /metrics on 127.0.0.1:${ops[0]} and 127.0.0.1:${ops[1]}
  PostgreSQL     $state_url
  approve        SKILLHOST_CONFIG=$dir/team.toml $SKILLHOST approve NAME
  audit          SKILLHOST_CONFIG=$dir/team.toml $SKILLHOST audit --since 1h
  drain one      kill -TERM ${pids[1]}    (replica a: /readyz 503, the balancer sends to b)
  logs           $dir/{a,b,haproxy,postgres}.log

  Ctrl-C stops everything$([ "$keep" = 1 ] && echo " (and keeps $dir)" || echo " and removes $dir").
INFO

# Until Ctrl-C: a replica that stops (drained, or failed) is reported and the others go on.
replica_pids=("${pids[@]:1}")
haproxy_pid=${pids[0]}
gone=("" "")
while sleep 1; do
    kill -0 "$pg_pid" 2>/dev/null || { keep=1; die "PostgreSQL stopped: see $dir/postgres.log"; }
    kill -0 "$haproxy_pid" 2>/dev/null || { keep=1; die "HAProxy stopped: see $dir/haproxy.log"; }
    for i in 0 1; do
        if [ -z "${gone[$i]}" ] && ! kill -0 "${replica_pids[$i]}" 2>/dev/null; then
            gone[i]=1
            wait "${replica_pids[$i]}" && code=0 || code=$?
            echo "try-team: replica ${names[$i]} stopped (exit $code; its log: $dir/${names[$i]}.log)" >&2
        fi
    done
done
