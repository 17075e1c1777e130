"""Merge and Project commits that may make a column non-null (no ``preserves_nullability``) conflict,
in either order, with a concurrent commit that writes rows (a stale append's fragments would read
as nulls in a required column), as in pylance; the flag itself is set as pylance sets it."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import RetryableCommitConflictError

VISITS = pa.table({"url": ["https://example.com/a", "https://example.com/b"], "hits": pa.array([3, 1], pa.int32())})
MORE = pa.table({"url": ["https://example.org/"], "hits": pa.array([7], pa.int32())})


@pytest.fixture(params=["pylance", "ours"])
def engine(request):
    return lance if request.param == "pylance" else lance_format


def test_merge_flag_like_pylance(engine, tmp_path):
    uri = str(tmp_path / "t")
    engine.write_dataset(VISITS, uri)
    engine.dataset(uri).add_columns({"one": "1"})          # a literal: a non-null column
    engine.dataset(uri).add_columns({"copied": "hits"})    # nullable
    flags = [engine.dataset(uri).read_transaction(v).operation.preserves_nullability for v in (2, 3)]
    assert flags == [False, True]


def test_stale_append_after_non_null_merge_is_preempted(engine, tmp_path):
    uri = str(tmp_path / "t")
    engine.write_dataset(VISITS, uri)
    staged = engine.fragment.write_fragments(MORE, uri, mode="append")
    engine.dataset(uri).add_columns({"one": "1"})
    with pytest.raises(OSError, match="preempted"):
        engine.LanceDataset.commit(uri, engine.LanceOperation.Append(staged), read_version=1)
    assert engine.dataset(uri).count_rows() == 2


def test_project_tightening_after_append_is_preempted(engine, tmp_path):
    uri = str(tmp_path / "t")
    engine.write_dataset(VISITS, uri)
    engine.dataset(uri).alter_columns({"path": "hits", "nullable": False})
    tightening = engine.dataset(uri).read_transaction(2).operation
    engine.write_dataset(MORE, uri, mode="append")
    relax = engine.LanceOperation.Project(schema=tightening.schema, preserves_nullability=False)
    with pytest.raises(OSError, match="preempted"):
        engine.LanceDataset.commit(uri, relax, read_version=2)
    keep = engine.LanceOperation.Project(schema=tightening.schema, preserves_nullability=True)
    assert engine.LanceDataset.commit(uri, keep, read_version=2).version == 4


def test_ours_is_retryable(tmp_path):
    uri = str(tmp_path / "t")
    lance_format.write_dataset(VISITS, uri)
    staged = lance_format.fragment.write_fragments(MORE, uri, mode="append")
    lance_format.dataset(uri).add_columns({"one": "1"})
    with pytest.raises(RetryableCommitConflictError, match="may change which columns accept nulls"):
        lance_format.LanceDataset.commit(uri, lance_format.LanceOperation.Append(staged), read_version=1)
