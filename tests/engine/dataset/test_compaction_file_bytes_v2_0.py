"""Where compactions of 2.0 tables with ``max_bytes_per_file`` cut files: pylance's 2.0 writer
flushes a page once the arrays its legacy decoders built pass 8 MiB of memory, and ours, counting
the same memory, cut at pylance 14's rows on tables written by either engine (see
:mod:`lance_format.dataset.maintenance.decoded_memory_v2_0`). Without that model every case here
is cut one to several batches away from pylance's rows."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.dataset.maintenance.decoded_memory_v2_0 import BatchPlan, batch_bytes
from tests.engine.dataset.test_compaction_file_bytes import _columns
from tests.engine.dataset.test_compaction_file_bytes_decoded import (
    _compact,
    _keyed_strings,
    _lists,
    _low_cardinality,
    _nullable_numbers,
    _write,
)


def _assert_pylance_cuts(tmp_path, make, fragments: int, rows: int, delete: str | None = None,
                         max_bytes: int = 1 << 20) -> None:
    """On the 2.0 files either engine wrote, pylance's compaction and ours cut at the same rows."""
    for writer in (lance, lance_format):
        source = str(tmp_path / f"{writer.__name__}-written")
        _write(writer, source, make, fragments, rows, "2.0", delete)
        theirs = _compact(lance, source, source + "-theirs", max_bytes)
        assert len(theirs) > 1
        assert _compact(lance_format, source, source + "-ours", max_bytes) == theirs


@pytest.mark.parametrize("kind, fragments, rows", [
    ("a", 4, 300_000), ("af", 5, 250_000), ("sn", 6, 60_000), ("w", 6, 100_000),
])
def test_numbers_and_strings(tmp_path, kind, fragments, rows):
    """Numbers are a zero-copy slice of the page (plus the array's struct), strings exact offsets
    and bytes; a validity bitmap counts only in batches holding a null."""
    _assert_pylance_cuts(tmp_path, lambda i, n: _columns(i, n, kind), fragments, rows)


@pytest.mark.parametrize("column", ["i", None])
def test_nullable_numbers(tmp_path, column):
    """Nullable numbers: a 64-byte rounded validity bitmap with each batch holding a null."""
    def make(i: int, rows: int) -> pa.Table:
        table = _nullable_numbers(i, rows)
        return table if column is None else table.select([column])

    _assert_pylance_cuts(tmp_path, make, 4, 300_000)


@pytest.mark.parametrize("every", [100, 1000])
def test_fragments_with_deletions(tmp_path, every):
    """A fragment with deletions is read in batches of 8192 live rows, each live run a fetched
    piece: the values are copied into a Vec that grows to up to twice their bytes."""
    _assert_pylance_cuts(tmp_path, _keyed_strings, 4, 50_000, delete=f"a % {every} = 0")


@pytest.mark.parametrize("numbers, fragments, rows, every", [(True, 4, 150_000, 100), (False, 6, 60_000, 30)])
def test_nullable_columns_with_deletions(tmp_path, numbers, fragments, rows, every):
    """With deletions, a nullable string batch's bitmap is its own (without, the first batch of a
    page copies the page's)."""
    def make(i: int, n: int) -> pa.Table:
        table = _columns(i, n, "w").append_column("a", _keyed_strings(i, n)["a"])
        return table.append_column("i", _nullable_numbers(i, n)["i"]) if numbers else table

    _assert_pylance_cuts(tmp_path, make, fragments, rows, delete=f"a % {every} = 0")


def test_batches_spanning_pages(tmp_path):
    """pylance writes input of 5000-row batches in pages of a few thousand rows, so that scan
    batches span pages: their parts are concatenated by arrow (64-byte rounded buffers)."""
    def make(i: int, rows: int) -> pa.Table:
        table = _nullable_numbers(i, rows).select(["i"]).append_column("w", _columns(i, rows, "w")["w"])
        return pa.Table.from_batches(table.to_batches(max_chunksize=5000))

    _assert_pylance_cuts(tmp_path, make, 2, 600_000)


@pytest.mark.parametrize("column, max_bytes", [("colour", 1), ("size", 1), ("colour", 1 << 20)])
def test_dictionary_pages(tmp_path, column, max_bytes):
    """Low-cardinality strings (dictionary pages) are expanded by arrow's take: exact values and
    offsets, the indices' validity when the batch holds a null."""
    _assert_pylance_cuts(tmp_path, lambda i, n: _low_cardinality(i, n).select([column]), 2, 1_000_000,
                         max_bytes=max_bytes)


@pytest.mark.parametrize("column", ["ints", "ragged", "words"])
def test_list_fields(tmp_path, column):
    """Lists (of numbers, of strings with null items, null lists): the item column counts the
    decoded items."""
    _assert_pylance_cuts(tmp_path, lambda i, n: _lists(i, n).select([column]), 4, 150_000)


def _structs(i: int, rows: int) -> pa.Table:
    """Structs (2.0 stores no struct validity) of numbers and strings, some nullable."""
    rng = np.random.default_rng(i)
    j = np.arange(rows)
    k = np.arange(i * rows, (i + 1) * rows)
    plain = pa.StructArray.from_arrays([pa.array(k, pa.int64()), pa.array([f"v{x}" for x in range(rows)])], ["x", "y"])
    nullable = pa.StructArray.from_arrays(
        [pa.array(rng.integers(0, 1 << 40, rows), pa.int64(), mask=j % 5 == 1),
         pa.array([b"%019d" % (x * 7919 + i) for x in range(rows)]), pa.array(rng.random(rows))], ["x", "y", "z"])
    return pa.table({"plain": plain, "nullable": nullable, "a": pa.array(k * 1000003 % (1 << 40), pa.int64())})


@pytest.mark.parametrize("column, fragments, delete", [
    ("plain", 6, None), ("nullable", 4, None), (None, 4, "a % 100 = 0"),
])
def test_struct_fields(tmp_path, column, fragments, delete):
    """A struct's children are counted each on its own, as pylance's struct encoder queues them."""
    def make(i: int, rows: int) -> pa.Table:
        table = _structs(i, rows)
        return table if column is None else table.select([column])

    _assert_pylance_cuts(tmp_path, make, fragments, 200_000, delete=delete)


def test_copied_values_grow_like_a_vec():
    """Values fetched in several pieces: a copy first sized for the bytes after the first piece's
    part, doubled when short; one piece (or a batch beginning a piece): exactly the bytes. A
    nullable string batch decoded first from its page copies the page's bitmap."""
    ints = pa.array(np.arange(100), pa.int64())
    one_piece = batch_bytes(BatchPlan(1, False, np.array([100]), False), ints)
    assert one_piece == 800 + 96
    # pieces of 10 and 90 rows: Vec of 720 bytes, 80 then 800 needed -> max(1440, 800)
    assert batch_bytes(BatchPlan(1, False, np.array([10, 90]), False), ints) == 1440 + 96
    assert batch_bytes(BatchPlan(1, False, np.array([10, 90]), True), ints) == 800 + 96
    # spanning pages: arrow's concat, 64-byte rounded, with validity when a null is present
    nullable = pa.array([1, None] * 50, pa.int64())
    assert batch_bytes(BatchPlan(2, False, np.array([100]), False), nullable) == 832 + 64 + 96
    words = pa.array(["ab", None] * 50)
    alone = 100 + 101 * 4 + 13 + 120
    assert batch_bytes(BatchPlan(1, False, np.array([100]), False), words) == alone
    # a page of 1000 rows: its 125-byte bitmap copied into a 13-byte Vec -> max(26, 125)
    assert batch_bytes(BatchPlan(1, False, np.array([100]), False, 1000), words) == alone - 13 + 125


@pytest.mark.parametrize("column", ["ints", "ragged"])
def test_list_items_with_deletions(tmp_path, column):
    """With deletions, each run of live lists fetches its items as one piece: the items of a batch
    are copied into a growing Vec, like a top-level column's values; pylance's items of null
    lists include those stored under them."""
    _assert_pylance_cuts(tmp_path, lambda i, n: _lists(i, n).select(["a", column]), 4, 150_000,
                         delete="a % 100 = 0")
