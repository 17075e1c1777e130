"""pylance's ``lance.optimize`` module: table compaction, also distributed over workers.

``Compaction.plan`` makes the tasks on one process, ``CompactionTask.execute`` runs each on any
worker (tasks and results travel as JSON or pickled), and ``Compaction.commit`` swaps the
rewritten fragments in one commit. ``LanceDataset.optimize.compact_files`` does all three here.
"""

from lance_format.dataset.maintenance.compaction import CompactionMetrics
from lance_format.dataset.maintenance.distributed_compaction import (
    Compaction,
    CompactionOptions,
    CompactionPlan,
    CompactionTask,
    RewriteResult,
)

__all__ = ["Compaction", "CompactionPlan", "CompactionTask", "RewriteResult", "CompactionOptions", "CompactionMetrics"]
