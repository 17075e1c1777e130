"""Distributed compaction with pylance's API (``lance.optimize.Compaction``), both ways.

Plans, tasks and results travel as JSON between processes and engines: a plan made by one
engine, executed by workers of the other and committed by either leaves a table both read the
same, with the same fragments pylance's own compaction would make.
"""

from __future__ import annotations

import pickle

import lance
import lance.optimize
import pyarrow as pa
import pytest

import lance_format
import lance_format.optimize
from lance_format.errors import CommitConflictError, InvalidInputError

ENGINES = {"ours": (lance_format, lance_format.optimize), "pylance": (lance, lance.optimize)}


def _table(path: str, engine=lance, appends: int = 8) -> None:
    for i in range(appends):
        rows = pa.table({"id": list(range(i * 10, i * 10 + 10)),
                         "email": [f"user{j}@example.com" if j % 3 else None for j in range(i * 10, i * 10 + 10)]})
        engine.write_dataset(rows, path, mode="append" if i else "create")
    engine.dataset(path).delete("id = 75 OR id = 76")


def _ids(plan) -> list[list[int]]:
    return [[f.id for f in task.fragments] for task in plan.tasks]


@pytest.mark.parametrize("options", [
    {"target_rows_per_fragment": 25},
    {"target_rows_per_fragment": 25, "max_source_fragments": 4},
    {"target_rows_per_fragment": 25, "max_source_rows": 35},
    {"target_rows_per_fragment": 25, "max_source_bytes": 1},
    {"target_rows_per_fragment": 25, "excluded_fragment_ids": [2]},
    {"target_rows_per_fragment": 1000, "materialize_deletions_threshold": 0.05},
])
def test_plans_like_pylance(tmp_path, options):
    path = str(tmp_path / "t.lance")
    _table(path)
    ours = lance_format.optimize.Compaction.plan(lance_format.dataset(path), options)
    theirs = lance.optimize.Compaction.plan(lance.dataset(path), options)
    assert _ids(ours) == _ids(theirs)
    assert ours.read_version == theirs.read_version and ours.num_tasks() == theirs.num_tasks()


@pytest.mark.parametrize("planner, worker, committer", [
    ("ours", "ours", "ours"), ("pylance", "ours", "pylance"), ("ours", "pylance", "ours"), ("pylance", "ours", "ours"),
])
def test_plan_execute_commit_across_engines(tmp_path, planner, worker, committer):
    path = str(tmp_path / "t.lance")
    _table(path)
    expected = sorted(lance.dataset(path).to_table().column("id").to_pylist())
    plan_engine, plan_opt = ENGINES[planner]
    plan = plan_opt.Compaction.plan(plan_engine.dataset(path), {"target_rows_per_fragment": 25})
    work_engine, work_opt = ENGINES[worker]
    results = []
    for task in plan.tasks:  # each task crosses to a worker as JSON, its result comes back as JSON
        remote = work_opt.CompactionTask.from_json(task.json())
        results.append(remote.execute(work_engine.dataset(path)).json())
    commit_engine, commit_opt = ENGINES[committer]
    ds = commit_engine.dataset(path)
    metrics = commit_opt.Compaction.commit(ds, [commit_opt.RewriteResult.from_json(r) for r in results])
    assert (metrics.fragments_removed, metrics.fragments_added) == (8, 2)
    for engine in (lance, lance_format):
        table = engine.dataset(path)
        assert sorted(table.to_table().column("id").to_pylist()) == expected
        assert len(table.get_fragments()) == 2
    assert lance.dataset(path).to_table().equals(lance_format.dataset(path).to_table())


def test_same_fragments_as_pylance_compact_files(tmp_path):
    ours, theirs = str(tmp_path / "o"), str(tmp_path / "p")
    _table(ours)
    _table(theirs)
    ds = lance_format.dataset(ours)
    plan = lance_format.optimize.Compaction.plan(ds, {"target_rows_per_fragment": 25})
    ours_metrics = lance_format.optimize.Compaction.commit(ds, [t.execute(ds) for t in plan.tasks])
    theirs_metrics = lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=25)
    assert vars(ours_metrics) == {k: getattr(theirs_metrics, k) for k in vars(ours_metrics)}
    assert [f.physical_rows for f in lance.dataset(ours).get_fragments()] == [
        f.physical_rows for f in lance.dataset(theirs).get_fragments()]
    assert ds.version == lance.dataset(ours).version


def test_tasks_and_results_pickle(tmp_path):
    path = str(tmp_path / "t.lance")
    _table(path, lance_format)
    ds = lance_format.dataset(path)
    plan = pickle.loads(pickle.dumps(lance_format.optimize.Compaction.plan(ds, {"target_rows_per_fragment": 25})))
    results = [pickle.loads(pickle.dumps(t.execute(ds))) for t in plan.tasks]
    assert lance_format.optimize.Compaction.commit(ds, results).fragments_added == 2
    assert lance_format.optimize.CompactionPlan.from_json(plan.json()).num_tasks() == plan.num_tasks()


def test_a_concurrent_change_refuses_the_commit(tmp_path):
    path = str(tmp_path / "t.lance")
    _table(path, lance_format)
    ds = lance_format.dataset(path)
    plan = lance_format.optimize.Compaction.plan(ds, {"target_rows_per_fragment": 25})
    results = [t.execute(ds) for t in plan.tasks]
    lance_format.dataset(path).delete("id = 3")  # changes a fragment the plan rewrites
    before = lance_format.dataset(path).to_table()
    with pytest.raises(CommitConflictError):
        lance_format.optimize.Compaction.commit(lance_format.dataset(path), results)
    assert lance_format.dataset(path).to_table().equals(before)  # the delete stands, nothing was lost
    # a task reads the version it was planned on, so it still runs; its commit is what is refused
    late = plan.tasks[0].execute(lance_format.dataset(path))
    with pytest.raises(CommitConflictError):
        lance_format.optimize.Compaction.commit(lance_format.dataset(path), [late])


def test_bad_input(tmp_path):
    path = str(tmp_path / "t.lance")
    _table(path, lance_format)
    ds = lance_format.dataset(path)
    with pytest.raises(InvalidInputError):
        lance_format.optimize.Compaction.commit(ds, [])
    with pytest.raises(InvalidInputError):
        lance_format.optimize.Compaction.plan(ds, {"no_such_option": 1})
    with pytest.raises(InvalidInputError):
        lance_format.optimize.CompactionTask.from_json("{not json")
    with pytest.raises(InvalidInputError):
        lance_format.optimize.RewriteResult.from_json('{"read_version": 1}')
