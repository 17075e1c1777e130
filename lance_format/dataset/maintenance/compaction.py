"""``optimize.compact_files``: merge small fragments and materialize deletions, like pylance 14.

Planning (Lance's ``plan_compaction``): walking the fragments in order, a fragment whose share
of deleted rows exceeds ``materialize_deletions_threshold`` must be rewritten, one smaller than
``target_rows_per_fragment`` may be merged with its neighbours; runs of candidates (never mixing
fragments covered by different indices) form bins, a lone "may merge" fragment is left alone,
and bins are split so each has at least ``target_rows_per_fragment`` live rows. A bin of R rows
is rewritten as ``max(1, R // target)`` fragments of near-equal size (larger ones first).

Committing: one ``ReserveFragments`` reserves the new fragment ids, then one ``Rewrite`` (built
on the same read version) swaps the groups. With stable row ids the new fragments carry the old
rows' ids and version sequences, concatenated with deleted rows masked out; row ids never change.
Indexed fragments are compacted too, and the segments covering them remapped in the same
``Rewrite`` (:mod:`lance_format.dataset.maintenance.index_remap`, pylance 14.0.2's rules).
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_format.dataset.index_optimize import optimize_indices
from lance_format.dataset.maintenance.decoded_memory import modelled_decoder_memory, registered
from lance_format.dataset.maintenance.decoded_memory_v2_0 import modelled_legacy_decoder_memory, registered_v2_0
from lance_format.dataset.maintenance.index_remap import blocked_fragments, indexed_fragments, remap_indices
from lance_format.dataset.mutations.base import Prepared, storage_version_of, write_new_fragments
from lance_format.errors import InvalidInputError, UnsupportedFeatureError
from lance_format.proto import table_pb2
from lance_format.schema.blob import is_blob_field
from lance_format.table.commit import commit_landed, commit_transaction
from lance_format.table.index_meta import indexed_fragment_ids
from lance_format.table.row_versions import rechunk_version_sequences, uniform_version_sequence
from lance_format.table.rowids import read_sequence_bytes, rechunk_row_ids
from lance_format.table.transaction import BuildOptions, new_transaction

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.fragment import LanceFragment

DEFAULT_TARGET_ROWS = 1024 * 1024
DEFAULT_THRESHOLD = 0.1
DEFAULT_SCAN_BATCH_ROWS = 8192  # pylance's scanner batch size, which its compaction reads with
_CONFIG_PREFIX = "lance.compaction."


@dataclass
class CompactionMetrics:
    """What a compaction did (pylance's ``CompactionMetrics``)."""

    fragments_removed: int = 0
    fragments_added: int = 0
    files_removed: int = 0
    files_added: int = 0


def _option(ds: LanceDataset, name: str, given, default, convert):
    if given is not None:
        return given
    raw = ds.manifest.config.get(_CONFIG_PREFIX + name)
    if raw is None:
        return default
    try:
        return convert(raw)
    except ValueError:
        raise InvalidInputError(f"config key {_CONFIG_PREFIX + name} has an invalid value {raw!r}",
                                table=ds.uri) from None


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1"):
        return True
    if text.lower() in ("false", "0"):
        return False
    raise ValueError(text)


def plan(ds: LanceDataset, target: int, materialize: bool, threshold: float,
         excluded: Iterable[int] = (), only: Collection[int] | None = None) -> list[list[LanceFragment]]:
    """Groups of adjacent fragments to rewrite, in fragment order. ``excluded`` ids are never
    candidates, and when ``only`` is given only fragments whose ids are in it take part: the
    others end a run of candidates like a large fragment does."""
    excluded = set(excluded)
    if materialize and threshold >= 1.0:
        materialize = False
    bitmaps = indexed_fragment_ids(ds.manifest_file.index_section)
    blocked = blocked_fragments(ds)
    bins: list[dict] = []
    current: dict | None = None
    for fragment in ds.get_fragments():
        physical = fragment.physical_rows
        deleted = fragment.num_deletions
        covering = tuple(i for i, b in enumerate(bitmaps) if b is None or fragment.fragment_id in b)
        if fragment.fragment_id in blocked or fragment.fragment_id in excluded:
            candidacy = None  # covered by an index this engine cannot remap
        elif only is not None and fragment.fragment_id not in only:
            candidacy = None
        elif materialize and physical and deleted / physical > threshold:
            candidacy = "itself"
        elif physical < target:
            candidacy = "neighbours"
        else:
            candidacy = None
        if candidacy is None:
            if current is not None:
                bins.append(current)
                current = None
            continue
        if current is not None and current["indices"] != covering:
            bins.append(current)
            current = None
        if current is None:
            current = {"fragments": [], "candidacy": [], "rows": [], "indices": covering}
        current["fragments"].append(fragment)
        current["candidacy"].append(candidacy)
        current["rows"].append(physical - deleted)
    if current is not None:
        bins.append(current)
    tasks: list[list[LanceFragment]] = []
    for b in bins:
        if len(b["fragments"]) == 1 and b["candidacy"][0] == "neighbours":
            continue
        tasks.extend(_split_for_size(b["fragments"], b["rows"], target))
    return tasks


def within_budget(tasks: list[list[LanceFragment]], max_fragments: int | None, max_rows: int | None,
                  max_bytes: int | None) -> list[list[LanceFragment]]:
    """The first tasks whose source fragments, rows and data bytes stay within the budgets
    (pylance's ``max_source_*``): planning stops at the first task that would exceed one."""
    kept: list[list[LanceFragment]] = []
    fragments = rows = size = 0
    for task in tasks:
        fragments += len(task)
        rows += sum(f.count_rows() for f in task)
        size += sum(d.file_size_bytes for f in task for d in f.proto.files)
        if (max_fragments is not None and fragments > max_fragments or max_rows is not None and rows > max_rows
                or max_bytes is not None and size > max_bytes):
            break
        kept.append(task)
    return kept


def _split_for_size(fragments: list, rows: list[int], minimum: int) -> list[list]:
    out = []
    while True:
        length, count = 0, 0
        while count < minimum and length < len(rows):
            count += rows[length]
            length += 1
        if sum(rows[length:]) >= minimum:
            out.append(fragments[:length])
            fragments, rows = fragments[length:], rows[length:]
        else:
            out.append(fragments)
            return out


def chunk_sizes(total: int, target: int) -> list[int]:
    """Sizes of the fragments a bin of ``total`` live rows is rewritten into."""
    if total <= 0:
        return []
    n = max(1, total // max(1, target))
    base, extra = divmod(total, n)
    return [base + 1] * extra + [base] * (n - extra)


def _chunked(batches: Iterator[pa.RecordBatch], sizes: list[int]) -> Iterator[Iterator[pa.RecordBatch]]:
    """Split a batch stream into consecutive sub-streams of exactly ``sizes`` rows."""
    pending: list[pa.RecordBatch] = []

    def one(size: int) -> Iterator[pa.RecordBatch]:
        while size > 0:
            if not pending:
                batch = next(batches, None)
                if batch is None:
                    raise InvalidInputError("compaction read fewer rows than the fragments hold")
                pending.append(batch)
            batch = pending.pop()
            piece = batch.slice(0, min(size, batch.num_rows))
            if piece.num_rows < batch.num_rows:
                pending.append(batch.slice(piece.num_rows))
            size -= piece.num_rows
            yield piece

    for size in sizes:
        yield one(size)


def _sequences(ds: LanceDataset, group: list[LanceFragment], sizes: list[int], new: list[table_pb2.DataFragment]):
    store = ds.object_store
    deletions = [f.deleted_offsets if f.num_deletions else None for f in group]
    row_ids = [read_sequence_bytes(store, f.proto, "inline_row_ids", "external_row_ids") or b"" for f in group]
    created, updated = [], []
    for f in group:
        c = read_sequence_bytes(store, f.proto, "inline_created_at_versions", "external_created_at_versions")
        c = c if c is not None else uniform_version_sequence(f.physical_rows, 1)
        u = read_sequence_bytes(store, f.proto, "inline_last_updated_at_versions",
                                "external_last_updated_at_versions")
        created.append(c)
        updated.append(u if u is not None else c)
    for fragment, ids, c, u in zip(new, rechunk_row_ids(row_ids, deletions, sizes),
                                   rechunk_version_sequences(created, deletions, sizes),
                                   rechunk_version_sequences(updated, deletions, sizes)):
        fragment.inline_row_ids = ids
        fragment.inline_created_at_versions = c
        fragment.inline_last_updated_at_versions = u


def compact_files(
    ds: LanceDataset,
    *,
    target_rows_per_fragment: int | None = None,
    max_rows_per_group: int | None = None,
    max_bytes_per_file: int | None = None,
    materialize_deletions: bool | None = None,
    materialize_deletions_threshold: float | None = None,
    defer_index_remap: bool | None = None,
    num_threads: int | None = None,
    batch_size: int | None = None,
    transaction_properties=None,
    max_source_fragments: int | None = None,
    max_source_rows: int | None = None,
    max_source_bytes: int | None = None,
    excluded_fragment_ids: Iterable[int] | None = None,
    fragment_ids: Iterable[int] | None = None,
    **ignored,
) -> CompactionMetrics:
    """Compact ``ds`` (pylance's ``ds.optimize.compact_files``); ``ds`` moves to the new version.

    ``fragment_ids`` (not in pylance): only these fragments may be rewritten (e.g. the small
    files a write left), in runs of adjacent ones as usual."""
    target = int(_option(ds, "target_rows_per_fragment", target_rows_per_fragment, DEFAULT_TARGET_ROWS, int))
    if target <= 0:
        raise InvalidInputError("target_rows_per_fragment must be positive", table=ds.uri)
    materialize = _option(ds, "materialize_deletions", materialize_deletions, True, _bool)
    threshold = float(_option(ds, "materialize_deletions_threshold", materialize_deletions_threshold,
                              DEFAULT_THRESHOLD, float))
    tasks = within_budget(plan(ds, target, bool(materialize), threshold, excluded_fragment_ids or (),
                               None if fragment_ids is None else set(fragment_ids)),
                          max_source_fragments, max_source_rows, max_source_bytes)
    if not tasks:
        return CompactionMetrics()
    check_defer(ds, bool(_option(ds, "defer_index_remap", defer_index_remap, False, _bool)), tasks)

    prepared = Prepared(new_transaction(ds.version, properties=transaction_properties), None,
                        storage_version=storage_version_of(ds))
    try:
        groups = [(group_protos(group), rewrite_group(ds, group, target, batch_size, prepared, max_bytes_per_file))
                  for group in tasks]
        committed = commit_rewrites(ds, groups, prepared.txn, transaction_properties, prepared.written)
    except BaseException as error:
        if not commit_landed(error):
            prepared.discard(ds.object_store)
        raise
    ds._replace_version(committed.version)
    return group_metrics(groups)


def group_protos(group: list[LanceFragment]) -> list[table_pb2.DataFragment]:
    return [f.proto for f in group]


def rewrite_group(ds: LanceDataset, group: list[LanceFragment], target: int, batch_size: int | None,
                  prepared: Prepared, max_bytes_per_file: int | None = None) -> list[table_pb2.DataFragment]:
    """Write one planned group's live rows as new fragments (uncommitted, ids unassigned).

    Each planned chunk is written on its own; like pylance, a chunk's file is also cut once the
    bytes written reach ``max_bytes_per_file``, and the chunk's remaining rows start a new file.
    The rows are read in pylance's default batches (8192 rows, restarting at each fragment),
    since where a file is cut by bytes depends on where the writer flushed its pages; for 2.1/2.2
    files the writer counts the arrays at the memory pylance's decoder would have allocated
    for them (:mod:`lance_format.dataset.maintenance.decoded_memory`; 2.0 files:
    :mod:`lance_format.dataset.maintenance.decoded_memory_v2_0`)."""
    sizes = chunk_sizes(sum(f.count_rows() for f in group), target)
    batch_rows = batch_size or DEFAULT_SCAN_BATCH_ROWS
    # blob columns are rewritten from their bytes (stored anew by the writer, as pylance does)
    blobs = "all_binary" if any(is_blob_field(f) for f in ds.lance_schema.fields) else None
    batches: Iterator[pa.RecordBatch] = iter(ds.scanner(fragments=group, batch_size=batch_rows,
                                                        blob_handling=blobs).to_batches())
    new: list[table_pb2.DataFragment] = []
    with contextlib.ExitStack() as stack:
        if max_bytes_per_file is not None and (prepared.storage_version or storage_version_of(ds)) == "2.0":
            # 2.0 files: pylance's legacy decoders allocate otherwise
            batches = registered_v2_0(batches, group, ds.schema, batch_rows,
                                      stack.enter_context(modelled_legacy_decoder_memory()))
        elif max_bytes_per_file is not None:
            # where pylance cuts files by bytes depends on the memory its decoder allocated
            batches = registered(batches, group, ds.schema, batch_rows, stack.enter_context(modelled_decoder_memory()))
        for size, piece in zip(sizes, _chunked(batches, sizes)):
            written = write_new_fragments(ds, ds.schema, piece, prepared, max_rows_per_file=size,
                                          max_bytes_per_file=max_bytes_per_file)
            if sum(f.physical_rows for f in written) != size:
                raise InvalidInputError("compaction wrote fragments of unexpected sizes", table=ds.uri)
            new.extend(written)
    if ds.has_stable_row_ids:
        _sequences(ds, group, [f.physical_rows for f in new], new)
    return new


def check_defer(ds: LanceDataset, defer: bool, tasks: list[list[LanceFragment]]) -> None:
    """Refuse ``defer_index_remap=True`` where pylance would write a fragment-reuse index."""
    if not defer:
        return
    if ds.has_stable_row_ids:
        raise InvalidInputError("defer_index_remap=true is not supported on datasets with stable row IDs: stable "
                                "row IDs do not require index remapping during compaction, so there is nothing "
                                "to defer.", table=ds.uri)
    covered = indexed_fragments(ds)
    if any(f.fragment_id in covered for task in tasks for f in task):
        raise UnsupportedFeatureError("defer_index_remap=True (a fragment-reuse index) is not supported by this "
                                      "engine; compact with defer_index_remap=False to remap the indices now",
                                      table=ds.uri)


def commit_rewrites(ds: LanceDataset, groups: list[tuple[list[table_pb2.DataFragment], list[table_pb2.DataFragment]]],
                    txn, transaction_properties=None, written: list[str] | None = None):
    """Reserve ids for the new fragments, then commit one ``Rewrite`` of every group, built on
    ``txn``'s read version (a concurrent change to the same fragments is a conflict), with the
    index segments covering the groups remapped (their files' paths added to ``written``)."""
    total_new = sum(len(new) for _, new in groups)
    reserve = new_transaction(txn.read_version, properties=transaction_properties)
    reserve.reserve_fragments.num_fragments = total_new
    reserved = commit_transaction(ds.object_store, reserve)
    next_id = reserved.manifest_file.manifest.max_fragment_id - total_new + 1
    rewrite = txn.rewrite
    rewrite.SetInParent()
    for old, new in groups:
        pb = rewrite.groups.add()
        pb.old_fragments.extend(old)
        for fragment in new:
            fragment.id = next_id
            next_id += 1
        pb.new_fragments.extend(new)
    base = ds if ds.version == txn.read_version else ds.checkout_version(txn.read_version)
    rewrite.rewritten_indices.extend(remap_indices(base, groups, written if written is not None else []))
    read = ds.manifest_file if ds.version == txn.read_version else None
    return commit_transaction(ds.object_store, txn, options=BuildOptions(), read_manifest_file=read)


def group_metrics(groups: list[tuple[list[table_pb2.DataFragment], list[table_pb2.DataFragment]]]) -> CompactionMetrics:
    metrics = CompactionMetrics()
    for old, new in groups:
        metrics.fragments_removed += len(old)
        metrics.fragments_added += len(new)
        metrics.files_removed += sum(len(f.files) + int(f.HasField("deletion_file")) for f in old)
        metrics.files_added += sum(len(f.files) for f in new)
    return metrics


class DatasetOptimizer:
    """``ds.optimize``: table maintenance (mirrors pylance's ``DatasetOptimizer``)."""

    def __init__(self, dataset: LanceDataset) -> None:
        self._dataset = dataset

    def compact_files(self, **options) -> CompactionMetrics:
        return compact_files(self._dataset, **options)

    def enable_auto_cleanup(self, auto_cleanup_config: Any, **kwargs: Any) -> None:
        """pylance's ``optimize.enable_auto_cleanup``: :meth:`LanceDataset.enable_auto_cleanup`."""
        self._dataset.enable_auto_cleanup(auto_cleanup_config, **kwargs)

    def disable_auto_cleanup(self, **kwargs: Any) -> None:
        """pylance's ``optimize.disable_auto_cleanup``: :meth:`LanceDataset.disable_auto_cleanup`."""
        self._dataset.disable_auto_cleanup(**kwargs)

    def optimize_indices(self, index_names=None, num_indices_to_merge=None, retrain: bool = False,
                         **ignored: Any) -> None:
        """pylance's ``optimize.optimize_indices``: add the fragments appended since the indices
        were built to them (:mod:`lance_format.dataset.index_optimize`)."""

        optimize_indices(self._dataset, index_names=index_names, num_indices_to_merge=num_indices_to_merge,
                         retrain=retrain)


__all__ = ["compact_files", "CompactionMetrics", "DatasetOptimizer", "plan", "chunk_sizes", "rewrite_group",
           "commit_rewrites", "group_metrics", "within_budget"]
