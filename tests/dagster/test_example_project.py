"""The example project: its definitions load, and the headless runner (README's first command) works."""

from __future__ import annotations

import dagster as dg


def test_definitions_load_and_validate(tmp_path, monkeypatch):
    monkeypatch.setenv("LANCE_EXAMPLE_ROOT", str(tmp_path))
    from example_project.definitions import build_definitions

    defs = build_definitions(str(tmp_path))
    dg.Definitions.validate_loadable(defs)
    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert keys == {"raw_orders", "daily_orders", "daily_revenue", "customer_totals"}
    assert defs.resolve_sensor_def("raw_orders_versions_sensor") is not None
    assert defs.resolve_job_def("change_raw_orders") is not None


def test_headless_runner_end_to_end(spark, tmp_path, capsys, monkeypatch):
    from example_project import run_example

    monkeypatch.setenv("LANCE_EXAMPLE_ROOT", str(tmp_path))  # main() sets it; restored after the test
    assert run_example.main(str(tmp_path / "example")) == 0  # reuses the test session's SparkSession
    out = capsys.readouterr().out
    assert "customer_totals partition 2: changes {'inserted': 2, 'updated': 1, 'deleted': 0}" in out
    assert "customer_totals partition 3: changes {'inserted': 0, 'updated': 0, 'deleted': 1}" in out
    assert "incremental result equals a full recompute: True" in out
