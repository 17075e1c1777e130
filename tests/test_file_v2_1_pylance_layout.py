"""File versions 2.1/2.2: where pages are cut and what lies under nulls, byte for byte as pylance.

* pylance's 2.1+ writer makes one page of every flush of a column's accumulation queue, however
  large (its ``max_page_bytes`` applies to 2.0 only; 2.1+ readers split big pages on read);
* fixed-width items, booleans and fixed-size lists keep the bytes Arrow holds under null items and
  null rows (they feed pylance's bit widths), and item validity under null rows is kept as is;
* a list column's pages are cut where pylance's queue flushes them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lance.file import LanceFileReader as PyReader

from lance_format.file import LanceFileReader
from tests.compat import write_file_both

VERSIONS = ["2.1", "2.2"]
N = 6000


def _page_counts(path: Path) -> list[int]:
    return [len(column.pages) for column in LanceFileReader(str(path)).metadata().columns]


def _assert_same_file(tmp_path: Path, version: str, table: pa.Table) -> Path:
    ours, theirs = write_file_both(tmp_path, version, table)
    assert _page_counts(ours) == _page_counts(theirs)
    assert ours.read_bytes() == theirs.read_bytes()
    assert PyReader(str(ours)).read_all().to_table().equals(table)
    return ours


@pytest.mark.parametrize("version", VERSIONS)
def test_a_string_column_over_32_mib_is_one_page(tmp_path: Path, version: str) -> None:
    # ~36 MiB of strings in one batch: one flush, so one page (FSST off: its tables vary by run)
    ids = pc.utf8_lpad(pa.array(np.arange(1_000_000)).cast(pa.string()), 7, "0")
    urls = pc.binary_join_element_wise("customer-", ids, "@example.com/alpha", "")
    schema = pa.schema([pa.field("url", pa.string(), metadata={"lance-encoding:compression": "none"})])
    table = pa.table({"url": urls}, schema=schema)
    assert table.nbytes > 4 * 8 * 1024 * 1024
    ours = _assert_same_file(tmp_path, version, table)
    assert _page_counts(ours) == [1]


def _rng() -> np.random.Generator:
    return np.random.default_rng(11)


def _row_mask(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array(rng.random(n) < 0.15)


def _vectors(item_nulls: bool, row_nulls: bool) -> Callable[[], pa.Array]:
    def make() -> pa.Array:
        rng = _rng()
        values = rng.standard_normal(N * 4).astype(np.float32)
        items = pa.array(values, mask=rng.random(N * 4) < 0.1 if item_nulls else None)
        return pa.FixedSizeListArray.from_arrays(items, 4, mask=_row_mask(rng, N) if row_nulls else None)
    return make


def _nested_lists() -> pa.Array:
    rng = _rng()
    items = pa.array(rng.integers(0, 1000, N * 6).astype(np.int32), mask=rng.random(N * 6) < 0.1)
    inner = pa.FixedSizeListArray.from_arrays(items, 3, mask=_row_mask(rng, N * 2))
    return pa.FixedSizeListArray.from_arrays(inner, 2, mask=_row_mask(rng, N))


def _byte_vectors() -> pa.Array:
    rng = _rng()
    return pa.FixedSizeListArray.from_arrays(pa.array(rng.integers(0, 255, N * 16).astype(np.uint8)), 16,
                                             mask=_row_mask(rng, N))


def _bool_vectors() -> pa.Array:
    rng = _rng()
    return pa.FixedSizeListArray.from_arrays(pa.array(rng.random(N * 8) < 0.5), 8, mask=_row_mask(rng, N))


def _ints() -> pa.Array:
    rng = _rng()
    # numpy values with a mask: the values under the nulls stay in the Arrow buffer
    return pa.array(rng.integers(0, 1 << 30, N).astype(np.int64), mask=rng.random(N) < 0.2)


def _bools() -> pa.Array:
    rng = _rng()
    return pa.array(rng.random(N) < 0.5, mask=rng.random(N) < 0.2)


UNDER_NULLS: dict[str, Callable[[], pa.Array]] = {
    "vectors with null rows": _vectors(item_nulls=False, row_nulls=True),
    "vectors with null items": _vectors(item_nulls=True, row_nulls=False),
    "vectors with null rows and items": _vectors(item_nulls=True, row_nulls=True),
    "nested fixed-size lists": _nested_lists,
    "byte vectors with null rows": _byte_vectors,
    "boolean vectors with null rows": _bool_vectors,
    "ints": _ints,
    "booleans": _bools,
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", list(UNDER_NULLS))
def test_values_under_nulls_are_kept_as_pylance_keeps_them(tmp_path: Path, version: str, kind: str) -> None:
    values = UNDER_NULLS[kind]()
    assert values.null_count or values.values.null_count
    _assert_same_file(tmp_path, version, pa.table({"c": values}))
