"""Scans, planned then executed: :func:`~.plan.plan_scan` decides what a scan reads, filters,
orders and returns (a frozen :class:`~.plan.ScanPlan`); :class:`~.executor.ScanExecutor` runs
it. ``LanceScanner`` (pylance's face), ``LanceDataset``'s reads and Spark's split reads all go
through these two; :mod:`.explain` prints a plan.
"""

from lance_format.dataset.scan.executor import ScanExecutor
from lance_format.dataset.scan.plan import (
    DEFAULT_BATCH_SIZE,
    PYLANCE_BATCH_SIZE,
    ColumnSet,
    FragmentRange,
    IndexStep,
    LateSplit,
    ScanPlan,
    SearchStep,
    plan_scan,
)

__all__ = ["DEFAULT_BATCH_SIZE", "PYLANCE_BATCH_SIZE", "ColumnSet", "FragmentRange", "IndexStep", "LateSplit",
           "ScanPlan", "SearchStep", "ScanExecutor", "plan_scan"]
