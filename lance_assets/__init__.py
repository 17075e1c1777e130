"""lance_assets: Dagster assets stored as Lance tables.

* :class:`LanceIOManager`: one Lance table per asset; pyarrow, pandas and PySpark; write modes
  overwrite / append / merge / error / ignore; partition-exact overwrites in one commit; schema
  policy; standard Dagster metadata; change-feed inputs. :func:`lance_asset` is ``@asset`` with
  the ``lance`` kind.
* :class:`LanceTableResource`, :class:`SparkSessionResource`: tables and a lazy Spark session;
  ``LanceTableResource.search`` (vector / full-text search from downstream assets, as pyarrow,
  pandas or polars) and ``SparkSessionResource.search_batch`` (a k-NN join on the executors).
* :func:`lance_version_sensor`, :func:`observable_lance_table`: react to new Lance versions.
* :class:`LanceChangeFeed`: the change feed of a version range (lazy input type).
* Maintenance: :func:`build_lance_maintenance_assets`, :func:`lance_maintenance_job`,
  :class:`LanceMaintenancePolicy` (compaction and version cleanup; also a ``LanceIOManager`` option,
  which keeps what unfinished change feeds need: :class:`LanceChangeFeedConsumers`,
  :func:`registered_watches`).
* Check factories: :func:`lance_schema_change_check`, :func:`lance_row_count_check`,
  :func:`lance_version_freshness_check`; on indices :func:`lance_index_coverage_check`,
  :func:`lance_index_present_check`.
* Scalar indices declared on assets (metadata ``lance/indices``, :class:`LanceIndexConfig`), kept
  up to date after every write and by maintenance (:mod:`lance_assets.indices`).
* Write-audit-publish on Lance branches (metadata ``lance/write_audit_publish``):
  :func:`lance_publish_asset` (publishes after the blocking checks pass), :func:`load_audited`.
* ``lance_assets.components``: ``LanceTablesComponent``, all of the above configured from a
  ``dg`` ``defs.yaml`` (imported only by ``dg`` and by projects that use it).
"""

from lance_assets.change_feed import LanceChangeFeed, change_counts
from lance_assets.checks import lance_row_count_check, lance_schema_change_check, lance_version_freshness_check
from lance_assets.config import ReadMode, SchemaMode, WriteMode
from lance_assets.index_checks import lance_index_coverage_check, lance_index_present_check
from lance_assets.indices import IndexSpec
from lance_assets.io_manager import LanceChangeFeedConsumers, LanceIndexConfig, LanceIOManager, lance_asset
from lance_assets.maintenance import (
    LanceMaintenancePolicy,
    build_lance_maintenance_assets,
    lance_maintenance_job,
    maintain_table,
)
from lance_assets.partitions import partition_predicate, version_partitions
from lance_assets.resources import LanceTableResource, SparkSessionConfig, SparkSessionResource, table_uri
from lance_assets.sensors import (
    LanceTableWatch,
    lance_version_sensor,
    observable_lance_table,
    registered_watches,
    version_metadata,
)
from lance_assets.wap import lance_publish_asset, load_audited

__all__ = [
    "LanceIOManager",
    "LanceChangeFeedConsumers",
    "lance_asset",
    "LanceTableResource",
    "SparkSessionResource",
    "SparkSessionConfig",
    "LanceChangeFeed",
    "LanceTableWatch",
    "lance_version_sensor",
    "observable_lance_table",
    "registered_watches",
    "version_metadata",
    "version_partitions",
    "partition_predicate",
    "table_uri",
    "change_counts",
    "lance_schema_change_check",
    "lance_row_count_check",
    "lance_version_freshness_check",
    "lance_index_coverage_check",
    "lance_index_present_check",
    "IndexSpec",
    "LanceIndexConfig",
    "LanceMaintenancePolicy",
    "build_lance_maintenance_assets",
    "lance_maintenance_job",
    "maintain_table",
    "lance_publish_asset",
    "load_audited",
    "WriteMode",
    "SchemaMode",
    "ReadMode",
]
