"""``lance_format.dependencies`` (pylance's ``lance.dependencies``): lazy proxies for optional
libraries, and UDFs that work when pandas is missing (its proxy then raises on use)."""

from __future__ import annotations

import lance
import lance.dependencies
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
import lance_format.udf
from lance_format import dependencies


def test_flags_and_proxies_like_pylance():
    for flag in ("_NUMPY_AVAILABLE", "_PANDAS_AVAILABLE", "_POLARS_AVAILABLE", "_PYDANTIC_AVAILABLE"):
        assert getattr(dependencies, flag) == getattr(lance.dependencies, flag)
    assert dependencies.pandas.DataFrame is __import__("pandas").DataFrame  # imported on first use
    for engine in (lance.dependencies, dependencies):
        missing = engine._LazyModule("pandas", module_available=False)
        with pytest.raises(ModuleNotFoundError, match="pd.DataFrame requires 'pandas' module to be installed"):
            _ = missing.DataFrame
        assert missing.__doc__ is None  # introspection does not raise
        with pytest.raises(AttributeError):
            _ = missing.__wrapped__
    assert not hasattr(dependencies._LazyModule("numpy", module_available=True), "__wrapped__")


@pytest.mark.parametrize("use_batch_udf", [False, True])
def test_add_columns_udf_without_pandas(tmp_path, monkeypatch, use_batch_udf):
    table = pa.table({"caption": ["a Shutterstock photo", None, "clean https://example.com/x"]})
    ds = lance_format.write_dataset(table, str(tmp_path / "t"))

    def flag(batch: pa.RecordBatch) -> pa.RecordBatch:
        return pa.record_batch([pc.match_substring(pc.utf8_lower(batch["caption"]), "shutterstock")], names=["wm"])

    monkeypatch.setattr(dependencies, "_PANDAS_AVAILABLE", False)
    monkeypatch.setattr(lance_format.udf, "pd", dependencies._LazyModule("pandas", module_available=False))
    ds.add_columns(lance_format.batch_udf()(flag) if use_batch_udf else flag, read_columns=["caption"])
    assert lance.dataset(str(tmp_path / "t")).to_table().column("wm").to_pylist() == [True, None, False]


def test_pandas_udf_output_still_converted(tmp_path):
    ds = lance_format.write_dataset(pa.table({"n": [1, 2, 3]}), str(tmp_path / "t"))
    ds.add_columns(lambda batch: batch.to_pandas().assign(m=lambda f: f["n"] * 2)[["m"]], read_columns=["n"])
    assert lance.dataset(str(tmp_path / "t")).to_table().column("m").to_pylist() == [2, 4, 6]
