"""``LanceScanner``: pylance's face of a scan of one table version.

The scan is planned once by :func:`~lance_format.dataset.scan.plan_scan` (a frozen
:class:`~lance_format.dataset.scan.ScanPlan`: projection, filter and late materialization,
ordering, limit and offset, fragments) and run by :class:`~lance_format.dataset.scan.ScanExecutor`
(see there for how batches stream and filters are late-materialized). This module adds
pylance's methods around them: statistics callbacks, ``head``, ``explain_plan`` and
``analyze_plan``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.arrow_interop import ArrowScannerBase
from lance_format.dataset.fragment import LanceFragment
from lance_format.dataset.scan.executor import ScanExecutor
from lance_format.dataset.scan.explain import explain
from lance_format.dataset.scan.plan import DEFAULT_BATCH_SIZE, PYLANCE_BATCH_SIZE, ScanPlan, plan_scan
from lance_format.dataset.scan_options import ColumnOrdering
from lance_format.dataset.scan_stats import ScanCounts, reporting
from lance_format.errors import InvalidInputError, UnsupportedFeatureError
from lance_format.io.counters import bytes_read_counter, iops_counter

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


class LanceScanner(ArrowScannerBase):
    """A planned scan of one table version (mirrors pylance's ``LanceScanner``; a
    ``pyarrow.dataset.Scanner``, see :mod:`lance_format.dataset.arrow_interop`).

    Made by :meth:`LanceDataset.scanner`, whose parameters it takes; :attr:`plan` is what it
    will do.

    Raises
    ------
    InvalidInputError
        An unknown column, an invalid filter, a negative limit or offset, or a dict of column
        expressions.
    """

    def __init__(
        self,
        dataset: LanceDataset,
        *,
        columns: list[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        batch_size: int | None = None,
        fragments: list[LanceFragment] | None = None,
        order_by: Iterable[ColumnOrdering | str] | None = None,
        strict_batch_size: bool = False,
        include_deleted_rows: bool = False,
        **options: Any,
    ) -> None:
        self._dataset = dataset
        self._stats_callback = options.pop("scan_stats_callback", None)
        if self._stats_callback is not None and not callable(self._stats_callback):
            raise InvalidInputError("scan_stats_callback must be callable", table=dataset.uri)
        if (options.get("nearest") is not None and fragments is not None
                and not (options.get("prefilter") is True and filter is not None)):
            # pylance's refusal, its words (a prefilter read from the files allows chosen fragments)
            raise InvalidInputError("Not supported: This operation is not supported for fragment scan",
                                    table=dataset.uri)
        self.plan: ScanPlan = plan_scan(
            dataset, columns=columns, filter=filter, limit=limit, offset=offset, with_row_id=with_row_id,
            with_row_address=with_row_address, batch_size=batch_size, fragments=fragments, order_by=order_by,
            strict_batch_size=strict_batch_size, include_deleted_rows=include_deleted_rows, options=options)
        self._counts = ScanCounts()

    def _executor(self) -> ScanExecutor:
        return ScanExecutor(self._dataset, self.plan, self._counts)

    @property
    def projected_schema(self) -> pa.Schema:
        """The schema of the scan's output: the requested columns, then any system columns
        (extension-typed columns with their extension types, see ``schema.extensions``)."""
        return self._executor().projected_schema

    def take_physical(self, fragment: LanceFragment, offsets: np.ndarray) -> pa.RecordBatch:
        """This scan's columns of ``fragment``'s rows at physical ``offsets``, in that order
        (``LanceDataset.take``; the filter, limit and offset do not apply)."""
        return self._executor().take(fragment, offsets)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Run the scan lazily, fragment by fragment.

        Returns
        -------
        Iterator of pa.RecordBatch
            Non-empty batches of :attr:`projected_schema`, in table order.

        Raises
        ------
        CorruptFileError
            A data, deletion or row-id file is malformed.
        """
        if self._stats_callback is None:
            return self._executor().batches()
        self._counts = ScanCounts()
        return reporting(self._executor().batches(), self._counts, self._stats_callback)

    def to_reader(self) -> pa.RecordBatchReader:
        """Run the scan lazily as an Arrow stream.

        Returns
        -------
        pa.RecordBatchReader
            A reader over :meth:`to_batches`.
        """
        return pa.RecordBatchReader.from_batches(self.projected_schema, self.to_batches())

    def to_table(self) -> pa.Table:
        """Run the scan and collect its rows.

        Returns
        -------
        pa.Table
            All rows, of :attr:`projected_schema`.

        Raises
        ------
        CorruptFileError
            A data, deletion or row-id file is malformed.
        """
        return pa.Table.from_batches(list(self.to_batches()), schema=self.projected_schema)

    def head(self, num_rows: int) -> pa.Table:
        """The scan's first ``num_rows`` rows; reading stops once they are in.

        Raises
        ------
        InvalidInputError
            ``num_rows`` is negative.
        """
        if num_rows < 0:
            raise InvalidInputError(f"num_rows must not be negative, got {num_rows}", table=self._dataset.uri)
        batches: list[pa.RecordBatch] = []
        remaining = num_rows
        for batch in self.to_batches() if remaining else ():
            batches.append(batch.slice(0, remaining))
            remaining -= min(remaining, batch.num_rows)
            if not remaining:
                break
        return pa.Table.from_batches(batches, schema=self.projected_schema)

    def to_pandas(self, **arrow_options: Any) -> Any:
        """Run the scan into a pandas DataFrame (``arrow_options`` go to ``pa.Table.to_pandas``)."""
        return self.to_table().to_pandas(**arrow_options)

    @property
    def dataset_schema(self) -> pa.Schema:
        """The schema of the whole table this scan reads from (before projection)."""
        return self._dataset.schema

    def explain_plan(self, verbose: bool = False) -> str:
        """A readable description of what this scan will do (this engine's plan, not DataFusion's).

        Each line is one step, outermost first: projection, limit/offset, ordering, filter, and
        the read of the fragments. The read line names its columns ``projection=[a, b]`` and
        carries ``num_fragments``, ``row_id``, ``row_addr`` and ``full_filter`` as pylance's
        ``LanceRead`` does. ``verbose`` adds the fragment ids and the output schema.
        """
        return explain(self.plan, verbose)

    def analyze_plan(self, count_rows: bool = False) -> str:
        """Run the scan and report what it did: :meth:`explain_plan` with the read line's
        metrics (pylance's names: ``output_rows`` after the filter, ``rows_scanned`` before it,
        ``fragments_scanned``, ``bytes_read``, ``iops``, ``requests``; reads made by other threads
        meanwhile count too), then a line of the whole scan's output rows, batches and time.
        ``count_rows`` runs a count instead of materializing the output batches."""
        started = time.perf_counter()
        counts = ScanCounts()
        executor = ScanExecutor(self._dataset, self.plan, counts)
        start_iops, start_bytes = iops_counter(), bytes_read_counter()
        if count_rows:
            output_rows, output_batches = executor.count(), 0
        else:
            output_rows = output_batches = 0
            for batch in executor.batches():
                output_rows += batch.num_rows
                output_batches += 1
        elapsed = time.perf_counter() - started
        iops = iops_counter() - start_iops
        read_metrics = (f"output_rows={counts.matched_rows}, output_batches={counts.matched_batches}, "
                        f"fragments_scanned={counts.fragments}, rows_scanned={counts.rows}, "
                        f"bytes_read={bytes_read_counter() - start_bytes}, iops={iops}, requests={iops}")
        metrics = (f"Metrics: elapsed={elapsed * 1000:.3f}ms, output_rows={output_rows}, "
                   f"output_batches={output_batches}, rows_after_filter={counts.matched_rows}, "
                   f"batches_after_filter={counts.matched_batches}, fragments={counts.fragments}")
        return explain(self.plan, False, read_metrics) + metrics + "\n"

    def count_rows(self) -> int:
        """The number of rows the scan returns.

        Without a filter, limit or offset the count comes from fragment metadata (no data read).

        Returns
        -------
        int
            The row count.

        Raises
        ------
        CorruptFileError
            A data or deletion file is malformed.
        """
        return self._executor().count()

    # pyarrow Scanner's interface, as pylance's LanceScanner has it
    @staticmethod
    def from_dataset(*args: Any, **kwargs: Any) -> LanceScanner:
        """Not available, as in pylance: use ``LanceDataset.scanner``."""
        raise UnsupportedFeatureError("from dataset")

    @staticmethod
    def from_fragment(*args: Any, **kwargs: Any) -> LanceScanner:
        """Not available, as in pylance: use ``LanceFragment.scanner``."""
        raise UnsupportedFeatureError("from fragment")

    @staticmethod
    def from_batches(*args: Any, **kwargs: Any) -> LanceScanner:
        """Not available, as in pylance: a Lance scan reads a dataset."""
        raise UnsupportedFeatureError("from batches")

    def scan_batches(self) -> list[pa.RecordBatch]:
        """All the scan's record batches, as a list (what pylance's ``scan_batches`` returns)."""
        return list(self.to_batches())

    def take(self, indices: Any) -> pa.Table:
        """Not available, as in pylance: use ``LanceDataset.take``."""
        raise UnsupportedFeatureError("take")


__all__ = ["LanceScanner", "DEFAULT_BATCH_SIZE", "PYLANCE_BATCH_SIZE"]
