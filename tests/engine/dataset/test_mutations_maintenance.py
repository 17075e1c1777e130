"""Compaction, cleanup, restore, config and metadata against pylance."""

from __future__ import annotations

import os
import shutil
from datetime import timedelta

import lance
import numpy as np
import pytest

import lance_format
from lance_format.dataset.maintenance.compaction import chunk_sizes
from lance_format.errors import TagError
from tests.compat import SYSTEM, assert_same_history, assert_tables_equal
from tests.mutation_compat import assert_same_tables, base_table

ENGINES = {"pylance": lance, "ours": lance_format}


@pytest.mark.parametrize("rows,per_file,deleted,target", [
    (25, 5, 0, 12), (40, 5, 0, 12), (37, 1, 0, 10), (100, 10, 0, 30), (30, 3, 0, 7),
    (35, 35, 4, 10), (50, 50, 3, 10), (100, 100, 1, 7), (29, 29, 0, 10), (26, 4, 9, 6),
])
@pytest.mark.parametrize("stable", [False, True], ids=["addr-ids", "stable-ids"])
def test_compaction_matches_pylance(tmp_path, rows, per_file, deleted, target, stable):
    results = {}
    for name, engine in ENGINES.items():
        uri = str(tmp_path / name)
        ds = engine.write_dataset(base_table(rows), uri, max_rows_per_file=per_file, enable_stable_row_ids=stable,
                                  data_storage_version="2.0")
        if deleted:
            ds.delete(f"id % {max(2, rows // deleted)} = 1")
        results[name] = ds.optimize.compact_files(target_rows_per_fragment=target,
                                                  materialize_deletions_threshold=0.0)
    theirs, ours = results["pylance"], results["ours"]
    assert (ours.fragments_removed, ours.fragments_added, ours.files_removed, ours.files_added) == (
        theirs.fragments_removed, theirs.fragments_added, theirs.files_removed, theirs.files_added)
    assert_same_tables(str(tmp_path / "ours"), str(tmp_path / "pylance"))


def test_chunk_sizes():
    assert chunk_sizes(25, 12) == [13, 12]
    assert chunk_sizes(99, 7) == [8] + [7] * 13
    assert chunk_sizes(5, 12) == [5] and chunk_sizes(0, 3) == []


def test_compaction_options_and_noop(tmp_path):
    uri = str(tmp_path / "t")
    ds = lance_format.write_dataset(base_table(40), uri, max_rows_per_file=20)
    ds.delete("id < 3")
    assert ds.optimize.compact_files(materialize_deletions=False, target_rows_per_fragment=20).fragments_removed == 0
    assert ds.version == 2  # nothing to do: no commit at all
    ds.update_config({"lance.compaction.materialize_deletions_threshold": "0.05"})
    metrics = ds.optimize.compact_files(target_rows_per_fragment=20)
    assert (metrics.fragments_removed, metrics.fragments_added) == (1, 1)
    assert ds.version == 5 and [f.num_deletions for f in ds.get_fragments()] == [0, 0]
    assert ds.manifest.reader_feature_flags == 0  # no deletions left: flag 1 cleared
    assert_same_history(uri)


@pytest.mark.parametrize("stable", [False, True], ids=["addr-ids", "stable-ids"])
def test_indices_survive_mutations(tmp_path, stable):
    uri = str(tmp_path / "t")
    lance_format.write_dataset(base_table(60), uri, max_rows_per_file=10, enable_stable_row_ids=stable)
    lance.dataset(uri).create_scalar_index("id", "BTREE")
    ds = lance_format.dataset(uri)
    ds.delete("id % 4 = 0")
    ds.update({"v": "'u'"}, where="id < 8")
    shutil.copytree(uri, uri + "-pylance")
    ds.optimize.compact_files(target_rows_per_fragment=30)
    lance.dataset(uri + "-pylance").optimize.compact_files(target_rows_per_fragment=30)
    for engine in (lance, lance_format):
        rows = engine.dataset(uri).to_table(filter="id = 5 OR id = 33", columns=["id", "v"]).sort_by("id")
        assert rows.to_pydict() == {"id": [5, 33], "v": ["u", "v33"]}
    theirs = lance.dataset(uri)
    assert [i.name for i in theirs.describe_indices()] == ["id_idx"]
    # indexed fragments are compacted and the index remapped, as pylance does
    reference = lance.dataset(uri + "-pylance")
    assert [f.fragment_id for f in ds.get_fragments()] == [f.fragment_id for f in reference.get_fragments()]
    assert ([sorted(s.fragment_ids) for s in theirs.describe_indices()[0].segments]
            == [sorted(s.fragment_ids) for s in reference.describe_indices()[0].segments])
    lance_format.dataset(uri).drop_columns(["id"])
    assert lance.dataset(uri).describe_indices() == []
    assert_same_history(uri)


def _history_for_cleanup(engine, uri):
    ds = engine.write_dataset(base_table(20), uri, max_rows_per_file=10, data_storage_version="2.0")
    ds.delete("id = 1")
    ds.update({"x": "1"}, where="id > 15")
    ds = engine.write_dataset(base_table(5), uri, mode="overwrite")
    ds.tags.create("keep", 2)
    ds.delete("id = 2")
    ds.optimize.compact_files(materialize_deletions_threshold=0.0)
    return ds


def _counts(stats):
    return (stats.old_versions, stats.data_files_removed, stats.transaction_files_removed,
            stats.deletion_files_removed, stats.index_files_removed)


def test_cleanup_matches_pylance(tmp_path):
    results = {}
    for name, engine in ENGINES.items():
        uri = str(tmp_path / name)
        ds = _history_for_cleanup(engine, uri)
        with pytest.raises(TagError if engine is lance_format else OSError, match="tagged"):
            ds.cleanup_old_versions(older_than=timedelta(0))
        first = ds.cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=False)
        ds.tags.delete("keep")
        second = ds.cleanup_old_versions(retain_versions=2)
        results[name] = (_counts(first), _counts(second), sorted(v["version"] for v in ds.versions()))
    assert results["ours"] == results["pylance"]
    assert_same_history(str(tmp_path / "ours"))


def test_cleanup_keeps_what_kept_versions_need(tmp_path):
    uri = str(tmp_path / "t")
    ds = _history_for_cleanup(lance, uri)  # a pylance-built table, cleaned by us
    before = {v: lance.dataset(uri, version=v).to_table(columns=["id", "x"] + SYSTEM) for v in (2, 6, 7)}
    open(os.path.join(uri, "data", "leftover.lance"), "wb").write(b"x")
    ours = lance_format.dataset(uri)
    stats = ours.cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=False)
    assert os.path.exists(os.path.join(uri, "data", "leftover.lance"))  # unverified and recent: kept
    sizes_removed = stats.bytes_removed
    assert sizes_removed > 0 and stats.old_versions == 5
    stats = ours.cleanup_old_versions(older_than=timedelta(0), delete_unverified=True,
                                      error_if_tagged_old_versions=False)
    assert not os.path.exists(os.path.join(uri, "data", "leftover.lance")) and stats.data_files_removed == 1
    assert sorted(v["version"] for v in ds.versions()) == [2, 7]
    for v in (2, 7):
        for engine in (lance, lance_format):
            got = engine.dataset(uri, version=v).to_table(columns=["id", "x"] + SYSTEM)
            if v in before:
                assert_tables_equal(got, before[v], f"v{v}")
    assert ds.versions()[-1]["version"] == 7


def test_restore_and_metadata_match_pylance(tmp_path):
    returned = {}
    for name, engine in ENGINES.items():
        uri = str(tmp_path / name)
        ds = engine.write_dataset(base_table(10), uri, data_storage_version="2.0")
        out = [ds.update_schema_metadata({"a": "1"}), ds.update_config({"x": "1", "y": "2"}), ds.update_config({"z": "3"}, replace=True),
               ds.update_metadata({"m": "1", "n": "2"}), ds.update_metadata({"n": None}),
               ds.update_schema_metadata({"b": "2"}), ds.update_schema_metadata({"c": "3"}, replace=True)]
        ds.update_field_metadata({"st.b": {"k": "v"}, "id": {"unit": "s"}})
        ds.update_field_metadata({"id": {"other": "1"}}, replace=True)
        ds.delete_config_keys(["z", "missing"])
        out += [ds.config(), ds.metadata, ds.schema_metadata]
        ds.delete("id < 3")
        ds.checkout_version(4).restore()
        out.append((ds.version, ds.latest_version))
        returned[name] = out
    assert returned["ours"] == returned["pylance"]
    assert_same_tables(str(tmp_path / "ours"), str(tmp_path / "pylance"))


def test_restore_moves_the_dataset_and_keeps_id_high_water_marks(tmp_path):
    uri = str(tmp_path / "t")
    ds = lance_format.write_dataset(base_table(10), uri, enable_stable_row_ids=True)
    lance_format.write_dataset(base_table(5, 10), uri, mode="append")
    old = lance_format.dataset(uri, version=1)
    old.restore()
    assert old.version == 3 and old.count_rows() == 10
    lance_format.write_dataset(base_table(2, 20), uri, mode="append")
    table = lance.dataset(uri).to_table(columns=["id"] + SYSTEM)
    assert table.column("_rowid").to_pylist()[-2:] == [15, 16]  # ids of the dropped rows are not reused
    assert [f.fragment_id for f in lance_format.dataset(uri).get_fragments()] == [0, 2]
    assert ds.version == 1
    assert_same_history(uri)
    rows = np.array(lance_format.dataset(uri).to_table(columns=["_rowaddr"]).column(0))
    assert (rows >> 32).tolist() == [0] * 10 + [2] * 2
