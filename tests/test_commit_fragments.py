"""Distributed-write helpers of the engine (no Spark): fragment sinks, one-transaction commits
of fragments written elsewhere, deletion vectors, idempotency lookups, cleanup."""

from __future__ import annotations

import os

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.dataset.commit_fragments import (
    IDEMPOTENCY_KEY,
    commit_fragments,
    delete_rows,
    discard_uncommitted,
    find_committed_version,
)
from lance_format.dataset.fragment_sink import FragmentSink, new_write_id, write_prefix
from lance_format.errors import InvalidInputError
from lance_format.io import object_store_for
from lance_format.schema import LanceSchema

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("s", pa.string())])


def _batch(start: int, stop: int) -> pa.RecordBatch:
    ids = np.arange(start, stop)
    return pa.record_batch([pa.array(ids), pa.array([f"s{i}" for i in ids])], schema=SCHEMA)


def _sink(uri: str, write_id: str, **kwargs) -> FragmentSink:
    return FragmentSink(uri, LanceSchema.from_arrow(SCHEMA), "2.0", prefix=write_prefix(write_id), **kwargs)


def test_sink_rolls_files_and_commit_is_read_by_pylance(tmp_path):
    uri = str(tmp_path / "t.lance")
    write_id = new_write_id()
    sinks = [_sink(uri, write_id, max_rows_per_file=40) for _ in range(2)]  # two "tasks"
    sinks[0].write(_batch(0, 100))
    sinks[1].write(_batch(100, 130))
    fragments = [f for s in sinks for f in s.finish()]
    assert [f.physical_rows for f in fragments] == [40, 40, 20, 30]
    assert all(f.files[0].path.startswith(write_prefix(write_id)) for f in fragments)
    assert len(os.path.basename(fragments[0].files[0].path)) == len("x" * 50 + ".lance")  # Lance's name shape
    committed = commit_fragments(uri, "overwrite", read_version=0, new_fragments=fragments,
                                 schema=LanceSchema.from_arrow(SCHEMA))
    assert committed.version == 1
    assert lance.dataset(uri).to_table().column("id").to_pylist() == list(range(130))


def test_sink_abort_and_row_ids(tmp_path):
    uri = str(tmp_path / "t.lance")
    sink = _sink(uri, new_write_id(), max_rows_per_file=10)
    sink.write(_batch(0, 25), np.arange(100, 125, dtype=np.uint64))
    assert len(os.listdir(tmp_path / "t.lance" / "data")) == 3
    with pytest.raises(InvalidInputError):
        sink.write(_batch(25, 26))  # row ids for every batch or for none
    sink.abort()
    assert os.listdir(tmp_path / "t.lance" / "data") == []
    kept = _sink(uri, new_write_id())
    kept.write(_batch(0, 5), np.array([7, 3, 9, 1, 2], dtype=np.uint64))
    (fragment,) = kept.finish()
    assert fragment.HasField("inline_row_ids")


def test_update_with_deletions_idempotency_and_cleanup(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.Table.from_batches([_batch(0, 50)]), uri, max_rows_per_file=25, data_storage_version="2.0")
    store = object_store_for(uri)
    ds = lance_format.dataset(uri)
    write_id = new_write_id()
    first, second = ds.manifest.fragments
    updated, added = delete_rows(store, first, np.array([1, 2, 2, 5]), read_version=1, write_id=write_id)
    assert added == 3 and updated.deletion_file.num_deleted_rows == 3
    gone, added_all = delete_rows(store, second, np.arange(25), read_version=1, write_id=write_id)
    assert gone is None and added_all == 25  # every row deleted: the fragment is removed
    sink = _sink(uri, write_id)
    sink.write(_batch(1000, 1003))
    props = {IDEMPOTENCY_KEY: "k-1"}
    committed = commit_fragments(uri, "update", read_version=1, new_fragments=sink.finish(),
                                 schema=ds.lance_schema, removed_fragment_ids=[second.id],
                                 updated_fragments=[updated], properties=props)
    ids = lance.dataset(uri).to_table().column("id").to_pylist()
    assert ids == [0, 3, 4] + list(range(6, 25)) + [1000, 1001, 1002]
    prior = find_committed_version(uri, "k-1")
    assert prior is not None and prior.version == committed.version and len(prior.new_fragments) == 1
    assert find_committed_version(uri, "other") is None
    # nothing of a committed write is removed; an uncommitted write's files all are
    assert discard_uncommitted(uri, write_prefix(write_id), read_version=1, write_id=write_id,
                               fragment_ids=[first.id, second.id]) == []
    orphan_id = new_write_id()
    orphan = _sink(uri, orphan_id)
    orphan.write(_batch(0, 3))
    orphan.finish()
    delete_rows(store, first, np.array([9]), read_version=2, write_id=orphan_id)
    removed = discard_uncommitted(uri, write_prefix(orphan_id), read_version=2, write_id=orphan_id,
                                  fragment_ids=[first.id])
    assert len(removed) == 2 and lance.dataset(uri).count_rows() == len(ids)
