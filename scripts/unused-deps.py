#!/usr/bin/env python3
"""Lists the dependencies a workspace crate declares and never names.

For every member crate of the workspace (`cargo metadata`), each dependency of
`[dependencies]`, `[dev-dependencies]` and `[build-dependencies]` must be named as a
path (`crate_name::` or `use crate_name`, with `-` as `_`, or the lib name it was
renamed to) somewhere in that crate's Rust sources: src/, tests/, benches/,
examples/, build.rs and any `[[bin]]`, `[[test]]`, `[[bench]]` or `[[example]]`
target. A dependency kept for its features or its side effects alone is listed in the
crate's Cargo.toml under `[package.metadata.unused-deps] ignored = ["name"]`, with a
comment saying why.

Exits 1 and names each unused dependency and how to fix it; 0 when there is none.
Used by scripts/test.sh before the tests.
"""

import json
import os
import re
import subprocess
import sys
import tomllib


def sources(package):
    """The Rust files of `package`'s own targets and directories."""
    root = os.path.dirname(package["manifest_path"])
    seen = set()
    dirs = [os.path.join(root, d) for d in ("src", "tests", "benches", "examples")]
    files = [os.path.join(root, "build.rs")]
    for target in package["targets"]:
        files.append(target["src_path"])
        dirs.append(os.path.dirname(target["src_path"]))
    for d in dirs:
        if not d.startswith(root):
            continue
        for dirpath, dirnames, filenames in os.walk(d):
            # Nested crates (a guest under tests/guests) are crates of their own.
            dirnames[:] = [n for n in dirnames if not os.path.exists(os.path.join(dirpath, n, "Cargo.toml"))]
            files.extend(os.path.join(dirpath, f) for f in filenames if f.endswith(".rs"))
    for f in files:
        if f not in seen and os.path.isfile(f):
            seen.add(f)
            yield f


def main():
    meta = json.loads(subprocess.check_output(["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"]))
    members = set(meta["workspace_members"])
    unused = []
    for package in meta["packages"]:
        if package["id"] not in members:
            continue
        with open(package["manifest_path"], "rb") as f:
            manifest = tomllib.load(f)
        ignored = set(manifest.get("package", {}).get("metadata", {}).get("unused-deps", {}).get("ignored", []))
        text = "\n".join(open(f, encoding="utf-8", errors="replace").read() for f in sources(package))
        for dep in package["dependencies"]:
            name = dep["name"]
            if name in ignored:
                continue
            # The name code uses: a rename, else the lib name of a workspace crate, else
            # the package name with `_`.
            lib = dep.get("rename") or name
            for other in meta["packages"]:
                if other["name"] == name and not dep.get("rename"):
                    for target in other["targets"]:
                        if "lib" in target["kind"] or "proc-macro" in target["kind"]:
                            lib = target["name"]
            ident = lib.replace("-", "_")
            if not re.search(rf"\b{re.escape(ident)}\s*::|\buse\s+{re.escape(ident)}\b|\bextern\s+crate\s+{re.escape(ident)}\b", text):
                kind = {None: "dependencies", "dev": "dev-dependencies", "build": "build-dependencies"}[dep["kind"]]
                unused.append(f"{package['name']}: `{name}` in [{kind}] is never named in its sources "
                              f"({os.path.relpath(package['manifest_path'])}); remove it, or list it under "
                              f"[package.metadata.unused-deps] ignored with why it is kept")
    for line in unused:
        print(f"unused dependency: {line}", file=sys.stderr)
    return 1 if unused else 0


if __name__ == "__main__":
    sys.exit(main())
