"""Outbound HTTP from a skill, over ``wasi:http`` through the host's egress gate.

A skill whose skill.toml asks for hosts (``[network] allow``) is built against the world
that imports ``wasi:http/outgoing-handler``; its requests go to the host, which checks
each against the skill's grant. A request the grant refuses raises
``ToolError.denied`` naming the host and the line to add to skill.toml; any other failure
(the host unreachable, a timeout) raises ``ToolError.failed``. A skill without network has
no HTTP at all: these functions raise ``ToolError.denied`` saying how to ask for it.

    from skillhost import http
    response = http.get("https://api.example.com/items", headers={"accept": "application/json"})
    items = response.json()

Natively (a skill's unit tests) there is no host to ask: requests raise ``ToolError.failed``
unless a test sets a handler with ``http.with_handler(fn)``.
"""

from __future__ import annotations

import json as _json
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional, Tuple
from urllib.parse import urlsplit

from .errors import ToolError

try:  # The world with wasi:http exists only for a skill built with network.
    import componentize_py_runtime  # noqa: F401
    from componentize_py_types import Err as _Err
    from wit_world.imports import outgoing_handler as _handler
    from wit_world.imports import streams as _streams
    from wit_world.imports import wasi_http_types as _t

    LINKED = True
except ImportError:
    LINKED = False

# Bytes read from a response body at a time, and most bytes read whole.
_CHUNK = 64 * 1024
MAX_BODY = 16 * 1024 * 1024

_native_handler: Optional[Callable[["Request"], "Response"]] = None


class Request:
    """One request: ``method``, ``url``, ``headers`` (name, value) and ``body`` bytes."""

    def __init__(self, method: str, url: str, headers: Optional[Dict[str, str]] = None, body: bytes = b""):
        self.method = method.upper()
        self.url = url
        self.headers: List[Tuple[str, str]] = list((headers or {}).items())
        self.body = body


class Response:
    """A response: ``status``, ``headers`` (lower-case names), ``body`` bytes."""

    def __init__(self, status: int, headers: List[Tuple[str, str]], body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name: str) -> Optional[str]:
        """The first value of header ``name`` (any case), if sent."""
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    @property
    def text(self) -> str:
        """The body as UTF-8 text (undecodable bytes replaced)."""
        return self.body.decode("utf-8", "replace")

    def json(self):
        """The body parsed as JSON; ``ToolError.failed`` when it is not."""
        try:
            return _json.loads(self.body)
        except ValueError as e:
            raise ToolError.failed(f"the response is not JSON: {e}") from None


@contextmanager
def with_handler(handler: Callable[[Request], Response]) -> Iterator[None]:
    """Natively, answer requests with ``handler`` for the duration (for a skill's tests)."""
    global _native_handler
    previous, _native_handler = _native_handler, handler
    try:
        yield
    finally:
        _native_handler = previous


def get(url: str, headers: Optional[Dict[str, str]] = None) -> Response:
    """``GET url``."""
    return request("GET", url, headers)


def post(url: str, body=None, headers: Optional[Dict[str, str]] = None) -> Response:
    """``POST url``; a dict or list body is sent as JSON, a str as UTF-8."""
    headers = dict(headers or {})
    if isinstance(body, (dict, list)):
        body = _json.dumps(body).encode()
        headers.setdefault("content-type", "application/json")
    elif isinstance(body, str):
        body = body.encode()
    return request("POST", url, headers, body or b"")


def request(method: str, url: str, headers: Optional[Dict[str, str]] = None, body: bytes = b"") -> Response:
    """Send one request and read the whole response (at most ``MAX_BODY`` bytes)."""
    req = Request(method, url, headers, body)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ToolError.invalid_input(f"{url!r} is not an http(s) URL")
    origin = f"{parts.scheme}://{parts.netloc}"
    if not LINKED:
        if _native_handler is not None:
            return _native_handler(req)
        raise ToolError.denied(
            f"no network: this skill may not reach {origin}; add \"{origin}\" to `[network] allow` in skill.toml, "
            "build again and approve the skill"
        )
    return _send(req, parts, origin)


_METHODS = {
    "GET": "Method_Get", "HEAD": "Method_Head", "POST": "Method_Post", "PUT": "Method_Put",
    "DELETE": "Method_Delete", "OPTIONS": "Method_Options", "PATCH": "Method_Patch",
}


def _send(req: Request, parts, origin: str) -> Response:
    fields = _t.Fields.from_list([(k, v.encode()) for k, v in req.headers])
    outgoing = _t.OutgoingRequest(fields)
    method = getattr(_t, _METHODS[req.method])() if req.method in _METHODS else _t.Method_Other(req.method)
    outgoing.set_method(method)
    outgoing.set_scheme(_t.Scheme_Https() if parts.scheme == "https" else _t.Scheme_Http())
    outgoing.set_authority(parts.netloc)
    outgoing.set_path_with_query((parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
    body = outgoing.body()
    if req.body:
        with body.write() as stream:
            for start in range(0, len(req.body), 4096):
                stream.blocking_write_and_flush(req.body[start:start + 4096])
    _t.OutgoingBody.finish(body, None)
    try:
        future = _handler.handle(outgoing, None)
        with future.subscribe() as ready:
            ready.block()
        answer = future.get()
    except _Err as e:
        raise _refusal(req, origin, e.value) from None
    if answer is None or isinstance(answer, _Err) or isinstance(answer.value, _Err):
        code = answer.value.value if answer is not None and not isinstance(answer, _Err) else None
        raise _refusal(req, origin, code)
    response = answer.value.value
    status = response.status()
    headers = [(k, v.decode("latin-1")) for k, v in response.headers().entries()]
    incoming = response.consume()
    data = bytearray()
    with incoming.stream() as stream:
        while True:
            try:
                data += stream.blocking_read(_CHUNK)
            except _Err as e:
                if isinstance(e.value, _streams.StreamError_Closed):
                    break
                raise ToolError.failed(f"{req.method} {req.url}: the response body could not be read") from None
            if len(data) > MAX_BODY:
                raise ToolError.failed(f"{req.method} {req.url}: the response is larger than {MAX_BODY} bytes")
    return Response(status, headers, bytes(data))


def _refusal(req: Request, origin: str, code) -> ToolError:
    host = urlsplit(req.url).netloc
    if isinstance(code, _t.ErrorCode_HttpRequestDenied):
        return ToolError.denied(
            f"{req.method} {req.url}: the skill's network grant refused {host}; to allow it add \"{origin}\" to "
            "`[network] allow` in skill.toml and approve the skill again"
        )
    what = type(code).__name__.replace("ErrorCode_", "") if code is not None else "no response"
    return ToolError.failed(f"{req.method} {req.url}: {host} could not be reached ({what})")
