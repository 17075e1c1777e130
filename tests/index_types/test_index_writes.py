"""Indices through every write, against pylance 14.0.2 on twin tables: each write is made by this
engine on one copy and by pylance on the other; both leave the same index coverage (fragments per
segment), pylance's indexed answers on our copy equal its brute-force scan, and ours equal our
full scan."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format

from .conftest import realistic_table

INDICES = [("id", "BTREE", "id_idx"), ("cat", "BITMAP", "cat_idx"), ("tags", "LABEL_LIST", "tags_idx"),
           ("email", "NGRAM", "email_idx"), ("score", "ZONEMAP", "score_zm"), ("url", "BLOOMFILTER", "url_bf"),
           ("score", "BTREE", "score_idx")]
FILTERS = [
    "id = 1234", "id IN (3, 2999, 3000, 9001, 11999, 12005, 50001)", "id >= 5990 AND id < 6020", "id > 11990",
    "cat = 'beta'", "cat IS NULL", "NOT cat = 'alpha' AND id < 3000", "array_has_any(tags, ['urgent', 'näive'])",
    "array_has_all(tags, ['red', 'blue'])", "email LIKE 'user42.%'", "score = 7", "score BETWEEN 100 AND 120",
    "score > 990", "url = 'https://Example.com/p/7919?q=Straße1'", "cat = 'gamma' OR score < 5",
]
N = 12_000


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def check_answers(uri: str, ref: Any = None) -> None:
    theirs, ours = lance.dataset(uri), lance_format.dataset(uri)
    if ref is not None:
        theirs, ours = theirs.checkout_version(ref), ours.checkout_version(ref)
    for f in FILTERS:
        brute = _ids(theirs.to_table(columns=["id"], filter=f, use_scalar_index=False))
        assert _ids(theirs.to_table(columns=["id"], filter=f)) == brute, f
        assert _ids(ours.to_table(columns=["id"], filter=f)) == brute, f
        assert _ids(ours.to_table(columns=["id"], filter=f, use_scalar_index=False)) == brute, f


def coverage(uri: str) -> dict[str, list[list[int]]]:
    return {d.name: [sorted(s.fragment_ids) for s in d.segments] for d in lance.dataset(uri).describe_indices()}


def _source(ids: range, seed: int, columns: list[str] | None = None) -> pa.Table:
    """Rows with the given ids and fresh values (a different seed)."""
    data = realistic_table(max(ids) + 1, seed=seed).take(pa.array(list(ids)))
    return data.select(columns) if columns else data


def _update_indexed(engine, uri):
    engine.dataset(uri).update({"score": "score + 1000"}, where="id % 7 = 0 AND id < 6000")


def _update_unindexed(engine, uri):
    engine.dataset(uri).update({"x": "x * 2"}, where="id BETWEEN 2500 AND 3500")


def _update_key(engine, uri):
    engine.dataset(uri).update({"id": "id + 100000"}, where="id < 50")


def _delete(engine, uri):
    engine.dataset(uri).delete("cat = 'delta' OR id BETWEEN 2990 AND 3010")


def _merge_rows(engine, uri):
    source = _source(range(5_000, 14_000, 3), seed=11)
    (engine.dataset(uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
     .execute(source))


def _merge_columns(engine, uri):
    # a subset of the columns, matched rows only: pylance rewrites those columns in place
    source = _source(range(0, 12_000, 5), seed=12, columns=["id", "score", "x"])
    engine.dataset(uri).merge_insert("id").when_matched_update_all().execute(source)


def _merge_delete(engine, uri):
    source = _source(range(0, 6_000, 2), seed=13)
    (engine.dataset(uri).merge_insert("id").when_matched_update_all()
     .when_not_matched_by_source_delete("id >= 9000").execute(source))


def _append(engine, uri):
    engine.write_dataset(_source(range(12_000, 13_000), seed=14), uri, mode="append")


def _add_and_drop_columns(engine, uri):
    ds = engine.dataset(uri)
    ds.add_columns({"double": "score * 2"})
    engine.dataset(uri).drop_columns(["x"])


def _restore(engine, uri):
    ds = engine.dataset(uri)
    first = ds.version
    ds.delete("id < 100")
    ds = engine.dataset(uri)
    ds.drop_index("cat_idx")
    engine.dataset(uri, version=first).restore()


WRITES: dict[str, Callable] = {
    "update-indexed": _update_indexed, "update-unindexed": _update_unindexed, "update-key": _update_key,
    "delete": _delete, "merge-rows": _merge_rows, "merge-columns": _merge_columns, "merge-delete": _merge_delete,
    "append": _append, "add-drop-columns": _add_and_drop_columns, "restore": _restore,
}


def _build(uri: str, version: str, stable: bool) -> None:
    lance.write_dataset(realistic_table(N), uri, max_rows_per_file=3_000, data_storage_version=version,
                        enable_stable_row_ids=stable)
    ds = lance.dataset(uri)
    for column, kind, name in INDICES:
        ds.create_scalar_index(column, kind, name=name)
    lance.dataset(uri).delete("id % 23 = 0")


@pytest.mark.parametrize("version,stable", [("2.0", False), ("2.2", False), ("2.1", True), ("2.2", True)])
@pytest.mark.parametrize("write", sorted(WRITES))
def test_write_keeps_indices_like_pylance(tmp_path, version, stable, write):
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    _build(ours, version, stable)
    shutil.copytree(ours, theirs)
    WRITES[write](lance_format, ours)
    WRITES[write](lance, theirs)
    if write != "merge-columns":
        assert coverage(ours) == coverage(theirs)
    # else: pylance rewrites the matched rows' columns in place (the score indices lose those
    # fragments); this engine rewrites the rows into new fragments (left unindexed)
    check_answers(ours)
    check_answers(theirs)  # pylance's write, answered by both
    live = {f.fragment_id for f in lance.dataset(ours).get_fragments()}
    for name, f in (("id_idx", "id = 1234"), ("cat_idx", "cat = 'beta'")):
        if name in coverage(ours) and set(coverage(ours)[name][0]) & live:  # still answered from the index
            plan = lance_format.dataset(ours).scanner(filter=f, columns=["id"]).explain_plan()
            assert f"@{name}" in plan, plan


@pytest.mark.parametrize("stable", [False, True])
def test_overwrite_drops_indices(tmp_path, stable):
    uri = str(tmp_path / "t.lance")
    _build(uri, "2.2", stable)
    lance_format.write_dataset(_source(range(0, 500), seed=3), uri, mode="overwrite")
    assert lance.dataset(uri).describe_indices() == []
    check_answers(uri)
    check_answers(uri, 2)  # the old version's indices still answer


def test_cleanup_keeps_files_of_kept_versions(tmp_path):
    """Cleanup removes the files of segments only removed versions list, never those a kept
    version (or a tag) still lists; pylance's answers on every kept version stay exact."""
    uri = str(tmp_path / "t.lance")
    _build(uri, "2.2", False)
    ds = lance_format.dataset(uri)
    ds.tags.create("indexed", ds.version)
    ds.optimize.compact_files(target_rows_per_fragment=7_000)   # remaps: new segment files
    lance_format.write_dataset(_source(range(12_000, 12_500), seed=4), uri, mode="append")
    ds = lance_format.dataset(uri)
    ds.optimize.optimize_indices()
    ds.drop_index("score_zm")
    stats = ds.cleanup_old_versions(older_than=timedelta(0), delete_unverified=True,
                                    error_if_tagged_old_versions=False)
    assert stats.index_files_removed > 0
    for version in (None, "indexed"):
        check_answers(uri, version)
    listed = {str(u) for v in (lance.dataset(uri), lance.dataset(uri, version="indexed"))
              for d in v.describe_indices() for s in d.segments for u in [s.uuid]}
    on_disk = {p.name for p in (tmp_path / "t.lance" / "_indices").iterdir()}
    assert listed <= on_disk


def test_branch_and_clone_keep_indices(tmp_path):
    uri = str(tmp_path / "t.lance")
    _build(uri, "2.2", False)
    ds = lance_format.dataset(uri)
    branch = ds.create_branch("dev")
    branch.delete("id < 1000")
    branch.update({"score": "score + 1"}, where="id > 11000")
    branch.optimize.compact_files(target_rows_per_fragment=7_000)
    check_answers(uri)
    check_answers(uri, ("dev", None))
    clone_uri = str(tmp_path / "clone.lance")
    ds.shallow_clone(clone_uri, ds.version)
    assert coverage(clone_uri) == coverage(uri)
    check_answers(clone_uri)
    lance_format.dataset(clone_uri).optimize.compact_files(target_rows_per_fragment=7_000)
    check_answers(clone_uri)
    check_answers(uri)


def test_pylance_merge_insert_then_our_answers(tmp_path):
    uri = str(tmp_path / "t.lance")
    _build(uri, "2.2", True)
    _merge_rows(lance, uri)
    _merge_columns(lance, uri)
    check_answers(uri)
    assert pc.sum(lance_format.dataset(uri).to_table(columns=["score"])["score"]).as_py() == \
        pc.sum(lance.dataset(uri).to_table(columns=["score"])["score"]).as_py()
