"""``LanceFileReader.metadata()`` page encodings read as pylance prints them: Rust's pretty
``Debug`` of the prost message (``PageLayout { layout: Some(MiniBlockLayout(...)) ... }``), so
code that looks for ``"Fsst("`` or ``"VariablePackedStruct"`` in them works with either engine.
Each file, whoever wrote it, is described by both readers and the texts must be equal."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader as TheirReader

import lance_format
from lance_format.file import LanceFileReader as OurReader
from lance_format.rust_debug import RustBytes, render

N = 5000
_rng = np.random.default_rng(7)

COLUMNS = {
    "ints": (pa.array(np.arange(N)), {}),
    "floats": (pa.array(_rng.random(N)), {}),
    "nullable_zstd": (pa.array([None if i % 3 else i for i in range(N)], pa.int64()),
                      {"lance-encoding:compression": "zstd", "lance-encoding:compression-level": "3"}),
    "emails_lz4": (pa.array([f"user{i}@mail.com" for i in range(N)]), {"lance-encoding:compression": "lz4"}),
    "urls": (pa.array([f"https://site{i % 50}.example.com/path/{i}" for i in range(N)]), {}),
    "categories": (pa.array([["a", "bb", "ccc"][i % 3] for i in range(N)]), {}),
    "runs": (pa.array(np.repeat(np.arange(10), N // 10)), {}),
    "bools": (pa.array([i % 2 == 0 for i in range(N)]), {}),
    "nested_lists": (pa.array([[[1, 2], [3]][: i % 3] if i % 5 else None for i in range(N)],
                              pa.list_(pa.list_(pa.int32()))), {}),
    "all_null": (pa.array([None] * N, pa.int32()), {}),
    "struct": (pa.array([{"a": i, "b": str(i)} for i in range(N)]), {}),
    "vectors": (pa.FixedSizeListArray.from_arrays(pa.array(_rng.random(N * 4).astype(np.float32)), 4), {}),
    "packed_struct": (pa.array([{"id": i, "text": f"t{i}"} for i in range(N)]), {"lance-encoding:packed": "true"}),
}


# packed structs with variable-width fields need 2.2 (both engines refuse them before)
CASES = [(name, version) for name in COLUMNS for version in ("2.0", "2.1", "2.2")
         if name != "packed_struct" or version == "2.2"]


@pytest.mark.parametrize("writer", [lance, lance_format], ids=["pylance-file", "our-file"])
@pytest.mark.parametrize(("name", "version"), CASES)
def test_page_encodings_print_as_pylance_prints_them(tmp_path: Path, writer, version: str, name: str) -> None:
    values, metadata = COLUMNS[name]
    schema = pa.schema([pa.field(name, values.type, metadata=metadata)])
    writer.write_dataset(pa.table({name: values}).cast(schema), tmp_path / "t", data_storage_version=version)
    path = str(next((tmp_path / "t" / "data").glob("*.lance")))
    ours, theirs = OurReader(path).metadata(), TheirReader(path).metadata()
    ours_text = [page.encoding for column in ours.columns for page in column.pages]
    theirs_text = [page.encoding for column in theirs.columns for page in column.pages]
    assert ours_text == theirs_text
    assert all(text.startswith(("PageLayout {", "ArrayEncoding {")) for text in ours_text)


def test_packed_struct_pages_name_their_encoding(tmp_path: Path) -> None:
    # pylance's own test_struct_variable_children_roundtrip looks for this name
    values, metadata = COLUMNS["packed_struct"]
    schema = pa.schema([pa.field("s", values.type, metadata=metadata)])
    lance_format.write_dataset(pa.table({"s": values}).cast(schema), tmp_path / "t", data_storage_version="2.2")
    path = str(next((tmp_path / "t" / "data").glob("*.lance")))
    assert any("VariablePackedStruct" in page.encoding for page in OurReader(path).metadata().columns[0].pages)


def test_bytes_print_as_rust_bytes() -> None:
    assert render(RustBytes(b'a\n\t\r\\"\x00\x7f\xff ~')) == 'b"a\\n\\t\\r\\\\\\"\\0\\x7f\\xff ~"'
