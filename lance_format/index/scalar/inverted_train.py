"""Training an INVERTED index segment: parameters as pylance 14.0.2 records them, partitions
streamed from the column's batches, and the segment's ``metadata.lance``.

Batches are analyzed as they come; a partition is written once it holds about
:data:`PARTITION_TOKENS` tokens (memory stays bounded whatever the table's size). BM25
statistics are the index's over all partitions at query time, so the cut changes no score.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.errors import InvalidInputError, UnsupportedFeatureError
from lance_format.index.progress import Reporter
from lance_format.index.scalar.details import _varint
from lance_format.index.scalar.fts_tokenizer import TokenizerParams, analyze
from lance_format.index.scalar.inverted_build import build_partition
from lance_format.index.store import IndexStore

PARTITION_TOKENS = 1 << 22
STAGING = "staging/"
# an empty roaring bitmap (pylance's ``deleted_fragments``)
EMPTY_BITMAP = b":0\x00\x00\x00\x00\x00\x00"
FILE_METADATA = {"posting_tail_codec": "varint_delta_v1", "format_version": "2", "posting_block_size": "128"}
POSITION_METADATA = {"positions_layout": "shared_stream_v2", "positions_codec": "packed_delta_v1"}

# pylance's params, in the order its JSON lists them, with their defaults
DEFAULTS: dict[str, Any] = {
    "lance_tokenizer": "text", "base_tokenizer": "simple", "language": "English", "with_position": False,
    "max_token_length": 40, "lower_case": True, "stem": True, "remove_stop_words": True,
    "custom_stop_words": None, "ascii_folding": True, "min_ngram_length": 3, "max_ngram_length": 3,
    "prefix_only": False, "block_size": 128, "split_identifiers": False, "split_on_numerics": False,
    "preserve_original": False, "index_operators": False,
}
# build-time knobs pylance takes but does not record
TRANSIENT = ("memory_limit", "num_workers", "format_version", "document_granularity", "progress_callback")
_BOOLS = ("with_position", "lower_case", "stem", "remove_stop_words", "ascii_folding", "prefix_only")


def normalize(params: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded parameters (pylance's defaults filled in), or a typed error for a bad one."""
    unknown = sorted(set(params) - set(DEFAULTS) - set(TRANSIENT))
    if unknown:
        raise InvalidInputError(f"INVERTED index: unknown parameters {unknown}")
    out = dict(DEFAULTS)
    if str(params.get("base_tokenizer", "simple")).lower() == "ngram":
        out.update(stem=False, remove_stop_words=False)
    out.update({k: v for k, v in params.items() if k in DEFAULTS})
    for key in _BOOLS:
        if not isinstance(out[key], bool):
            raise InvalidInputError(f"INVERTED index: {key} must be a bool, got {out[key]!r}")
    if out["max_token_length"] is not None and (isinstance(out["max_token_length"], bool)
                                                or not isinstance(out["max_token_length"], int)
                                                or out["max_token_length"] <= 0):
        raise InvalidInputError(f"INVERTED index: max_token_length must be a positive int or None, "
                                f"got {out['max_token_length']!r}")
    words = out["custom_stop_words"]
    if words is not None:
        if isinstance(words, str) or not all(isinstance(w, str) for w in words):
            raise InvalidInputError(f"INVERTED index: custom_stop_words must be a list of strings, got {words!r}")
        out["custom_stop_words"] = list(words)
    if out["block_size"] != 128:
        raise UnsupportedFeatureError(f"INVERTED index: block_size {out['block_size']} is not supported "
                                      "(only 128, pylance's stable layout)")
    out["base_tokenizer"] = str(out["base_tokenizer"]).lower()
    tokenizer(out).check()
    return out


def tokenizer(params: Mapping[str, Any]) -> TokenizerParams:
    return TokenizerParams.from_json(json.dumps(params))


def params_json(params: Mapping[str, Any]) -> str:
    return json.dumps({k: params[k] for k in DEFAULTS}, separators=(",", ":"), ensure_ascii=False)


def details(params: Mapping[str, Any]) -> bytes:
    """``lance.table.InvertedIndexDetails``: proto3 fields, false/zero ones left out; the language
    is its JSON string (with quotes), as pylance writes it."""

    def text(number: int, value: str) -> bytes:
        data = value.encode()
        return _varint(number << 3 | 2) + _varint(len(data)) + data

    def num(number: int, value: int) -> bytes:
        return _varint(number << 3) + _varint(int(value)) if value else b""

    out = text(1, params["base_tokenizer"]) + text(2, json.dumps(params["language"]))
    out += num(3, params["with_position"])
    if params["max_token_length"] is not None:
        out += _varint(4 << 3) + _varint(int(params["max_token_length"]))
    for number, key in ((5, "lower_case"), (6, "stem"), (7, "remove_stop_words"), (8, "ascii_folding"),
                        (9, "min_ngram_length"), (10, "max_ngram_length"), (11, "prefix_only")):
        out += num(number, params[key])
    out += _varint(12 << 3) + _varint(int(params["block_size"]))
    out += _varint(15 << 3) + _varint(2)  # posting format version 2
    return out


class _Pending:
    """Analyzed documents waiting for their partition to fill."""

    def __init__(self) -> None:
        self.tokens: list[pa.Array] = []
        self.docs: list[np.ndarray] = []
        self.positions: list[np.ndarray] = []
        self.row_ids: list[np.ndarray] = []
        self.num_tokens = 0
        self.num_rows = 0

    def add(self, tokens: pa.Array, doc: np.ndarray, positions: np.ndarray, row_ids: np.ndarray) -> None:
        self.tokens.append(tokens)
        self.docs.append(doc + self.num_rows)
        self.positions.append(positions)
        self.row_ids.append(row_ids)
        self.num_tokens += len(tokens)
        self.num_rows += len(row_ids)


def train(store: IndexStore, batches: Iterable[pa.RecordBatch], params: Mapping[str, Any], *,
          staging: int | None = None) -> None:
    """Write every partition of the batches' ``value`` column, then ``metadata.lance``. With
    ``staging`` (a fragment id), pylance's per-fragment distributed layout instead: under
    ``staging/``, partitions numbered from ``fragment << 32``, each with its own metadata file
    (:func:`merge_staged` turns them into a segment)."""
    recorded = normalize(params)
    analyzer = tokenizer(recorded)
    with_position = bool(recorded["with_position"])
    file_meta = {**FILE_METADATA, **(POSITION_METADATA if with_position else {})}
    partitions: list[int] = []

    def flush(pending: _Pending) -> None:
        if not pending.num_rows:
            return
        part = build_partition(
            pa.concat_arrays(pending.tokens) if pending.tokens else pa.array([], pa.large_string()),
            np.concatenate(pending.docs), np.concatenate(pending.positions) if with_position else None,
            np.concatenate(pending.row_ids))
        if not part.docs.num_rows:
            return  # pylance writes no partition without documents
        pid = len(partitions) if staging is None else (staging << 32) + len(partitions)
        prefix = "" if staging is None else STAGING
        store.write_table(f"{prefix}part_{pid}_tokens.lance", part.tokens)
        store.write_table(f"{prefix}part_{pid}_docs.lance", part.docs,
                          metadata={"total_tokens": str(part.total_tokens)})
        store.write_table(f"{prefix}part_{pid}_invert.lance", part.invert, metadata=file_meta)
        partitions.append(pid)

    pending = _Pending()
    for batch in batches:
        values = batch.column(0)
        row_ids = batch.column(1).to_numpy(zero_copy_only=False).astype(np.uint64)
        tokens, doc, positions = analyze(values, analyzer)
        pending.add(tokens, doc, positions, row_ids)
        if pending.num_tokens >= PARTITION_TOKENS:
            flush(pending)
            pending = _Pending()
    flush(pending)
    if staging is None:
        write_metadata(store, recorded, partitions)
        return
    # one metadata file per staged partition (a fragment without documents: one listing none)
    for pid in partitions or [staging << 32]:
        write_metadata(store, recorded, [pid] if partitions else [], f"{STAGING}part_{pid}_metadata.lance")


def write_metadata(store: IndexStore, params: Mapping[str, Any], partitions: list[int],
                   name: str = "metadata.lance") -> None:
    meta = {"params": params_json(params), "partitions": json.dumps(partitions, separators=(",", ":")),
            "token_set_format": "fst", **FILE_METADATA}
    if params.get("with_position"):
        meta.update(POSITION_METADATA)
    schema = pa.schema([pa.field("deleted_fragments", pa.binary(), False)])
    store.write_table(name, pa.table([pa.array([EMPTY_BITMAP], pa.binary())], schema=schema), metadata=meta)


def merge_segments(target: IndexStore, sources: list[IndexStore]) -> None:
    """One segment holding every partition of ``sources`` (segments built with the same
    parameters over disjoint fragments): their files copied, renumbered, under one
    ``metadata.lance``. Nothing is re-tokenized: scores use every partition's statistics."""
    params: dict[str, Any] | None = None
    partitions: list[int] = []
    for source in sources:
        meta = source.schema_metadata("metadata.lance")
        these = json.loads(meta.get("params", "{}"))
        if params is not None and these != params:
            raise InvalidInputError(f"INVERTED segment {source.uuid} was built with other parameters "
                                    f"({these}) than the first segment ({params}); cannot merge them")
        params = these
        for pid in json.loads(meta.get("partitions", "[]")):
            new = len(partitions)
            for part in ("tokens", "docs", "invert"):
                target.copy_from(source, f"part_{pid}_{part}.lance", f"part_{new}_{part}.lance")
            partitions.append(new)
    write_metadata(target, normalize(params or {}), partitions)


def merge_staged(store: IndexStore, progress: Reporter | None = None) -> list[int]:
    """Turn the staged partitions of segment ``store`` (written by ``train(..., staging=)`` on
    each worker) into the segment: copied to ``part_0``, ``part_1``, ... in partition order, one
    ``metadata.lance``, the staging files removed. The fragments they cover, sorted. ``progress``
    gets pylance's stages: read_partition_metadata, remap_partition_files, write_merged_metadata."""
    progress = progress or Reporter(None)
    names = [info.base_name for info in store.store.list_files(store.path(STAGING), recursive=False)]
    metadata_files = sorted(n for n in names if n.endswith("_metadata.lance"))
    if not metadata_files:
        raise InvalidInputError(f"index {store.uuid} has no staged INVERTED partitions to merge "
                                "(build them with create_scalar_index(..., fragment_ids=, index_uuid=))",
                                path=store.path(STAGING))
    params: dict[str, Any] | None = None
    staged: list[int] = []
    fragments: set[int] = set()
    progress.emit("start", "read_partition_metadata", 0, len(metadata_files))
    for done, name in enumerate(metadata_files, 1):
        meta = store.schema_metadata(f"{STAGING}{name}")
        these = json.loads(meta.get("params", "{}"))
        if params is not None and these != params:
            raise InvalidInputError(f"staged file {name} of index {store.uuid} was built with other "
                                    f"parameters ({these}) than the others ({params})", path=store.path(STAGING))
        params = these
        staged += json.loads(meta.get("partitions", "[]"))
        fragments.add(int(name[len("part_"):-len("_metadata.lance")]) >> 32)
        progress.emit("progress", "read_partition_metadata", done, len(metadata_files))
    progress.emit("complete", "read_partition_metadata", len(metadata_files), len(metadata_files))
    parts = ("tokens", "docs", "invert")
    total = len(parts) * len(staged)
    progress.emit("start", "remap_partition_files", 0, total)
    for new, pid in enumerate(sorted(staged)):
        for part in parts:
            store.copy_from(store, f"{STAGING}part_{pid}_{part}.lance", f"part_{new}_{part}.lance")
        progress.emit("progress", "remap_partition_files", len(parts) * (new + 1), total)
    progress.emit("complete", "remap_partition_files", total, total)
    progress.emit("start", "write_merged_metadata", 0, 1)
    write_metadata(store, normalize(params or {}), list(range(len(staged))))
    progress.emit("progress", "write_merged_metadata", 1, 1)
    store.store.delete_many([store.path(f"{STAGING}{n}") for n in names])
    progress.emit("complete", "write_merged_metadata", 1, 1)
    return sorted(fragments)


def check_fts_format_version(value: Any, table: str, column: str) -> None:
    """Accept pylance's INVERTED ``format_version`` values (1, 2, 3, ``"v1"``...): invalid ones are
    refused with pylance's message; this engine writes only the v2 layout, so 1 and 3 are refused
    as unsupported rather than silently written as v2."""
    if value is None:
        return
    text = str(value).strip().lower()
    number = text[1:] if text.startswith("v") else text
    if number not in ("1", "2", "3"):
        raise InvalidInputError(f"unsupported FTS format version {value}, expected 1, 2, or 3",
                                table=table, column=column)
    if number != "2":
        raise UnsupportedFeatureError(f"INVERTED format_version {value} is not supported by this engine "
                                      "(it writes the v2 layout only: use format_version=2 or leave it unset)",
                                      table=table, column=column)
