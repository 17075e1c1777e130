"""Compaction of indexed tables, both ways against pylance 14.0.2: the engine compacts fragments
covered by indices and remaps the segments as pylance does (same segments rewritten, same
coverage), then pylance's indexed answers equal its brute-force scan; pylance compacts, then our
indexed answers equal our full scan."""

from __future__ import annotations

import shutil

import lance
import pytest

import lance_format
from lance_format.errors import InvalidInputError, UnsupportedFeatureError

from .conftest import realistic_table

INDICES = [("id", "BTREE", "id_idx"), ("cat", "BITMAP", "cat_idx"), ("tags", "LABEL_LIST", "tags_idx"),
           ("email", "NGRAM", "email_idx"), ("score", "ZONEMAP", "score_zm"), ("url", "BLOOMFILTER", "url_bf"),
           ("ts", "BTREE", "ts_idx")]
FILTERS = [
    "id = 1234", "id IN (3, 2999, 3000, 9001, 23999, 24005)", "id >= 5990 AND id < 6020", "id > 23990",
    "cat = 'beta'", "cat IS NULL", "cat IN ('delta', 'epsilon') AND id < 12000", "NOT cat = 'alpha'",
    "array_has_any(tags, ['urgent', 'näive'])", "array_has_all(tags, ['red', 'blue'])",
    "email LIKE 'user42.%'", "contains(email, 'élodie')", "score = 7", "score BETWEEN 100 AND 120",
    "url = 'https://Example.com/p/7919?q=Straße1'", "ts < TIMESTAMP '2024-01-03 00:00:00'",
    "cat = 'gamma' OR score < 5",
]


def _key(table):
    return sorted(table.column("id").to_pylist())


def _build(uri: str, version: str, stable: bool, builder: str) -> None:
    data = realistic_table(24_000)
    lance.write_dataset(data.slice(0, 21_000), uri, max_rows_per_file=3_000, data_storage_version=version,
                        enable_stable_row_ids=stable)
    engine = lance if builder == "pylance" else lance_format
    ds = engine.dataset(uri)
    for column, kind, name in INDICES:
        ds.create_scalar_index(column, kind, name=name)
    # unindexed appends and deletions inside and at fragment edges
    lance.write_dataset(data.slice(21_000), uri, mode="append", max_rows_per_file=1_500)
    lance.dataset(uri).delete("id % 17 = 0 OR id IN (2999, 3000, 21000)")


def _check_answers(uri: str) -> None:
    theirs, ours = lance.dataset(uri), lance_format.dataset(uri)
    for f in FILTERS:
        indexed = _key(theirs.to_table(columns=["id"], filter=f))
        assert indexed == _key(theirs.to_table(columns=["id"], filter=f, use_scalar_index=False)), f
        assert _key(ours.to_table(columns=["id"], filter=f)) == indexed, f
        assert _key(ours.to_table(columns=["id"], filter=f, use_scalar_index=False)) == indexed, f
        assert ours.count_rows(f) == len(indexed), f


def assert_uses_indices(uri: str) -> None:
    """Both engines answer from the (remapped) indices, not by scanning everything."""
    for f, name in (("id = 1234", "id_idx"), ("cat = 'beta'", "cat_idx"), ("email LIKE 'user42.%'", "email_idx")):
        for engine in (lance, lance_format):
            plan = engine.dataset(uri).scanner(filter=f, columns=["id"]).explain_plan()
            assert "ScalarIndexQuery" in plan and name in plan, (engine.__name__, f, plan)


def _coverage(ds) -> dict[str, list[list[int]]]:
    return {d.name: [sorted(s.fragment_ids) for s in d.segments] for d in ds.describe_indices()}


def _uuids(ds) -> dict[str, list[str]]:
    return {d.name: [s.uuid for s in d.segments] for d in ds.describe_indices()}


@pytest.mark.parametrize("version,stable", [("2.0", False), ("2.2", False), ("2.1", True), ("2.2", True)])
@pytest.mark.parametrize("builder", ["pylance", "ours"])
def test_our_compaction_remaps_like_pylance(tmp_path, version, stable, builder):
    ours_uri, theirs_uri = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    _build(ours_uri, version, stable, builder)
    shutil.copytree(ours_uri, theirs_uri)
    before = _uuids(lance.dataset(ours_uri))

    metrics = lance_format.dataset(ours_uri).optimize.compact_files(target_rows_per_fragment=7_000)
    reference = lance.dataset(theirs_uri)
    expected = reference.optimize.compact_files(target_rows_per_fragment=7_000)
    assert (metrics.fragments_removed, metrics.fragments_added) == (expected.fragments_removed,
                                                                     expected.fragments_added)
    assert metrics.fragments_removed > 0

    compacted = lance.dataset(ours_uri)
    reference = lance.dataset(theirs_uri)
    assert [f.fragment_id for f in compacted.get_fragments()] == [f.fragment_id for f in reference.get_fragments()]
    # the same indices covering the same fragments, the same segments rewritten (new uuids)
    assert _coverage(compacted) == _coverage(reference)
    assert _coverage(lance_format.dataset(ours_uri)) == _coverage(reference)
    after, reference_after = _uuids(compacted), _uuids(reference)
    for name, uuids in before.items():
        assert (after[name] != uuids) == (reference_after[name] != uuids), name
    _check_answers(ours_uri)
    assert_uses_indices(ours_uri)
    # pylance reads the remapped segments' statistics (their files open)
    for _, _, name in INDICES:
        assert compacted.stats.index_stats(name)["name"] == name


@pytest.mark.parametrize("version,stable", [("2.0", False), ("2.2", True)])
def test_pylance_compaction_then_our_indexed_answers(tmp_path, version, stable):
    uri = str(tmp_path / "t.lance")
    _build(uri, version, stable, "ours")
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=7_000)
    _check_answers(uri)
    assert_uses_indices(uri)


def test_repeated_compaction_and_appends(tmp_path):
    """Compaction after compaction: remapped segments are remapped again, appended fragments join
    once optimize_indices is not run (they stay unindexed: bins never mix covered and uncovered)."""
    uri = str(tmp_path / "t.lance")
    _build(uri, "2.2", False, "pylance")
    ds = lance_format.dataset(uri)
    ds.optimize.compact_files(target_rows_per_fragment=5_000)
    ds.delete("id % 5 = 1")
    ds.optimize.compact_files(target_rows_per_fragment=9_000)
    _check_answers(uri)
    covered = set().union(*(set(s.fragment_ids) for d in ds.describe_indices() for s in d.segments
                            if d.name == "id_idx"))
    live = {f.fragment_id for f in ds.get_fragments()}
    assert covered & live
    assert live - covered  # the appended rows were compacted among themselves, still unindexed


def test_defer_index_remap_is_refused_clearly(tmp_path):
    uri = str(tmp_path / "t.lance")
    _build(uri, "2.2", False, "ours")
    ds = lance_format.dataset(uri)
    version = ds.version
    with pytest.raises(UnsupportedFeatureError, match="defer_index_remap"):
        ds.optimize.compact_files(target_rows_per_fragment=7_000, defer_index_remap=True)
    assert lance_format.dataset(uri).version == version
    _check_answers(uri)


def test_defer_index_remap_with_stable_row_ids_is_an_error_as_in_pylance(tmp_path):
    uri = str(tmp_path / "t.lance")
    _build(uri, "2.2", True, "ours")
    with pytest.raises(Exception, match="stable row IDs"):
        lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=7_000, defer_index_remap=True)
    with pytest.raises(InvalidInputError, match="stable row IDs"):
        lance_format.dataset(uri).optimize.compact_files(target_rows_per_fragment=7_000, defer_index_remap=True)


@pytest.mark.parametrize("worker", ["ours", "pylance"])
def test_distributed_compaction_remaps_at_commit(tmp_path, worker):
    """Compaction.plan / CompactionTask.execute (either engine) / Compaction.commit here: the
    commit remaps the indices covering the rewritten fragments, like compact_files."""
    import lance.optimize

    import lance_format.optimize

    uri = str(tmp_path / "t.lance")
    _build(uri, "2.2", False, "pylance")
    plan = lance_format.optimize.Compaction.plan(lance_format.dataset(uri), {"target_rows_per_fragment": 7_000})
    assert plan.num_tasks() > 0
    work = lance if worker == "pylance" else lance_format
    results = [(lance.optimize if worker == "pylance" else lance_format.optimize).CompactionTask.from_json(
        t.json()).execute(work.dataset(uri)).json() for t in plan.tasks]
    lance_format.optimize.Compaction.commit(lance_format.dataset(uri),
                                            [lance_format.optimize.RewriteResult.from_json(r) for r in results])
    live = {f.fragment_id for f in lance.dataset(uri).get_fragments()}
    assert set(_coverage(lance.dataset(uri))["id_idx"][0]) <= live
    _check_answers(uri)
    assert_uses_indices(uri)
