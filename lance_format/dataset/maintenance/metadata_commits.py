"""Metadata-only commits with pylance's API: restore, config and metadata updates.

* ``restore()`` commits a ``Restore`` of the checked-out version: the old manifest republished
  as the newest version (fragment-id and row-id high-water marks kept, so ids are never reused).
* ``update_config`` / ``delete_config_keys`` / ``update_metadata`` / ``update_schema_metadata`` /
  ``update_field_metadata`` commit ``UpdateConfig`` transactions carrying ``UpdateMap`` s.
* ``add_bases`` commits an ``UpdateBases``: new base paths later writes may target.

Both run on the mutation machinery (:mod:`lance_format.dataset.mutations.base`), so they retry
on retryable conflicts and move the dataset object to the new version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lance_format.dataset.evolution.base import resolve_field
from lance_format.dataset.mutations.base import Prepared, run_mutation, transaction_for
from lance_format.errors import InvalidInputError
from lance_format.proto import transaction_pb2
from lance_format.table.base_paths import new_base_protos

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


# -- restore ---------------------------------------------------------------------------------
def restore(ds: LanceDataset, *, transaction_properties=None, commit_message=None) -> None:
    """Make the checked-out version the latest again (a new commit)."""
    version = ds.version

    def prepare(current: LanceDataset) -> Prepared:
        latest = current.open_latest()  # pylance builds the Restore on the latest version
        prepared = Prepared(transaction_for(latest, transaction_properties, commit_message), None)
        prepared.txn.restore.version = version
        return prepared

    run_mutation(ds, prepare)


# -- config and metadata ---------------------------------------------------------------------
def _update_map(target: transaction_pb2.Transaction.UpdateMap, values: Mapping[str, Any], replace: bool) -> None:
    if not isinstance(values, Mapping):
        raise InvalidInputError(f"expected a dict of str -> str | None, got {type(values).__name__}")
    target.SetInParent()
    for key, value in values.items():
        if not isinstance(key, str) or (value is not None and not isinstance(value, str)):
            raise InvalidInputError(f"metadata and config entries must be str -> str | None, got {key!r}: {value!r}")
        entry = target.update_entries.add()
        entry.key = key
        if value is not None:
            entry.value = value
    if replace:
        target.replace = True


def _update_config_txn(ds: LanceDataset, build, properties=None, commit_message=None) -> None:
    def prepare(current: LanceDataset) -> Prepared:
        prepared = Prepared(transaction_for(current, properties, commit_message), None)
        prepared.txn.update_config.SetInParent()
        build(current, prepared.txn.update_config)
        return prepared

    run_mutation(ds, prepare)


def update_config(ds: LanceDataset, values: Mapping[str, str | None], *, replace: bool = False,
                  transaction_properties=None, commit_message=None) -> dict[str, str]:
    _update_config_txn(ds, lambda c, body: _update_map(body.config_updates, values, replace),
                       transaction_properties, commit_message)
    return dict(ds.manifest.config)


def delete_config_keys(ds: LanceDataset, keys: list[str], *, transaction_properties=None,
                       commit_message=None) -> None:
    if isinstance(keys, str):
        keys = [keys]
    update_config(ds, {k: None for k in keys}, transaction_properties=transaction_properties,
                  commit_message=commit_message)


def update_metadata(ds: LanceDataset, values: Mapping[str, str | None], *, replace: bool = False,
                    transaction_properties=None, commit_message=None) -> dict[str, str]:
    _update_config_txn(ds, lambda c, body: _update_map(body.table_metadata_updates, values, replace),
                       transaction_properties, commit_message)
    return dict(ds.manifest.table_metadata)


def update_schema_metadata(ds: LanceDataset, values: Mapping[str, str | None], *, replace: bool = False,
                           transaction_properties=None, commit_message=None) -> dict[str, str]:
    _update_config_txn(ds, lambda c, body: _update_map(body.schema_metadata_updates, values, replace),
                       transaction_properties, commit_message)
    return {k: v.decode(errors="replace") for k, v in ds.manifest.schema_metadata.items()}


def update_field_metadata(ds: LanceDataset, field_updates: Mapping[str, Mapping[str, str | None]], *,
                          replace: bool = False, transaction_properties=None, commit_message=None) -> None:
    def build(current: LanceDataset, body) -> None:
        for path, values in field_updates.items():
            field = resolve_field(current, path)
            _update_map(body.field_metadata_updates[field.id], values, replace)

    _update_config_txn(ds, build, transaction_properties, commit_message)


# -- base paths ------------------------------------------------------------------------------
def add_bases(ds: LanceDataset, new_bases: Any, *, transaction_properties=None) -> None:
    """Register base paths (``DatasetBasePath``); ids left unset are assigned at commit."""
    def prepare(current: LanceDataset) -> Prepared:
        prepared = Prepared(transaction_for(current, transaction_properties, None), None)
        body = prepared.txn.update_bases
        body.SetInParent()
        for base in new_bases:
            proto = base.to_proto()
            body.new_bases.append(proto)
        return prepared

    # the arguments are checked before anything is committed
    new_base_protos(new_bases, [], table=ds.uri)
    run_mutation(ds, prepare)


__all__ = [
    "add_bases", "restore", "update_config", "delete_config_keys", "update_metadata", "update_schema_metadata",
    "update_field_metadata",
]
