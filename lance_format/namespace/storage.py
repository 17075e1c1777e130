"""Folders under a namespace root: listing, reserving and deleting them through the engine's stores."""

from __future__ import annotations

import os

import pyarrow.fs as pafs

from lance_format.io.object_store import ObjectStore

RESERVED_MARKER = ".lance-reserved"  # pylance 14 marks a declared table's folder with this empty file


def normalize_root(root: str) -> str:
    """A local root as an absolute path; an object-store URI as it is, without a trailing slash."""
    root = os.fspath(root)
    if "://" not in root:
        root = os.path.abspath(os.path.expanduser(root))
    return root.rstrip("/") if len(root) > 1 else root


def child_folders(root: str, storage_options: dict | None = None) -> list[str]:
    """Names of the folders directly under ``root`` (object stores: the first path components)."""
    store = ObjectStore(root, storage_options)
    backend = store.backend
    if backend.has_directories:
        selector = pafs.FileSelector(store.root, allow_not_found=True, recursive=False)
        infos = backend.filesystem.get_file_info(selector)
        return sorted(os.path.basename(i.path) for i in infos if i.type == pafs.FileType.Directory)
    names = {store.relative_path(i).split("/", 1)[0] for i in store.list_files("") if "/" in store.relative_path(i)}
    return sorted(names)


def folder_exists(location: str, storage_options: dict | None = None) -> bool:
    """Whether a table folder holds anything (versions, or the marker of a declared table)."""
    store = ObjectStore(location, storage_options)
    return store.exists(RESERVED_MARKER) or bool(store.list_dir("_versions"))


def reserve(location: str, storage_options: dict | None = None) -> bool:
    """Write the declared-table marker; False when it already exists."""
    return ObjectStore(location, storage_options).put_if_not_exists(RESERVED_MARKER, b"")


def is_only_declared(location: str, storage_options: dict | None = None) -> bool:
    return not ObjectStore(location, storage_options).list_dir("_versions")


def delete_folder(location: str, storage_options: dict | None = None) -> None:
    """Delete a table folder and everything in it."""
    store = ObjectStore(location, storage_options)
    store.delete_dir_contents()
    if store.backend.has_directories:
        try:
            store.backend.filesystem.delete_dir(store.root)
        except (FileNotFoundError, OSError):
            pass  # already gone
