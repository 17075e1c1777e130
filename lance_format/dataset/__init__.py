"""Datasets: opening table versions, scanning, taking rows, and writing new versions.

The core is :mod:`.dataset` (``LanceDataset``), :mod:`.scanner` and :mod:`.fragment`.
``LanceDataset``'s methods call down into the operations, which take the dataset they work on
and never import :mod:`.dataset` at run time: :mod:`.changes` (the change feed),
:mod:`.mutations`, :mod:`.evolution` (schema evolution) and :mod:`.maintenance`. Below them are
:mod:`.writing` (data files, fragments and commits, also for distributed writers) and
:mod:`.sql` (filters). ``write_dataset`` and ``replace_where`` open or return a
``LanceDataset``, so they sit above it. ``.importlinter-dataset`` at the repository root checks
this layering.
"""

from lance_format.dataset.scan_options import ColumnOrdering
from lance_format.table.auto_cleanup import AutoCleanupConfig
from lance_format.table.transaction import COMMIT_MESSAGE_KEY as LANCE_COMMIT_MESSAGE_KEY

__all__ = ["ColumnOrdering", "AutoCleanupConfig", "LANCE_COMMIT_MESSAGE_KEY"]
