"""Dagster assets on the other object stores: LanceIOManager and LanceTableResource with
``storage_options`` on GCS (gcp-storage-emulator), Azure (Azurite) and ``memory://``."""

from __future__ import annotations

import uuid

import dagster as dg
import lance
import pandas as pd
import pyarrow as pa
import pytest

import lance_format
from lance_assets import LanceIOManager, LanceTableResource
from lance_format.errors import StorageAccessError


@pytest.fixture(scope="module")
def gcs():
    from tests.gcs_support import start_server

    server = start_server()
    yield server
    server.server.stop()


@pytest.fixture(scope="module")
def azurite(tmp_path_factory):
    from tests.azure_support import start_azurite

    server = start_azurite(tmp_path_factory.mktemp("azurite"))
    yield server
    server.stop()


def _lake(store: str, request) -> tuple[str, dict | None, bool]:
    """(base URI, options, whether pylance can open it)"""
    if store == "gcs":
        gcs = request.getfixturevalue("gcs")
        return f"gs://{gcs.new_bucket()}/lake", gcs.options(), True
    if store == "azure":
        azurite = request.getfixturevalue("azurite")
        return f"az://{azurite.new_container()}/lake", azurite.options(), True
    return f"memory://lake-{uuid.uuid4().hex[:8]}", {}, False  # pylance's memory:// is its own


@pytest.mark.parametrize("store", ["gcs", "azure", "memory"])
def test_materialize_and_resource_on_object_stores(store, request, instance):
    base, opts, pylance_reaches = _lake(store, request)
    manager = LanceIOManager(base_uri=base, storage_options=opts)

    @dg.asset(metadata={"lance/write_mode": "append"})
    def orders() -> pa.Table:
        return pa.table({"id": [1, 2, 3], "amount": [10.0, 20.0, 30.0]})

    @dg.asset
    def big_orders(orders: pd.DataFrame) -> pd.DataFrame:
        return orders[orders["amount"] > 15].reset_index(drop=True)

    for _ in range(2):
        result = dg.materialize([orders, big_orders], resources={"io_manager": manager}, instance=instance)
        assert result.success
    assert lance_format.dataset(f"{base}/orders.lance", storage_options=opts).count_rows() == 6
    assert lance_format.dataset(f"{base}/big_orders.lance", storage_options=opts).count_rows() == 4
    if pylance_reaches:
        assert lance.dataset(f"{base}/orders.lance", storage_options=opts).version == 2

    tables = LanceTableResource(base_uri=base, storage_options=opts)
    assert tables.exists("orders") and tables.latest_version("orders") == 2
    ds, counts = tables.merge("orders", pa.table({"id": [1, 9], "amount": [11.0, 90.0]}), on="id")
    assert counts["inserted"] == 1 and counts["updated"] == 2
    assert tables.read("orders", filter="id = 9").column("amount").to_pylist() == [90.0]


def test_a_resource_with_expired_credentials_fails_typed(gcs, instance):
    from tests.gcs_support import EXPIRED_TOKEN

    base = f"gs://{gcs.new_bucket()}/lake"
    expired = {"google_base_url": gcs.endpoint, "allow_http": "true", "google_storage_token": EXPIRED_TOKEN}
    with pytest.raises(StorageAccessError, match="GCS"):
        LanceTableResource(base_uri=base, storage_options=expired).write("t", pa.table({"id": [1]}))
