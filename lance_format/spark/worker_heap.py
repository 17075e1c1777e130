"""Spark's Python workers: keep the objects of imported modules out of the cyclic garbage collector.

PySpark reuses its Python workers, and after every task (and every planning call of a Python
data source: ``schema()``, ``reader()``) the worker runs a full ``gc.collect()``
(``pyspark/daemon.py``). That walks every object the process holds: with pyarrow, pyspark
and this package imported, about 100,000 objects (130,000 once the numba kernels are
loaded), 45-65 ms of CPU each time. A read of ``format("lance")`` pays it three times on its
critical path (two planning calls and its tasks), ~0.15 s per query, as much as Spark's
parquet reader needs to scan a column of a million rows.

``gc.freeze()`` moves every object the collector tracks into a permanent generation that
collections skip (CPython's own advice for long-lived, pre-forked processes); the next
collection then costs microseconds. What gets frozen is not collected if it later becomes
cyclic garbage, so the workers freeze only after new modules were imported (a few times per
process: the first call, the numba kernels): module state then, not each task's objects.
Only processes started by Spark as workers are touched, never a user's driver process.
"""

from __future__ import annotations

import gc
import sys

_modules_when_frozen = 0  # len(sys.modules) at this process's last freeze


def is_spark_worker() -> bool:
    """Whether this process is one of PySpark's Python workers (tasks or planning calls):
    their main module is ``pyspark.daemon`` or a ``pyspark`` worker module."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return str(getattr(spec, "name", None) or "").startswith("pyspark.")


def freeze_imported_objects() -> bool:
    """In a Spark worker that imported modules since its last freeze, ``gc.freeze()`` what it
    holds now (see the module docstring); True if it froze."""
    global _modules_when_frozen
    loaded = len(sys.modules)
    if loaded == _modules_when_frozen or not is_spark_worker():
        return False
    gc.freeze()
    _modules_when_frozen = loaded
    return True


__all__ = ["is_spark_worker", "freeze_imported_objects"]
