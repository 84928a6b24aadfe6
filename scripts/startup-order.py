#!/usr/bin/env python3
"""Write host/cli/startup-order.txt: the functions of skillhost's release binary that a start,
an `initialize` and the first calls run, in the order they first run. host/cli/build.rs hands
the file to the linker (`--symbol-ordering-file`), which puts those functions first and side
by side in the binary's code.

Why: the kernel maps a program's code in blocks around each page it faults on (and, from a
page cache that read ahead, whole folios), so code a start touches here and there across the
binary's 50 MB keeps tens of MB resident for the life of the process. Side by side, the same
code keeps a few.

How: each scenario below runs the release binary with scripts/startup-order/track.c
preloaded, which records the first address the process touches on each page of its code (see
there). The functions those addresses fall in, in first-touch order, are the file: warm starts
first (what every start runs), then what only a first start on a cold data dir adds (the
compilers, the model's graph). A function that ran on a page another had opened first is not
seen; so the binary is linked with the file and profiled again, the ordered functions now side
by side and the unseen ones on pages of their own, until a round finds (almost) nothing new.

Run it after a toolchain or dependency update (symbol names carry a hash of both; a name the
linker does not find is skipped, so a stale file only orders less). It builds the release
binary itself (`cargo build --release -p skillhost-cli`, as `cargo install --path host/cli`
does: a whole-workspace build unifies features, which can rename symbols); it needs
gcc, the bundled skills built (`./scripts/run.sh`) and the model and venv the tests use
(scripts/setup.sh installs them). About four minutes a round on two cores.

Usage: (. scripts/setup.sh && scripts/startup-order.py [--rounds N])
"""

import argparse
import bisect
import glob
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts", "peer-bench"))
from bench import BenchError, Server  # noqa: E402  (the peer bench's raw stdio MCP client)

SETTLE_SECONDS = 5
GIVE_UP_SECONDS = 300


def say(*args):
    print("startup-order:", *args, file=sys.stderr)


def serve(binary, track, pages, skills, data, home):
    """`skillhost serve` over stdio with the tracker preloaded, and the peer bench's client
    to it."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": home,
        "LANG": "C.UTF-8",
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "XDG_DATA_HOME": os.path.join(home, ".local/share"),
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "LD_PRELOAD": track,
        "SKILLHOST_ORDER_EXE": os.path.realpath(binary),
        "SKILLHOST_ORDER_OUT": pages,
        "SKILLHOST_MODEL_DIR": os.environ["SKILLHOST_MODEL_DIR"],
        # the venv the tests and benches give the Python skills
        "SKILLHOST_VENV": os.environ.get("SKILLHOST_VENV", os.path.join(ROOT, "target", "python")),
    }
    argv = [binary, "--skills", skills, "--data-dir", data, "serve"]
    return Server("skillhost", argv, env, os.path.join(home, "serve.log"))


def call(server, tool, arguments):
    request = server.request("tools/call", {"name": tool, "arguments": arguments})
    result, _ = server.answer_to(request, f"tools/call {tool}")
    if result.get("isError"):
        raise SystemExit(f"startup-order: {tool} failed: {result}")


def start(server):
    server.initialize()
    server.answer_to(server.request("tools/list", {}), "tools/list")


def settle(data):
    """Wait until the compiled cache stops growing (the background compiles are done)."""
    count = lambda: len(glob.glob(os.path.join(data, "cache", "**", "*.cwasm"), recursive=True))
    last, since, began = count(), time.time(), time.time()
    while time.time() - since < SETTLE_SECONDS:
        if time.time() - began > GIVE_UP_SECONDS:
            raise SystemExit("startup-order: the background compiles did not settle")
        time.sleep(0.5)
        now = count()
        if now != last:
            last, since = now, time.time()


def one_skill(server):
    start(server)
    call(server, "text-tools__slugify", {"text": "Crème Brûlée: A Guide!"})
    for _ in range(20):
        call(server, "text-tools__slugify", {"text": "Quarterly report 2024 Q3"})


def bundled(server):
    start(server)
    call(server, "skill_list", {})
    call(server, "tool_search", {"query": "convert units"})
    call(server, "text-tools__slugify", {"text": "Crème Brûlée: A Guide!"})


def run(binary, track, work, name, skills, data, scenario):
    pages = os.path.join(work, "pages", name)
    os.makedirs(os.path.dirname(pages), exist_ok=True)
    for earlier in glob.glob(pages + ".*"):
        os.remove(earlier)
    home = os.path.join(work, "home")
    os.makedirs(home, exist_ok=True)
    say(name)
    server = serve(binary, track, pages, skills, data, home)
    try:
        scenario(server)
    except BenchError as e:
        raise SystemExit(f"startup-order: {name}: {e}")
    settle(data)
    server.proc.stdin.close()
    if server.proc.wait(timeout=60) != 0:
        raise SystemExit(f"startup-order: {name}: serve exited with {server.proc.returncode}")
    offsets = []
    for path in sorted(glob.glob(pages + ".*"), key=lambda p: int(p.rsplit(".", 1)[1])):
        raw = open(path, "rb").read()
        offsets.extend(struct.unpack(f"{len(raw) // 8}Q", raw))
    if not offsets:
        raise SystemExit(f"startup-order: {name} recorded no page: was the tracker loaded?")
    return offsets


def functions(binary):
    """(start, size, name) of the binary's functions in its code segment, by address; and a
    function from a file offset to the address it is loaded at."""
    segment = None
    for line in subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True, check=True).stdout.splitlines():
        fields = line.split()
        if fields and fields[0] == "LOAD" and "E" in fields[6:-1]:
            segment = (int(fields[1], 16), int(fields[2], 16), int(fields[4], 16))
    offset, vaddr, size = segment
    symbols = []
    nm = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    for line in nm.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[2] in "tTwW":
            start, length = int(fields[0], 16), int(fields[1], 16)
            if length and vaddr <= start < vaddr + size:
                symbols.append((start, length, fields[3]))
    symbols.sort()
    return symbols, lambda file_offset: file_offset - offset + vaddr


def ran(symbols, to_address, offsets):
    """The functions a run touched, first touch first."""
    starts = [s[0] for s in symbols]
    names, seen = [], set()
    for file_offset in offsets:
        address = to_address(file_offset)
        i = bisect.bisect_right(starts, address) - 1
        if i >= 0 and address < symbols[i][0] + symbols[i][1] and symbols[i][2] not in seen:
            seen.add(symbols[i][2])
            names.append(symbols[i][2])
    return names


# The runs, in the order their functions go in the file: what every start runs first.
SCENARIOS = ["one skill, warm", "bundled skills and model, warm", "one skill, cold", "bundled skills and model, cold"]


def scenarios(binary, track, work):
    """{scenario: the offsets it touched}"""
    text_tools = os.path.join(ROOT, "skills", "text-tools", "skill.wasm")
    one = os.path.join(work, "one")
    os.makedirs(one, exist_ok=True)
    shutil.copy(text_tools, os.path.join(one, "text-tools.wasm"))
    skills = os.path.join(ROOT, "skills")
    data_one, data_all = tempfile.mkdtemp(dir=work), tempfile.mkdtemp(dir=work)
    runs = {}
    runs["one skill, cold"] = run(binary, track, work, "one skill, cold", one, data_one, one_skill)
    runs["one skill, warm"] = run(binary, track, work, "one skill, warm", one, data_one, one_skill)
    runs["bundled skills and model, cold"] = run(binary, track, work, "bundled skills and model, cold", skills, data_all, bundled)
    runs["bundled skills and model, warm"] = run(binary, track, work, "bundled skills and model, warm", skills, data_all, bundled)
    return runs


def read_order(path):
    """{function: its scenario's index} from a file this script wrote."""
    rank, scenario = {}, len(SCENARIOS)
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line.startswith("## ") and line[3:] in SCENARIOS:
                scenario = SCENARIOS.index(line[3:])
            elif line and not line.startswith("#"):
                rank.setdefault(line, scenario)
    return rank


def write_order(path, rank, rustc):
    with open(path, "w") as out:
        out.write("# The functions skillhost's start and first calls run: the linker puts them first in the\n")
        out.write("# release binary, in this order (host/cli/build.rs). Made by scripts/startup-order.py\n")
        out.write(f"# for {rustc}; regenerate after a toolchain or dependency update.\n")
        for index, scenario in enumerate(SCENARIOS):
            out.write(f"## {scenario}\n")
            out.write("".join(f"{name}\n" for name, r in rank.items() if r == index))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="link and profile again at most this many times (default 5)")
    args = parser.parse_args()
    if not os.environ.get("SKILLHOST_MODEL_DIR"):
        raise SystemExit("startup-order: SKILLHOST_MODEL_DIR is not set: run it as `(. scripts/setup.sh && scripts/startup-order.py)`")
    if not os.path.exists(os.path.join(ROOT, "skills", "text-tools", "skill.wasm")):
        raise SystemExit("startup-order: skills/text-tools/skill.wasm is missing: `./scripts/run.sh` builds the bundled skills")
    out = os.path.join(ROOT, "host", "cli", "startup-order.txt")
    binary = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "skillhost")
    rustc = subprocess.run(["rustc", "-V"], capture_output=True, text=True, check=True).stdout.strip()
    rank = read_order(out)
    with tempfile.TemporaryDirectory(prefix="startup-order-") as work:
        track = os.path.join(work, "track.so")
        subprocess.run(["gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o", track, os.path.join(ROOT, "scripts", "startup-order", "track.c"), "-ldl"], check=True)
        for round in range(1, args.rounds + 1):
            say(f"round {round}: cargo build --release (linked with the order so far)")
            subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "skillhost-cli"], cwd=ROOT, check=True)
            symbols, to_address = functions(binary)
            sizes = {name: size for _, size, name in symbols}
            # names the binary no longer has (renamed by an update, or gone)
            rank = {name: r for name, r in rank.items() if name in sizes}
            runs = scenarios(binary, track, work)
            moved = 0
            # each function goes with the first scenario that ran it, in first-touch order
            for index, scenario in enumerate(SCENARIOS):
                for name in ran(symbols, to_address, runs[scenario]):
                    if rank.get(name, len(SCENARIOS)) > index:
                        moved += 1
                        rank.pop(name, None)
                        rank[name] = index
            write_order(out, rank, rustc)
            kib = sum(sizes.get(n, 0) for n in rank) // 1024
            say(f"round {round}: {moved} functions new or moved up; {len(rank)} functions ({kib} KiB) in {os.path.relpath(out)}")
            # A function only shows when it is the first touched on its page: those that ran on a
            # page another had opened show once the ordered ones are packed; stop when a round
            # finds under 1 % more.
            if moved * 100 < len(rank):
                break
        subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "skillhost-cli"], cwd=ROOT, check=True)


if __name__ == "__main__":
    main()
