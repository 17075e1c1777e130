"""The scalar index plug-in interface and its registry.

An index type (:class:`ScalarIndexType`) trains a segment from the indexed column's values and
row identifiers into an :class:`~lance_format.index.store.IndexStore`, and loads a trained
segment back as a :class:`ScalarIndex`, which answers :mod:`.queries` with a :class:`SearchResult`.
Types register under pylance's type name (``"BTREE"``) and the ``index_details`` type URL
(``/lance.table.BTreeIndexDetails``); a segment whose type URL is not registered is unknown and
its fragments are scanned.

Training input: batches with columns ``value`` (the indexed column, its arrow type) and
``row_key`` (``"_rowid"`` or ``"_rowaddr"``, uint64, see :attr:`ScalarIndexType.row_key`), in
row-address order (fragment by fragment, deleted rows left out). A type sorts as it needs to.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import pyarrow as pa

from lance_format.errors import InvalidInputError
from lance_format.index.scalar.queries import ScalarQuery
from lance_format.index.store import IndexStore

RowKey = Literal["_rowid", "_rowaddr"]
VALUE_COLUMN = "value"

_EMPTY = np.zeros(0, dtype=np.uint64)


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``values`` sorted without duplicates (a sort and a mask: numpy's ``unique`` hashes
    integers, which is several times slower on large id sets)."""
    if len(values) < 2:
        return values.copy()
    ordered = np.sort(values)
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered if keep.all() else ordered[keep]


def intersect_sorted(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The common values of two sorted duplicate-free arrays (binary search of the smaller in the larger)."""
    if len(a) > len(b):
        a, b = b, a
    if not len(a):
        return a
    at = np.minimum(np.searchsorted(b, a), len(b) - 1)
    return a[b[at] == a]


def difference_sorted(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The values of sorted ``a`` not in sorted ``b``."""
    if not len(a) or not len(b):
        return a
    at = np.minimum(np.searchsorted(b, a), len(b) - 1)
    return a[b[at] != a]


@dataclass(frozen=True)
class SearchResult:
    """What an index answered: candidate row identifiers (a sorted, duplicate-free uint64 array
    of the index's :attr:`ScalarIndexType.row_key`) and whether they are *exactly* the rows
    that match (``exact``) or a superset of them (the caller re-checks the filter)."""

    rows: np.ndarray = field(default_factory=lambda: _EMPTY)
    exact: bool = True

    @staticmethod
    def of(rows: np.ndarray | Iterable[int], exact: bool = True) -> SearchResult:
        """A result from unsorted identifiers, possibly with duplicates."""
        return SearchResult(sorted_unique(np.asarray(rows, dtype=np.uint64)), exact)


class ScalarIndex(abc.ABC):
    """One loaded index segment."""

    #: the type this segment is (its :class:`ScalarIndexType`)
    index_type: ClassVar[type[ScalarIndexType]]

    @abc.abstractmethod
    def search(self, query: ScalarQuery) -> SearchResult | None:
        """The rows matching ``query``; ``None`` when this index cannot answer it."""

    @abc.abstractmethod
    def statistics(self) -> dict[str, Any]:
        """The segment's entry in pylance's ``index_statistics()["indices"]`` (``{"num_bitmaps": 4}``)."""

    def prewarm(self) -> None:
        """Load whatever the index reads lazily (pylance's ``prewarm_index``)."""
        return None


class ScalarIndexType(abc.ABC):
    """An index type: its names, how it trains a segment and how it loads one."""

    #: pylance's type name, as ``create_scalar_index(index_type=...)`` takes it: ``"BTREE"``
    name: ClassVar[str]
    #: the name ``list_indices()`` / ``index_statistics()`` show: ``"BTree"``
    display_name: ClassVar[str]
    #: the ``index_details`` Any's type URL: ``"/lance.table.BTreeIndexDetails"``
    type_url: ClassVar[str]
    #: ``IndexMetadata.index_version`` pylance 14.0.2 writes for this type
    index_version: ClassVar[int] = 0
    #: the row identifier a new segment's entries hold (see :mod:`lance_format.index`); what an
    #: existing segment's hold is :meth:`entries_hold` of its ``index_version``
    row_key: ClassVar[RowKey] = "_rowid"
    #: other spellings ``create_scalar_index`` accepts (``"BITMAP"`` has none)
    aliases: ClassVar[tuple[str, ...]] = ()
    #: whether a scan's filters may use it (INVERTED answers full-text searches only)
    answers_filters: ClassVar[bool] = True

    @classmethod
    def version_for(cls, stable_row_ids: bool) -> int:
        """The ``index_version`` a new segment gets in a table with / without stable row ids."""
        return cls.index_version

    @classmethod
    def entries_hold(cls, index_version: int) -> RowKey:
        """What the entries of a segment of ``index_version`` are (pylance 14.0.2 reads a BTREE
        of version 0 as holding ``_rowid`` and of version 1 as holding row addresses)."""
        return cls.row_key

    @classmethod
    @abc.abstractmethod
    def supports(cls, data_type: pa.DataType) -> bool:
        """Whether a column of ``data_type`` can be indexed by this type."""

    @classmethod
    def details(cls, params: Mapping[str, Any]) -> bytes:
        """The serialized ``index_details`` message (empty for the types whose message is empty)."""
        return b""

    @classmethod
    def check_params(cls, params: Mapping[str, Any]) -> None:
        """Refuse parameters this type does not take (pylance ignores some; so do we, by default)."""
        return None

    @classmethod
    @abc.abstractmethod
    def train(cls, store: IndexStore, batches: Iterable[pa.RecordBatch], value_type: pa.DataType,
              params: Mapping[str, Any]) -> None:
        """Write a segment's files into ``store`` from ``batches`` (see the module docstring)."""

    @classmethod
    @abc.abstractmethod
    def load(cls, store: IndexStore, details: bytes) -> ScalarIndex:
        """Open a trained segment (reading as little as it can up front)."""


# -- registry --------------------------------------------------------------------------------------

_BY_NAME: dict[str, type[ScalarIndexType]] = {}
_BY_URL: dict[str, type[ScalarIndexType]] = {}


def register(index_type: type[ScalarIndexType]) -> type[ScalarIndexType]:
    """Register an index type (usable as a class decorator)."""
    for name in (index_type.name, *index_type.aliases):
        _BY_NAME[name.upper()] = index_type
    _BY_URL[index_type.type_url] = index_type
    return index_type


def _load_builtin() -> None:
    # the built-in types register themselves on import
    from lance_format.index.scalar import types  # noqa: F401


def by_name(name: str) -> type[ScalarIndexType] | None:
    """The type ``create_scalar_index`` names (case-insensitive), or None."""
    _load_builtin()
    return _BY_NAME.get(str(name).upper())


def by_type_url(type_url: str) -> type[ScalarIndexType] | None:
    """The type of a segment's ``index_details`` type URL, or None (an unknown type)."""
    _load_builtin()
    return _BY_URL.get(type_url)


def require(name: str) -> type[ScalarIndexType]:
    """The type ``name``, or pylance's error for an unknown one."""
    found = by_name(name)
    if found is None:
        raise InvalidInputError(f"Unsupported index type: {name!r} (known scalar types: "
                                f"{', '.join(sorted(t.name for t in set(_BY_NAME.values())))})")
    return found


def registered() -> list[type[ScalarIndexType]]:
    _load_builtin()
    return sorted(set(_BY_NAME.values()), key=lambda t: t.name)
