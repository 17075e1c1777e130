"""Where 2.1/2.2 compactions with ``max_bytes_per_file`` cut files, for the arrays pylance's
decoder builds beyond plain mini-block strings and non-null numbers: ours cut at pylance 14's
rows on tables written by either engine (see
:mod:`lance_format.dataset.maintenance.decoded_memory`)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from types import ModuleType

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.dataset.maintenance.decoded_memory import fragment_batch_plans


def _nullable_numbers(i: int, rows: int) -> pa.Table:
    rng = np.random.default_rng(i)
    j = np.arange(rows)
    return pa.table({
        "i": pa.array(rng.integers(0, 1 << 40, rows), pa.int64(), mask=(j * 7 + i) % 5 == 0),
        "f": pa.array(rng.random(rows), mask=(j * 3 + i) % 4 == 0),
        "t": pa.array(rng.integers(0, 1 << 50, rows), pa.timestamp("us"), mask=j % 9 == 1),
    })


def _write(writer: ModuleType, uri: str, make: Callable[[int, int], pa.Table], fragments: int, rows: int,
           version: str, delete: str | None = None) -> None:
    for i in range(fragments):
        writer.write_dataset(make(i, rows), uri, mode="append", data_storage_version=version)
    if delete is not None:
        writer.dataset(uri).delete(delete)


def _compact(compactor: ModuleType, source: str, uri: str, max_bytes: int) -> list[int]:
    """Compact a copy of ``source`` (compactions of one set of files, as pylance's writer does not
    always lay out pages alike from one run to the next)."""
    shutil.copytree(source, uri)
    expected = compactor.dataset(uri).to_table()
    compactor.dataset(uri).optimize.compact_files(target_rows_per_fragment=10**8, max_bytes_per_file=max_bytes)
    assert compactor.dataset(uri).to_table().equals(expected)
    return [f.physical_rows for f in compactor.dataset(uri).get_fragments()]


def _assert_pylance_cuts(tmp_path, make: Callable[[int, int], pa.Table], fragments: int, rows: int, version: str,
                         delete: str | None = None, max_bytes: int = 1 << 20) -> None:
    """On the files either engine wrote, pylance's compaction and ours cut at the same rows."""
    for writer in (lance, lance_format):
        source = str(tmp_path / f"{writer.__name__}-written")
        _write(writer, source, make, fragments, rows, version, delete)
        theirs = _compact(lance, source, source + "-theirs", max_bytes)
        assert len(theirs) > 1
        assert _compact(lance_format, source, source + "-ours", max_bytes) == theirs


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("column", ["i", "f", "t", None])
def test_nullable_fixed_width_values(tmp_path, version, column):
    """Nullable numbers: the values buffer starts at twice the bytes of the chunks a batch
    touches (no validity bitmap is counted)."""
    def make(i: int, rows: int) -> pa.Table:
        table = _nullable_numbers(i, rows)
        return table if column is None else table.select([column])

    _assert_pylance_cuts(tmp_path, make, 4, 300_000, version)


def _keyed_strings(i: int, rows: int) -> pa.Table:
    k = np.arange(i * rows, (i + 1) * rows)
    return pa.table({"a": pa.array(k * 1000003 % (1 << 40), pa.int64()),
                     "s": pa.array([b"%023d" % (x * 7919) for x in k])})


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("every", [2, 7, 100, 1000])
def test_fragments_with_deletions(tmp_path, version, every):
    """pylance reads a fragment with deletions in batches of 8192 live rows, decoding each run of
    live rows of each chunk on its own: the more runs, the larger the values buffer (dense
    deletions flush a page with every batch, and files are cut by the bytes written)."""
    _assert_pylance_cuts(tmp_path, _keyed_strings, 4, 50_000, version, delete=f"a % {every} = 0")


def test_deletions_in_one_fragment_only(tmp_path):
    """A few deleted rows in the first fragment: its batches, and only its, are read as runs."""
    def make(i: int, rows: int) -> pa.Table:
        table = _keyed_strings(i, rows)
        return table.append_column("n", _nullable_numbers(i, rows)["i"])

    _assert_pylance_cuts(tmp_path, make, 4, 50_000, "2.1",
                         delete=f"a > {1000003 * 20000} AND a < {1000003 * 20010}")


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_batches_spanning_pages(tmp_path, version):
    """pylance writes input of 5000-row batches in many pages, so that scan batches span pages:
    pylance decodes each page's part and concatenates them (buffers of exactly the values' size).
    Files of either engine are cut alike by both."""
    def make(i: int, rows: int) -> pa.Table:
        table = _nullable_numbers(i, rows).select(["i"])
        return pa.Table.from_batches(table.to_batches(max_chunksize=5000))

    theirs_written = str(tmp_path / "theirs_written")
    _write(lance, theirs_written, make, 2, 1_500_000, version)
    ds = lance_format.dataset(theirs_written)
    spanning = [plan for fragment in ds.get_fragments()
                for batch in fragment_batch_plans(fragment, ds.schema, 8192) for column in batch
                for _, _, plan in column if plan is not None and plan[0] is None]
    assert len(spanning) > 20
    _assert_pylance_cuts(tmp_path, make, 2, 1_500_000, version)


def _low_cardinality(i: int, rows: int) -> pa.Table:
    rng = np.random.default_rng(i)
    j = np.arange(rows)
    return pa.table({
        "colour": pa.array(np.array(["red", "green", "blue", "yellowish-long-value"])[rng.integers(0, 4, rows)]),
        "size": pa.array(np.array(["v" * 7, "v" * 4, "v" * 5])[rng.integers(0, 3, rows)], mask=j % 6 == 2),
        "code": pa.array(rng.integers(0, 5, rows) * 1000003, pa.int64()),
    })


@pytest.mark.parametrize("version, column", [
    ("2.1", "colour"), ("2.2", "colour"), ("2.1", "size"), ("2.2", "size"), ("2.2", "code"),  # 2.1: numbers plain
])
def test_dictionary_pages(tmp_path, version, column):
    """Dictionary pages (low-cardinality strings, with nulls too, and numbers in 2.2) decode into
    a buffer first sized for the dictionary's bytes per entry times the batch's rows, and an
    offsets buffer grown one row at a time. With a 1-byte limit each file ends at the first page
    flush, which these sizes place."""
    def make(i: int, rows: int) -> pa.Table:
        return _low_cardinality(i, rows).select([column])

    _assert_pylance_cuts(tmp_path, make, 2, 1_000_000, version, max_bytes=1)


def _lists(i: int, rows: int) -> pa.Table:
    rng = np.random.default_rng(i)
    j = np.arange(rows)
    k = np.arange(i * rows, (i + 1) * rows)
    ints = pa.ListArray.from_arrays(pa.array(np.arange(0, rows * 3 + 1, 3, dtype=np.int32)),
                                    pa.array(np.arange(i * rows * 3, (i + 1) * rows * 3), pa.int64()))
    lengths = rng.integers(0, 8, rows)
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    ragged = pa.ListArray.from_arrays(offsets, pa.array(rng.integers(0, 1 << 30, int(lengths.sum())), pa.int64()),
                                      mask=pa.array(j % 11 == 3))
    n = int(lengths.sum())
    words = pa.ListArray.from_arrays(offsets, pa.array([f"item{x * 31 % 1000003}" for x in range(n)],
                                                       mask=np.arange(n) % 7 == 0))
    return pa.table({"a": pa.array(k * 1000003 % (1 << 40), pa.int64()), "ints": ints, "ragged": ragged,
                     "words": words})


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("column", ["ints", "ragged", "words"])
def test_list_fields(tmp_path, version, column):
    """Lists (of numbers, of strings with null items, null lists): pylance's writer counts the
    decoded items buffer, started at twice the bytes of every chunk a batch touches."""
    def make(i: int, rows: int) -> pa.Table:
        return _lists(i, rows).select([column])

    _assert_pylance_cuts(tmp_path, make, 4, 150_000, version)


def test_list_fields_with_deletions_and_pages_spanned(tmp_path):
    def make(i: int, rows: int) -> pa.Table:
        return pa.Table.from_batches(_lists(i, rows).select(["a", "ints"]).to_batches(max_chunksize=5000))

    _assert_pylance_cuts(tmp_path, make, 3, 200_000, "2.1", delete="a % 7 = 0")


def _structs(i: int, rows: int) -> pa.Table:
    rng = np.random.default_rng(i)
    j = np.arange(rows)
    k = np.arange(i * rows, (i + 1) * rows)
    plain = pa.StructArray.from_arrays([pa.array(k, pa.int64()), pa.array([f"v{x}" for x in range(rows)])], ["x", "y"])
    nullable = pa.StructArray.from_arrays(
        [pa.array(rng.integers(0, 1 << 40, rows), pa.int64(), mask=j % 5 == 1),
         pa.array([b"%019d" % (x * 7919 + i) for x in range(rows)]), pa.array(rng.random(rows))],
        ["x", "y", "z"], mask=pa.array(j % 13 == 4))
    return pa.table({"plain": plain, "nullable": nullable})


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("column", ["plain", "nullable"])
def test_struct_fields(tmp_path, version, column):
    """A struct's leaves are decoded, and counted and flushed by pylance's writer, each on its
    own."""
    def make(i: int, rows: int) -> pa.Table:
        return _structs(i, rows).select([column])

    _assert_pylance_cuts(tmp_path, make, 4, 150_000, version)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("every", [7, 100])
def test_struct_fields_with_deletions(tmp_path, version, every):
    """Deletions make a struct's string leaf flush a page per batch while its number leaves keep
    buffering: pylance writes that leaf's pages alone (every leaf has its own queue), so files
    are cut by the bytes of the string leaf's pages only."""
    def make(i: int, rows: int) -> pa.Table:
        k = np.arange(i * rows, (i + 1) * rows)
        return _structs(i, rows).select(["nullable"]).append_column("a", pa.array(k * 1000003 % (1 << 40), pa.int64()))

    _assert_pylance_cuts(tmp_path, make, 4, 150_000, version, delete=f"a % {every} = 0")


def _nested(i: int, rows: int) -> pa.Table:
    """A struct nesting a struct, a struct holding a list, and a list of structs."""
    rng = np.random.default_rng(i)
    j = np.arange(rows)
    k = np.arange(i * rows, (i + 1) * rows)
    inner = pa.StructArray.from_arrays([pa.array(rng.integers(0, 1 << 40, rows), pa.int64(), mask=j % 5 == 1),
                                        pa.array([b"%019d" % (x * 7919 + i) for x in range(rows)])], ["p", "q"],
                                       mask=pa.array(j % 13 == 4))
    lengths = rng.integers(0, 6, rows)
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    n = int(lengths.sum())
    numbers = pa.ListArray.from_arrays(offsets, pa.array(rng.integers(0, 1 << 30, n), pa.int64()),
                                       mask=pa.array(j % 11 == 3))
    items = pa.StructArray.from_arrays(
        [pa.array(rng.integers(0, 1 << 40, n), pa.int64()),
         pa.array([b"w%015d" % (x * 7 + i) for x in range(n)], mask=np.arange(n) % 9 == 0)], ["x", "y"])
    return pa.table({
        "a": pa.array(k * 1000003 % (1 << 40), pa.int64()),
        "struct_of_struct": pa.StructArray.from_arrays([inner, pa.array(k, pa.int64())], ["inner", "b"]),
        "struct_of_list": pa.StructArray.from_arrays(
            [numbers, pa.array([b"%017d" % (x * 31 + i) for x in range(rows)])], ["numbers", "c"]),
        "list_of_struct": pa.ListArray.from_arrays(offsets, items),
    })


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("column", ["struct_of_struct", "struct_of_list", "list_of_struct"])
@pytest.mark.parametrize("every", [None, 100])
def test_nested_fields(tmp_path, version, column, every):
    """Structs of structs or lists and lists of structs: every leaf is counted as pylance's leaf
    encoder receives it (a nested struct's child, a list's decoded items, a leaf of a list's
    items) and flushed on its own."""
    def make(i: int, rows: int) -> pa.Table:
        return _nested(i, rows).select(["a", column])

    _assert_pylance_cuts(tmp_path, make, 4, 150_000, version, delete=None if every is None else f"a % {every} = 0")
