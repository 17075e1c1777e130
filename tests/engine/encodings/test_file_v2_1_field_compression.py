"""File versions 2.1/2.2: ``lance-encoding:compression`` on string columns, compared with pylance.

pylance wraps the mini-block ``variable`` chunks of such a column in ``general{zstd|lz4}`` (each
chunk's buffer compressed on its own, FSST off, zstd level 3 unless
``lance-encoding:compression-level`` says otherwise). Our files must be the same bytes, and each
side must read the other's files.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PyReader

from lance_format.file import LanceFileReader
from tests.compat import write_file_both

STRINGS = [f"compress_me_please-{i}" for i in range(10 * 1024)]


def _write_both(tmp_path: Path, version: str, metadata: dict[str, str] | None,
                values: list) -> tuple[Path, Path, pa.Table]:
    schema = pa.schema([pa.field("s", pa.string(), metadata=metadata)])
    table = pa.table({"s": values}, schema=schema)
    ours, theirs = write_file_both(tmp_path, version, table)
    return ours, theirs, table


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("scheme", ["zstd", "lz4"])
def test_compressed_strings_match_pylance_bytes(tmp_path: Path, version: str, scheme: str) -> None:
    ours, theirs, table = _write_both(tmp_path, version, {"lance-encoding:compression": scheme}, STRINGS)
    assert ours.read_bytes() == theirs.read_bytes()
    assert PyReader(str(ours)).read_all().to_table().column("s").equals(table.column("s"))
    assert LanceFileReader(str(theirs)).read_all().to_table().column("s").equals(table.column("s"))


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_zstd_makes_the_file_smaller(tmp_path: Path, version: str) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain, _, _ = _write_both(tmp_path / "a", version, None, STRINGS)
    zstd, _, _ = _write_both(tmp_path / "b", version, {"lance-encoding:compression": "zstd"}, STRINGS)
    assert os.path.getsize(zstd) < os.path.getsize(plain)


def test_level_and_nulls_read_both_ways(tmp_path: Path) -> None:
    # two metadata keys: pylance's map order varies, so compare the data and the page sizes only
    values = [None if i % 3 == 0 else s for i, s in enumerate(STRINGS)]
    metadata = {"lance-encoding:compression": "zstd", "lance-encoding:compression-level": "9"}
    ours, theirs, table = _write_both(tmp_path, "2.1", metadata, values)
    assert os.path.getsize(ours) == os.path.getsize(theirs)
    assert PyReader(str(ours)).read_all().to_table().column("s").equals(table.column("s"))
    assert LanceFileReader(str(theirs)).read_all().to_table().column("s").equals(table.column("s"))
