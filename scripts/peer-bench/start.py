#!/usr/bin/env python3
"""skillhost's start-up alone, before and after a change: one or more `skillhost` binaries
(release builds of two commits, say), alternated over ROUNDS (15) spawns each, over the same
skills directory, each binary on a data dir of its own warmed by one spawn first.

Per spawn, one raw JSON-RPC line client (as bench.py's) times spawn -> `initialize`
answered and spawn -> the first `tools/call` of TOOL answered (sent right after
`notifications/initialized`), then reads VmRSS, RssAnon and RssFile after IDLE_S idle.
Prints the median of each figure per binary, and each binary's ratio to the first.

Usage: start.py --skills DIR --tool SKILL__TOOL --arguments JSON [--rounds N] BIN [BIN...]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

ROUNDS = 15
IDLE_S = 3.0


def spawn(binary, skills, data, tool, arguments):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": data, "LANG": "C.UTF-8"}
    start = time.perf_counter()
    server = subprocess.Popen(
        [binary, "--skills", skills, "--data-dir", data, "serve"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )

    def send(message):
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()

    def answer(request_id):
        while True:
            line = server.stdout.readline()
            if not line:
                raise SystemExit(f"{binary} closed its stdout")
            message = json.loads(line)
            if message.get("id") == request_id:
                return message, time.perf_counter()

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "start", "version": "1"}}})
    _, initialized = answer(0)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
    result, called = answer(1)
    if "result" not in result or result["result"].get("isError"):
        raise SystemExit(f"{binary}: {tool} failed: {result}")
    time.sleep(IDLE_S)
    with open(f"/proc/{server.pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    rss = [int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "RssAnon", "RssFile")]
    server.stdin.close()
    server.wait()
    return [(initialized - start) * 1e3, (called - start) * 1e3, *rss]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", required=True)
    parser.add_argument("--tool", required=True)
    parser.add_argument("--arguments", default="{}")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"spawns of each binary (default {ROUNDS})")
    parser.add_argument("binaries", nargs="+")
    args = parser.parse_args()
    arguments = json.loads(args.arguments)
    work = tempfile.mkdtemp(prefix="skillhost-start-")
    try:
        data = {b: os.path.join(work, str(i)) for i, b in enumerate(args.binaries)}
        for binary in args.binaries:
            spawn(binary, args.skills, data[binary], args.tool, arguments)
        figures = {b: [] for b in args.binaries}
        for _ in range(args.rounds):
            for binary in args.binaries:
                figures[binary].append(spawn(binary, args.skills, data[binary], args.tool, arguments))
        names = ["initialize ms", "first call ms", "VmRSS MiB", "RssAnon MiB", "RssFile MiB"]
        print(f"load average {os.getloadavg()[0]:.2f}; medians of {args.rounds} warm spawns each, alternated")
        first = None
        for binary in args.binaries:
            medians = [statistics.median(f[i] for f in figures[binary]) for i in range(len(names))]
            first = first or medians
            shown = ", ".join(f"{n} {m:.1f} ({m / f:.2f}x)" for n, m, f in zip(names, medians, first))
            print(f"{binary}: {shown}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
