"""Tables on Azure Blob Storage (``az://``, ``abfss://``) against Azurite, started by the suite
on 127.0.0.1: every write path, ``If-None-Match: *`` commits including a refused one,
concurrent committers (ours and pylance's), pylance both ways, option validation, and the
failure paths (throttling through a fault proxy, expired SAS and wrong keys that Azurite refuses)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, StorageAccessError, StorageThrottledError, UnsupportedFeatureError
from lance_format.io import ObjectStore
from lance_format.io.azure import EMULATOR_ACCOUNT, EMULATOR_KEY, AzureBackend, azure_config
from tests import storage_contract as contract
from tests.azure_support import start_azurite
from tests.compat import SYSTEM, assert_tables_equal
from tests.http_faults import FaultProxy


@pytest.fixture(scope="module")
def azurite(tmp_path_factory):
    server = start_azurite(tmp_path_factory.mktemp("azurite"))
    yield server
    server.stop()


@pytest.fixture
def container(azurite):
    return azurite.new_container()


def _same_as_pylance(uri: str, opts: dict, version: int) -> None:
    ours = lance_format.dataset(uri, version=version, storage_options=opts)
    theirs = lance.dataset(uri, version=version, storage_options=opts)
    assert ours.schema.equals(theirs.schema, check_metadata=True)
    cols = ours.schema.names + SYSTEM
    assert_tables_equal(ours.to_table(columns=cols), theirs.to_table(columns=cols), f"azure version {version}")


def test_every_write_path_matches_pylance(azurite, container):
    opts = azurite.options()
    uri = f"az://{container}/tables/people.lance"
    latest = contract.mutate(uri, opts)
    assert lance_format.dataset(uri, storage_options=opts).versions() == \
        lance.dataset(uri, storage_options=opts).versions()
    for version in range(1, latest + 1):
        _same_as_pylance(uri, opts, version)
    keys = azurite.keys(container, "tables/people.lance/")
    assert keys and not [k for k in keys if k.endswith("/") or "/.tmp" in k or k.endswith("hint.json")]


def test_history_cleanup_and_tags_match_local(azurite, container, tmp_path):
    opts = azurite.options()
    contract.check_history_matches_local(f"az://{container}/h.lance", opts, str(tmp_path / "h.lance"))
    contract.check_tags(f"az://{container}/tagged.lance", opts)
    assert lance.dataset(f"az://{container}/tagged.lance", storage_options=opts).tags.list()["first"]["version"] == 1


def test_we_read_and_extend_a_table_pylance_wrote(azurite, container):
    opts = azurite.options()
    uri = f"az://{container}/theirs.lance"
    lance.write_dataset(pa.table({"id": [1, 2], "v": [0.5, 1.5]}), uri, storage_options=opts)
    lance.write_dataset(pa.table({"id": [3], "v": [2.5]}), uri, mode="append", storage_options=opts)
    lance.dataset(uri, storage_options=opts).delete("id = 1")
    for version in (1, 2, 3):
        _same_as_pylance(uri, opts, version)
    lance_format.dataset(uri, storage_options=opts).update({"v": "v * 2"}, where="id = 3")
    assert lance.dataset(uri, storage_options=opts).to_table().sort_by("id").to_pydict() == {
        "id": [2, 3], "v": [1.5, 5.0]}


def test_abfss_uri_names_the_account(azurite, container):
    opts = {k: v for k, v in azurite.options().items() if k != "azure_storage_account_name"}
    uri = f"abfss://{container}@{EMULATOR_ACCOUNT}.dfs.core.windows.net/adls.lance"
    lance_format.write_dataset(pa.table({"id": [1, 2]}), uri, storage_options=opts)
    assert lance_format.dataset(f"az://{container}/adls.lance", storage_options=azurite.options()).count_rows() == 2
    assert ObjectStore(uri, opts).uri == uri


def test_conditional_puts_have_one_winner(azurite, container):
    contract.check_racing_puts(ObjectStore(f"az://{container}/t", azurite.options()))
    contract.check_pickles(ObjectStore(f"az://{container}/p", azurite.options()))


def test_a_refused_conditional_put_retries_at_the_next_version(azurite, container, monkeypatch):
    opts = azurite.options()
    uri = f"az://{container}/raced.lance"
    lance_format.write_dataset(pa.table({"id": [0]}), uri, storage_options=opts)
    original = AzureBackend.put_if_absent
    refused: list[str] = []

    def another_writer_first(self, path, data, *, relative):
        if relative.startswith("_versions/") and not refused:
            # pylance commits version 2 between our listing and our upload of version 2
            lance.write_dataset(pa.table({"id": [100]}), uri, mode="append", storage_options=opts)
            won = original(self, path, data, relative=relative)
            assert won is False  # Azurite refused our If-None-Match: * upload
            refused.append(relative)
            return won
        return original(self, path, data, relative=relative)

    monkeypatch.setattr(AzureBackend, "put_if_absent", another_writer_first)
    ds = lance_format.write_dataset(pa.table({"id": [1]}), uri, mode="append", storage_options=opts)
    assert refused and ds.version == 3
    assert sorted(lance.dataset(uri, storage_options=opts).to_table().column("id").to_pylist()) == [0, 1, 100]


def test_concurrent_committers_ours_and_pylance(azurite, container):
    opts = azurite.options()

    def pylance_ids(uri: str) -> list[int]:
        return sorted(lance.dataset(uri, storage_options=opts).to_table().column("id").to_pylist())

    contract.check_concurrent_committers(f"az://{container}/c.lance", opts, writers=3, read=pylance_ids)

    uri = f"az://{container}/mixed.lance"
    lance_format.write_dataset(pa.table({"id": [0]}), uri, storage_options=opts)
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def run(fn) -> None:
        try:
            barrier.wait()
            fn()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    writers = [
        lambda: lance_format.write_dataset(pa.table({"id": [1]}), uri, mode="append", storage_options=opts),
        lambda: lance_format.write_dataset(pa.table({"id": [2]}), uri, mode="append", storage_options=opts),
        lambda: lance.write_dataset(pa.table({"id": [3]}), uri, mode="append", storage_options=opts),
    ]
    threads = [threading.Thread(target=run, args=(w,)) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert pylance_ids(uri) == [0, 1, 2, 3]
    assert lance_format.dataset(uri, storage_options=opts).version == 4


# -- failure paths ------------------------------------------------------------------------------
def test_latest_of_many_versions_with_one_small_listing(azurite, container):
    from lance_format.table.naming import list_versions

    uri = f"az://{container}/versions.lance"
    contract.many_versions(uri, azurite.options(), 1500)
    proxy = FaultProxy(azurite.endpoint)  # counts the requests Azurite answers
    try:
        opts = azurite.options(azure_storage_endpoint=proxy.endpoint)

        def listings() -> list[str]:
            return [r for r in proxy.requests if "comp=list" in r]

        ds = lance_format.dataset(uri, storage_options=opts)
        assert ds.version == 1500 and ds.count_rows() == 1
        # one page of 100 names (a full listing read all 1500 names at once)
        assert len(listings()) == 1 and "maxresults=100" in listings()[0], listings()
        proxy.requests.clear()
        assert lance_format.dataset(uri, version=1450, storage_options=opts).version == 1450
        assert len(listings()) <= 2
        ds = lance_format.write_dataset(pa.table({"id": [2]}), ds, mode="append")
        assert ds.version == 1501 and lance.dataset(uri, storage_options=azurite.options()).version == 1501
        assert sorted(list_versions(ObjectStore(uri, opts)).versions) == list(range(1, 1502))
        # V1 names do not sort by version: listed in full, page after page (continuation markers)
        v1 = f"az://{container}/v1.lance"
        contract.many_versions(v1, opts, 250, v2_names=False)
        proxy.requests.clear()
        assert lance_format.dataset(v1, storage_options=opts).version == 250
        assert lance.dataset(v1, storage_options=azurite.options()).version == 250
        assert len(listings()) == 2 and "marker=" in listings()[1], listings()
    finally:
        proxy.stop()


def test_throttling_is_retried_with_a_bound(azurite, container):
    uri = f"az://{container}/throttled.lance"
    lance_format.write_dataset(pa.table({"id": [1, 2]}), uri, storage_options=azurite.options())
    proxy = FaultProxy(azurite.endpoint)
    try:
        opts = azurite.options(azure_storage_endpoint=proxy.endpoint)
        proxy.throttle[:] = [503, 429, 503]
        assert lance_format.dataset(uri, storage_options=opts).count_rows() == 2
        assert not proxy.throttle
        proxy.throttle[:] = [429, 503]
        lance_format.write_dataset(pa.table({"id": [3]}), uri, mode="append", storage_options=opts)
        proxy.throttle[:] = [503] * 20
        with pytest.raises(StorageThrottledError, match="Azure") as info:
            lance_format.dataset(uri, storage_options={**opts, "client_max_retries": "2"})
        assert info.value.table == uri and 20 - len(proxy.throttle) == 3  # 1 try + 2 retries
        proxy.throttle.clear()
        assert lance_format.dataset(uri, storage_options=opts).count_rows() == 3
    finally:
        proxy.stop()


def test_expired_or_wrong_credentials_raise_a_typed_error(azurite, container):
    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    uri = f"az://{container}/creds.lance"
    lance_format.write_dataset(pa.table({"id": [1]}), uri, storage_options=azurite.options())

    def sas(expiry: datetime) -> str:
        return generate_container_sas(EMULATOR_ACCOUNT, container, account_key=EMULATOR_KEY,
                                      permission=ContainerSasPermissions(read=True, write=True, list=True,
                                                                         delete=True, create=True),
                                      expiry=expiry, start=expiry - timedelta(hours=2))

    base = {"azure_storage_account_name": EMULATOR_ACCOUNT, "azure_storage_endpoint": azurite.endpoint,
            "allow_http": "true"}
    valid = {**base, "azure_storage_sas_token": sas(datetime.now(UTC) + timedelta(hours=1))}
    assert lance_format.dataset(uri, storage_options=valid).count_rows() == 1  # SAS tokens work
    expired = {**base, "azure_storage_sas_token": sas(datetime.now(UTC) - timedelta(minutes=5))}
    with pytest.raises(StorageAccessError, match="Azure store refused") as info:
        lance_format.dataset(uri, storage_options=expired)
    assert info.value.table == uri
    wrong_key = azurite.options(azure_storage_account_key=EMULATOR_KEY[:-4] + "AAA=")
    with pytest.raises(StorageAccessError):
        lance_format.write_dataset(pa.table({"id": [2]}), f"az://{container}/new.lance", storage_options=wrong_key)


def test_azure_options_are_validated(monkeypatch):
    with pytest.raises(InvalidInputError, match="azure_storage_acount_name"):
        ObjectStore("az://c/t", {"azure_storage_acount_name": "x"})
    with pytest.raises(UnsupportedFeatureError, match="azure_client_secret"):
        ObjectStore("az://c/t", {"account_name": "a", "azure_client_secret": "s"})
    with pytest.raises(InvalidInputError, match="allow_http"):
        ObjectStore("az://c/t", {"account_name": "a", "azure_storage_endpoint": "http://127.0.0.1:1/a"})
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT_NAME", raising=False)
    with pytest.raises(InvalidInputError, match="account"):
        ObjectStore("az://c/t", {})
    with pytest.raises(InvalidInputError, match="abfss://container@account"):
        ObjectStore("abfss://c/t", {})
    config = azure_config("c", None, {"use_emulator": "true"}, environ={"AZURITE_BLOB_STORAGE_URL": "http://h:1"})
    assert (config.account, config.account_url) == (EMULATOR_ACCOUNT, f"http://h:1/{EMULATOR_ACCOUNT}")
    assert config.credential == ("key", EMULATOR_KEY)
    from_env = azure_config("c", None, {}, environ={"AZURE_STORAGE_ACCOUNT_NAME": "acct", "AZURE_STORAGE_TOKEN": "t"})
    assert from_env.account_url == "https://acct.blob.core.windows.net" and from_env.credential == ("token", "t")
    assert azure_config("c", "uri-account", {"account_name": "x", "access_key": "k"}, environ={}).account == \
        "uri-account"


def test_pylance_reaches_azurite_through_use_emulator(azurite, container, monkeypatch):
    # Lance's emulator switch: the well-known account on AZURITE_BLOB_STORAGE_URL
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", azurite.endpoint.rsplit("/", 1)[0])
    opts = {"azure_storage_use_emulator": "true", "azure_storage_account_name": EMULATOR_ACCOUNT}
    uri = f"az://{container}/emulated.lance"
    lance_format.write_dataset(pa.table({"id": [1, 2, 3]}), uri, storage_options=opts)
    assert lance.dataset(uri, storage_options=opts).count_rows() == 3
    lance.write_dataset(pa.table({"id": [4]}), uri, mode="append", storage_options=opts)
    assert lance_format.dataset(uri, storage_options=opts).count_rows() == 4


def test_spark_write_and_read_on_azure(spark, azurite, container):
    from lance_format import spark as lance_spark

    opts = azurite.options()
    uri = f"az://{container}/spark.lance"
    df = spark.createDataFrame([(i, f"n{i}") for i in range(20)], "id long, name string").repartition(2)
    result = lance_spark.write_dataframe(df, uri, storage_options=opts)
    assert result.version == 1 and result.rows == 20
    back = lance_spark.read_dataframe(spark, uri, storage_options=opts, filter="id >= 5").toPandas()
    assert sorted(back["id"].tolist()) == list(range(5, 20))
    assert lance.dataset(uri, storage_options=opts).count_rows() == 20
