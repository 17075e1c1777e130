"""pylance 14's ``lance.file`` module (``LanceFileReader``, ``LanceFileWriter``,
``LanceFileSession``, ``stable_version``) against ``lance_format.file``: the same calls on files
and URIs give the same results, and either engine reads the files the other writes."""

from __future__ import annotations

import gc
import os
from types import ModuleType

import lance.file
import pyarrow as pa
import pytest

import lance_format.file

MODULES = [lance.file, lance_format.file]
IDS = ["pylance", "ours"]
DATA = pa.table({"a": list(range(10)), "s": [f"v{i}" for i in range(10)]})


def _write(module: ModuleType, path: str, **kwargs) -> list:
    """Write DATA in two batches with a global buffer and schema metadata; what the writer says."""
    writer = module.LanceFileWriter(path, **kwargs)
    writer.write_batch(DATA.slice(0, 4))
    writer.write_batch(DATA.slice(4).to_batches()[0])
    index = writer.add_global_buffer(b"hello")
    writer.add_schema_metadata("k", "v")
    rows = writer.close()
    again = writer.close()
    return [index, rows, again, writer.size_bytes == os.path.getsize(path)]


def _read(module: ModuleType, path: str) -> list:
    reader = module.LanceFileReader(path)
    meta = reader.metadata()
    stats = reader.file_statistics()
    return [
        reader.num_rows(),
        reader.read_all().to_table(),
        [b.num_rows for b in reader.read_all(batch_size=3).to_batches()],
        reader.read_range(2, 5).to_table(),
        reader.take_rows([0, 7, 9]).to_table(),
        module.LanceFileReader(path, columns=["s"]).read_all().to_table(),
        (meta.major_version, meta.minor_version, meta.num_rows, meta.schema, len(meta.columns),
         [len(c.pages) for c in meta.columns], len(meta.global_buffers), meta.global_buffers[1].size),
        [c.num_pages for c in stats.columns],
        bytes(reader.read_global_buffer(1)),
    ]


@pytest.mark.parametrize("version", [None, "2.0", "2.1", "stable"])
def test_write_and_read_like_pylance(tmp_path, version):
    results = []
    for module in MODULES:
        path = str(tmp_path / f"{module.__name__}.lance")
        results.append((_write(module, path, version=version), _read(module, path)))
    assert results[0] == results[1]
    written, read = results[1]
    assert written == [1, 10, None, True]
    assert read[1] == DATA.replace_schema_metadata({"k": "v"})
    assert read[-1] == b"hello"


@pytest.mark.parametrize("writer", MODULES, ids=IDS)
@pytest.mark.parametrize("reader", MODULES, ids=IDS)
def test_files_cross_read(tmp_path, writer: ModuleType, reader: ModuleType):
    path = str(tmp_path / "f.lance")
    with writer.LanceFileWriter(path, DATA.schema) as out:
        out.write_batch(DATA)
    assert reader.LanceFileReader(path).read_all().to_table() == DATA


@pytest.mark.parametrize("module", MODULES, ids=IDS)
def test_writer_refusals_and_aborts_like_pylance(tmp_path, module: ModuleType):
    with pytest.raises(ValueError, match="Schema is unknown and file cannot be created"):
        with module.LanceFileWriter(str(tmp_path / "none.lance")):
            pass
    dropped = module.LanceFileWriter(str(tmp_path / "dropped.lance"), DATA.schema)
    dropped.write_batch(DATA)
    del dropped
    gc.collect()
    assert not (tmp_path / "dropped.lance").exists()
    path = str(tmp_path / "ok.lance")
    with module.LanceFileWriter(path, DATA.schema) as out:
        out.write_batch(DATA)
    with pytest.raises(ValueError, match="ascending"):
        module.LanceFileReader(path).take_rows([3, 1])


def test_page_splitting_follows_pylance(tmp_path):
    """``max_page_bytes`` cuts 2.0 pages on write only."""
    counts = []
    for module in MODULES:
        found = []
        for version, options in [("2.0", {"max_page_bytes": 1}), ("2.1", {"max_page_bytes": 1}),
                                 ("2.2", {"data_cache_bytes": 1})]:
            path = str(tmp_path / f"{module.__name__}-{version}.lance")
            with module.LanceFileWriter(path, DATA.schema, version=version, **options) as out:
                out.write_batch(DATA.slice(0, 3))
            found.append(len(module.LanceFileReader(path).metadata().columns[0].pages))
        counts.append(found)
    assert counts[0] == counts[1]
    assert counts[1] == [3, 1, 1]


def test_stable_version_and_sessions_like_pylance(tmp_path):
    assert lance_format.file.stable_version() == lance.file.stable_version()
    results = []
    for module in MODULES:
        session = module.LanceFileSession(tmp_path / module.__name__)
        with session.open_writer("d/x.lance") as out:
            out.write_batch(DATA)
        reader = session.open_reader("d/x.lance", columns=["a"])
        assert isinstance(reader, module.LanceFileReader)
        results.append([reader.read_all().to_table(), session.list(), session.contains("d/x.lance")])
    assert results[0] == results[1]


@pytest.mark.parametrize("module", MODULES, ids=IDS)
def test_a_failing_block_keeps_its_error_and_the_rows_written(tmp_path, module: ModuleType):
    path = str(tmp_path / "partial.lance")
    with pytest.raises(KeyError, match="boom"):
        with module.LanceFileWriter(path) as out:
            out.write_batch(DATA)
            raise KeyError("boom")
    assert module.LanceFileReader(path).read_all().to_table() == DATA  # closed on the way out
    # no schema yet, nothing to close: ours keeps the block's error, pylance replaces it with its
    # "Schema is unknown" close error (a deliberate difference: the cause stays visible)
    expected = KeyError if module is lance_format.file else ValueError
    with pytest.raises(expected):
        with module.LanceFileWriter(str(tmp_path / "never.lance")):
            raise KeyError("early")
