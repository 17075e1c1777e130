"""Base paths: data and deletion files that live in another table's directory.

A manifest may list ``base_paths`` (``BasePath{id, name, is_dataset_root, path}``); a
``DataFile``, ``DeletionFile`` or ``IndexMetadata`` whose ``base_id`` is set lives under that
base instead of the table's own root. Branches (``tree/<name>/``) and shallow clones use this to
share the files of the version they started from. A dataset-root base keeps its files in the
usual ``data/``, ``_deletions/`` and ``_indices/`` folders; any other base holds them directly.

Paths inside a base are checked exactly like the table's own: they may not leave the base.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from lance_format.errors import CorruptFileError, InvalidInputError, PathEscapeError, UnsupportedFeatureError
from lance_format.io import ObjectStore, check_relative_path
from lance_format.proto import table_pb2

DATA_DIR = "data"
DELETIONS_DIR = "_deletions"
INDICES_DIR = "_indices"


def base_uri(store: ObjectStore) -> str:
    """The text a manifest records as the path of a base that is ``store``'s table root."""
    return store.uri


class BaseStores:
    """Where the files of one manifest live: its table's own store or one of its base paths."""

    def __init__(self, store: ObjectStore, manifest: table_pb2.Manifest) -> None:
        self._store = store
        self._bases = {b.id: b for b in manifest.base_paths}
        self._version = manifest.version
        self._opened: dict[int, ObjectStore] = {}

    def _base(self, base_id: int) -> table_pb2.BasePath:
        base = self._bases.get(base_id)
        if base is None:
            raise CorruptFileError(f"a file names base path id {base_id}, which the manifest does not list",
                                   table=self._store.uri, version=self._version)
        return base

    def store(self, base_id: int | None) -> ObjectStore:
        """The store of a base (``None``: the table's own root)."""
        if base_id is None:
            return self._store
        store = self._opened.get(base_id)
        if store is None:
            path = self._base(base_id).path
            if not (posixpath.isabs(path) or "://" in path):
                # a relative base would resolve against the reader's working directory
                raise PathEscapeError(f"base path id {base_id} is not an absolute path or URI",
                                      table=self._store.uri, version=self._version, path=path)
            store = self._store if path == self._store.uri else self._store.sibling(path)
            self._opened[base_id] = store
        return store

    def is_dataset_root(self, base_id: int | None) -> bool:
        return base_id is None or self._base(base_id).is_dataset_root

    def data_file(self, data_file: table_pb2.DataFile) -> tuple[ObjectStore, str]:
        """(store, store-relative path) of a data file, refusing paths that leave its folder."""
        base_id = data_file.base_id if data_file.HasField("base_id") else None
        store = self.store(base_id)
        folder = DATA_DIR if self.is_dataset_root(base_id) else ""
        return store, contained_path(folder, data_file.path, table=store.uri)

    def deletion_store(self, deletion_file: table_pb2.DeletionFile) -> ObjectStore:
        return self.store(deletion_file.base_id if deletion_file.HasField("base_id") else None)

    def index_store(self, index: table_pb2.IndexMetadata) -> ObjectStore:
        return self.store(index.base_id if index.HasField("base_id") else None)


def contained_path(folder: str, path: str, *, table: str) -> str:
    """``folder/path`` relative to a table root, refusing ``path`` when it leaves ``folder``."""
    check_relative_path(path, table=table)  # absolute paths and the like
    if not folder:
        return check_relative_path(path, table=table)
    relative = check_relative_path(f"{folder}/{path}", table=table)
    if not relative.startswith(f"{folder}/"):
        raise PathEscapeError(f"file path escapes the {folder} directory", table=table, path=path)
    return relative


def rebase_files(manifest: Any, base_id: int) -> None:
    """Point every file that lives at the manifest's own root at ``base_id`` instead (in place)."""
    for fragment in manifest.fragments:
        for data_file in fragment.files:
            if not data_file.HasField("base_id"):
                data_file.base_id = base_id
        if fragment.HasField("deletion_file") and not fragment.deletion_file.HasField("base_id"):
            fragment.deletion_file.base_id = base_id


def rebase_indices(index_section: table_pb2.IndexSection | None, base_id: int) -> None:
    if index_section is None:
        return
    for index in index_section.indices:
        if not index.HasField("base_id"):
            index.base_id = base_id


def add_base(manifest: table_pb2.Manifest, path: str, name: str | None) -> int:
    """The id of the dataset-root base at ``path``, registering it when the manifest lacks it."""
    for base in manifest.base_paths:
        if base.path == path and base.is_dataset_root:
            return base.id
    new_id = max((b.id for b in manifest.base_paths), default=-1) + 1
    base = table_pb2.BasePath(id=new_id, is_dataset_root=True, path=path)
    if name is not None:
        base.name = name
    # official Lance lists the newest base first
    bases = [base]
    for existing in manifest.base_paths:
        bases.append(table_pb2.BasePath())
        bases[-1].CopyFrom(existing)
    del manifest.base_paths[:]
    manifest.base_paths.extend(bases)
    return new_id


# -- registering bases and choosing where new files go (pylance's multi-base writes) -------------
class DatasetBasePath:
    """A base path as pylance's API takes and returns it: a location new data files may go to.

    ``is_dataset_root``: the location is laid out like a table root (files under ``data/``);
    otherwise files sit directly in it. ``id`` None: assigned when the base is registered.
    """

    __slots__ = ("_path", "_name", "_is_dataset_root", "_id")

    def __init__(self, path: str, name: str | None = None, is_dataset_root: bool = False,
                 id: int | None = None) -> None:  # noqa: A002 - pylance's argument name
        if not isinstance(path, str):
            raise InvalidInputError(f"a base path's path must be a str, got {type(path).__name__}")
        if name is not None and not isinstance(name, str):
            raise InvalidInputError(f"a base path's name must be a str or None, got {type(name).__name__}")
        if id is not None and (isinstance(id, bool) or not isinstance(id, int) or not 0 <= id < 2**32):
            raise InvalidInputError(f"a base path's id must be an int in [0, 2**32), got {id!r}")
        self._path = path
        self._name = name
        self._is_dataset_root = bool(is_dataset_root)
        self._id = id

    @property
    def path(self) -> str:
        """The base's location (a folder path or object-store URI)."""
        return self._path

    @property
    def name(self) -> str | None:
        """The base's optional name (``None`` if unnamed)."""
        return self._name

    @property
    def is_dataset_root(self) -> bool:
        """Whether the base is laid out like a table root (data files under ``data/``)."""
        return self._is_dataset_root

    @property
    def id(self) -> int:
        """The base's id (0 until registered, like pylance's)."""
        return self._id or 0

    @classmethod
    def from_proto(cls, base: table_pb2.BasePath) -> DatasetBasePath:
        """The base path a manifest's ``BasePath`` message describes."""
        return cls(base.path, base.name if base.HasField("name") else None, base.is_dataset_root, base.id)

    def to_proto(self) -> table_pb2.BasePath:
        """This base path as the manifest's ``BasePath`` message (id 0 if not registered yet)."""
        base = table_pb2.BasePath(id=self.id, is_dataset_root=self._is_dataset_root, path=self._path)
        if self._name is not None:
            base.name = self._name
        return base

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DatasetBasePath):
            return NotImplemented
        return (self.id, self._name, self._path, self._is_dataset_root) == (
            other.id, other._name, other._path, other._is_dataset_root)

    def __hash__(self) -> int:
        return hash((self.id, self._name, self._path, self._is_dataset_root))

    def __repr__(self) -> str:  # pylance's text
        name = "None" if self._name is None else f'Some("{self._name}")'
        return (f"DatasetBasePath(id={self.id}, name={name}, path={self._path}, "
                f"is_dataset_root={str(self._is_dataset_root).lower()})")


def check_base_store_params(params: Any, *, table: str) -> None:
    """pylance's ``base_store_params`` (storage options per base path): every base is opened with
    the table's own ``storage_options`` here, so only empty option sets are accepted."""
    if params is None:
        return
    if not isinstance(params, Mapping):
        raise InvalidInputError(f"base_store_params must be a dict of base path -> storage options, got "
                                f"{type(params).__name__}", table=table)
    for path, options in params.items():
        if options:
            raise UnsupportedFeatureError(
                f"base_store_params for {path!r}: storage options per base path are not supported by this engine "
                "(every base is opened with the table's storage_options)", table=table)


def new_base_protos(bases: Any, existing: list[table_pb2.BasePath], *, table: str) -> list[table_pb2.BasePath]:
    """``bases`` (DatasetBasePath objects) as protos to register next to ``existing``.

    Ids left unset (0) get the smallest ids not in use, from 1 (as pylance assigns them); a base
    must be an absolute path or a URI (a relative one would resolve against the reader's working
    directory, which this engine refuses to read).
    """
    if not isinstance(bases, (list, tuple)) or not all(isinstance(b, DatasetBasePath) for b in bases):
        raise InvalidInputError("bases must be a list of lance_format.DatasetBasePath", table=table)
    used = {b.id for b in existing} | {b.id for b in bases if b.id}
    out = []
    next_id = 1
    for base in bases:
        if not (posixpath.isabs(base.path) or "://" in base.path):
            raise InvalidInputError(f"base path {base.path!r} must be an absolute path or a URI", table=table)
        proto = base.to_proto()
        if not proto.id:
            while next_id in used:
                next_id += 1
            proto.id = next_id
            used.add(next_id)
        out.append(proto)
    return out


def _same_location(a: str, b: str) -> bool:
    def plain(uri: str) -> str:
        return uri[len("file://"):].rstrip("/") if uri.startswith("file://") else uri.rstrip("/")

    return plain(a) == plain(b)


def target_bases_of(bases: Any, target_bases: Any, target_all_bases: bool | None,
                    *, table: str) -> list[int | None]:
    """The base ids new data files rotate through, file by file (None: the table's own root).

    ``target_bases`` names bases by name first, then by path (the table's own URI ``table`` is its
    root); ``target_all_bases`` takes every
    registered base in id order, after the table's own root when True.
    """
    by_id = sorted(bases, key=lambda b: b.id)
    if target_bases is not None and target_all_bases is not None:
        raise InvalidInputError("target_all_bases cannot be combined with target_bases", table=table)
    if target_all_bases is not None:
        ids: list[int | None] = [b.id for b in by_id]
        if target_all_bases or not ids:
            ids.insert(0, None)
        return ids
    if target_bases is None:
        return [None]
    if isinstance(target_bases, str) or not isinstance(target_bases, (list, tuple)):
        raise InvalidInputError("target_bases must be a list of base names or paths", table=table)
    chosen: list[int | None] = []
    for reference in target_bases:
        if isinstance(reference, str) and _same_location(reference, table):
            chosen.append(None)  # the table's own URI: its primary storage
            continue
        found = next((b for b in by_id if b.HasField("name") and b.name == reference), None)
        found = found or next((b for b in by_id if b.path == reference), None)
        if found is None:
            raise InvalidInputError(f"Base reference {reference!r} not found in available bases (their names and paths)",
                                    table=table)
        chosen.append(found.id)
    return chosen or [None]
