"""Asset-check factories on a table's scalar indices (see :mod:`lance_assets.indices`).

* ``lance_index_coverage_check``: every index (or the named ones) leaves at most ``max_unindexed_rows``
  rows, or ``max_unindexed_fraction`` of the rows, unindexed.
* ``lance_index_present_check``: the declared indices exist, on their columns, with their types.

The table is found like the checks of :mod:`lance_assets.checks` (``uri``, else the resource at
``resource_key``), and under write-audit-publish the run's audit branch is checked, unless
``audit_branch=False``: the publish builds a WAP asset's indices on main, so check them there
(a check of the ``lance_publish_asset`` asset with ``uri=`` the table and ``audit_branch=False``). Both read
index metadata only; no rows are scanned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dagster as dg

from lance_assets import engine
from lance_assets.checks import _asset_key, _check_kwargs, _resolve
from lance_assets.indices import _normal, index_status, parse_specs
from lance_format.errors import InvalidInputError


def _open(context: Any, key: dg.AssetKey, uri: str | None, resource_key: str,
          audit_branch: bool) -> tuple[Any, dict[str, Any]]:
    if not audit_branch:  # main, even where the run wrote an audit branch
        options = None
        if uri is None:
            resource = getattr(context.resources, resource_key)
            uri = resource.uri_for(key)
            options = getattr(resource, "table_storage_options", None)
        return engine.try_open(uri, storage_options=options), {}
    target = _resolve(context, key, uri, resource_key)
    ds = engine.try_open(target.uri, storage_options=target.options)
    return ds, dict(target.metadata)


def lance_index_coverage_check(
    asset: Any, *, max_unindexed_rows: int | None = None, max_unindexed_fraction: float | None = None,
    indices: Sequence[str] | None = None, uri: str | None = None, resource_key: str = "lance",
    blocking: bool = False, severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.WARN,
    name: str = "lance_index_coverage", audit_branch: bool = True,
) -> dg.AssetChecksDefinition:
    """A check ``lance_index_coverage`` (or ``name``: several bounds on one asset need distinct names): the table's indices (``indices``: only these names) leave at
    most ``max_unindexed_rows`` rows unindexed, and at most ``max_unindexed_fraction`` (0..1) of
    the table's rows; give at least one bound. A table with no index (or missing a named one)
    fails. Metadata: the unindexed rows and fraction per index."""
    if max_unindexed_rows is None and max_unindexed_fraction is None:
        raise InvalidInputError("lance_index_coverage_check needs max_unindexed_rows or max_unindexed_fraction")
    if max_unindexed_rows is not None and max_unindexed_rows < 0:
        raise InvalidInputError(f"max_unindexed_rows must be >= 0; got {max_unindexed_rows}")
    if max_unindexed_fraction is not None and not 0 <= max_unindexed_fraction <= 1:
        raise InvalidInputError(f"max_unindexed_fraction must be within [0, 1]; got {max_unindexed_fraction}")
    key = _asset_key(asset)

    @dg.asset_check(**_check_kwargs(asset, name, uri, resource_key, blocking,
                                    "The table's indices leave few rows unindexed"))
    def _check(context) -> dg.AssetCheckResult:
        ds, meta = _open(context, key, uri, resource_key, audit_branch)
        if ds is None:
            return dg.AssetCheckResult(passed=False, severity=severity, metadata={"reason": "no table"})
        status = {entry["name"]: entry for entry in index_status(ds)}
        wanted = list(indices) if indices is not None else sorted(status)
        missing = [name for name in wanted if name not in status]
        total = ds.count_rows()
        failing = []
        for name in wanted:
            if name not in status:
                continue
            unindexed = status[name]["unindexed_rows"]
            fraction = unindexed / total if total else 0.0
            meta[f"{name}/unindexed_rows"] = dg.MetadataValue.int(unindexed)
            meta[f"{name}/unindexed_fraction"] = dg.MetadataValue.float(round(fraction, 6))
            if (max_unindexed_rows is not None and unindexed > max_unindexed_rows) or (
                    max_unindexed_fraction is not None and fraction > max_unindexed_fraction):
                failing.append(name)
        meta.update({"lance/version": ds.version, "failing": failing, "missing": missing})
        passed = bool(wanted) and not failing and not missing
        if not wanted:
            meta["reason"] = "the table has no index"
        return dg.AssetCheckResult(passed=passed, severity=severity, metadata=meta)

    return _check


def lance_index_present_check(
    asset: Any, indices: Any = None, *, uri: str | None = None, resource_key: str = "lance",
    blocking: bool = False, severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
    audit_branch: bool = True,
) -> dg.AssetChecksDefinition:
    """A check ``lance_index_present``: every declared index exists on its column with its type.
    ``indices``: specs as in ``lance/indices`` (default: the asset definition's ``lance/indices``
    metadata). Metadata: the missing and mistyped indices."""
    key = _asset_key(asset)
    if indices is None and isinstance(asset, dg.AssetsDefinition):
        indices = asset.specs_by_key[key].metadata.get("lance/indices")
    elif indices is None and isinstance(asset, dg.AssetSpec):
        indices = asset.metadata.get("lance/indices")
    specs = parse_specs(indices, where=f"asset {key.to_user_string()}")
    if not specs:
        raise InvalidInputError(f"lance_index_present_check of asset {key.to_user_string()}: no indices declared "
                                "(pass indices= or declare lance/indices on the asset)")

    @dg.asset_check(**_check_kwargs(asset, "lance_index_present", uri, resource_key, blocking,
                                    "The declared indices exist with their declared types"))
    def _check(context) -> dg.AssetCheckResult:
        ds, meta = _open(context, key, uri, resource_key, audit_branch)
        if ds is None:
            return dg.AssetCheckResult(passed=False, severity=severity, metadata={"reason": "no table"})
        present = {d.name: d for d in engine.describe_indices(ds)}
        missing, mistyped = [], []
        for spec in specs:
            found = present.get(spec.index_name)
            if found is None:
                missing.append(spec.index_name)
            elif _normal(found.index_type) != _normal(spec.type) or list(found.field_names) != [spec.column]:
                mistyped.append(f"{spec.index_name}: declared {spec.type} on {spec.column}, found "
                                f"{found.index_type} on {', '.join(found.field_names)}")
        meta.update({"lance/version": ds.version, "missing": missing, "mistyped": mistyped})
        return dg.AssetCheckResult(passed=not missing and not mistyped, severity=severity, metadata=meta)

    return _check
