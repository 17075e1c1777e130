"""A filtered scan's index step: candidate rows of the fragments scalar indices cover.

From the filter's index-answerable shape (:mod:`lance_format.dataset.sql.index_terms`), each
term on a column with a known scalar index is bound to that index (the first by name); AND keeps
the terms it can answer, OR and NOT need all of theirs. The fragments the plan covers are
those every bound index covers (and the scan reads). For them the indices' answers give
candidate row addresses: a superset of the matching rows (NOT of a term is its complement
within the covered fragments, nulls included). This is the ``IndexStep`` of a ``ScanPlan``: the
executor takes just the live candidate rows and re-applies the whole filter, so the result is
always exactly a full scan's; uncovered fragments are scanned as without indices. Index types this engine does not
know are never bound (their fragments are scanned).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lance_format.dataset.index_describe import catalog_of, field_paths
from lance_format.dataset.sql.index_terms import OPAQUE, And, Leaf, Not, Or, Term, index_terms
from lance_format.index.catalog import IndexCatalog, NamedIndex, RowIdLookup, display_type, row_id_lookup
from lance_format.index.scalar.base import difference_sorted, intersect_sorted, sorted_unique
from lance_format.index.scalar.queries import Equals, IsIn
from lance_format.index.scalar.queries import describe as describe_query

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.fragment import LanceFragment

_EMPTY = np.zeros(0, dtype=np.uint64)
# above this fraction of a fragment's rows being candidates, the fragment is scanned instead:
# taking scattered rows decodes most pages anyway, and the late-materialized scan is cheaper
INDEX_DENSE = 0.05


@dataclass(frozen=True)
class _Bound:
    leaf: Leaf
    index: NamedIndex


_Plan = _Bound | And | Or | Not


@dataclass
class _Candidates:
    addresses: np.ndarray  # sorted, unique, within the covered fragments
    exact: bool


def _bind(term: Term, indices: dict[str, NamedIndex]) -> _Plan | None:
    """The term with its leaves bound to indices; None where it cannot be answered."""
    if isinstance(term, Leaf):
        found = indices.get(term.column)
        return _Bound(term, found) if found is not None else None
    if isinstance(term, And):
        kept = [b for b in (_bind(c, indices) for c in term.children) if b is not None]
        if not kept:
            return None
        return kept[0] if len(kept) == 1 else And(tuple(kept))  # type: ignore[arg-type]
    if isinstance(term, Or):
        bound = [_bind(c, indices) for c in term.children]
        return None if any(b is None for b in bound) else Or(tuple(bound))  # type: ignore[arg-type]
    if isinstance(term, Not):
        inner = _bind(term.child, indices)
        return None if inner is None else Not(inner)  # type: ignore[arg-type]
    return None


def _leaves(plan: _Plan) -> Iterable[_Bound]:
    if isinstance(plan, _Bound):
        yield plan
    elif isinstance(plan, Not):
        yield from _leaves(plan.child)  # type: ignore[arg-type]
    else:
        for child in plan.children:
            yield from _leaves(child)  # type: ignore[arg-type]


def _text(plan: _Plan) -> str:
    """The plan as pylance's ``explain_plan`` prints its ``ScalarIndexQuery``."""
    if isinstance(plan, _Bound):
        label = f"@{plan.index.name}({display_type(plan.index.type_url)})"
        query = plan.leaf.query
        if isinstance(query, IsIn) and len(query.values):  # pylance: an OR of equalities
            text = ""
            for value in query.values:
                one = f"[{describe_query(Equals(value), plan.leaf.column)}]{label}"
                text = one if not text else f"OR({text},{one})"
            return text
        return f"[{describe_query(query, plan.leaf.column).replace(' AND ', ' && ')}]{label}"
    if isinstance(plan, Not):
        return f"NOT({_text(plan.child)})"  # type: ignore[arg-type]
    name = "AND" if isinstance(plan, And) else "OR"
    parts = [_text(c) for c in plan.children]  # type: ignore[arg-type]
    text = parts[0]
    for part in parts[1:]:
        text = f"{name}({text},{part})"
    return text


class IndexScanPlan:
    """The index step of one filtered scan (see the module docstring)."""

    def __init__(self, ds: LanceDataset, catalog: IndexCatalog, plan: _Plan, covered: set[int],
                 fragments: list[LanceFragment]) -> None:
        self._ds = ds
        self._catalog = catalog
        self._plan = plan
        self.covered = covered
        self._fragments = {f.fragment_id: f for f in fragments if f.fragment_id in covered}
        self._lookup: RowIdLookup | None = None
        self._by_fragment: dict[int, np.ndarray] | None = None
        self._failed = False
        self._lock = threading.Lock()  # the indices are searched once, by whichever reader asks first

    @staticmethod
    def build(ds: LanceDataset, filter_text: str, schema: pa.Schema,
              fragments: list[LanceFragment]) -> IndexScanPlan | None:
        """The index step of a scan of ``fragments`` with ``filter_text``, or None when no index helps."""
        section = ds.manifest_file.index_section
        if section is None or not len(section.indices):
            return None
        catalog = catalog_of(ds)
        paths = field_paths(ds)
        by_column: dict[str, NamedIndex] = {}
        scanned = BitMap(f.fragment_id for f in fragments)
        for field_id, path in paths.items():
            found = catalog.on_field(field_id)
            if found:
                # the index covering most of the scanned fragments (after a compaction an old
                # ZONEMAP may list more fragments, none of them live any more)
                by_column[path] = max(found, key=lambda i: len(i.fragment_ids & scanned))
        if not by_column:
            return None
        term = index_terms(filter_text, schema)
        if term is OPAQUE:
            return None
        plan = _bind(term, by_column)
        if plan is None:
            return None
        covered = {f.fragment_id for f in fragments}
        for bound in _leaves(plan):
            covered &= set(bound.index.fragment_ids)
        if not covered:
            return None
        return IndexScanPlan(ds, catalog, plan, covered, fragments)

    def describe(self) -> str:
        return f"ScalarIndexQuery: query={_text(self._plan)}"

    # -- evaluation ------------------------------------------------------------------------------

    def _covered_array(self) -> np.ndarray:
        return np.asarray(sorted(self.covered), dtype=np.uint64)

    def _within(self, addresses: np.ndarray) -> np.ndarray:
        keep = np.isin(addresses >> np.uint64(32), self._covered_array())
        return addresses if keep.all() else addresses[keep]

    def _all_rows(self) -> np.ndarray:
        pieces = [(np.uint64(fid) << np.uint64(32)) | np.arange(f.physical_rows, dtype=np.uint64)
                  for fid, f in sorted(self._fragments.items())]
        return np.concatenate(pieces) if pieces else _EMPTY

    def _to_addresses(self, ids: np.ndarray, row_key: str) -> np.ndarray:
        if row_key != "_rowid" or not self._ds.has_stable_row_ids:
            return ids
        if self._lookup is None:
            # the manifest's path and commit time name the version (a table recreated at the same
            # URI reuses paths, never times)
            stamp = self._ds.manifest.timestamp
            version_key = f"{self._ds.manifest_path}@{stamp.seconds}.{stamp.nanos}"
            self._lookup = row_id_lookup(self._ds.object_store, version_key,
                                         [f.proto for f in self._fragments.values()])
        return self._lookup.addresses(ids)

    def _leaf(self, bound: _Bound) -> _Candidates | None:
        index = bound.index
        assert index.index_type is not None  # only known types are bound
        pieces = []
        exact = True
        for segment in index.segments:
            if not (set(segment.fragment_ids) & self.covered):
                continue
            result = self._catalog.load(segment).search(bound.leaf.query)
            if result is None:
                return None
            exact &= result.exact
            held = index.index_type.entries_hold(int(segment.meta.index_version))
            pieces.append(self._to_addresses(result.rows, held))
        merged = sorted_unique(np.concatenate(pieces)) if pieces else _EMPTY
        return _Candidates(self._within(merged), exact)

    def _evaluate(self, plan: _Plan) -> _Candidates | None:
        if isinstance(plan, _Bound):
            return self._leaf(plan)
        if isinstance(plan, Not):
            inner = self._evaluate(plan.child)  # type: ignore[arg-type]
            if inner is None or not inner.exact:
                return None  # the complement of a superset is not a superset
            return _Candidates(difference_sorted(self._all_rows(), inner.addresses), False)
        results = [self._evaluate(c) for c in plan.children]  # type: ignore[arg-type]
        if isinstance(plan, And):
            known = [r for r in results if r is not None]
            if not known:
                return None
            addresses = known[0].addresses
            for r in known[1:]:
                addresses = intersect_sorted(addresses, r.addresses)
            return _Candidates(addresses, len(known) == len(results) and all(r.exact for r in known))
        if any(r is None for r in results):
            return None
        union = sorted_unique(np.concatenate([r.addresses for r in results if r is not None]))
        return _Candidates(union, all(r is not None and r.exact for r in results))

    def _split(self) -> dict[int, np.ndarray] | None:
        if self._by_fragment is None and not self._failed:
            found = self._evaluate(self._plan)
            if found is None:
                self._failed = True
                return None
            addresses = found.addresses
            fragment_of = (addresses >> np.uint64(32)).astype(np.int64)
            bounds = np.flatnonzero(np.diff(fragment_of)) + 1
            split: dict[int, np.ndarray] = {fid: _EMPTY for fid in self._fragments}
            for run in np.split(np.arange(len(addresses)), bounds):
                if len(run):
                    fid = int(fragment_of[run[0]])
                    split[fid] = (addresses[run] & np.uint64(0xFFFFFFFF))
            self._by_fragment = split
        return self._by_fragment

    def candidates(self, fragment: LanceFragment) -> np.ndarray | None:
        """The ``IndexStep`` of a ``ScanPlan``: sorted physical offsets of ``fragment``'s
        candidate rows (the executor drops deleted ones and applies the filter), or None when
        the fragment is not covered, the indices could not answer, or so many rows are
        candidates that scanning the fragment reads less than taking them."""
        if fragment.fragment_id not in self.covered:
            return None
        with self._lock:
            split = self._split()
        if split is None:
            return None
        offsets = split.get(fragment.fragment_id, _EMPTY)
        if len(offsets) > INDEX_DENSE * fragment.physical_rows:
            return None
        return offsets
