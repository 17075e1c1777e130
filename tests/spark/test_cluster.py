"""On a real Spark standalone cluster: a master and two workers on this machine, executors in
their own JVMs and Python workers, whose Python has lance_format's dependencies but not
lance_format (shipped with ``ship_to_executors``).

The cluster application is ``cluster_driver.py``, run as its own process (the suite's
``local[2]`` SparkContext lives in this one); it records facts and these tests check them:
write / data-source append / merge / read / change feed / streaming sink and change-feed
source; an executor JVM SIGKILLed mid-write (the retried job commits once, readers never see a
half version); task attempts that fail once under ``spark.task.maxFailures`` (no duplicate
rows, the failed attempts' files removed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import lance
import pytest

from lance_format.spark.coalesce import COALESCED_KEY, FRAGMENTS_BEFORE_KEY, FRAGMENTS_KEY

from .cluster import StandaloneCluster

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("cluster_driver.py")


@pytest.fixture(scope="module")
def cluster_report(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("cluster")
    work = base / "work"
    work.mkdir()
    cluster = StandaloneCluster(base)
    try:
        cluster.start()
        # no PYTHONPATH: the driver puts the project on its own path only, so the Python
        # workers it starts (on executors and on the driver host) get lance_format from the zip
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON",
                                                                   "PYSPARK_DRIVER_PYTHON")}
        # cwd = the work dir, not the project: `python -m` workers put their cwd on the path
        driver = subprocess.Popen([sys.executable, str(DRIVER), cluster.url, str(ROOT), str(work), cluster.python],
                                  env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  start_new_session=True)
        cluster.processes.append(driver)  # stopped with the cluster, whatever happens
        output, _ = driver.communicate(timeout=600)
    finally:
        cluster.stop()
    report_file = work / "report.json"
    if not report_file.exists():
        pytest.fail(f"the cluster driver wrote no report (exit {driver.returncode}):\n{output[-5000:]}")
    report = json.loads(report_file.read_text())
    report["work"] = str(work)
    return report


def _no_errors(report: dict, scenario: str) -> None:
    error = report.get("errors", {}).get(scenario)
    assert error is None, error


def _consistent(table: dict, rows: int) -> None:
    """Every row once, and no file on disk that the version does not reference."""
    assert table["rows"] == table["distinct"] == rows
    assert (table["min"], table["max"]) == (0, rows - 1)
    assert table["present"] == table["referenced"]


def test_ship_to_executors_makes_the_package_importable(cluster_report):
    _no_errors(cluster_report, "scenario_ship")
    before, after = cluster_report["before_ship"], cluster_report["after_ship"]
    assert len(before) == len(after) == 2
    work = cluster_report["work"]
    for origin, executable, _, has_pyarrow in before:
        # the executors run the dependency-only Python: pyarrow yes, lance_format no
        assert origin is None and has_pyarrow and executable.endswith("deps-venv/bin/python")
    shipped = Path(cluster_report["shipped"])
    assert shipped.parent == Path(work) and shipped.name.startswith("lance_format-")
    for origin, *_ in after:
        assert origin == f"./{shipped.name}/lance_format/__init__.py"


def test_write_merge_read_and_change_feed(cluster_report):
    _no_errors(cluster_report, "scenario_batch")
    batch = cluster_report["batch"]
    assert batch["created"] == [1, 20_000]
    assert batch["merged"] == [3, 1000, 1000]  # 24,000..24,999 updated, 25,000..25,999 inserted
    assert batch["read"] == [26_000, 26_000, sum(range(26_000))]
    assert batch["source_updated"] == 2000
    assert batch["changes"] == {"update_preimage": 1000, "update_postimage": 1000, "insert": 1000}
    _consistent(batch["table"], 26_000)
    assert batch["table"]["version"] == 3
    uri = os.path.join(cluster_report["work"], "batch.lance")
    assert lance.dataset(uri).to_table(filter="s LIKE 'm%'").num_rows == 2000  # pylance agrees
    # two appends of 4 small files each, then a compaction (fragment ids reserved, rewrite)
    compacted = batch["compacted"]
    assert compacted["rows"] == compacted["distinct"] == 800 and (compacted["min"], compacted["max"]) == (0, 799)
    assert (compacted["version"], compacted["fragments"]) == (4, 1)  # older versions keep the small files
    # 40 tasks of 50 rows: their outputs staged on the executors and coalesced by the commit worker
    coalesced = batch["coalesced"]
    _consistent(coalesced, 2000)
    assert (coalesced["version"], coalesced["fragments"]) == (1, 1)
    counts = batch["coalesced_counts"]
    assert (counts[FRAGMENTS_BEFORE_KEY], counts[FRAGMENTS_KEY], counts[COALESCED_KEY]) == ("40", "1", "40")


def test_streaming_sink_and_change_feed_source(cluster_report):
    _no_errors(cluster_report, "scenario_streams")
    streams = cluster_report["streams"]
    assert streams["sink_error"] is None
    assert streams["feed"] == [[1, "insert", 1000, 1000], [2, "insert", 1000, 1000]]  # one version per batch
    _consistent(streams["table"], 2000)
    assert streams["table"]["version"] == 2


def test_killed_executor_mid_write_commits_once(cluster_report):
    _no_errors(cluster_report, "scenario_kill_executor")
    kill = cluster_report["kill_executor"]
    assert kill["killed_jvm"] and kill["version_before_kill"] == 1
    # the killed attempt had finished files; none of them is in the table or left on disk
    lost = set(kill["files_at_kill"]) - set(kill["table"]["referenced"])
    assert lost and not lost & set(kill["table"]["present"])
    # a reader only ever saw whole versions: the old one (1,000 rows) or the new one
    assert (1, 1000) in [tuple(o) for o in kill["observed"]]
    assert {tuple(o) for o in kill["observed"]} <= {(1, 1000), (2, 41_000)}
    assert kill["result"] == [2, 40_000, 40]
    _consistent(kill["table"], 41_000)
    uri = os.path.join(cluster_report["work"], "kill.lance")
    assert lance.dataset(uri).version == 2 and lance.dataset(uri).count_rows() == 41_000


@pytest.mark.parametrize("path", ["write_dataframe", "data_source", "data_source_coalesced"])
def test_a_task_failing_once_is_retried_and_committed_exactly_once(cluster_report, path):
    _no_errors(cluster_report, "scenario_task_retries")
    facts = cluster_report["task_retries"][path]
    if path == "write_dataframe":
        assert facts["result"] == [2, 20_000]
    _consistent(facts["table"], 21_000)
    assert facts["table"]["version"] == 2
    if path == "data_source_coalesced":  # the two tasks' staged outputs became one file
        assert facts["table"]["fragments"] == 2
        counts = facts["counts"]
        assert (counts[FRAGMENTS_BEFORE_KEY], counts[FRAGMENTS_KEY], counts[COALESCED_KEY]) == ("2", "1", "2")
    # the failed attempt finished files before it failed: they are not referenced, and gone
    failed = set(facts["failed_attempt_files"])
    assert failed - set(facts["table"]["referenced"])
    assert not (failed - set(facts["table"]["referenced"])) & set(facts["table"]["present"])


def test_a_merge_whose_source_task_fails_once(cluster_report):
    _no_errors(cluster_report, "scenario_task_retries")
    merge = cluster_report["task_retries"]["merge"]
    assert merge["result"] == [2, 500, 20_000]
    assert merge["updated"] == 20_500
    _consistent(merge["table"], 21_000)
    # both tasks' outputs were small: coalesced by the commit into one fragment of inserted rows
    # and one of updated rows (task 0 had both kinds, task 1 only inserts)
    counts = merge["counts"]
    assert (counts[FRAGMENTS_BEFORE_KEY], counts[FRAGMENTS_KEY], counts[COALESCED_KEY]) == ("3", "2", "2")
    assert merge["table"]["fragments"] == 3


def test_a_stream_batch_whose_task_fails_once(cluster_report):
    _no_errors(cluster_report, "scenario_streams")
    retry = cluster_report["stream_retry"]
    assert retry["error"] is None
    _consistent(retry["table"], 20_000)
    assert retry["table"]["version"] == 1
    failed = set(retry["failed_attempt_files"])
    assert failed - set(retry["table"]["referenced"])
    assert not (failed - set(retry["table"]["referenced"])) & set(retry["table"]["present"])
