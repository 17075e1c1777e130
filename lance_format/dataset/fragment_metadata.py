"""pylance's fragment description classes: ``FragmentMetadata``, ``DataFile``, ``DeletionFile``,
``RowIdMeta``, ``RowDatasetVersionMeta`` and ``RowIdSequence``.

They are what a distributed write passes around (workers describe the files they wrote, the
driver commits them): plain values with pylance's fields, ``to_json``/``from_json`` in
pylance's JSON shape (so descriptions cross between pylance and this engine both ways),
pickling and equality. :func:`fragment_to_proto` and :func:`fragment_from_proto` convert to and
from the manifest's ``DataFragment`` message, which is what the engine works with.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.overlays import overlay_from_json, overlay_from_proto, overlay_to_json, overlay_to_proto
from lance_format.errors import ArgumentTypeError, InvalidInputError, UnsupportedFeatureError
from lance_format.proto import table_pb2
from lance_format.table.deletion import deletion_file_path
from lance_format.table.rowids import decode_row_ids, encode_row_ids

_FILE_TYPES = {"array": table_pb2.DeletionFile.ARROW_ARRAY, "bitmap": table_pb2.DeletionFile.BITMAP}


class _CallableStr(str):
    """A str that can also be called: ``DataFile.path`` used to be a method in pylance."""

    def __call__(self) -> str:
        warnings.warn("DataFile.path() is deprecated, use DataFile.path instead", DeprecationWarning, stacklevel=2)
        return str(self)

    def __reduce__(self) -> Any:
        return (str, (str(self),))


@dataclass
class DataFile:
    """A data file of a fragment: its path under ``data/``, the field ids it holds and where."""

    _path: str
    fields: list[int]
    column_indices: list[int] = field(default_factory=list)
    file_major_version: int = 0
    file_minor_version: int = 0
    file_size_bytes: int | None = None
    base_id: int | None = None

    def __init__(self, path: str, fields: list[int], column_indices: list[int] | None = None,
                 file_major_version: int = 0, file_minor_version: int = 0, file_size_bytes: int | None = None,
                 base_id: int | None = None) -> None:
        self._path = path
        self.fields = fields
        self.column_indices = column_indices or []
        self.file_major_version = file_major_version
        self.file_minor_version = file_minor_version
        self.file_size_bytes = file_size_bytes
        self.base_id = base_id

    def __repr__(self) -> str:
        return (f"DataFile(path='{self._path}', fields={self.fields}, column_indices={self.column_indices}, "
                f"file_major_version={self.file_major_version}, file_minor_version={self.file_minor_version}, "
                f"file_size_bytes={self.file_size_bytes})")

    @property
    def path(self) -> str:
        return _CallableStr(self._path)

    @classmethod
    def create(cls, dataset: Any, path: str, *, base_id: int | None = None) -> DataFile:
        """The DataFile of a Lance file already under ``dataset``'s ``data/``, its columns matched
        to the table's fields by name (e.g. for ``LanceOperation.DataReplacement``)."""
        from lance_format.dataset.fragment_writes import describe_data_file

        return describe_data_file(dataset, path, base_id=base_id)[0]

    def field_ids(self) -> list[int]:
        warnings.warn("DataFile.field_ids is deprecated, use DataFile.fields instead", DeprecationWarning,
                      stacklevel=2)
        return self.fields


class DeletionFile:
    """The deletion file of a fragment (pylance's ``DeletionFile``)."""

    def __init__(self, read_version: int, id: int, file_type: str, num_deleted_rows: int,
                 base_id: int | None = None) -> None:
        if file_type not in _FILE_TYPES:
            raise InvalidInputError(f"file_type must be either 'array' or 'bitmap', got '{file_type}'")
        self.read_version = int(read_version)
        self.id = int(id)
        self.file_type = file_type
        self.num_deleted_rows = int(num_deleted_rows)
        self.base_id = base_id

    def asdict(self) -> dict[str, Any]:
        return {"read_version": self.read_version, "id": self.id, "file_type": self.file_type,
                "num_deleted_rows": self.num_deleted_rows, "base_id": self.base_id}

    def json(self) -> str:
        return json.dumps(self.asdict(), separators=(",", ":"))

    @staticmethod
    def from_json(json_str: str) -> DeletionFile:
        return DeletionFile(**_loads(json_str, "DeletionFile"))

    def path(self, fragment_id: int, base_uri: str | None = None) -> str:
        """The file's path relative to the table root (or under ``base_uri``)."""
        relative = deletion_file_path(fragment_id, self.to_proto())
        return f"{base_uri.rstrip('/')}/{relative}".lstrip("/") if base_uri else relative

    def to_proto(self) -> table_pb2.DeletionFile:
        pb = table_pb2.DeletionFile(file_type=_FILE_TYPES[self.file_type], read_version=self.read_version,
                                    id=self.id, num_deleted_rows=self.num_deleted_rows)
        if self.base_id is not None:
            pb.base_id = self.base_id
        return pb

    @staticmethod
    def from_proto(pb: table_pb2.DeletionFile) -> DeletionFile:
        kind = "bitmap" if pb.file_type == table_pb2.DeletionFile.BITMAP else "array"
        return DeletionFile(pb.read_version, pb.id, kind, pb.num_deleted_rows,
                            pb.base_id if pb.HasField("base_id") else None)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeletionFile) and self.asdict() == other.asdict()

    __hash__ = None  # type: ignore[assignment]  # mutable value, like pylance's

    def __repr__(self) -> str:
        return f"DeletionFile(type='{self.file_type}', num_deleted_rows={self.num_deleted_rows})"


@dataclass(frozen=True)
class _ExternalSequence:
    path: str
    offset: int
    size: int


class _SequenceMeta:
    """A per-row sequence stored inline (bytes) or in an external file."""

    _inline_key = "inline"
    _external_key = "external"

    def __init__(self, inline: bytes | None = None, external: _ExternalSequence | None = None) -> None:
        self.inline = inline
        self.external = external

    def asdict(self) -> dict[str, Any]:
        if self.inline is not None:
            return {self._inline_key: list(self.inline)}
        assert self.external is not None
        return {self._external_key: {"path": self.external.path, "offset": self.external.offset,
                                     "size": self.external.size}}

    def json(self) -> str:
        return json.dumps(self.asdict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Any) -> Any:
        if not isinstance(data, dict) or len(data) != 1:
            raise InvalidInputError(f"Could not load {cls.__name__}: expected one of "
                                    f"{cls._inline_key!r} or {cls._external_key!r}, got {data!r}")
        ((key, value),) = data.items()
        try:
            if key == cls._inline_key:
                return cls(inline=bytes(value))
            if key == cls._external_key:
                return cls(external=_ExternalSequence(str(value["path"]), int(value["offset"]), int(value["size"])))
        except (TypeError, ValueError, KeyError) as exc:
            raise InvalidInputError(f"Could not load {cls.__name__}: {exc}") from exc
        raise InvalidInputError(f"Could not load {cls.__name__}: unknown variant {key!r}")

    @classmethod
    def from_json(cls, json_str: str) -> Any:
        return cls.from_dict(_loads(json_str, cls.__name__))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.asdict() == other.asdict()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.{type(self).__name__} object>"

    def _set_on(self, pb: table_pb2.DataFragment, inline_field: str, external_field: str) -> None:
        if self.inline is not None:
            setattr(pb, inline_field, self.inline)
        elif self.external is not None:
            ext = getattr(pb, external_field)
            ext.path, ext.offset, ext.size = self.external.path, self.external.offset, self.external.size

    @classmethod
    def _from(cls, pb: table_pb2.DataFragment, oneof: str, inline_field: str) -> Any:
        which = pb.WhichOneof(oneof)
        if which is None:
            return None
        if which == inline_field:
            return cls(inline=bytes(getattr(pb, which)))
        ext = getattr(pb, which)
        return cls(external=_ExternalSequence(ext.path, ext.offset, ext.size))


class RowIdMeta(_SequenceMeta):
    """A fragment's stable row ids (pylance's ``RowIdMeta``; JSON ``{"Inline": [bytes...]}``)."""

    _inline_key = "Inline"
    _external_key = "External"


class RowDatasetVersionMeta(_SequenceMeta):
    """The version each row was created in or last updated in (JSON ``{"inline": [bytes...]}``)."""

    def asdict(self) -> dict[str, Any]:
        raise UnsupportedFeatureError("RowDatasetVersionMeta.asdict is not supported (as in pylance); use json()")

    def json(self) -> str:
        return json.dumps(super().asdict(), separators=(",", ":"))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.json() == other.json()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]


def _row_id_array(row_ids: Any) -> np.ndarray:
    """``row_ids`` as uint64 values, refusing nulls, non-integers and negatives with pylance's wording."""
    if isinstance(row_ids, np.ndarray) and row_ids.dtype == np.uint64:
        return row_ids
    if isinstance(row_ids, range):
        if len(row_ids) and min(row_ids[0], row_ids[-1]) < 0:
            raise InvalidInputError(f"Row ids must be non-negative, but the range starts at {row_ids.start}")
        if len(row_ids) and max(row_ids[0], row_ids[-1]) >= 2**64:
            raise InvalidInputError("Row ids must fit in a uint64")
        if row_ids.step == 1:  # no per-id Python work for the common case
            return np.arange(len(row_ids), dtype=np.uint64) + np.uint64(row_ids.start)
        return np.fromiter(row_ids, dtype=np.uint64, count=len(row_ids))
    if isinstance(row_ids, (pa.Array, pa.ChunkedArray)):
        if not pa.types.is_integer(row_ids.type):
            raise ArgumentTypeError(f"Row ids must be an array of integers, but got an array of type {row_ids.type}")
        if row_ids.null_count:
            raise InvalidInputError(f"Row ids must not be null, but the array has {row_ids.null_count} null values")
        if pa.types.is_signed_integer(row_ids.type) and len(row_ids) and pc.min(row_ids).as_py() < 0:
            raise InvalidInputError(
                f"Row ids must fit in a uint64, but the array holds the negative value {pc.min(row_ids)}")
        return np.asarray(row_ids.to_numpy(), dtype=np.uint64) if len(row_ids) else np.empty(0, np.uint64)
    if isinstance(row_ids, (str, bytes)) or not isinstance(row_ids, Iterable):
        raise ArgumentTypeError("Row ids must be an iterable of integers or an Arrow array, "
                                f"but got {type(row_ids).__name__}")
    values = list(row_ids)
    if not values:
        return np.empty(0, np.uint64)
    try:
        found = np.array(values)
        if found.dtype.kind in "iu":
            if found.dtype.kind == "i" and found.min() < 0:
                raise OverflowError(f"the negative value {found.min()}")
            return found.astype(np.uint64)
        # ints beyond int64 come back as objects or floats: numpy checks each against uint64's range
        if found.dtype.kind in "fO" and all(isinstance(v, (int, np.integer)) for v in values):
            return np.array(values, dtype=np.uint64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ArgumentTypeError(f"Row ids must be non-negative integers that fit in a uint64: {exc}") from None
    raise ArgumentTypeError(f"Row ids must be an iterable of integers, but got values of type {found.dtype}")


class RowIdSequence:
    """The stable row ids of one fragment's rows, in physical order (pylance's ``RowIdSequence``).

    Takes any iterable of non-negative integers, a ``range`` or an Arrow integer array (chunked or
    sliced); ids must be unique, as the table's row id index assumes.
    """

    def __init__(self, row_ids: Iterable[int]) -> None:
        self._ids = _row_id_array(row_ids)
        if len(self._ids) > 1 and not isinstance(row_ids, range):  # a range never repeats itself
            ordered = np.sort(self._ids, kind="stable")
            repeats = np.flatnonzero(ordered[1:] == ordered[:-1])
            if len(repeats):
                raise InvalidInputError(
                    f"Row ids must be unique, but row id {int(ordered[repeats[0]])} appears more than once in the "
                    f"sequence of {len(self._ids)} row ids")

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids.tolist())

    def __reduce__(self) -> Any:
        return (RowIdSequence, (self._ids,))

    def to_pyarrow(self) -> pa.Array:
        return pa.array(self._ids, pa.uint64())

    def to_inline_metadata(self) -> RowIdMeta:
        return RowIdMeta(inline=encode_row_ids(self._ids))

    @staticmethod
    def from_inline_metadata(metadata: RowIdMeta) -> RowIdSequence:
        if metadata.inline is None:
            raise InvalidInputError("the row id metadata is not inline")
        return RowIdSequence(decode_row_ids(metadata.inline))

    def __len__(self) -> int:
        return len(self._ids)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RowIdSequence) and np.array_equal(self._ids, other._ids)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if len(self._ids) <= 10:
            return f"RowIdSequence({self._ids.tolist()})"
        head = ", ".join(str(i) for i in self._ids[:10].tolist())
        return f"RowIdSequence([{head}, ...], len={len(self._ids)})"


@dataclass
class FragmentMetadata:
    """A fragment's description: its data files, row count, deletions and row lineage."""

    id: int
    files: list[DataFile]
    physical_rows: int
    deletion_file: DeletionFile | None = None
    row_id_meta: RowIdMeta | None = None
    created_at_version_meta: RowDatasetVersionMeta | None = None
    last_updated_at_version_meta: RowDatasetVersionMeta | None = None
    overlays: list[Any] = field(default_factory=list)  # LanceOperation.DataOverlayFile, oldest first

    @property
    def num_deletions(self) -> int:
        """How many of the fragment's rows its deletion file marks deleted (0 without one)."""
        return 0 if self.deletion_file is None else self.deletion_file.num_deleted_rows

    @property
    def num_rows(self) -> int:
        """The fragment's live rows: its physical rows less its deletions."""
        return self.physical_rows - self.num_deletions

    def data_files(self) -> list[DataFile]:
        """The fragment's data files (deprecated: use :attr:`files`).

        Returns
        -------
        list of DataFile
            The same list as :attr:`files`; a ``DeprecationWarning`` is emitted, as pylance does.
        """
        warnings.warn("FragmentMetadata.data_files is deprecated. Use .files instead.", DeprecationWarning,
                      stacklevel=2)
        return self.files

    def to_json(self) -> dict:
        """This description as a JSON-serializable dict (pylance's shape)."""
        return {
            "id": self.id,
            "files": [data_file_json(f) for f in self.files],
            "overlays": [overlay_to_json(o) for o in self.overlays],
            "physical_rows": self.physical_rows,
            "deletion_file": self.deletion_file.asdict() if self.deletion_file is not None else None,
            "row_id_meta": self.row_id_meta.asdict() if self.row_id_meta is not None else None,
            "created_at_version_meta": (json.loads(self.created_at_version_meta.json())
                                        if self.created_at_version_meta is not None else None),
            "last_updated_at_version_meta": (json.loads(self.last_updated_at_version_meta.json())
                                             if self.last_updated_at_version_meta is not None else None),
        }

    @staticmethod
    def from_json(json_data: str) -> FragmentMetadata:
        """Parse :meth:`to_json`'s output (as a JSON string), pylance's or ours.

        Raises :class:`InvalidInputError` for malformed JSON or a description missing a field.
        """
        data = _loads(json_data, "FragmentMetadata")
        try:
            deletion = data.get("deletion_file")
            row_ids = data.get("row_id_meta")
            created = data.get("created_at_version_meta")
            updated = data.get("last_updated_at_version_meta")
            return FragmentMetadata(
                id=int(data["id"]),
                files=[DataFile(**f) for f in data["files"]],
                physical_rows=int(data["physical_rows"]),
                deletion_file=DeletionFile(**deletion) if deletion is not None else None,
                row_id_meta=RowIdMeta.from_dict(row_ids) if row_ids is not None else None,
                created_at_version_meta=RowDatasetVersionMeta.from_dict(created) if created is not None else None,
                last_updated_at_version_meta=(RowDatasetVersionMeta.from_dict(updated)
                                              if updated is not None else None),
                overlays=[overlay_from_json(o) for o in data.get("overlays") or []],
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise InvalidInputError(f"invalid fragment metadata JSON: {exc!r}") from exc


def _loads(json_str: str, what: str) -> Any:
    try:
        return json.loads(json_str)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"Could not load {what}: {exc}") from exc


# -- conversion to and from the manifest's messages -------------------------------------------------
def data_file_json(data_file: DataFile) -> dict:
    """A data file as pylance's ``FragmentMetadata.to_json`` writes it."""
    d = asdict(data_file)
    d["path"] = d.pop("_path")
    return d


def data_file_to_proto(data_file: DataFile) -> table_pb2.DataFile:
    pb = table_pb2.DataFile(path=data_file._path, fields=list(data_file.fields),
                            column_indices=list(data_file.column_indices),
                            file_major_version=data_file.file_major_version,
                            file_minor_version=data_file.file_minor_version,
                            file_size_bytes=data_file.file_size_bytes or 0)
    if data_file.base_id is not None:
        pb.base_id = data_file.base_id
    return pb


def data_file_from_proto(pb: table_pb2.DataFile) -> DataFile:
    return DataFile(pb.path, list(pb.fields), list(pb.column_indices), pb.file_major_version, pb.file_minor_version,
                    pb.file_size_bytes or None, pb.base_id if pb.HasField("base_id") else None)


def fragment_to_proto(fragment: FragmentMetadata) -> table_pb2.DataFragment:
    """The manifest message for a fragment description (raises for what the engine cannot store)."""
    if not isinstance(fragment, FragmentMetadata):
        raise ArgumentTypeError(f"expected FragmentMetadata, got {type(fragment).__name__}")
    pb = table_pb2.DataFragment(id=fragment.id, physical_rows=fragment.physical_rows)
    pb.overlays.extend(overlay_to_proto(o) for o in fragment.overlays)
    pb.files.extend(data_file_to_proto(f) for f in fragment.files)
    if fragment.deletion_file is not None:
        pb.deletion_file.CopyFrom(fragment.deletion_file.to_proto())
    if fragment.row_id_meta is not None:
        fragment.row_id_meta._set_on(pb, "inline_row_ids", "external_row_ids")
    if fragment.created_at_version_meta is not None:
        fragment.created_at_version_meta._set_on(pb, "inline_created_at_versions", "external_created_at_versions")
    if fragment.last_updated_at_version_meta is not None:
        fragment.last_updated_at_version_meta._set_on(pb, "inline_last_updated_at_versions",
                                                      "external_last_updated_at_versions")
    return pb


def fragment_from_proto(pb: table_pb2.DataFragment) -> FragmentMetadata:
    """The description of a manifest's fragment."""
    return FragmentMetadata(
        id=pb.id,
        files=[data_file_from_proto(f) for f in pb.files],
        physical_rows=pb.physical_rows,
        deletion_file=DeletionFile.from_proto(pb.deletion_file) if pb.HasField("deletion_file") else None,
        row_id_meta=RowIdMeta._from(pb, "row_id_sequence", "inline_row_ids"),
        created_at_version_meta=RowDatasetVersionMeta._from(pb, "created_at_version_sequence",
                                                            "inline_created_at_versions"),
        last_updated_at_version_meta=RowDatasetVersionMeta._from(pb, "last_updated_at_version_sequence",
                                                                 "inline_last_updated_at_versions"),
        overlays=[overlay_from_proto(o) for o in pb.overlays],
    )


__all__ = [
    "DataFile", "DeletionFile", "RowIdMeta", "RowDatasetVersionMeta", "RowIdSequence", "FragmentMetadata",
    "data_file_to_proto", "data_file_from_proto", "fragment_to_proto", "fragment_from_proto", "data_file_json",
]
