"""pylance's per-fragment INVERTED build: ``create_scalar_index(column, "INVERTED",
fragment_ids=[f], index_uuid=u)`` on each worker writes staged partitions under
``_indices/<u>/staging/`` and commits nothing; ``merge_index_metadata(u, "INVERTED")`` then
turns them into the segment's files, which the caller commits (``LanceDataset.commit`` with a
``CreateIndex`` operation), as with pylance 14.0.2.
"""

from __future__ import annotations

import uuid as uuid_mod
from typing import TYPE_CHECKING, Any

from lance_format.errors import InvalidInputError, UnsupportedFeatureError
from lance_format.index.metadata import parse_index_uuid
from lance_format.index.scalar.base import VALUE_COLUMN
from lance_format.index.store import IndexStore, index_file_version

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


def stage(ds: LanceDataset, path: str, fragment_ids: list[int], index_uuid: str | None,
          params: dict[str, Any]) -> str:
    """Write the staged partitions of ``fragment_ids`` into segment ``index_uuid`` (a new uuid
    when None, returned)."""
    import pyarrow as pa

    from lance_format.index.scalar.inverted_train import train

    if not fragment_ids:
        raise InvalidInputError("fragment_ids must name at least one fragment", table=ds.uri, column=path)
    known = {f.id for f in ds.manifest.fragments}
    missing = sorted(set(fragment_ids) - known)
    if missing:
        raise InvalidInputError(f"fragments {missing} are not in version {ds.version}", table=ds.uri)
    segment = parse_index_uuid(index_uuid) if index_uuid is not None else str(uuid_mod.uuid4())
    store = IndexStore(ds.object_store, segment, index_file_version(ds.data_storage_version))
    wanted = set(fragment_ids)
    fragments = [f for f in ds.get_fragments() if f.fragment_id in wanted]
    scanner = ds.scanner(columns=[path], fragments=fragments, with_row_id=True, scan_in_order=True)
    batches = (pa.RecordBatch.from_arrays([b.column(0), b.column("_rowid")], names=[VALUE_COLUMN, "_rowid"])
               for b in scanner.to_batches())
    train(store, batches, params, staging=min(fragment_ids))
    return segment


def merge(ds: LanceDataset, index_uuid: str, index_type: str, progress_callback: Any = None) -> None:
    """pylance's ``merge_index_metadata`` for INVERTED staged partitions (nothing committed)."""
    from lance_format.index.progress import Reporter
    from lance_format.index.scalar.inverted_train import merge_staged

    if str(index_type).upper() not in ("INVERTED", "FTS"):
        raise UnsupportedFeatureError(f"merge_index_metadata of {index_type} indices is not supported by this "
                                      "engine (only INVERTED; other types: create_index_uncommitted + "
                                      "commit_existing_index_segments)", table=ds.uri)
    segment = parse_index_uuid(index_uuid)
    merge_staged(IndexStore(ds.object_store, segment, index_file_version(ds.data_storage_version)),
                 Reporter(progress_callback, final="write_merged_metadata"))
