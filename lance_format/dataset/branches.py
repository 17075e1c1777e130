"""Branches of a table: create, list, delete, tags that name branch versions, and what cleanup keeps.

A branch is a table of its own under ``<root>/tree/<name>/`` (see :mod:`lance_format.table.refs`);
opening, writing and mutating it is opening, writing and mutating that table. Its first version
is a shallow copy of the version it was created from (:mod:`lance_format.dataset.clones`).
"""

from __future__ import annotations

import builtins
import json
import shutil
import time
import uuid
from typing import TYPE_CHECKING, Any

from lance_format.dataset.clones import source_version, write_shallow_copy
from lance_format.errors import BranchError, InvalidInputError, TagError, VersionNotFoundError
from lance_format.io import ObjectStore
from lance_format.io.manifest_store import split_uri_query
from lance_format.table.refs import (
    TREE_DIR,
    Reference,
    branch_identifier,
    branch_names,
    branch_ref_path,
    branch_store,
    check_branch_name,
    manifest_branch,
    read_branch,
    resolve_reference,
    root_of,
    version_path,
    write_branch,
)
from lance_format.table.tags import TableTags
from lance_format.table.tags import _now as tag_timestamp

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


def table_root(ds: LanceDataset) -> ObjectStore:
    return root_of(ds.object_store, ds.manifest)


def create_branch(ds: LanceDataset, branch: str, reference: Reference = None,
                  storage_options: dict[str, str] | None = None) -> LanceDataset:
    """Create ``branch`` from ``reference`` (None: the version ``ds`` is at); the branch's dataset."""

    check_branch_name(branch)
    root = table_root(ds)
    if root.exists(branch_ref_path(branch)):
        raise BranchError(f"branch {branch!r} already exists", table=root.uri)
    _remove_orphan_tree(root, branch)
    source = source_version(ds, reference)
    parent = manifest_branch(source.manifest)
    target = branch_store(root, branch)
    size = write_shallow_copy(source, target, branch=branch)
    ref = {
        "parentBranch": parent,
        "identifier": {"version_mapping": branch_identifier(root, parent) + [[source.version, uuid.uuid4().hex]]},
        "parentVersion": source.version,
        "createAt": int(time.time()),
        "manifestSize": size,
        "metadata": {},
    }
    if not write_branch(root, branch, ref):
        raise BranchError(f"branch {branch!r} already exists", table=root.uri)
    return type(ds)(target)


# A tree without a ref younger than this may be a create in flight (its ref is the next write).
ORPHAN_TREE_AGE_SECONDS = 60.0


def _own_tree_files(root: ObjectStore, branch: str) -> builtins.list[Any]:
    """The files of ``tree/<branch>/``, without the trees of branches named ``<branch>/...``."""
    prefix = f"{TREE_DIR}/{branch}/"
    nested = tuple(f"{TREE_DIR}/{name}/" for name in branch_names(root) if name.startswith(branch + "/"))
    return [info for info in root.list_files(f"{TREE_DIR}/{branch}")
            if root.relative_path(info).startswith(prefix) and not root.relative_path(info).startswith(nested)]


def _remove_orphan_tree(root: ObjectStore, branch: str) -> None:
    """Remove what a failed create of ``branch`` left: its tree without a ref.

    The ref is written last, so a tree without one is an interrupted create, or one still in
    flight: only a tree whose newest file is older than ``ORPHAN_TREE_AGE_SECONDS`` is removed.
    """
    files = _own_tree_files(root, branch)
    if not files:
        return
    now = time.time()
    newest = max(now if info.mtime is None else info.mtime.timestamp() for info in files)
    if now - newest < ORPHAN_TREE_AGE_SECONDS:
        raise BranchError(
            f"tree/{branch}/ exists without a ref: another writer is creating branch {branch!r}, or a create "
            f"failed less than {ORPHAN_TREE_AGE_SECONDS:.0f} s ago (its leftovers are removed after that)",
            table=root.uri)
    if root.exists(branch_ref_path(branch)):  # created meanwhile: the tree is not an orphan
        raise BranchError(f"branch {branch!r} already exists", table=root.uri)
    for info in files:
        root.delete(root.relative_path(info))


def _branch_info(content: dict[str, Any]) -> dict[str, Any]:
    mapping = content.get("identifier", {}).get("version_mapping", [])
    return {
        "parent_branch": content.get("parentBranch"),
        "branch_identifier": [(int(v), str(u)) for v, u in mapping],
        "parent_version": int(content["parentVersion"]),
        "create_at": content.get("createAt"),
        "manifest_size": content.get("manifestSize"),
        "metadata": dict(content.get("metadata") or {}),
    }


class Branches:
    """The branches of the table ``dataset`` belongs to (pylance's ``LanceDataset.branches``;
    ``Branch`` dicts as values)."""

    def __init__(self, dataset: LanceDataset) -> None:
        self._root = table_root(dataset)

    def list(self) -> dict[str, dict[str, Any]]:
        return {name: _branch_info(read_branch(self._root, name)) for name in branch_names(self._root)}

    def list_ordered(self, order: str | None = None) -> builtins.list[tuple[str, dict[str, Any]]]:
        if order not in (None, "asc", "desc"):
            raise InvalidInputError(f"order must be 'asc' or 'desc', got {order!r}", table=self._root.uri)
        sign = 1 if order == "asc" else -1  # like pylance: newest parent first, ties by name
        return sorted(self.list().items(), key=lambda item: (sign * item[1]["parent_version"], item[0]))

    def delete(self, branch: str) -> None:
        """Delete a branch that no other branch was created from: its ref, then its tree."""
        content = read_branch(self._root, branch)  # raises when missing
        children = [(name, info["parent_version"]) for name, info in self.list().items()
                    if info["parent_branch"] == branch]
        if children:
            raise BranchError(f"branch {branch!r} is referenced by branches {children}; delete them first",
                              table=self._root.uri)
        tags = [(name, t["version"]) for name, t in TableTags(self._root).list().items() if t.get("branch") == branch]
        if tags:
            raise BranchError(f"branch {branch!r} is referenced by tags {tags}; delete them first",
                              table=self._root.uri)
        del content
        self._root.delete(branch_ref_path(branch))
        # a branch named "<branch>/..." (made from another parent) has its tree inside this one
        for info in _own_tree_files(self._root, branch):
            self._root.delete(self._root.relative_path(info))
        nested = any(name.startswith(branch + "/") for name in branch_names(self._root))
        folder = self._root.local_path(f"{TREE_DIR}/{branch}")
        if folder is not None and not nested:  # like pylance, leave no empty folders behind
            shutil.rmtree(folder, ignore_errors=True)

    def replace_metadata(self, branch: str, metadata: dict[str, str]) -> None:
        content = read_branch(self._root, branch)
        content["metadata"] = {str(k): str(v) for k, v in metadata.items()}
        self._root.replace_bytes(branch_ref_path(branch), json.dumps(content, indent=2).encode())


def _branch_of_store(root: ObjectStore, store: ObjectStore) -> str | None:
    store_uri, root_uri = split_uri_query(store.uri)[0].rstrip("/"), split_uri_query(root.uri)[0].rstrip("/")
    if store_uri == root_uri:
        return None
    return store_uri[len(root_uri) + len(TREE_DIR) + 2:]


class Tags(TableTags):
    """The tags of the table ``dataset`` belongs to (pylance's ``LanceDataset.tags``; ``Tag``
    dicts as values); a version number given as a reference is one of ``dataset``'s branch."""

    def __init__(self, dataset: LanceDataset) -> None:
        super().__init__(table_root(dataset))
        self._current = dataset.object_store

    def _target(self, reference: Reference) -> tuple[str | None, int, int]:
        if reference is None:
            store, version = self._current, None
        else:
            store, version = resolve_reference(self._current, reference)
        branch = _branch_of_store(self._store, store)
        try:
            version, path = version_path(store, version)
        except VersionNotFoundError:  # pylance's wording, which names the branch
            raise VersionNotFoundError(f"Version not found error: version {branch or 'main'}:{version} does not "
                                       "exist", table=self._store.uri) from None
        return branch, version, store.size(path)

    # pylance's signature: a reference (version, tag or (branch, version); None: the current
    # version) where the table's TableTags take a version number
    def create(self, tag: str, reference: Reference = None, *,  # type: ignore[override]
               version: int | None = None) -> None:
        path = self._path(tag)
        branch, number, size = self._target(version if version is not None else reference)
        now = tag_timestamp()
        body: dict[str, Any] = {"branch": branch, "version": number, "createdAt": now, "updatedAt": now, "manifestSize": size,
                "metadata": {}}
        if not self._store.put_if_not_exists(path, json.dumps(body, indent=2).encode()):
            raise TagError(f"tag {tag!r} already exists", table=self._store.uri)

    def update(self, tag: str, reference: Reference = None, *,  # type: ignore[override]
               version: int | None = None) -> None:
        content = self._read(tag)
        branch, number, size = self._target(version if version is not None else reference)
        content.update({"branch": branch, "version": number, "manifestSize": size, "updatedAt": tag_timestamp()})
        self._store.replace_bytes(self._path(tag), json.dumps(content, indent=2).encode())


def dataset_tags(ds: LanceDataset) -> Tags:
    return Tags(ds)


__all__ = ["create_branch", "Branches", "Tags", "dataset_tags"]
