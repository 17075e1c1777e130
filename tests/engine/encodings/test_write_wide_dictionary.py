"""Wide values (256 bytes and more) that repeat: pylance 14 tries a dictionary before it picks a
layout by value width, so such pages are mini-block pages of dictionary indices, not full-zip;
ours choose the same layout, and the compaction of such a table cuts files at the same rows."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.file.reader import LanceFileReader
from lance_format.proto import encodings_v2_1_pb2


def _layouts(uri: str) -> list[tuple[int, str | None, bool]]:
    ds = lance_format.dataset(uri)
    out = []
    for fragment in ds.get_fragments():
        reader = LanceFileReader(ds.object_store, "data/" + fragment.data_files()[0].path)
        for column in reader.metadata.columns:
            for page in column.pages:
                layout = reader.page_encoding(page, encodings_v2_1_pb2.PageLayout, "s")
                kind = layout.WhichOneof("layout")
                out.append((page.length, kind,
                            kind == "mini_block_layout" and layout.mini_block_layout.HasField("dictionary")))
    return out


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("width, distinct, rows", [
    (300, 3, 50000), (300, 50, 20000), (1000, 10, 5000), (2000, 2, 100), (2000, 2, 99), (500, 40, 1000),
])
def test_wide_repeated_values_layout_like_pylance(tmp_path, version, width, distinct, rows):
    values = pa.array([b"%0*d" % (width, (j * 7) % distinct) for j in range(rows)])
    seen = []
    for engine in (lance, lance_format):
        uri = str(tmp_path / engine.__name__)
        engine.write_dataset(pa.table({"s": values}), uri, data_storage_version=version)
        seen.append(_layouts(uri))
        assert lance.dataset(uri).to_table().column("s").combine_chunks().equals(values)
    assert seen[0] == seen[1]
    if rows >= 100:  # pylance does not dictionary-encode fewer than 100 values
        assert seen[1][0][2]


def test_compaction_of_wide_repeated_values_cuts_like_pylance(tmp_path):
    def compacted(engine) -> list[int]:
        uri = str(tmp_path / engine.__name__)
        for _ in range(4):
            engine.write_dataset(pa.table({"s": pa.array([b"y" * 300] * 50000)}), uri, mode="append",
                                 data_storage_version="2.1")
        engine.dataset(uri).optimize.compact_files(target_rows_per_fragment=10**8, max_bytes_per_file=1 << 20)
        return [f.count_rows() for f in engine.dataset(uri).get_fragments()]

    assert compacted(lance_format) == compacted(lance) == [200000]
