"""File versions 2.1/2.2: where pages are cut and what lies under nulls, byte for byte as pylance.

* pylance's 2.1+ writer makes one page of every flush of a column's accumulation queue, however
  large (its ``max_page_bytes`` applies to 2.0 only; 2.1+ readers split big pages on read);
* fixed-width items, booleans and fixed-size lists keep the bytes Arrow holds under null items and
  null rows (they feed pylance's bit widths), and item validity under null rows is kept as is;
* pages of lists holding empty or null lists are cut into runs of whole rows whose rep and def
  levels fit pylance's mini-block budget (16 KiB of levels at the flush's bit widths).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lance.file import LanceFileReader as PyReader

from lance_format.file import LanceFileReader
from lance_format.file.reader import DataFileReader as EngineReader
from lance_format.io.object_store import ObjectStore
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


@pytest.mark.parametrize("version", VERSIONS)
def test_wide_values_flush_a_page_per_queue_fill(tmp_path: Path, version: str) -> None:
    # 300 batches of one 64 KiB value: pylance flushes once 8 MiB are queued (every 128 rows),
    # however few rows that is; only fields holding a struct keep pages of 256 rows and more
    rng = np.random.default_rng(5)
    batches = [pa.record_batch({"val": pa.array([rng.bytes(64 << 10)], pa.large_binary())}) for _ in range(300)]
    ours = _assert_same_file(tmp_path, version, pa.Table.from_batches(batches))
    assert _page_counts(ours) == [3]


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


def _lists_over_garbage() -> pa.Array:
    # null lists over non-empty offset ranges: pylance filters those items out and keeps the
    # bytes under the null items that remain
    rng = _rng()
    offsets = np.concatenate(([0], np.cumsum(rng.integers(0, 10, N)))).astype(np.int32)
    items = pa.array(rng.integers(0, 100, int(offsets[-1])).astype(np.int32), mask=rng.random(int(offsets[-1])) < 0.1)
    return pa.ListArray.from_arrays(pa.array(offsets), items, mask=_row_mask(rng, N))


UNDER_NULLS: dict[str, Callable[[], pa.Array]] = {
    "vectors with null rows": _vectors(item_nulls=False, row_nulls=True),
    "vectors with null items": _vectors(item_nulls=True, row_nulls=False),
    "vectors with null rows and items": _vectors(item_nulls=True, row_nulls=True),
    "nested fixed-size lists": _nested_lists,
    "byte vectors with null rows": _byte_vectors,
    "boolean vectors with null rows": _bool_vectors,
    "ints": _ints,
    "booleans": _bools,
    "items of lists next to null lists": _lists_over_garbage,
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", list(UNDER_NULLS))
def test_values_under_nulls_are_kept_as_pylance_keeps_them(tmp_path: Path, version: str, kind: str) -> None:
    values = UNDER_NULLS[kind]()
    assert values.null_count or values.values.null_count
    _assert_same_file(tmp_path, version, pa.table({"c": values}))


def _page_rows(path: Path) -> list[list[int]]:
    with EngineReader(ObjectStore(str(path.parent)), path.name) as reader:
        return [[int(page.length) for page in column.pages] for column in reader.metadata.columns]


def _lists(rng: np.random.Generator, rows: int, max_len: int, items: Callable[[int], pa.Array], *,
           empty: bool = True, null_lists: float = 0.0, large: bool = False) -> pa.Array:
    lengths = rng.integers(0 if empty else 1, max_len + 1, rows)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    make = pa.LargeListArray if large else pa.ListArray
    mask = pa.array(rng.random(rows) < null_lists) if null_lists else None
    return make.from_arrays(pa.array(offsets.astype(np.int64 if large else np.int32)), items(int(offsets[-1])),
                            mask=mask)


def _nullable_ints(rng: np.random.Generator) -> Callable[[int], pa.Array]:
    return lambda m: pa.array(rng.integers(0, 100, m).astype(np.int32), mask=rng.random(m) < 0.1)


def _ints(rng: np.random.Generator) -> Callable[[int], pa.Array]:
    return lambda m: pa.array(rng.integers(0, 100, m).astype(np.int32))


# (column, pages pylance writes): cut where 3 bits (rep 1, def 2) or 2 bits of levels pass 16 KiB
LEVEL_CUTS: dict[str, Callable[[np.random.Generator], tuple[pa.Array, int]]] = {
    # the case of issue #13: ~3000 rows of up to 30 nullable items, some lists empty
    "nullable items, empty lists": lambda rng: (_lists(rng, 3000, 30, _nullable_ints(rng)), 2),
    "empty lists": lambda rng: (_lists(rng, 40_000, 3, _ints(rng)), 2),
    "null lists": lambda rng: (_lists(rng, 40_000, 3, _ints(rng), empty=False, null_lists=0.1), 2),
    "null and empty lists, nullable items": lambda rng: (
        _lists(rng, 6000, 30, _nullable_ints(rng), null_lists=0.1), 2),
    "lists of lists": lambda rng: (_lists(rng, 10_000, 4, lambda m: _lists(rng, m, 6, _nullable_ints(rng))), 2),
    "large lists": lambda rng: (_lists(rng, 6000, 30, _nullable_ints(rng), large=True), 3),
    # no empty or null list: never cut, however many levels
    "dense lists": lambda rng: (_lists(rng, 20_000, 10, _nullable_ints(rng), empty=False), 1),
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", list(LEVEL_CUTS))
def test_list_pages_are_cut_by_pylances_level_budget(tmp_path: Path, version: str, kind: str) -> None:
    values, pages = LEVEL_CUTS[kind](np.random.default_rng(5))
    ours = _assert_same_file(tmp_path, version, pa.table({"c": values}))
    assert len(_page_rows(ours)[0]) == pages


@pytest.mark.parametrize("version", VERSIONS)
def test_level_budget_counts_the_kinds_of_levels_the_data_holds(tmp_path: Path, version: str) -> None:
    """Lists of structs: the leaf without nulls has def levels for empty lists only (2 bits a level
    with rep: one page), its nullable neighbour three kinds (3 bits: cut), whatever layers the
    schema declares."""
    rng = np.random.default_rng(9)
    values = _lists(rng, 6000, 20, lambda m: pa.StructArray.from_arrays(
        [pa.array(np.arange(m)), _nullable_ints(rng)(m)], ["a", "b"]))
    ours, theirs = write_file_both(tmp_path, version, pa.table({"c": values}))
    assert _page_rows(ours) == _page_rows(theirs)
    assert [len(rows) for rows in _page_rows(ours)] == [1, 2]
