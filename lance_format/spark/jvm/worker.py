"""The Python side of the JVM ``lance`` source: a long-lived process that plans and reads for it.

The JVM connector (``java/org/lanceformat/spark``) starts ``python -m lance_format.spark.jvm.worker``
and keeps it for further calls (a pool per JVM, one call at a time per process), so a query
pays no interpreter start-up. All planning is the Python data source's own
(:class:`lance_format.spark.datasource.LanceDataSource`: options, catalog tables, version
pinning, the schema check); the JVM only adds what Spark tells a DataSource V2 and not a Python
one: the columns the query needs and its filters.

Protocol (stdin/stdout, big-endian): a request is a 4-byte length and a JSON object with
``op`` in ``schema``, ``plan``, ``read``. Each answer is a sequence of frames, a 4-byte kind
and a 4-byte length then the payload: ``JSON`` (the answer to ``schema``/``plan``, last),
``ARROW`` (the next piece of an Arrow IPC stream: the schema message, then one message per
record batch), ``END`` (the stream is complete) or ``ERROR`` (a message; last). Anything the
engine prints goes to stderr: stdout carries only frames.
"""

from __future__ import annotations

import base64
import json
import pickle
import struct
import sys
import traceback
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, BinaryIO

import pyarrow as pa

JSON, ARROW, END, ERROR = 0, 1, 2, 3
_FRAME = struct.Struct(">ii")


def _frame(out: BinaryIO, kind: int, payload: bytes | memoryview | pa.Buffer) -> None:
    out.write(_FRAME.pack(kind, len(memoryview(payload))))
    out.write(payload)


def _options(raw: dict[str, str]) -> Any:
    from pyspark.sql.datasource import CaseInsensitiveDict

    return CaseInsensitiveDict({str(k): str(v) for k, v in raw.items()})


def schema(request: dict[str, Any]) -> dict[str, Any]:
    """The table's Spark schema (JSON), as the Python source's ``schema()`` gives it."""
    from lance_format.spark.datasource import LanceDataSource

    return {"schema": LanceDataSource(_options(request["options"])).schema().json()}


def _filters_sql(filters: list[dict[str, Any]], table_schema: pa.Schema) -> list[str]:
    """The pushed filters the engine can evaluate, as its SQL; the others are dropped (Spark
    evaluates every filter again after the scan, so dropping one only reads more rows)."""
    from lance_format.distributed import to_expression
    from lance_format.spark.jvm.filters import filter_to_sql

    kept = []
    for node in filters:
        sql = filter_to_sql(node, table_schema)
        if sql is None:
            continue
        try:
            to_expression(sql, table_schema)
        except Exception:
            continue
        kept.append(sql)
    return kept


def plan(request: dict[str, Any]) -> dict[str, Any]:
    """Splits, statistics and the pickled read of a scan of ``columns`` (top-level names, in the
    order Spark wants them) with ``filters`` (engine SQL) over a table of ``schema``."""
    from pyspark.sql.types import StructType

    from lance_format.distributed import LanceDataset, live_row_count
    from lance_format.spark.datasource import LanceDataSource, LanceReader
    from lance_format.spark.tasks import arrow_schema_to_bytes
    from lance_format.spark.types import spark_arrow_schema

    full = StructType.fromJson(json.loads(request["schema"]))
    reader = LanceDataSource(_options(request["options"])).reader(full)
    if not isinstance(reader, LanceReader) or reader.plan is None:  # a catalog table not yet written
        return {"splits": 0, "rows": 0, "bytes": 0, "plan": ""}
    read = reader.plan
    columns = list(request["columns"])
    by_name = {f.name: f for f in full.fields}
    pruned = StructType([by_name[c] for c in columns])
    spec = replace(read.spec, columns=tuple(columns), target=arrow_schema_to_bytes(spark_arrow_schema(pruned)))
    ds = LanceDataset(spec.uri, spec.version, storage_options=dict(spec.storage_options))
    filters = _filters_sql(list(request.get("filters") or []), ds.schema)
    if filters:
        parts = ([f"({spec.filter})"] if spec.filter else []) + [f"({s})" for s in filters]
        spec = replace(spec, filter=" AND ".join(parts))
    fragments = ds.manifest.fragments
    return {
        "splits": len(read.splits),
        "rows": sum(live_row_count(f) for f in fragments),
        "bytes": sum(d.file_size_bytes for f in fragments for d in f.files),
        "filters": filters,
        "plan": base64.b64encode(pickle.dumps((spec, read.splits))).decode("ascii"),
    }


def read(request: dict[str, Any], out: BinaryIO) -> None:
    """One split of a planned read as an Arrow IPC stream of ``ARROW`` frames, then ``END``."""
    from lance_format.spark.tasks import _decoded_serially, _read_split, arrow_schema_from_bytes

    spec, splits = pickle.loads(base64.b64decode(request["plan"]))
    _frame(out, ARROW, arrow_schema_from_bytes(spec.target).serialize())
    batches: Iterator[pa.RecordBatch] = _read_split(spec, splits[int(request["split"])])
    # one Spark task per core: decode the columns one after another, not on the decode pool
    for batch in _decoded_serially(batches):
        _frame(out, ARROW, batch.serialize())
        out.flush()
    _frame(out, END, b"")


def _request(stdin: BinaryIO) -> dict[str, Any] | None:
    head = stdin.read(4)
    if len(head) < 4:
        return None  # the JVM closed the pipe: exit
    (length,) = struct.unpack(">i", head)
    return json.loads(stdin.read(length))


def serve(stdin: BinaryIO, out: BinaryIO) -> None:
    """Answer requests until stdin closes."""
    while (request := _request(stdin)) is not None:
        try:
            op = request.get("op")
            if op == "read":
                read(request, out)
            elif op in ("schema", "plan"):
                answer = schema(request) if op == "schema" else plan(request)
                _frame(out, JSON, json.dumps(answer).encode())
            else:
                raise ValueError(f"unknown request {op!r}")
        except Exception as exc:  # the JVM raises it in the query: keep the engine's message
            traceback.print_exc(file=sys.stderr)
            _frame(out, ERROR, f"{type(exc).__name__}: {exc}".encode())
        out.flush()


def main() -> None:
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # prints must not corrupt the frames
    serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    main()
