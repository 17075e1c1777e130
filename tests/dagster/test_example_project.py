"""The example project: its definitions load, the headless runner (README's first command) runs
every job of the example, and it does so with deprecation warnings turned into errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

import lance_format

REPO = Path(__file__).resolve().parents[2]


def test_definitions_load_and_validate(tmp_path, monkeypatch):
    monkeypatch.setenv("LANCE_EXAMPLE_ROOT", str(tmp_path))
    from example_project.definitions import build_definitions

    defs = build_definitions(str(tmp_path))
    dg.Definitions.validate_loadable(defs)
    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert keys == {"raw_orders", "daily_orders", "daily_revenue", "customer_totals",
                    "product_embeddings", "similar_products", "lance_maintenance/raw_orders",
                    "lance_maintenance/customer_totals", "lance_maintenance/product_embeddings"}
    assert defs.resolve_sensor_def("raw_orders_versions_sensor") is not None
    assert defs.resolve_job_def("change_raw_orders") is not None


def test_headless_runner_end_to_end(spark, tmp_path, capsys, monkeypatch, instance):
    from example_project import run_example
    from example_project.definitions import build_definitions

    monkeypatch.setenv("LANCE_EXAMPLE_ROOT", str(tmp_path))  # main() sets it; restored after the test
    root = tmp_path / "example"
    # reuses the test session's SparkSession
    assert run_example.main(str(root), instance=instance) == 0
    out = capsys.readouterr().out
    # every job the example defines was executed (not just resolved), and succeeded
    jobs = {job.name for job in build_definitions(str(root)).resolve_all_job_defs()
            if not job.name.startswith("__")}
    assert jobs == {"change_raw_orders", "lance_maintenance"}
    runs = instance.get_run_records()
    for name in jobs:
        statuses = [r.dagster_run.status for r in runs if r.dagster_run.job_name == name]
        assert statuses == [dg.DagsterRunStatus.SUCCESS], (name, statuses)
    # the job's op output went to the Lance IO manager, and its op input was loaded back from it
    log = lance_format.dataset(str(root / "ops" / "source_changes.lance")).to_table()
    assert log.column("version").to_pylist() == [2, 3]
    assert "change_raw_orders job changed the source outside its asset: new raw_orders versions [2, 3]" in out
    assert "customer_totals partition 2: changes {'inserted': 2, 'updated': 1, 'deleted': 0}" in out
    assert "customer_totals partition 3: changes {'inserted': 0, 'updated': 0, 'deleted': 1}" in out
    assert "incremental result equals a full recompute: True" in out
    # the search pipeline: both declared indices built over every row, their checks, the search
    assert ("product_embeddings indices: description_idx Inverted created over 200 rows (0 unindexed), "
            "embedding_idx IVF_PQ created over 200 rows (0 unindexed)") in out
    assert "product_embeddings checks {'lance_index_coverage': True, 'lance_index_present': True}" in out
    assert "nearest to 'red running shoe': ['red running shoe', 'white running shoe']" in out
    assert "full text 'waterproof jacket': ['red rain jacket', 'blue rain jacket']" in out
    assert "lance_maintenance job: product_embeddings fragments 1 -> 1, versions kept from -, unindexed rows 0 -> 0" in out
    # customer_totals has one fragment per sensor run: 3 small ones, compacted into 1
    assert "lance_maintenance job: customer_totals fragments 3 -> 1" in out
    # the last line: how to serve these tables (this root is not the default one dg dev serves)
    assert out.rstrip().endswith(f"LANCE_EXAMPLE_ROOT={root} DAGSTER_HOME={root / 'dagster_home'} .venv/bin/dg dev")


# `python -m example_project.run_example DIR`, with Dagster's beta/preview notices as errors too
# (-W cannot name them: it resolves categories before dagster can be imported).
RUN_WITH_BETA_AS_ERRORS = (
    "import sys, warnings, dagster as dg\n"
    "warnings.simplefilter('error', dg.BetaWarning)\n"
    "warnings.simplefilter('error', dg.PreviewWarning)\n"
    "from example_project import run_example\n"
    "sys.exit(run_example.main(sys.argv[1]))\n"
)


def test_example_runs_with_deprecation_warnings_as_errors(tmp_path):
    """The whole example pipeline (Spark asset, partitions, sensor runs, the op job) in a fresh
    interpreter with ``-W error::DeprecationWarning``: no deprecated Dagster API is used, not even
    inside Dagster on our behalf (a nested resource, a SourceAsset), and no Beta/Preview notice
    reaches the user (the example acknowledges the beta APIs it uses where it uses them)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "LANCE_EXAMPLE_ROOT": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", RUN_WITH_BETA_AS_ERRORS, str(tmp_path / "ex")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    assert "incremental result equals a full recompute: True" in result.stdout
    assert "BetaWarning" not in result.stderr and "DeprecationWarning" not in result.stderr
