"""Code written for pylance catches builtin exceptions; the same handlers must catch ours.

For each situation, official Lance (the oracle) raises some builtin (``ValueError``, ``OSError``,
...). This engine raises its typed ``LanceError`` subclass, which must also be an instance of the
builtin pylance raised there.
"""

from __future__ import annotations

import os

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import (
    CorruptFileError,
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    InvalidInputError,
    LanceError,
    SchemaMismatchError,
    TagError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)


def _situations(root: str, engine):
    uri = os.path.join(root, "t.lance")
    engine.write_dataset(pa.table({"id": [1, 2, 3]}), uri)
    ds = engine.dataset(uri)
    ds.tags.create("v1", 1)
    return {
        "missing table": lambda: engine.dataset(os.path.join(root, "none.lance")),
        "create over a table": lambda: engine.write_dataset(pa.table({"id": [1]}), uri),
        "missing version": lambda: engine.dataset(uri, version=9),
        "missing tag": lambda: engine.dataset(uri, version="nope"),
        "tag exists": lambda: ds.tags.create("v1", 1),
        "append another schema": lambda: engine.write_dataset(pa.table({"id": ["x"]}), uri, mode="append"),
        "bad filter": lambda: ds.to_table(filter="id === 1"),
        "unknown column": lambda: ds.to_table(columns=["zz"]),
        "bad mode": lambda: engine.write_dataset(pa.table({"id": [1]}), uri, mode="zzz"),
    }


EXPECTED = {
    "missing table": DatasetNotFoundError,
    "create over a table": DatasetAlreadyExistsError,
    "missing version": VersionNotFoundError,
    "missing tag": TagError,
    "tag exists": TagError,
    "append another schema": SchemaMismatchError,
    "bad filter": InvalidInputError,
    "unknown column": InvalidInputError,
    "bad mode": InvalidInputError,
}


@pytest.mark.parametrize("situation", sorted(EXPECTED))
def test_our_error_is_also_the_builtin_pylance_raises(tmp_path, situation):
    theirs = _situations(str(tmp_path / "pylance"), lance)[situation]
    ours = _situations(str(tmp_path / "ours"), lance_format)[situation]
    with pytest.raises(Exception) as their_error:
        theirs()
    with pytest.raises(EXPECTED[situation]) as our_error:
        ours()
    builtin = next(c for c in type(their_error.value).__mro__ if c.__module__ == "builtins")
    assert isinstance(our_error.value, builtin), (situation, type(their_error.value), type(our_error.value))


def test_each_error_class_names_its_builtin():
    assert issubclass(DatasetNotFoundError, FileNotFoundError) and issubclass(DatasetNotFoundError, ValueError)
    assert issubclass(DatasetAlreadyExistsError, FileExistsError)
    assert issubclass(UnsupportedFeatureError, NotImplementedError)
    assert issubclass(CorruptFileError, OSError)
    error = CorruptFileError("bad page", table="t", path="data/x.lance")
    assert str(error) == "bad page [table=t, file=data/x.lance]" and error.errno is None
    assert isinstance(error.with_context(version=3), LanceError) and "version=3" in str(error)


def test_corrupt_manifest_is_an_os_error(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"id": [1]}), uri)
    (name,) = [n for n in os.listdir(os.path.join(uri, "_versions")) if n.endswith(".manifest")]
    with open(os.path.join(uri, "_versions", name), "wb") as f:
        f.write(b"garbage")
    with pytest.raises(OSError, match="manifest"):
        lance_format.dataset(uri)
