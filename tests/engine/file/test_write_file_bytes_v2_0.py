"""``write_dataset(max_bytes_per_file=...)`` of 2.0 tables, against pylance 14: its writer counts
the arrays it receives from Python at the memory arrow-rs gives them when importing them through
the C data interface (a buffer runs from its start to the array's last row, so a slice of a big
table counts the rows before it too; a struct's children and a list's items count whole), flushes
a page once a column's arrays pass 8 MiB, and breaks the stream where its rows reach multiples of
``max_rows_per_file``. Ours cut the same files with the same pages."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.file.reader import LanceFileReader
from tests.engine.dataset.test_compaction_file_bytes import _columns
from tests.engine.dataset.test_compaction_file_bytes_decoded import _lists, _low_cardinality, _nullable_numbers


def _layout(uri: str) -> list[tuple[int, list[list[int]]]]:
    """Each fragment's rows and each column's page lengths."""
    ds = lance_format.dataset(uri)
    out = []
    for fragment in ds.get_fragments():
        reader = LanceFileReader(ds.object_store, "data/" + fragment.proto.files[0].path)
        out.append((fragment.physical_rows, [[p.length for p in c.pages] for c in reader.metadata.columns]))
    return out


def _sliced(table: pa.Table, rows: int) -> pa.Table:
    """``table`` as zero-copy slices of ``rows`` rows (what ``to_batches(max_chunksize=...)`` gives)."""
    return pa.Table.from_batches(table.to_batches(max_chunksize=rows))


def _structs(rows: int) -> pa.Table:
    return pa.table({"p": pa.StructArray.from_arrays(
        [pa.array(np.arange(rows)), pa.array(np.random.default_rng(0).random(rows))], ["x", "y"])})


SHAPES: dict[str, Callable[[], pa.Table]] = {
    "numbers": lambda: _sliced(_columns(0, 2_000_000, "a"), 5000),
    "nullable_numbers": lambda: _sliced(_nullable_numbers(0, 1_500_000).select(["i"]), 50_000),
    "strings": lambda: _sliced(_columns(0, 600_000, "s"), 20_000),
    "nullable_strings": lambda: _sliced(_columns(0, 800_000, "w"), 20_000),
    "lists": lambda: _sliced(_lists(0, 600_000), 20_000),
    "structs": lambda: _sliced(_structs(1_500_000), 20_000),
    "dictionary_like": lambda: _sliced(_low_cardinality(0, 2_000_000), 50_000),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_files_and_pages_like_pylance(tmp_path, shape):
    table = SHAPES[shape]()

    def written(engine: ModuleType) -> list[tuple[int, list[list[int]]]]:
        uri = str(tmp_path / engine.__name__)
        engine.write_dataset(table, uri, max_bytes_per_file=1 << 20, data_storage_version="2.0")
        assert engine.dataset(uri).to_table().equals(table)
        return _layout(uri)

    theirs = written(lance)
    assert len(theirs) > 2
    assert written(lance_format) == theirs


def test_stream_broken_at_multiples_of_max_rows_per_file(tmp_path):
    """After files cut by bytes, a batch crossing the stream's 1 MiRows mark is still split
    there (pylance's break_stream), which a byte cut then follows."""
    table = _sliced(_columns(0, 1_200_000, "a"), 50_000)
    layouts = []
    for engine in (lance, lance_format):
        uri = str(tmp_path / engine.__name__)
        engine.write_dataset(table, uri, max_bytes_per_file=1 << 20, data_storage_version="2.0")
        layouts.append(_layout(uri))
    assert 1024 * 1024 in np.cumsum([rows for rows, _ in layouts[0]])
    assert layouts[1] == layouts[0]


@pytest.mark.parametrize("make", [
    lambda: pa.table({"s": pa.array([b"z" * 1024] * 40_000)}),  # 41 MB: two pages
    lambda: pa.table({"a": np.arange(5_000_000)}),  # 40 MB: two pages
    lambda: _lists(0, 150_000).select(["words"]),  # 9 MB of items: one page
], ids=["wide strings", "numbers", "list items"])
def test_one_big_batch_split_into_pages_like_pylance(tmp_path, make):
    """pylance splits one buffered array into pages only past its 32 MiB page limit."""
    table = make()
    layouts = []
    for engine in (lance, lance_format):
        uri = str(tmp_path / engine.__name__)
        engine.write_dataset(table, uri, data_storage_version="2.0", max_rows_per_file=10**8)
        layouts.append(_layout(uri))
    assert layouts[1] == layouts[0]
