"""The ``@tool`` decorator, the registry of a skill's tools, and the ``Guest`` class.

``@tool`` reads a function's signature and docstring once, when the module is imported
(inside a component that is at build time: componentize-py snapshots the imported
module), and registers a :class:`ToolSpec`. ``Guest`` implements the world's ``guest``
interface over the registry: ``tools()`` describes them, ``call(tool, input)`` checks
the input, runs the function and returns its output as JSON text.

The output is always a JSON object. A function returning a dict, a dataclass or a
TypedDict gives that object; any other value ``v`` is wrapped as ``{"result": v}``, and
the output schema (from the return annotation) is wrapped the same way.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import typing
from typing import Any, Callable, Dict, List, Optional

from . import _runtime
from ._schema import SchemaError, convert, convert_fields, is_object_type, object_schema, parse_docstring, schema_for, to_json
from .errors import ToolError

_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
_REGISTRY: Dict[str, "ToolSpec"] = {}


@dataclasses.dataclass
class Annotations:
    """Hints about a tool's behaviour, mirrored to MCP tool annotations (never a security boundary)."""

    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False


@dataclasses.dataclass
class ToolInfo:
    """A tool as the world's ``tool`` record describes it (schemas and examples as JSON text)."""

    name: str
    description: str
    input_schema: str
    output_schema: Optional[str]
    annotations: Annotations
    examples: List[str]


@dataclasses.dataclass
class ToolSpec:
    """A registered tool: its function, parameter types and schemas."""

    name: str
    function: Callable[..., Any]
    description: str
    params: List[tuple]  # (name, type, required)
    input_schema: Dict[str, Any]
    output_schema: Optional[Dict[str, Any]]
    wraps_output: bool
    annotations: Annotations
    examples: List[Dict[str, Any]]

    def info(self) -> ToolInfo:
        """The tool's description as the host reads it."""
        return ToolInfo(
            name=self.name,
            description=self.description,
            input_schema=json.dumps(self.input_schema),
            output_schema=None if self.output_schema is None else json.dumps(self.output_schema),
            annotations=dataclasses.replace(self.annotations),
            examples=[json.dumps(e) for e in self.examples],
        )

    def run(self, input_text: str) -> str:
        """Checks ``input_text`` (JSON of the input object), calls the function and returns
        its output as JSON text; raises :class:`ToolError` for every failure."""
        try:
            args = json.loads(input_text)
        except ValueError as e:
            raise ToolError.invalid_input(f"the input is not JSON: {e}") from None
        if not isinstance(args, dict):
            raise ToolError.invalid_input(f"the input must be a JSON object, got {type(args).__name__}")
        kwargs = convert_fields(args, self.params)
        result = self.function(**kwargs)
        data = to_json(result)
        if self.wraps_output or not isinstance(data, dict):
            data = {"result": data}
        try:
            return json.dumps(data, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ToolError.failed(f"tool `{self.name}` returned a value that is not JSON: {e}") from None


def tool(
    function: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
    open_world: bool = False,
    examples: Optional[List[Dict[str, Any]]] = None,
):
    """Registers a function as a tool of the skill; usable as ``@tool`` or ``@tool(...)``.

    The input schema comes from the parameters' type hints (a parameter with a default is
    optional), the description from the docstring's first paragraph (or ``description``),
    each parameter's description from its ``Args:`` / ``:param x:`` entry. ``examples`` are
    input objects, checked against the parameters now. Raises ``TypeError`` when the tool
    cannot be described (a missing type hint or docstring, an unsupported type, a bad name).
    """

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        spec = _build(fn, name, description, Annotations(read_only, destructive, idempotent, open_world), examples or [])
        if spec.name in _REGISTRY and _REGISTRY[spec.name].function is not fn:
            raise TypeError(f"two tools are named `{spec.name}`: give one of them @tool(name=...)")
        _REGISTRY[spec.name] = spec
        return fn

    return register(function) if function is not None else register


def _build(fn, name, description, annotations, examples) -> ToolSpec:
    tool_name = name or fn.__name__
    where = f"tool `{tool_name}` ({fn.__module__}.{fn.__qualname__})"
    if not _NAME.match(tool_name) or len(tool_name) > 64:
        raise TypeError(f"{where}: a tool name is lowercase letters, digits, `_` and `-`, starting with a letter, at most 64 bytes")
    summary, described = parse_docstring(fn.__doc__)
    description = description or summary
    if not description:
        raise TypeError(f"{where}: give the function a docstring; its first paragraph tells an agent what the tool does")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as e:
        raise TypeError(f"{where}: cannot read its type hints: {e}") from e
    fields, params = [], []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"{where}: parameter `{p.name}` must be a plain named parameter (no *args, **kwargs or positional-only)")
        if p.name not in hints:
            raise TypeError(f"{where}: parameter `{p.name}` needs a type hint (it gives the input schema)")
        required = p.default is inspect.Parameter.empty
        fields.append((p.name, hints[p.name], required, p.default, described.get(p.name)))
        params.append((p.name, hints[p.name], required))
    try:
        input_schema = object_schema(fields)
        output_schema, wraps = None, False
        if "return" in hints and hints["return"] is not type(None) and hints["return"] is not None:
            returned = hints["return"]
            output_schema = schema_for(returned)
            if not is_object_type(returned):
                wraps = True
                output_schema = {"type": "object", "properties": {"result": output_schema}, "required": ["result"]}
    except SchemaError as e:
        raise TypeError(f"{where}: {e}") from e
    for i, example in enumerate(examples):
        if not isinstance(example, dict):
            raise TypeError(f"{where}: examples[{i}] must be a dict (an input object)")
        try:
            convert_fields(example, params)
        except ToolError as e:
            raise TypeError(f"{where}: examples[{i}] does not fit the parameters: {e.message}") from None
    if annotations.read_only and annotations.destructive:
        raise TypeError(f"{where}: a tool cannot be both read_only and destructive")
    input_schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **input_schema}
    return ToolSpec(tool_name, fn, description, params, input_schema, output_schema, wraps, annotations, [dict(e) for e in examples])


def registered() -> List[ToolSpec]:
    """The registered tools, in the order they were declared."""
    return list(_REGISTRY.values())


def dispatch(name: str, input_text: str) -> str:
    """Runs tool ``name`` on ``input_text``; every failure is a :class:`ToolError`, never
    another exception (one escaping would abort the component's instance)."""
    spec = _REGISTRY.get(name)
    if spec is None:
        raise ToolError.unknown_tool(name)
    try:
        return spec.run(input_text)
    except ToolError:
        raise
    except BaseException as e:  # noqa: BLE001 - SystemExit, RecursionError, ... all become `failed`
        message = str(e)
        raise ToolError.failed(f"{type(e).__name__}: {message}" if message else type(e).__name__) from None


if _runtime.IN_COMPONENT:
    from componentize_py_types import Err
    from wit_world import exports as _exports
    try:
        from wit_world.imports import types as _types
    except ImportError:  # The world with wasi:http names our `types` apart from its own.
        from wit_world.imports import skillhost_skill_types as _types

    _ERRORS = {
        "invalid-input": _types.CallError_InvalidInput,
        "failed": _types.CallError_Failed,
        "denied": _types.CallError_Denied,
        "unknown-tool": _types.CallError_UnknownTool,
    }

    class Guest(_exports.Guest):
        """The skill's tools for the host: the ``guest`` interface over every ``@tool``."""

        def tools(self):
            out = []
            for spec in registered():
                info = spec.info()
                a = info.annotations
                out.append(
                    _types.Tool(
                        name=info.name,
                        description=info.description,
                        input_schema=info.input_schema,
                        output_schema=info.output_schema,
                        annotations=_types.Annotations(read_only=a.read_only, destructive=a.destructive, idempotent=a.idempotent, open_world=a.open_world),
                        examples=info.examples,
                    )
                )
            return out

        def call(self, tool, input):
            try:
                return dispatch(tool, input)
            except ToolError as e:
                raise Err(_ERRORS[e.kind](e.message))
            except BaseException as e:  # noqa: BLE001 - never abort the instance
                raise Err(_types.CallError_Failed(f"{type(e).__name__}: {e}"))

else:

    class Guest:  # type: ignore[no-redef]
        """The skill's tools run natively (unit tests): ``tools()`` gives :class:`ToolInfo`s,
        ``call(tool, input)`` returns the output's JSON text or raises :class:`ToolError`."""

        def tools(self) -> List[ToolInfo]:
            return [spec.info() for spec in registered()]

        def call(self, tool: str, input: str) -> str:
            return dispatch(tool, input)
