"""The example's Dagster definitions: ``dagster dev`` serves this module.

Tables live under ``$LANCE_EXAMPLE_ROOT`` (default: ``<tmp>/lance-assets-example``); Spark runs
locally. Start the UI from the repository root with ``dagster dev`` (``[tool.dagster]`` in
pyproject.toml points here) or ``dagster dev -m example_project.definitions``.
"""

from __future__ import annotations

import dagster as dg

from example_project.assets import ASSETS, CHECKS, change_raw_orders, maintenance_assets, version_sensor
from example_project.source import example_root
from lance_assets import LanceIOManager, LanceTableResource, SparkSessionResource, lance_maintenance_job


def build_definitions(root: str | None = None) -> dg.Definitions:
    root = root or example_root()
    spark = SparkSessionResource(master="local[2]", app_name="lance-assets-example",
                                 conf={"spark.sql.shuffle.partitions": "2"})
    maintenance = maintenance_assets(root)
    return dg.Definitions(
        assets=[*ASSETS, *maintenance],
        asset_checks=CHECKS,
        jobs=[change_raw_orders, lance_maintenance_job(maintenance)],
        sensors=[version_sensor(root)],
        resources={
            "io_manager": LanceIOManager(base_uri=root, spark=spark),
            "lance": LanceTableResource(base_uri=root),
            "spark": spark,
        },
    )


defs = build_definitions()
