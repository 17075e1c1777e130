"""pylance's JSON filter functions over JSONB columns (``arrow.json`` columns as stored).

Semantics measured with pylance 14.0.2:

* ``json_extract(j, path)`` -> string: the JSON text of what a JSONPath (``$.a``, ``$.a[0]``,
  ``$["a"]``, ``[*]``, ``.*``, ``[last]``; a path without ``$`` is read as ``$.path``) selects;
  several matches come back as an array, none as NULL.
* ``json_get(j, key)`` -> large_binary: the JSONB of an object member, or of an array element
  when ``key`` is an index; NULL when absent. ``json_get_int`` / ``_float`` / ``_bool`` /
  ``_string`` convert the member: floats round half away from zero to ints, numeric strings
  parse, ``"true"``/``"yes"``/``"false"``/``"no"`` (any case) are booleans, numbers and booleans
  become their JSON text; a value that does not convert is an error (pylance fails the query).
* ``json_exists(j, path)`` -> bool; ``json_array_length(j, path)`` -> int64 (0 when the value is
  not an array, NULL when the path selects nothing); ``json_array_contains(j, path, value)`` ->
  bool, comparing the value's text with each element's (strings unquoted), FALSE when the path
  selects nothing.

A NULL document gives NULL. Documents are decoded one at a time (see ``schema.jsonb``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pyarrow as pa

from lance_format.errors import InvalidInputError
from lance_format.schema.jsonb import decode_value, encode_value, parse_text, to_text

_MISSING = object()
_STEP = re.compile(r"""\.\*|\.([^.\[\]]+)|\[\s*\*\s*\]|\[\s*(-?\d+|last)\s*\]|\[\s*(?:"([^"]*)"|'([^']*)')\s*\]""")
_I64 = (-(2**63), 2**63 - 1)


def _parse_path(path: str) -> list[tuple[str, Any]]:
    """JSONPath steps: ("key", name), ("index", n or "last"), ("members", None) or ("elements", None)."""
    text = path.strip()
    if text.startswith("$"):
        text = text[1:]
    elif text:
        text = "." + text
    steps: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        match = _STEP.match(text, pos)
        if match is None:
            raise InvalidInputError(f"Invalid JSON path {path!r}")
        whole = match.group(0)
        if whole == ".*":
            steps.append(("members", None))
        elif whole.replace(" ", "") == "[*]":
            steps.append(("elements", None))
        elif match.group(1) is not None:
            steps.append(("key", match.group(1)))
        elif match.group(2) is not None:
            steps.append(("index", match.group(2) if match.group(2) == "last" else int(match.group(2))))
        else:
            steps.append(("key", match.group(3) if match.group(3) is not None else match.group(4)))
        pos = match.end()
    return steps


def _select(value: Any, steps: list[tuple[str, Any]]) -> list[Any]:
    current = [value]
    for kind, arg in steps:
        following: list[Any] = []
        for item in current:
            if kind == "members" and isinstance(item, dict):  # .* selects object members only
                following += list(item.values())
            elif kind == "elements":  # lax mode: a non-array is an array of itself
                following += item if isinstance(item, list) else [item]
            elif kind == "key" and isinstance(item, dict) and arg in item:
                following.append(item[arg])
            elif kind == "index" and isinstance(item, list):  # strict, unlike [*]
                index = len(item) - 1 if arg == "last" else arg
                if 0 <= index < len(item):
                    following.append(item[index])
        current = following
    return current


def _per_document(docs: pa.Array, out_type: pa.DataType, compute: Callable[[Any], Any]) -> pa.Array:
    # JSONB as stored; JSON text where a caller evaluates over decoded arrow.json columns
    decode = parse_text if pa.types.is_string(docs.type) or pa.types.is_large_string(docs.type) else decode_value
    results = [None if doc is None else compute(decode(doc)) for doc in docs.to_pylist()]
    return pa.array(results, out_type)


def _constant(scalar: Any, what: str) -> Any:
    if isinstance(scalar, pa.Scalar):
        return scalar.as_py()
    raise InvalidInputError(f"{what} of a JSON function must be a constant")


# ---------------------------------------------------------------------------------------- path functions
def json_extract(docs: pa.Array, path: pa.Scalar) -> pa.Array:
    steps = _parse_path(_constant(path, "the path"))

    def extract(value: Any) -> str | None:
        found = _select(value, steps)
        if not found:
            return None
        return to_text(found[0]) if len(found) == 1 else to_text(found)

    return _per_document(docs, pa.string(), extract)


def json_exists(docs: pa.Array, path: pa.Scalar) -> pa.Array:
    steps = _parse_path(_constant(path, "the path"))
    return _per_document(docs, pa.bool_(), lambda value: bool(_select(value, steps)))


def json_array_length(docs: pa.Array, path: pa.Scalar) -> pa.Array:
    steps = _parse_path(_constant(path, "the path"))

    def length(value: Any) -> int | None:
        found = _select(value, steps)
        if not found:
            return None
        return len(found[0]) if isinstance(found[0], list) else 0

    return _per_document(docs, pa.int64(), length)


def _text_form(value: Any) -> str:
    return value if isinstance(value, str) else to_text(value)


def json_array_contains(docs: pa.Array, path: pa.Scalar, needle: pa.Scalar) -> pa.Array:
    steps = _parse_path(_constant(path, "the path"))
    if not needle.is_valid:
        return pa.nulls(len(docs), pa.bool_())
    wanted = needle.cast(pa.string()).as_py()
    if pa.types.is_boolean(needle.type):
        wanted = "true" if needle.as_py() else "false"

    def contains(value: Any) -> bool:
        found = _select(value, steps)
        return bool(found) and isinstance(found[0], list) and any(_text_form(v) == wanted for v in found[0])

    return _per_document(docs, pa.bool_(), contains)


# ---------------------------------------------------------------------------------------- member access
def _member(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return value.get(key, _MISSING)
    if isinstance(value, list) and key.isdigit() and int(key) < len(value):
        return value[int(key)]
    return _MISSING


def _failed(target: str) -> InvalidInputError:
    return InvalidInputError(f"Failed to convert to {target}: InvalidCast")


def _as_int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            try:
                value = float(value)
            except ValueError:
                raise _failed("integer") from None
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise _failed("integer")
        value = int(Decimal(repr(value)).to_integral_value(rounding=ROUND_HALF_UP))
    if isinstance(value, int) and _I64[0] <= value <= _I64[1]:
        return value
    raise _failed("integer")


def _as_float(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise _failed("float") from None
    raise _failed("float")


def _as_bool(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "false", "no"):
        return value.lower() in ("true", "yes")
    raise _failed("boolean")


def _as_string(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return to_text(value)
    raise _failed("string")


_CONVERSIONS: dict[str, tuple[pa.DataType, Callable[[Any], Any]]] = {
    "json_get_int": (pa.int64(), _as_int),
    "json_get_float": (pa.float64(), _as_float),
    "json_get_bool": (pa.bool_(), _as_bool),
    "json_get_string": (pa.string(), _as_string),
}


def json_get(docs: pa.Array, key: pa.Scalar) -> pa.Array:
    name = str(_constant(key, "the key"))

    def get(value: Any) -> bytes | None:
        member = _member(value, name)
        return None if member is _MISSING else encode_value(member)

    return _per_document(docs, pa.large_binary(), get)


def typed_getter(function: str) -> tuple[Callable[[pa.Array, pa.Scalar], pa.Array], pa.DataType]:
    """``json_get_<type>``'s implementation and result type."""
    out_type, convert = _CONVERSIONS[function]

    def get(docs: pa.Array, key: pa.Scalar) -> pa.Array:
        name = str(_constant(key, "the key"))

        def member(value: Any) -> Any:
            found = _member(value, name)
            return None if found is _MISSING else convert(found)

        return _per_document(docs, out_type, member)

    return get, out_type


PATH_FUNCTIONS: dict[str, tuple[Callable[..., pa.Array], pa.DataType]] = {
    "json_extract": (json_extract, pa.string()),
    "json_exists": (json_exists, pa.bool_()),
    "json_array_length": (json_array_length, pa.int64()),
    "json_array_contains": (json_array_contains, pa.bool_()),
    "json_get": (json_get, pa.large_binary()),
    **{name: typed_getter(name) for name in _CONVERSIONS},
}
