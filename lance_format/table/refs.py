"""Branch references and version references, in official Lance's on-disk layout.

A branch ``<name>`` of the table at ``<root>`` is a table of its own at ``<root>/tree/<name>/``
whose manifests carry ``branch = "<name>"`` and reach the files they share with their parent
through base paths. Its ref is ``<root>/_refs/branches/<url-quoted name>.json``::

    {"parentBranch": null, "identifier": {"version_mapping": [[1, "<32 hex>"]]},
     "parentVersion": 1, "createAt": <unix seconds>, "manifestSize": 472, "metadata": {}}

A *reference* names one version the way pylance's API does: an ``int`` (a version of the
current branch), a ``str`` (a tag), or a ``(branch, version)`` tuple, where branch ``None`` or
``"main"`` is the main branch and version ``None`` its latest version.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, unquote

from lance_format.errors import BranchError, CorruptFileError, InvalidInputError, VersionNotFoundError
from lance_format.io import ObjectStore
from lance_format.io.manifest_store import split_uri_query
from lance_format.proto import table_pb2
from lance_format.table.manifest import read_manifest
from lance_format.table.naming import LATEST_ONLY, list_versions

BRANCHES_DIR = "_refs/branches"
TREE_DIR = "tree"
MAIN = "main"

Reference = int | str | tuple[str | None, int | None] | None


def check_branch_name(name: Any) -> str:
    """A valid new branch name: ``/``-separated segments of letters, digits, ``_``, ``-``, ``.``."""
    if not isinstance(name, str) or not name:
        raise BranchError(f"invalid branch name {name!r}")
    if name == MAIN:
        raise BranchError("'main' is the default branch; a new branch cannot be called 'main'")
    if ".." in name or "\\" in name or name.endswith(".lock"):
        raise BranchError(f"invalid branch name {name!r}: no '..', '\\' or '.lock' ending")
    for segment in name.split("/"):
        if not segment or not all(c.isalnum() or c in "._-" for c in segment):
            raise BranchError(f"invalid branch name {name!r}: use '/'-separated letters, digits, '_', '-' and '.'")
    if len(quote(name, safe="").encode()) > 200:
        raise BranchError(f"invalid branch name {name[:40]!r}...: too long")
    return name


def normalize_branch(name: str | None) -> str | None:
    """``None`` for the main branch, the name otherwise."""
    return None if name in (None, MAIN) else name


def branch_ref_path(name: str) -> str:
    return f"{BRANCHES_DIR}/{quote(name, safe='')}.json"


def manifest_branch(manifest: table_pb2.Manifest) -> str | None:
    """The branch a manifest belongs to (``None``: main or a table without branches)."""
    return manifest.branch if manifest.HasField("branch") and manifest.branch else None


def branch_store(root: ObjectStore, branch: str | None) -> ObjectStore:
    """The store of ``branch``'s tree (the root itself for main)."""
    branch = normalize_branch(branch)
    if branch is None:
        return root
    uri, query = split_uri_query(root.uri)
    return root.sibling(f"{uri.rstrip('/')}/{TREE_DIR}/{branch}{query}")


def root_of(store: ObjectStore, manifest: table_pb2.Manifest) -> ObjectStore:
    """The main table's store, given a store and one of its manifests (main or a branch)."""
    branch = manifest_branch(manifest)
    if branch is None:
        return store
    suffix = f"/{TREE_DIR}/{branch}"
    uri, query = split_uri_query(store.uri)
    uri = uri.rstrip("/")
    if not uri.endswith(suffix):
        raise CorruptFileError(f"a manifest of branch {branch!r} lies outside {suffix[1:]}/", table=store.uri)
    return store.sibling(uri[: -len(suffix)] + query)


def latest_branch_of(store: ObjectStore) -> str | None:
    """The branch whose tree ``store`` is, read from its latest manifest."""
    listing = list_versions(store, since=LATEST_ONLY)
    if listing.latest is None:
        return None
    return manifest_branch(read_manifest(store, listing.versions[listing.latest]).manifest)


def root_store(store: ObjectStore) -> ObjectStore:
    listing = list_versions(store, since=LATEST_ONLY)
    if listing.latest is None:
        return store
    return root_of(store, read_manifest(store, listing.versions[listing.latest]).manifest)


# -- branch refs -------------------------------------------------------------------------------
def read_branch(root: ObjectStore, name: str) -> dict[str, Any]:
    path = branch_ref_path(name)
    if not root.exists(path):
        raise BranchError(f"branch {name!r} does not exist", table=root.uri)
    try:
        content = json.loads(root.read_bytes(path))
        int(content["parentVersion"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptFileError(f"malformed branch file: {exc}", table=root.uri, path=path) from exc
    return content


def branch_names(root: ObjectStore) -> list[str]:
    names = []
    for info in root.list_dir(BRANCHES_DIR):
        if info.base_name.endswith(".json"):  # staging files end in a random suffix
            names.append(unquote(info.base_name[: -len(".json")]))
    return sorted(names)


def write_branch(root: ObjectStore, name: str, content: dict[str, Any]) -> bool:
    """Publish a new branch ref; False when the branch already exists."""
    return root.put_if_not_exists(branch_ref_path(name), json.dumps(content, indent=2).encode())


def branch_identifier(root: ObjectStore, parent: str | None) -> list[list[Any]]:
    """The version mapping a child of ``parent`` extends (empty for main)."""
    if parent is None:
        return []
    mapping = read_branch(root, parent).get("identifier", {}).get("version_mapping", [])
    return [list(pair) for pair in mapping]


# -- references --------------------------------------------------------------------------------
def resolve_reference(store: ObjectStore, reference: Reference) -> tuple[ObjectStore, int | None]:
    """(store of the branch, version or None for its latest) that ``reference`` names.

    ``store`` is the store of the current branch: an ``int`` is one of its versions.
    """
    if isinstance(reference, bool):
        raise InvalidInputError(f"a version reference cannot be {reference!r}", table=store.uri)
    if isinstance(reference, int):
        return store, reference
    if isinstance(reference, str):
        if reference.isdigit():
            return store, int(reference)
        from lance_format.table.tags import TableTags  # tags resolve through this module

        root = root_store(store)
        tag = TableTags(root)._read(reference)
        return branch_store(root, tag.get("branch")), int(tag["version"])
    if isinstance(reference, tuple) and len(reference) == 2:
        branch, version = reference
        if branch is not None and not isinstance(branch, str):
            raise InvalidInputError(f"a branch name must be a string, got {branch!r}", table=store.uri)
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise InvalidInputError(f"a version must be an integer, got {version!r}", table=store.uri)
        root = root_store(store)
        branch = normalize_branch(branch)
        if branch is not None:
            read_branch(root, branch)  # must exist
        return branch_store(root, branch), version
    raise InvalidInputError(
        f"a version reference is an int, a tag name or a (branch, version) tuple, got {reference!r}",
        table=store.uri)


def version_path(store: ObjectStore, version: int | None) -> tuple[int, str]:
    """(version, manifest path) of ``version`` (None: the latest) in ``store``'s ``_versions/``."""
    listing = list_versions(store, since=LATEST_ONLY if version is None else max(version, 1))
    if listing.latest is None:
        raise VersionNotFoundError("no versions here", table=store.uri)
    if version is None:
        version = listing.latest
    if version not in listing.versions:
        raise VersionNotFoundError(f"version {version} does not exist (latest is {listing.latest})",
                                   table=store.uri, version=version)
    return version, listing.versions[version]
