"""``LanceDataset.new_file_session()`` against pylance 14: Lance files written through either
engine's file session are read alike by both, and the object methods (``contains``, ``list``,
``list_with_delimiter``, ``read_range``, ``delete_file``, ``upload_file``, ``download_file``)
answer alike."""

from __future__ import annotations

from types import ModuleType

import lance
import lance.file
import pyarrow as pa
import pytest

import lance_format

ENGINES = [lance, lance_format]
DATA = pa.table({"x": [1, 2, 3, 4], "y": list("abcd")})


def _session(engine: ModuleType, uri: str):
    return engine.write_dataset(pa.table({"a": [1, 2, 3]}), uri).new_file_session()


def _use(engine: ModuleType, tmp_path) -> list:
    uri = str(tmp_path / engine.__name__)
    session = _session(engine, uri)
    writer = session.open_writer("extra/f1.lance", schema=DATA.schema)
    writer.write_batch(DATA)
    writer.add_schema_metadata("k", "v")
    lazy = session.open_writer("extra/sub/f2.lance")  # schema from the first batch
    lazy.write_batch(pa.record_batch({"z": [1.5]}))
    written = [writer.close(), lazy.close()]
    reader = session.open_reader("extra/f1.lance")
    reads = [reader.num_rows(), reader.read_all().to_table(), reader.read_range(1, 2).to_table(),
             reader.take_rows([0, 3]).to_table(),
             session.open_reader("extra/f1.lance", columns=["y"]).read_all(batch_size=3).to_table(),
             [b.num_rows for b in session.open_reader("extra/f1.lance").read_all(batch_size=3).to_batches()],
             session.open_reader("extra/sub/f2.lance").read_all().to_table()]
    listing = [session.contains("extra/f1.lance"), session.contains("nope"), sorted(session.list("extra")),
               session.list_with_delimiter("extra"), len(session.read_range("extra/f1.lance", 0, 4))]
    (tmp_path / "local.txt").write_bytes(b"hello")
    session.upload_file(str(tmp_path / "local.txt"), "up/x.txt")
    session.download_file("up/x.txt", str(tmp_path / f"{engine.__name__}.txt"))
    session.delete_file("extra/sub/f2.lance")
    objects = [(tmp_path / f"{engine.__name__}.txt").read_bytes(), session.contains("extra/sub/f2.lance")]
    # the other engine's reader opens the file
    other = [lance.file.LanceFileReader(f"{uri}/extra/f1.lance").read_all().to_table(),
             lance_format.dataset(uri).new_file_session().open_reader("extra/f1.lance").read_all().to_table()]
    return [written, reads, [x if not hasattr(x, "common_prefixes") else (x.common_prefixes, x.objects)
                             for x in listing], objects, other]


def test_file_session_like_pylance(tmp_path):
    ours = _use(lance_format, tmp_path)
    theirs = _use(lance, tmp_path)
    assert ours == theirs
    assert ours[0] == [4, 1]
    assert ours[4][0].schema.metadata == {b"k": b"v"}
    assert ours[2][3] == (["extra/sub"], ["extra/f1.lance"])


def test_take_rows_must_ascend_like_pylance(tmp_path):
    for engine in ENGINES:
        session = _session(engine, str(tmp_path / engine.__name__))
        with session.open_writer("f.lance", schema=DATA.schema) as writer:
            writer.write_batch(DATA)
        with pytest.raises(ValueError, match="ascending"):
            session.open_reader("f.lance").take_rows([3, 1])
