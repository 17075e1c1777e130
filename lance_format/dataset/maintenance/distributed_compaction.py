"""Distributed compaction with pylance's API: ``Compaction.plan`` on one process, each
``CompactionTask.execute`` on any worker, ``Compaction.commit`` of the ``RewriteResult`` s back on
one process.

The plan is :func:`~lance_format.dataset.maintenance.compaction.plan` (the same groups
``compact_files`` rewrites, with the ``max_source_*`` budgets and ``excluded_fragment_ids``); a
task rewrites one group into new data files and reports them, uncommitted; the commit reserves
fragment ids and swaps every group in one ``Rewrite`` built on the plan's read version, so a
concurrent change to the same fragments is refused by the commit protocol. Plans, tasks and
results travel as pylance's JSON (``json()``/``from_json``) or pickled, and cross between
engines: a pylance plan can be executed here and committed by pylance, and the reverse.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from lance_format.dataset.fragment_metadata import FragmentMetadata, fragment_from_proto, fragment_to_proto
from lance_format.dataset.maintenance.compaction import (
    DEFAULT_TARGET_ROWS,
    DEFAULT_THRESHOLD,
    CompactionMetrics,
    _bool,
    _option,
    commit_rewrites,
    group_metrics,
    plan,
    rewrite_group,
    within_budget,
)
from lance_format.dataset.mutations.base import Prepared, storage_version_of
from lance_format.errors import CommitConflictError, InvalidInputError
from lance_format.table.transaction import new_transaction

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


class CompactionOptions(TypedDict, total=False):
    """pylance's ``CompactionOptions`` (the keys this engine acts on; the others are accepted)."""

    target_rows_per_fragment: int
    max_rows_per_group: int
    max_bytes_per_file: int
    materialize_deletions: bool
    materialize_deletions_threshold: float
    num_threads: int
    batch_size: int
    max_source_fragments: int
    max_source_rows: int
    max_source_bytes: int
    excluded_fragment_ids: list[int]


# the option keys pylance writes into its plans and tasks, with its defaults
_PYLANCE_OPTION_DEFAULTS: dict[str, Any] = {
    "target_rows_per_fragment": DEFAULT_TARGET_ROWS, "max_rows_per_group": 1024, "max_bytes_per_file": None,
    "materialize_deletions": True, "materialize_deletions_threshold": DEFAULT_THRESHOLD, "num_threads": None,
    "batch_size": None, "io_buffer_size": None, "defer_index_remap": False, "index_remap_mode": "Direct",
    "compaction_mode": None, "enable_binary_copy": False, "enable_binary_copy_force": False,
    "binary_copy_read_batch_bytes": 16777216, "max_source_fragments": None, "max_source_rows": None,
    "max_source_bytes": None, "excluded_fragment_ids": [], "max_overlays_per_fragment": 10,
    "data_storage_version": None, "has_eager_remappable_index": None,
}


def _resolved_options(ds: LanceDataset, options: Mapping[str, Any] | None) -> dict[str, Any]:
    given = dict(options or {})
    unknown = set(given) - set(_PYLANCE_OPTION_DEFAULTS)
    if unknown:
        raise InvalidInputError(f"unknown compaction options {sorted(unknown)}", table=ds.uri)
    resolved = {**_PYLANCE_OPTION_DEFAULTS, **{k: v for k, v in given.items() if v is not None}}
    resolved["target_rows_per_fragment"] = int(_option(ds, "target_rows_per_fragment", given.get(
        "target_rows_per_fragment"), DEFAULT_TARGET_ROWS, int))
    resolved["materialize_deletions"] = bool(_option(ds, "materialize_deletions", given.get(
        "materialize_deletions"), True, _bool))
    resolved["materialize_deletions_threshold"] = float(_option(ds, "materialize_deletions_threshold", given.get(
        "materialize_deletions_threshold"), DEFAULT_THRESHOLD, float))
    if resolved["target_rows_per_fragment"] <= 0:
        raise InvalidInputError("target_rows_per_fragment must be positive", table=ds.uri)
    resolved["data_storage_version"] = storage_version_of(ds)
    return resolved


def _fragments_json(fragments: Iterable[FragmentMetadata]) -> list[dict[str, Any]]:
    return [f.to_json() for f in fragments]


def _fragments_from(items: Iterable[Any]) -> list[FragmentMetadata]:
    return [FragmentMetadata.from_json(json.dumps(item)) for item in items]


def _loads(text: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"not a {what} in JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidInputError(f"not a {what} in JSON: expected an object")
    return data


def _same_files(current: FragmentMetadata, planned: FragmentMetadata) -> bool:
    """Whether a fragment still has the data files and deletions a plan saw."""
    def key(f: FragmentMetadata) -> tuple[Any, ...]:
        deletion = f.deletion_file
        return (f.physical_rows, tuple(d.path for d in f.files),
                None if deletion is None else (deletion.id, deletion.read_version))
    return key(current) == key(planned)


@dataclass
class RewriteResult:
    """What one task wrote: the new fragments (ids assigned at commit) replacing the originals."""

    read_version: int
    new_fragments: list[FragmentMetadata]
    original_fragments: list[FragmentMetadata]
    metrics: CompactionMetrics = field(default_factory=CompactionMetrics)

    def __repr__(self) -> str:  # pylance's repr names the originals old_fragments
        return (f"RewriteResult(read_version={self.read_version}, new_fragments={self.new_fragments!r}, "
                f"old_fragments={self.original_fragments!r})")

    def json(self) -> str:
        return json.dumps({"metrics": vars(self.metrics), "new_fragments": _fragments_json(self.new_fragments),
                           "read_version": self.read_version,
                           "original_fragments": _fragments_json(self.original_fragments), "row_addrs": None})

    @staticmethod
    def from_json(json_str: str) -> RewriteResult:
        data = _loads(json_str, "RewriteResult")
        try:
            return RewriteResult(int(data["read_version"]), _fragments_from(data["new_fragments"]),
                                 _fragments_from(data["original_fragments"]),
                                 CompactionMetrics(**data.get("metrics") or {}))
        except (KeyError, TypeError) as exc:
            raise InvalidInputError(f"not a RewriteResult: {exc}") from None


@dataclass
class CompactionTask:
    """One group of fragments to rewrite; :meth:`execute` runs on any worker."""

    read_version: int
    fragments: list[FragmentMetadata]
    options: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"CompactionTask(read_version={self.read_version}, fragments={self.fragments!r})"

    def execute(self, dataset: LanceDataset) -> RewriteResult:
        """Rewrite this task's fragments into new data files of ``dataset`` (uncommitted).

        Raises
        ------
        CommitConflictError
            A fragment of the task is no longer in ``dataset`` as planned (it changed since).
        """
        ds = dataset.checkout_version(self.read_version) if dataset.version != self.read_version else dataset
        by_id = {f.fragment_id: f for f in ds.get_fragments()}
        group = []
        for planned in self.fragments:
            current = by_id.get(planned.id)
            if current is None or not _same_files(current.metadata, planned):
                raise CommitConflictError(f"fragment {planned.id} changed since the compaction was planned",
                                          table=ds.uri, version=self.read_version)
            group.append(current)
        prepared = Prepared(new_transaction(self.read_version), None, storage_version=storage_version_of(ds))
        target = int(self.options.get("target_rows_per_fragment") or DEFAULT_TARGET_ROWS)
        try:
            new = rewrite_group(ds, group, target, self.options.get("batch_size"), prepared,
                                self.options.get("max_bytes_per_file"))
        except BaseException:
            prepared.discard(ds.object_store)
            raise
        old = [f.proto for f in group]
        return RewriteResult(self.read_version, [fragment_from_proto(f) for f in new],
                             list(self.fragments), group_metrics([(old, new)]))

    def json(self) -> str:
        return json.dumps({"task": {"fragments": _fragments_json(self.fragments)}, "read_version": self.read_version,
                           "options": self.options})

    @staticmethod
    def from_json(json_str: str) -> CompactionTask:
        data = _loads(json_str, "CompactionTask")
        try:
            return CompactionTask(int(data["read_version"]), _fragments_from(data["task"]["fragments"]),
                                  dict(data.get("options") or {}))
        except (KeyError, TypeError) as exc:
            raise InvalidInputError(f"not a CompactionTask: {exc}") from None


@dataclass
class CompactionPlan:
    """The tasks of one compaction, all planned on ``read_version``."""

    read_version: int
    tasks: list[CompactionTask]
    options: dict[str, Any] = field(default_factory=dict)

    def num_tasks(self) -> int:
        return len(self.tasks)

    def __repr__(self) -> str:
        return f"CompactionPlan(read_version={self.read_version}, tasks=<{len(self.tasks)} compaction tasks>)"

    def json(self) -> str:
        return json.dumps({"tasks": [{"fragments": _fragments_json(t.fragments)} for t in self.tasks],
                           "read_version": self.read_version, "options": self.options})

    @staticmethod
    def from_json(json_str: str) -> CompactionPlan:
        data = _loads(json_str, "CompactionPlan")
        try:
            version, options = int(data["read_version"]), dict(data.get("options") or {})
            tasks = [CompactionTask(version, _fragments_from(t["fragments"]), options) for t in data["tasks"]]
        except (KeyError, TypeError) as exc:
            raise InvalidInputError(f"not a CompactionPlan: {exc}") from None
        return CompactionPlan(version, tasks, options)


class Compaction:
    """pylance's ``lance.optimize.Compaction``: plan, execute on workers, commit."""

    @staticmethod
    def plan(dataset: LanceDataset, options: Mapping[str, Any] | None = None) -> CompactionPlan:
        """The groups ``compact_files`` would rewrite, as tasks (nothing is written)."""
        resolved = _resolved_options(dataset, options)
        groups = within_budget(
            plan(dataset, resolved["target_rows_per_fragment"], resolved["materialize_deletions"],
                 resolved["materialize_deletions_threshold"], resolved["excluded_fragment_ids"] or ()),
            resolved["max_source_fragments"], resolved["max_source_rows"], resolved["max_source_bytes"])
        tasks = [CompactionTask(dataset.version, [f.metadata for f in group], resolved) for group in groups]
        return CompactionPlan(dataset.version, tasks, resolved)

    @staticmethod
    def execute(dataset: LanceDataset, options: Mapping[str, Any] | None = None) -> CompactionMetrics:
        """Plan, run every task here and commit (what ``compact_files`` does)."""
        compaction = Compaction.plan(dataset, options)
        return Compaction.commit(dataset, [task.execute(dataset) for task in compaction.tasks])

    @staticmethod
    def commit(dataset: LanceDataset, rewrites: Iterable[RewriteResult], options: Any = None) -> CompactionMetrics:
        """Commit the results of executed tasks as one ``Rewrite``; ``dataset`` moves to it.

        Raises
        ------
        InvalidInputError
            No results, or results planned on different versions.
        CommitConflictError
            A rewritten fragment changed since the plan (the new files are left for cleanup).
        """
        results = list(rewrites)
        if not results:
            raise InvalidInputError("there are no rewrites to commit", table=dataset.uri)
        versions = {r.read_version for r in results}
        if len(versions) != 1:
            raise InvalidInputError(f"the rewrites were planned on different versions {sorted(versions)}",
                                    table=dataset.uri)
        groups = [([fragment_to_proto(f) for f in r.original_fragments], [fragment_to_proto(f) for f in r.new_fragments])
                  for r in results]
        committed = commit_rewrites(dataset, groups, new_transaction(versions.pop()))
        dataset._replace_version(committed.version)
        return group_metrics(groups)


__all__ = ["Compaction", "CompactionPlan", "CompactionTask", "RewriteResult", "CompactionOptions", "CompactionMetrics"]
