"""Datasets: opening table versions, scanning, taking rows, and writing new versions.

The core is :mod:`.dataset` (``LanceDataset``), :mod:`.scanner` (over :mod:`.scan`: every scan
is planned by ``plan_scan`` and run by one executor) and :mod:`.fragment`.
``LanceDataset``'s methods call down into the operations, which take the dataset they work on
and never import :mod:`.dataset` at run time: :mod:`.changes` (the change feed),
:mod:`.mutations`, :mod:`.evolution` (schema evolution) and :mod:`.maintenance`. Below them are
:mod:`.writing` (data files, fragments and commits, also for distributed writers) and
:mod:`.sql` (filters). ``write_dataset`` and ``replace_where`` open or return a
``LanceDataset``, so they sit above it. The ``dataset-layers`` contract in ``pyproject.toml``
(``[tool.importlinter]``) checks this layering.

pylance's ``lance.dataset`` module names are importable from here too (``from
lance_format.dataset import LanceDataset, LANCE_COMMIT_MESSAGE_KEY``): the ones of the layers
above this package's bottom are resolved on first use (PEP 562), so that importing a submodule
never imports :mod:`.dataset` and the layering holds.
"""

from importlib import import_module
from typing import Any

from lance_format.dataset.scan_options import ColumnOrdering
from lance_format.table.auto_cleanup import AutoCleanupConfig
from lance_format.table.transaction import COMMIT_MESSAGE_KEY as LANCE_COMMIT_MESSAGE_KEY

# pylance's lance.dataset name -> the module of ours that defines it
_LAZY = {
    "LanceDataset": "lance_format.dataset.dataset",
    "LanceScanner": "lance_format.dataset.scanner",
    "MergeInsertBuilder": "lance_format.dataset.mutations.merge_insert",
    "LanceOperation": "lance_format.dataset.lance_operations",
    "Transaction": "lance_format.dataset.lance_operations",
    "BulkCommitResult": "lance_format.dataset.lance_operations",
    "Index": "lance_format.dataset.lance_operations",
    "IndexFile": "lance_format.dataset.lance_operations",
    "DatasetOptimizer": "lance_format.dataset.maintenance.compaction",
    "DatasetDelta": "lance_format.dataset.changes.feed",
    "Branches": "lance_format.dataset.branches",
    "DataStatistics": "lance_format.dataset.inspection",
    "FieldStatistics": "lance_format.dataset.inspection",
    "LanceStats": "lance_format.dataset.inspection",
    "Tags": "lance_format.dataset.branches",
    "write_dataset": "lance_format.dataset.writing.write_dataset",
    "SqlQuery": "lance_format.dataset.sql_query",
    "SqlQueryBuilder": "lance_format.dataset.sql_query",
    "CleanupStats": "lance_format.table.cleanup",
    "CleanupExplanation": "lance_format.table.cleanup",
    "ScannerBuilder": "lance_format.dataset.scanner_builder",
    "_coerce_query_vector": "lance_format.dataset.scan.search",
    "VectorIndexReader": "lance_format.dataset.vector_index_reader",
    **dict.fromkeys(("AlterColumn", "DatasetStats", "DeleteResult", "UpdateResult", "ExecuteResult", "Tag", "Branch",
                     "Version", "VersionRef", "serialize_row_addrs"), "lance_format.dataset.result_types"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = ["ColumnOrdering", "AutoCleanupConfig", "LANCE_COMMIT_MESSAGE_KEY", *_LAZY]
