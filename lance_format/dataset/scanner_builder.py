"""``ScannerBuilder``: pylance's fluent way to configure a scan, ending in ``to_scanner()``.

Each method records one ``LanceDataset.scanner`` option under the name ``scanner`` takes, so the
scan is checked and planned exactly as ``ds.scanner(...)`` with the same options would be.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from lance_format.errors import InvalidInputError, UnsupportedFeatureError
from lance_format.index.scalar.fts_query import FullTextQuery

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.scanner import LanceScanner


class ScannerBuilder:
    """Scan options set one call at a time (pylance's ``lance.dataset.ScannerBuilder``)."""

    def __init__(self, ds: LanceDataset) -> None:
        self.ds = ds
        self._options: dict[str, Any] = {}

    def _set(self, name: str, value: Any) -> ScannerBuilder:
        self._options[name] = value
        return self

    def apply_defaults(self, default_opts: dict[str, Any]) -> ScannerBuilder:
        """Call the method named by each key with its value (keyword arguments when a dict)."""
        for key, value in default_opts.items():
            setter = getattr(self, key, None) if not key.startswith("_") else None
            if setter is None or key in ("apply_defaults", "to_scanner", "ds"):
                raise InvalidInputError(f"Unknown option {key}", table=self.ds.uri)
            if isinstance(value, dict):
                setter(**value)
            else:
                setter(value)
        return self

    def batch_size(self, batch_size: int) -> ScannerBuilder:
        return self._set("batch_size", batch_size)

    def batch_size_bytes(self, batch_size_bytes: int) -> ScannerBuilder:
        return self._set("batch_size_bytes", batch_size_bytes)

    def io_buffer_size(self, io_buffer_size: int) -> ScannerBuilder:
        return self._set("io_buffer_size", io_buffer_size)

    def batch_readahead(self, nbatches: int | None = None) -> ScannerBuilder:
        return self._set("batch_readahead", nbatches)

    def fragment_readahead(self, nfragments: int | None = None) -> ScannerBuilder:
        return self._set("fragment_readahead", nfragments)

    def blob_handling(self, blob_handling: str | None) -> ScannerBuilder:
        return self._set("blob_handling", blob_handling)

    def columns(self, cols: list[str] | dict[str, str] | None = None) -> ScannerBuilder:
        return self._set("columns", cols)

    def disable_scoring_autoprojection(self, disable: bool = True) -> ScannerBuilder:
        return self._set("disable_scoring_autoprojection", disable)

    def fast_search(self, flag: bool) -> ScannerBuilder:
        return self._set("fast_search", flag)

    def filter(self, filter: Any) -> ScannerBuilder:
        """Set the expression filter (SQL or a pyarrow expression), the search filter (a
        full-text query object), or both (``{"expr_filter": ..., "search_filter": ...}``); as in
        pylance, each call replaces only the kind(s) it gives."""
        current = self._options.get("filter")
        if isinstance(current, Mapping):
            expr, search = current.get("expr_filter"), current.get("search_filter")
        else:
            expr, search = (None, current) if isinstance(current, FullTextQuery) else (current, None)
        if isinstance(filter, FullTextQuery):
            search = filter
        elif isinstance(filter, Mapping):
            expr = filter["expr_filter"] if filter.get("expr_filter") is not None else expr
            search = filter["search_filter"] if filter.get("search_filter") is not None else search
        else:
            expr = filter
        return self._set("filter", expr if search is None else {"expr_filter": expr, "search_filter": search})

    def full_text_search(self, query: Any, columns: list[str] | None = None) -> ScannerBuilder:
        return self._set("full_text_query", {"query": query, "columns": columns})

    def include_deleted_rows(self, flag: bool) -> ScannerBuilder:
        return self._set("include_deleted_rows", flag)

    def late_materialization(self, late_materialization: bool | list[str]) -> ScannerBuilder:
        return self._set("late_materialization", late_materialization)

    def limit(self, n: int | None = None) -> ScannerBuilder:
        return self._set("limit", n)

    def offset(self, n: int | None = None) -> ScannerBuilder:
        return self._set("offset", n)

    def minhash_search(self, query: Any) -> ScannerBuilder:
        raise UnsupportedFeatureError("minhash search is not supported by this engine (no indices)",
                                      table=self.ds.uri)

    def nearest(self, column: str, q: Any, k: int | None = None, metric: str | None = None,
                nprobes: int | None = None, minimum_nprobes: int | None = None,
                maximum_nprobes: int | None = None, refine_factor: int | None = None, use_index: bool = True,
                ef: int | None = None, query_parallelism: int | None = None, approx_mode: str = "normal",
                distance_range: Any = None, search_effort: float | None = None) -> ScannerBuilder:
        # recorded as pylance's ``nearest`` dict (an exact flat search, see dataset.scan.search)
        return self._set("nearest", {
            "column": column, "q": q, "k": k, "metric": metric, "nprobes": nprobes, "minimum_nprobes": minimum_nprobes,
            "maximum_nprobes": maximum_nprobes, "refine_factor": refine_factor, "use_index": use_index, "ef": ef,
            "query_parallelism": query_parallelism, "approx_mode": approx_mode, "distance_range": distance_range,
            "search_effort": search_effort})

    def order_by(self, orderings: Any) -> ScannerBuilder:
        return self._set("order_by", orderings)

    def prefilter(self, prefilter: bool) -> ScannerBuilder:
        return self._set("prefilter", prefilter)

    def row_addr_prefilter(self, allowlist: bytes | None = None,
                           blocklist: bytes | None = None) -> ScannerBuilder:
        self._set("row_addr_allowlist", allowlist)
        return self._set("row_addr_blocklist", blocklist)

    def scan_in_order(self, scan_in_order: bool = True) -> ScannerBuilder:
        return self._set("scan_in_order", scan_in_order)

    def scan_stats_callback(self, callback: Callable[[Any], None]) -> ScannerBuilder:
        return self._set("scan_stats_callback", callback)

    def strict_batch_size(self, strict_batch_size: bool = False) -> ScannerBuilder:
        return self._set("strict_batch_size", strict_batch_size)

    def substrait_aggregate(self, aggregate: bytes) -> ScannerBuilder:
        raise UnsupportedFeatureError("substrait aggregates are not supported by this engine", table=self.ds.uri)

    def use_scalar_index(self, use_scalar_index: bool = True) -> ScannerBuilder:
        return self._set("use_scalar_index", use_scalar_index)

    def use_stats(self, use_stats: bool = True) -> ScannerBuilder:
        return self._set("use_stats", use_stats)

    def with_fragments(self, fragments: Iterable[Any] | None) -> ScannerBuilder:
        return self._set("fragments", None if fragments is None else list(fragments))

    def with_index_segments(self, index_segments: Iterable[Any] | None) -> ScannerBuilder:
        return self._set("index_segments", None if index_segments is None else list(index_segments))

    def with_row_address(self, with_row_address: bool = True) -> ScannerBuilder:
        return self._set("with_row_address", with_row_address)

    def with_row_id(self, with_row_id: bool = True) -> ScannerBuilder:
        return self._set("with_row_id", with_row_id)

    def to_scanner(self) -> LanceScanner:
        """The scanner of the recorded options (checked as ``LanceDataset.scanner`` checks them)."""
        return self.ds.scanner(**self._options)
