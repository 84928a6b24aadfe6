"""A FastMCP server that tries to get past its sandbox's limits, for skillhost's
integration tests: it forks children that hold memory or outlive the call, forks as many
processes as it can, makes system calls the seccomp filter refuses, and reports who it
is on the host.

Every probe reports what happened instead of raising, so the tests can assert on it.
"""
import ctypes
import errno
import os
import sys
import time

from fastmcp import FastMCP

mcp = FastMCP("limits-probe")
libc = ctypes.CDLL(None, use_errno=True)


@mcp.tool()
def identity() -> dict:
    """The uid inside and the user-namespace map (inside, outside, count)."""
    with open("/proc/self/uid_map") as f:
        uid_map = f.read().split()
    return {"uid": os.getuid(), "uid_map": [int(x) for x in uid_map[:3]]}


@mcp.tool()
def write_file(path: str, text: str) -> dict:
    """Write a file; the error when refused."""
    try:
        with open(path, "w") as f:
            f.write(text)
        return {"ok": True}
    except OSError as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


@mcp.tool()
def read_file(path: str) -> dict:
    """Read a file; the error when refused."""
    try:
        with open(path) as f:
            return {"ok": True, "text": f.read(4096)}
    except OSError as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


@mcp.tool()
def fork_hold(children: int, mib: int, seconds: float, marker: str, wait: bool = True) -> dict:
    """Fork `children` processes that each hold `mib` MiB for `seconds` (in their own
    session: they outlive the server's own process group); with `wait`, wait for them and
    report how each ended."""
    pids = []
    for _ in range(children):
        pid = os.fork()
        if pid == 0:
            # Exec so that the marker is on the command line the host sees.
            os.execv(sys.executable, [sys.executable, "-c",
                "import sys,time,os\n"
                "os.setsid()\n"
                "b = bytearray(int(sys.argv[1]) << 20)\n"
                "for i in range(0, len(b), 4096): b[i] = 1\n"
                "time.sleep(float(sys.argv[2]))\n",
                str(mib), str(seconds), marker])
        pids.append(pid)
    if not wait:
        return {"pids": pids}
    ended = []
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        ended.append(os.waitstatus_to_exitcode(status))
    return {"pids": pids, "ended": ended}


@mcp.tool()
def fork_bomb(limit: int) -> dict:
    """Fork sleeping children until fork fails or `limit` run; how many ran."""
    count = 0
    error = None
    while count < limit:
        try:
            pid = os.fork()
        except OSError as e:
            error = errno.errorcode.get(e.errno, str(e.errno))
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        count += 1
    return {"forked": count, "error": error}


SYSCALLS = {
    # name: (number on x86-64, arguments)
    "bpf": (321, [0, 0, 0]),
    "userfaultfd": (323, [0o2000000 | 1]),  # O_CLOEXEC | UFFD_USER_MODE_ONLY
    "keyctl": (250, [0, -3, 0]),  # KEYCTL_GET_KEYRING_ID of the session keyring
    "add_key": (248, [ctypes.c_char_p(b"user"), ctypes.c_char_p(b"k"), ctypes.c_char_p(b"v"), 1, -3]),
    "ptrace": (101, [16, 1, 0, 0]),  # PTRACE_ATTACH pid 1
    "io_uring_setup": (425, [1, ctypes.create_string_buffer(120)]),
    "perf_event_open": (298, [ctypes.create_string_buffer(128), 0, -1, -1, 0]),
    "mount": (165, [ctypes.c_char_p(b"none"), ctypes.c_char_p(b"/tmp"), ctypes.c_char_p(b"tmpfs"), 0, 0]),
    "unshare": (272, [0x10000000]),  # CLONE_NEWUSER
}


@mcp.tool()
def syscalls() -> dict:
    """Make each system call the filter should refuse; its result or errno name."""
    out = {}
    for name, (number, args) in SYSCALLS.items():
        ctypes.set_errno(0)
        result = libc.syscall(ctypes.c_long(number), *[a if not isinstance(a, int) else ctypes.c_long(a) for a in args])
        if result == -1:
            out[name] = errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
        else:
            out[name] = f"returned {result}"
    # The same through the libc wrapper a runtime would use.
    result = libc.unshare(0x10000000)
    out["unshare (libc)"] = errno.errorcode.get(ctypes.get_errno(), "?") if result == -1 else f"returned {result}"
    return out


if __name__ == "__main__":
    mcp.run(transport="stdio", show_banner=False)
