"""``LanceDataset.storage_options_accessor`` and ``partition_expression`` against pylance 14."""

from __future__ import annotations

import re
import time

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.io.options_accessor import StorageOptionsAccessor

ENGINES = {"ours": lance_format, "pylance": lance}


@pytest.mark.parametrize("engine", ENGINES.values(), ids=ENGINES.keys())
def test_accessor_of_a_table_opened_with_and_without_options(tmp_path, engine):
    uri = str(tmp_path / "t")
    engine.write_dataset(pa.table({"a": [1]}), uri)
    assert engine.dataset(uri).storage_options_accessor is None
    accessor = engine.dataset(uri, storage_options={"timeout": "30s"}).storage_options_accessor
    assert accessor.has_provider() is False and accessor.refresh_offset_secs() == 60
    # pylance adds its user agent; both keep the options given
    assert accessor.initial_storage_options()["timeout"] == "30s"
    assert accessor.get_storage_options()["timeout"] == "30s"
    assert re.fullmatch(r"StorageOptionsAccessor\(id=static_options_[0-9a-f]{16}, has_provider=false\)",
                        repr(accessor))
    static = type(accessor).with_static_options({"x": "1"})
    assert static.get_storage_options() == {"x": "1"} and static.accessor_id().startswith("static_options_")


@pytest.mark.parametrize("engine", ENGINES.values(), ids=ENGINES.keys())
def test_partition_expression_is_not_implemented(tmp_path, engine):
    ds = engine.write_dataset(pa.table({"a": [1]}), str(tmp_path / "t"))
    with pytest.raises(NotImplementedError, match="partitioning not yet supported"):
        _ = ds.partition_expression
    with pytest.raises(NotImplementedError, match="Not implemented yet for LanceFragment"):
        _ = ds.get_fragments()[0].partition_expression


def test_provider_credentials_are_asked_again_near_expiry():
    calls = []

    def provider():
        calls.append(1)
        # the first credentials expire within the refresh offset, the second in an hour
        expires = time.time() * 1000 + (30_000 if len(calls) == 1 else 3_600_000)
        return {"aws_access_key_id": f"key{len(calls)}", "expires_at_millis": str(int(expires))}

    accessor = StorageOptionsAccessor({"region": "x"}, provider)
    assert accessor.has_provider() and accessor.initial_storage_options() == {"region": "x"}
    assert accessor.get_storage_options()["aws_access_key_id"] == "key1"
    assert accessor.get_storage_options()["aws_access_key_id"] == "key2"
    assert accessor.get_storage_options()["aws_access_key_id"] == "key2" and len(calls) == 2
    assert accessor.get_storage_options()["region"] == "x"
    assert "has_provider=true" in repr(accessor)
