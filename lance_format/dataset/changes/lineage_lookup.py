"""Per-offset lookups of a fragment's row ids and row versions, without full decoding.

The change feed usually needs the lineage of a handful of offsets of a fragment (the rows a
delete just removed). Decoding the fragment's whole row-id or version sequence for that costs
as much as the rows it has, so these helpers locate the segment or run of each offset from the
sequence's segment lengths and only expand the segments that are hit (``Range`` segments, the
common case, are pure arithmetic). Parsed sequences are cached on the ``LanceFragment``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
from google.protobuf.message import DecodeError

from lance_format.errors import CorruptFileError, InvalidInputError
from lance_format.proto import rowids_pb2, table_pb2
from lance_format.table.rowids import parse_row_id_segments, read_sequence_bytes
from lance_format.table.u64_segment import RANGE, U64Segment

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.fragment import LanceFragment
    from lance_format.io import ObjectStore

CREATED_AT = "created_at"
LAST_UPDATED_AT = "last_updated_at"


def _corrupt(fragment: LanceFragment, message: str) -> CorruptFileError:
    return CorruptFileError(f"fragment {fragment.fragment_id}: {message}", **fragment.error_context())


_Runs = tuple[list[int], rowids_pb2.RowDatasetVersionSequence | None]


def _run_versions(fragment: LanceFragment, kind: str) -> _Runs:
    """The runs' versions (a short Python list) and the parsed sequence (None when absent).

    Deciding that a fragment holds no row of a version range needs only these, so run lengths
    are worked out later, and only for fragments that do (see :func:`_parse_runs`).
    """
    key = f"_delta_versions_{kind}"
    cached = fragment.__dict__.get(key)
    if cached is None:
        cached = fragment.__dict__[key] = _descriptor_runs(
            fragment.object_store, fragment.proto, kind, fragment.error_context()
        )
    return cached


def _descriptor_runs(store: ObjectStore, meta: table_pb2.DataFragment, kind: str, context: dict) -> _Runs:
    """:func:`_run_versions` of a fragment descriptor (no ``LanceFragment`` needed); ``context``
    names the table and version in errors."""
    data = read_sequence_bytes(store, meta, f"inline_{kind}_versions", f"external_{kind}_versions")
    if data is None:
        return [1], None
    try:
        return _parse_version_runs(data)
    except DecodeError as exc:
        raise CorruptFileError(f"fragment {meta.id}: invalid {kind} version sequence: {exc}", **context) from exc


@lru_cache(maxsize=4096)
def _parse_version_runs(data: bytes) -> _Runs:
    """Parsed version runs, memoized by their bytes: run spans are offsets within a fragment, so
    the fragments one commit wrote (same size, same version) share identical sequences and a
    table of thousands of fragments parses a handful of them. Callers never mutate the result."""
    msg = rowids_pb2.RowDatasetVersionSequence()
    msg.ParseFromString(data)
    return [r.version for r in msg.runs], msg


def _parse_runs(fragment: LanceFragment, kind: str) -> tuple[list[int], list[int]]:
    """Versions and row counts of the runs, as short Python lists (runs are few)."""
    key = f"_delta_runs_{kind}"
    cached = fragment.__dict__.get(key)
    if cached is not None:
        return cached
    versions, msg = _run_versions(fragment, kind)
    if msg is None:
        lengths = [fragment.physical_rows]
    else:
        lengths = []
        for run in msg.runs:  # per run, not per row
            span = run.span
            if span.WhichOneof("segment") == RANGE:  # the usual span: no need to build a segment
                if span.range.end < span.range.start:
                    raise _corrupt(fragment, f"{kind} version run has a negative length")
                lengths.append(span.range.end - span.range.start)
            else:
                lengths.append(len(U64Segment.from_proto(span)))
        if sum(lengths) != fragment.physical_rows:
            covered = sum(lengths)
            raise _corrupt(fragment, f"{kind} version sequence covers {covered} rows, not {fragment.physical_rows}")
    fragment.__dict__[key] = (versions, lengths)
    return versions, lengths


def versions_at(fragment: LanceFragment, kind: str, offsets: np.ndarray) -> np.ndarray:
    """The ``kind`` version of each physical offset."""
    versions, lengths = _parse_runs(fragment, kind)
    if len(versions) == 1:
        return np.full(offsets.size, versions[0], np.uint64)
    ends = np.cumsum(np.array(lengths, np.int64))
    return np.array(versions, np.uint64)[np.searchsorted(ends, offsets, side="right")]


def latest_versions(dataset: LanceDataset, meta: table_pb2.DataFragment, kind: str) -> list[int]:
    """The versions of a fragment descriptor's ``kind`` runs (``[1]`` without a sequence)."""
    context = {"table": dataset.uri, "version": dataset.version}
    return _descriptor_runs(dataset.object_store, meta, kind, context)[0]


def any_version_in(fragment: LanceFragment, kind: str, low: int, high: int | None) -> bool:
    """Whether some run has ``low < version <= high`` (no upper bound for None)."""
    versions, _ = _run_versions(fragment, kind)
    return any(low < v and (high is None or v <= high) for v in versions)


def versions_mask(fragment: LanceFragment, kind: str, low: int, high: int | None) -> np.ndarray | None:
    """Per physical row ``low < version <= high`` (no upper bound for None), or None when no
    run qualifies; that answer needs only the run versions, so it is decided without numpy."""
    versions, _ = _run_versions(fragment, kind)
    hits = [low < v and (high is None or v <= high) for v in versions]
    if not any(hits):
        return None
    _, lengths = _parse_runs(fragment, kind)
    return np.repeat(np.array(hits, bool), np.array(lengths, np.int64))


def row_ids_at(fragment: LanceFragment, offsets: np.ndarray) -> np.ndarray:
    """Stable row id of each physical offset (uint64)."""
    offsets = np.asarray(offsets, np.int64)
    decoded = fragment.__dict__.get("_row_ids")
    if decoded is not None:  # LanceFragment already materialized the whole sequence
        return decoded[offsets]
    segments = fragment.__dict__.get("_delta_segments")
    if segments is None:
        data = read_sequence_bytes(fragment.object_store, fragment.proto, "inline_row_ids", "external_row_ids")
        if data is None:
            raise InvalidInputError(
                f"fragment {fragment.fragment_id} has no row-id sequence (stable row ids are required)",
                **fragment.error_context(),
            )
        try:
            parsed = parse_row_id_segments(data)
        except CorruptFileError as exc:
            raise _corrupt(fragment, exc.reason) from exc
        ends = np.cumsum(np.array([len(s) for s in parsed], np.int64))
        total = int(ends[-1]) if ends.size else 0
        if total != fragment.physical_rows:
            rows = fragment.physical_rows
            raise _corrupt(fragment, f"row id sequence has {total} ids but the fragment has {rows} rows")
        segments = (parsed, ends)
        fragment.__dict__["_delta_segments"] = segments
    parsed, ends = segments
    result = np.empty(offsets.size, np.uint64)
    if offsets.size == 0:
        return result
    which = np.searchsorted(ends, offsets, side="right")
    starts = ends - np.array([len(s) for s in parsed], np.int64)
    for index in np.unique(which):  # per touched segment, not per row
        hit = which == index
        segment = parsed[int(index)]
        local = offsets[hit] - starts[index]
        if segment.kind == RANGE:
            result[hit] = local.astype(np.uint64) + np.uint64(segment.start)
        else:
            result[hit] = segment.values()[local]
    return result
