"""Tables in memory (``memory://``): every write path, racing commits, tags, cleanup."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import DatasetNotFoundError, InvalidInputError
from lance_format.io import ObjectStore
from tests import storage_contract as contract


@pytest.fixture
def uri() -> str:
    return f"memory://t-{uuid.uuid4().hex[:12]}/table.lance"


def test_every_write_path_in_memory_matches_local(uri, tmp_path):
    contract.check_history_matches_local(uri, None, str(tmp_path / "local.lance"))


def test_racing_puts_have_one_winner(uri):
    contract.check_racing_puts(ObjectStore(uri))


def test_concurrent_committers_lose_no_update(uri):
    contract.check_concurrent_committers(uri, None, writers=4)


def test_tags_and_pickling(uri):
    contract.check_tags(uri, None)
    contract.check_pickles(ObjectStore(uri + "-p"))


def test_tables_are_separate_and_nothing_on_disk(uri, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lance_format.write_dataset(pa.table({"id": [1, 2]}), uri)
    with pytest.raises(DatasetNotFoundError):
        lance_format.dataset(uri + "x")
    with pytest.raises(DatasetNotFoundError):
        lance_format.dataset(uri.rsplit("/", 1)[0] + "/other.lance")
    assert list(tmp_path.iterdir()) == []
    store = ObjectStore(uri)
    names = sorted(store.relative_path(i) for i in store.backend.list_prefix(store.root))
    assert any(n.startswith("_versions/") for n in names) and any(n.startswith("data/") for n in names)
    assert not [n for n in names if "hint" in n]  # like pylance on object stores


def test_memory_options_are_validated():
    ObjectStore("memory://x", {"timeout": "5s"})  # generic client keys are accepted
    with pytest.raises(InvalidInputError, match="aws_region"):
        ObjectStore("memory://x", {"aws_region": "us-east-1"})
    with pytest.raises(InvalidInputError, match="memory://name"):
        ObjectStore("memory://../x", {})


def test_memory_stores_like_pylance():
    """memory:// without a name is a new store each time; create at a used name starts it over."""
    import lance

    data = pa.table({"id": [1, 2, 3]})
    for engine in (lance_format, lance):
        first, second = engine.write_dataset(data, "memory://"), engine.write_dataset(data, "memory://")
        first.delete("id = 1")
        assert (first.count_rows(), second.count_rows()) == (2, 3)
        first.merge_insert("id").when_not_matched_insert_all().execute(pa.table({"id": [7]}))
        assert first.to_table()["id"].to_pylist() == [2, 3, 7]
        old = engine.write_dataset(data, "memory://named-twice")
        new = engine.write_dataset(pa.table({"id": [9]}), "memory://named-twice")
        assert (old.count_rows(), new.count_rows(), old.version, new.version) == (3, 1, 1, 1)


def test_spark_tasks_refuse_memory_tables(uri):
    from lance_format.errors import UnsupportedFeatureError
    from lance_format.spark.common import task_store

    with pytest.raises(UnsupportedFeatureError, match="other processes"):
        task_store(uri, ())
