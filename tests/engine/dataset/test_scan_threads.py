"""Scans decoded on the decode pool (several batches and columns at once) against serial scans:
same rows in the same order, early stops that leave no work running, errors of a worker
reaching the caller unchanged, and the knobs (``LANCE_CPU_THREADS``, ``serial_decoding``,
``batch_readahead``, ``scan_in_order``)."""

from __future__ import annotations

import threading
import time

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.encodings.structural.column import StructuralColumn
from lance_format.errors import CorruptFileError, InvalidInputError
from lance_format.io import threads
from lance_format.io.threads import decode_pool, map_ordered, run_all, serial_decoding

ROWS = 20_000
BATCH = 1_000


def _table(rows: int = ROWS) -> pa.Table:
    rng = np.random.default_rng(5)
    words = np.array(["alpha", "bravo", "charlie", "delta", "echo"])
    text = pa.array([f"customer-{i:06d}@example.com/{words[i % 5]}" for i in range(rows)])
    return pa.table({
        "id": np.arange(rows, dtype=np.int64),
        "x": rng.random(rows),
        "cat": pa.array(words[rng.integers(0, 5, rows)]),
        "url": text,
        "note": pa.array([None if i % 3 == 0 else f"note {i}" for i in range(rows)]),
        "tags": pa.array([[words[i % 5], words[(i + 1) % 5]][: i % 3] for i in range(rows)]),
        "point": pa.StructArray.from_arrays([pa.array(rng.standard_normal(rows)),
                                             pa.array(rng.integers(0, 9, rows).astype(np.int32))], ["lat", "zone"]),
    })


@pytest.fixture(autouse=True)
def four_threads(monkeypatch):
    """A decode pool of four threads, whatever the machine's core count."""
    monkeypatch.setenv(threads.CPU_THREADS_ENV, "4")


@pytest.fixture(scope="module")
def table_uri(tmp_path_factory) -> str:
    uri = str(tmp_path_factory.mktemp("threads") / "t.lance")
    # several fragments with deletions, so batches cross fragment edges and skip deleted rows
    lance_format.write_dataset(_table(), uri, data_storage_version="2.2", max_rows_per_file=7_000)
    lance_format.dataset(uri).delete("id % 97 = 5 OR (id >= 3000 AND id < 4100)")
    return uri


def _threaded(fn):
    assert decode_pool() is not None
    return fn()


def _serial(fn):
    with serial_decoding():
        assert decode_pool() is None
        return fn()


SCANS = {
    "full": lambda ds: ds.to_table(batch_size=BATCH),
    "columns": lambda ds: ds.to_table(columns=["url", "tags"], batch_size=BATCH),
    "late filter": lambda ds: ds.to_table(filter="cat = 'echo' AND x > 0.5", batch_size=BATCH),
    "dense filter": lambda ds: ds.to_table(filter="x > 0.1", batch_size=BATCH),
    "filter columns only": lambda ds: ds.to_table(columns=["x"], filter="x < 0.2", batch_size=BATCH),
    "system columns": lambda ds: ds.to_table(columns=["id"], with_row_id=True, with_row_address=True,
                                             batch_size=BATCH),
    "row offsets": lambda ds: ds.to_table(columns=["id", "_rowoffset"], filter="x < 0.3", batch_size=BATCH),
    "deleted rows": lambda ds: ds.to_table(columns=["id"], with_row_id=True, include_deleted_rows=True,
                                           batch_size=BATCH),
    "limit offset": lambda ds: ds.to_table(limit=2_345, offset=4_000, batch_size=BATCH),
    "readahead 1": lambda ds: ds.to_table(batch_size=BATCH, batch_readahead=1),
    "readahead 3": lambda ds: ds.to_table(batch_size=BATCH, batch_readahead=3),
    "take": lambda ds: ds.take(np.random.default_rng(1).choice(ds.count_rows(), 500, replace=False)),
    "batches": lambda ds: pa.Table.from_batches(list(ds.to_batches(batch_size=BATCH, filter="x > 0.5"))),
}


@pytest.mark.parametrize("scan", list(SCANS))
def test_threaded_scans_equal_serial_scans(table_uri, scan):
    ds = lance_format.dataset(table_uri)
    threaded = _threaded(lambda: SCANS[scan](ds))
    serial = _serial(lambda: SCANS[scan](lance_format.dataset(table_uri)))
    assert threaded.num_rows > 0
    assert threaded.equals(serial)
    assert threaded.equals(_threaded(lambda: SCANS[scan](ds)))  # and again on the same (warm) readers


def test_threaded_scan_matches_pylance(table_uri):
    ours = lance_format.dataset(table_uri).to_table(filter="cat = 'echo' AND x > 0.5", batch_size=BATCH)
    theirs = lance.dataset(table_uri).to_table(filter="cat = 'echo' AND x > 0.5")
    assert ours.equals(theirs)


def test_batches_keep_table_order_with_readahead(table_uri):
    ds = lance_format.dataset(table_uri)
    ids = [b.column("id").to_numpy() for b in ds.to_batches(columns=["id"], batch_size=BATCH, batch_readahead=8)]
    joined = np.concatenate(ids)
    assert np.all(np.diff(joined) > 0)
    assert len(joined) == ds.count_rows()


def test_scan_out_of_order_returns_the_same_rows(table_uri):
    ds = lance_format.dataset(table_uri)
    unordered = ds.to_table(batch_size=BATCH, scan_in_order=False)
    assert unordered.sort_by("id").equals(ds.to_table(batch_size=BATCH))


class _Active:
    """Counts column reads running right now (and the most at once) across threads."""

    def __init__(self, monkeypatch, delay: float = 0.0) -> None:
        self.now = self.most = self.calls = 0
        self.lock = threading.Lock()
        original = StructuralColumn._read

        def read(column, start, stop, data_type):
            with self.lock:
                self.now += 1
                self.calls += 1
                self.most = max(self.most, self.now)
            try:
                if delay:
                    time.sleep(delay)
                return original(column, start, stop, data_type)
            finally:
                with self.lock:
                    self.now -= 1

        monkeypatch.setattr(StructuralColumn, "_read", read)


def test_breaking_out_of_a_scan_leaves_no_work_running(table_uri, monkeypatch):
    active = _Active(monkeypatch, delay=0.01)
    ds = lance_format.dataset(table_uri)
    batches = ds.to_batches(columns=["id", "x"], batch_size=BATCH, batch_readahead=4)
    first = next(batches)
    assert first.num_rows > 0
    batches.close()
    assert active.now == 0
    # only the batches within the readahead were started, not the whole table
    assert active.calls <= 2 * 6
    for _ in ds.to_batches(columns=["id"], batch_size=BATCH, batch_readahead=4):
        break
    assert active.now == 0


def test_limit_stops_decoding_early(table_uri, monkeypatch):
    active = _Active(monkeypatch)
    ds = lance_format.dataset(table_uri)
    assert ds.to_table(columns=["id"], limit=10, batch_size=BATCH, batch_readahead=4).num_rows == 10
    assert active.now == 0
    assert active.calls <= 6


def test_columns_and_batches_decode_side_by_side(table_uri, monkeypatch):
    active = _Active(monkeypatch, delay=0.005)
    lance_format.dataset(table_uri).to_table(batch_size=BATCH, batch_readahead=4)
    assert active.most > 1
    active_serial = _Active(monkeypatch, delay=0.0)
    _serial(lambda: lance_format.dataset(table_uri).to_table(batch_size=BATCH))
    assert active_serial.most == 1


@pytest.mark.parametrize("error", [CorruptFileError, RuntimeError])
@pytest.mark.parametrize("mode", ["threaded", "serial"])
def test_a_workers_error_reaches_the_caller_unchanged(table_uri, monkeypatch, error, mode):
    original = StructuralColumn._read

    def failing(column, start, stop, data_type):
        if start >= 4 * BATCH:
            raise column.ctx.corrupt("injected") if error is CorruptFileError else RuntimeError("injected")
        return original(column, start, stop, data_type)

    monkeypatch.setattr(StructuralColumn, "_read", failing)
    ds = lance_format.dataset(table_uri)
    run = (lambda f: f()) if mode == "threaded" else _serial
    with pytest.raises(error, match="injected") as raised:
        run(lambda: ds.to_table(batch_size=BATCH, batch_readahead=4))
    assert type(raised.value) is error
    if error is CorruptFileError:
        assert raised.value.table == table_uri and raised.value.path is not None  # file and table named
    # the batches before the failure arrived, in order, before the error
    seen = []
    with pytest.raises(error):
        for batch in ds.to_batches(columns=["id"], batch_size=BATCH, batch_readahead=4):
            seen.append(batch.column("id").to_numpy())
    assert seen and np.concatenate(seen).max() < 4 * BATCH


def test_cpu_threads_setting(monkeypatch):
    monkeypatch.setenv(threads.CPU_THREADS_ENV, "1")
    assert threads.cpu_threads() == 1 and decode_pool() is None
    monkeypatch.setenv(threads.CPU_THREADS_ENV, "3")
    assert threads.cpu_threads() == 3
    pool = decode_pool()
    assert pool is not None and pool._max_workers == 3
    monkeypatch.setenv(threads.CPU_THREADS_ENV, "junk")
    assert threads.cpu_threads() == (__import__("os").cpu_count() or 1)


def test_serial_env_scan_equals_threaded(table_uri, monkeypatch):
    threaded = lance_format.dataset(table_uri).to_table(batch_size=BATCH)
    monkeypatch.setenv(threads.CPU_THREADS_ENV, "1")
    assert lance_format.dataset(table_uri).to_table(batch_size=BATCH).equals(threaded)


@pytest.mark.parametrize("bad", [-1, 1.5, "4", True])
def test_batch_readahead_is_checked(table_uri, bad):
    with pytest.raises(InvalidInputError, match="batch_readahead"):
        lance_format.dataset(table_uri).scanner(batch_readahead=bad)


def test_map_ordered_bounds_work_in_flight_and_keeps_order():
    running = {"now": 0, "most": 0}
    lock = threading.Lock()
    pulled = []

    def items():
        for i in range(40):
            pulled.append(i)
            yield i

    def work(i):
        with lock:
            running["now"] += 1
            running["most"] = max(running["most"], running["now"])
        time.sleep(0.002 * (i % 3))
        with lock:
            running["now"] -= 1
        return i * i

    assert list(map_ordered(work, items(), 3)) == [i * i for i in range(40)]
    assert running["most"] <= 3
    pulled.clear()
    results = map_ordered(work, items(), 3)
    assert next(results) == 0
    results.close()
    assert running["now"] == 0 and len(pulled) <= 4
    assert sorted(map_ordered(work, range(20), 4, ordered=False)) == sorted(i * i for i in range(20))


@pytest.mark.parametrize("order", ["failing first", "failing second"])
def test_run_all_waits_for_every_task_before_raising(order):
    started, finished = [], []

    def slow():
        started.append(1)
        time.sleep(0.05)
        finished.append(1)
        return 1

    def failing():
        raise KeyError("bad")

    tasks = [failing, slow, slow, slow] if order == "failing first" else [slow, failing, slow, slow]
    with pytest.raises(KeyError):
        run_all(tasks)
    assert len(started) == len(finished)  # tasks not started were cancelled, the others finished
    assert run_all([lambda: 1, lambda: 2, lambda: 3]) == [1, 2, 3]


def test_nested_pool_work_runs_inline():
    # a task of the pool asking for more pool work must not wait on the pool (it could be full)
    def outer(i):
        assert decode_pool() is None
        return run_all([lambda: i, lambda: i + 1])

    pool = decode_pool()
    assert pool is not None
    assert [f.result() for f in [pool.submit(outer, i) for i in range(8)]] == [[i, i + 1] for i in range(8)]


@pytest.mark.parametrize("version", ["legacy", "2.0", "2.1"])
def test_older_files_read_one_batch_at_a_time_with_the_same_rows(tmp_path, version):
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(_table(5_000), uri, data_storage_version=version, max_rows_per_file=2_000)
    ds = lance_format.dataset(uri)
    threaded = ds.to_table(batch_size=300, filter="x > 0.3", batch_readahead=6)
    assert threaded.equals(_serial(lambda: lance_format.dataset(uri).to_table(batch_size=300, filter="x > 0.3")))
    assert threaded.equals(lance.dataset(uri).to_table(filter="x > 0.3"))


def test_many_small_fragments_decode_side_by_side(tmp_path, monkeypatch):
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(_table(3_000), uri, data_storage_version="2.2", max_rows_per_file=200)
    ds = lance_format.dataset(uri)
    assert len(ds.get_fragments()) == 15
    active = _Active(monkeypatch, delay=0.005)
    threaded = ds.to_table(columns=["id", "url"], batch_readahead=4)
    assert active.most > 1  # batches of different fragments at once
    assert threaded.equals(_serial(lambda: ds.to_table(columns=["id", "url"])))


def test_fragment_readahead_limits_the_fragments_in_flight(tmp_path, monkeypatch):
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(_table(3_000), uri, data_storage_version="2.2", max_rows_per_file=300)
    ds = lance_format.dataset(uri)
    seen: list[set[str]] = []
    lock = threading.Lock()
    busy: dict[str, int] = {}
    original = StructuralColumn._read

    def read(column, start, stop, data_type):
        with lock:
            busy[column.ctx.path] = busy.get(column.ctx.path, 0) + 1
            seen.append({p for p, n in busy.items() if n})
        try:
            time.sleep(0.003)
            return original(column, start, stop, data_type)
        finally:
            with lock:
                busy[column.ctx.path] -= 1

    monkeypatch.setattr(StructuralColumn, "_read", read)
    table = ds.to_table(columns=["id", "url"], batch_size=100, batch_readahead=6, fragment_readahead=1)
    assert max(len(s) for s in seen) == 1
    seen.clear()
    assert ds.to_table(columns=["id", "url"], batch_size=100, batch_readahead=6).equals(table)
    assert max(len(s) for s in seen) > 1
    with pytest.raises(InvalidInputError, match="fragment_readahead"):
        ds.scanner(fragment_readahead=-2)


def test_gather_of_many_long_ranges_is_the_same_with_the_kernels():
    from lance_format.encodings.structural import accel
    from lance_format.encodings.structural.blocks import gather

    rng = np.random.default_rng(3)
    buf = np.frombuffer(pa.py_buffer(rng.integers(0, 256, 400_000, dtype=np.uint8).tobytes()), np.uint8)
    starts = np.sort(rng.choice(300_000, 500, replace=False)).astype(np.int64)
    lengths = rng.integers(64, 400, 500).astype(np.int64)
    expected = np.concatenate([buf[s:s + n] for s, n in zip(starts, lengths)])
    try:
        for policy in (False, True):
            accel.use_compiled(policy)
            assert np.array_equal(gather(buf, starts, lengths), expected)
            # ranges past the end keep numpy's clipping
            clipped = gather(buf, np.append(starts, 399_900), np.append(lengths, 400))
            assert np.array_equal(clipped, np.concatenate([expected, buf[399_900:]]))
    finally:
        accel.use_compiled(None)


def test_a_batch_arriving_late_decodes_only_its_own_chunks(tmp_path, monkeypatch):
    from lance_format.encodings.structural import miniblock

    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"x": np.arange(300_000, dtype=np.float64)}), uri, data_storage_version="2.2")
    ds = lance_format.dataset(uri)
    fragment = ds.get_fragments()[0]
    schema = ds.lance_schema.project(["x"])
    decoded: list[int] = []
    original = miniblock.MiniBlockPage._decode_run

    def counting(page, c0, c1, data_type):
        decoded.append(c1 - c0 + 1)
        return original(page, c0, c1, data_type)

    monkeypatch.setattr(miniblock.MiniBlockPage, "_decode_run", counting)

    def rows(begin: int, end: int) -> np.ndarray:
        batches = list(fragment.read_batches(schema, [], end - begin, row_range=(begin, end)))
        return np.concatenate([b.column("x").to_numpy() for b in batches])

    assert np.array_equal(rows(10_000, 20_000), np.arange(10_000, 20_000))  # reads ahead
    ahead = sum(decoded)
    assert np.array_equal(rows(0, 10_000), np.arange(0, 10_000))  # the batch before, late
    assert np.array_equal(rows(20_000, 30_000), np.arange(20_000, 30_000))  # still read ahead
    assert len(decoded) == 2 and decoded[1] < ahead / 4


def test_io_buffer_size_bounds_the_batches_in_flight(table_uri, monkeypatch):
    ds = lance_format.dataset(table_uri)
    per_row = ds.get_fragments()[0].stored_bytes_per_row(ds.lance_schema.project(["id", "url"]))
    assert 8 < per_row < 100  # an int64 and a short string, compressed
    active = _Active(monkeypatch, delay=0.003)
    # one column: each batch is one read, so reads at once are batches at once
    small = ds.to_table(columns=["url"], batch_size=BATCH, batch_readahead=6, io_buffer_size=1)
    assert active.most == 1  # one batch at a time (never none)
    active.most = 0
    roomy = ds.to_table(columns=["url"], batch_size=BATCH, batch_readahead=6, io_buffer_size=1 << 30)
    assert active.most > 1
    assert small.equals(roomy)
    with pytest.raises(InvalidInputError, match="io_buffer_size"):
        ds.scanner(io_buffer_size=-1)
