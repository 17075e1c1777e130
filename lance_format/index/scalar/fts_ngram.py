"""The "ngram" base tokenizer of pylance's analyzer: every run of ``min`` to ``max`` characters
of the whole text (spaces and punctuation included), by start then length; with
``prefix_only`` only the runs at the text's start. Computed on the UTF-8 bytes of all documents
at once: character starts are the bytes that are not continuation bytes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def ngrams(texts: pa.Array, min_len: int, max_len: int, prefix_only: bool) -> pa.ListArray:
    """Each document's n-grams (``texts``: large_string without nulls), as a list array."""
    count = len(texts)
    offsets = np.frombuffer(texts.buffers()[1], np.int64)[texts.offset:texts.offset + count + 1]
    data = np.frombuffer(texts.buffers()[2], np.uint8) if texts.buffers()[2] is not None else np.zeros(0, np.uint8)
    first, last = int(offsets[0]), int(offsets[-1])
    data = data[:last]
    char_start = first + np.flatnonzero((data[first:] & 0xC0) != 0x80)
    char_end = np.append(char_start[1:], last)  # documents are contiguous: a character ends where the next starts
    doc = np.searchsorted(offsets, char_start, side="right") - 1
    per_doc = np.bincount(doc, minlength=count)
    rank = np.arange(len(char_start)) - (np.cumsum(per_doc) - per_doc)[doc]
    starts: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    for width in range(int(min_len), int(max_len) + 1):
        ok = rank + width <= per_doc[doc]
        if prefix_only:
            ok &= rank == 0
        chosen = np.flatnonzero(ok)
        starts.append(chosen)
        sizes.append(np.full(len(chosen), width, np.int64))
    start = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    size = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
    order = np.lexsort((size, start))  # by start, then length (tantivy's order)
    start, size = start[order], size[order]
    byte_start = char_start[start]
    byte_len = char_end[start + size - 1] - byte_start
    value_offsets = np.zeros(len(start) + 1, np.int64)
    np.cumsum(byte_len, out=value_offsets[1:])
    gather = np.repeat(byte_start - value_offsets[:-1], byte_len) + np.arange(int(value_offsets[-1]))
    values = pa.LargeStringArray.from_buffers(len(start), pa.py_buffer(value_offsets),
                                              pa.py_buffer(data[gather].tobytes()))
    list_offsets = np.zeros(count + 1, np.int64)
    np.cumsum(np.bincount(doc[start], minlength=count), out=list_offsets[1:])
    return pa.LargeListArray.from_arrays(pa.array(list_offsets), values)
