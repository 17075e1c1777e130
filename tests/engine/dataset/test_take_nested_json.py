"""JSON nested in lists of structs (written from large_binary cast to ``pa.json_()``) reads back as
JSON from scans, ``take`` and an empty ``take``, as pylance reads it (pyarrow cannot build an empty
table of such a type with ``Schema.empty_table``)."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

import lance_format

MEDIA = pa.list_(pa.struct([pa.field("uri", pa.utf8(), nullable=False), pa.field("extra", pa.large_binary())]))
AS_JSON = pa.list_(pa.struct([pa.field("uri", pa.utf8(), nullable=False), pa.field("extra", pa.json_())]))
ROWS = [{"media": [{"uri": "s3://bucket/a.mp4", "extra": b'{"codec": "h264"}'},
                   {"uri": "https://cdn.example.com/b.png", "extra": None}]},
        {"media": []}, {"media": None}]


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_nested_json_reads_like_pylance(tmp_path, version):
    table = pa.Table.from_pylist(ROWS, schema=pa.schema([pa.field("media", MEDIA)]))
    table = table.cast(pa.schema([pa.field("media", AS_JSON)]))
    ours = lance_format.write_dataset(table, str(tmp_path / "o"), data_storage_version=version)
    theirs = lance.write_dataset(table, str(tmp_path / "p"), data_storage_version=version)
    assert ours.schema == theirs.schema
    assert lance.dataset(str(tmp_path / "o")).to_table().equals(theirs.to_table())
    for indices in ([0, 2], [1], []):
        mine = ours.take(indices)
        assert mine.schema.field("media").type == AS_JSON
        assert mine.to_pylist() == theirs.take(indices).to_pylist()
    assert ours.take([], columns=["media"]).num_rows == 0
