"""The ``details`` dict ``describe_indices`` shows for an INVERTED index, decoded from its
``lance.table.InvertedIndexDetails`` message with pylance's keys and defaults."""

from __future__ import annotations

import json
from typing import Any

_BOOLS = {3: "with_position", 5: "lower_case", 6: "stem", 7: "remove_stop_words", 8: "ascii_folding",
          11: "prefix_only"}
_CODE = {1: "split_identifiers", 2: "split_on_numerics", 3: "preserve_original", 4: "index_operators"}


def _fields(data: bytes) -> dict[int, int | bytes]:
    """Varint (wire type 0) and length-delimited (2) fields; other wire types end the scan."""
    out: dict[int, int | bytes] = {}
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while pos < len(data):
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        return result

    while pos < len(data):
        key = varint()
        if key & 7 == 0:
            out[key >> 3] = varint()
        elif key & 7 == 2:
            size = varint()
            out[key >> 3] = data[pos:pos + size]
            pos += size
        else:
            break
    return out


def describe_inverted(data: bytes) -> dict[str, Any]:
    f = _fields(data)
    raw_language = f.get(2, b'"English"')
    language: Any
    try:
        language = json.loads(bytes(raw_language).decode()) if raw_language else "English"  # type: ignore[arg-type]
    except ValueError:
        language = bytes(raw_language).decode(errors="replace")  # type: ignore[arg-type]
    code = _fields(bytes(f[13])) if isinstance(f.get(13), bytes) else {}
    out: dict[str, Any] = {"lance_tokenizer": None,
                           "base_tokenizer": bytes(f.get(1, b"simple")).decode(),  # type: ignore[arg-type]
                           "language": language}
    for number, key in _BOOLS.items():
        out[key] = bool(f.get(number, 0))
    out["max_token_length"] = f.get(4)
    out["custom_stop_words"] = None
    out["min_ngram_length"] = f.get(9, 0)
    out["max_ngram_length"] = f.get(10, 0)
    out["block_size"] = f.get(12, 128)
    for number, key in _CODE.items():
        out[key] = bool(code.get(number, 0))
    out["document_granularity"] = "list_element" if f.get(14) == 1 else "row"
    return out
