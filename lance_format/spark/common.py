"""Driver-side helpers shared by the Spark entry points: results, errors, session facts."""

from __future__ import annotations

import os
import re
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lance_format import errors as lance_errors
from lance_format.distributed import ObjectStore, normalize_storage_options, object_store_for
from lance_format.errors import LanceError, UnsupportedFeatureError, WorkerEnvironmentError

DEFAULT_PARALLELISM = 2

StorageOptions = tuple[tuple[str, str], ...]  # storage options as they travel in task specs


def pack_options(options: Mapping[str, str] | None) -> StorageOptions:
    """Storage options as a sorted tuple of pairs (specs are frozen, comparable values)."""
    return tuple(sorted(normalize_storage_options(options).items()))


def table_location(uri: str | os.PathLike[str] | ObjectStore) -> str | ObjectStore:
    """A table argument as the engine takes it: an open store or a URI string."""
    return uri if isinstance(uri, (str, ObjectStore)) else os.fspath(uri)


def task_store(uri: str, options: StorageOptions) -> ObjectStore:
    """The table's store inside a Spark task (executors re-open it from the spec)."""
    store = object_store_for(uri, dict(options))
    if store.backend.process_local:
        raise UnsupportedFeatureError(f"{store.backend.name}:// tables live in one process's memory; Spark tasks "
                                      "run in other processes and cannot reach them", table=store.uri)
    return store


@dataclass(frozen=True)
class CommitResult:
    """What a Spark write committed.

    ``version``: the new version (or, when ``skipped``, the version that already holds this
    write: an idempotent re-run, ``mode="ignore"`` on an existing table, an empty append).
    ``rows`` / ``fragments`` / ``bytes``: new rows, fragments and data-file bytes.
    ``retries``: how often the commit loop had to retry against concurrent writers.
    ``rows_inserted`` / ``rows_updated`` / ``rows_deleted``: for merges and ``replace_where``.
    ``small_fragments``: how many of the new fragments are small files (below
    :data:`SMALL_FILE_FRACTION` of the target rows and of the target bytes per file).
    ``table_fragments``: the table's fragments after the write (and its compaction).
    ``fragments_before_coalescing``: the fragments the tasks' outputs would have made on their
    own; ``small_outputs_coalesced``: how many small task outputs the commit coalesced into
    files of the target size (``df.write.format("lance")`` and the streaming sink; see
    :mod:`lance_format.spark.coalesce`). Without coalescing it equals ``fragments``.
    With ``compact_small_fragments``: ``compaction_version`` is the version of the compaction
    that followed the write (None if none ran), which rewrote ``fragments_compacted`` small
    fragments as ``fragments_from_compaction`` new ones.
    """

    version: int
    rows: int
    fragments: int
    bytes: int
    retries: int = 0
    read_version: int = 0
    operation: str = "append"
    rows_inserted: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    skipped: bool = False
    small_fragments: int = 0
    table_fragments: int = 0
    compaction_version: int | None = None
    fragments_compacted: int = 0
    fragments_from_compaction: int = 0
    fragments_before_coalescing: int = 0
    small_outputs_coalesced: int = 0


# A file below 1/8 of the target rows and of the target bytes counts as small (a fixed share:
# the fragment count a write leaves is what matters, not each file's exact size).
SMALL_FILE_FRACTION = 8
DEFAULT_TARGET_ROWS_PER_FILE = 1024 * 1024  # pylance's max_rows_per_file
DEFAULT_TARGET_BYTES_PER_FILE = 256 * 1024 * 1024  # far below pylance's 90 GB limit: files a reader splits well


def is_small_fragment(fragment: Any, target_rows: int = DEFAULT_TARGET_ROWS_PER_FILE,
                      target_bytes: int = DEFAULT_TARGET_BYTES_PER_FILE) -> bool:
    """Whether a fragment (``FragmentMetadata`` or ``DataFragment``) is a small file (below 1/8
    of both targets)."""
    rows_limit = max(int(target_rows) // SMALL_FILE_FRACTION, 1)
    bytes_limit = max(int(target_bytes) // SMALL_FILE_FRACTION, 1)
    return (fragment.physical_rows < rows_limit
            and sum(d.file_size_bytes or 0 for d in fragment.files) < bytes_limit)


def count_small_fragments(fragments: list, target_rows: int = DEFAULT_TARGET_ROWS_PER_FILE,
                          target_bytes: int = DEFAULT_TARGET_BYTES_PER_FILE) -> int:
    """How many of ``fragments`` (``FragmentMetadata`` or ``DataFragment`` messages) are small files."""
    return sum(1 for f in fragments if is_small_fragment(f, target_rows, target_bytes))


_TASK_ERROR = re.compile(r"lance_format\.errors\.([A-Za-z]+Error): (.*)")


def translate_task_error(exc: BaseException) -> BaseException:
    """The typed engine error a Spark task raised, rebuilt on the driver (else ``exc`` itself).

    Spark reports a failed Python task as a ``PythonException`` whose text holds the worker's
    traceback; its last ``lance_format.errors.X: message`` line names the original error.
    """
    if isinstance(exc, LanceError):
        return exc
    missing = _MISSING_MODULE.search(str(exc))
    if missing is not None:
        error: LanceError = WorkerEnvironmentError(
            f"Spark's Python workers cannot import {missing.group(1)}: they run another interpreter than the "
            "driver's. Set PYSPARK_PYTHON (or spark.pyspark.python) to an interpreter that has lance_format "
            "installed, or ship it to the executors with lance_format.spark.ship_to_executors")
        error.__cause__ = exc
        return error
    matches = _TASK_ERROR.findall(str(exc))
    if not matches:
        return exc
    name, message = matches[-1]
    cls = getattr(lance_errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, LanceError)):
        return exc
    error = cls(message.strip())
    error.__cause__ = exc
    return error


def parallelism(spark: Any) -> int:
    """How many tasks the session runs at once (classic sessions; a default for Spark Connect)."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:
        try:
            return max(1, int(spark.conf.get("spark.default.parallelism")))
        except Exception:
            return DEFAULT_PARALLELISM


def conf_flag(spark: Any, key: str, default: bool = False) -> bool:
    try:
        value = spark.conf.get(key, None)
    except Exception:
        return default
    if value is None:
        return default
    return str(value).strip().lower() == "true"


def conf_bytes(spark: Any, key: str, default: int) -> int:
    """A byte-size conf ("10485760b", "10MB", "1g", "-1") in bytes; ``default`` if unreadable."""
    try:
        text = str(spark.conf.get(key)).strip().lower()
    except Exception:
        return default
    for suffix, factor in (("kb", 1 << 10), ("mb", 1 << 20), ("gb", 1 << 30), ("tb", 1 << 40),
                           ("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30), ("t", 1 << 40), ("b", 1)):
        if text.endswith(suffix):
            text, scale = text[: -len(suffix)], factor
            break
    else:
        scale = 1
    try:
        return int(float(text) * scale)
    except ValueError:
        return default


def _seconds(text: str | None, default: float) -> float:
    if not text:
        return default
    text = str(text).strip().lower()
    for suffix, factor in (("ms", 0.001), ("s", 1.0), ("min", 60.0)):
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * factor
            except ValueError:
                return default
    try:
        return float(text)
    except ValueError:
        return default


_CONNECT_PACKAGE = "pyspark.sql.connect."


def is_connect(obj: Any) -> bool:
    """Whether ``obj`` (a DataFrame, Column or SparkSession) belongs to Spark Connect.

    Decided by the classes' module names: importing ``pyspark.sql.connect`` to compare classes
    runs PySpark's dependency check, which calls ``sys.exit(0)`` when the Connect client packages
    (grpcio-status, googleapis-common-protos, zstandard) are missing and ``__main__`` has no
    ``__file__`` (``python -c``, notebooks, Dagster's run workers). A Connect object exists only
    once its module has been imported, so a classic session never needs those packages.
    """
    return any(cls.__module__.startswith(_CONNECT_PACKAGE) for cls in type(obj).__mro__)


# Spark SQL's Python workers (UDFs, mapInArrow) run this; unset, ``spark.pyspark.python``, else
# the JVM's $PYSPARK_PYTHON, else ``python3``: never the driver's own interpreter.
_SQL_WORKER_PYTHON = "spark.sql.execution.pyspark.python"


def use_driver_python(spark: Any) -> None:
    """Let a local session's Python workers run the driver's interpreter when nobody chose one.

    PySpark starts its workers with ``$PYSPARK_PYTHON``, else ``python3`` from ``PATH``: a script
    run as ``.venv/bin/python`` without the venv activated would get workers that cannot import
    pyarrow or ``lance_format``. When neither ``PYSPARK_PYTHON`` nor ``spark.pyspark.python`` is
    set and the master is local (the workers run on this machine), the session's Python workers
    started from here on run ``sys.executable`` (``spark.sql.execution.pyspark.python``, unless
    set, and the context's ``pythonExec``), as ``lance_assets``' Spark resource does. Other masters are left alone: set ``PYSPARK_PYTHON`` (or ``spark.pyspark.python``) to
    an interpreter the executors have, or ship the package with :func:`ship_to_executors`.
    """
    if is_connect(spark) or os.environ.get("PYSPARK_PYTHON"):
        return
    try:
        sc = spark.sparkContext
        if not str(sc.master).startswith("local") or sc.getConf().get("spark.pyspark.python", None):
            return
        if spark.conf.get(_SQL_WORKER_PYTHON, None) is None:
            spark.conf.set(_SQL_WORKER_PYTHON, sys.executable)  # what mapInArrow's workers run
        if sc.pythonExec == "python3":  # PySpark's default: no choice was made
            sc.pythonExec = sys.executable  # what RDD functions' workers run
    except Exception:
        return  # not a classic session (no SparkContext): its workers are not ours to choose


_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '(lance_format|pyarrow|numpy)[.']")


def functions_for(df: Any) -> Any:
    """``pyspark.sql.functions`` for classic DataFrames, its Spark Connect twin for Connect ones
    (a process may hold both kinds; the plain module follows the process-wide mode)."""
    if is_connect(df):
        from pyspark.sql.connect import functions
    else:
        from pyspark.sql import functions  # type: ignore[no-redef]
    return functions


def quoted(name: str) -> str:
    """A column name as a Spark SQL identifier (dots, spaces and backticks kept literal)."""
    return "`" + name.replace("`", "``") + "`"


_LOCAL_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")

ARROW_MAX_BYTES_PER_BATCH = "spark.sql.execution.arrow.maxBytesPerBatch"
# Spark skips the per-row size check of the Arrow batches it hands to Python only when this
# byte limit is exactly INT_MAX. At its default (64 MiB) Spark recomputes the batch size after
# every row, which made up two thirds of the JVM's work in a ``mapInArrow`` write.
_UNCHECKED_BATCH_BYTES = str(2**31 - 1)


class RowBoundedArrowBatches:
    """While open, the session's Arrow batches to Python are bounded by rows only
    (``spark.sql.execution.arrow.maxRecordsPerBatch``, 10,000 by default), not by bytes.

    A limit the user set on the session is left alone (set one for tables of very large rows:
    a batch then holds at most that many bytes); otherwise the default comes back on exit.
    """

    def __init__(self, spark: Any) -> None:
        self._conf = spark.conf
        self._changed = False

    def __enter__(self) -> RowBoundedArrowBatches:
        try:
            if self._conf.get(ARROW_MAX_BYTES_PER_BATCH, None) is None:  # None: not set on the session
                self._conf.set(ARROW_MAX_BYTES_PER_BATCH, _UNCHECKED_BATCH_BYTES)
                self._changed = True
        except Exception:
            pass  # a session that refuses the setting runs our jobs at its own batch sizes
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._changed:
            try:
                self._conf.unset(ARROW_MAX_BYTES_PER_BATCH)
            except Exception:
                pass


class JobScope:
    """Groups the Spark jobs of one write, so that after a failure the driver can wait until
    none of their tasks can still create files (then the write's files can be removed for good).
    The jobs run with :class:`RowBoundedArrowBatches`.

    A failed job returns while its other tasks are still being cancelled, and a cancelled
    task's Python worker is only killed ``spark.python.task.killTimeout`` later: files it
    writes meanwhile would survive a cleanup done right away.
    """

    def __init__(self, spark: Any) -> None:
        self.group = f"lance-format-{uuid.uuid4().hex}"
        use_driver_python(spark)
        try:
            self._sc = spark.sparkContext  # classic sessions only (Spark Connect has none)
        except Exception:
            self._sc = None
        try:
            conf = self._sc.getConf().get("spark.python.task.killTimeout") if self._sc is not None else None
        except Exception:
            conf = None
        self.kill_timeout = _seconds(conf, 2.0)
        self._saved: dict[str, str | None] = {}
        self._batches = RowBoundedArrowBatches(spark)

    def __enter__(self) -> JobScope:
        self._batches.__enter__()
        if self._sc is not None:
            self._saved = {k: self._sc.getLocalProperty(k) for k in _LOCAL_PROPERTIES}
            self._sc.setJobGroup(self.group, "lance_format write", interruptOnCancel=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._batches.__exit__(*exc)
        if self._sc is not None:
            for key, value in self._saved.items():
                self._sc.setLocalProperty(key, value)

    def had_failed_tasks(self) -> bool:
        """Whether a task attempt of the group's jobs failed (a retried task, a lost executor):
        such an attempt may have left files that no commit references. True when unknown."""
        if self._sc is None:
            return True
        try:
            tracker = self._sc.statusTracker()
            for job_id in tracker.getJobIdsForGroup(self.group):
                job = tracker.getJobInfo(job_id)
                for stage_id in job.stageIds if job is not None else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage is None or stage.numFailedTasks or stage.currentAttemptId:
                        return True
        except Exception:
            return True
        return False

    def settle(self, timeout: float = 120.0) -> None:
        """Cancel the group's jobs and wait until their tasks (and Python workers) are gone."""
        if self._sc is None:
            time.sleep(self.kill_timeout)
            return
        failed = True
        try:
            self._sc.cancelJobGroup(self.group)
            tracker = self._sc.statusTracker()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                active = 0
                jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(self.group)]
                for job in jobs:
                    for stage_id in job.stageIds if job is not None else ():
                        stage = tracker.getStageInfo(stage_id)
                        active += stage.numActiveTasks if stage is not None else 0
                if active == 0:
                    # Only a job that did not succeed can have left a Python worker running.
                    failed = any(job is None or job.status != "SUCCEEDED" for job in jobs)
                    break
                time.sleep(0.05)
        except Exception:
            pass  # the status tracker is best effort; the grace period below still applies
        if failed:
            time.sleep(self.kill_timeout)


__all__ = ["CommitResult", "SMALL_FILE_FRACTION", "DEFAULT_TARGET_ROWS_PER_FILE", "DEFAULT_TARGET_BYTES_PER_FILE",
           "count_small_fragments", "is_small_fragment", "JobScope", "RowBoundedArrowBatches", "translate_task_error", "parallelism", "conf_flag", "conf_bytes", "is_connect", "use_driver_python", "table_location", "functions_for", "quoted"]
