"""The compiled FSST decoder of mini-block chunks (``numba_kernels.fsst_chunks``) against the
exact string-by-string kernel, the numpy decoder and pylance.

The fast kernel decodes each chunk as one run of codes, 8 codes per step, and reads the string
offsets from a table of output positions; these tests aim at what that can get wrong: escapes
(255) at every position of an 8-byte step and before string ends, 8-byte symbols, empty strings
and chunks, chunk and page boundaries, unknown codes, and corrupt offsets (the kernel must name
the same first error as the exact one).
"""

from __future__ import annotations

import os
import struct

import numpy as np
import pyarrow as pa
import pytest

from lance_format.encodings.structural import fsst
from lance_format.encodings.structural.blocks import to_arrow
from lance_format.errors import CorruptFileError
from tests.engine.file.test_file_v2_1_read_units import CTX, fsst_chunk_page, symbol_table

numba_kernels = pytest.importorskip("lance_format.encodings.structural.numba_kernels")


def table_of(symbols: list[bytes]) -> fsst.SymbolTable:
    return fsst.parse_symbol_table(symbol_table(symbols), CTX)


def kernel_args(table: fsst.SymbolTable, chunks: list[list[bytes]], width: int):
    buf, starts, sizes, counts = fsst_chunk_page(chunks, width)
    return buf, starts[:, 0], sizes[:, 0], counts, width, table.words, table.lengths, table.count


def decode(table: fsst.SymbolTable, chunks: list[list[bytes]], width: int = 4) -> list[bytes] | int:
    """The fast kernel's strings (checked against the exact kernel's), or its error status."""
    args = kernel_args(table, chunks, width)
    status, data, offsets = numba_kernels.fsst_chunks(*args)
    exact_status, exact_data, exact_offsets = numba_kernels._fsst_chunks_exact(*args)
    assert status == exact_status
    if status != numba_kernels.OK:
        return int(status)
    assert np.array_equal(data, exact_data) and np.array_equal(offsets, exact_offsets)
    return [bytes(data[a:b]) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


SYMBOLS = [b"a", b"bc", b"def", b"ghij", b"klmno", b"pqrstu", b"vwxyz01", b"23456789", b"\xff\xfe"]


def expand(codes: bytes) -> bytes:
    """What a code string decodes to under SYMBOLS (the reference for these tests)."""
    out, j = b"", 0
    while j < len(codes):
        if codes[j] == 255:
            out += codes[j + 1 : j + 2]
            j += 2
        else:
            out += SYMBOLS[codes[j]]
            j += 1
    return out


@pytest.mark.parametrize("width", [4, 8])
def test_escapes_at_every_position_of_a_step(width):
    table = table_of(SYMBOLS)
    strings = []
    for at in range(12):
        for literal in (0, 7, 255):
            codes = bytearray([7, 6, 5, 4, 3, 2, 1, 0, 8, 7, 6, 5])
            codes[at:at] = bytes([255, literal])  # an escape at byte `at` of the string
            strings.append(bytes(codes))
    strings += [bytes([255, 255] * 9), bytes([255, 255, 255, 1, 7] * 3), b"", bytes([7] * 8), bytes([7] * 17)]
    assert decode(table, [strings], width) == [expand(s) for s in strings]
    # the same strings cut into chunks of every size
    for size in (1, 2, 3, 5, 8):
        chunks = [strings[i : i + size] for i in range(0, len(strings), size)]
        assert decode(table, chunks, width) == [expand(s) for s in strings]


def test_short_strings_empty_strings_and_chunks():
    table = table_of(SYMBOLS)
    strings = [b"", bytes([0]), b"", bytes([7]), bytes([255, 65]), b"", bytes([1, 2]), b"", b""]
    assert decode(table, [strings]) == [expand(s) for s in strings]
    assert decode(table, [[b""], [], [bytes([7, 8])], [b"", b""]]) == [b"", b"23456789\xff\xfe", b"", b""]
    assert decode(table, [[bytes([3])]]) == [b"ghij"]  # a page of one value
    assert decode(table, [[]]) == []
    # a symbol table of 255 symbols: every code below the escape is a symbol
    full = table_of([bytes([i % 250 + 1]) * (i % 8 + 1) for i in range(255)])
    codes = bytes(range(255)) * 3
    status, data, offsets = numba_kernels.fsst_chunks(*kernel_args(full, [[codes, codes[:5]]], 4))
    assert status == numba_kernels.OK
    expected = b"".join(bytes([i % 250 + 1]) * (i % 8 + 1) for i in list(range(255)) * 3 + list(range(5)))
    assert bytes(data) == expected and offsets.tolist() == [0, len(expected) - 15, len(expected)]


@pytest.mark.parametrize("width", [4, 8])
def test_errors_are_the_exact_kernels(width):
    table = table_of(SYMBOLS)
    ok = [bytes([1] * 9), bytes([255, 9, 2]), b""]
    assert decode(table, [ok, ok], width) == [expand(s) for s in ok] * 2
    # the string-ending escape: at the end of a string, of a chunk, inside an 8-code step
    assert decode(table, [[bytes([1, 255]), bytes([1])]], width) == numba_kernels.ENDS_WITH_ESCAPE
    assert decode(table, [ok, [bytes([1] * 7 + [255])]], width) == numba_kernels.ENDS_WITH_ESCAPE
    assert decode(table, [[bytes([1, 2, 255]), bytes([1] * 9)]], width) == numba_kernels.ENDS_WITH_ESCAPE
    # a literal 255 ending a string is no escape
    assert decode(table, [[bytes([255, 255]), bytes([1])]], width) == [b"\xff", b"bc"]
    assert decode(table, [[bytes([1] * 8 + [9])]], width) == numba_kernels.UNKNOWN_CODE
    for at in range(10):  # an unknown code at every position of an 8-code step and after it
        codes = [1] * 10
        codes[at] = 9
        assert decode(table, [ok, [bytes(codes)]], width) == numba_kernels.UNKNOWN_CODE
    assert decode(table, [[bytes([1, 255]), bytes([9])]], width) == numba_kernels.ENDS_WITH_ESCAPE


@pytest.mark.parametrize("width", [4, 8])
def test_fuzzed_chunks_match_the_exact_kernel_and_numpy(width):
    """Random code strings (valid and corrupt) and random byte flips of whole pages: the fast
    kernel agrees with the exact one on every status and byte, and with the numpy decoder."""
    from lance_format.encodings.structural.chunk_codecs import FsstChunks, VariableChunks

    rng = np.random.default_rng(7)
    for trial in range(300):
        count = int(rng.choice([1, 9, 200, 255]))
        symbols = [bytes(rng.integers(0, 256, int(rng.integers(1, 9)), np.uint8)) for _ in range(count)]
        table = table_of(symbols)
        alphabet = np.array(list(range(min(count, 12))) + [255] * 3 + [count], np.uint8)
        chunks = [[bytes(rng.choice(alphabet, int(rng.integers(0, 30)))) for _ in range(int(rng.integers(0, 40)))]
                  for _ in range(int(rng.integers(1, 5)))]
        args = list(kernel_args(table, chunks, width))
        if trial % 3 == 0:  # corrupt the page itself: offsets too
            buf = args[0].copy()
            for at in rng.integers(0, len(buf), int(rng.integers(1, 4))):
                buf[at] = rng.integers(0, 256)
            args[0] = buf
        fast = numba_kernels.fsst_chunks(*args)
        exact = numba_kernels._fsst_chunks_exact(*args)
        assert fast[0] == exact[0], trial
        if fast[0] != numba_kernels.OK:
            continue
        assert np.array_equal(fast[1], exact[1]) and np.array_equal(fast[2], exact[2]), trial
        from lance_format.encodings.structural import accel

        accel.use_compiled(False)
        try:
            codec = FsstChunks(table, VariableChunks(width * 8))
            numpy_block = codec.decode(args[0], args[1][:, None], args[2][:, None], args[3], CTX)
        finally:
            accel.use_compiled(None)
        assert to_arrow(numpy_block, pa.binary(), None, CTX).to_pylist() == [
            bytes(fast[1][a:b]) for a, b in zip(fast[2][:-1].tolist(), fast[2][1:].tolist())], trial


def test_fuzzed_runs_match_the_string_by_string_decoder():
    """``decompress`` (full-zip pages and takes: the codes of all strings in one run) against
    the string-by-string decoder, on valid and corrupt code strings."""
    rng = np.random.default_rng(8)
    for trial in range(300):
        count = int(rng.choice([1, 9, 200, 255]))
        table = table_of([bytes(rng.integers(0, 256, int(rng.integers(1, 9)), np.uint8)) for _ in range(count)])
        alphabet = np.array(list(range(min(count, 12))) + [255] * 3 + [count], np.uint8)
        strings = [bytes(rng.choice(alphabet, int(rng.integers(0, 30)))) for _ in range(int(rng.integers(0, 40)))]
        codes = np.frombuffer(b"".join(strings), np.uint8).copy()
        bounds = np.cumsum([0] + [len(x) for x in strings]).astype(np.int64)
        fast = numba_kernels.decompress(codes, bounds, table.words, table.lengths, table.count)
        exact = numba_kernels._decode_ranges(codes, bounds[:-1], bounds[1:], table.words, table.lengths, table.count)
        assert fast[0] == exact[0], trial
        if fast[0] == numba_kernels.OK:
            assert np.array_equal(fast[1], exact[1]) and np.array_equal(fast[2], exact[2]), trial


def test_pylance_files_read_identically(tmp_path):
    """Files pylance writes (strings with nulls and empties, binaries with 255 bytes, lists of
    strings, a one-row page): the compiled decoder reads what pylance reads."""
    if os.environ.get("LANCE_FORMAT_JIT") == "0":
        pytest.skip("LANCE_FORMAT_JIT=0 keeps the numpy code")
    import lance

    import lance_format
    from lance_format.encodings.structural import accel

    rng = np.random.default_rng(11)
    n = 30000
    words = np.array(["alpha", "bravo", "charlie-delta-echo", "", "x" * 40, "ünïcödé", "23456789" * 3])
    text = pa.array([f"{words[a]} {words[b]}-{i}" for i, (a, b) in enumerate(rng.integers(0, len(words), (n, 2)))])
    with_nulls = pa.array([None if i % 3 == 0 else ("" if i % 5 == 0 else f"user{i % 977}@example.com")
                           for i in range(n)])
    raw = pa.array([bytes(rng.integers(200, 256, int(rng.integers(0, 24)), np.uint8)) + b"\xff" * (i % 3)
                    for i in range(n)], pa.binary())
    tags = pa.ListArray.from_arrays(pa.array(np.arange(0, 2 * n + 1, 2, dtype=np.int32)),
                                    pa.array(words[rng.integers(0, len(words), 2 * n)]))
    table = pa.table({"text": text, "with_nulls": with_nulls, "raw": raw, "tags": tags})
    lance.write_dataset(table, tmp_path / "big", data_storage_version="2.2")
    lance.write_dataset(table.slice(0, 1), tmp_path / "one", data_storage_version="2.2")
    accel.use_compiled(True)
    try:
        assert accel.kernels() is not None
        for name in ("big", "one"):
            expected = lance.dataset(tmp_path / name).to_table()
            assert lance_format.dataset(tmp_path / name).to_table().equals(expected), name
        rows = sorted(rng.choice(n, 500, replace=False).tolist())
        assert lance_format.dataset(tmp_path / "big").take(rows).equals(lance.dataset(tmp_path / "big").take(rows))
    finally:
        accel.use_compiled(None)


def test_corrupt_chunks_raise_the_typed_error():
    from lance_format.encodings.structural import accel
    from lance_format.encodings.structural.chunk_codecs import FsstChunks, VariableChunks

    table = table_of(SYMBOLS)
    buf, starts, sizes, counts = fsst_chunk_page([[bytes([1] * 9), bytes([1, 255])]], 4)
    accel.use_compiled(True)
    try:
        with pytest.raises(CorruptFileError, match="escape"):
            FsstChunks(table, VariableChunks(32)).decode(buf, starts, sizes, counts, CTX)
    finally:
        accel.use_compiled(None)


def _chunk(num_levels: int, level_sizes: list[int], buffer_sizes: list[int], size_bytes: int) -> bytes:
    """A mini-block chunk: header, then levels and value buffers (each padded to 8)."""
    head = struct.pack("<H", num_levels) + b"".join(struct.pack("<H", z) for z in level_sizes)
    head += b"".join(struct.pack("<I" if size_bytes == 4 else "<H", z) for z in buffer_sizes)
    body = b"".join(bytes([7]) * z + b"\0" * (-z % 8) for z in level_sizes + buffer_sizes)
    return head + b"\0" * (-len(head) % 8) + body


@pytest.mark.parametrize("has_rep, has_def, size_bytes, num_buffers",
                         [(False, False, 4, 1), (True, False, 4, 2), (False, True, 2, 1), (True, True, 4, 3)])
def test_chunk_headers_match_the_numpy_parse(has_rep, has_def, size_bytes, num_buffers):
    """The compiled header parse of mini-block chunks gives the numpy parse's fields and
    refuses the same truncated chunks with the same errors."""
    from types import SimpleNamespace

    from lance_format.encodings.structural import accel
    from lance_format.encodings.structural.miniblock import MiniBlockPage

    rng = np.random.default_rng(1)
    levels = int(has_rep) + int(has_def)
    chunks = [_chunk(int(rng.integers(0, 500)), rng.integers(0, 40, levels).tolist(),
                     rng.integers(0, 300, num_buffers).tolist(), size_bytes) for _ in range(9)]
    buf = np.frombuffer(b"".join(chunks), np.uint8)
    ends = np.cumsum([len(c) for c in chunks]).astype(np.int64)
    starts = ends - [len(c) for c in chunks]
    page = SimpleNamespace(rep_codec=object() if has_rep else None, def_codec=object() if has_def else None,
                           large=size_bytes == 4, num_buffers=num_buffers, ctx=CTX)

    def parse(compiled: bool, stops: np.ndarray):
        accel.use_compiled(compiled)
        try:
            return MiniBlockPage._headers(page, buf, starts, stops)
        finally:
            accel.use_compiled(None)

    fast, slow = parse(True, ends), parse(False, ends)
    for a, b in zip(fast, slow):
        assert (a is None and b is None) or np.array_equal(a, b)
    assert fast[0].sum() > 0 and fast[5].shape == (9, num_buffers)
    for stops, message in ((starts + 2, "shorter than its header"), (ends - 8, "run past the end")):
        for compiled in (True, False):
            with pytest.raises(CorruptFileError, match=message):
                parse(compiled, stops)
