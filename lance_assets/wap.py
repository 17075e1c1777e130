"""Write-audit-publish on Lance branches.

An asset opts in with definition metadata ``lance/write_audit_publish: True`` (or the IO
manager's ``write_audit_publish=True``). Its output is then committed to a branch of its table,
``audit/<run id>``, taken from main's latest version (an empty main version with the output's
schema is created first for a new table). Main is untouched until the data is *published*:

* **Audit.** The asset's checks read the branch: a check's input loaded by ``LanceIOManager``
  is the branch of the run, :func:`load_audited` returns it to checks without inputs, and the
  check factories of :mod:`lance_assets.checks` look at it when it exists.
* **Publish.** :func:`lance_publish_asset` makes an asset downstream of the audited one; Dagster
  runs it only once the audited asset's *blocking* checks have passed, and it moves main to the
  branch in one atomic commit (:func:`lance_format.publish_branch`: the branch's commits, however
  many, become one commit on main; refused when main has moved since the branch was taken, or
  rebased over main's compatible commits when asked). A downstream asset that loads the audited
  asset in the same run publishes first too (publishing is idempotent), so it reads main, never
  the branch.
* **Several writes, one branch.** Every output of a run written to one table goes to the same
  branch (several assets stored in one table, the table config set after the rows, ...); a step
  that is retried starts its branch over unless another output of the run wrote to it too. What
  the branch gained after an earlier publish of the run is published by the next publish.
* A failed blocking check skips both: main is unchanged and the branch stays for inspection.
  ``LanceMaintenancePolicy(audit_branches_older_than=..., audit_branches_keep=...)`` removes
  old audit branches.

Declared indices (``lance/indices``) are built or refreshed on main by the publish, right after
its commit: the engine publishes data and config commits only, so the branch holds none.
Table config (``lance/table_config``) is set on the branch, so the checks see it and the publish
brings it to main in the same commit as the rows. The IO manager's maintenance policy runs on
main after publishing.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import dagster as dg
import pyarrow as pa

from lance_assets import engine
from lance_assets.config import _plain
from lance_assets.engine import LanceDataset
from lance_assets.metadata import TABLE_NAME, URI, VERSION, table_name_of
from lance_format.errors import InvalidInputError, LanceError

if TYPE_CHECKING:
    from lance_assets.io_manager import LanceIOManager

WRITE_AUDIT_PUBLISH = "lance/write_audit_publish"
PUBLISH_REBASE = "lance/write_audit_publish_rebase"  # rebase the publish over compatible main commits
AUDIT_PREFIX = "audit/"
BRANCH = "lance/branch"
BRANCH_VERSION = "lance/branch_version"
BASE_VERSION = "lance/main_version_before"
PUBLISHED = "lance/published"
PUBLISHED_VERSION = "lance/main_version"
_RUN_ID = "dagster/run_id"
WAITING_FOR = "lance/waiting_for_checks"  # a publish held back: the checks still to pass
WRITERS = "lance/writers"  # branch metadata: the outputs of the run that wrote to the branch (JSON list)


def audit_branch_name(run_id: str) -> str:
    """The branch a run's audited writes go to (run ids are UUIDs: valid branch segments)."""
    return f"{AUDIT_PREFIX}{run_id}"


def is_enabled(default: bool, definition_metadata: Mapping[str, Any] | None,
               output_metadata: Mapping[str, Any] | None, key: str = WRITE_AUDIT_PUBLISH) -> bool:
    """Whether an output is written, audited and published (or, with ``key=PUBLISH_REBASE``,
    published by rebasing): run-time metadata, then the definition's, then the IO manager's setting."""
    value: Any = default
    for layer in (definition_metadata or {}, output_metadata or {}):
        if layer.get(key) is not None:
            value = _plain(layer[key])
    if not isinstance(value, bool):
        raise InvalidInputError(f"{key} must be true or false; got {value!r}")
    return value


def start_branch(uri: str, run_id: str, writer: str, *, new_table_schema: Callable[[], pa.Schema],
                 create_options: Mapping[str, Any], storage_options: engine.Options,
                 rebase: bool = False) -> tuple[LanceDataset, int]:
    """The run's audit branch for output ``writer``: the branch another output of the run already
    wrote to, else one freshly taken from main's latest version (a retried step, the only writer,
    starts over); creates main, empty, when there is no table yet. Returns (branch, the main
    version it was taken from). The branch's metadata records its writers and how to publish it."""
    main = engine.try_open(uri, storage_options=storage_options)
    if main is None:
        empty = new_table_schema().empty_table().to_reader()
        main = engine.write(uri, empty, mode="create", storage_options=storage_options, **create_options)
    name = audit_branch_name(run_id)
    existing = engine.branches(main).get(name)
    if existing is not None:
        writers = json.loads(existing["metadata"].get(WRITERS, "[]"))
        if writers and writers != [writer]:  # another output of this run: write on top of it
            if writer not in writers:
                engine.set_branch_metadata(main, name, {**existing["metadata"],
                                                        WRITERS: json.dumps([*writers, writer])})
            return engine.open_branch(uri, name, storage_options=storage_options), int(existing["parent_version"])
        engine.delete_branch(main, name)
    metadata = {_RUN_ID: run_id, "lance/created_at": str(time.time()), WRITERS: json.dumps([writer])}
    if rebase:
        metadata[PUBLISH_REBASE] = "true"
    return engine.create_branch(main, name, metadata), main.version


def branch_metadata(branch: LanceDataset, run_id: str, base_version: int, uri: str) -> dict[str, Any]:
    """What a materialization written to a branch adds: where the audited data is."""
    return {
        BRANCH: audit_branch_name(run_id),
        BRANCH_VERSION: dg.MetadataValue.int(branch.version),
        BASE_VERSION: dg.MetadataValue.int(base_version),
        PUBLISHED: dg.MetadataValue.bool(False),
        URI: dg.MetadataValue.path(uri),
        "lance/branch_uri": dg.MetadataValue.path(engine.location_of(branch)),
    }


def audited_branch(uri: str, run_id: str, *, storage_options: engine.Options = None) -> LanceDataset | None:
    """The latest version of the run's audit branch of the table at ``uri``, or None."""
    main = engine.try_open(uri, storage_options=storage_options)
    if main is None or audit_branch_name(run_id) not in engine.branches(main):
        return None
    return engine.open_branch(uri, audit_branch_name(run_id), storage_options=storage_options)


def writer_keys(info: Mapping[str, Any]) -> list[dg.AssetKey]:
    """The assets whose outputs a branch (its ``branches()`` entry) holds."""
    writers = json.loads(info["metadata"].get(WRITERS, "[]"))
    keys = {w.split("|", 1)[0] for w in writers}
    return [dg.AssetKey.from_user_string(k) for k in sorted(keys) if k]


def unaudited(instance: dg.DagsterInstance, run_id: str, keys: list[dg.AssetKey]) -> list[str]:
    """The checks of ``keys`` planned in run ``run_id`` that have not passed yet: not evaluated
    (still to run, or crashed), or failed and blocking. Data they audit must not reach main."""
    planned = {(e.asset_key, e.check_name) for e in _run_events(
        instance, run_id, dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED)}
    evaluated = {(e.asset_key, e.check_name): e for e in _run_events(
        instance, run_id, dg.DagsterEventType.ASSET_CHECK_EVALUATION)}
    wanted = set(keys)
    missing = []
    for key, name in sorted(planned, key=lambda item: (item[0].to_user_string(), item[1])):
        if key not in wanted:
            continue
        evaluation = evaluated.get((key, name))
        if evaluation is None or (not evaluation.passed and evaluation.blocking is not False):
            missing.append(f"{key.to_user_string()}:{name}")
    return missing


def _run_events(instance: dg.DagsterInstance, run_id: str, kind: dg.DagsterEventType) -> list[Any]:
    records = instance.get_records_for_run(run_id, of_type=kind, limit=10_000).records
    return [r.event_log_entry.dagster_event.event_specific_data for r in records
            if r.event_log_entry.dagster_event is not None]


def publish_run(uri: str, run_id: str, *, transaction_properties: Mapping[str, str],
                storage_options: engine.Options = None,
                after: Callable[[str], Mapping[str, Any]] | None = None,
                unaudited_writers: Callable[[list[dg.AssetKey]], list[str]] | None = None,
                ) -> dict[str, Any] | None:
    """Publish the run's audit branch of ``uri`` (idempotent); its metadata, or None when the run
    wrote no branch. ``after(uri)``: what to do to main once published (maintenance).
    ``unaudited_writers(keys)``: the checks of the branch's writer assets that have not passed;
    while there are any, nothing is published (metadata ``lance/published`` false says why): a
    branch several assets wrote to goes to main only when all of them passed their checks."""
    main = engine.try_open(uri, storage_options=storage_options)
    name = audit_branch_name(run_id)
    if main is None:
        return None
    info = engine.branches(main).get(name)
    if info is None:
        return None
    waiting = unaudited_writers(writer_keys(info)) if unaudited_writers is not None else []
    if waiting:
        return {BRANCH: name, PUBLISHED: dg.MetadataValue.bool(False), URI: dg.MetadataValue.path(uri),
                WAITING_FOR: ", ".join(waiting)}
    try:
        published = engine.publish(main, name, transaction_properties=transaction_properties,
                                   rebase=info["metadata"].get(PUBLISH_REBASE) == "true")
        branch_version = engine.open_branch(uri, name, storage_options=storage_options).version
    except LanceError as exc:
        raise exc.with_context(table=uri)
    meta: dict[str, Any] = {
        BRANCH: name,
        BRANCH_VERSION: dg.MetadataValue.int(branch_version),
        BASE_VERSION: dg.MetadataValue.int(int(info["parent_version"])),
        PUBLISHED: dg.MetadataValue.bool(True),
        PUBLISHED_VERSION: dg.MetadataValue.int(published.version),
        VERSION: dg.MetadataValue.int(published.version),
        "dagster/row_count": dg.MetadataValue.int(published.count_rows()),
        TABLE_NAME: table_name_of(uri),
        URI: dg.MetadataValue.path(uri),
    }
    if after is not None:
        meta.update(after(uri))
    return meta


def _io_manager(context: Any, io_manager: Any, io_manager_key: str) -> Any:
    if io_manager is not None:
        return io_manager
    resource = getattr(context.resources, io_manager_key, None)
    if resource is None or not hasattr(resource, "uri_for"):
        raise InvalidInputError(f"resource {io_manager_key!r} is neither a LanceIOManager nor a LanceTableResource "
                                "(declare it in required_resource_keys, or pass io_manager=)")
    return resource


def _table_uri(resource: Any, key: dg.AssetKey, metadata: Mapping[str, Any]) -> str:
    """The asset's table: the IO manager applies its namespace and ``lance/uri``/``lance/table``
    metadata; a LanceTableResource lays keys out as ``{base_uri}/{key path}.lance``."""
    if "definition_metadata" in inspect.signature(resource.uri_for).parameters:
        return resource.uri_for(key, metadata)
    return resource.uri_for(key)


def _run_id(context: Any) -> str:
    run = getattr(context, "run", None)
    return run.run_id if run is not None else context.run_id


def load_audited(context: Any, asset: Any, *, columns: list[str] | None = None, filter: str | None = None,
                 io_manager: LanceIOManager | None = None, io_manager_key: str = "io_manager") -> pa.Table:
    """The rows an asset check audits: the run's audit branch of ``asset``'s table when this run
    wrote one, else main's latest version. ``context``: the check's (or an asset's) context;
    the table is found through ``io_manager`` or the resource at ``io_manager_key`` (a
    ``LanceIOManager`` or a ``LanceTableResource``)."""
    key = asset.key if isinstance(asset, (dg.AssetsDefinition, dg.AssetSpec)) else dg.AssetKey.from_coercible(asset)
    metadata = dict(asset.specs_by_key[key].metadata) if isinstance(asset, dg.AssetsDefinition) else (
        dict(asset.metadata) if isinstance(asset, dg.AssetSpec) else {})
    manager = _io_manager(context, io_manager, io_manager_key)
    uri = _table_uri(manager, key, metadata)
    options = manager.table_storage_options
    ds = audited_branch(uri, _run_id(context), storage_options=options) or engine.open_table(
        uri, storage_options=options)
    return ds.to_table(columns=columns, filter=filter)


def lance_publish_asset(asset: dg.AssetsDefinition | dg.AssetSpec, *, key: dg.AssetKey | None = None,
                        io_manager_key: str = "io_manager", group_name: str | None = None) -> dg.AssetsDefinition:
    """The publish step of a write-audit-publish asset: an asset downstream of it (key
    ``<name>_published`` beside it), which Dagster runs only after the asset's blocking checks
    passed; materializing it moves main to the run's audited branch in one commit and reports
    the branch, its version and main's new version. A run that wrote no branch publishes nothing."""
    source = asset.key
    metadata = dict(asset.specs_by_key[source].metadata) if isinstance(asset, dg.AssetsDefinition) else dict(
        asset.metadata)
    partitions_def = asset.specs_by_key[source].partitions_def if isinstance(asset, dg.AssetsDefinition) else (
        asset.partitions_def)
    target = key or dg.AssetKey([*source.path[:-1], f"{source.path[-1]}_published"])

    @dg.asset(
        key=target, deps=[source], kinds={"lance"}, group_name=group_name, partitions_def=partitions_def,
        required_resource_keys={io_manager_key},
        description=f"Publishes the audited data of {source.to_user_string()} to main once its blocking checks pass",
    )
    def _publish(context) -> dg.MaterializeResult:  # Dagster rejects a string annotation on context
        manager = _io_manager(context, None, io_manager_key)
        uri = manager.uri_for(source, metadata)
        meta = manager.publish_audited(uri, context.run.run_id, source, context, metadata)
        if meta is None:
            context.log.info(f"run wrote no audit branch of {uri}; nothing to publish")
            return dg.MaterializeResult(metadata={PUBLISHED: dg.MetadataValue.bool(False), URI: dg.MetadataValue.path(uri)})
        if WAITING_FOR in meta:
            context.log.warning(f"{meta[BRANCH]} of {uri} also holds other assets' writes whose checks have not "
                                f"passed ({meta[WAITING_FOR]}); main is left as it is")
            return dg.MaterializeResult(metadata=meta)
        context.log.info(f"published {meta[BRANCH]} of {uri} as main version {meta[PUBLISHED_VERSION].value}")
        context.log_event(dg.AssetObservation(asset_key=source, metadata=meta))
        return dg.MaterializeResult(metadata=meta)

    return _publish


def cleanup_audit_branches(ds: LanceDataset, *, older_than: timedelta | None, keep: int | None) -> dict[str, int]:
    """Delete ``audit/*`` branches older than ``older_than`` beyond the ``keep`` newest ones
    (either criterion alone works); branches that tags or other branches use are kept."""
    audits = sorted(((name, info) for name, info in engine.branches(ds).items() if name.startswith(AUDIT_PREFIX)),
                    key=lambda item: float(item[1]["metadata"].get("lance/created_at", item[1]["create_at"] or 0)),
                    reverse=True)
    candidates = audits[keep:] if keep is not None else audits
    now = time.time()
    removed = kept = 0
    for name, info in candidates:
        created = float(info["metadata"].get("lance/created_at", info["create_at"] or 0))
        if older_than is not None and now - created < older_than.total_seconds():
            continue
        try:
            engine.delete_branch(ds, name)
            removed += 1
        except LanceError:
            kept += 1  # a tag or another branch still uses it
    return {"audit_branches_removed": removed, "audit_branches_in_use": kept,
            "audit_branches_left": len(audits) - removed}
