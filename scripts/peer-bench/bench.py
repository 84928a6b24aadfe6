#!/usr/bin/env python3
"""skillhost against hyper-mcp, the same echo tool served by each over stdio.

scripts/peer-bench.sh builds both servers and both echo tools, then runs this. One raw
JSON-RPC line client (no SDK) drives each server as an agent's MCP client does:
`initialize`, `notifications/initialized`, `tools/list`, `tools/call`. The servers take
turns, skillhost first in rounds 1 and 3, hyper-mcp first in round 2; each figure is the
median of its three round values, and each ratio is skillhost's median over hyper-mcp's.

In each round, each server:

1. is spawned with its compiled cache empty (skillhost: a new data dir; hyper-mcp: an empty
   wasmtime cache directory, which Extism uses by default, here named by
   EXTISM_CACHE_CONFIG): the time from the spawn to the first `tools/call` answered, sent
   right after `notifications/initialized`. It then exits on end of input, keeping what it
   compiled.
2. is spawned again on those warm caches: spawn -> `initialize` answered, spawn -> first
   `tools/call` answered. This session goes on: after IDLE_S of idle its resident memory
   (VmRSS) is read, `tools/list` is checked to hold the echo tool, WARMUP_CALLS calls warm
   it up, SEQUENTIAL_CALLS calls are made one at a time (each round trip timed; the
   server's CPU time, utime + stime of /proc/PID/stat over all its threads, is read
   before and after them), then PARALLEL_CALLS calls with IN_FLIGHT requests in flight
   on the one session (a new one sent as each answer comes in). Its peak resident memory
   (VmHWM) is read after these TOTAL_CALLS calls.

Every answer is checked: a JSON-RPC error, an `isError` result or a result without the
echoed text stops the bench. The client runs on the same machine and its own time is in
the round trips of both servers alike.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

TEXT = "hello"
WARMUP_CALLS = 199
SEQUENTIAL_CALLS = 2000
PARALLEL_CALLS = 2000
IN_FLIGHT = 8
TOTAL_CALLS = 1 + WARMUP_CALLS + SEQUENTIAL_CALLS + PARALLEL_CALLS
IDLE_S = 3.0
ROUNDS = 3
PROTOCOL = "2025-06-18"
EXIT_WAIT_S = 60.0
ANSWER_WAIT_S = 120.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """A server did not answer as the bench expects."""


class Server:
    """One server process and the client's side of its stdio session."""

    def __init__(self, name, argv, env, log):
        self.name = name
        self.log = log
        self.next_id = 0
        self.spawned = time.perf_counter()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log, "ab"), env=env
        )

    def send(self, message):
        self.proc.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def call_echo(self, tool):
        return self.request("tools/call", {"name": tool, "arguments": {"text": TEXT}})

    def answer(self):
        """The next answer to one of our requests (notifications are skipped), and when it
        was read."""
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise BenchError(f"{self.name} closed its output; its log, {self.log}, ends with:\n{self.log_tail()}")
            message = json.loads(line)
            if "id" in message and ("result" in message or "error" in message):
                return message, time.perf_counter()
            if "method" in message and "id" in message:
                raise BenchError(f"{self.name} asked the client `{message['method']}`, which the bench does not answer")

    def answer_to(self, request_id, what):
        message, at = self.answer()
        if message.get("id") != request_id:
            raise BenchError(f"{self.name}: expected the answer to {what} (id {request_id}), got id {message.get('id')}")
        if "error" in message:
            raise BenchError(f"{self.name} answered {what} with an error: {message['error']}")
        return message["result"], at

    def initialize(self):
        request_id = self.request(
            "initialize",
            {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "peer-bench", "version": "1"}},
        )
        _, at = self.answer_to(request_id, "initialize")
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return at

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def memory_mib(self, key):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
        raise BenchError(f"{self.name}: no {key} in /proc/{self.proc.pid}/status")

    def close(self):
        """End of input, as a client that leaves; killed if it has not exited in EXIT_WAIT_S."""
        self.proc.stdin.close()
        try:
            self.proc.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()

    def log_tail(self):
        with open(self.log, "rb") as f:
            return f.read()[-2000:].decode(errors="replace")


def check_echo(server, result, what):
    if result.get("isError"):
        raise BenchError(f"{server.name} answered {what} with a tool error: {result}")
    texts = [c.get("text", "") for c in result.get("content", [])]
    if not any(TEXT in t for t in texts):
        raise BenchError(f"{server.name}: {what} did not echo {TEXT!r}: {result}")


class Peer:
    """How one server is started, and how its compiled cache is emptied."""

    def __init__(self, name, tool, work):
        self.name = name
        self.tool = tool
        self.work = os.path.join(work, name)
        self.home = os.path.join(self.work, "home")

    def env(self):
        home = self.home
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "XDG_CONFIG_HOME": os.path.join(home, ".config"),
            "XDG_DATA_HOME": os.path.join(home, ".local/share"),
            "XDG_CACHE_HOME": os.path.join(home, ".cache"),
            "LANG": "C.UTF-8",
        }

    def reset(self):
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.home)


class Skillhost(Peer):
    def __init__(self, binary, skill, work):
        super().__init__("skillhost", "echo__echo", work)
        self.binary = binary
        self.skill = skill

    def empty_caches(self):
        self.reset()
        skills = os.path.join(self.work, "skills")
        os.makedirs(skills)
        shutil.copy(self.skill, os.path.join(skills, "echo.wasm"))

    def spawn(self, log):
        argv = [
            self.binary,
            "--skills",
            os.path.join(self.work, "skills"),
            "--data-dir",
            os.path.join(self.work, "data"),
            "serve",
        ]
        return Server(self.name, argv, self.env(), log)


class HyperMcp(Peer):
    def __init__(self, binary, plugin, work):
        super().__init__("hyper-mcp", "echo-echo", work)
        self.binary = binary
        self.plugin = plugin

    def empty_caches(self):
        self.reset()
        plugin = os.path.join(self.work, "echo.wasm")
        shutil.copy(self.plugin, plugin)
        with open(os.path.join(self.work, "config.json"), "w") as f:
            json.dump({"plugins": {"echo": {"url": "file://" + plugin}}}, f)
        with open(os.path.join(self.work, "wasmtime-cache.toml"), "w") as f:
            f.write(f'[cache]\ndirectory = "{os.path.join(self.work, "wasmtime-cache")}"\n')

    def spawn(self, log):
        env = self.env()
        env["EXTISM_CACHE_CONFIG"] = os.path.join(self.work, "wasmtime-cache.toml")
        env["HYPER_MCP_LOG_PATH"] = os.path.join(self.work, "logs")
        argv = [self.binary, "--config-file", os.path.join(self.work, "config.json")]
        return Server(self.name, argv, env, log)


def first_call(server, tool):
    """spawn -> initialize answered, spawn -> first tools/call answered, in seconds."""
    initialized = server.initialize()
    result, answered = server.answer_to(server.call_echo(tool), "the first tools/call")
    check_echo(server, result, "the first tools/call")
    return initialized - server.spawned, answered - server.spawned


def one_round(peer, logs):
    figures = {}
    peer.empty_caches()
    cold = peer.spawn(os.path.join(logs, f"{peer.name}.log"))
    try:
        _, call = first_call(cold, peer.tool)
        figures["cold_first_call_ms"] = 1000 * call
    finally:
        cold.close()

    server = peer.spawn(os.path.join(logs, f"{peer.name}.log"))
    try:
        initialize, call = first_call(server, peer.tool)
        figures["warm_initialize_ms"] = 1000 * initialize
        figures["warm_first_call_ms"] = 1000 * call

        time.sleep(IDLE_S)
        figures["idle_rss_mib"] = server.memory_mib("VmRSS")
        tools, _ = server.answer_to(server.request("tools/list", {}), "tools/list")
        if peer.tool not in [t["name"] for t in tools.get("tools", [])]:
            raise BenchError(f"{peer.name}: tools/list does not hold {peer.tool}: {tools}")

        for _ in range(WARMUP_CALLS):
            result, _ = server.answer_to(server.call_echo(peer.tool), "a warm-up call")
            check_echo(server, result, "a warm-up call")

        round_trips = []
        cpu_before = server.cpu_seconds()
        for _ in range(SEQUENTIAL_CALLS):
            sent = time.perf_counter()
            result, answered = server.answer_to(server.call_echo(peer.tool), "a sequential call")
            round_trips.append(answered - sent)
            check_echo(server, result, "a sequential call")
        cpu = server.cpu_seconds() - cpu_before
        figures["warm_round_trip_us"] = 1e6 * statistics.median(round_trips)
        figures["cpu_per_call_us"] = 1e6 * cpu / SEQUENTIAL_CALLS

        pending = set()
        started = time.perf_counter()
        sent = answered = 0
        while sent < IN_FLIGHT:
            pending.add(server.call_echo(peer.tool))
            sent += 1
        while answered < PARALLEL_CALLS:
            message, _ = server.answer()
            if message.get("id") not in pending or "error" in message:
                raise BenchError(f"{peer.name}: unexpected answer with {IN_FLIGHT} in flight: {message}")
            pending.remove(message["id"])
            check_echo(server, message["result"], "a call with others in flight")
            answered += 1
            if sent < PARALLEL_CALLS:
                pending.add(server.call_echo(peer.tool))
                sent += 1
        figures["in_flight_calls_per_s"] = PARALLEL_CALLS / (time.perf_counter() - started)
        figures["peak_rss_mib"] = server.memory_mib("VmHWM")
    finally:
        server.close()
    return figures


# (key, label, unit, decimals)
ROWS = [
    ("warm_round_trip_us", "warm `tools/call` round trip, sequential (median)", "µs", 0),
    ("cpu_per_call_us", "server CPU per sequential call (utime + stime)", "µs", 0),
    ("in_flight_calls_per_s", f"{IN_FLIGHT} calls in flight, one session", "calls/s", 0),
    ("cold_first_call_ms", "spawn → first call answered, compiled caches empty", "ms", 1),
    ("warm_initialize_ms", "spawn → `initialize` answered, caches warm", "ms", 1),
    ("warm_first_call_ms", "spawn → first call answered, caches warm", "ms", 1),
    ("idle_rss_mib", f"idle RSS after the first call ({IDLE_S:.0f} s idle, one skill)", "MiB", 1),
    ("peak_rss_mib", f"peak RSS after {TOTAL_CALLS:,} calls (VmHWM)", "MiB", 1),
]


def loadavg():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def number(value, decimals):
    return f"{value:,.{decimals}f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skillhost", required=True, help="the skillhost binary (release)")
    parser.add_argument("--skill", required=True, help="the echo skill's component")
    parser.add_argument("--hyper-mcp", required=True, help="the hyper-mcp binary")
    parser.add_argument("--plugin", required=True, help="the echo plugin (Extism module)")
    parser.add_argument("--peer-version", required=True, help="hyper-mcp's version, for the table")
    parser.add_argument("--work", required=True, help="a directory the bench may empty and fill")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()

    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    peers = [
        Skillhost(os.path.abspath(args.skillhost), os.path.abspath(args.skill), work),
        HyperMcp(os.path.abspath(args.hyper_mcp), os.path.abspath(args.plugin), work),
    ]
    load_start = loadavg()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    rounds = {p.name: [] for p in peers}
    try:
        for r in range(ROUNDS):
            order = peers if r % 2 == 0 else peers[::-1]
            for peer in order:
                print(f"round {r + 1}: {peer.name}", file=sys.stderr)
                rounds[peer.name].append(one_round(peer, work))
    except BenchError as e:
        sys.exit(f"peer-bench: {e}")
    load_end = loadavg()

    medians = {name: {k: statistics.median(f[k] for f in figs) for k, *_ in ROWS} for name, figs in rounds.items()}
    ratios = {k: medians["skillhost"][k] / medians["hyper-mcp"][k] for k, *_ in ROWS}
    if args.json:
        print(
            json.dumps(
                {
                    "peer": f"hyper-mcp {args.peer_version}",
                    "started": started,
                    "loadavg_start": load_start,
                    "loadavg_end": load_end,
                    "rounds": rounds,
                    "medians": medians,
                    "ratio_skillhost_over_peer": ratios,
                    "calls": TOTAL_CALLS,
                },
                indent=2,
            )
        )
        return
    print(f"| figure (median of {ROUNDS} rounds) | skillhost | hyper-mcp {args.peer_version} | skillhost ÷ hyper-mcp |")
    print("| --- | --- | --- | --- |")
    for key, label, unit, decimals in ROWS:
        s, h = medians["skillhost"][key], medians["hyper-mcp"][key]
        print(f"| {label} | {number(s, decimals)} {unit} | {number(h, decimals)} {unit} | {ratios[key]:.2f}× |")
    print()
    print(f"Load average (1/5/15 min) at the start: {load_start}; at the end: {load_end}. Started {started}.")


if __name__ == "__main__":
    main()
