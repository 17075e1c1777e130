"""The lenient JSON grammar pylance 14 accepts for ``arrow.json`` documents (its ``jsonb`` parser's
"extended" mode), for the documents a strict JSON parser refuses.

What it accepts beyond JSON, and what it makes of it:

- an empty or blank document: ``null``;
- ``null``/``true``/``false``/``nan``/``infinity`` in any letter case; ``+`` before numbers,
  ``NaN`` and ``Infinity`` (``-NaN`` is refused); leading zeros (``007`` is 7); a fraction
  without digits on one side (``.5``, ``1.`` -- which stays the integer 1); hexadecimal
  integers with an optional hexadecimal fraction (``0x1F``, ``-0x10``, ``0x1.8`` = 1.5);
- strings in single quotes; object keys in single quotes or unquoted (letters, digits, ``_``,
  ``$`` and non-ASCII characters, not starting with a digit); ``\\u{XXXX}`` escapes;
- empty array elements, which are nulls (``[1,,2]``, ``[1,]``, ``[,]``) -- but no trailing
  comma in objects;
- between tokens, besides JSON's whitespace: form feed and the two-character texts ``\\n``,
  ``\\r``, ``\\t`` and the four-character ``\\x0C``.

A lone UTF-16 surrogate escape (``"\\uD83D"``) is kept as its six characters of text, as
written, and so is the escape after a high surrogate that is not a low one. Duplicate object
keys are refused. The parser reads the document's UTF-8 bytes, one value at a time.
"""

from __future__ import annotations

import math
from typing import Any

from lance_format.errors import InvalidInputError

_WHITESPACE = frozenset(b" \t\n\x0c\r")
_DIGITS = frozenset(b"0123456789")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = {ord("\\"): "\\", ord('"'): '"', ord("/"): "/", ord("b"): "\b", ord("f"): "\f", ord("n"): "\n",
                   ord("r"): "\r", ord("t"): "\t"}
_U64_MAX = 2**64 - 1
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_EXACT_DIGITS = 38  # up to this many significant digits an integer is read exactly; beyond, as a float


class _Refused(Exception):
    """A document the grammar refuses (``reason`` at byte ``position``)."""

    def __init__(self, reason: str, position: int) -> None:
        super().__init__(f"{reason}, pos {position}")


class _Parser:
    def __init__(self, data: bytes) -> None:
        self.buf = data
        self.i = 0

    # -- bytes -------------------------------------------------------------------------------------
    def peek(self) -> int | None:
        return self.buf[self.i] if self.i < len(self.buf) else None

    def next(self) -> int:
        if self.i >= len(self.buf):
            raise _Refused("EOF while parsing a value", self.i)
        return self.buf[self.i]

    def refuse(self, reason: str) -> _Refused:
        return _Refused(reason, self.i)

    def word(self, lower: bytes) -> None:
        """The letters of ``lower`` in any case (each letter consumed even when it differs)."""
        for expected in lower:
            c = self.next()
            self.i += 1
            if c not in (expected, expected - 32):
                raise self.refuse("expected ident")

    def skip_unused(self) -> None:
        buf, n = self.buf, len(self.buf)
        while self.i < n:
            c = buf[self.i]
            if c in _WHITESPACE:
                self.i += 1
            elif c == 0x5C and self.i + 1 < n and buf[self.i + 1] in b"nrt":
                self.i += 2
            elif c == 0x5C and buf[self.i + 1:self.i + 4] == b"x0C" and self.i + 3 < n:
                self.i += 4
            else:
                return

    # -- values ------------------------------------------------------------------------------------
    def document(self) -> Any:
        value = self.value()
        self.skip_unused()
        if self.i < len(self.buf):
            self.i += 1
            raise self.refuse("trailing characters")
        return value

    def value(self) -> Any:
        self.skip_unused()
        c = self.peek()
        if c is None:
            return None  # an empty value is null
        if c in b"nN":
            start = self.i
            try:
                self.word(b"null")
                return None
            except _Refused:
                self.i = start
                self.word(b"nan")
                return math.nan
        if c in b"tT":
            self.word(b"true")
            return True
        if c in b"fF":
            self.word(b"false")
            return False
        if c in b"iI":
            self.word(b"infinity")
            return math.inf
        if c in _DIGITS or c in b"-+.":
            return self.number()
        if c in b"\"'":
            self.i += 1
            return self.quoted(c)
        if c == ord("["):
            return self.array()
        if c == ord("{"):
            return self.object()
        self.i += 1
        raise self.refuse("expected value")

    def digits(self, allowed: frozenset[int]) -> int:
        start, buf, n = self.i, self.buf, len(self.buf)
        while self.i < n and buf[self.i] in allowed:
            self.i += 1
        return self.i - start

    def number(self) -> int | float:
        start = self.i
        c = self.next()
        negative = c == ord("-")
        if c in b"+-":
            self.i += 1
        zeros = self.digits(frozenset(b"0"))
        significant = fraction = 0
        has_fraction = False
        while True:
            ahead = self.peek()
            if ahead is not None and ahead in _DIGITS:
                significant += 1
                fraction += has_fraction
                self.i += 1
            elif ahead == ord("."):
                if has_fraction:
                    raise self.refuse("invalid number")
                has_fraction = True
                self.i += 1
            else:
                break
        if zeros == 0 and significant == 0:
            ahead = self.peek()
            if not has_fraction and ahead is not None and ahead in b"iI":
                self.word(b"infinity")
                return -math.inf if negative else math.inf
            if not has_fraction and ahead is not None and ahead in b"nN":
                self.word(b"nan")
                if negative:
                    raise self.refuse("invalid number")
                return math.nan
            raise self.refuse("invalid number")
        if zeros == 1 and significant == 0 and not has_fraction and self.peek() in (ord("x"), ord("X")):
            return self.hexadecimal(negative)
        has_exponent = self.peek() in (ord("e"), ord("E"))
        if has_exponent:
            self.i += 1
            if self.peek() in (ord("+"), ord("-")):
                self.i += 1
            if not self.digits(_DIGITS):
                raise self.refuse("invalid number")
        text = self.buf[start:self.i].decode("ascii")
        if not has_exponent and significant <= _EXACT_DIGITS and fraction == 0:
            value = int(text.replace(".", "") or "0")  # "1." is the integer 1
            if 0 <= value <= _U64_MAX or _I64_MIN <= value <= _I64_MAX:
                return value
        return float(text)

    def hexadecimal(self, negative: bool) -> int | float:
        self.i += 1  # the x
        start = self.i
        if not self.digits(_HEX):
            raise self.refuse("invalid number")
        whole = int(self.buf[start:self.i], 16)
        if whole >= 2**128:
            raise self.refuse("invalid number")
        if self.peek() == ord("."):
            self.i += 1
            begin = self.i
            length = self.digits(_HEX)
            if not length:
                raise self.refuse("invalid number")
            part = int(self.buf[begin:self.i], 16)
            if part >= 2**128:
                raise self.refuse("invalid number")
            value = float(whole) + float(part) / 16.0**length
            return -value if negative else value
        if negative:
            if whole <= _I64_MAX + 1:
                return -whole if whole <= _I64_MAX else _I64_MIN
            return -float(whole)
        return whole if whole <= _U64_MAX else float(whole)

    # -- strings -----------------------------------------------------------------------------------
    def quoted(self, quote: int) -> str:
        """The string after an opening ``quote``: first its end (an escape skips the character
        after the backslash, and ``\\u`` four more, or six for ``\\u{``), then its escapes."""
        start, escapes = self.i, 0
        while True:
            c = self.next()
            if c == 0x5C:
                self.i += 1
                escapes += 1
                if self.next() == ord("u"):
                    self.i += 1
                    self.i += 6 if self.next() == ord("{") else 4
                else:
                    self.i += 1
            else:
                self.i += 1
                if c == quote:
                    break
        data = self.buf[start:self.i - 1]
        if not escapes:
            return data.decode("utf-8")
        return self.unescape(data)

    def unescape(self, data: bytes) -> str:
        out: list[str] = []
        plain = bytearray()
        pos, n = 0, len(data)
        while pos < n:
            c = data[pos]
            if c != 0x5C:
                plain.append(c)
                pos += 1
                continue
            out.append(plain.decode("utf-8"))
            plain = bytearray()
            pos += 1
            if pos >= n:
                raise self.refuse("unexpected end of hex escape")
            kind = data[pos]
            pos += 1
            if kind in _SIMPLE_ESCAPES:
                out.append(_SIMPLE_ESCAPES[kind])
                continue
            if kind != ord("u"):
                raise self.refuse(f"invalid escaped '{kind:x}'")
            digits, pos = self.unicode_escape(data, pos)
            code = int(digits, 16)
            if 0xDC00 <= code <= 0xDFFF:
                out.append("\\u" + digits)
            elif 0xD800 <= code <= 0xDBFF:
                if data[pos:pos + 2] != b"\\u":
                    out.append("\\u" + digits)
                    continue
                low_digits, pos = self.unicode_escape(data, pos + 2)
                low = int(low_digits, 16)
                if 0xDC00 <= low <= 0xDFFF:
                    out.append(chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)))
                else:
                    out.append("\\u" + digits + "\\u" + low_digits)
            else:
                out.append(chr(code))
        out.append(plain.decode("utf-8"))
        return "".join(out)

    def unicode_escape(self, data: bytes, pos: int) -> tuple[str, int]:
        """The four hex digits of a ``\\u`` escape at ``pos`` (``XXXX`` or ``{XXXX}``), and the end."""
        if len(data) - pos < 4:
            raise self.refuse("unexpected end of hex escape")
        if data[pos] == ord("{"):
            if len(data) - pos < 6 or data[pos + 5] != ord("}"):
                raise self.refuse("unexpected end of hex escape")
            digits, end = data[pos + 1:pos + 5], pos + 6
        else:
            digits, end = data[pos:pos + 4], pos + 4
        if any(d not in _HEX for d in digits):
            raise self.refuse("invalid hex")
        return digits.decode("ascii"), end

    def unquoted_key(self) -> str:
        start = self.i
        if self.next() in _DIGITS:
            self.i += 1
            raise self.refuse("object attribute name cannot start with a number")
        while True:
            c = self.next()
            if c < 0x80 and (chr(c).isalnum() or c in b"_$"):
                self.i += 1
            elif c >= 0xF0:
                self.i += 4
            elif c >= 0xE0:
                self.i += 3
            elif c >= 0xC0:
                self.i += 2
            elif c >= 0x80:
                raise self.refuse("object attribute name has an invalid character")
            else:
                break
        if self.i == start:
            raise self.refuse("object attribute name cannot be empty")
        try:
            return self.buf[start:self.i].decode("utf-8")
        except UnicodeDecodeError:
            raise self.refuse("invalid string value") from None

    # -- containers --------------------------------------------------------------------------------
    def array(self) -> list[Any]:
        self.i += 1
        items: list[Any] = []
        first = True
        while True:
            self.skip_unused()
            c = self.next()
            if c == ord("]"):
                self.i += 1
                return items
            if not first:
                if c != ord(","):
                    raise self.refuse("expected `,` or `]`")
                self.i += 1
            first = False
            self.skip_unused()
            items.append(None if self.peek() in (ord(","), ord("]")) else self.value())

    def object(self) -> dict[str, Any]:
        self.i += 1
        members: dict[str, Any] = {}
        first = True
        while True:
            self.skip_unused()
            c = self.next()
            if c == ord("}"):
                self.i += 1
                return members
            if not first:
                if c != ord(","):
                    raise self.refuse("expected `,` or `}`")
                self.i += 1
            first = False
            self.skip_unused()
            c = self.next()
            if c in b"\"'":
                self.i += 1
                key = self.quoted(c)
            else:
                key = self.unquoted_key()
            self.skip_unused()
            if self.next() != ord(":"):
                raise self.refuse("expected `:`")
            self.i += 1
            value = self.value()
            if key in members:
                raise self.refuse(f"duplicate object attribute {key!r}")
            members[key] = value


def parse_lenient(text: str) -> Any:
    """The value of a JSON document in pylance's lenient grammar (see the module docstring).

    Raises
    ------
    InvalidInputError
        The grammar refuses the document.
    """
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidInputError(f"Failed to encode JSON: {err}") from None
    try:
        return _Parser(data).document()
    except _Refused as err:
        raise InvalidInputError(f"Failed to encode JSON: {err}") from None
    except UnicodeDecodeError as err:
        raise InvalidInputError(f"Failed to encode JSON: invalid string value: {err}") from None
    except RecursionError:
        raise InvalidInputError("Failed to encode JSON: the document is nested too deeply") from None


__all__ = ["parse_lenient"]
