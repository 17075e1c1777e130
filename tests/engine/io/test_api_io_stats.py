"""``LanceDataset.io_stats_snapshot`` / ``io_stats_incremental`` and ``config`` against pylance 14.

Each test runs the same calls on both engines and checks the same facts about what they count:
numbers of operations and bytes are each engine's own (this engine caches a dataset's opened
files and coalesces other ranges), but which calls count, what resets, and which datasets share
counts must agree.
"""

from __future__ import annotations

import inspect
import threading
from types import ModuleType

import lance
import pyarrow as pa
import pytest

import lance_format

TABLE = pa.table({"x": list(range(3000)), "s": [f"value-{i}" for i in range(3000)]})


@pytest.fixture(params=[lance_format, lance], ids=["ours", "pylance"])
def engine(request) -> ModuleType:
    return request.param


def _numbers(stats) -> tuple[int, int, int, int]:
    return stats.read_iops, stats.read_bytes, stats.write_iops, stats.written_bytes


def test_signatures_match_pylance():
    for name in ("io_stats_snapshot", "io_stats_incremental", "config"):
        ours, theirs = getattr(lance_format.LanceDataset, name), getattr(lance.LanceDataset, name)
        assert callable(ours) and not isinstance(inspect.getattr_static(lance_format.LanceDataset, name), property)
        assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters) == ["self"]


def test_a_write_counts_writes_and_no_reads(tmp_path, engine):
    ds = engine.write_dataset(TABLE, str(tmp_path / "t"), max_rows_per_file=1000)
    read_iops, read_bytes, write_iops, written = _numbers(ds.io_stats_snapshot())
    assert (read_iops, read_bytes) == (0, 0)
    # three data files, a transaction and a manifest at least, and at least the data's size
    assert write_iops >= 5 and written >= TABLE.nbytes // 4


def test_snapshot_keeps_and_incremental_resets(tmp_path, engine):
    engine.write_dataset(TABLE, str(tmp_path / "t"), max_rows_per_file=1000)
    ds = engine.dataset(str(tmp_path / "t"))
    opened = _numbers(ds.io_stats_snapshot())
    assert opened[0] >= 1 and opened[1] > 0 and opened[2:] == (0, 0)  # the manifest was read
    assert ds.to_table() == TABLE
    after_read = _numbers(ds.io_stats_snapshot())
    assert after_read[0] > opened[0] and after_read[1] > opened[1] and after_read[2:] == (0, 0)
    assert _numbers(ds.io_stats_snapshot()) == after_read  # a snapshot resets nothing
    assert _numbers(ds.io_stats_incremental()) == after_read
    assert _numbers(ds.io_stats_incremental()) == (0, 0, 0, 0)
    assert _numbers(ds.io_stats_snapshot()) == (0, 0, 0, 0)
    ds.count_rows()  # answered from the manifest
    assert _numbers(ds.io_stats_incremental()) == (0, 0, 0, 0)


def test_reads_count_on_the_dataset_that_made_them(tmp_path, engine):
    uri = str(tmp_path / "t")
    engine.write_dataset(TABLE, uri, max_rows_per_file=1000)
    first, second = engine.dataset(uri), engine.dataset(uri)
    second.io_stats_incremental()
    first.to_table(columns=["s"])
    assert first.io_stats_snapshot().read_bytes > 0
    assert _numbers(second.io_stats_snapshot()) == (0, 0, 0, 0)  # its own store: nothing read through it
    # a checked out version shares the store of the dataset it came from
    older = second.checkout_version(1)
    older.take([5, 2500])
    assert older.io_stats_snapshot().read_iops > 0
    assert _numbers(second.io_stats_snapshot()) == _numbers(older.io_stats_snapshot())


def test_reads_on_other_threads_count(tmp_path, engine):
    engine.write_dataset(TABLE, str(tmp_path / "t"), max_rows_per_file=500)
    ds = engine.dataset(str(tmp_path / "t"))
    ds.io_stats_incremental()
    fragments = ds.get_fragments()
    threads = [threading.Thread(target=f.to_table) for f in fragments]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = ds.io_stats_snapshot()
    assert stats.read_iops >= len(fragments) and stats.read_bytes > 0


def test_writes_through_a_dataset_count_on_it(tmp_path, engine):
    ds = engine.write_dataset(TABLE, str(tmp_path / "t"))
    ds.io_stats_incremental()
    ds.insert(pa.table({"x": [1], "s": ["one"]}))
    inserted = ds.io_stats_incremental()
    assert inserted.write_iops >= 3 and inserted.written_bytes > 0  # data file, transaction, manifest
    ds.update_config({"owner": "sales"})
    configured = ds.io_stats_incremental()
    assert configured.write_iops >= 2 and configured.written_bytes > 0
    assert ds.config() == {"owner": "sales"}
    ds.delete("x < 10")
    assert ds.io_stats_incremental().write_iops >= 3  # deletion file, transaction, manifest


def test_stats_are_read_only_values(tmp_path, engine):
    ds = engine.write_dataset(TABLE, str(tmp_path / "t"))
    stats = ds.io_stats_snapshot()
    with pytest.raises(AttributeError):
        stats.read_iops = 5
    assert type(stats).__name__ == "IOStats"
    assert repr(stats) == (f"IOStats(read_iops={stats.read_iops}, read_bytes={stats.read_bytes}, "
                           f"write_iops={stats.write_iops}, write_bytes={stats.written_bytes})")
    ds.io_stats_incremental()
    assert stats.write_iops > 0  # a snapshot taken earlier does not change


def test_config_is_a_method_returning_a_plain_dict(tmp_path, engine):
    ds = engine.write_dataset(TABLE, str(tmp_path / "t"))
    assert type(ds.config()) is dict and ds.config() == {}
    ds.update_config({"a": "1", "b": "2"})
    got = ds.config()
    got["c"] = "3"  # a copy: changing it changes nothing
    assert ds.config() == {"a": "1", "b": "2"} == engine.dataset(str(tmp_path / "t")).config()


def test_an_object_store_table_counts_its_requests(tmp_path, engine):
    # memory:// reads go through ranged requests, not a memory map: file footers count too
    uri = f"memory://io-stats-{tmp_path.name}"
    ds = engine.write_dataset(TABLE, uri)
    assert ds.io_stats_incremental().write_iops >= 3
    assert ds.to_table() == TABLE
    read = ds.io_stats_incremental()
    assert read.read_iops >= 2 and read.read_bytes > 0 and read.write_iops == 0


def test_deletes_count_as_writes_of_no_bytes(tmp_path, engine):
    from datetime import timedelta

    ds = engine.write_dataset(TABLE, str(tmp_path / "t"), max_rows_per_file=500)
    ds.insert(TABLE.slice(0, 10))
    ds.io_stats_incremental()
    removed = ds.cleanup_old_versions(older_than=timedelta(0))
    stats = ds.io_stats_incremental()
    assert removed.old_versions == 1
    assert stats.write_iops >= 1 and stats.written_bytes == 0  # version 1's manifest and transaction
