"""``write_fragments`` with pylance's multi-base arguments: ``target_bases`` (registered bases or
the table's own URI), ``initial_bases`` for a table the returned transaction creates, and
``base_store_params``; the same calls on pylance and here give tables that read alike."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, UnsupportedFeatureError

ORDERS = pa.table({"id": range(40), "email": [f"c{i % 9}@example.com" if i % 5 else None for i in range(40)],
                   "country": ["US", "US", "US", "DE", "BR"] * 8})
MORE = pa.table({"id": range(40, 60), "email": [f"n{i}@example.org" for i in range(20)], "country": ["FR"] * 20})


def _lance_files(folder: Path) -> int:
    return len(list(folder.glob("**/*.lance")))


@pytest.fixture(params=["pylance", "ours"])
def engine(request):
    return lance if request.param == "pylance" else lance_format


def _table(engine, tmp_path):
    base1, base2 = tmp_path / "base1", tmp_path / "base2"
    base1.mkdir(), base2.mkdir()
    bases = [engine.DatasetBasePath(str(base1), name="base1"), engine.DatasetBasePath(str(base2), name="base2")]
    ds = engine.write_dataset(ORDERS, str(tmp_path / "primary"), initial_bases=bases, target_bases=["base1"],
                              max_rows_per_file=20)
    return ds, base1, base2


def test_append_fragments_to_a_base(engine, tmp_path):
    ds, base1, base2 = _table(engine, tmp_path)
    fragments = engine.fragment.write_fragments(MORE, ds, mode="append", target_bases=["base2"],
                                                base_store_params={str(base2): {}}, max_rows_per_file=10)
    ds = engine.LanceDataset.commit(ds.uri, engine.LanceOperation.Append(fragments), read_version=ds.version)
    assert ds.to_table().sort_by("id").equals(pa.concat_tables([ORDERS, MORE]))
    assert (_lance_files(base1), _lance_files(base2)) == (2, 2)
    assert lance.dataset(ds.uri).to_table().sort_by("id").equals(pa.concat_tables([ORDERS, MORE]))


def test_table_uri_names_the_primary_storage(engine, tmp_path):
    ds, _base1, base2 = _table(engine, tmp_path)
    txn = engine.fragment.write_fragments(MORE, ds, mode="append", return_transaction=True,
                                          target_bases=[ds.uri, "base2"], max_rows_per_file=10)
    ds = engine.LanceDataset.commit(ds.uri, txn, read_version=ds.version)
    assert ds.count_rows() == 60 and _lance_files(base2) == 1
    assert _lance_files(tmp_path / "primary" / "data") == 1


def test_create_with_initial_bases(engine, tmp_path):
    base1, base2 = tmp_path / "b1", tmp_path / "b2"
    base1.mkdir(), base2.mkdir()
    uri = str(tmp_path / "new")
    txn = engine.fragment.write_fragments(
        ORDERS, uri, mode="create", return_transaction=True, target_bases=["b1"],
        initial_bases=[engine.DatasetBasePath(str(base1), name="b1"), engine.DatasetBasePath(str(base2), name="b2")])
    ds = engine.LanceDataset.commit(uri, txn)
    assert sorted(b.name for b in ds.base_paths().values()) == ["b1", "b2"]
    assert _lance_files(base1) == 1 and not (tmp_path / "new" / "data").exists()
    assert lance.dataset(uri).to_table().equals(ORDERS)


def test_refusals(tmp_path):
    ds, _base1, base2 = _table(lance_format, tmp_path)
    with pytest.raises(InvalidInputError, match="'nowhere' not found"):
        lance_format.fragment.write_fragments(MORE, ds, target_bases=["nowhere"])
    with pytest.raises(InvalidInputError, match="Only CREATE mode can register"):
        lance_format.fragment.write_fragments(MORE, ds, initial_bases=[lance_format.DatasetBasePath(str(base2))])
    with pytest.raises(UnsupportedFeatureError, match="storage options per base path"):
        lance_format.fragment.write_fragments(MORE, ds, target_bases=["base2"],
                                              base_store_params={str(base2): {"region": "eu-west-1"}})
    assert _lance_files(base2) == 0
