"""Scan batches cut from larger decoded batches: list columns hold only their own items (as
pylance's do), with the same rows as a plain slice."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lance_format
from lance_format.dataset.scan_options import compact_slice


def _lists_batch() -> pa.RecordBatch:
    tags = pa.array([["a", "b"], None, [], ["c"], None, ["d", "e", "f"], ["g"], []] * 5, pa.list_(pa.string()))
    nested = pa.array([[[1], [2, 3]], None, [[None]], [], [[4]], None, [[5, 6]], [[7]]] * 5,
                      pa.large_list(pa.list_(pa.int64())))
    ids = pa.array(range(40), pa.int64())
    return pa.RecordBatch.from_arrays([ids, tags, nested], names=["id", "tags", "nested"])


@pytest.mark.parametrize("start, length", [(0, 8), (3, 7), (9, 13), (35, 5), (39, 1), (40, 0), (0, 40)])
def test_compact_slice_equals_plain_slice_with_own_items(start, length):
    batch = _lists_batch()
    sliced = compact_slice(batch, start, length)
    sliced.validate(full=True)
    assert sliced.equals(batch.slice(start, length))
    for name in ("tags", "nested"):
        column = sliced.column(name)
        if len(column):
            assert column.offsets[0].as_py() == 0
            assert len(column.values) == column.offsets[-1].as_py()


def test_scan_batches_of_list_columns_hold_their_own_items(tmp_path):
    table = pa.Table.from_batches([_lists_batch()] * 500)  # 20,000 rows: read at once, cut into 8,192-row batches
    path = str(tmp_path / "lists.lance")
    lance_format.write_dataset(table, path, data_storage_version="2.2")
    scanned = lance_format.dataset(path).to_table()
    assert scanned.equals(table)
    batches = scanned.to_batches()
    assert len(batches) > 1
    for batch in batches:
        tags = batch.column("tags")
        assert tags.offsets[0].as_py() == 0 and len(tags.values) == tags.offsets[-1].as_py()
