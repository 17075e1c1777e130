"""Mutations against the oracle: the same history run by pylance and by this engine gives the
same manifests, transactions, rows and lineage at every version, and histories in which the two
engines take turns on one table read identically in both."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from tests.compat import SYSTEM, assert_same_history, assert_tables_equal
from tests.mutation_compat import STORAGE_VERSIONS, assert_same_tables, base_table, history

ENGINES = {"pylance": lance, "ours": lance_format}


@pytest.mark.parametrize("stable", [False, True], ids=["addr-ids", "stable-ids"])
@pytest.mark.parametrize("storage_version", STORAGE_VERSIONS)
def test_scripted_history_matches_pylance(tmp_path, storage_version, stable):
    theirs, ours = str(tmp_path / "theirs"), str(tmp_path / "ours")
    expected = history(lance, theirs, storage_version, stable)
    got = history(lance_format, ours, storage_version, stable)
    assert [_plain(r) for r in got] == [_plain(r) for r in expected]
    assert_same_tables(ours, theirs, same_file_sizes=storage_version == "2.0")
    assert lance_format.dataset(ours).version == lance.dataset(theirs).version == 23


def _plain(result):
    return result if isinstance(result, dict) else {k: getattr(result, k) for k in
                                                    ("fragments_removed", "fragments_added", "files_removed",
                                                     "files_added")}


MIXED_STEPS = [
    lambda ds: ds.delete("id % 5 = 1"),
    lambda ds: ds.update({"x": "x * 2", "v": "'u' || v"}, where="id BETWEEN 3 AND 22"),
    lambda ds: ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
    .execute(base_table(6, 20)),
    lambda ds: ds.delete("id = 21"),
    lambda ds: ds.optimize.compact_files(target_rows_per_fragment=8),
    lambda ds: ds.add_columns({"w": "x + 1"}),
    lambda ds: ds.update({"w": "0"}, where="id < 4"),
    lambda ds: ds.alter_columns({"path": "w", "name": "w2"}),
    lambda ds: ds.merge_insert("id").when_matched_update_all().execute(
        pa.table({"id": pa.array([2, 24], pa.int64()), "x": pa.array([7, 8], pa.int32())})),
    lambda ds: ds.drop_columns(["tags"]),
    lambda ds: ds.alter_columns({"path": "st.a", "name": "aa"}, {"path": "id", "nullable": False}),
    lambda ds: ds.drop_columns(["st.b"]),
    lambda ds: ds.alter_columns({"path": "x", "data_type": pa.int64()}),
    lambda ds: ds.update_config({"k": "v"}),
    lambda ds: ds.delete("id > 24"),
    lambda ds: ds.optimize.compact_files(target_rows_per_fragment=100),
]


@pytest.mark.parametrize("stable", [False, True], ids=["addr-ids", "stable-ids"])
@pytest.mark.parametrize("first", ["pylance", "ours"])
@pytest.mark.parametrize("storage_version", STORAGE_VERSIONS)
def test_engines_take_turns_on_one_table(tmp_path, stable, first, storage_version):
    uri = str(tmp_path / "t")
    order = ["pylance", "ours"] if first == "pylance" else ["ours", "pylance"]
    ENGINES[order[0]].write_dataset(base_table(20), uri, data_storage_version=storage_version,
                                    enable_stable_row_ids=stable, max_rows_per_file=7)
    for i, step in enumerate(MIXED_STEPS):
        engine = ENGINES[order[(i + 1) % 2]]
        step(engine.dataset(uri))
    assert lance.dataset(uri).version == len(MIXED_STEPS) + 1 + 2  # two compactions reserve ids first
    assert_same_history(uri)
    if stable:
        rows = lance.dataset(uri).to_table(columns=["id"] + SYSTEM).sort_by("id")
        assert len(set(rows.column("_rowid").to_pylist())) == rows.num_rows


def test_mutations_move_the_dataset_object_and_record_properties(tmp_path):
    uri = str(tmp_path / "t")
    ds = lance_format.write_dataset(base_table(10), uri, enable_stable_row_ids=True)
    stale = lance_format.dataset(uri)
    assert ds.delete("id = 1", transaction_properties={"who": "me"}, commit_message="drop one") == {
        "num_deleted_rows": 1}
    assert ds.version == 2 and ds.count_rows() == 9
    assert ds.update({"x": 5}, where="id = 2", transaction_properties={"k": "v"}) == {"num_rows_updated": 1}
    assert ds.version == 3
    assert ds.to_table(filter="id = 2").column("x").to_pylist() == [5]
    stats = ds.merge_insert("id").when_not_matched_insert_all().execute(
        base_table(2, 9), transaction_properties={"m": "1"})
    assert stats == {"num_inserted_rows": 1, "num_updated_rows": 0, "num_deleted_rows": 0}
    assert ds.version == 4
    theirs = lance.dataset(uri)
    assert theirs.read_transaction(2).transaction_properties == {"who": "me", "__lance_commit_message": "drop one"}
    assert theirs.read_transaction(3).transaction_properties == {"k": "v"}
    assert theirs.read_transaction(4).transaction_properties == {"m": "1"}
    assert stale.version == 1 and stale.count_rows() == 10  # other objects stay on their version
    ds.add_columns({"q": "id + 1"}, transaction_properties={"a": "b"})
    assert theirs.read_transaction(5).transaction_properties == {"a": "b"}
    ds.update_config({"c": "d"}, transaction_properties={"e": "f"})
    assert lance.dataset(uri).read_transaction(6).transaction_properties == {"e": "f"}


def test_update_keeps_row_ids_and_lineage(tmp_path):
    uri = str(tmp_path / "t")
    ds = lance_format.write_dataset(base_table(10), uri, enable_stable_row_ids=True, max_rows_per_file=5)
    lance_format.write_dataset(base_table(5, 10), uri, mode="append")
    ds = lance_format.dataset(uri)
    ds.update({"v": "'new'"}, where="id = 2 OR id = 12")
    rows = lance.dataset(uri).to_table(columns=["id", "v"] + SYSTEM, filter="v = 'new'").sort_by("id")
    assert rows.column("_rowid").to_pylist() == [2, 12]
    assert rows.column("_row_created_at_version").to_pylist() == [1, 2]
    assert rows.column("_row_last_updated_at_version").to_pylist() == [3, 3]
    assert rows.column("_rowaddr").to_pylist() == [(3 << 32), (3 << 32) | 1]
    ds.optimize.compact_files()
    after = lance.dataset(uri).to_table(columns=["id"] + SYSTEM).sort_by("id")
    assert after.column("_rowid").to_pylist() == list(range(15))
    assert set(after.column("_rowaddr").to_numpy() >> 32) == {4}  # one new fragment, ids preserved
    assert_same_history(uri)


def test_merge_insert_orders_updates_by_target_and_inserts_by_source(tmp_path):
    uri = str(tmp_path / "t")
    rng = np.random.default_rng(1)
    table = pa.table({"id": pa.array(np.arange(200), pa.int64()), "x": pa.array(rng.integers(0, 9, 200))})
    lance_format.write_dataset(table, uri, max_rows_per_file=60)
    lance.write_dataset(table, str(tmp_path / "p"), max_rows_per_file=60, data_storage_version="2.0")
    source_ids = rng.permutation(np.arange(100, 300))[:120]
    source = pa.table({"id": pa.array(source_ids, pa.int64()), "x": pa.array(-np.arange(120))})
    for engine, where in ((lance_format, uri), (lance, str(tmp_path / "p"))):
        stats = engine.dataset(where).merge_insert("id").when_matched_update_all() \
            .when_not_matched_insert_all().execute(source)
        assert stats["num_updated_rows"] + stats["num_inserted_rows"] == 120
    ours = lance_format.dataset(uri).to_table(with_row_address=True)
    theirs = lance.dataset(str(tmp_path / "p")).to_table(with_row_address=True)
    assert_tables_equal(ours, theirs, "merge_insert row order")


def test_merge_insert_clauses(tmp_path):
    uri = str(tmp_path / "t")
    ds = lance_format.write_dataset(base_table(10), uri)
    src = pa.table({"id": pa.array([1, 2, 50], pa.int64()), "x": pa.array([9, 9, 9], pa.int32())})
    assert ds.merge_insert("id").when_matched_delete().execute(src) == {
        "num_inserted_rows": 0, "num_updated_rows": 0, "num_deleted_rows": 2}
    assert sorted(ds.to_table().column("id").to_pylist()) == [0] + list(range(3, 10))
    with pytest.raises(lance_format.InvalidInputError, match="when_matched_fail"):
        ds.merge_insert("id").when_matched_fail().when_not_matched_insert_all().execute(
            pa.table({"id": pa.array([3], pa.int64())}))
    stats = ds.merge_insert("id").when_not_matched_by_source_delete("id >= 8").execute(
        pa.table({"id": pa.array([9], pa.int64())}))
    assert stats == {"num_inserted_rows": 0, "num_updated_rows": 0, "num_deleted_rows": 1}
    assert 8 not in ds.to_table().column("id").to_pylist()
    # Duplicate keys among unmatched source rows are inserted, as pylance does.
    stats = ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        pa.concat_tables([base_table(1, 70), base_table(1, 70)]))
    assert stats["num_inserted_rows"] == 2
    assert_same_history(uri)


def test_add_columns_forms(tmp_path):
    uri = str(tmp_path / "t")
    ds = lance_format.write_dataset(base_table(12), uri, max_rows_per_file=5, enable_stable_row_ids=True)
    ds.delete("id = 3 OR id = 11")
    ds.add_columns(pa.table({"r": pa.array(np.arange(10) * 2, pa.int64())}))
    ds.add_columns(pa.field("n", pa.float64()))
    ds.add_columns(lambda batch: pa.record_batch({"u": pa.compute.add(batch.column("x"), 1)}), read_columns=["x"])
    ds.add_columns({"s2": "st.b || v"})
    table = ds.to_table()
    assert table.column("r").to_pylist() == list(range(0, 20, 2))
    assert table.column("n").null_count == 10
    assert table.column("s2").to_pylist()[0] == "b0v0"
    manifest = ds.manifest
    assert [f.id for f in manifest.fields if f.parent_id == -1][-4:] == [8, 9, 10, 11]
    assert_same_history(uri)


def test_merge_insert_uncommitted_then_committed_like_execute(tmp_path):
    """execute_uncommitted writes the files, commits nothing; committing its transaction gives
    what execute gives; explain_plan and analyze_plan describe it without changing the table."""
    import os

    import lance as pylance

    import lance_format

    source = pa.table({"id": [2, 5], "v": ["two", "five"]})
    results = {}
    for name in ("direct", "uncommitted"):
        path = str(tmp_path / f"{name}.lance")
        lance_format.write_dataset(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), path)
        ds = lance_format.dataset(path)
        builder = ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
        if name == "direct":
            stats = builder.execute(source)
        else:
            plan = builder.explain_plan(source.schema)
            assert "when matched: update all columns" in plan and "when not matched: insert" in plan
            files_before = sorted(os.listdir(os.path.join(path, "data")))
            analyzed = builder.analyze_plan(source)
            assert "num_inserted_rows=1" in analyzed and "num_updated_rows=1" in analyzed
            assert sorted(os.listdir(os.path.join(path, "data"))) == files_before  # nothing left behind
            transaction, stats = builder.execute_uncommitted(source)
            assert lance_format.dataset(path).version == 1  # nothing committed yet
            lance_format.LanceDataset.commit(path, transaction)
        results[name] = (stats, sorted(pylance.dataset(path).to_table().to_pylist(), key=lambda r: r["id"]))
    assert results["direct"] == results["uncommitted"]
