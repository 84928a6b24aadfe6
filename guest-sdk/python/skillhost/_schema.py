"""JSON Schemas from Python type hints, docstring parsing, and input conversion.

Supported types, each with the schema (draft 2020-12) it gives:

* ``str``, ``int``, ``float``, ``bool`` -> ``string``, ``integer``, ``number``, ``boolean``;
  ``None`` -> ``null``; ``typing.Any`` -> ``{}`` (anything);
* ``Optional[X]`` / ``X | None`` / ``Union[...]`` -> ``anyOf`` (``type: [X, "null"]`` for simple X);
* ``Literal["a", "b"]`` and ``Enum`` subclasses -> ``enum`` (an ``Enum`` by member values);
* ``list[X]`` / ``List[X]`` -> ``array`` of X; ``dict[str, X]`` -> ``object`` whose values are X;
* dataclasses and ``TypedDict`` (nested) -> ``object`` with ``properties``, ``required`` for
  fields without a default (``NotRequired``/``total=False`` for a ``TypedDict``) and
  ``additionalProperties: false``; field descriptions from the class docstring
  (``Attributes:``/``Args:`` sections or ``:param x:``/``:ivar x:``).

:func:`convert` checks a JSON value against a type and builds the Python value (dataclass
instances, ``Enum`` members), raising ``ToolError.invalid_input`` with the field's path
(``places[0].city: expected a string, got a number``).
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import re
import types
import typing
from typing import Any, Dict, List, Optional, Tuple

from .errors import ToolError

try:  # Python 3.11+
    from typing import NotRequired, Required
except ImportError:  # pragma: no cover
    NotRequired = Required = None

_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Attributes|Returns?|Yields?|Raises|Examples?|Notes?|See Also|Warnings?|Todo)\s*:\s*$",
    re.IGNORECASE,
)
_PARAM_SECTIONS = {"args", "arguments", "parameters", "params", "attributes"}
_REST_FIELD = re.compile(r"^:(param|parameter|arg|argument|ivar|cvar|var)\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")
_GOOGLE_ITEM = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class SchemaError(TypeError):
    """A type hint the SDK cannot describe as JSON Schema (raised when a tool is declared)."""


# ----------------------------------------------------------------------------- docstrings


def parse_docstring(doc: Optional[str]) -> Tuple[str, Dict[str, str]]:
    """Returns (first paragraph as one line, {parameter name: description}) of a docstring.

    Reads Google style (``Args:`` / ``Attributes:`` sections with ``name: text`` or
    ``name (type): text`` items, continuation lines indented deeper) and reST
    (``:param name: text``, ``:param type name: text``, ``:ivar name: text``).
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: List[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()) or line.strip().startswith(":"):
            break
        summary.append(line.strip())
    params: Dict[str, str] = {}
    section: Optional[str] = None
    section_indent = 0
    item_indent: Optional[int] = None
    current: Optional[str] = None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        heading = _SECTION.match(stripped)
        if heading and (section is None or indent <= section_indent):
            section, section_indent, item_indent, current = heading.group(1).lower(), indent, None, None
            continue
        rest = _REST_FIELD.match(stripped)
        if rest:
            section, current = "rest", rest.group(2)
            params[current] = rest.group(3).strip()
            item_indent = indent
            continue
        if not stripped:
            if section == "rest":
                current = None
            continue
        if section == "rest":
            if current is not None and indent > (item_indent or 0):
                params[current] = (params[current] + " " + stripped).strip()
            elif indent <= section_indent:
                section, current = None, None
            continue
        if section in _PARAM_SECTIONS:
            if indent <= section_indent:
                section, current = None, None
                continue
            if item_indent is None:
                item_indent = indent
            item = _GOOGLE_ITEM.match(stripped)
            if indent == item_indent and item:
                current = item.group(1).lstrip("*")
                params[current] = item.group(2).strip()
            elif current is not None and indent > item_indent:
                params[current] = (params[current] + " " + stripped).strip()
    return " ".join(summary), params


def class_doc(cls: type) -> Optional[str]:
    """The class's own docstring, without the one ``dataclasses`` generates (``Name(a: int)``)."""
    doc = cls.__dict__.get("__doc__")
    if not doc or (dataclasses.is_dataclass(cls) and doc.startswith(cls.__name__ + "(")):
        return None
    return doc


# ----------------------------------------------------------------------------- type inspection


def is_typeddict(tp: Any) -> bool:
    """Whether ``tp`` is a ``TypedDict`` class."""
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__") and hasattr(tp, "__annotations__")


def _strip(tp: Any) -> Any:
    """Drops ``Annotated``, ``Required`` and ``NotRequired`` wrappers."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin is not None and origin in (Required, NotRequired):
            tp = typing.get_args(tp)[0]
        else:
            return tp


def _union_args(tp: Any) -> Optional[Tuple[Any, ...]]:
    origin = typing.get_origin(tp)
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        return typing.get_args(tp)
    return None


def fields_of(cls: type) -> List[Tuple[str, Any, bool, Any]]:
    """(name, type, required, default or ``dataclasses.MISSING``) for a dataclass or TypedDict."""
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception as e:
        raise SchemaError(f"cannot read the type hints of {cls.__name__}: {e}") from e
    out = []
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            if f.default is not dataclasses.MISSING:
                out.append((f.name, hints[f.name], False, f.default))
            elif f.default_factory is not dataclasses.MISSING:
                out.append((f.name, hints[f.name], False, f.default_factory()))
            else:
                out.append((f.name, hints[f.name], True, dataclasses.MISSING))
    else:
        required = cls.__required_keys__
        for name, hint in hints.items():
            out.append((name, hint, name in required, dataclasses.MISSING))
    return out


def to_json(value: Any) -> Any:
    """A Python value as plain JSON data: dataclasses to dicts, Enums to their values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


def _json_default(value: Any) -> Tuple[bool, Any]:
    """(True, value as JSON) when a default can be shown in a schema, else (False, None)."""
    try:
        data = to_json(value)
        json.dumps(data, allow_nan=False)
        return True, data
    except (TypeError, ValueError):
        return False, None


# ----------------------------------------------------------------------------- schemas


def schema_for(tp: Any, _seen: Tuple[type, ...] = ()) -> Dict[str, Any]:
    """The JSON Schema of values of type ``tp``; :class:`SchemaError` for an unsupported hint."""
    tp = _strip(tp)
    if tp is Any or tp is object:
        return {}
    if tp in _SIMPLE:
        return {"type": _SIMPLE[tp]}
    if tp is None:
        return {"type": "null"}
    members = _union_args(tp)
    if members is not None:
        schemas = [schema_for(m, _seen) for m in members]
        simple = [s["type"] for s in schemas if set(s) == {"type"} and isinstance(s["type"], str)]
        if len(simple) == len(schemas):
            return {"type": simple}
        return {"anyOf": schemas}
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        values = list(typing.get_args(tp))
        for v in values:
            if not isinstance(v, (str, int, bool)) and v is not None:
                raise SchemaError(f"Literal value {v!r} is not a string, integer, boolean or None")
        schema: Dict[str, Any] = {"enum": values}
        kinds = {_SIMPLE[type(v)] for v in values}
        if len(kinds) == 1:
            schema = {"type": kinds.pop(), "enum": values}
        return schema
    if origin in (list, List) or tp in (list, List):
        args = typing.get_args(tp)
        return {"type": "array", "items": schema_for(args[0], _seen)} if args else {"type": "array"}
    if origin in (dict, Dict) or tp in (dict, Dict):
        args = typing.get_args(tp)
        if not args:
            return {"type": "object"}
        if _strip(args[0]) is not str:
            raise SchemaError(f"dict keys must be str (JSON object keys are strings), not {args[0]!r}")
        return {"type": "object", "additionalProperties": schema_for(args[1], _seen)}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
        for v in values:
            if not isinstance(v, (str, int)):
                raise SchemaError(f"{tp.__name__}: Enum values must be strings or integers, not {v!r}")
        schema = {"enum": values}
        kinds = {_SIMPLE[type(v)] for v in values}
        if len(kinds) == 1:
            schema = {"type": kinds.pop(), "enum": values}
        summary, _ = parse_docstring(tp.__dict__.get("__doc__") if tp.__dict__.get("__doc__") != "An enumeration." else None)
        if summary:
            schema["description"] = summary
        return schema
    if isinstance(tp, type) and (dataclasses.is_dataclass(tp) or is_typeddict(tp)):
        if tp in _seen:
            raise SchemaError(f"{tp.__name__} contains itself: recursive types are not supported")
        summary, described = parse_docstring(class_doc(tp))
        schema = object_schema(
            [(name, hint, req, default, described.get(name)) for name, hint, req, default in fields_of(tp)],
            _seen + (tp,),
        )
        if summary:
            schema = {"description": summary, **schema}
        return schema
    raise SchemaError(
        f"type {tp!r} is not supported in a tool's input or output: use str, int, float, bool, "
        "Optional/Union, Literal, Enum, list[X], dict[str, X], a dataclass or a TypedDict"
    )


def object_schema(fields: List[Tuple[str, Any, bool, Any, Optional[str]]], _seen: Tuple[type, ...] = ()) -> Dict[str, Any]:
    """An object schema from (name, type, required, default, description) fields."""
    properties: Dict[str, Any] = {}
    required: List[str] = []
    for name, hint, is_required, default, description in fields:
        prop = dict(schema_for(hint, _seen))
        if description:
            prop["description"] = description
        if is_required:
            required.append(name)
        elif default is not dataclasses.MISSING and default is not inspect.Parameter.empty:
            ok, data = _json_default(default)
            if ok:
                prop["default"] = data
        properties[name] = prop
    schema: Dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def is_object_type(tp: Any) -> bool:
    """Whether values of ``tp`` are always JSON objects (a dataclass, TypedDict or dict)."""
    tp = _strip(tp)
    return (
        tp in (dict, Dict)
        or typing.get_origin(tp) in (dict, Dict)
        or (isinstance(tp, type) and (dataclasses.is_dataclass(tp) or is_typeddict(tp)))
    )


# ----------------------------------------------------------------------------- conversion

_JSON_NAMES = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", type(None): "null", list: "an array", dict: "an object"}


def _got(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    for kind in (str, int, float, type(None), list, dict):
        if isinstance(value, kind):
            return _JSON_NAMES[kind]
    return type(value).__name__


def _bad(path: str, expected: str, value: Any) -> ToolError:
    where = f"{path}: " if path else ""
    return ToolError.invalid_input(f"{where}expected {expected}, got {_got(value)}")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def convert(value: Any, tp: Any, path: str = "") -> Any:
    """Checks JSON ``value`` against ``tp`` and returns it as a Python value.

    Builds dataclass instances and ``Enum`` members; raises ``ToolError.invalid_input``
    naming the path of the first wrong field (``places[0].city``).
    """
    tp = _strip(tp)
    if tp is Any or tp is object:
        return value
    if tp is str:
        if not isinstance(value, str):
            raise _bad(path, "a string", value)
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise _bad(path, "a boolean", value)
        return value
    if tp is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(path, "an integer", value)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _bad(path, "a number", value)
        return float(value)
    if tp is None or tp is type(None):
        if value is not None:
            raise _bad(path, "null", value)
        return None
    members = _union_args(tp)
    if members is not None:
        if value is None and type(None) in members:
            return None
        errors = []
        for member in members:
            if member is type(None):
                continue
            try:
                return convert(value, member, path)
            except ToolError as e:
                errors.append(e)
        if len(errors) == 1:
            raise errors[0]
        names = " or ".join(_describe(m) for m in members)
        raise _bad(path, names, value)
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        if not any(value == a and type(value) is type(a) for a in allowed):
            where = f"{path}: " if path else ""
            raise ToolError.invalid_input(f"{where}expected one of {', '.join(json.dumps(a) for a in allowed)}, got {json.dumps(value)}")
        return value
    if origin in (list, List) or tp in (list, List):
        if not isinstance(value, list):
            raise _bad(path, "an array", value)
        args = typing.get_args(tp)
        return [convert(v, args[0], f"{path}[{i}]") for i, v in enumerate(value)] if args else list(value)
    if origin in (dict, Dict) or tp in (dict, Dict):
        if not isinstance(value, dict):
            raise _bad(path, "an object", value)
        args = typing.get_args(tp)
        return {k: convert(v, args[1], _join(path, k)) for k, v in value.items()} if args else dict(value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for member in tp:
            if member.value == value and type(member.value) is type(value):
                return member
        where = f"{path}: " if path else ""
        allowed = ", ".join(json.dumps(m.value) for m in tp)
        raise ToolError.invalid_input(f"{where}expected one of {allowed}, got {json.dumps(value, default=str)}")
    if isinstance(tp, type) and (dataclasses.is_dataclass(tp) or is_typeddict(tp)):
        if not isinstance(value, dict):
            raise _bad(path, "an object", value)
        kwargs = convert_fields(value, [(n, h, r) for n, h, r, _ in fields_of(tp)], path)
        return tp(**kwargs)
    raise _bad(path, _describe(tp), value)


def convert_fields(value: Dict[str, Any], fields: List[Tuple[str, Any, bool]], path: str = "") -> Dict[str, Any]:
    """Converts the members of a JSON object by (name, type, required) fields: missing
    required fields and unknown fields are invalid input; absent optional ones are left out."""
    known = {name for name, _, _ in fields}
    for key in value:
        if key not in known:
            expected = ", ".join(sorted(known)) or "none"
            raise ToolError.invalid_input(f"{_join(path, key)}: unknown field (expected fields: {expected})")
    out = {}
    for name, hint, required in fields:
        if name in value:
            out[name] = convert(value[name], hint, _join(path, name))
        elif required:
            raise ToolError.invalid_input(f"{_join(path, name)}: missing (required)")
    return out


def _describe(tp: Any) -> str:
    tp = _strip(tp)
    if tp in _JSON_NAMES:
        return _JSON_NAMES[tp]
    origin = typing.get_origin(tp)
    if origin in (list, List) or tp in (list, List):
        return "an array"
    if origin in (dict, Dict) or tp in (dict, Dict) or (isinstance(tp, type) and (dataclasses.is_dataclass(tp) or is_typeddict(tp))):
        return "an object"
    if origin is typing.Literal or (isinstance(tp, type) and issubclass(tp, enum.Enum)):
        return "one of the allowed values"
    return getattr(tp, "__name__", repr(tp))
