"""``batch_udf(checkpoint_file=...)`` against pylance 14: an ``add_columns`` whose UDF raises
midway leaves a checkpoint; run again with the same file, only the batches not saved are
computed, the finished fragment's data file is reused, and the checkpoint is removed."""

from __future__ import annotations

import os
import re
import sqlite3
from contextlib import closing
from types import ModuleType

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.udf import BatchUDFCheckpoint

ENGINES = [lance, lance_format]
OUTPUT = pa.schema([pa.field("double", pa.int64())])


def _doubling_udf(engine: ModuleType, checkpoint: str, calls: list, fail_at: int, declare_schema: bool, *,
                  fail: bool):
    """A checkpointed UDF adding ``double``; it records each batch's first id in ``calls`` and,
    with ``fail``, raises on call number ``fail_at``."""
    @engine.batch_udf(output_schema=OUTPUT if declare_schema else None, checkpoint_file=checkpoint)
    def double(batch):
        calls.append(batch["id"][0].as_py())
        if fail and len(calls) == fail_at:
            raise RuntimeError("the UDF failed")
        return pa.record_batch([pc.multiply(batch["id"], 2)], names=["double"])
    return double


def _run(engine: ModuleType, tmp_path, fail_at: int, declare_schema: bool = True) -> list:
    uri, checkpoint = str(tmp_path / engine.__name__), str(tmp_path / f"{engine.__name__}.sqlite")
    ds = engine.write_dataset(pa.table({"id": list(range(30))}), uri, max_rows_per_file=10)
    calls: list[int] = []

    with pytest.raises((RuntimeError, OSError), match="the UDF failed"):
        ds.add_columns(_doubling_udf(engine, checkpoint, calls, fail_at, declare_schema, fail=True), read_columns=["id"], batch_size=4)
    with closing(sqlite3.connect(checkpoint)) as conn:
        saved = (conn.execute("SELECT fragment_id, batch_index FROM batches ORDER BY 1, 2").fetchall(),
                 [r[0] for r in conn.execute("SELECT fragment_id FROM fragments")])
    first = (list(calls), saved, engine.dataset(uri).version, len(os.listdir(os.path.join(uri, "data"))))
    calls.clear()
    engine.dataset(uri).add_columns(
        _doubling_udf(engine, checkpoint, calls, fail_at, declare_schema, fail=False), read_columns=["id"], batch_size=4)
    second = (list(calls), os.path.exists(checkpoint), len(os.listdir(os.path.join(uri, "data"))))
    return [first, second, lance.dataset(uri).to_table(), lance_format.dataset(uri).to_table()]


@pytest.mark.parametrize("fail_at", [2, 5, 8])
def test_resume_after_a_failing_udf_like_pylance(tmp_path, fail_at):
    ours = _run(lance_format, tmp_path, fail_at)
    assert ours == _run(lance, tmp_path, fail_at)
    assert ours[2] == ours[3] == pa.table({"id": list(range(30)), "double": [2 * i for i in range(30)]})
    assert ours[1][1] is False  # the checkpoint is removed after the commit


def test_finished_fragment_is_reused_not_recomputed(tmp_path):
    (calls, saved, version, files), (resumed, exists, files_after), *_ = _run(lance_format, tmp_path, 5)
    assert calls == [0, 4, 8, 10, 14] and saved == ([(1, 0)], [0]) and version == 1
    assert files == 4  # the three fragments and fragment 0's new file, kept for the next run
    assert resumed == [14, 18, 20, 24, 28]  # fragment 1's first batch came from the checkpoint
    assert files_after == 6


def test_checkpoint_file_has_pylances_tables(tmp_path):
    ours, theirs = str(tmp_path / "ours.sqlite"), str(tmp_path / "theirs.sqlite")
    BatchUDFCheckpoint(ours)
    lance.udf.BatchUDFCheckpoint(theirs)

    def tables(path: str) -> list:
        with closing(sqlite3.connect(path)) as conn:
            return conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()

    assert [t[0] for t in tables(ours)] == [t[0] for t in tables(theirs)] == ["batches", "fragments"]
    checkpoint = BatchUDFCheckpoint(ours)
    batch = pa.record_batch([pa.array([1, 2])], names=["x"])
    checkpoint.insert_batch(checkpoint.BatchInfo(3, 0), batch)
    assert checkpoint.get_batch(checkpoint.BatchInfo(3, 0)) == batch
    assert checkpoint.get_batch(checkpoint.BatchInfo(3, 1)) is None
    checkpoint.insert_fragment(3, "{}")
    assert checkpoint.get_fragment(3) == "{}" and checkpoint.get_batch(checkpoint.BatchInfo(3, 0)) is None
    checkpoint.cleanup()
    assert not os.path.exists(ours)


# -- a checkpoint left by one engine, resumed by the other ------------------------------------
def _interrupted_then_resumed(tmp_path, first: ModuleType, second: ModuleType, fail_at: int, table_kind: str,
                              declare_schema: bool = True) -> tuple:
    """``first`` fails at its ``fail_at``-th UDF call; ``second`` resumes from the checkpoint."""
    uri, checkpoint = str(tmp_path / "table"), str(tmp_path / "checkpoint.sqlite")
    write = {"enable_stable_row_ids": True} if table_kind == "stable_row_ids" else {}
    ds = first.write_dataset(pa.table({"id": list(range(30))}), uri, max_rows_per_file=10, **write)
    if table_kind != "plain":
        ds.delete("id % 3 = 0")
        ds = first.dataset(uri)
    calls: list[int] = []

    with pytest.raises((RuntimeError, OSError), match="the UDF failed"):
        ds.add_columns(_doubling_udf(first, checkpoint, calls, fail_at, declare_schema, fail=True), read_columns=["id"], batch_size=4)
    with closing(sqlite3.connect(checkpoint)) as conn:
        saved = (conn.execute("SELECT fragment_id, batch_index FROM batches ORDER BY 1, 2").fetchall(),
                 [r[0] for r in conn.execute("SELECT fragment_id FROM fragments ORDER BY 1")])
    first_calls = list(calls)
    calls.clear()
    second.dataset(uri).add_columns(
        _doubling_udf(second, checkpoint, calls, fail_at, declare_schema, fail=False), read_columns=["id"], batch_size=4)
    return first_calls, saved, list(calls), os.path.exists(checkpoint), uri


@pytest.mark.parametrize("table_kind", ["plain", "deletions", "stable_row_ids"])
@pytest.mark.parametrize("fail_at", [2, 5, 7])
@pytest.mark.parametrize("first,second", [(lance, lance_format), (lance_format, lance)], ids=["theirs-ours", "ours-theirs"])
def test_a_checkpoint_resumes_across_engines(tmp_path, first, second, fail_at, table_kind):
    first_calls, saved, resumed, exists, uri = _interrupted_then_resumed(
        tmp_path / "cross", first, second, fail_at, table_kind)
    # the same engine resuming its own checkpoint calls the UDF for exactly the same batches
    same = _interrupted_then_resumed(tmp_path / "same", second, second, fail_at, table_kind)
    assert (first_calls, saved, resumed, exists) == same[:4]
    # nothing that was checkpointed is computed again: only the failed call's batch and later ones
    assert resumed[0] == first_calls[-1] and not set(resumed[1:]) & set(first_calls)
    assert exists is False
    ids = [i for i in range(30) if table_kind == "plain" or i % 3]
    expected = pa.table({"id": ids, "double": [2 * i for i in ids]})
    assert lance.dataset(uri).to_table() == lance_format.dataset(uri).to_table() == expected
    assert lance.dataset(uri).version == lance_format.dataset(uri).version == (2 if table_kind == "plain" else 3)


@pytest.mark.parametrize("first,second", [(lance, lance_format), (lance_format, lance)], ids=["theirs-ours", "ours-theirs"])
def test_an_inferred_output_schema_resumes_across_engines(tmp_path, first, second):
    # without a declared schema both engines call the UDF once more, on the first row, to learn it
    first_calls, saved, resumed, exists, uri = _interrupted_then_resumed(tmp_path, first, second, 6, "plain",
                                                                         declare_schema=False)
    assert first_calls == [0, 0, 4, 8, 10, 14] and saved == ([(1, 0)], [0])
    assert resumed == [0, 14, 18, 20, 24, 28] and exists is False
    assert lance_format.dataset(uri).to_table().column("double").to_pylist() == [2 * i for i in range(30)]


def _normalized_fragment_rows(path: str) -> list:
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT fragment_id, data FROM fragments ORDER BY 1").fetchall()
    # file names and deletion file ids are random: everything else must be the same text
    return [(fid, re.sub(r'"[01]{24}[0-9a-f]{26}\.lance"', '"NAME"', re.sub(r'"id":\d{6,}', '"id":N', data)))
            for fid, data in rows]


@pytest.mark.parametrize("table_kind", ["plain", "deletions", "stable_row_ids"])
def test_a_finished_fragment_is_saved_as_pylances_core_writes_it(tmp_path, table_kind):
    rows = {}
    for engine in ENGINES:
        checkpoint = str(tmp_path / engine.__name__ / "kept.sqlite")
        uri = str(tmp_path / engine.__name__ / "again")
        write = {"enable_stable_row_ids": True} if table_kind == "stable_row_ids" else {}
        ds = engine.write_dataset(pa.table({"id": list(range(20))}), uri, max_rows_per_file=10, **write)
        if table_kind != "plain":
            ds.delete("id % 3 = 0")
            ds = engine.dataset(uri)

        @engine.batch_udf(output_schema=OUTPUT, checkpoint_file=checkpoint)
        def failing_on_fragment_1(batch):
            if batch["id"][0].as_py() >= 10:
                raise RuntimeError("the UDF failed")
            return pa.record_batch([pc.multiply(batch["id"], 2)], names=["double"])

        with pytest.raises((RuntimeError, OSError), match="the UDF failed"):
            ds.add_columns(failing_on_fragment_1, read_columns=["id"], batch_size=4)
        rows[engine] = _normalized_fragment_rows(checkpoint)
    assert rows[lance_format] == rows[lance] and len(rows[lance]) == 1
    assert '"NAME"' in rows[lance][0][1]
