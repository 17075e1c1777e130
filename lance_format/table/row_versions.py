"""Row-version sequences (``lance.table.RowDatasetVersionSequence``), byte-compatible with pylance 14.

A fragment of a table with stable row ids stores, for ``_row_created_at_version`` and
``_row_last_updated_at_version``, a list of runs ``(span, version)``: the run covers the next
``len(span)`` physical rows. The span is a ``U64Segment`` that only counts as a length (pylance
writes ``Range`` spans over positions, and compaction copies masked bitmap spans from the old
fragments), so readers must never interpret its values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from lance_format.errors import CorruptFileError, InvalidInputError
from lance_format.proto import rowids_pb2
from lance_format.table.rowids import read_sequence_bytes
from lance_format.table.u64_segment import U64Segment, masked_pieces, rechunk_pieces


@dataclass(frozen=True)
class VersionRun:
    """``len(span)`` consecutive rows that share ``version``."""

    span: U64Segment
    version: int

    def __len__(self) -> int:
        return len(self.span)


def parse_version_runs(data: bytes) -> list[VersionRun]:
    msg = rowids_pb2.RowDatasetVersionSequence()
    try:
        msg.ParseFromString(bytes(data))
    except DecodeError as exc:
        raise CorruptFileError(f"invalid RowDatasetVersionSequence protobuf: {exc}") from exc
    runs = []
    for run in msg.runs:
        if not run.HasField("span"):
            raise CorruptFileError("RowDatasetVersionRun is missing its span")
        runs.append(VersionRun(U64Segment.from_proto(run.span), run.version))
    return runs


def serialize_version_runs(runs: Iterable[VersionRun]) -> bytes:
    msg = rowids_pb2.RowDatasetVersionSequence()
    for run in runs:
        pb = msg.runs.add()
        run.span.to_proto(pb.span)
        pb.version = run.version
    return msg.SerializeToString()


def decode_version_sequence(data: bytes, num_rows: int | None = None) -> np.ndarray:
    """RowDatasetVersionSequence bytes -> uint64 version per physical row.

    When ``num_rows`` is given, the runs must cover exactly that many rows.
    """
    runs = parse_version_runs(data)
    lengths = np.array([len(r) for r in runs], dtype=np.int64)
    total = int(lengths.sum())
    if num_rows is not None and total != num_rows:
        raise CorruptFileError(f"version sequence covers {total} rows but the fragment has {num_rows}")
    versions = np.array([r.version for r in runs], dtype=np.uint64)
    return np.repeat(versions, lengths)


def version_runs_from_values(versions: np.ndarray) -> list[VersionRun]:
    """Runs of equal consecutive versions, spans ``Range[start, end)`` over positions."""
    v = np.asarray(versions, dtype=np.uint64)
    if v.size == 0:
        return []
    starts = np.concatenate([[0], np.flatnonzero(v[1:] != v[:-1]) + 1])
    ends = np.concatenate([starts[1:], [v.size]])
    return [
        VersionRun(U64Segment.range(int(s), int(e)), int(v[s]))
        for s, e in zip(starts.tolist(), ends.tolist())
    ]


def encode_version_sequence(versions: np.ndarray) -> bytes:
    """uint64 version per row -> RowDatasetVersionSequence bytes as pylance writes them.

    ``[1]*10`` -> ``0a 08 0a 04 0a 02 10 0a 10 01``. An empty array gives ``b""``.
    """
    return serialize_version_runs(version_runs_from_values(versions))


def uniform_version_sequence(num_rows: int, version: int) -> bytes:
    """One run ``(Range[0, num_rows), version)`` (Lance ``from_uniform_row_count``)."""
    if num_rows < 0:
        raise InvalidInputError("num_rows must be >= 0")
    if num_rows == 0:
        return b""
    return serialize_version_runs([VersionRun(U64Segment.range(0, num_rows), version)])


def rechunk_version_sequences(
    sequences: Sequence[bytes],
    deletions: Sequence[np.ndarray | None],
    chunk_sizes: Sequence[int],
) -> list[bytes]:
    """Version sequences of the fragments compaction writes (Lance ``rechunk_version_sequences``).

    ``sequences`` are the old fragments' sequences in task order. pylance substitutes missing
    ones: created_at -> ``uniform_version_sequence(rows, 1)``, last_updated_at -> the fragment's
    created_at sequence; the caller does that. Deleted rows are masked out of each run's span,
    the span pieces are re-encoded with ``from_slice`` and runs are never merged, which is how
    pylance ends up with spans like ``RangeWithBitmap[0,10) d303``.
    """
    parsed = [parse_version_runs(s) for s in sequences]
    spans = [[r.span for r in runs] for runs in parsed]
    result = []
    for chunk in rechunk_pieces(masked_pieces(spans, deletions), chunk_sizes):
        runs = [VersionRun(U64Segment.from_values(vals), parsed[si][gi].version) for si, gi, vals in chunk]
        result.append(serialize_version_runs(runs))
    return result


def _read(store: Any, fragment_pb: Any, num_rows: int | None, kind: str) -> np.ndarray | None:
    inline, external = f"inline_{kind}_versions", f"external_{kind}_versions"
    data = read_sequence_bytes(store, fragment_pb, inline, external)
    if data is None:
        return None
    try:
        return decode_version_sequence(data, num_rows)
    except CorruptFileError as exc:
        exc.reason = f"fragment {fragment_pb.id} {kind} versions: {exc.reason}"
        ctx = {"path": getattr(fragment_pb, external).path} if fragment_pb.HasField(external) else {}
        raise exc.with_context(**ctx)


def read_created_at(store: Any, fragment_pb: Any, num_rows: int | None = None) -> np.ndarray | None:
    """``_row_created_at_version`` per physical row, or None when the fragment has no sequence
    (pylance then reports 1 for every row)."""
    return _read(store, fragment_pb, num_rows, "created_at")


def read_last_updated_at(store: Any, fragment_pb: Any, num_rows: int | None = None) -> np.ndarray | None:
    """``_row_last_updated_at_version`` per physical row, or None when the fragment has none."""
    return _read(store, fragment_pb, num_rows, "last_updated_at")
