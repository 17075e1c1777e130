"""I/O counters: process-wide reads (pylance's ``lance.iops_counter()`` /
``lance.bytes_read_counter()``) and one store's reads and writes (``LanceDataset.io_stats_*``).

Every read this engine makes of a table's files counts: a whole-object read (manifests, deletion
files, transactions) is one operation, and each byte range read from a data file is one (also on
local disks, where ranges are sliced from a memory map); bytes are the lengths read. The
process-wide counters only grow; compare two readings to measure a piece of work.

Each :class:`~lance_format.io.object_store.ObjectStore` also keeps an :class:`IOCounters` of its
own, as pylance's object store does: the reads above plus its writes (a whole-object write is one
operation, a data file written as a stream is one, a deleted file is one of no bytes), read back as :class:`IOStats` and reset by
:meth:`IOCounters.take`. Datasets opened on the same store (``checkout_version``, the dataset a
write returns) share it; opening a URI again gives a fresh one.
"""

from __future__ import annotations

import threading

_LOCK = threading.Lock()
_IOPS = 0
_BYTES = 0


class IOStats:
    """I/O operations and bytes of one store (pylance's ``IOStats``: read-only attributes)."""

    __slots__ = ("_read_iops", "_read_bytes", "_write_iops", "_written_bytes")

    def __init__(self, read_iops: int, read_bytes: int, write_iops: int, written_bytes: int) -> None:
        self._read_iops, self._read_bytes = read_iops, read_bytes
        self._write_iops, self._written_bytes = write_iops, written_bytes

    @property
    def read_iops(self) -> int:
        """Read operations."""
        return self._read_iops

    @property
    def read_bytes(self) -> int:
        """Bytes read."""
        return self._read_bytes

    @property
    def write_iops(self) -> int:
        """Write operations."""
        return self._write_iops

    @property
    def written_bytes(self) -> int:
        """Bytes written."""
        return self._written_bytes

    def __repr__(self) -> str:
        # pylance's text, `write_bytes` included
        return (f"IOStats(read_iops={self._read_iops}, read_bytes={self._read_bytes}, "
                f"write_iops={self._write_iops}, write_bytes={self._written_bytes})")


class IOCounters:
    """Thread-safe running totals of one store's reads and writes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read_iops = self._read_bytes = self._write_iops = self._written_bytes = 0

    def count_read(self, nbytes: int, operations: int = 1) -> None:
        with self._lock:
            self._read_iops += operations
            self._read_bytes += nbytes

    def count_write(self, nbytes: int, operations: int = 1) -> None:
        with self._lock:
            self._write_iops += operations
            self._written_bytes += nbytes

    def snapshot(self) -> IOStats:
        """The totals since the counters were made or last taken."""
        with self._lock:
            return IOStats(self._read_iops, self._read_bytes, self._write_iops, self._written_bytes)

    def take(self) -> IOStats:
        """The totals, and start again from zero."""
        with self._lock:
            stats = IOStats(self._read_iops, self._read_bytes, self._write_iops, self._written_bytes)
            self._read_iops = self._read_bytes = self._write_iops = self._written_bytes = 0
        return stats


def count_reads(nbytes: int, operations: int = 1, store: IOCounters | None = None) -> None:
    """Record ``operations`` reads of ``nbytes`` bytes in total (also on ``store``'s counters)."""
    global _IOPS, _BYTES
    with _LOCK:
        _IOPS += operations
        _BYTES += nbytes
    if store is not None:
        store.count_read(nbytes, operations)


def iops_counter() -> int:
    """Read operations made so far by this process."""
    return _IOPS


def bytes_read_counter() -> int:
    """Bytes read so far by this process."""
    return _BYTES


__all__ = ["IOCounters", "IOStats", "count_reads", "iops_counter", "bytes_read_counter"]
