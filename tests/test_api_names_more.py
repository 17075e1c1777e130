"""pylance's remaining ``lance.dataset`` / ``lance`` names, compared with pylance itself."""

from __future__ import annotations

import importlib
import sys
import typing

import lance
import lance.dataset  # noqa: F401 - the module, reached through sys.modules (lance.dataset is also a function)
import pyarrow as pa
import pytest

import lance_format

theirs_module = sys.modules["lance.dataset"]
ours_module = importlib.import_module("lance_format.dataset")

TYPED_DICTS = ("AlterColumn", "DatasetStats", "DeleteResult", "UpdateResult", "ExecuteResult", "Tag", "Branch",
               "Version", "VersionRef")


@pytest.mark.parametrize("name", TYPED_DICTS)
def test_typed_dicts_have_pylance_keys(name):
    ours, theirs = getattr(ours_module, name), getattr(theirs_module, name)
    assert list(ours.__annotations__) == list(theirs.__annotations__)
    assert ours.__required_keys__ == theirs.__required_keys__
    assert typing.is_typeddict(ours)


def test_alter_column_is_accepted_by_alter_columns(tmp_path):
    ds = lance_format.write_dataset(pa.table({"a": [1, 2]}), str(tmp_path / "t"))
    change = ours_module.AlterColumn(path="a", name="b")
    ds.alter_columns(change)
    assert lance.dataset(str(tmp_path / "t")).schema.names == ["b"]


@pytest.mark.parametrize("addrs", [[], [0, 2, 4], [5, 5, 3], [0, 2, 4, (1 << 32) + 5, (7 << 32)],
                                   list(range(100_000)), list(range(0, 300_000, 3)), [(3 << 32) + 1, 9]])
def test_serialize_row_addrs_bytes_equal_pylance(addrs):
    assert ours_module.serialize_row_addrs(addrs) == theirs_module.serialize_row_addrs(addrs)
    assert ours_module.serialize_row_addrs(iter(addrs)) == theirs_module.serialize_row_addrs(addrs)


def test_sql_query_and_cleanup_classes_exported():
    from lance_format.dataset.maintenance.cleanup import CleanupExplanation, CleanupStats
    from lance_format.dataset.sql_query import SqlQuery, SqlQueryBuilder

    assert ours_module.SqlQuery is SqlQuery and ours_module.SqlQueryBuilder is SqlQueryBuilder
    assert ours_module.CleanupStats is CleanupStats and ours_module.CleanupExplanation is CleanupExplanation
    public = {n for n in dir(theirs_module.CleanupStats) if not n.startswith("_")}
    assert public <= set(CleanupStats.__dataclass_fields__)
    public = {n for n in dir(theirs_module.CleanupExplanation) if not n.startswith("_")}
    assert public <= set(CleanupExplanation.__dataclass_fields__)


def test_sql_query_builder_from_dataset_runs(tmp_path):
    ds = lance_format.write_dataset(pa.table({"a": [1, 2, 3]}), str(tmp_path / "t"))
    query = ds.sql("SELECT a FROM dataset WHERE a > 1").build()
    assert isinstance(query, ours_module.SqlQuery)
    assert pa.Table.from_batches(query.to_batch_records()).column("a").to_pylist() == [2, 3]


def test_cleanup_referenced_branch_has_pylance_fields():
    public = {n for n in dir(lance.CleanupReferencedBranch) if not n.startswith("_")}
    branch = lance_format.CleanupReferencedBranch(name="b", referenced_version=2, cleanup_candidate=False)
    assert public == {n for n in dir(branch) if not n.startswith("_")}


def test_simd_info_equals_pylance():
    assert lance_format.simd_info() == lance.simd_info()
