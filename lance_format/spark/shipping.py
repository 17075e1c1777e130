"""``ship_to_executors``: make ``lance_format`` importable on a cluster that only has its dependencies.

Spark unpickles the data source class, the task functions and the write specs on the
executors *by reference* (``lance_format.spark.tasks.write_task`` ...), so every Python worker
must import the same ``lance_format`` as the driver. The package is pure Python: zipping the
driver's copy and handing it to ``SparkContext.addPyFile`` puts it on the path of every Python
worker the application starts afterwards (executors and the driver-side workers that plan and
commit data source writes). One exception needs help: Spark 4's driver-side runner of Python
streaming *sources* looks for the shipped files under ``<SparkFiles root>/streaming_job/``
rather than the root ``addPyFile`` copies them to, so the zip is placed there too.
The executors still need the dependencies (pyarrow, numpy,
protobuf, pyroaring, pandas, sqlglot) in the interpreter ``spark.pyspark.python`` names.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import lance_format

SHIPPED_FILES = (".py", ".pyi", ".typed")


def package_zip(directory: str | os.PathLike[str] | None = None) -> Path:
    """A zip of the importable ``lance_format`` package (its source files, no caches).

    The name carries a digest of the contents, so a changed package is a new file for Spark
    (``addPyFile`` refuses to replace a file of the same name with different contents).
    """
    root = Path(lance_format.__file__).resolve().parent
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in SHIPPED_FILES
                   and "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    target_dir = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="lance-format-ship-"))
    target = target_dir / f"lance_format-{digest.hexdigest()[:16]}.zip"
    if not target.exists():
        partial = target.with_suffix(".part")
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, Path("lance_format") / path.relative_to(root))
        partial.replace(target)
    return target


def ship_to_executors(spark: Any, directory: str | os.PathLike[str] | None = None) -> Path:
    """Ship the driver's ``lance_format`` to every Python worker of ``spark``'s application.

    Call it once, right after creating the session and before the first Lance job (Python
    workers that already run keep their path). Returns the zip it added. For clusters whose
    executors have lance_format's dependencies installed but not lance_format itself; where
    the package is installed on every node, this is not needed. Classic sessions only: with
    Spark Connect use ``spark.addArtifacts(path, pyfile=True)`` with :func:`package_zip`.
    """
    archive = package_zip(directory)
    context = spark.sparkContext
    context.addPyFile(str(archive))
    _place_for_streaming_sources(context, archive)
    return archive


# PythonStreamingSourceRunner (Spark 4.x) sends the worker this job-artifact id, and the worker
# then adds ``<SparkFiles root>/streaming_job/<include>`` to its path instead of the root's file.
STREAMING_SOURCE_FILES_DIR = "streaming_job"


def _place_for_streaming_sources(context: Any, archive: Path) -> None:
    root = Path(context._jvm.org.apache.spark.SparkFiles.getRootDirectory())
    target = root / STREAMING_SOURCE_FILES_DIR / archive.name
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    shutil.copyfile(archive, partial)
    partial.replace(target)


__all__ = ["package_zip", "ship_to_executors"]
