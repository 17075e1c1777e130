"""``LanceOperation.Update.updated_fragment_offsets`` (portable RoaringBitmap bytes per fragment)
survive a commit and read back in both directions between pylance and this engine; bytes that
are no bitmap are refused before anything is committed."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest
from pyroaring import BitMap

import lance_format

CUSTOMERS = pa.table({"id": range(10), "email": [f"c{i}@example.com" for i in range(10)], "vip": [False] * 10})
OFFSETS = {0: BitMap([1, 3, 5, 7]).serialize(), 2: BitMap([0, 2, 100_000]).serialize()}


def _staged(engine, uri):
    ds = engine.write_dataset(CUSTOMERS, uri)
    updates = pa.table({"id": [1], "email": ["new@example.org"], "vip": [True]})
    transaction, _ = ds.merge_insert(on="id").when_matched_update_all().execute_uncommitted(updates)
    assert transaction.operation.updated_fragment_offsets is None
    return ds, transaction


@pytest.mark.parametrize("writer, reader", [(lance_format, lance), (lance, lance_format), (lance_format, lance_format)])
def test_offsets_round_trip(tmp_path, writer, reader):
    uri = str(tmp_path / "t")
    ds, transaction = _staged(writer, uri)
    transaction.operation.updated_fragment_offsets = OFFSETS
    committed = writer.LanceDataset.commit(ds, transaction)
    assert reader.dataset(uri).read_transaction(committed.version).operation.updated_fragment_offsets == OFFSETS
    assert reader.dataset(uri).to_table().sort_by("id").column("vip").to_pylist() == [i == 1 for i in range(10)]


def test_invalid_bitmap_is_refused(tmp_path):
    uri = str(tmp_path / "t")
    ds, transaction = _staged(lance_format, uri)
    transaction.operation.updated_fragment_offsets = {0: b"not a bitmap"}
    with pytest.raises(ValueError, match=r"updated_fragment_offsets\[0\]: invalid portable RoaringBitmap"):
        lance_format.LanceDataset.commit(ds, transaction)
    assert lance_format.dataset(uri).version == 1
