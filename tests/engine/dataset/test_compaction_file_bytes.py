"""``max_bytes_per_file`` of compaction (``compact_files`` and the distributed ``Compaction``)
and of writes, call for call against pylance 14: a file is cut once the bytes its writer has
written reach the limit, looked at after each batch (each row group of a legacy file), so rows
a writer still buffers do not count."""

from __future__ import annotations

from types import ModuleType

import lance
import lance.optimize
import numpy as np
import pyarrow as pa
import pytest

import lance_format
import lance_format.optimize

ENGINES = [lance, lance_format]


def _table(engine: ModuleType, uri: str, fragments: int, rows: int, width: int, version: str):
    for i in range(fragments):
        data = pa.table({"a": pa.array(np.arange(i * rows, (i + 1) * rows), pa.int64()),
                         "s": pa.array([b"y" * width] * rows)})
        engine.write_dataset(data, uri, mode="append", data_storage_version=version)
    return engine.dataset(uri)


def _shape(ds) -> tuple[list[int], list[int]]:
    return [f.count_rows() for f in ds.get_fragments()], ds.to_table()["a"].to_pylist()


def _compacted(engine: ModuleType, uri: str, version: str, rows: int, width: int, **options):
    ds = _table(engine, uri, 4, rows, width, version)
    metrics = ds.optimize.compact_files(**options)
    counts, values = _shape(engine.dataset(uri))
    assert values == list(range(4 * rows))
    return [getattr(metrics, k) for k in ("fragments_removed", "fragments_added", "files_removed", "files_added")], counts


@pytest.mark.parametrize("max_bytes", [1, 100_000, 1 << 40])
def test_legacy_files_cut_after_the_row_group_that_reaches_the_limit(tmp_path, max_bytes):
    results = [_compacted(e, str(tmp_path / e.__name__), "legacy", 3000, 40, target_rows_per_fragment=7000,
                          max_bytes_per_file=max_bytes) for e in ENGINES]
    assert results[0] == results[1]
    if max_bytes == 1:  # one file per row group of 1024 rows
        assert results[1][1][:3] == [1024, 1024, 1024]
    if max_bytes == 1 << 40:
        assert results[1][1] == [12000]


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_v2_rows_still_buffered_in_pages_do_not_count(tmp_path, version):
    """Small rows stay in the writer's page buffers until the file is finished: nothing is cut."""
    results = [_compacted(e, str(tmp_path / e.__name__), version, 2000, 8, target_rows_per_fragment=5000,
                          max_bytes_per_file=1) for e in ENGINES]
    assert results[0] == results[1]
    assert results[1][1] == [8000]


def test_v2_file_cut_after_the_batch_that_flushed_a_page(tmp_path):
    """Two 4500-row batches (one per source fragment) of 1 KiB values fill an 8 MiB page: the
    file is cut after the second, and the chunk's remaining rows start a new file."""
    results = [_compacted(e, str(tmp_path / e.__name__), "2.0", 4500, 1024, target_rows_per_fragment=20000,
                          max_bytes_per_file=1 << 20) for e in ENGINES]
    assert results[0] == results[1]
    assert results[1][1] == [9000, 9000]


def _distributed(engine: ModuleType, uri: str, max_bytes: int):
    ds = _table(engine, uri, 4, 3000, 40, "legacy")
    plan = engine.optimize.Compaction.plan(ds, {"target_rows_per_fragment": 7000, "max_bytes_per_file": max_bytes})
    results = [task.execute(ds) for task in plan.tasks]
    added = [len(r.new_fragments) for r in results]
    metrics = engine.optimize.Compaction.commit(ds, results)
    return added, metrics.fragments_added, _shape(engine.dataset(uri))


def test_distributed_tasks_cut_files_by_bytes_like_pylance(tmp_path):
    ours = _distributed(lance_format, str(tmp_path / "ours"), 100_000)
    assert ours == _distributed(lance, str(tmp_path / "theirs"), 100_000)
    assert ours[1] > 2


def test_distributed_task_of_the_other_engine_cuts_alike(tmp_path):
    """A pylance plan carrying ``max_bytes_per_file`` executed here writes pylance's files."""
    uri = str(tmp_path / "t")
    ds = _table(lance, uri, 4, 3000, 40, "legacy")
    plan = lance.optimize.Compaction.plan(ds, {"target_rows_per_fragment": 7000, "max_bytes_per_file": 100_000})
    ours = [lance_format.optimize.CompactionTask.from_json(t.json()).execute(lance_format.dataset(uri))
            for t in lance_format.optimize.CompactionPlan.from_json(plan.json()).tasks]
    theirs = [t.execute(ds) for t in plan.tasks]
    assert [[f.physical_rows for f in r.new_fragments] for r in ours] == \
        [[f.physical_rows for f in r.new_fragments] for r in theirs]


@pytest.mark.parametrize("version", ["legacy", "2.0"])
def test_write_dataset_cuts_files_by_written_bytes(tmp_path, version):
    def written(engine: ModuleType) -> list[int]:
        data = pa.table({"s": pa.array([b"z" * 1024] * 20000)})
        ds = engine.write_dataset(data, str(tmp_path / engine.__name__), max_bytes_per_file=1 << 20,
                                  data_storage_version=version)
        return [f.count_rows() for f in ds.get_fragments()]

    assert written(lance_format) == written(lance)


def _columns(i: int, rows: int, kind: str) -> pa.Table:
    cols = {}
    if "s" in kind:  # 23-byte distinct strings: mini-block pages, decoded buffers larger than the values
        cols["s"] = pa.array([b"%023d" % ((i * rows + j) * 7919) for j in range(rows)])
    if "a" in kind:
        cols["a"] = pa.array(np.arange(i * rows, (i + 1) * rows) * 1000003 % (1 << 40), pa.int64())
    if "f" in kind:
        cols["f"] = pa.array(np.random.default_rng(i).random(rows))
    if "n" in kind:  # nulls: definition levels, and a validity bitmap in every decoded batch
        cols["n"] = pa.array([None if j % 5 == 0 else f"x{j}" for j in range(rows)])
    if "w" in kind:
        cols["w"] = pa.array([None if (j * 13 + i) % 5 == 0 else f"{j * 7919 + i:020d}" for j in range(rows)])
    return pa.table(cols)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("rows, fragments, kind", [
    (50000, 4, "s"), (50000, 4, "as"), (300000, 4, "a"), (250000, 5, "af"), (60000, 6, "sn"), (60000, 6, "w"),
])
def test_v2_1_cut_where_pylance_decoded_memory_flushes_a_page(tmp_path, version, rows, fragments, kind):
    """Where 2.1/2.2 compactions cut files by bytes depends on the memory pylance's decoder
    allocated for the batches it read (strings: twice the chunks' bytes, grown like a Vec):
    ours, on tables written by either engine, cut at pylance's rows."""
    def compacted(writer: ModuleType, compactor: ModuleType, uri: str) -> list[int]:
        for i in range(fragments):
            writer.write_dataset(_columns(i, rows, kind), uri, mode="append", data_storage_version=version)
        compactor.dataset(uri).optimize.compact_files(target_rows_per_fragment=10**8, max_bytes_per_file=1 << 20)
        assert compactor.dataset(uri).to_table().equals(pa.concat_tables([_columns(i, rows, kind)
                                                                         for i in range(fragments)]))
        return [f.count_rows() for f in compactor.dataset(uri).get_fragments()]

    theirs = compacted(lance, lance, str(tmp_path / "theirs"))
    assert len(theirs) > 1
    assert compacted(lance_format, lance_format, str(tmp_path / "ours")) == theirs
    assert compacted(lance, lance_format, str(tmp_path / "mixed")) == theirs
