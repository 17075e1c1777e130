"""Module-level names of pylance 14 added for ``import lance_format as lance`` code:
``iops_counter``/``bytes_read_counter``, ``set_logger`` and ``MergeInsertBuilder``, used as
pylance's users use them, side by side with pylance."""

from __future__ import annotations

import logging
from types import ModuleType

import lance
import pyarrow as pa
import pytest

import lance_format

ENGINES = [lance, lance_format]


@pytest.mark.parametrize("engine", ENGINES, ids=["pylance", "ours"])
def test_read_counters_measure_reads(tmp_path, engine: ModuleType):
    uri = str(tmp_path / "t")
    engine.write_dataset(pa.table({"a": list(range(1000))}), uri)
    before = (engine.iops_counter(), engine.bytes_read_counter())
    engine.dataset(uri).to_table()
    middle = (engine.iops_counter(), engine.bytes_read_counter())
    engine.dataset(uri).to_table()
    after = (engine.iops_counter(), engine.bytes_read_counter())
    first = (middle[0] - before[0], middle[1] - before[1])
    assert first[0] > 0 and first[1] > 0  # reading a table counts
    assert (after[0] - middle[0], after[1] - middle[1]) == first  # the same reads count the same


@pytest.mark.parametrize("engine", ENGINES, ids=["pylance", "ours"])
def test_set_logger_sends_records_to_the_handler(tmp_path, engine: ModuleType):
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Collect()
    engine.set_logger(log_handler=handler, level=logging.DEBUG)
    try:
        logging.getLogger("pylance").debug("from the named logger")
        assert [r.getMessage() for r in records] == ["from the named logger"]
        assert records[0].levelno == logging.DEBUG
        path = tmp_path / f"{engine.__name__}.log"
        engine.set_logger(file_path=str(path), name="mine", level=logging.WARNING)
        logging.getLogger("mine").warning("to the file")
        logging.getLogger("mine").info("below the level")
        for h in logging.getLogger("mine").handlers:
            h.flush()
        text = path.read_text()
        assert "to the file" in text and "below the level" not in text and "[WARNING]" in text
    finally:
        for name in ("pylance", "mine", lance_format.log.ENGINE_LOGGER):
            for h in list(logging.getLogger(name).handlers):
                if h is handler or isinstance(h, logging.FileHandler):
                    logging.getLogger(name).removeHandler(h)
                    h.close()


def test_engine_records_reach_set_logger():
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.name)

    handler = Collect()
    lance_format.set_logger(log_handler=handler, level=logging.INFO)
    try:
        logging.getLogger("lance_format.table.commit").info("an engine record")
        assert records == ["lance_format.table.commit"]
    finally:
        for name in ("pylance", "lance_format"):
            logging.getLogger(name).removeHandler(handler)


def test_merge_insert_builder_is_exported(tmp_path):
    for engine in ENGINES:
        ds = engine.write_dataset(pa.table({"id": [1, 2], "v": ["a", "b"]}), str(tmp_path / engine.__name__))
        builder = ds.merge_insert("id")
        assert isinstance(builder, engine.MergeInsertBuilder)
        builder.when_matched_update_all().when_not_matched_insert_all().execute(
            pa.table({"id": [2, 3], "v": ["B", "c"]}))
        assert ds.to_table().sort_by("id") == pa.table({"id": [1, 2, 3], "v": ["a", "B", "c"]})


def test_lance_dataset_takes_pylances_constructor_arguments(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(pa.table({"a": [1, 2, 3]}), uri)
    lance.write_dataset(pa.table({"a": [4]}), uri, mode="append")
    results = []
    for engine in ENGINES:
        # positionally: uri, version, block_size, index_cache_size, metadata_cache_size, commit_lock,
        # storage_options, serialized_manifest, default_scan_options
        ds = engine.LanceDataset(uri, 1, None, None, None, None, None, None, {"batch_size": 2},
                                 metadata_cache_size_bytes=1 << 20, index_cache_size_bytes=1 << 20,
                                 read_params={"validate_on_decode": True}, session=engine.Session())
        results.append((ds.version, [b.num_rows for b in ds.to_batches()]))
    assert results[0] == results[1] == (1, [2, 1])
    with pytest.raises(lance_format.InvalidInputError, match="commit_lock"):
        lance_format.LanceDataset(uri, commit_lock=object())
    with pytest.raises(lance_format.InvalidInputError, match="read_params"):
        lance_format.LanceDataset(uri, read_params={"nope": 1})
