"""Names and places of versions: tags, branches, clones and base paths of a ``LanceDataset``.

A mixin of ``LanceDataset`` with pylance's methods; the work happens in
:mod:`lance_format.dataset.branches`, :mod:`~lance_format.dataset.clones` and
:mod:`~lance_format.dataset.maintenance.metadata_commits`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from lance_format.dataset.branches import Branches, create_branch, dataset_tags
from lance_format.dataset.clones import deep_clone, shallow_clone
from lance_format.dataset.maintenance.metadata_commits import add_bases
from lance_format.dataset.mixin import DatasetMixin
from lance_format.table.base_paths import DatasetBasePath
from lance_format.table.refs import Reference

if TYPE_CHECKING:
    from lance_format.dataset.branches import Branches, Tags
    from lance_format.dataset.dataset import LanceDataset


class ReferenceMethods(DatasetMixin):
    """Mixed into ``LanceDataset``: tags, branches, clones and base paths."""

    @property
    def tags(self) -> Tags:
        """The table's tags (named versions): ``create``, ``delete``, ``list``, ``get_version``."""

        return dataset_tags(self._as_dataset())

    @property
    def branches(self) -> Branches:
        """The table's branches (pylance's ``Branches``: ``list()``, ``list_ordered()``, ``delete(name)``)."""

        return Branches(self._as_dataset())

    def create_branch(self, branch: str, reference: Reference = None,
                      storage_options: dict[str, str] | None = None) -> LanceDataset:
        """Create ``branch`` from ``reference`` (a version, tag or ``(branch, version)``; None: this
        version) and return the branch's dataset (pylance's ``create_branch``).

        Raises
        ------
        BranchError
            The branch exists already or its name is invalid.
        """

        return create_branch(self._as_dataset(), branch, reference, storage_options)

    def shallow_clone(self, target_path: str | os.PathLike[str], reference: Reference,
                      storage_options: dict[str, str] | None = None, **kwargs: Any) -> LanceDataset:
        """A new table at ``target_path`` whose first version references this table's files at
        ``reference`` (pylance's ``shallow_clone``; nothing is copied)."""

        return shallow_clone(self._as_dataset(), target_path, reference, storage_options)

    def deep_clone(self, target_path: str | os.PathLike[str], reference: Reference,
                   storage_options: dict[str, str] | None = None, **kwargs: Any) -> LanceDataset:
        """A new table at ``target_path`` with copies of this table's files at ``reference``
        (pylance's ``deep_clone``)."""

        return deep_clone(self._as_dataset(), target_path, reference, storage_options)

    def base_paths(self) -> dict[int, DatasetBasePath]:
        """The base paths of this version, by id (pylance's ``base_paths()``)."""
        return {b.id: DatasetBasePath.from_proto(b) for b in self._as_dataset().manifest.base_paths}

    def add_bases(self, new_bases: list[DatasetBasePath],
                  transaction_properties: dict[str, str] | None = None) -> LanceDataset:
        """Register base paths later writes may send data files to (``target_bases``), in a new
        version (pylance's ``add_bases``); returns this dataset, moved to that version.

        Raises
        ------
        InvalidInputError
            A base is not a ``DatasetBasePath``, not an absolute path or URI, or its name, path
            or id is registered already.
        """

        add_bases(self._as_dataset(), new_bases, transaction_properties=transaction_properties)
        return self._as_dataset()


__all__ = ["ReferenceMethods"]
