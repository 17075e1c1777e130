"""Stable row-id sequences (``lance.table.RowIdSequence``), byte-compatible with pylance 14.

A fragment of a table with stable row ids stores, per *physical* row, the row id as a list of
``U64Segment`` s (:mod:`lance_format.table.u64_segment`). This module parses, builds and encodes
those sequences exactly as Lance does (``RowIdSequence::extend`` fusing), reproduces Lance's
segment-wise concatenation used by compaction (``rechunk_row_ids``), and reads a fragment's
inline or external sequence. Assigning ids at commit is :mod:`lance_format.table.lineage`'s job.
Row-version sequences (``_row_created_at_version`` / ``_row_last_updated_at_version``) live in
:mod:`lance_format.table.row_versions`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from lance_format.errors import CorruptFileError, InvalidInputError
from lance_format.proto import rowids_pb2
from lance_format.table.u64_segment import RANGE, U64Segment, masked_pieces, rechunk_pieces


# -- sequences ---------------------------------------------------------------------------------
def parse_row_id_segments(data: bytes) -> list[U64Segment]:
    """Parse RowIdSequence proto bytes into segments (raises CorruptFileError)."""
    msg = rowids_pb2.RowIdSequence()
    try:
        msg.ParseFromString(bytes(data))
    except DecodeError as exc:
        raise CorruptFileError(f"invalid RowIdSequence protobuf: {exc}") from exc
    return [U64Segment.from_proto(s) for s in msg.segments]


def serialize_row_id_segments(segments: Iterable[U64Segment]) -> bytes:
    msg = rowids_pb2.RowIdSequence()
    for seg in segments:
        seg.to_proto(msg.segments.add())
    return msg.SerializeToString()


def segments_values(segments: Sequence[U64Segment]) -> np.ndarray:
    if not segments:
        return np.zeros(0, dtype=np.uint64)
    return np.concatenate([s.values() for s in segments])


def decode_row_ids(data: bytes, num_rows: int | None = None) -> np.ndarray:
    """RowIdSequence bytes -> uint64 row id per physical row.

    ``num_rows`` (the fragment's physical_rows) is checked *before* materializing, so a corrupt
    Range cannot make us allocate an absurd array.
    """
    segments = parse_row_id_segments(data)
    total = sum(len(s) for s in segments)
    if num_rows is not None and total != num_rows:
        raise CorruptFileError(f"row id sequence has {total} ids but the fragment has {num_rows} rows")
    return segments_values(segments)


def extend_segments(segments: list[U64Segment], more: Iterable[U64Segment]) -> list[U64Segment]:
    """Lance's ``RowIdSequence::extend``: append, fusing a trailing Range with a touching Range."""
    more = list(more)
    if segments and more and segments[-1].kind == RANGE and more[0].kind == RANGE:
        last, first = segments[-1], more[0]
        if last.end == first.start:
            segments[-1] = U64Segment.range(last.start, first.end)
            more = more[1:]
    segments.extend(more)
    return segments


def build_row_id_segments(row_ids: np.ndarray, batch_lengths: Sequence[int] | None = None) -> list[U64Segment]:
    """Segments Lance builds for ``row_ids``.

    One ``from_slice`` segment for the whole array (append, merge-insert fill-in), or, when
    ``batch_lengths`` is given, one per captured batch fused with ``extend`` (the way Update
    captures row ids batch by batch).
    """
    raw = np.asarray(row_ids)
    if raw.size and (raw.dtype.kind not in "iu" or (raw.dtype.kind == "i" and raw.min() < 0)):
        raise InvalidInputError(f"row ids must be non-negative integers, got dtype {raw.dtype}")
    ids = raw.astype(np.uint64, copy=False)
    if batch_lengths is None:
        return [U64Segment.from_values(ids)] if ids.size else []
    if sum(batch_lengths) != ids.size:
        raise InvalidInputError(f"batch lengths sum to {sum(batch_lengths)}, expected {ids.size}")
    segments: list[U64Segment] = []
    pos = 0
    for n in batch_lengths:
        if n:
            extend_segments(segments, [U64Segment.from_values(ids[pos : pos + n])])
        pos += n
    return segments


def encode_row_ids(row_ids: np.ndarray, batch_lengths: Sequence[int] | None = None) -> bytes:
    """uint64 row ids -> RowIdSequence bytes as pylance writes them (see build_row_id_segments).

    ``encode_row_ids(np.arange(10))`` == ``0a 04 0a 02 10 0a``. An empty array gives ``b""``.
    """
    return serialize_row_id_segments(build_row_id_segments(row_ids, batch_lengths))


def rechunk_row_ids(
    sequences: Sequence[bytes | Sequence[U64Segment]],
    deletions: Sequence[np.ndarray | None],
    chunk_sizes: Sequence[int],
) -> list[bytes]:
    """Row-id sequences of the fragments compaction writes (Lance ``rechunk_stable_row_ids``).

    ``sequences`` are the old fragments' sequences in task order, ``deletions`` their deleted
    physical offsets (or None), ``chunk_sizes`` the new fragments' row counts. Deleted rows are
    dropped segment by segment; every piece is re-encoded with ``from_slice`` and touching
    Ranges are fused, so pylance's RangeWithBitmap spans come out byte for byte.
    """
    parsed = [parse_row_id_segments(s) if isinstance(s, (bytes, bytearray)) else list(s) for s in sequences]
    result = []
    for chunk in rechunk_pieces(masked_pieces(parsed, deletions), chunk_sizes):
        segments: list[U64Segment] = []
        for _, _, vals in chunk:
            extend_segments(segments, [U64Segment.from_values(vals)])
        result.append(serialize_row_id_segments(segments))
    return result


# -- reading from a fragment -------------------------------------------------------------------
def read_sequence_bytes(store: Any, fragment_pb: Any, inline_field: str, external_field: str) -> bytes | None:
    """Bytes of an inline or external (``ExternalFile`` relative to the table root) sequence."""
    if fragment_pb.HasField(inline_field):
        return bytes(getattr(fragment_pb, inline_field))
    if not fragment_pb.HasField(external_field):
        return None
    ext = getattr(fragment_pb, external_field)
    size = store.size(ext.path)
    if ext.offset + ext.size > size:
        raise CorruptFileError(
            f"{external_field} slice [{ext.offset}, {ext.offset + ext.size}) is past the end of "
            f"the {size}-byte file",
            path=ext.path,
        )
    with store.open_input(ext.path) as f:
        data = f.read_at(ext.size, ext.offset)
    return bytes(data)


def _context(fragment_pb: Any, external_field: str) -> dict[str, str]:
    if fragment_pb.HasField(external_field):
        return {"path": getattr(fragment_pb, external_field).path}
    return {}


def read_row_ids(store: Any, fragment_pb: Any) -> np.ndarray | None:
    """Row id per physical row of a fragment, or None when it has no row-id sequence."""
    data = read_sequence_bytes(store, fragment_pb, "inline_row_ids", "external_row_ids")
    if data is None:
        return None
    num_rows = fragment_pb.physical_rows or None  # 0 = unknown in old manifests
    try:
        return decode_row_ids(data, num_rows)
    except CorruptFileError as exc:
        exc.reason = f"fragment {fragment_pb.id}: {exc.reason}"
        raise exc.with_context(**_context(fragment_pb, "external_row_ids"))


__all__ = [
    "parse_row_id_segments", "serialize_row_id_segments", "segments_values", "decode_row_ids", "extend_segments",
    "build_row_id_segments", "encode_row_ids", "rechunk_row_ids", "read_sequence_bytes", "read_row_ids",
]
