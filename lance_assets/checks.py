"""Asset-check factories that look at the Lance table itself (so they also cover external writers).

* ``lance_schema_change_check``: fails when the latest version's columns differ from the
  previous version's (added, removed or retyped columns are listed).
* ``lance_row_count_check``: the latest version's row count within ``[min_rows, max_rows]``.
* ``lance_version_freshness_check``: the latest commit is at most ``max_age`` old.

The table is found from ``uri`` or, when omitted, from the asset key through a resource that has
``uri_for(asset_key)`` (``LanceTableResource`` or ``LanceIOManager``) under ``resource_key``.
When the run wrote the asset to an audit branch (write-audit-publish, :mod:`lance_assets.wap`),
the checks look at that branch's latest version instead of main's, and say so (``lance/branch``).
Each check reads at most two manifests (plus the branch list); none scans rows.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import dagster as dg

from lance_assets import engine, wap
from lance_assets.engine import TableVersions, VersionSummary


class _Target:
    """The table a check looks at: main, or the run's audit branch when the run wrote one."""

    def __init__(self, context: Any, key: dg.AssetKey, uri: str | None, resource_key: str) -> None:
        options = None
        if uri is None:
            resource = getattr(context.resources, resource_key)
            uri = resource.uri_for(key)
            options = getattr(resource, "table_storage_options", None)
        run = getattr(context, "run", None)
        run_id: str | None = run.run_id if run is not None else None
        branch = wap.audited_branch(uri, run_id, storage_options=options) if run_id is not None else None
        self.uri = engine.location_of(branch) if branch is not None else uri
        self.options = options
        self.metadata: dict[str, Any] = {}
        if branch is not None and run_id is not None:
            self.metadata[wap.BRANCH] = wap.audit_branch_name(run_id)


def _resolve(context: Any, key: dg.AssetKey, uri: str | None, resource_key: str) -> _Target:
    return _Target(context, key, uri, resource_key)


def _latest(target: _Target) -> tuple[TableVersions, VersionSummary | None]:
    """The table's versions and its latest version's summary (None when there is no table)."""
    table = engine.table_versions(target.uri, storage_options=target.options)
    version = table.latest()
    return table, (table.summary(version) if version is not None else None)


def _check_kwargs(asset: Any, name: str, uri: str | None, resource_key: str, blocking: bool, description: str):
    kwargs: dict[str, Any] = dict(asset=_asset_key(asset), name=name, blocking=blocking, description=description)
    if uri is None:
        kwargs["required_resource_keys"] = {resource_key}
    return kwargs


def _asset_key(asset: Any) -> dg.AssetKey:
    return asset.key if isinstance(asset, (dg.AssetsDefinition, dg.AssetSpec)) else dg.AssetKey.from_coercible(asset)


def lance_schema_change_check(
    asset: Any, *, uri: str | None = None, resource_key: str = "lance", blocking: bool = False,
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.WARN,
) -> dg.AssetChecksDefinition:
    """A check ``lance_schema_unchanged``: the latest version has the previous version's columns.

    Parameters
    ----------
    asset
        The asset (definition, spec or key) whose table is checked.
    uri
        Check the table at this URI instead of the asset's table under the resource.
    resource_key
        The :class:`LanceTableResource` that finds the asset's table (default ``lance``).
    blocking
        Stop downstream assets (and a write-audit-publish step) when the check fails.
    severity
        The severity of a failure (default WARN).

    Returns
    -------
    dg.AssetChecksDefinition
        The check; its metadata lists the added, removed and retyped columns.
    """
    key = _asset_key(asset)

    @dg.asset_check(**_check_kwargs(asset, "lance_schema_unchanged", uri, resource_key, blocking,
                                    "The latest Lance version has the previous version's columns"))
    def _check(context) -> dg.AssetCheckResult:
        target = _resolve(context, key, uri, resource_key)
        table, latest = _latest(target)
        if latest is None:
            return dg.AssetCheckResult(passed=False, severity=severity, metadata={"reason": "no table"})
        version = latest.version
        if version == 1 or not table.exists(version - 1):
            return dg.AssetCheckResult(passed=True, metadata={"lance/version": version, "reason": "no previous version",
                                                              **target.metadata})
        new = latest.schema
        old = table.summary(version - 1).schema
        added = [n for n in new.names if n not in old.names]
        removed = [n for n in old.names if n not in new.names]
        retyped = [f"{n}: {old.field(n).type} -> {new.field(n).type}" for n in new.names
                   if n in old.names and not old.field(n).type.equals(new.field(n).type)]
        return dg.AssetCheckResult(
            passed=not (added or removed or retyped), severity=severity,
            metadata={"lance/version": version, "added": added, "removed": removed, "retyped": retyped,
                      **target.metadata},
        )

    return _check


def lance_row_count_check(
    asset: Any, *, min_rows: int | None = None, max_rows: int | None = None, uri: str | None = None,
    resource_key: str = "lance", blocking: bool = False,
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
) -> dg.AssetChecksDefinition:
    """A check ``lance_row_count_in_bounds``: the latest version's row count is within bounds.

    Counts come from the manifest (no scan).

    Parameters
    ----------
    asset
        The asset (definition, spec or key) whose table is checked.
    min_rows, max_rows
        The bounds (inclusive); at least one is required.
    uri
        Check the table at this URI instead of the asset's table under the resource.
    resource_key
        The :class:`LanceTableResource` that finds the asset's table (default ``lance``).
    blocking
        Stop downstream assets (and a write-audit-publish step) when the check fails.
    severity
        The severity of a failure (default ERROR).

    Returns
    -------
    dg.AssetChecksDefinition
        The check.

    Raises
    ------
    ValueError
        Neither ``min_rows`` nor ``max_rows`` is given.
    """
    if min_rows is None and max_rows is None:
        raise ValueError("give min_rows, max_rows or both")
    key = _asset_key(asset)

    @dg.asset_check(**_check_kwargs(asset, "lance_row_count_in_bounds", uri, resource_key, blocking,
                                    _row_count_description(min_rows, max_rows)))
    def _check(context) -> dg.AssetCheckResult:
        target = _resolve(context, key, uri, resource_key)
        _, latest = _latest(target)
        if latest is None:
            return dg.AssetCheckResult(passed=False, severity=severity, metadata={"reason": "no table"})
        rows = latest.row_count
        ok = (min_rows is None or rows >= min_rows) and (max_rows is None or rows <= max_rows)
        return dg.AssetCheckResult(passed=ok, severity=severity,
                                   metadata={"dagster/row_count": int(rows), "lance/version": latest.version,
                                             **target.metadata})

    return _check


def _row_count_description(min_rows: int | None, max_rows: int | None) -> str:
    if max_rows is None:
        bound = f"at least {min_rows:,}"
    elif min_rows is None:
        bound = f"at most {max_rows:,}"
    else:
        bound = f"between {min_rows:,} and {max_rows:,}"
    return f"The latest Lance version has {bound} row{'' if (max_rows or min_rows) == 1 else 's'}"


def _age(max_age: dt.timedelta) -> str:
    """``1 day``, ``6 hours``, ``90 seconds``: the largest unit that divides the age."""
    seconds = max_age.total_seconds()
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{seconds:g} second{'' if seconds == 1 else 's'}"


def lance_version_freshness_check(
    asset: Any, *, max_age: dt.timedelta, uri: str | None = None, resource_key: str = "lance",
    blocking: bool = False, severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.WARN,
) -> dg.AssetChecksDefinition:
    """A check ``lance_version_fresh``: the table's latest commit is at most ``max_age`` old.

    Parameters
    ----------
    asset
        The asset (definition, spec or key) whose table is checked.
    max_age
        How old the latest commit may be.
    uri
        Check the table at this URI instead of the asset's table under the resource.
    resource_key
        The :class:`LanceTableResource` that finds the asset's table (default ``lance``).
    blocking
        Stop downstream assets (and a write-audit-publish step) when the check fails.
    severity
        The severity of a failure (default WARN).

    Returns
    -------
    dg.AssetChecksDefinition
        The check; its metadata carries the commit's age and timestamp.
    """
    key = _asset_key(asset)

    @dg.asset_check(**_check_kwargs(asset, "lance_version_fresh", uri, resource_key, blocking,
                                    f"The latest Lance commit is at most {_age(max_age)} old"))
    def _check(context) -> dg.AssetCheckResult:
        target = _resolve(context, key, uri, resource_key)
        _, latest = _latest(target)
        if latest is None:
            return dg.AssetCheckResult(passed=False, severity=severity, metadata={"reason": "no table"})
        committed = latest.timestamp
        age = dt.datetime.now(dt.UTC) - committed
        return dg.AssetCheckResult(
            passed=age <= max_age, severity=severity,
            metadata={"lance/version": latest.version, "age_seconds": round(age.total_seconds(), 3),
                      "lance/commit_timestamp": dg.MetadataValue.timestamp(committed), **target.metadata},
        )

    return _check
