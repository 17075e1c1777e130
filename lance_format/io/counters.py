"""Process-wide read counters (pylance's ``lance.iops_counter()`` / ``lance.bytes_read_counter()``).

Every read this engine makes of a table's files counts: a whole-object read (manifests, deletion
files, transactions) is one operation, and each byte range read from a data file is one (also on
local disks, where ranges are sliced from a memory map); bytes are the lengths read. Both only
grow; compare two readings to measure a piece of work.
"""

from __future__ import annotations

import threading

_LOCK = threading.Lock()
_IOPS = 0
_BYTES = 0


def count_reads(nbytes: int, operations: int = 1) -> None:
    """Record ``operations`` reads of ``nbytes`` bytes in total."""
    global _IOPS, _BYTES
    with _LOCK:
        _IOPS += operations
        _BYTES += nbytes


def iops_counter() -> int:
    """Read operations made so far by this process."""
    return _IOPS


def bytes_read_counter() -> int:
    """Bytes read so far by this process."""
    return _BYTES


__all__ = ["count_reads", "iops_counter", "bytes_read_counter"]
