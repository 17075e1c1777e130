"""Arrow type names as DataFusion's ``arrow_cast(expr, 'Type')`` spells them (arrow-rs's
``DataType`` text: ``Int64``, ``Utf8``, ``Timestamp(Nanosecond, Some("UTC"))``,
``FixedSizeList(32, Float32)`` or ``FixedSizeList(32 x Float32)``, ``List(Int64)``, ...)."""

from __future__ import annotations

import re

import pyarrow as pa

_SIMPLE: dict[str, pa.DataType] = {
    "Null": pa.null(), "Boolean": pa.bool_(),
    "Int8": pa.int8(), "Int16": pa.int16(), "Int32": pa.int32(), "Int64": pa.int64(),
    "UInt8": pa.uint8(), "UInt16": pa.uint16(), "UInt32": pa.uint32(), "UInt64": pa.uint64(),
    "Float16": pa.float16(), "Float32": pa.float32(), "Float64": pa.float64(),
    "Utf8": pa.string(), "LargeUtf8": pa.large_string(), "Utf8View": pa.string_view(),
    "Binary": pa.binary(), "LargeBinary": pa.large_binary(), "BinaryView": pa.binary_view(),
    "Date32": pa.date32(), "Date64": pa.date64(),
}
_UNITS = {"Second": "s", "Millisecond": "ms", "Microsecond": "us", "Nanosecond": "ns",
          "s": "s", "ms": "ms", "us": "us", "ns": "ns"}
_TOKEN = re.compile(r'\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|"([^"]*)"|([(),]))')


class ArrowTypeNameError(ValueError):
    """The text is not an Arrow type name DataFusion's arrow_cast accepts (or we support)."""


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text.rstrip()):
            match = _TOKEN.match(text, pos)
            if match is None:
                raise ArrowTypeNameError(text)
            number, word, quoted, punct = match.groups()
            kind = "num" if number else "word" if word else "str" if quoted is not None else "punct"
            self.tokens.append((kind, next(g for g in match.groups() if g is not None)))
            pos = match.end()
        self.at = 0
        self.text = text

    def _next(self, kind: str | None = None, value: str | None = None) -> str:
        if self.at >= len(self.tokens):
            raise ArrowTypeNameError(self.text)
        got_kind, got = self.tokens[self.at]
        if (kind is not None and got_kind != kind) or (value is not None and got != value):
            raise ArrowTypeNameError(self.text)
        self.at += 1
        return got

    def _peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def _unit(self) -> str:
        unit = _UNITS.get(self._next("word"))
        if unit is None:
            raise ArrowTypeNameError(self.text)
        return unit

    def parse(self) -> pa.DataType:
        name = self._next("word")
        if name in _SIMPLE:
            return _SIMPLE[name]
        self._next("punct", "(")
        result = self._arguments(name)
        self._next("punct", ")")
        return result

    def _arguments(self, name: str) -> pa.DataType:
        if name == "Timestamp":
            unit, tz = self._unit(), None
            if self._peek() == ",":
                self._next()
                if self._peek() == "Some":
                    self._next()
                    self._next("punct", "(")
                    tz = self._next("str")
                    self._next("punct", ")")
                elif self._peek() == "None":
                    self._next()
                else:
                    tz = self._next("str")
            return pa.timestamp(unit, tz)
        if name in ("Time32", "Time64"):
            return (pa.time32 if name == "Time32" else pa.time64)(self._unit())
        if name == "Duration":
            return pa.duration(self._unit())
        if name in ("Decimal128", "Decimal256"):
            precision = int(self._next("num"))
            self._next("punct", ",")
            scale = int(self._next("num"))
            return (pa.decimal128 if name == "Decimal128" else pa.decimal256)(precision, scale)
        if name == "FixedSizeBinary":
            return pa.binary(int(self._next("num")))
        if name == "FixedSizeList":
            size = int(self._next("num"))
            if self._peek() == ",":
                self._next()
            else:
                self._next("word", "x")
            return pa.list_(self._item(), size)
        if name in ("List", "LargeList"):
            return (pa.list_ if name == "List" else pa.large_list)(self._item())
        if name == "Dictionary":
            key = self.parse()
            self._next("punct", ",")
            return pa.dictionary(key, self.parse())
        raise ArrowTypeNameError(self.text)

    def _item(self) -> pa.DataType:
        if self._peek() in ("nullable", "non-null"):  # newer arrow-rs text: List(nullable Int64)
            self._next()
        return self.parse()


def parse_arrow_type_name(text: str) -> pa.DataType:
    """The Arrow type ``text`` names; :class:`ArrowTypeNameError` when it names none."""
    parser = _Parser(text)
    result = parser.parse()
    if parser.at != len(parser.tokens):
        raise ArrowTypeNameError(text)
    return result
