"""Data overlays (pylance 14's ``LanceOperation.DataOverlay``): new values for some cells of a
fragment, kept in small Lance files layered over the fragment's data files on read, so a few
cells change without rewriting the base files.

An overlay file (``DataOverlayFile``) names a data file holding one column per covered field and
the physical row offsets it covers: one offset set for every field (*dense*, a list of ints or
a bitmap) or one per field in the file's field order (*sparse*, a list of lists). The value for a
covered offset is the file's row at the offset's rank in that field's coverage (the smallest
covered offset is row 0). A fragment keeps its overlays oldest first and a later one wins where
they overlap; ``committed_version`` is stamped by the commit.

In the manifest (``DataFragment.overlays``, field 11) the offsets are serialized roaring bitmaps,
like deletion files; the transaction carries ``DataOverlay`` as field 115 of the operation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lance_format.errors import ArgumentTypeError, InvalidInputError, LanceError, UnsupportedFeatureError
from lance_format.file.legacy_v0_1 import is_legacy_version
from lance_format.file.reader import DataFileReader
from lance_format.proto import table_pb2

if TYPE_CHECKING:
    from lance_format.dataset.fragment_metadata import DataFile
    from lance_format.dataset.fragment_reading import FragmentReading
    from lance_format.file.plans import ColumnPlan
    from lance_format.schema import LanceSchema


@dataclass
class DataOverlayFile:
    """An overlay file: ``data_file``'s columns hold new values for the covered cells.

    ``offsets``: one iterable of ints (dense: shared by every field of the file) or a list of
    iterables (sparse: one per field, in the file's field order); physical row offsets, in any
    order, without repeats. ``committed_version``: None when committing (the commit stamps it),
    the version it was committed in when read back.
    """

    data_file: DataFile
    offsets: Any  # Iterable[int] (dense) or List[Iterable[int]] (sparse)
    committed_version: int | None = None


@dataclass
class DataOverlayGroup:
    """Overlay files to append to fragment ``fragment_id``'s overlays, oldest first."""

    fragment_id: int
    overlays: list[DataOverlayFile]


DataOverlayFile.__qualname__ = "LanceOperation.DataOverlayFile"
DataOverlayGroup.__qualname__ = "LanceOperation.DataOverlayGroup"


def _bitmap(values: Iterable[int]) -> BitMap:
    if isinstance(values, BitMap):
        return values
    if isinstance(values, (str, bytes)):
        raise ArgumentTypeError(f"overlay offsets must be integers, got {type(values).__name__}")
    items = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
    if items.size and items.dtype.kind not in "iu":
        raise ArgumentTypeError(f"overlay offsets must be integers, got {items.dtype}")
    if items.size and (int(items.min()) < 0 or int(items.max()) >= 2**32):
        raise InvalidInputError("overlay offsets must be physical row offsets in [0, 2^32)")
    bitmap = BitMap(items.astype(np.uint32))
    if len(bitmap) != items.size:
        raise InvalidInputError("overlay offsets repeat an offset (it would shift every later value onto the "
                                "wrong row)")
    return bitmap


def _is_sparse(offsets: Any) -> bool:
    if isinstance(offsets, (BitMap, np.ndarray)):
        return False
    items = list(offsets) if not isinstance(offsets, list) else offsets
    return bool(items) and not isinstance(items[0], (int, np.integer))


def overlay_to_proto(overlay: DataOverlayFile) -> table_pb2.DataOverlayFile:
    from lance_format.dataset.fragment_metadata import DataFile, data_file_to_proto

    if not isinstance(overlay, DataOverlayFile):
        raise ArgumentTypeError(f"expected LanceOperation.DataOverlayFile, got {type(overlay).__name__}")
    if not isinstance(overlay.data_file, DataFile):
        raise ArgumentTypeError(f"an overlay's data_file must be a DataFile, got {type(overlay.data_file).__name__}")
    pb = table_pb2.DataOverlayFile(data_file=data_file_to_proto(overlay.data_file),
                                   committed_version=int(overlay.committed_version or 0))
    if _is_sparse(overlay.offsets):
        # like pylance, the number of sets is not checked here; reading a field without one fails
        per_field = [_bitmap(o) for o in overlay.offsets]
        pb.sparse_offsets.field_offsets.extend(b.serialize() for b in per_field)
    else:
        pb.dense_offsets = _bitmap(overlay.offsets).serialize()
    return pb


def overlay_from_proto(pb: table_pb2.DataOverlayFile) -> DataOverlayFile:
    from lance_format.dataset.fragment_metadata import data_file_from_proto

    offsets: Any
    if pb.WhichOneof("coverage") == "sparse_offsets":
        offsets = [BitMap.deserialize(b) for b in pb.sparse_offsets.field_offsets]
    else:
        offsets = BitMap.deserialize(pb.dense_offsets) if pb.dense_offsets else BitMap()
    return DataOverlayFile(data_file_from_proto(pb.data_file), offsets, pb.committed_version)


def overlay_to_json(overlay: DataOverlayFile) -> dict[str, Any]:
    from lance_format.dataset.fragment_metadata import data_file_json

    offsets = overlay.offsets
    if _is_sparse(offsets):
        offsets_json: Any = [[int(i) for i in o] for o in offsets]
    else:
        offsets_json = [int(i) for i in offsets]
    return {"data_file": data_file_json(overlay.data_file), "offsets": offsets_json,
            "committed_version": overlay.committed_version}


def overlay_from_json(data: dict[str, Any]) -> DataOverlayFile:
    from lance_format.dataset.fragment_metadata import DataFile

    return DataOverlayFile(DataFile(**data["data_file"]), data["offsets"], data.get("committed_version"))


def coverages(pb: table_pb2.DataOverlayFile) -> list[np.ndarray]:
    """The covered physical offsets of each field of the overlay's file (ascending); a sparse
    overlay may list fewer sets than fields (pylance commits that and refuses to read those
    fields) or more (the extra ones are unused)."""
    if pb.WhichOneof("coverage") == "sparse_offsets":
        sets = [BitMap.deserialize(b) for b in pb.sparse_offsets.field_offsets]
    else:
        dense = BitMap.deserialize(pb.dense_offsets) if pb.dense_offsets else BitMap()
        sets = [dense] * len(pb.data_file.fields)
    return [np.asarray(s.to_array(), dtype=np.int64) for s in sets]


def layered(base: pa.Array, rows: np.ndarray, covered: np.ndarray,
            values_at: Callable[[np.ndarray], pa.Array]) -> pa.Array:
    """``base`` (the values of physical ``rows``) with the covered rows' values replaced by
    ``values_at(ranks)`` (the overlay file's rows at those ranks)."""
    hit = np.isin(rows, covered)
    if not hit.any():
        return base
    ranks = np.searchsorted(covered, rows[hit])
    values = values_at(ranks)
    if not values.type.equals(base.type):
        values = values.cast(base.type)
    index = np.arange(len(rows), dtype=np.int64)
    index[hit] = len(rows) + np.arange(int(hit.sum()), dtype=np.int64)
    return pa.concat_arrays([base, values]).take(pa.array(index))


def check_overlay_fields(pb: table_pb2.DataOverlayFile, nested_ids: set[int], *, path: str) -> None:
    """Refuse overlays of nested fields (this engine layers whole top-level columns only)."""
    nested = [i for i in pb.data_file.fields if i in nested_ids]
    if nested:
        raise UnsupportedFeatureError(f"data overlays of nested fields (ids {nested}) are not supported by this "
                                      "engine", path=path)


# -- reading ---------------------------------------------------------------------------------------
Layers = dict[str, list[tuple[np.ndarray, Callable[[np.ndarray], pa.Array]]]]


def overlay_layers(fragment: FragmentReading, schema: LanceSchema) -> Layers:
    """For each column of ``schema`` that the fragment's overlays cover: (covered offsets, values
    at ranks) per overlay, oldest first."""
    overlays = fragment.proto.overlays
    if not overlays:
        return {}
    top = {f.id: f for f in schema.fields}
    nested = {c.id for f in schema.fields for c in f.walk() if c.id != f.id}
    layers: Layers = {}
    for overlay in overlays:
        data_file = overlay.data_file
        check_overlay_fields(overlay, nested, path=data_file.path)
        version = (data_file.file_major_version, data_file.file_minor_version)
        if is_legacy_version(*version):
            raise UnsupportedFeatureError("a data overlay in a legacy (0.1) file is not supported",
                                          path=data_file.path, **fragment.error_context())
        positions = dict(zip(data_file.fields, data_file.column_indices))
        covered = coverages(overlay)
        for index, field_id in enumerate(data_file.fields):
            field = top.get(field_id)
            if field is None:
                continue  # not read, or no longer in the schema
            if index >= len(covered):
                raise InvalidInputError(f"overlay per-field coverage has {len(covered)} bitmaps but field "
                                        f"position {index} was requested", path=data_file.path,
                                        **fragment.error_context())
            plan = fragment._column_plan(field, positions, data_file.path, version >= (2, 1))
            layers.setdefault(field.name, []).append(
                (covered[index], functools.partial(_overlay_values, fragment, data_file, plan)))
    return layers


def _overlay_values(fragment: FragmentReading, data_file: table_pb2.DataFile, plan: ColumnPlan,
                    ranks: np.ndarray) -> pa.Array:
    readers: dict[str, DataFileReader] = fragment.__dict__.setdefault("_overlay_readers", {})
    store, path = fragment._dataset.base_stores.data_file(data_file)
    reader = readers.get(path)
    if reader is None:
        reader = readers[path] = DataFileReader(store, path, size=data_file.file_size_bytes or None)
    try:
        return reader.take([plan], ranks)[0]
    except LanceError as exc:
        raise exc.with_context(**fragment.error_context())


def overlaid(array: pa.Array, rows: np.ndarray, layers: list[tuple[np.ndarray, Callable[[np.ndarray], pa.Array]]]
             ) -> pa.Array:
    """``array`` (the values of physical ``rows``) with each overlay layered on, oldest first."""
    for covered, values_at in layers:
        array = layered(array, rows, covered, values_at)
    return array


__all__ = ["DataOverlayFile", "DataOverlayGroup", "overlay_to_proto", "overlay_from_proto", "overlay_to_json",
           "overlay_from_json", "coverages", "layered", "check_overlay_fields", "overlay_layers", "overlaid"]
