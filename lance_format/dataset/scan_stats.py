"""pylance's ``ScanStatistics`` and ``scan_stats_callback``: what a scan read, reported once it
has finished (or was abandoned).

``iops``, ``requests`` and ``bytes_read`` are the growth of the process-wide read counters
(:mod:`lance_format.io.counters`) during the scan, so reads other threads make meanwhile count
too; ``all_counts`` has pylance's ``fragments_scanned``, ``ranges_scanned`` (one per fragment
read here) and ``rows_scanned`` (rows read before the filter); ``all_times`` the scan's wall time
in nanoseconds. This engine loads no indices: those counts are 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from lance_format.io.counters import bytes_read_counter, iops_counter


@dataclass
class ScanStatistics:
    """Statistics about the scan (pylance's ``lance.ScanStatistics``)."""

    iops: int = 0
    requests: int = 0
    bytes_read: int = 0
    indices_loaded: int = 0
    parts_loaded: int = 0
    index_comparisons: int = 0
    index_cache_hits: int = 0
    index_cache_misses: int = 0
    all_counts: dict[str, int] = field(default_factory=dict)
    all_times: dict[str, int] = field(default_factory=dict)


class ScanCounts:
    """What one run of a scan has read so far (filled in by the scanner)."""

    def __init__(self) -> None:
        self.fragments = 0  # fragments (or row ranges) whose reading began
        self.rows = 0  # rows read before the filter
        self.matched_rows = 0  # rows after the filter (before ordering, offset and limit)
        self.matched_batches = 0


def reporting(batches: Iterator[pa.RecordBatch], counts: ScanCounts,
              callback: Callable[[ScanStatistics], None]) -> Iterator[pa.RecordBatch]:
    """``batches``, then ``callback`` with the scan's statistics (also when the consumer stops early)."""
    start_iops, start_bytes, start_time = iops_counter(), bytes_read_counter(), time.perf_counter_ns()
    try:
        yield from batches
    finally:
        iops = iops_counter() - start_iops
        callback(ScanStatistics(
            iops=iops, requests=iops, bytes_read=bytes_read_counter() - start_bytes,
            all_counts={"ranges_scanned": counts.fragments, "fragments_scanned": counts.fragments,
                        "rows_scanned": counts.rows},
            all_times={"scan_time": time.perf_counter_ns() - start_time}))


__all__ = ["ScanStatistics", "ScanCounts", "reporting"]
