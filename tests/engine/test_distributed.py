"""The engine's public face for distributed writes, :mod:`lance_format.distributed` (no Spark):
fragment sinks, one-transaction commits of fragments written elsewhere, deletion vectors, idempotency lookups, cleanup."""

from __future__ import annotations

import os

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.distributed import (
    IDEMPOTENCY_KEY,
    FragmentSink,
    commit_fragments,
    delete_rows,
    discard_uncommitted,
    find_committed_version,
    fragment_from_proto,
    new_write_id,
    write_prefix,
)
from lance_format.errors import (
    CommitConflictError,
    DuplicateCommitError,
    InvalidInputError,
    RetryableCommitConflictError,
)
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
    committed = commit_fragments(uri, "overwrite", read_version=0, fragments=[fragment_from_proto(f) for f in fragments],
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
    committed = commit_fragments(uri, "update", read_version=1, fragments=[fragment_from_proto(f) for f in sink.finish()],
                                 schema=ds.lance_schema, removed_fragment_ids=[second.id],
                                 updated_fragments=[fragment_from_proto(updated)], properties=props)
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


def test_commit_loop_refuses_a_second_commit_with_the_same_idempotency_key(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.Table.from_batches([_batch(0, 10)]), uri, data_storage_version="2.0")
    ds = lance_format.dataset(uri)

    def append(key: str, start: int):
        sink = _sink(uri, new_write_id())
        sink.write(_batch(start, start + 5))
        # both runs planned on version 1: the second one finds the first in the commit loop
        return commit_fragments(uri, "append", read_version=1, fragments=[fragment_from_proto(f) for f in sink.finish()],
                                schema=ds.lance_schema, properties={IDEMPOTENCY_KEY: key})

    assert append("run-1", 100).version == 2
    with pytest.raises(DuplicateCommitError, match="idempotency key 'run-1'") as info:
        append("run-1", 200)
    assert isinstance(info.value, CommitConflictError) and info.value.version == 2
    assert info.value.transaction.transaction_properties[IDEMPOTENCY_KEY] == "run-1"
    assert append("run-2", 300).version == 3  # another key is an ordinary concurrent append
    assert lance.dataset(uri).count_rows() == 20


# -- writes that add columns: ONE Merge commit ---------------------------------------------------
def _wider(start: int, stop: int) -> pa.Table:
    ids = np.arange(start, stop)
    return pa.table({"s": [f"n{i}" for i in ids], "id": ids, "tag": [f"t{i}" for i in ids]})


def _files(uri: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), uri) for d, _, fs in os.walk(uri) for f in fs
            if "_versions" not in d and "_transactions" not in d}


@pytest.mark.parametrize("stable", [False, True])
@pytest.mark.parametrize("predicate", [None, "id >= 3 AND id < 8"])
def test_write_with_new_columns_is_one_merge_commit(tmp_path, stable, predicate):
    from lance_format.dataset.evolution.new_column_writes import write_with_new_columns
    from tests.compat import assert_same_version

    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.Table.from_batches([_batch(0, 10)]), uri, max_rows_per_file=4,
                        enable_stable_row_ids=stable)
    lance.dataset(uri).delete("id = 1")  # v2: a deletion file on fragment 0
    lance.dataset(uri).drop_columns(["s"])  # v3: s's data (field 1) stays on disk
    lance.dataset(uri).add_columns({"s": "CAST(id AS string)"})  # v4: s again, field 2
    before = lance.dataset(uri).to_table(columns=["id", "_rowid", "_row_created_at_version",
                                                  "_row_last_updated_at_version"])
    ds = lance_format.dataset(uri)
    new = _wider(20, 25) if predicate is None else _wider(3, 8)
    out = write_with_new_columns(ds, pa.RecordBatchReader.from_batches(new.schema, new.to_batches()),
                                 [pa.field("tag", pa.string())], predicate=predicate,
                                 transaction_properties={"k": "v"})
    assert out.version == 5 and lance.dataset(uri).version == 5
    txn = out.read_transaction_message()
    assert txn.WhichOneof("operation") == "merge" and txn.transaction_properties["k"] == "v"
    theirs = lance.dataset(uri)
    assert theirs.schema.names == ["id", "s", "tag"] and theirs.schema.field("tag").nullable
    # new field id above every id on disk (the dropped s's 1 and the new s's 2, ...)
    assert [f.id for f in out.manifest.fields] == [0, 2, 3]
    assert_same_version(uri, 5)
    rows = sorted(theirs.to_table(columns=["id", "tag"]).to_pylist(), key=lambda r: r["id"])
    expected_ids = sorted(set(range(10)) - {1} | set(new["id"].to_pylist()))
    assert [r["id"] for r in rows] == expected_ids
    assert all((r["tag"] is not None) == (r["id"] in new["id"].to_pylist()) for r in rows)
    ids = [f.fragment_id for f in theirs.get_fragments()]
    assert ids == sorted(ids) and ids[-1] == out.manifest.max_fragment_id
    if stable:
        # new fragments: fresh row ids and version sequences as an Append; old rows unchanged
        after = theirs.to_table(columns=["id", "_rowid", "_row_created_at_version", "_row_last_updated_at_version"])
        new_rows = after.filter(pa.compute.is_in(after["id"], new["id"]))
        assert new_rows["_rowid"].to_pylist() == list(range(10, 10 + new.num_rows))
        assert set(new_rows["_row_created_at_version"].to_pylist()) == {5}
        assert set(new_rows["_row_last_updated_at_version"].to_pylist()) == {5}
        old_rows = after.filter(pa.compute.invert(pa.compute.is_in(after["id"], new["id"])))
        kept = before.filter(pa.compute.invert(pa.compute.is_in(before["id"], new["id"])))
        assert old_rows.sort_by("id").equals(kept.sort_by("id"))
        assert out.manifest.next_row_id == 10 + new.num_rows
    # pylance builds on it
    lance.write_dataset(_wider(30, 31), uri, mode="append")
    assert lance.dataset(uri).count_rows() == len(expected_ids) + 1


def test_write_with_new_columns_failure_leaves_old_version_and_no_files(tmp_path, monkeypatch):
    from lance_format.dataset.evolution import new_column_writes as evolve_write

    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.Table.from_batches([_batch(0, 10)]), uri, max_rows_per_file=4)
    files = _files(uri)

    def boom(*args, **kwargs):
        raise OSError("injected failure after the data files were written")

    monkeypatch.setattr(evolve_write, "commit_transaction", boom)
    new = _wider(2, 6)
    for predicate in (None, "id >= 2 AND id < 6"):
        with pytest.raises(OSError, match="injected"):
            evolve_write.write_with_new_columns(
                lance_format.dataset(uri), pa.RecordBatchReader.from_batches(new.schema, new.to_batches()),
                [pa.field("tag", pa.string())], predicate=predicate)
        ds = lance.dataset(uri)
        assert ds.version == 1 and ds.schema.names == ["id", "s"]
        assert _files(uri) == files


def test_commit_with_new_columns_conflicts_with_a_concurrent_append(tmp_path):
    from lance_format.dataset.evolution.new_column_writes import commit_with_new_columns, widened_schema

    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.Table.from_batches([_batch(0, 10)]), uri)
    ds = lance_format.dataset(uri)
    schema = widened_schema(ds.manifest, [pa.field("tag", pa.string())])
    lance.write_dataset(pa.Table.from_batches([_batch(10, 12)]), uri, mode="append")  # v2 meanwhile
    with pytest.raises(RetryableCommitConflictError):
        commit_with_new_columns(uri, read_version=1, schema=schema)
    assert lance.dataset(uri).version == 2 and lance.dataset(uri).schema.names == ["id", "s"]


def test_commit_fragments_merge_adds_columns_and_refuses_unknown_operations(tmp_path):
    from lance_format.dataset.evolution.new_column_writes import widened_schema

    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.Table.from_batches([_batch(0, 10)]), uri)
    ds = lance_format.dataset(uri)
    schema = widened_schema(ds.manifest, [pa.field("tag", pa.string())])
    sink = FragmentSink(uri, schema, "2.2", prefix=write_prefix(new_write_id()))
    urls = [f"https://example.com/{i}" if i % 2 else None for i in range(10, 13)]
    sink.write(pa.record_batch([pa.array(range(10, 13)), pa.array(["a@b.org", None, "c"]), pa.array(urls)],
                               schema=schema.to_arrow()))
    with pytest.raises(InvalidInputError, match="operation must be one of"):
        commit_fragments(uri, "delete", read_version=1, fragments=[])
    with pytest.raises(InvalidInputError, match="needs the table schema"):
        commit_fragments(uri, "merge", read_version=1, fragments=[])
    committed = commit_fragments(uri, "merge", read_version=1, schema=schema,
                                 fragments=[fragment_from_proto(f) for f in sink.finish()])
    table = lance.dataset(uri).to_table()
    assert committed.version == 2 and table.schema.names == ["id", "s", "tag"]
    assert table.column("tag").to_pylist() == [None] * 10 + urls
