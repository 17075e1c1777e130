"""lance_format.namespace.DirectoryNamespace on its own: every operation, V1 and V2, and its errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("lance_namespace")

from lance_namespace import (  # noqa: E402
    CountTableRowsRequest,
    CreateNamespaceRequest,
    CreateTableBranchRequest,
    CreateTableRequest,
    CreateTableTagRequest,
    DeclareTableRequest,
    DeleteFromTableRequest,
    DeleteTableBranchRequest,
    DeleteTableTagRequest,
    DeregisterTableRequest,
    DescribeNamespaceRequest,
    DescribeTableRequest,
    DescribeTableVersionRequest,
    DropNamespaceRequest,
    DropTableRequest,
    GetTableTagVersionRequest,
    InsertIntoTableRequest,
    ListNamespacesRequest,
    ListTableBranchesRequest,
    ListTablesRequest,
    ListTableTagsRequest,
    ListTableVersionsRequest,
    MergeInsertIntoTableRequest,
    NamespaceExistsRequest,
    QueryTableRequest,
    RegisterTableRequest,
    RestoreTableRequest,
    TableExistsRequest,
    UpdateTableRequest,
)
from lance_namespace.errors import (  # noqa: E402
    InvalidInputError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    TableAlreadyExistsError,
    TableBranchAlreadyExistsError,
    TableBranchNotFoundError,
    TableNotFoundError,
    TableTagAlreadyExistsError,
    TableTagNotFoundError,
    UnsupportedOperationError,
)

import lance_format as lance  # noqa: E402
from tests.namespace_support import ipc, orders, ours  # noqa: E402


def _query(ns, table_id, **kw) -> pa.Table:
    data = ns.query_table(QueryTableRequest(id=table_id, k=kw.pop("k", 0), vector={"single_vector": []}, **kw)).data
    return pa.ipc.open_file(pa.BufferReader(data)).read_all()


def test_v2_table_lifecycle_and_data_operations(tmp_path):
    ns = ours(tmp_path)
    ns.create_namespace(CreateNamespaceRequest(id=["sales"], properties={"owner": "ops@example.com"}))
    created = ns.create_table(CreateTableRequest(id=["sales", "orders"]), ipc(orders()))
    assert created.version == 1
    folder = created.location.rsplit("/", 1)[1]
    assert folder.endswith("_sales$orders") and len(folder.split("_", 1)[0]) == 8  # hashed, as pylance names it

    assert ns.list_tables(ListTablesRequest(id=["sales"])).tables == ["orders"]
    assert ns.count_table_rows(CountTableRowsRequest(id=["sales", "orders"])).count == 6
    assert ns.count_table_rows(CountTableRowsRequest(id=["sales", "orders"], predicate="email IS NULL")).count == 2

    inserted = ns.insert_into_table(InsertIntoTableRequest(id=["sales", "orders"]), ipc(orders(6, 2)))
    assert (inserted.num_inserted_rows, inserted.version) == (2, 2)
    merged = ns.merge_insert_into_table(
        MergeInsertIntoTableRequest(id=["sales", "orders"], on=["id"], when_matched_update_all=True,
                                    when_not_matched_insert_all=True), ipc(orders(7, 3)))
    assert (merged.num_updated_rows, merged.num_inserted_rows, merged.version) == (1, 2, 3)
    updated = ns.update_table(UpdateTableRequest(id=["sales", "orders"], predicate="region = 'us'",
                                                 updates=[["url", "'https://us.example.com/'"]]))
    assert updated.updated_rows == 2
    ns.delete_from_table(DeleteFromTableRequest(id=["sales", "orders"], predicate="id >= 8"))

    got = _query(ns, ["sales", "orders"], filter="region = 'us'", columns={"column_names": ["id", "url"]})
    assert got.to_pydict() == {"id": [0, 5], "url": ["https://us.example.com/"] * 2}
    assert _query(ns, ["sales", "orders"], k=3).num_rows == 3

    versions = ns.list_table_versions(ListTableVersionsRequest(id=["sales", "orders"])).versions
    assert [v.version for v in versions] == [1, 2, 3, 4, 5]
    assert versions[0].manifest_path.endswith("_versions/18446744073709551614.manifest")
    assert ns.describe_table_version(DescribeTableVersionRequest(id=["sales", "orders"], version=2)).version.version == 2

    ns.create_table_tag(CreateTableTagRequest(id=["sales", "orders"], tag="first", version=1))
    with pytest.raises(TableTagAlreadyExistsError):
        ns.create_table_tag(CreateTableTagRequest(id=["sales", "orders"], tag="first", version=2))
    assert ns.get_table_tag_version(GetTableTagVersionRequest(id=["sales", "orders"], tag="first")).version == 1
    assert list(ns.list_table_tags(ListTableTagsRequest(id=["sales", "orders"])).tags) == ["first"]
    ns.delete_table_tag(DeleteTableTagRequest(id=["sales", "orders"], tag="first"))
    with pytest.raises(TableTagNotFoundError):
        ns.get_table_tag_version(GetTableTagVersionRequest(id=["sales", "orders"], tag="first"))

    ns.restore_table(RestoreTableRequest(id=["sales", "orders"], version=1))
    assert ns.count_table_rows(CountTableRowsRequest(id=["sales", "orders"])).count == 6
    described = ns.describe_table(DescribeTableRequest(id=["sales", "orders"], load_detailed_metadata=True))
    assert (described.table, described.namespace, described.version) == ("orders", ["sales"], 6)

    with pytest.raises(NamespaceNotEmptyError):
        ns.drop_namespace(DropNamespaceRequest(id=["sales"]))
    dropped = ns.drop_table(DropTableRequest(id=["sales", "orders"]))
    assert not os.path.exists(dropped.location[len("file://"):])
    with pytest.raises(TableNotFoundError):
        ns.table_exists(TableExistsRequest(id=["sales", "orders"]))
    ns.drop_namespace(DropNamespaceRequest(id=["sales"]))
    with pytest.raises(NamespaceNotFoundError):
        ns.namespace_exists(NamespaceExistsRequest(id=["sales"]))


def test_branches(tmp_path):
    ns = ours(tmp_path)
    ns.create_table(CreateTableRequest(id=["t"]), ipc(orders()))
    ns.insert_into_table(InsertIntoTableRequest(id=["t"]), ipc(orders(6, 1)))
    ns.create_table_branch(CreateTableBranchRequest(id=["t"], name="dev", from_version=1))
    ns.create_table_branch(CreateTableBranchRequest(id=["t"], name="child", from_branch="dev"))
    with pytest.raises(TableBranchAlreadyExistsError):
        ns.create_table_branch(CreateTableBranchRequest(id=["t"], name="dev"))
    branches = ns.list_table_branches(ListTableBranchesRequest(id=["t"])).branches
    assert (branches["dev"].parent_version, branches["dev"].parent_branch) == (1, None)
    assert branches["child"].parent_branch == "dev"
    assert lance.dataset(str(tmp_path / "t.lance")).checkout_version(("dev", None)).count_rows() == 6
    ns.delete_table_branch(DeleteTableBranchRequest(id=["t"], name="child"))
    with pytest.raises(TableBranchNotFoundError):
        ns.delete_table_branch(DeleteTableBranchRequest(id=["t"], name="child"))
    assert list(ns.list_table_branches(ListTableBranchesRequest(id=["t"])).branches) == ["dev"]


def test_v2_namespaces(tmp_path):
    ns = ours(tmp_path)
    assert ns.describe_namespace(DescribeNamespaceRequest(id=[])).properties == {}
    ns.create_namespace(CreateNamespaceRequest(id=["a"], properties={"team": "growth"}))
    ns.create_namespace(CreateNamespaceRequest(id=["a", "b"]))
    ns.create_namespace(CreateNamespaceRequest(id=["c"]))
    with pytest.raises(NamespaceAlreadyExistsError):
        ns.create_namespace(CreateNamespaceRequest(id=["a"]))
    ns.create_namespace(CreateNamespaceRequest(id=["a"], mode="exist_ok", properties={"x": "y"}))
    assert ns.describe_namespace(DescribeNamespaceRequest(id=["a"])).properties == {"team": "growth"}
    ns.create_namespace(CreateNamespaceRequest(id=["a"], mode="overwrite", properties={"x": "y"}))
    assert ns.describe_namespace(DescribeNamespaceRequest(id=["a"])).properties == {"x": "y"}
    with pytest.raises(NamespaceNotFoundError):
        ns.create_namespace(CreateNamespaceRequest(id=["missing", "child"]))
    assert ns.list_namespaces(ListNamespacesRequest(id=[])).namespaces == ["a", "c"]
    assert ns.list_namespaces(ListNamespacesRequest(id=["a"])).namespaces == ["b"]
    page = ns.list_namespaces(ListNamespacesRequest(id=[], limit=1))
    assert page.namespaces == ["a"]
    assert ns.list_namespaces(ListNamespacesRequest(id=[], page_token=page.page_token)).namespaces == ["c"]
    with pytest.raises(NamespaceNotEmptyError, match="'a'"):
        ns.drop_namespace(DropNamespaceRequest(id=["a"]))
    ns.drop_namespace(DropNamespaceRequest(id=["missing"], mode="skip"))
    with pytest.raises(NamespaceNotFoundError):
        ns.list_tables(ListTablesRequest(id=["missing"]))


def test_declare_register_deregister(tmp_path):
    ns = ours(tmp_path)
    declared = ns.declare_table(DeclareTableRequest(id=["events"]))
    assert declared.location == f"file://{tmp_path}/events.lance"
    assert os.path.exists(tmp_path / "events.lance" / ".lance-reserved")
    assert ns.describe_table(DescribeTableRequest(id=["events"], check_declared=True)).is_only_declared is True
    ns.create_table(CreateTableRequest(id=["filled"]), ipc(orders()))
    assert ns.list_tables(ListTablesRequest(id=[])).tables == ["events", "filled"]
    assert ns.list_tables(ListTablesRequest(id=[], include_declared=False)).tables == ["filled"]
    with pytest.raises(TableAlreadyExistsError):
        ns.declare_table(DeclareTableRequest(id=["events"]))
    ds = lance.write_dataset(orders(), namespace_client=ns, table_id=["other"])
    assert ds.count_rows() == 6
    ds = lance.write_dataset(orders(6, 2), namespace_client=ns, table_id=["other"], mode="append")
    assert lance.dataset(namespace_client=ns, table_id=["other"]).count_rows() == 8

    lance.write_dataset(orders(), str(tmp_path / "external" / "clicks.lance"))
    ns.register_table(RegisterTableRequest(id=["clicks"], location="external/clicks.lance"))
    assert lance.dataset(namespace_client=ns, table_id=["clicks"]).count_rows() == 6
    with pytest.raises(TableAlreadyExistsError):
        ns.register_table(RegisterTableRequest(id=["clicks"], location="external/clicks.lance"))
    gone = ns.deregister_table(DeregisterTableRequest(id=["clicks"]))
    assert gone.location.endswith("external/clicks.lance")
    assert os.path.exists(tmp_path / "external" / "clicks.lance" / "_versions")  # data stays
    with pytest.raises(TableNotFoundError):
        ns.deregister_table(DeregisterTableRequest(id=["clicks"]))


@pytest.mark.parametrize("bad", [["..", "x"], ["a/b"], ["../escape"], [""], ["a$b"], ["."], ["x\\y"]])
def test_path_escapes_refused(tmp_path, bad):
    ns = ours(tmp_path / "root")
    with pytest.raises(InvalidInputError, match="not allowed"):
        ns.declare_table(DeclareTableRequest(id=bad))
    with pytest.raises(InvalidInputError):
        ns.create_table(CreateTableRequest(id=bad), ipc(orders()))
    assert not os.path.exists(tmp_path / "escape.lance") and not os.path.exists(tmp_path / "x.lance")


@pytest.mark.parametrize("location", ["../outside.lance", "/abs/t.lance", "a/../../t.lance", "s3://b/t.lance"])
def test_register_location_escapes_refused(tmp_path, location):
    with pytest.raises(InvalidInputError, match="not allowed"):
        ours(tmp_path).register_table(RegisterTableRequest(id=["t"], location=location))


def test_v1_directory_listing(tmp_path):
    ns = ours(tmp_path, manifest_enabled="false")
    ns.create_table(CreateTableRequest(id=["b"]), ipc(orders()))
    ns.declare_table(DeclareTableRequest(id=["a"]))
    assert sorted(os.listdir(tmp_path)) == ["a.lance", "b.lance"]  # no __manifest in V1
    assert ns.list_tables(ListTablesRequest(id=[])).tables == ["a", "b"]
    assert ns.list_namespaces(ListNamespacesRequest(id=[])).namespaces == []
    with pytest.raises(UnsupportedOperationError):
        ns.create_namespace(CreateNamespaceRequest(id=["x"]))
    with pytest.raises(UnsupportedOperationError):
        ns.create_table(CreateTableRequest(id=["x", "y"]), ipc(orders()))
    with pytest.raises(UnsupportedOperationError):
        ns.register_table(RegisterTableRequest(id=["r"], location="b.lance"))
    with pytest.raises(TableAlreadyExistsError):
        ns.create_table(CreateTableRequest(id=["b"]), ipc(orders()))
    ns.drop_table(DropTableRequest(id=["b"]))
    assert ns.list_tables(ListTablesRequest(id=[])).tables == ["a"]


def test_bad_requests(tmp_path):
    ns = ours(tmp_path)
    with pytest.raises(InvalidInputError, match="Arrow IPC"):
        ns.create_table(CreateTableRequest(id=["t"]), b"not arrow")
    ns.create_table(CreateTableRequest(id=["t"]), ipc(orders()))
    with pytest.raises(InvalidInputError, match="predicate"):
        ns.delete_from_table(DeleteFromTableRequest(id=["t"], predicate=""))
    with pytest.raises(UnsupportedOperationError, match="vector"):
        ns.query_table(QueryTableRequest(id=["t"], k=3, vector={"single_vector": [1.0, 2.0]}))
    with pytest.raises(TableNotFoundError, match="nope"):
        ns.count_table_rows(CountTableRowsRequest(id=["nope"]))
    with pytest.raises(InvalidInputError, match="root"):
        lance.namespace.DirectoryNamespace()


def test_connect_without_official_lance(tmp_path):
    """With ``lance`` not importable, ``lance_namespace.connect("dir")`` reaches this engine."""
    script = (
        "import sys; sys.modules['lance'] = None\n"
        "import lance_format.namespace, lance_namespace\n"
        f"ns = lance_namespace.connect('dir', {{'root': {str(tmp_path)!r}}})\n"
        "print(type(ns).__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=str(Path(__file__).resolve().parents[3]))
    assert out.stdout.strip() == "lance_format.namespace.directory"


def test_engine_imports_lance_namespace_only_when_used(tmp_path):
    """``import lance_format`` and plain tables need no ``lance-namespace``; asking for
    ``lance_format.namespace`` without it names the extra."""
    script = (
        "import importlib.abc, sys\n"
        "class Absent(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('lance_namespace', 'lance_namespace_urllib3_client'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Absent())\n"
        "import pyarrow as pa, lance_format\n"
        f"ds = lance_format.write_dataset(pa.table({{'id': [1, 2]}}), {str(tmp_path / 't.lance')!r})\n"
        "assert ds.count_rows() == 2 and 'lance_namespace' not in sys.modules\n"
        "try:\n"
        "    lance_format.namespace\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=str(Path(__file__).resolve().parents[3]))
    assert "lance-assets[namespace]" in out.stdout
