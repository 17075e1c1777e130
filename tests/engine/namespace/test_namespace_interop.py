"""Directory namespaces both ways against pylance 14.0.2's DirectoryNamespace (V1 and V2):
a catalog either engine writes, the other lists and opens; the ``__manifest`` table is the same
table; concurrent creators of one table leave one winner and a typed error."""

from __future__ import annotations

import json
import os
import re
import threading

import pyarrow as pa
import pytest

pytest.importorskip("lance_namespace")
pylance = pytest.importorskip("lance")

from lance_namespace import (  # noqa: E402
    CountTableRowsRequest,
    CreateNamespaceRequest,
    CreateTableRequest,
    DeclareTableRequest,
    DescribeNamespaceRequest,
    DescribeTableRequest,
    DropTableRequest,
    InsertIntoTableRequest,
    ListNamespacesRequest,
    ListTablesRequest,
    RegisterTableRequest,
)
from lance_namespace.errors import LanceNamespaceError, TableAlreadyExistsError, TableNotFoundError  # noqa: E402

import lance_format  # noqa: E402
from tests.namespace_support import ipc, orders, ours, theirs  # noqa: E402

ENGINES = {"ours": ours, "pylance": theirs}
OPEN = {"ours": lance_format.dataset, "pylance": pylance.dataset}


def build_catalog(ns, root) -> None:
    """The same catalog through either engine's namespace: namespaces with properties, a root
    table, nested tables, a declared table and a registered one."""
    ns.create_namespace(CreateNamespaceRequest(id=["sales"], properties={"owner": "ops@example.com", "tier": "gold"}))
    ns.create_namespace(CreateNamespaceRequest(id=["sales", "eu"]))
    ns.create_table(CreateTableRequest(id=["customers"]), ipc(orders(0, 4)))
    ns.create_table(CreateTableRequest(id=["sales", "orders"]), ipc(orders()))
    ns.insert_into_table(InsertIntoTableRequest(id=["sales", "orders"]), ipc(orders(6, 3)))
    ns.create_table(CreateTableRequest(id=["sales", "eu", "returns"]), ipc(orders(100, 2)))
    ns.declare_table(DeclareTableRequest(id=["sales", "planned"]))
    pylance.write_dataset(orders(50, 5), os.path.join(root, "imports", "clicks.lance"))
    ns.register_table(RegisterTableRequest(id=["sales", "clicks"], location="imports/clicks.lance"))


def check_catalog(ns, opener) -> None:
    assert ns.list_namespaces(ListNamespacesRequest(id=[])).namespaces == ["sales"]
    assert ns.list_namespaces(ListNamespacesRequest(id=["sales"])).namespaces == ["eu"]
    props = ns.describe_namespace(DescribeNamespaceRequest(id=["sales"])).properties
    assert props == {"owner": "ops@example.com", "tier": "gold"}
    assert ns.list_tables(ListTablesRequest(id=[])).tables == ["customers"]
    assert ns.list_tables(ListTablesRequest(id=["sales"])).tables == ["clicks", "orders", "planned"]
    assert ns.list_tables(ListTablesRequest(id=["sales", "eu"])).tables == ["returns"]
    expected = {("customers",): orders(0, 4), ("sales", "orders"): pa.concat_tables([orders(), orders(6, 3)]),
                ("sales", "eu", "returns"): orders(100, 2), ("sales", "clicks"): orders(50, 5)}
    for table_id, rows in expected.items():
        got = opener(namespace_client=ns, table_id=list(table_id)).to_table()
        assert got.sort_by("id").equals(rows), table_id
        assert ns.count_table_rows(CountTableRowsRequest(id=list(table_id))).count == rows.num_rows
    location = ns.describe_table(DescribeTableRequest(id=["sales", "planned"])).location
    assert os.path.exists(os.path.join(location.replace("file://", ""), ".lance-reserved"))


@pytest.mark.parametrize("writer,reader", [("pylance", "ours"), ("ours", "pylance")])
def test_v2_catalog_either_way(tmp_path, writer, reader):
    build_catalog(ENGINES[writer](tmp_path), str(tmp_path))
    check_catalog(ENGINES[reader](tmp_path), OPEN[reader])
    # and the reader keeps changing the writer's catalog, which the writer then sees
    other = ENGINES[reader](tmp_path)
    other.drop_table(DropTableRequest(id=["sales", "eu", "returns"]))
    other.create_table(CreateTableRequest(id=["sales", "eu", "refunds"]), ipc(orders(200, 3)))
    back = ENGINES[writer](tmp_path)
    assert back.list_tables(ListTablesRequest(id=["sales", "eu"])).tables == ["refunds"]
    assert OPEN[writer](namespace_client=back, table_id=["sales", "eu", "refunds"]).count_rows() == 3


def _manifest(root) -> tuple[pa.Table, object]:
    ds = pylance.dataset(os.path.join(root, "__manifest"))
    return ds.to_table(), ds


def test_v2_manifest_table_is_pylances(tmp_path):
    """The same operations leave the same ``__manifest`` table: rows, schema with field metadata,
    file version, one fragment per version, V2 manifest names, no indices (pylance 14.0.2 keeps none)."""
    for name, engine in ENGINES.items():
        root = tmp_path / name
        root.mkdir()
        build_catalog(engine(root), str(root))
    (ours_rows, ours_ds), (their_rows, their_ds) = _manifest(tmp_path / "ours"), _manifest(tmp_path / "pylance")

    def normalized(rows: pa.Table) -> list[dict]:
        out = []
        for row in rows.to_pylist():
            if row["location"] and re.fullmatch(r"[0-9a-f]{8}_.*", row["location"]):
                assert row["location"][9:] == row["object_id"]  # <8 hex>_<object id>
                row["location"] = "<hash>_" + row["object_id"]
            # pylance writes the properties from a hash map: compact JSON, keys in any order
            if row["metadata"] is not None:
                assert ": " not in row["metadata"] and ", " not in row["metadata"]
                row["metadata"] = json.loads(row["metadata"])
            out.append(row)
        return sorted(out, key=lambda r: r["object_id"])

    assert normalized(ours_rows) == normalized(their_rows)
    assert ours_ds.schema == their_ds.schema
    assert ours_ds.schema.field("object_id").metadata == their_ds.schema.field("object_id").metadata
    assert ours_ds.data_storage_version == their_ds.data_storage_version == "2.2"
    assert ours_ds.version == their_ds.version
    assert len(ours_ds.get_fragments()) == len(their_ds.get_fragments()) == 1
    assert ours_ds.describe_indices() == their_ds.describe_indices() == []
    assert sorted(os.listdir(tmp_path / "ours" / "__manifest" / "_versions")) == \
        sorted(os.listdir(tmp_path / "pylance" / "__manifest" / "_versions"))
    for root in ("ours", "pylance"):
        names = [re.sub(r"^[0-9a-f]{8}_", "<hash>_", n) for n in os.listdir(tmp_path / root) if n != "__manifest"]
        assert sorted(names) == [
            "<hash>_sales$eu$returns", "<hash>_sales$orders", "<hash>_sales$planned", "customers.lance", "imports"]


@pytest.mark.parametrize("writer,reader", [("pylance", "ours"), ("ours", "pylance")])
def test_v1_catalog_either_way(tmp_path, writer, reader):
    ns = ENGINES[writer](tmp_path, manifest_enabled="false")
    ns.create_table(CreateTableRequest(id=["orders"]), ipc(orders()))
    ns.create_table(CreateTableRequest(id=["customers"]), ipc(orders(0, 2)))
    ns.declare_table(DeclareTableRequest(id=["planned"]))
    assert "__manifest" not in os.listdir(tmp_path)
    other = ENGINES[reader](tmp_path, manifest_enabled="false")
    assert other.list_tables(ListTablesRequest(id=[])).tables == ["customers", "orders", "planned"]
    assert OPEN[reader](namespace_client=other, table_id=["orders"]).to_table().equals(orders())
    other.drop_table(DropTableRequest(id=["customers"]))
    assert ns.list_tables(ListTablesRequest(id=[])).tables == ["orders", "planned"]
    # a V1 catalog opened with the manifest on (pylance's default) still lists its folders
    upgraded = ENGINES[reader](tmp_path)
    assert upgraded.list_tables(ListTablesRequest(id=[])).tables == ["orders", "planned"]


@pytest.mark.parametrize("client", ["ours", "pylance"])
def test_each_engine_opens_through_the_others_namespace_object(tmp_path, client):
    """pylance's ``dataset(namespace_client=...)`` takes our namespace object, and ours takes pylance's."""
    ns = ENGINES[client](tmp_path)
    ns.create_namespace(CreateNamespaceRequest(id=["crm"]))
    opener = OPEN["pylance" if client == "ours" else "ours"]
    writer = pylance.write_dataset if client == "ours" else lance_format.write_dataset
    writer(orders(), namespace_client=ns, table_id=["crm", "leads"])
    writer(orders(6, 2), namespace_client=ns, table_id=["crm", "leads"], mode="append")
    assert opener(namespace_client=ns, table_id=["crm", "leads"]).count_rows() == 8
    with pytest.raises(TableNotFoundError):
        opener(namespace_client=ns, table_id=["crm", "missing"])


def _race(makers, table_id) -> list:
    """Each maker's namespace creates ``table_id`` at once; their outcomes."""
    barrier = threading.Barrier(len(makers))
    outcomes: list = [None] * len(makers)

    def run(i, ns):
        barrier.wait()
        try:
            outcomes[i] = ns.create_table(CreateTableRequest(id=table_id), ipc(orders(i * 10, 3)))
        except Exception as exc:  # noqa: BLE001 - the outcome is what the test checks
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i, maker)) for i, maker in enumerate(makers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


@pytest.mark.parametrize("table_id", [["orders"], ["sales", "orders"]])
@pytest.mark.parametrize("pair", [("ours", "ours"), ("ours", "pylance")])
def test_concurrent_creators_one_wins(tmp_path, table_id, pair):
    setup = ours(tmp_path)
    if len(table_id) > 1:
        setup.create_namespace(CreateNamespaceRequest(id=table_id[:-1]))
    for attempt in range(3):
        name = table_id[:-1] + [f"{table_id[-1]}{attempt}"]
        outcomes = _race([ENGINES[p](tmp_path) for p in pair], name)
        winners = [o for o in outcomes if not isinstance(o, Exception)]
        assert len(winners) == 1, outcomes
        for engine, outcome in zip(pair, outcomes):
            if isinstance(outcome, Exception):
                # ours always answers TableAlreadyExistsError; pylance 14 itself reports losing as
                # that, ConcurrentModificationError or InternalError(DatasetAlreadyExists)
                expected = TableAlreadyExistsError if engine == "ours" else LanceNamespaceError
                assert isinstance(outcome, expected), outcomes
        key = "$".join(name)
        rows = pylance.dataset(os.path.join(tmp_path, "__manifest")).to_table().to_pylist()
        assert [r["object_id"] for r in rows].count(key) == 1
        table = lance_format.dataset(namespace_client=ours(tmp_path), table_id=name).to_table()
        assert table.num_rows == 3
        # the loser's rows did not land anywhere the catalog lists
        assert len(setup.list_tables(ListTablesRequest(id=name[:-1])).tables) == attempt + 1
