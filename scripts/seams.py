#!/usr/bin/env python3
"""Checks that the runtimes sit only below the seam, and that ARCHITECTURE.md draws the
crate graph as it is.

From `cargo metadata` (normal dependencies only: what a crate links, not what its tests
use):

1. No crate above the seam links a runtime engine: `wasmtime` is outside the dependency
   closure of every crate in ABOVE_THE_SEAM (the MCP front, the registry, the search
   index, the forge, and the crates they stand on). The same question as
   `cargo tree -e normal -i wasmtime -p CRATE` printing nothing.
2. The forge depends, among skillhost's crates, on FORGE_MAY_USE only: it gets its probe
   runtime from the facade, and builds in the jail.
3. The block between `<!-- crate-graph -->` and `<!-- /crate-graph -->` in ARCHITECTURE.md
   lists every skillhost host crate once, as `skillhost-X → skillhost-Y, skillhost-Z`
   (`→ (none)` for none), exactly its direct skillhost dependencies.
4. The MCP front links no fetcher: none of FETCHERS (the HTTP and OCI clients, the key
   derivation and archive readers of remote sources, and skillhost-source itself) is in
   the dependency closure of skillhost-mcp. It serves the well-known index from skills
   already read, with the index format of skillhost-package; fetching is skillhost-source's
   and only the facade and the CLI link it. The same question as
   `cargo tree -e normal -i CRATE -p skillhost-mcp` printing nothing.
5. No file git tracks is over MAX_TRACKED_BYTES unless LARGE_FILES names it: a core dump,
   a build output or a model committed by mistake is caught before it lands (every clone
   would carry it for ever). Outside a git work tree this check says so and is skipped.
6. No library crate (every crate under host/ but those in BINARY_CRATES: host/cli, which
   may use anyhow) has a `String` for an error channel: no `Result<…, String>` (generics
   matched by nesting, `std::string::String` too; comments and string literals ignored)
   in a .rs file under its src/. Test code is skipped: a file from its first
   `#[cfg(test)] mod NAME {` on, the file of a `#[cfg(test)] mod NAME;`, any `tests.rs`,
   and tests/ and benches/ (outside src/). An embedder must be able to match a failure on
   its kind, not its text: a thiserror type, keeping the message, with the typed source
   under `#[source]`. Each hit is named `file:line`.

Exits 1 naming what broke and what to do; 0 otherwise. `--print` prints the graph block
as it should read. Used by scripts/test.sh before the tests.
"""

import json
import os
import re
import subprocess
import sys

ABOVE_THE_SEAM = [
    "skillhost-core",
    "skillhost-package",
    "skillhost-jail",
    "skillhost-store",
    "skillhost-registry",
    "skillhost-index",
    "skillhost-forge",
    "skillhost-mcp",
]
FORGE_MAY_USE = {"skillhost-core", "skillhost-package", "skillhost-registry", "skillhost-jail"}
# What fetches remote skills, kept out of the MCP front (check 4).
FETCHER_FREE = "skillhost-mcp"
FETCHERS = ["oci-client", "reqwest", "scrypt", "zip", "skillhost-source"]
ENGINE = "wasmtime"
MAX_TRACKED_BYTES = 1 << 20
# Tracked files allowed over MAX_TRACKED_BYTES, each with why.
LARGE_FILES = {
    "host/cli/startup-order.txt": "the linker's input for release builds (host/cli/build.rs): the ~10,000 "
    "mangled names of the functions a start runs, text, made whole by scripts/startup-order.py",
}
# The one host crate that may carry errors as text: the binary (it uses anyhow).
BINARY_CRATES = {"cli"}


def metadata():
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1"], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out)


def normal_graph(meta):
    """Package name -> names of its normal (non-dev, non-build) dependencies, resolved."""
    names = {p["id"]: p["name"] for p in meta["packages"]}
    graph = {}
    for node in meta["resolve"]["nodes"]:
        deps = set()
        for dep in node["deps"]:
            if any(kind["kind"] is None for kind in dep["dep_kinds"]):
                deps.add(names[dep["pkg"]])
        graph.setdefault(names[node["id"]], set()).update(deps)
    return graph


def closure(graph, start):
    seen, stack = set(), [start]
    while stack:
        for dep in graph.get(stack.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return seen


def host_crates(meta):
    root = meta["workspace_root"]
    members = set(meta["workspace_members"])
    return sorted(
        p["name"]
        for p in meta["packages"]
        if p["id"] in members and os.path.relpath(p["manifest_path"], root).startswith("host" + os.sep)
    )


def drawn(graph, crates):
    lines = []
    for crate in crates:
        deps = sorted(d for d in graph[crate] if d in crates)
        lines.append(f"{crate} → {', '.join(deps) if deps else '(none)'}")
    return lines


def oversized(root):
    """Tracked files over MAX_TRACKED_BYTES not in LARGE_FILES, as problems; None outside git."""
    listed = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True)
    if listed.returncode != 0:
        return None
    problems = []
    for name in listed.stdout.decode("utf-8", "surrogateescape").split("\0"):
        path = os.path.join(root, name)
        if not name or name in LARGE_FILES or not os.path.isfile(path) or os.path.islink(path):
            continue
        size = os.path.getsize(path)
        if size > MAX_TRACKED_BYTES:
            problems.append(
                f"{name} is tracked and {size / (1 << 20):.1f} MiB, over the {MAX_TRACKED_BYTES >> 20} MiB a tracked file may be: "
                f"`git rm --cached {name}` (and ignore it), or add it to LARGE_FILES in scripts/seams.py saying why"
            )
    return problems


def _code_only(text):
    """`text` with comments and string/char literals blanked (newlines kept, so offsets map to lines)."""
    out, i, n = [], 0, len(text)
    blank = lambda chunk: re.sub(r"[^\n]", " ", chunk)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif m := re.compile(r'r(#*)"').match(text, i):
            if i and (text[i - 1].isalnum() or text[i - 1] == "_"):
                out.append(text[i])
                i += 1
                continue
            close = '"' + m.group(1)
            j = text.find(close, m.end())
            j = n if j < 0 else j + len(close)
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(n, j + 1)
        elif m := re.compile(r"'(\\.[^']*|[^'\\])'").match(text, i):
            j = m.end()
        else:
            out.append(text[i])
            i += 1
            continue
        out.append(blank(text[i:j]))
        i = j
    return "".join(out)


def _string_errors(code):
    """Offsets of each `Result<…, String>` in `code` (comments and literals already blanked)."""
    hits = []
    for m in re.finditer(r"\bResult\s*<", code):
        depth, args, start, i = 1, [], m.end(), m.end()
        while i < len(code) and depth:
            c = code[i]
            if code.startswith("->", i):
                i += 2
                continue
            if c in "<([":
                depth += 1
            elif c in ">)]":
                depth -= 1
                if depth == 0:
                    args.append(code[start:i])
            elif c == "," and depth == 1:
                args.append(code[start:i])
                start = i + 1
            elif c in ";{}":
                break
            i += 1
        args = [a.strip() for a in args if a.strip()]
        if len(args) == 2 and re.fullmatch(r"(::)?(std\s*::\s*|alloc\s*::\s*)?(string\s*::\s*)?String", args[1]):
            hits.append(m.start())
    return hits


def string_errors(root):
    """`Result<…, String>` in library crates' non-test sources, as problems naming file:line."""
    problems = []
    host = os.path.join(root, "host")
    for crate in sorted(os.listdir(host)):
        src = os.path.join(host, crate, "src")
        if crate in BINARY_CRATES or not os.path.isdir(src):
            continue
        manifest = open(os.path.join(host, crate, "Cargo.toml"), encoding="utf-8").read()
        name = re.search(r'^name\s*=\s*"([^"]+)"', manifest, re.M)
        name = name.group(1) if name else crate
        test_files = set()
        files = sorted(os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if f.endswith(".rs"))
        # First pass: files that are `#[cfg(test)] mod x;` of their parent are tests.
        for path in files:
            code = _code_only(open(path, encoding="utf-8").read())
            here = os.path.dirname(path)
            stem = os.path.splitext(os.path.basename(path))[0]
            children = here if stem in ("lib", "main", "mod") else os.path.join(here, stem)
            for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+(\w+)\s*;", code):
                test_files.add(os.path.join(children, m.group(1) + ".rs"))
                test_files.add(os.path.join(children, m.group(1), "mod.rs"))
        for path in files:
            rel = os.path.relpath(path, root)
            parts = rel.split(os.sep)
            if path in test_files or "tests" in parts[3:] or "benches" in parts[3:] or parts[-1] == "tests.rs":
                continue
            text = open(path, encoding="utf-8").read()
            code = _code_only(text)
            inline_tests = re.search(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+\w+\s*\{", code)
            if inline_tests:
                code = code[: inline_tests.start()]
            for offset in _string_errors(code):
                line = code.count("\n", 0, offset) + 1
                problems.append(
                    f"{rel}:{line}: `Result<…, String>` in library crate {name}'s code: an error an embedder "
                    "cannot match; return a thiserror type (in the crate's error.rs when it has several), keeping the message, with the typed "
                    "source under #[source]/#[from] (only host/cli may carry errors as text)"
                )
    return problems


def main():
    meta = metadata()
    graph = normal_graph(meta)
    crates = host_crates(meta)
    expected = drawn(graph, crates)
    if "--print" in sys.argv:
        print("\n".join(expected))
        return 0
    problems = []
    for crate in ABOVE_THE_SEAM:
        if crate not in graph:
            problems.append(f"{crate}: not in the workspace; update ABOVE_THE_SEAM in scripts/seams.py")
        elif ENGINE in closure(graph, crate):
            path = [d for d in sorted(graph[crate]) if d == ENGINE or ENGINE in closure(graph, d)]
            problems.append(
                f"{crate} links {ENGINE} (through {', '.join(path)}): a runtime leaked above the seam; "
                f"depend on skillhost-core's SkillRuntime instead (`cargo tree -e normal -i {ENGINE} -p {crate}` shows the path)"
            )
    if FETCHER_FREE not in graph:
        problems.append(f"{FETCHER_FREE}: not in the workspace; update FETCHER_FREE in scripts/seams.py")
    else:
        reach = closure(graph, FETCHER_FREE)
        for fetcher in FETCHERS:
            if fetcher in reach:
                path = [d for d in sorted(graph[FETCHER_FREE]) if d != fetcher and fetcher in closure(graph, d)]
                how = f"through {', '.join(path)}" if path else "a direct dependency"
                problems.append(
                    f"{FETCHER_FREE} links {fetcher} ({how}): a fetcher leaked into the MCP front; "
                    f"it serves skills already read: use the index format of skillhost-package and leave fetching to skillhost-source "
                    f"(`cargo tree -e normal -i {fetcher} -p {FETCHER_FREE}` shows the path)"
                )
    forge_uses = {d for d in graph.get("skillhost-forge", ()) if d.startswith("skillhost")} - FORGE_MAY_USE
    if forge_uses:
        problems.append(
            f"skillhost-forge depends on {', '.join(sorted(forge_uses))}: it may use only {', '.join(sorted(FORGE_MAY_USE))} "
            "(its probe runtime comes from the facade)"
        )
    root = meta["workspace_root"]
    text = open(os.path.join(root, "ARCHITECTURE.md"), encoding="utf-8").read()
    block = re.search(r"<!-- crate-graph -->\n```text\n(.*?)```\n<!-- /crate-graph -->", text, re.S)
    if not block:
        problems.append("ARCHITECTURE.md: no crate-graph block (see scripts/seams.py); print one with `scripts/seams.py --print`")
    else:
        have = [line for line in block.group(1).splitlines() if line.strip()]
        if have != expected:
            problems.append(
                "ARCHITECTURE.md's crate graph differs from `cargo metadata`; replace the block with the output of "
                "`python3 scripts/seams.py --print`:\n  "
                + "\n  ".join(f"- {line}" for line in sorted(set(have) - set(expected)))
                + "\n  "
                + "\n  ".join(f"+ {line}" for line in sorted(set(expected) - set(have)))
            )
    large = oversized(root)
    if large is None:
        print("seams: not a git work tree; the tracked-file size check is skipped", file=sys.stderr)
    else:
        problems.extend(large)
    problems.extend(string_errors(root))
    for problem in problems:
        print(f"seams: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
