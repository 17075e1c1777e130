"""A ``pyarrow.compute.Expression`` read back as a tree (fields, literals, calls with options).

pyarrow has no public API to walk an expression, but it pickles one losslessly: Arrow's
``compute::Serialize`` writes an Arrow IPC file whose schema metadata lists the tree in
preorder (``call``/``end`` around a call's arguments, ``field_ref`` and ``nested_field_ref``
for column references, ``literal``/``options`` naming one-row columns that hold the typed
literal or the function options as a struct). This module reads that format back, so literals
keep their exact Arrow types (time zones, decimal scales, units), and rebuilds any sub-tree as
a ``pc.Expression`` through pyarrow's own deserializer.

The metadata has repeated keys, which pyarrow's Python ``Schema.metadata`` (a dict) drops; they
are read through the Arrow C data interface, whose metadata encoding keeps every pair in order.
Anything unexpected raises :class:`UnreadableExpression`: the caller then evaluates the whole
expression with pyarrow, which is always right.
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

__all__ = ["ExprNode", "UnreadableExpression", "function_options", "read_expression", "rebuild"]


class UnreadableExpression(Exception):
    """The expression (or a part of it) is not in the serialized form this module reads."""


@dataclass
class ExprNode:
    """One node of a decoded expression.

    ``kind`` is ``"field"`` (``path``: the names from the top-level column down a struct),
    ``"literal"`` (``value``: a typed scalar) or ``"call"`` (``name``, ``args`` and, when the
    function has options, ``options``: their struct scalar's fields). ``span`` is the node's
    range of metadata entries and ``source`` the decoded expression it belongs to, so
    :func:`rebuild` can make it a ``pc.Expression`` again.
    """

    kind: str
    span: tuple[int, int]
    source: _Serialized
    path: tuple[str, ...] = ()
    value: pa.Scalar | None = None
    name: str = ""
    args: list[ExprNode] = field(default_factory=list)
    options: dict[str, pa.Scalar] | None = None
    options_array: pa.Array | None = None  # the options as their one-row struct column

    def __repr__(self) -> str:  # the dataclass repr would print the whole source
        if self.kind == "field":
            return f"field{self.path}"
        if self.kind == "literal":
            return f"literal({self.value!r})"
        return f"{self.name}({', '.join(map(repr, self.args))})"


@dataclass
class _Serialized:
    entries: list[tuple[str, str]]
    columns: list[pa.Array]


class _CArrowSchema(ctypes.Structure):
    """``struct ArrowSchema`` of the Arrow C data interface."""

    _fields_ = [("format", ctypes.c_char_p), ("name", ctypes.c_char_p), ("metadata", ctypes.c_void_p),
                ("flags", ctypes.c_int64), ("n_children", ctypes.c_int64), ("children", ctypes.c_void_p),
                ("dictionary", ctypes.c_void_p), ("release", ctypes.c_void_p), ("private_data", ctypes.c_void_p)]


_RELEASE = ctypes.CFUNCTYPE(None, ctypes.POINTER(_CArrowSchema))


def _metadata_pairs(schema: pa.Schema) -> list[tuple[str, str]]:
    """Every key/value pair of ``schema``'s metadata, repeated keys included, in order."""
    c_schema = _CArrowSchema()
    schema._export_to_c(ctypes.addressof(c_schema))
    try:
        if not c_schema.metadata:
            return []
        base = c_schema.metadata

        def int32_at(offset: int) -> int:
            value: int = struct.unpack("=i", ctypes.string_at(base + offset, 4))[0]
            return value

        count, offset, pairs = int32_at(0), 4, []
        for _ in range(count):
            parts = []
            for _ in range(2):
                length = int32_at(offset)
                parts.append(ctypes.string_at(base + offset + 4, length).decode())
                offset += 4 + length
            pairs.append((parts[0], parts[1]))
        return pairs
    finally:
        if c_schema.release:
            _RELEASE(c_schema.release)(ctypes.byref(c_schema))


def read_expression(expr: pc.Expression) -> ExprNode:
    """``expr`` as a tree of :class:`ExprNode`.

    Raises
    ------
    UnreadableExpression
        pyarrow cannot serialize it (field references by position, array literals) or its
        serialized form is not the one described above.
    """
    try:
        _, (buffer,) = expr.__reduce__()
        reader = ipc.open_file(buffer)
        batch = reader.get_batch(0) if reader.num_record_batches else None
        entries = _metadata_pairs(reader.schema)
    except (pa.ArrowException, TypeError, ValueError, UnicodeDecodeError) as err:
        raise UnreadableExpression(str(err)) from None
    columns = list(batch.columns) if batch is not None else []
    source = _Serialized(entries, columns)
    node, at = _parse(source, 0)
    if at != len(entries):
        raise UnreadableExpression(f"{len(entries) - at} serialized entries left over")
    return node


def _column_value(source: _Serialized, index_text: str) -> pa.Scalar:
    try:
        return source.columns[int(index_text)][0]
    except (ValueError, IndexError):
        raise UnreadableExpression(f"no literal column {index_text!r}") from None


def _parse(source: _Serialized, start: int) -> tuple[ExprNode, int]:
    """The node whose entries begin at ``start`` and the index after it (an explicit stack:
    engines chain thousands of ORs, deeper than Python's recursion limit)."""
    entries = source.entries
    # each frame: a call node being filled, or None for the top
    stack: list[ExprNode] = []
    at = start
    while True:
        if at >= len(entries):
            raise UnreadableExpression("serialized expression ends inside a call")
        key, value = entries[at]
        done: ExprNode | None = None
        if key == "literal":
            done = ExprNode("literal", (at, at + 1), source, value=_column_value(source, value))
            at += 1
        elif key in ("field_ref", "nested_field_ref"):
            done, at = _field(source, at)
        elif key == "call":
            stack.append(ExprNode("call", (at, at), source, name=value))
            at += 1
            continue
        elif key == "options" and stack:
            options = _column_value(source, value)
            if not isinstance(options, pa.StructScalar):
                raise UnreadableExpression("function options are not a struct")
            stack[-1].options = {name: options[name] for name in options.keys()} if options.is_valid else {}
            stack[-1].options_array = source.columns[int(value)]
            at += 1
            continue
        elif key == "end" and stack and stack[-1].name == value:
            done = stack.pop()
            at += 1
            done.span = (done.span[0], at)
        else:
            raise UnreadableExpression(f"unexpected serialized entry {key}={value!r}")
        if not stack:
            return done, at
        stack[-1].args.append(done)


def _field(source: _Serialized, at: int) -> tuple[ExprNode, int]:
    """A (possibly nested) field reference from ``at``: ``nested_field_ref n`` then n names."""
    start, path, pending = at, [], 1
    while pending:
        if at >= len(source.entries):
            raise UnreadableExpression("serialized field reference ends early")
        key, value = source.entries[at]
        at += 1
        pending -= 1
        if key == "field_ref":
            path.append(value)
        elif key == "nested_field_ref":
            pending += int(value)
        else:
            raise UnreadableExpression(f"unexpected entry {key}={value!r} in a field reference")
    if not path:
        raise UnreadableExpression("empty field reference")
    return ExprNode("field", (start, at), source, path=tuple(path)), at


def rebuild(node: ExprNode) -> pc.Expression:
    """``node`` as a ``pc.Expression`` again, function options included (through pyarrow's
    deserializer, so nothing is re-interpreted here)."""
    source = node.source
    entries = source.entries[node.span[0]:node.span[1]]
    columns: list[pa.Array] = []
    renumbered: list[tuple[bytes, bytes]] = []
    for key, value in entries:
        if key in ("literal", "options"):
            columns.append(source.columns[int(value)])
            value = str(len(columns) - 1)
        renumbered.append((key.encode(), value.encode()))
    columns.append(pa.nulls(1))  # unreferenced: the batch must have its one row even without literals
    schema = pa.schema([pa.field("", c.type) for c in columns], metadata=pa.KeyValueMetadata(renumbered))
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, schema) as writer:
        writer.write_batch(pa.record_batch(columns, schema=schema))
    deserialize: Any = pc.Expression._deserialize
    result: pc.Expression = deserialize(sink.getvalue())
    return result


def function_options(node: ExprNode) -> pc.FunctionOptions | None:
    """The options of a call node as pyarrow's ``FunctionOptions`` (None when it has none):
    Arrow serializes options as the same one-row struct column the expression holds."""
    if node.options_array is None:
        return None
    column = node.options_array
    schema = pa.schema([pa.field("", column.type)])
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, schema) as writer:
        writer.write_batch(pa.record_batch([column], schema=schema))
    try:
        options: pc.FunctionOptions = pc.FunctionOptions.deserialize(sink.getvalue())
    except (pa.ArrowException, TypeError, ValueError) as err:
        raise UnreadableExpression(f"options of {node.name}: {err}") from None
    return options
