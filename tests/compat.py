"""Helpers to compare what this engine and official Lance see in the same table."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
from lance.file import LanceFileWriter as PyLanceFileWriter

import lance_format
from lance_format.file import LanceFileWriter

SYSTEM = ["_rowid", "_rowaddr", "_row_created_at_version", "_row_last_updated_at_version"]


def assert_tables_equal(ours: pa.Table, theirs: pa.Table, context: str = "") -> None:
    assert ours.schema.names == theirs.schema.names, f"{context}: columns {ours.schema.names} != {theirs.schema.names}"
    for name in ours.schema.names:
        a, b = ours.column(name), theirs.column(name)
        assert a.type == b.type, f"{context}: column {name} type {a.type} != {b.type}"
        if pa.types.is_dictionary(a.type):
            # the same values may be dictionary-encoded differently; compare them decoded
            a, b = (pa.chunked_array([c.dictionary_decode() for c in x.chunks], x.type.value_type) for x in (a, b))
        a, b = a.combine_chunks(), b.combine_chunks()
        assert a.equals(b), (
            f"{context}: column {name} differs:\nours={a.to_pylist()[:10]}\ntheirs={b.to_pylist()[:10]}"
        )
    assert ours.num_rows == theirs.num_rows


def assert_same_version(uri: str, version: int, *, columns: list[str] | None = None) -> None:
    """Rows, schema and system columns of one version agree between the engines."""
    theirs_ds = lance.dataset(uri, version=version)
    ours_ds = lance_format.dataset(uri, version=version)
    assert ours_ds.schema.equals(theirs_ds.schema, check_metadata=True), (
        f"v{version}: schema\n{ours_ds.schema}\n!=\n{theirs_ds.schema}"
    )
    assert ours_ds.count_rows() == theirs_ds.count_rows()
    cols = columns if columns is not None else ours_ds.schema.names
    theirs = theirs_ds.to_table(columns=cols + SYSTEM)
    ours = ours_ds.to_table(columns=cols + SYSTEM)
    assert_tables_equal(ours, theirs, f"version {version}")


def assert_same_history(uri: str) -> None:
    theirs = lance.dataset(uri)
    ours = lance_format.dataset(uri)
    assert ours.version == theirs.version
    assert ours.versions() == theirs.versions()
    for v in theirs.versions():
        assert_same_version(uri, v["version"])


def write_file_both(tmp_path: Path, version: str, table: pa.Table, *,
                    declare_schema: bool = True) -> tuple[Path, Path]:
    """``table`` written as one Lance file by this engine (``ours.lance``) and by pylance
    (``theirs.lance``) at file ``version``; ``declare_schema=False`` lets each writer take the
    schema from the first batch."""
    ours, theirs = tmp_path / "ours.lance", tmp_path / "theirs.lance"
    schema = table.schema if declare_schema else None
    with LanceFileWriter(str(ours), schema, version=version) as writer:
        writer.write_batch(table)
    with PyLanceFileWriter(str(theirs), schema, version=version) as writer:
        writer.write_batch(table)
    return ours, theirs
