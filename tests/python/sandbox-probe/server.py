"""A FastMCP server that probes its sandbox, for skillhost's integration tests.

Every probe reports what happened instead of raising, so the tests can assert on it.
"""
import os
import socket
import sys
import time

from fastmcp import Context, FastMCP

mcp = FastMCP("sandbox-probe")


def attempt(action):
    try:
        return {"ok": True, "value": action()}
    except BaseException as e:  # noqa: BLE001 - a probe reports everything
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


@mcp.tool()
def echo(text: str) -> dict:
    """Return the text."""
    return {"text": text}


@mcp.tool()
def read_file(path: str) -> dict:
    """Read a file or list a directory."""
    def read():
        if os.path.isdir(path):
            return sorted(os.listdir(path))
        with open(path, "rb") as f:
            return f.read(4096).decode("utf-8", "replace")
    return attempt(read)


@mcp.tool()
def write_file(path: str, text: str) -> dict:
    """Write a file."""
    def write():
        with open(path, "w") as f:
            f.write(text)
        return len(text)
    return attempt(write)


@mcp.tool()
async def append(path: str, line: str) -> dict:
    """Append one line to a file in one O_APPEND write: a ledger of the calls that ran."""
    with open(path, "a") as f:
        f.write(line + "\n")
    return {"line": line}


@mcp.tool()
def connect(host: str, port: int) -> dict:
    """Open a TCP connection and send one line."""
    def run():
        with socket.create_connection((host, port), timeout=3) as s:
            s.sendall(b"escaped\n")
            return "connected"
    return attempt(run)


@mcp.tool()
def fetch(url: str) -> dict:
    """GET a URL with httpx (through the proxy in HTTP(S)_PROXY, if any)."""
    import httpx

    def run():
        r = httpx.get(url, timeout=10)
        return {"status": r.status_code, "body": r.text[:200]}
    return attempt(run)


@mcp.tool()
def fetch_text(url: str) -> str:
    """GET a URL and return its text, failing on an error status without its body, as
    mcp-server-fetch does."""
    import httpx

    r = httpx.get(url, timeout=10)
    if r.status_code >= 400:
        raise RuntimeError(f"Failed to fetch {url} - status code {r.status_code}")
    return r.text


@mcp.tool()
def fetch_status(url: str) -> int:
    """GET a URL; only its status."""
    import httpx

    return httpx.get(url, timeout=10).status_code


@mcp.tool()
def proxy_raw(request: str) -> dict:
    """Send raw bytes (latin-1) to the egress proxy named in HTTP_PROXY; return all it answers."""
    from urllib.parse import urlsplit

    def run():
        proxy = urlsplit(os.environ["HTTP_PROXY"])
        answer = b""
        with socket.create_connection((proxy.hostname, proxy.port), timeout=10) as s:
            s.sendall(request.encode("latin-1"))
            try:
                while len(answer) < 65536:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    answer += chunk
            except TimeoutError:
                pass
        return answer.decode("latin-1")
    return attempt(run)


@mcp.tool()
def environment() -> dict:
    """The process's environment, ids and limits."""
    import resource
    return {
        "env": dict(os.environ),
        "uid": os.getuid(),
        "gid": os.getgid(),
        "pid": os.getpid(),
        "cwd": os.getcwd(),
        "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0],
        "as": resource.getrlimit(resource.RLIMIT_AS)[0],
    }


@mcp.tool()
def fork_bomb(count: int, marker: str) -> dict:
    """Start up to `count` sleeping processes tagged with `marker`, then hang."""
    started = 0
    for _ in range(count):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            os.execv("/usr/bin/sleep", ["sleep", "3600", marker])
        started += 1
    print(f"fork_bomb started {started}", file=sys.stderr)
    time.sleep(3600)
    return {"started": started}


@mcp.tool()
def memory_hog(mib: int) -> dict:
    """Try to allocate `mib` MiB and touch it."""
    def run():
        block = bytearray(mib << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        return len(block)
    return attempt(run)


@mcp.tool()
def crash(code: int = 3) -> dict:
    """Exit the whole server in the middle of the call."""
    sys.stderr.write("probe: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(code)


@mcp.tool()
def hang() -> dict:
    """Block the server's only thread forever (ignores cancellation)."""
    time.sleep(3600)
    return {}


@mcp.tool()
async def count(steps: int, ctx: Context) -> dict:
    """Report progress `steps` times."""
    for i in range(1, steps + 1):
        await ctx.report_progress(progress=i, total=steps, message=f"step {i}")
    return {"steps": steps}


@mcp.tool()
def big(size: int) -> str:
    """Return a string of `size` bytes."""
    return "x" * size


@mcp.tool()
def sockets() -> dict:
    """Try socket() and socketpair() of every address family the sandbox might reach the
    world through: for each, "ok" or the error's name (EPERM, EAFNOSUPPORT...)."""
    import errno

    families = {
        "AF_UNIX": (socket.AF_UNIX, socket.SOCK_STREAM, 0),
        "AF_INET": (socket.AF_INET, socket.SOCK_STREAM, 0),
        "AF_INET6": (socket.AF_INET6, socket.SOCK_STREAM, 0),
        "AF_NETLINK/ROUTE": (16, socket.SOCK_RAW, 0),
        "AF_NETLINK/AUDIT": (16, socket.SOCK_RAW, 9),
        "AF_NETLINK/KOBJECT_UEVENT": (16, socket.SOCK_RAW, 15),
        "AF_PACKET": (17, socket.SOCK_RAW, 0),
        "AF_VSOCK": (40, socket.SOCK_STREAM, 0),
        "AF_ALG": (38, socket.SOCK_SEQPACKET, 0),
        "AF_BLUETOOTH": (31, socket.SOCK_STREAM, 0),
        "AF_XDP": (44, socket.SOCK_RAW, 0),
    }
    out = {}
    for name, (family, kind, proto) in families.items():
        try:
            socket.socket(family, kind, proto).close()
            out[name] = "ok"
        except OSError as e:
            out[name] = errno.errorcode.get(e.errno, str(e.errno))
    try:
        a, b = socket.socketpair(40, socket.SOCK_STREAM, 0)
        a.close()
        b.close()
        out["socketpair AF_VSOCK"] = "ok"
    except OSError as e:
        out["socketpair AF_VSOCK"] = errno.errorcode.get(e.errno, str(e.errno))
    return out


@mcp.tool()
def vsock_listen(port: int) -> dict:
    """Listen on a vsock port of the machine (any CID) and report where."""
    def run():
        s = socket.socket(40, socket.SOCK_STREAM, 0)
        s.bind((0xFFFFFFFF, port))
        s.listen(1)
        return {"listening": s.getsockname()}
    return attempt(run)


@mcp.tool()
def syscall(number: int) -> dict:
    """Make raw system call `number` with zero arguments: "ok" or the errno's name."""
    import ctypes
    import errno

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(ctypes.c_long(number), 0, 0, 0, 0, 0) == -1:
        e = ctypes.get_errno()
        return {"result": errno.errorcode.get(e, str(e))}
    return {"result": "ok"}


@mcp.tool()
def fail(message: str) -> dict:
    """Raise an error with `message`."""
    raise ValueError(message)


if __name__ == "__main__":
    mcp.run(transport="stdio", show_banner=False)
