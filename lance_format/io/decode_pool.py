"""The CPU thread pool that decodes a scan's columns and batches side by side.

Decoding spends its time in numpy, pyarrow and the numba kernels (compiled ``nogil``), which all
release the GIL, so threads overlap on several cores. The pool has ``LANCE_CPU_THREADS`` threads
(pylance's variable for its CPU pool), else ``os.cpu_count()``; ``LANCE_CPU_THREADS=1`` decodes
serially, and so does any code inside :func:`serial_decoding` (for debugging: results are the
same either way). The pool is made on first use, and again in a forked child.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

CPU_THREADS_ENV = "LANCE_CPU_THREADS"

_serial: ContextVar[bool] = ContextVar("lance_format_serial_decoding", default=False)
_pool: ThreadPoolExecutor | None = None
_pool_key: tuple[int, int] = (0, 0)  # (pid, size) the pool was made for
_pool_lock = threading.Lock()
_worker = threading.local()  # .active is True in the pool's own threads


def cpu_threads() -> int:
    """Decode threads: ``LANCE_CPU_THREADS`` when set to a positive integer, else the core count."""
    value = os.environ.get(CPU_THREADS_ENV, "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    return os.cpu_count() or 1


@contextmanager
def serial_decoding() -> Iterator[None]:
    """Decode on the calling thread only inside this block (scans started inside it too)."""
    token = _serial.set(True)
    try:
        yield
    finally:
        _serial.reset(token)


def _mark_worker() -> None:
    _worker.active = True


def decode_pool() -> ThreadPoolExecutor | None:
    """The shared decode pool, or None where work must stay on this thread: one thread asked
    for, :func:`serial_decoding`, or this thread is one of the pool's (waiting there on other
    tasks of the pool could leave none to run them)."""
    global _pool, _pool_key
    if _serial.get() or getattr(_worker, "active", False):
        return None
    size = cpu_threads()
    if size <= 1:
        return None
    key = (os.getpid(), size)
    with _pool_lock:
        if _pool is None or _pool_key != key:
            _pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="lance-decode", initializer=_mark_worker)
            _pool_key = key
        return _pool


def run_all(tasks: list[Callable[[], T]]) -> list[T]:
    """Every task's result, in order: side by side in the decode pool (this thread runs the
    first), or one after another when there is no pool.

    Raises the exception of the first failing task (in task order), unchanged, once every task
    has stopped: nothing keeps working on the caller's objects after the call.
    """
    pool = decode_pool() if len(tasks) > 1 else None
    if pool is None:
        return [task() for task in tasks]
    futures: list[Future[T]] = [pool.submit(copy_context().run, task) for task in tasks[1:]]
    try:
        first = tasks[0]()
    except BaseException:
        for future in futures:
            future.cancel()
        for future in futures:
            if not future.cancelled():
                future.exception()  # wait; its own error is secondary to ours
        raise
    results = [first]
    failure: BaseException | None = None
    for future in futures:
        try:
            results.append(future.result())
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after the rest stopped
            if failure is None:
                failure = exc
                for later in futures:
                    later.cancel()
    if failure is not None:
        raise failure
    return results


def map_ordered(work: Callable[[T], R], items: Iterable[T], depth: int, *, ordered: bool = True,
                group: Callable[[T], object] | None = None, max_groups: int = 0) -> Iterator[R]:
    """``work(item)`` for each of ``items``, up to ``depth`` of them running at once on the decode
    pool, yielded in the items' order (or, with ``ordered=False``, as they finish).

    ``items`` is consumed lazily, ``depth`` items ahead of the consumer at most (memory: ``depth``
    results waiting plus the one consumed). An exception of ``work`` reaches the consumer
    unchanged, in the failing item's place (at once when unordered). Closing the iterator early
    cancels the work not started and waits for the work running, so no task outlives the scan.
    Runs inline, one item at a time, when decoding is serial or ``depth`` < 2.
    With ``group`` and ``max_groups`` > 0, items of at most ``max_groups`` groups (e.g. the
    fragments of a scan) run or wait at once: an item of a new group waits for room.
    """
    pool = decode_pool() if depth > 1 else None
    if pool is None:
        for item in items:
            yield work(item)
        return
    running: deque[Future[R]] = deque()
    groups: dict[Future[R], object] = {}  # the group of each running item (with max_groups)
    source = iter(items)
    context = copy_context()
    held: list[T] = []  # an item pulled but waiting for room for its group
    try:
        while True:
            while len(running) < depth:
                if not held:
                    try:
                        held.append(next(source))
                    except StopIteration:
                        break
                key = group(held[0]) if group is not None and max_groups > 0 else None
                if key is not None and key not in groups.values() and len(set(groups.values())) >= max_groups:
                    break
                future = pool.submit(context.copy().run, work, held.pop())
                running.append(future)
                if key is not None:
                    groups[future] = key
            if not running:
                return
            if ordered:
                future = running.popleft()
            else:
                wait(running, return_when=FIRST_COMPLETED)
                future = next(f for f in running if f.done())
                running.remove(future)
            groups.pop(future, None)
            yield future.result()
    finally:
        for future in running:
            future.cancel()
        for future in running:
            if not future.cancelled():
                future.exception()  # wait for it: it may be using the caller's readers
