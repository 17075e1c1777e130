"""Scalar indices declared on assets, kept fresh after every write and reported as metadata.

An asset declares its indices with definition metadata ``lance/indices`` (a list of
``{column, type, name?, params?}``; ``LanceIOManager(indices={asset key: [...]})`` and the
component's ``tables[].indices`` declare them too, the asset's metadata winning). After each
write the IO manager calls :func:`ensure_indices` on the version it wrote (under
write-audit-publish: on main, right after the publish, as the engine publishes data and config
commits only):

* a declared index that does not exist (a new table, or after an overwrite, which drops indices)
  is built; one whose type or column differs from the declaration is rebuilt;
* an index that leaves rows unindexed (after an append, a merge, a partition replace) is brought
  up to date with ``optimize_indices``. Where the engine cannot optimize indices yet, it is
  rebuilt instead (same name, type and parameters), and the metadata says ``rebuilt``.

Partitioned assets share one index per table: each partition's write refreshes it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from lance_assets import engine
from lance_assets.config import _plain
from lance_assets.engine import LanceDataset
from lance_format.errors import InvalidInputError, LanceError, UnsupportedFeatureError

INDICES = "lance/indices"  # definition (or output) metadata: the asset's index specs
INDEX_PREFIX = "lance/index/"  # materialization metadata: lance/index/<name>/<figure>


@dataclass(frozen=True)
class IndexSpec:
    """One declared index: ``type`` is a scalar type (BTREE, BITMAP, LABEL_LIST, ZONEMAP,
    BLOOMFILTER, NGRAM, INVERTED) or a vector type (IVF_PQ, IVF_FLAT, IVF_SQ); ``name`` defaults to ``{column}_idx`` (pylance's default); ``params`` go to
    ``create_scalar_index``."""

    column: str
    type: str
    name: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def index_name(self) -> str:
        """The index's name: ``name`` if given, else ``{column}_idx`` (pylance's default)."""
        return self.name or f"{self.column}_idx"


def _normal(index_type: str) -> str:
    """``LABEL_LIST`` and pylance's reported ``LabelList`` compare equal."""
    return index_type.replace("_", "").upper()


def parse_specs(value: Any, *, where: str) -> list[IndexSpec]:
    """Index specs from metadata or config (dicts, pydantic models or IndexSpec); InvalidInputError
    naming ``where`` (the asset or table) for anything else."""
    value = _plain(value)
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise InvalidInputError(f"{INDICES} of {where} must be a list of {{column, type, name?, params?}}; "
                                f"got {value!r}")
    specs: list[IndexSpec] = []
    for item in value:
        if isinstance(item, IndexSpec):
            specs.append(item)
            continue
        raw = item.model_dump() if hasattr(item, "model_dump") else _plain(item)
        if not isinstance(raw, Mapping) or not isinstance(raw.get("column"), str) or not isinstance(
                raw.get("type"), str):
            raise InvalidInputError(f"{INDICES} of {where}: each index needs a 'column' and a 'type'; got {item!r}")
        unknown = set(raw) - {"column", "type", "name", "params"}
        if unknown:
            raise InvalidInputError(f"{INDICES} of {where}: unknown keys {sorted(unknown)} in {item!r}")
        params = raw.get("params") or {}
        if not isinstance(params, Mapping):
            raise InvalidInputError(f"{INDICES} of {where}: params must be a mapping; got {params!r}")
        specs.append(IndexSpec(column=raw["column"], type=str(raw["type"]).upper(), name=raw.get("name"),
                               params=dict(params)))
    names = [s.index_name for s in specs]
    if len(set(names)) != len(names):
        raise InvalidInputError(f"{INDICES} of {where}: index names must be unique; got {names}")
    return specs


def resolve_specs(configured: Any, definition_metadata: Mapping[str, Any] | None,
                  output_metadata: Mapping[str, Any] | None, *, where: str) -> list[IndexSpec]:
    """The specs of an output: run-time metadata, else definition metadata, else the IO manager's."""
    for layer in (output_metadata or {}, definition_metadata or {}):
        if layer.get(INDICES) is not None:
            return parse_specs(layer[INDICES], where=where)
    return parse_specs(configured, where=where)


def _failure(exc: LanceError, spec: IndexSpec, asset: str, uri: str) -> InvalidInputError:
    return InvalidInputError(f"asset {asset}: index {spec.index_name!r} ({spec.type} on column {spec.column!r}) "
                             f"cannot be built: {exc}", table=uri, column=spec.column)


def _refresh(ds: LanceDataset, spec: IndexSpec) -> tuple[LanceDataset, str]:
    """Cover the index's unindexed rows: optimize_indices, or a rebuild where that is unsupported."""
    try:
        return engine.optimize_indices(ds, [spec.index_name]), "optimized"
    except UnsupportedFeatureError:
        return engine.create_index(ds, spec.column, spec.type, name=spec.index_name, replace=True,
                                   params=spec.params), "rebuilt"


def ensure_indices(ds: LanceDataset, specs: Sequence[IndexSpec], *, rebuild: bool, asset: str,
                   uri: str) -> tuple[LanceDataset, dict[str, Any]]:
    """Build missing indices and refresh stale ones (``rebuild``: rebuild every one) on ``ds``'s
    branch; returns its new latest version and the materialization metadata."""
    actions: dict[str, tuple[str, float]] = {}
    for spec in specs:
        started = time.perf_counter()
        present = {d.name: d for d in engine.describe_indices(ds)}
        found = present.get(spec.index_name)
        try:
            if found is None or rebuild or _normal(found.index_type) != _normal(spec.type) or (
                    list(found.field_names) != [spec.column]):
                ds = engine.create_index(ds, spec.column, spec.type, name=spec.index_name,
                                         replace=found is not None, params=spec.params)
                action = "created" if found is None else "rebuilt"
            elif engine.index_stats(ds, spec.index_name)["num_unindexed_rows"] > 0:
                ds, action = _refresh(ds, spec)
            else:
                action = "unchanged"
        except LanceError as exc:
            raise _failure(exc, spec, asset, uri) from exc
        actions[spec.index_name] = (action, time.perf_counter() - started)
    return ds, index_metadata(ds, actions)


def index_status(ds: LanceDataset) -> list[dict[str, Any]]:
    """Every index of the version with its type, column and covered / unindexed rows."""
    out = []
    for description in engine.describe_indices(ds):
        stats = engine.index_stats(ds, description.name)
        out.append({"name": description.name, "type": description.index_type,
                    "columns": list(description.field_names), "indexed_rows": int(stats["num_indexed_rows"]),
                    "unindexed_rows": int(stats["num_unindexed_rows"])})
    return out


def index_metadata(ds: LanceDataset, actions: Mapping[str, tuple[str, float]]) -> dict[str, Any]:
    """``lance/indices`` (every index of the version, with what this write did to it and the build
    time) and per index ``lance/index/<name>/{type,indexed_rows,unindexed_rows,build_seconds}``."""
    status = index_status(ds)
    meta: dict[str, Any] = {}
    for entry in status:
        name = entry["name"]
        action, seconds = actions.get(name, ("untouched", 0.0))
        entry["action"] = action
        entry["build_seconds"] = round(seconds, 3)
        meta[f"{INDEX_PREFIX}{name}/type"] = entry["type"]
        meta[f"{INDEX_PREFIX}{name}/indexed_rows"] = dg.MetadataValue.int(entry["indexed_rows"])
        meta[f"{INDEX_PREFIX}{name}/unindexed_rows"] = dg.MetadataValue.int(entry["unindexed_rows"])
        meta[f"{INDEX_PREFIX}{name}/build_seconds"] = dg.MetadataValue.float(entry["build_seconds"])
    meta[INDICES] = dg.MetadataValue.json(status)
    return meta


def refresh_all(ds: LanceDataset, specs: Sequence[IndexSpec] = ()) -> tuple[LanceDataset, list[str]]:
    """Maintenance: bring every index of ``ds`` that leaves rows unindexed up to date; the indices
    refreshed. Declared ``specs`` give a rebuild its parameters (else the index's own type)."""
    declared = {s.index_name: s for s in specs}
    refreshed = []
    for description in engine.describe_indices(ds):
        if engine.index_stats(ds, description.name)["num_unindexed_rows"] == 0:
            continue
        spec = declared.get(description.name) or IndexSpec(
            column=description.field_names[0], type=_normal(description.index_type).replace("LABELLIST", "LABEL_LIST"),
            name=description.name)
        ds, _ = _refresh(ds, spec)
        refreshed.append(description.name)
    return ds, refreshed


def unindexed_rows(ds: LanceDataset) -> int:
    """Rows left unindexed, summed over the version's indices."""
    return sum(entry["unindexed_rows"] for entry in index_status(ds))
