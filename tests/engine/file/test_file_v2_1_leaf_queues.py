"""Where the 2.1/2.2 writer cuts pages: as pylance 14, every leaf column has its own queue,
counting the array pylance's leaf encoder receives (a struct's child; a list's items, not its
offsets) and flushing it into a page on its own once it holds 8 MiB."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileWriter as PyLanceFileWriter

from lance_format.file import LanceFileWriter
from lance_format.file.reader import LanceFileReader
from lance_format.io.object_store import ObjectStore


def _batch(first: int, rows: int) -> pa.RecordBatch:
    j = np.arange(first, first + rows)
    rng = np.random.default_rng(first)
    numbers = pa.ListArray.from_arrays(pa.array(np.arange(0, 3 * rows + 1, 3, dtype=np.int32)),
                                       pa.array(np.arange(3 * rows) + 3 * first, pa.int64()))
    struct = pa.StructArray.from_arrays(
        [pa.array(j, pa.int32()), pa.array([b"%030d" % (x * 7919) for x in j]),
         pa.StructArray.from_arrays([pa.array(rng.random(rows))], ["f"])], ["x", "y", "z"])
    return pa.record_batch({"s": struct, "numbers": numbers})


def _page_rows(tmp_path, name: str) -> list[list[int]]:
    with LanceFileReader(ObjectStore(tmp_path), name) as reader:
        return [[int(page.length) for page in column.pages] for column in reader.metadata.columns]


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_leaf_pages_are_cut_where_pylance_cuts_them(tmp_path, version):
    """A struct of a small number (one page), 30-byte strings (two pages) and a nested struct
    of doubles (one page), and a list of numbers counted by its items (a page of 43 batches, not
    of the 37 its offsets and items would fill), written in 8192-row batches."""
    batches = [_batch(first, 8192) for first in range(0, 400_000, 8192)]
    with LanceFileWriter(str(tmp_path / "ours.lance"), batches[0].schema, version=version) as writer:
        for batch in batches:
            writer.write_batch(batch)
    with PyLanceFileWriter(str(tmp_path / "theirs.lance"), batches[0].schema, version=version) as writer:
        for batch in batches:
            writer.write_batch(batch)
    theirs = _page_rows(tmp_path, "theirs.lance")
    assert theirs[0] != theirs[1] and len(theirs[3]) == 2  # leaves cut apart; the list flushed once
    assert _page_rows(tmp_path, "ours.lance") == theirs
