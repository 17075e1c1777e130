"""``create_scalar_index`` on Spark: index segments built on the executors, committed once.

The driver reads only the manifest: it splits the table's fragments into groups (one Spark task
each, ``fragments_per_task`` fragments), and each task opens the table at the same version and
builds one uncommitted segment over its group through the engine's public distributed-build API
(``LanceDataset.create_index_uncommitted``), writing the segment's files itself. Tasks return
only the segment's ``IndexMetadata`` message (a few hundred bytes), never rows; the driver then
commits every segment as one index in one ``CreateIndex`` version
(``commit_existing_index_segments``), so readers, pylance included, see the whole index or none.
An INVERTED index's segments are first gathered into one segment holding every task's
partitions (``merge_existing_index_segments``: file copies), as full-text search reads one.
A failed task fails the job before anything is committed (its segment files are left for cleanup).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from lance_format.distributed import LanceDataset, check_index_request, index_segment_from_bytes, index_segment_to_bytes
from lance_format.errors import InvalidInputError

_TASK_SCHEMA = "task int, spec string"
_OUT_SCHEMA = "segment binary"


def _build_segments(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: one uncommitted segment per task spec; yields its metadata message."""

    out: list[bytes] = []
    for batch in batches:
        for spec_text in batch.column("spec").to_pylist():
            spec = json.loads(spec_text)
            ds = LanceDataset(spec["uri"], version=spec["version"], storage_options=spec["storage_options"])
            segment = ds.create_index_uncommitted(spec["column"], spec["index_type"], spec["name"],
                                                  fragment_ids=spec["fragment_ids"], **spec["params"])
            out.append(index_segment_to_bytes(segment))
    yield pa.RecordBatch.from_arrays([pa.array(out, pa.binary())], names=["segment"])


def create_scalar_index(spark: Any, uri: str, column: str, index_type: str, name: str | None = None, *,
                        fragments_per_task: int = 1, storage_options: dict[str, str] | None = None,
                        **params: Any) -> LanceDataset:
    """Build a scalar index (``BTREE``, ``BITMAP``, ... as ``LanceDataset.create_scalar_index``)
    on ``column`` of the table at ``uri``: segments on the executors, one commit from the driver.
    Returns the dataset at the committed version."""

    if fragments_per_task < 1:
        raise InvalidInputError(f"fragments_per_task must be at least 1, got {fragments_per_task}", table=uri)
    ds = LanceDataset(uri, storage_options=storage_options)
    column, _, kind = check_index_request(ds, column, index_type)  # typed errors before any task runs
    kind.check_params(params)
    fragment_ids = [f.id for f in ds.manifest.fragments]
    if not fragment_ids:
        raise InvalidInputError("cannot build an index on Spark over a table with no fragments; use "
                                "LanceDataset.create_scalar_index(train=False)", table=uri, column=column)
    index_name = name if name is not None else f"{column}_idx"
    groups = [fragment_ids[i:i + fragments_per_task] for i in range(0, len(fragment_ids), fragments_per_task)]
    specs = [(i, json.dumps({"uri": ds.uri, "version": ds.version, "storage_options": storage_options or {},
                             "column": column, "index_type": index_type, "name": index_name,
                             "fragment_ids": g, "params": params}))
             for i, g in enumerate(groups)]
    tasks = spark.createDataFrame(specs, _TASK_SCHEMA).repartition(len(specs), "task")
    rows = tasks.mapInArrow(_build_segments, _OUT_SCHEMA).collect()
    segments = []
    for row in rows:
        segments.append(index_segment_from_bytes(bytes(row["segment"])))
    if len(segments) != len(groups):
        raise InvalidInputError(f"expected {len(groups)} index segments from the executors, got {len(segments)}",
                                table=uri, column=column)
    if kind.name == "INVERTED":
        # full-text search reads one segment: the tasks' partitions are gathered into one (file
        # copies on the driver; nothing is re-tokenized)
        segments = [ds.merge_existing_index_segments(segments)]
    return ds.commit_existing_index_segments(index_name, column, segments)
