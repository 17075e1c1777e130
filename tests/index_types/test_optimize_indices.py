"""``optimize.optimize_indices`` against pylance 14.0.2: on twin tables, our call and pylance's
leave the same segments (coverage per segment, which segments were replaced, versions), and then
pylance's indexed answers equal its brute-force scan and ours equal our full scan."""

from __future__ import annotations

import shutil

import lance
import pytest

import lance_format
from lance_format.errors import IndexNotFoundError, InvalidInputError

from .conftest import realistic_table
from .test_index_compaction import INDICES, _check_answers, assert_uses_indices


def _build(uri: str, version: str, stable: bool) -> None:
    data = realistic_table(24_000)
    lance.write_dataset(data.slice(0, 12_000), uri, max_rows_per_file=4_000, data_storage_version=version,
                        enable_stable_row_ids=stable)
    ds = lance_format.dataset(uri)
    for column, kind, name in INDICES:
        ds.create_scalar_index(column, kind, name=name, **({"rows_per_zone": 1000} if kind == "ZONEMAP" else {}))
    lance_format.write_dataset(data.slice(12_000, 6_000), uri, mode="append", max_rows_per_file=3_000)
    lance.dataset(uri).delete("id % 19 = 0 OR id = 12000")


def _segments(uri: str) -> dict[str, list[tuple[list[int], int]]]:
    ds = lance.dataset(uri)
    out = {}
    for d in ds.describe_indices():
        out[d.name] = [(sorted(s.fragment_ids), s.dataset_version_at_last_update) for s in d.segments]
    return out


def _uuids(uri: str) -> dict[str, list[str]]:
    return {d.name: [s.uuid for s in d.segments] for d in lance.dataset(uri).describe_indices()}


def _twins(tmp_path, version, stable):
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    _build(ours, version, stable)
    shutil.copytree(ours, theirs)
    return ours, theirs


def _same_outcome(ours: str, theirs: str, before: dict[str, list[str]]) -> None:
    assert lance.dataset(ours).version == lance.dataset(theirs).version
    assert _segments(ours) == _segments(theirs)
    after_ours, after_theirs = _uuids(ours), _uuids(theirs)
    for name, uuids in before.items():
        kept_ours = [u in after_ours[name] for u in uuids]
        kept_theirs = [u in after_theirs[name] for u in uuids]
        assert kept_ours == kept_theirs, name
    _check_answers(ours)
    assert_uses_indices(ours)


CALLS = [{}, {"num_indices_to_merge": 0}, {"retrain": True}, {"index_names": ["id_idx", "tags_idx"]}]


@pytest.mark.parametrize("version,stable", [("2.0", False), ("2.2", False), ("2.2", True)])
@pytest.mark.parametrize("kwargs", CALLS, ids=["default", "delta", "retrain", "named"])
def test_optimize_indices_like_pylance(tmp_path, version, stable, kwargs):
    ours, theirs = _twins(tmp_path, version, stable)
    before = _uuids(ours)
    lance_format.dataset(ours).optimize.optimize_indices(**kwargs)
    lance.dataset(theirs).optimize.optimize_indices(**kwargs)
    _same_outcome(ours, theirs, before)


@pytest.mark.parametrize("stable", [False, True])
def test_delta_segments_then_merges(tmp_path, stable):
    """Deltas pile up (num_indices_to_merge=0), a call with nothing new commits nothing, and
    num_indices_to_merge=2 merges the last two segments, as pylance does."""
    ours, theirs = _twins(tmp_path, "2.2", stable)
    data = realistic_table(24_000)
    for uri, engine in ((ours, lance_format), (theirs, lance)):
        engine.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
        lance.write_dataset(data.slice(18_000), uri, mode="append")
        engine.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
    before = _uuids(ours)
    version = lance.dataset(ours).version
    lance_format.dataset(ours).optimize.optimize_indices()
    assert lance.dataset(ours).version == version  # nothing unindexed: no commit, as pylance
    for uri, engine in ((ours, lance_format), (theirs, lance)):
        engine.dataset(uri).optimize.optimize_indices(num_indices_to_merge=2)
    _same_outcome(ours, theirs, before)
    # with stable row ids an older segment covering a fragment with deletions is merged too
    assert all(len(s) == (1 if stable else 2) for s in _segments(ours).values())


def test_optimize_then_compact_then_pylance_optimizes(tmp_path):
    ours, _ = _twins(tmp_path, "2.2", False)
    ds = lance_format.dataset(ours)
    ds.optimize.optimize_indices()
    ds.optimize.compact_files(target_rows_per_fragment=8_000)
    lance_format.write_dataset(realistic_table(24_000).slice(18_000), ours, mode="append")
    lance.dataset(ours).optimize.optimize_indices()
    _check_answers(ours)


def test_bad_arguments(tmp_path):
    uri = str(tmp_path / "t.lance")
    _build(uri, "2.2", False)
    ds = lance_format.dataset(uri)
    with pytest.raises(IndexNotFoundError, match="nope"):
        ds.optimize.optimize_indices(index_names=["nope"])
    with pytest.raises(InvalidInputError, match="num_indices_to_merge"):
        ds.optimize.optimize_indices(num_indices_to_merge=-1)
    assert lance.dataset(uri).version == ds.version
