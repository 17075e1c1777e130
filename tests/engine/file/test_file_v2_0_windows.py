"""Small reads of 2.0 binary pages decode only the rows they need (point lookups, short ranges).

Each case compares windowed reads of pylance- and lance_format-written files with slices of
the fully decoded column, at the start, middle and end of pages, with and without nulls.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lance_format.encodings.array_v2_0 import decode as v2_0_decode
from lance_format.errors import CorruptFileError
from tests.engine.file.test_file_v2_0 import open_ours, read_pylance, write_ours, write_pylance

ROWS = 5000


def _strings(nulls: bool, large: bool = False) -> pa.Array:
    values = [f"value-{i}-" + "x" * (i % 17) for i in range(ROWS)]
    if nulls:
        values = [None if i % 7 == 3 or 2000 <= i < 2100 else v for i, v in enumerate(values)]
    return pa.array(values, pa.large_string() if large else pa.string())


WINDOWS = [[0], [1], [2], [7, 9, 30], [ROWS // 2], [2050], [1999, 2000, 2100], [ROWS - 1], [ROWS - 3, ROWS - 1]]


@pytest.mark.parametrize("writer", ["pylance", "ours"])
@pytest.mark.parametrize("nulls", [False, True])
@pytest.mark.parametrize("large", [False, True])
def test_point_takes_equal_full_decode(tmp_path, writer, nulls, large):
    table = pa.table({"s": _strings(nulls, large), "b": pa.array([str(i).encode() for i in range(ROWS)])})
    rel = (write_pylance if writer == "pylance" else write_ours)(tmp_path, table)
    expected = read_pylance(tmp_path, rel)
    for rows in WINDOWS:
        reader, plans, schema = open_ours(tmp_path, rel)  # fresh reader: no page cached yet
        with reader:
            got = pa.Table.from_arrays(reader.take(plans, np.array(rows)), schema=schema)
        assert got.equals(expected.take(rows)), rows
        for array in got.columns:
            array.validate(full=True)


def test_short_ranges_equal_full_decode(tmp_path):
    table = pa.table({"s": _strings(True)})
    rel = write_pylance(tmp_path, table)
    expected = read_pylance(tmp_path, rel)
    for start, stop in [(0, 1), (0, 100), (5, 6), (1995, 2105), (ROWS - 1, ROWS), (ROWS - 50, ROWS), (10, 10)]:
        reader, plans, schema = open_ours(tmp_path, rel)
        with reader:
            got = pa.Table.from_arrays(reader.read_range(plans, start, stop), schema=schema)
        assert got.equals(expected.slice(start, stop - start)), (start, stop)


def test_windowed_reads_check_offsets(tmp_path, monkeypatch):
    """Offsets that go backwards inside the window are still reported as corruption."""
    table = pa.table({"s": _strings(False)})
    rel = write_ours(tmp_path, table)
    real = v2_0_decode.decode_u64

    def backwards(enc, buffers, length, ctx):
        values = real(enc, buffers, length, ctx).copy()
        values[100] = values[98]  # row 100 now ends before row 99 does
        return values

    monkeypatch.setattr(v2_0_decode, "decode_u64", backwards)
    reader, plans, _ = open_ours(tmp_path, rel)
    with reader, pytest.raises(CorruptFileError, match="offsets"):
        reader.take(plans, np.array([100]))


def test_windowed_reads_are_used_for_point_lookups(tmp_path, monkeypatch):
    """A point lookup must not decode the whole page (the reason the window path exists)."""
    table = pa.table({"s": _strings(True)})
    rel = write_pylance(tmp_path, table)
    windows = []
    real = v2_0_decode._decode_binary

    def spy(enc, buffers, length, data_type, validity, ctx, lo=0, hi=None):
        windows.append((lo, length if hi is None else hi))
        return real(enc, buffers, length, data_type, validity, ctx, lo, hi)

    monkeypatch.setattr(v2_0_decode, "_decode_binary", spy)
    reader, plans, _ = open_ours(tmp_path, rel)
    with reader:
        reader.take(plans, np.array([ROWS // 2]))
    assert windows == [(ROWS // 2, ROWS // 2 + 1)]
