"""Unit tests of the skillhost Python guest SDK in native mode (plain CPython, no component).

Run with: python -m pytest guest-sdk/python/tests -q
"""

import dataclasses
import enum
import errno
import json
import os
import sys
from typing import Any, Dict, List, Literal, Optional, TypedDict, Union

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import skillhost  # noqa: E402
from skillhost import Guest, ToolError, files, http, log, progress, tool  # noqa: E402
from skillhost import _tool  # noqa: E402
from skillhost._schema import parse_docstring, schema_for  # noqa: E402

try:
    from typing import NotRequired
except ImportError:  # pragma: no cover
    from typing_extensions import NotRequired


@pytest.fixture(autouse=True)
def fresh_registry():
    saved = dict(_tool._REGISTRY)
    _tool._REGISTRY.clear()
    yield
    _tool._REGISTRY.clear()
    _tool._REGISTRY.update(saved)


def info(name):
    return next(t for t in Guest().tools() if t.name == name)


def call(name, value):
    return json.loads(Guest().call(name, json.dumps(value)))


def error_of(name, value):
    with pytest.raises(ToolError) as caught:
        Guest().call(name, value if isinstance(value, str) else json.dumps(value))
    return caught.value


@dataclasses.dataclass
class Place:
    """A place.

    Attributes:
        city: The city's name.
        country: The country.
    """

    city: str
    country: Optional[str] = None


@dataclasses.dataclass
class Trip:
    title: str
    stops: List[Place]
    tags: List[str] = dataclasses.field(default_factory=list)


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Movie(TypedDict):
    title: str
    year: NotRequired[int]


class Loose(TypedDict, total=False):
    note: str


# ----------------------------------------------------------------------------- schemas


def test_runs_natively():
    assert skillhost.IN_COMPONENT is False


@pytest.mark.parametrize(
    "hint, schema",
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (Any, {}),
        (Optional[int], {"type": ["integer", "null"]}),
        (Union[int, str], {"type": ["integer", "string"]}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, "x"], {"enum": [1, "x"]}),
        (list, {"type": "array"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (List[str], {"type": "array", "items": {"type": "string"}}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (Dict[str, List[bool]], {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "boolean"}}}),
        (Color, {"type": "string", "enum": ["red", "green"]}),
    ],
)
def test_schema_of_each_simple_kind(hint, schema):
    assert schema_for(hint) == schema


@pytest.mark.skipif(sys.version_info < (3, 10), reason="X | None needs Python 3.10")
def test_pipe_optional():
    assert schema_for(eval("str | None")) == {"type": ["string", "null"]}
    assert schema_for(eval("Place | None")) == {"anyOf": [schema_for(Place), {"type": "null"}]}


def test_dataclass_schema_is_nested_with_required_and_defaults():
    s = schema_for(Trip)
    assert s["type"] == "object" and s["required"] == ["title", "stops"] and s["additionalProperties"] is False
    assert s["properties"]["tags"] == {"type": "array", "items": {"type": "string"}, "default": []}
    place = s["properties"]["stops"]["items"]
    assert place["description"] == "A place."
    assert place["required"] == ["city"]
    assert place["properties"]["city"] == {"type": "string", "description": "The city's name."}
    assert place["properties"]["country"] == {"type": ["string", "null"], "description": "The country.", "default": None}


def test_typeddict_schema_required_and_not_required():
    assert schema_for(Movie)["required"] == ["title"]
    assert schema_for(Movie)["properties"]["year"] == {"type": "integer"}
    assert "required" not in schema_for(Loose)


def test_unsupported_types_are_refused_at_declaration():
    with pytest.raises(TypeError, match="not supported"):

        @tool
        def bad(x: set) -> dict:
            """Bad."""

    with pytest.raises(TypeError, match="dict keys must be str"):

        @tool
        def bad2(x: Dict[int, str]) -> dict:
            """Bad."""

    with pytest.raises(TypeError, match="needs a type hint"):

        @tool
        def bad3(x) -> dict:
            """Bad."""

    with pytest.raises(TypeError, match="docstring"):

        @tool
        def bad4(x: int) -> dict:
            pass

    with pytest.raises(TypeError, match="tool name"):

        @tool(name="Bad Name")
        def bad5(x: int) -> dict:
            """Bad."""

    with pytest.raises(TypeError, match=r"examples\[0\].*x: expected an integer"):

        @tool(examples=[{"x": "one"}])
        def bad6(x: int) -> dict:
            """Bad."""


def test_recursive_types_are_refused():
    @dataclasses.dataclass
    class Node:
        children: List["Node"]

    with pytest.raises(Exception, match="recursive|Node"):
        schema_for(Node)


def test_two_tools_of_one_name_are_refused():
    @tool(name="same")
    def one() -> dict:
        """One."""

    with pytest.raises(TypeError, match="two tools are named `same`"):

        @tool(name="same")
        def two() -> dict:
            """Two."""


def test_tool_description_schema_annotations_and_examples():
    @tool(read_only=True, idempotent=True, examples=[{"name": "Ada"}])
    def hello(name: str, tone: Literal["plain", "warm"] = "plain", places: list[Place] = []) -> dict:
        """Greet someone
        by name.

        More detail that is not the description.

        Args:
            name: Who to greet.
            tone: How warmly,
                on a scale of two.
        """
        return {"greeting": f"Hello, {name}!"}

    t = info("hello")
    assert t.description == "Greet someone by name."
    schema = json.loads(t.input_schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["required"] == ["name"]
    assert schema["properties"]["name"] == {"type": "string", "description": "Who to greet."}
    assert schema["properties"]["tone"] == {"type": "string", "enum": ["plain", "warm"], "description": "How warmly, on a scale of two.", "default": "plain"}
    assert schema["properties"]["places"]["items"]["properties"]["city"]["type"] == "string"
    assert json.loads(t.output_schema) == {"type": "object"}
    assert (t.annotations.read_only, t.annotations.idempotent, t.annotations.destructive, t.annotations.open_world) == (True, True, False, False)
    assert [json.loads(e) for e in t.examples] == [{"name": "Ada"}]
    assert call("hello", {"name": "Ada"}) == {"greeting": "Hello, Ada!"}


# ----------------------------------------------------------------------------- docstrings


def test_google_docstring_with_types_and_other_sections():
    summary, params = parse_docstring(
        """Sum numbers.

        Args:
            xs (list[int]): The numbers.
            scale: Multiplier
                applied last.

        Returns:
            The sum.
        """
    )
    assert summary == "Sum numbers."
    assert params == {"xs": "The numbers.", "scale": "Multiplier applied last."}


def test_rest_docstring():
    summary, params = parse_docstring(
        """Sum numbers.

        :param xs: The numbers.
        :param int scale: Multiplier
            applied last.
        :returns: The sum.
        """
    )
    assert summary == "Sum numbers."
    assert params == {"xs": "The numbers.", "scale": "Multiplier applied last."}


def test_no_docstring():
    assert parse_docstring(None) == ("", {})


# ----------------------------------------------------------------------------- validation and conversion


def test_validation_errors_name_the_field_path():
    @tool
    def plan(trip: Trip, color: Color = Color.RED, counts: Dict[str, int] = {}, ratio: float = 1.0) -> dict:
        """Plan."""
        return {}

    good = {"title": "t", "stops": [{"city": "Paris"}]}
    cases = [
        ({"trip": {"title": "t", "stops": [{"city": 3}]}}, "trip.stops[0].city: expected a string, got an integer"),
        ({"trip": {"title": "t", "stops": [{"city": "a"}, {}]}}, "trip.stops[1].city: missing (required)"),
        ({"trip": {"title": "t", "stops": "Paris"}}, "trip.stops: expected an array, got a string"),
        ({"trip": {"title": "t", "stops": [], "extra": 1}}, "trip.extra: unknown field"),
        ({}, "trip: missing (required)"),
        ({"trip": good, "color": "blue"}, 'color: expected one of "red", "green", got "blue"'),
        ({"trip": good, "counts": {"a": 1, "b": True}}, "counts.b: expected an integer, got a boolean"),
        ({"trip": good, "ratio": "x"}, "ratio: expected a number, got a string"),
        ({"trip": {"title": "t", "stops": [{"city": "a", "country": 1}]}}, "trip.stops[0].country: expected a string, got an integer"),
    ]
    for value, message in cases:
        e = error_of("plan", value)
        assert e.kind == "invalid-input", value
        assert message in e.message, (value, e.message)
    assert "not JSON" in error_of("plan", "{nope").message
    assert "must be a JSON object" in error_of("plan", "[1]").message


def test_nested_dicts_become_dataclasses_and_enums():
    seen = {}

    @tool
    def plan(trip: Trip, color: Color = Color.RED, movie: Optional[Movie] = None, n: int = 0, ratio: float = 1.0) -> dict:
        """Plan."""
        seen.update(trip=trip, color=color, movie=movie, n=n, ratio=ratio)
        return {"ok": True}

    call("plan", {"trip": {"title": "t", "stops": [{"city": "Paris", "country": "FR"}]}, "color": "green", "movie": {"title": "M"}, "n": 2.0, "ratio": 3})
    assert seen["trip"] == Trip("t", [Place("Paris", "FR")])
    assert isinstance(seen["trip"].stops[0], Place)
    assert seen["color"] is Color.GREEN
    assert seen["movie"] == {"title": "M"}
    assert seen["n"] == 2 and isinstance(seen["n"], int)
    assert seen["ratio"] == 3.0 and isinstance(seen["ratio"], float)
    # Defaults are the function's own when a field is absent.
    call("plan", {"trip": {"title": "t", "stops": []}})
    assert seen["color"] is Color.RED and seen["movie"] is None and seen["trip"].tags == []


# ----------------------------------------------------------------------------- output


def test_structured_output_and_wrapping():
    @tool
    def place() -> Place:
        """A place."""
        return Place("Turin")

    @tool
    def count(n: int) -> int:
        """A number."""
        return n * 2

    @tool
    def colors() -> List[Color]:
        """Colors."""
        return [Color.RED]

    @tool
    def untyped():
        """No annotation."""
        return "text"

    assert call("place", {}) == {"city": "Turin", "country": None}
    assert json.loads(info("place").output_schema)["required"] == ["city"]
    assert call("count", {"n": 2}) == {"result": 4}
    assert json.loads(info("count").output_schema) == {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]}
    assert call("colors", {}) == {"result": ["red"]}
    assert call("untyped", {}) == {"result": "text"}
    assert info("untyped").output_schema is None


# ----------------------------------------------------------------------------- errors


def test_error_mapping():
    @tool
    def fails(kind: str) -> dict:
        """Fails."""
        if kind == "invalid":
            raise ToolError.invalid_input("n: too big")
        if kind == "denied":
            raise ToolError.denied("no access to x")
        if kind == "failed":
            raise ToolError.failed("it broke")
        if kind == "exit":
            sys.exit(3)
        if kind == "bare":
            raise KeyError("k")
        raise ValueError("bad value")

    assert (error_of("fails", {"kind": "invalid"}).kind, error_of("fails", {"kind": "invalid"}).message) == ("invalid-input", "n: too big")
    assert error_of("fails", {"kind": "denied"}).kind == "denied"
    assert error_of("fails", {"kind": "failed"}).message == "it broke"
    other = error_of("fails", {"kind": "other"})
    assert (other.kind, other.message) == ("failed", "ValueError: bad value")
    assert error_of("fails", {"kind": "bare"}).message == "KeyError: 'k'"
    assert error_of("fails", {"kind": "exit"}).message == "SystemExit: 3"
    unknown = error_of("nope", {})
    assert (unknown.kind, unknown.message) == ("unknown-tool", "nope")
    with pytest.raises(ValueError):
        ToolError("weird", "x")


def test_non_json_output_fails():
    @tool
    def weird() -> dict:
        """Weird."""
        return {"x": object()}

    e = error_of("weird", {})
    assert e.kind == "failed" and "not JSON" in e.message


# ----------------------------------------------------------------------------- log and progress


def test_log_and_progress_go_to_stderr(capsys):
    log.info("hello")
    log.error("bad")
    progress(2, 5, "halfway")
    progress(7)
    err = capsys.readouterr().err
    assert "[info] hello" in err and "[error] bad" in err
    assert "[progress] 2/5 halfway" in err and "[progress] 7" in err


# ----------------------------------------------------------------------------- files


def test_files_inside_the_data_dir(tmp_path):
    with files.with_data_dir(tmp_path):
        files.write("sub/a.txt", "héllo")
        files.write("b.bin", b"\x00\x01")
        assert files.read_text("sub/a.txt") == "héllo"
        assert files.read_text("./sub/./a.txt") == "héllo"
        assert files.read_bytes("b.bin") == b"\x00\x01"
        assert files.list(".") == ["b.bin", "sub/"]
        assert files.list("sub") == ["a.txt"]
        with pytest.raises(ToolError) as missing:
            files.read_text("sub/none.txt")
        assert missing.value.kind == "failed" and "`sub/none.txt` does not exist" in missing.value.message
    assert files.path("x") == "/data/x"


def test_with_data_dir_restores_the_previous_dir(tmp_path):
    with files.with_data_dir(tmp_path):
        assert files.path("a") == os.path.join(str(tmp_path), "a")
    assert files.path("a") == "/data/a"


@pytest.mark.parametrize("bad", ["..", "../etc/passwd", "a/../../b", "a/..", "/etc/passwd", "/data/x"])
def test_paths_leaving_the_data_dir_are_denied(tmp_path, bad):
    with files.with_data_dir(tmp_path):
        with pytest.raises(ToolError) as caught:
            files.read_text(bad)
    assert caught.value.kind == "denied" and bad in caught.value.message


def test_outside_every_grant_is_denied_with_the_grant_to_add(tmp_path):
    # As the sandbox shows a path no grant covers: not even the data directory exists.
    with files.with_data_dir(tmp_path / "not-granted"):
        with pytest.raises(ToolError) as caught:
            files.read_text("notes/note.txt")
        message = caught.value.message
        assert caught.value.kind == "denied"
        assert "`notes/note.txt` is outside the skill's granted files" in message
        assert '[[capabilities.files]] path = "notes" mode = "ro"' in message and "approve it again" in message
        with pytest.raises(ToolError) as caught:
            files.write("out.txt", "x")
        assert caught.value.kind == "denied" and 'path = "." mode = "rw"' in caught.value.message


def test_read_only_refusals_ask_for_mode_rw(tmp_path):
    with files.with_data_dir(tmp_path):
        e = files.io_error("x.csv", True, PermissionError(errno.EACCES, "Permission denied"))
        assert e.kind == "denied" and "x.csv" in e.message and 'mode = "rw"' in e.message
        e = files.io_error("x.csv", True, OSError(errno.EROFS, "Read-only file system"))
        assert e.kind == "denied" and 'mode = "rw"' in e.message
        e = files.io_error("x.csv", False, PermissionError(errno.EPERM, "Operation not permitted"))
        assert e.kind == "denied" and "rw" not in e.message


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_directory_write_is_denied(tmp_path):
    os.chmod(tmp_path, 0o555)
    try:
        with files.with_data_dir(tmp_path):
            with pytest.raises(ToolError) as caught:
                files.write("out.txt", "x")
        assert caught.value.kind == "denied" and 'mode = "rw"' in caught.value.message
    finally:
        os.chmod(tmp_path, 0o755)


def test_a_tool_using_files_maps_errors(tmp_path):
    @tool
    def read_note(path: str) -> str:
        """Read a note."""
        return files.read_text(path)

    (tmp_path / "n.txt").write_text("note")
    with files.with_data_dir(tmp_path):
        assert call("read_note", {"path": "n.txt"}) == {"result": "note"}
        assert error_of("read_note", {"path": "/etc/passwd"}).kind == "denied"


# HTTP natively: no host to ask, so a request is refused saying how to get network, or
# answered by the handler a test sets; a URL that is not http(s) is invalid input.


def test_http_without_network_is_denied_with_the_fix():
    with pytest.raises(ToolError) as refused:
        http.get("https://api.example.com/items")
    assert refused.value.kind == "denied"
    assert '"https://api.example.com"' in refused.value.message and "[network] allow" in refused.value.message


def test_http_answers_from_a_test_handler():
    seen = []

    def handler(request):
        seen.append((request.method, request.url, dict(request.headers), request.body))
        return http.Response(200, [("Content-Type", "application/json")], b'{"ok": true}')

    with http.with_handler(handler):
        response = http.post("https://api.example.com/items", {"name": "x"})
    assert response.status == 200 and response.json() == {"ok": True}
    assert response.header("content-type") == "application/json"
    assert seen == [("POST", "https://api.example.com/items", {"content-type": "application/json"}, b'{"name": "x"}')]


def test_http_refuses_a_url_that_is_not_http():
    for url in ["file:///etc/passwd", "ftp://example.com/x", "not a url"]:
        with pytest.raises(ToolError) as refused:
            http.get(url)
        assert refused.value.kind == "invalid-input", url
