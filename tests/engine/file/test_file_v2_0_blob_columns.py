"""2.0 files with a blob column (``large_binary`` marked ``lance-encoding:blob``): the column holds
a packed struct of ``(position, size)`` descriptions and the bytes lie elsewhere in the file.
pylance's file reader gives the bytes back, and so does ours (official Lance keeps such a file as
``rust/lance-file/test_data/exact_versions/v2_0.lance``; these tests make theirs with pylance)."""

from __future__ import annotations

import lance.file
import numpy as np
import pyarrow as pa
import pytest

import lance_format.file

SCHEMA = pa.schema([
    pa.field("id", pa.int32(), False),
    pa.field("name", pa.string()),
    pa.field("blob", pa.large_binary(), metadata={"lance-encoding:blob": "true"}),
])


def _table(n: int = 3000) -> pa.Table:
    blobs = [None if i % 7 == 3 else b"" if i % 5 == 0 else f"https://cdn.example.org/img/{i}.png".encode() * (i % 40)
             for i in range(n)]
    names = [None if i % 11 == 0 else f"user{i}@example.com" for i in range(n)]
    return pa.table({"id": pa.array(range(n), pa.int32()), "name": names, "blob": pa.array(blobs, pa.large_binary())},
                    schema=SCHEMA)


@pytest.fixture(params=["pylance", "ours"])
def blob_file(request, tmp_path):
    path = str(tmp_path / "blobs.lance")
    table = _table()
    writer_class = lance.file.LanceFileWriter if request.param == "pylance" else lance_format.file.LanceFileWriter
    with writer_class(path, SCHEMA, version="2.0") as writer:
        for batch in (table.slice(0, 1000), table.slice(1000, 1500), table.slice(2500)):
            writer.write_batch(batch)
    return path, table


def test_the_blob_column_reads_as_its_bytes(blob_file):
    path, table = blob_file
    ours = lance_format.file.LanceFileReader(path).read_all().to_table()
    theirs = lance.file.LanceFileReader(path).read_all().to_table()
    assert ours.column("blob").to_pylist() == theirs.column("blob").to_pylist() == table.column("blob").to_pylist()
    assert ours.column("blob").null_count == table.column("blob").null_count > 0
    assert ours.select(["id", "name"]).equals(table.select(["id", "name"]))


def test_ranges_and_takes_of_a_blob_column(blob_file):
    path, table = blob_file
    ours, theirs = lance_format.file.LanceFileReader(path), lance.file.LanceFileReader(path)
    for start, count in ((0, 1), (995, 10), (1003, 1), (2999, 1), (10, 0)):
        got = ours.read_range(start, count).to_table().column("blob").to_pylist()
        assert got == theirs.read_range(start, count).to_table().column("blob").to_pylist()
        assert got == table.column("blob").to_pylist()[start:start + count]
    rows = np.array([0, 3, 5, 17, 999, 1000, 2998], np.int64)
    got = ours.take_rows(rows.tolist()).to_table().column("blob").to_pylist()
    assert got == theirs.take_rows(rows.tolist()).to_table().column("blob").to_pylist()
    assert got == table.column("blob").take(pa.array(rows)).to_pylist()
