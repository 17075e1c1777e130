"""Dagster components (``dg``) of lance_assets.

:class:`LanceTablesComponent` configures a lake of Lance tables from YAML: the IO manager and
table resource, the tables (asset keys or URIs), their checks, version sensors with change-feed
partitions, and maintenance. Registered for ``dg list components`` through the
``dagster_dg_cli.registry_modules`` entry point.
"""

from lance_assets.components.lance_tables import (
    ChangeFeedModel,
    IOManagerModel,
    LanceTablesComponent,
    MaintenanceModel,
    SparkModel,
    TableChecksModel,
    TableModel,
)

__all__ = [
    "LanceTablesComponent",
    "IOManagerModel",
    "SparkModel",
    "TableModel",
    "TableChecksModel",
    "ChangeFeedModel",
    "MaintenanceModel",
]
