"""Damage that used to return wrong data silently now raises CorruptFileError naming the file.

Each table is written by official Lance (the oracle), then damaged the way a broken writer or a
bit flip would damage it; reading it with this engine must refuse, never answer.
"""

from __future__ import annotations

import os

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import CorruptFileError
from tests.robustness.test_bad_input import _rewrite_latest_manifest


def _data_file(uri: str) -> str:
    (name,) = os.listdir(os.path.join(uri, "data"))
    return os.path.join(uri, "data", name)


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_two_fields_mapped_to_one_column(tmp_path, version):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"a": pa.array([1, 2, 3], pa.int64()), "b": pa.array([4.0, 5.0, 6.0])}), uri,
                        data_storage_version=version)

    def repeat_first_column(manifest):
        indices = manifest.fragments[0].files[0].column_indices
        indices[1] = indices[0]

    _rewrite_latest_manifest(uri, repeat_first_column)
    with pytest.raises(CorruptFileError, match="same column") as info:
        lance_format.dataset(uri).to_table()
    assert f"file={os.path.basename(_data_file(uri))}" in str(info.value) and uri in str(info.value)


def test_data_file_version_that_disagrees_with_the_file(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"l": pa.array([[1, 2], None, [3]], pa.list_(pa.int64()))}), uri,
                        data_storage_version="2.1")

    def claim_2_2(manifest):
        manifest.fragments[0].files[0].file_minor_version = 2
        manifest.data_format.version = "2.2"

    _rewrite_latest_manifest(uri, claim_2_2)
    with pytest.raises(CorruptFileError, match="file version 2.1 but the manifest records 2.2"):
        lance_format.dataset(uri).to_table()


def test_data_file_version_that_disagrees_with_the_table(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"l": pa.array([[1, 2], None, [3]], pa.list_(pa.int64()))}), uri,
                        data_storage_version="2.1")
    _rewrite_latest_manifest(uri, lambda m: setattr(m.data_format, "version", "2.2"))
    with pytest.raises(CorruptFileError, match="file version 2.1 in a table of file version 2.2"):
        lance_format.dataset(uri).to_table()


def test_stable_row_id_fragment_without_its_sequence(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": [1, 2, 3]}), uri, enable_stable_row_ids=True)
    lance.write_dataset(pa.table({"id": [4, 5]}), uri, mode="append")
    assert lance_format.dataset(uri).to_table(with_row_id=True).column("_rowid").to_pylist() == [0, 1, 2, 3, 4]

    def drop_sequence(manifest):
        manifest.fragments[1].ClearField("inline_row_ids")

    _rewrite_latest_manifest(uri, drop_sequence)
    with pytest.raises(CorruptFileError, match="fragment 1 of a table with stable row ids has no row id sequence"):
        lance_format.dataset(uri).to_table(with_row_id=True)


@pytest.mark.parametrize("version", ["2.0", "2.1"])
@pytest.mark.parametrize("nesting", ["plain", "list", "struct"])
def test_invalid_utf8_in_a_string_column(tmp_path, version, nesting):
    uri = str(tmp_path / "t.lance")
    rng = np.random.default_rng(7)
    words = ["".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), 40)) for _ in range(200)]
    marker = "MARKERmarkerMARKER" + "q" * 30
    words[123] = marker
    column = pa.array(words)
    if nesting == "list":
        column = pa.array([[w] for w in words], pa.list_(pa.string()))
    elif nesting == "struct":
        column = pa.StructArray.from_arrays([column], ["s"])
    lance.write_dataset(pa.table({"id": pa.array(range(200), pa.int64()), "c": column}), uri,
                        data_storage_version=version)
    path = _data_file(uri)
    raw = bytearray(open(path, "rb").read())
    at = raw.find(marker.encode())
    assert at > 0, "the marker string is stored verbatim"
    raw[at + 6] = 0xFF  # not a UTF-8 byte anywhere
    with open(path, "wb") as f:
        f.write(bytes(raw))

    with pytest.raises(CorruptFileError, match="invalid UTF-8") as info:
        lance_format.dataset(uri).to_table()
    assert os.path.basename(path) in str(info.value) and "column=c" in str(info.value)
    with pytest.raises(CorruptFileError, match="invalid UTF-8"):
        lance_format.dataset(uri).take([123])
    # columns without the damaged bytes still read
    assert lance_format.dataset(uri).to_table(columns=["id"]).num_rows == 200


def test_valid_non_ascii_text_reads_unchanged(tmp_path):
    uri = str(tmp_path / "t.lance")
    text = pa.array(["naïve café", "日本語のテキスト", None, "emoji 🎉", "", "ascii"] * 50)
    table = pa.table({"t": text, "l": pa.array([["ä", "b"], None] * 150, pa.list_(pa.string()))})
    lance.write_dataset(table, uri)
    assert lance_format.dataset(uri).to_table().equals(table)
