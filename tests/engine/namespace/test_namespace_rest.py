"""The REST namespace: pylance 14.0.2's RestNamespace drives this engine's server on 127.0.0.1,
this engine's RestNamespace drives pylance's server and ours; bearer tokens; no path escapes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("lance_namespace")
pytest.importorskip("uvicorn")
pylance = pytest.importorskip("lance")

from lance.namespace import RestAdapter as PyServer  # noqa: E402
from lance.namespace import RestNamespace as PyClient  # noqa: E402
from lance_namespace import (  # noqa: E402
    CountTableRowsRequest,
    CreateNamespaceRequest,
    CreateTableRequest,
    CreateTableTagRequest,
    DeclareTableRequest,
    DeleteFromTableRequest,
    DescribeNamespaceRequest,
    DescribeTableRequest,
    DropNamespaceRequest,
    DropTableRequest,
    GetTableTagVersionRequest,
    InsertIntoTableRequest,
    ListNamespacesRequest,
    ListTablesRequest,
    ListTableVersionsRequest,
    MergeInsertIntoTableRequest,
    NamespaceExistsRequest,
    QueryTableRequest,
    RegisterTableRequest,
    TableExistsRequest,
    UpdateTableRequest,
)
from lance_namespace.errors import (  # noqa: E402
    InvalidInputError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnauthenticatedError,
)

import lance_format  # noqa: E402
from lance_format.namespace import RestNamespace as OurClient  # noqa: E402
from lance_format.namespace.adapter import RestAdapter as OurServer  # noqa: E402
from tests.namespace_support import ipc, orders, ours  # noqa: E402


def exercise(ns, root) -> None:
    """Every operation through a REST client, with its typed errors."""
    ns.create_namespace(CreateNamespaceRequest(id=["sales"], properties={"owner": "ops@example.com"}))
    assert ns.list_namespaces(ListNamespacesRequest(id=[])).namespaces == ["sales"]
    assert ns.describe_namespace(DescribeNamespaceRequest(id=["sales"])).properties == {"owner": "ops@example.com"}
    with pytest.raises(NamespaceNotFoundError):
        ns.namespace_exists(NamespaceExistsRequest(id=["nope"]))

    ns.create_table(CreateTableRequest(id=["sales", "orders"]), ipc(orders()))
    with pytest.raises(TableAlreadyExistsError):
        ns.create_table(CreateTableRequest(id=["sales", "orders"]), ipc(orders()))
    assert ns.list_tables(ListTablesRequest(id=["sales"])).tables == ["orders"]
    ns.table_exists(TableExistsRequest(id=["sales", "orders"]))
    assert ns.count_table_rows(CountTableRowsRequest(id=["sales", "orders"])).count == 6
    assert ns.insert_into_table(InsertIntoTableRequest(id=["sales", "orders"], mode="append"),
                                ipc(orders(6, 2))).num_inserted_rows == 2
    merged = ns.merge_insert_into_table(
        MergeInsertIntoTableRequest(id=["sales", "orders"], on=["id"], when_matched_update_all=True,
                                    when_not_matched_insert_all=True), ipc(orders(7, 3)))
    assert (merged.num_updated_rows, merged.num_inserted_rows) == (1, 2)
    assert ns.update_table(UpdateTableRequest(id=["sales", "orders"], predicate="region = 'us'",
                                              updates=[["email", "'us@example.com'"]])).updated_rows == 2
    ns.delete_from_table(DeleteFromTableRequest(id=["sales", "orders"], predicate="id >= 8"))
    data = ns.query_table(QueryTableRequest(id=["sales", "orders"], k=0, vector={"single_vector": []},
                                            filter="region = 'us'", columns={"column_names": ["id", "email"]})).data
    assert pa.ipc.open_file(pa.BufferReader(data)).read_all().sort_by("id").to_pydict() == {
        "id": [0, 5], "email": ["us@example.com"] * 2}
    assert [v.version for v in ns.list_table_versions(ListTableVersionsRequest(id=["sales", "orders"])).versions] \
        == [1, 2, 3, 4, 5]
    ns.create_table_tag(CreateTableTagRequest(id=["sales", "orders"], tag="first", version=1))
    assert ns.get_table_tag_version(GetTableTagVersionRequest(id=["sales", "orders"], tag="first")).version == 1

    location = ns.describe_table(DescribeTableRequest(id=["sales", "orders"])).location
    assert pylance.dataset(location.replace("file://", "")).count_rows() == 8
    ns.declare_table(DeclareTableRequest(id=["sales", "planned"]))
    pylance.write_dataset(orders(50, 2), os.path.join(root, "ext", "clicks.lance"))
    ns.register_table(RegisterTableRequest(id=["sales", "clicks"], location="ext/clicks.lance"))
    assert ns.list_tables(ListTablesRequest(id=["sales"])).tables == ["clicks", "orders", "planned"]
    with pytest.raises(InvalidInputError):
        ns.register_table(RegisterTableRequest(id=["sales", "bad"], location="../outside.lance"))
    with pytest.raises(NamespaceNotEmptyError):
        ns.drop_namespace(DropNamespaceRequest(id=["sales"]))
    ns.drop_table(DropTableRequest(id=["sales", "orders"]))
    with pytest.raises(TableNotFoundError):
        ns.describe_table(DescribeTableRequest(id=["sales", "orders"]))


def test_pylance_client_drives_our_server(tmp_path):
    with OurServer("dir", {"root": str(tmp_path)}, port=0) as server:
        client = PyClient(uri=f"http://127.0.0.1:{server.port}")
        exercise(client, str(tmp_path))
        # pylance's dataset/write_dataset through its REST client and our server
        pylance.write_dataset(orders(), namespace_client=client, table_id=["sales", "events"])
        assert pylance.dataset(namespace_client=client, table_id=["sales", "events"]).count_rows() == 6
    # the server kept the catalog in pylance's format: pylance's directory namespace reads it
    from lance.namespace import DirectoryNamespace

    local = DirectoryNamespace(root=str(tmp_path))
    assert local.list_tables(ListTablesRequest(id=["sales"])).tables == ["clicks", "events", "planned"]


def test_our_client_drives_pylances_server(tmp_path):
    with PyServer("dir", {"root": str(tmp_path)}, port=0) as server:
        client = OurClient(uri=f"http://127.0.0.1:{server.port}")
        exercise(client, str(tmp_path))
        lance_format.write_dataset(orders(), namespace_client=client, table_id=["sales", "events"])
        assert lance_format.dataset(namespace_client=client, table_id=["sales", "events"]).count_rows() == 6


def test_our_client_drives_our_server(tmp_path):
    with OurServer("dir", {"root": str(tmp_path)}, port=0) as server:
        exercise(OurClient(uri=f"http://127.0.0.1:{server.port}"), str(tmp_path))
    assert ours(tmp_path).list_namespaces(ListNamespacesRequest(id=[])).namespaces == ["sales"]


def test_bearer_token(tmp_path):
    with OurServer("dir", {"root": str(tmp_path)}, port=0, token="s3cr3t") as server:
        uri = f"http://127.0.0.1:{server.port}"
        for client in (PyClient(uri=uri), OurClient(uri=uri), OurClient(uri=uri, **{"header.Authorization": "Bearer x"})):
            with pytest.raises(UnauthenticatedError):
                client.list_namespaces(ListNamespacesRequest(id=[]))
        for client in (PyClient(uri=uri, **{"header.Authorization": "Bearer s3cr3t"}),
                       OurClient(uri=uri, **{"header.Authorization": "Bearer s3cr3t"})):
            assert client.list_namespaces(ListNamespacesRequest(id=[])).namespaces == []
    assert os.listdir(tmp_path) == []  # refused requests changed nothing


@pytest.mark.parametrize("segment", ["..$evil", "a$..", "%2E%2E$evil", "..%2Fevil", "a%2F..%2F..%2Fevil"])
def test_no_path_escapes_over_http(tmp_path, segment):
    root = tmp_path / "root"
    root.mkdir()
    with OurServer("dir", {"root": str(root)}, port=0) as server:
        url = f"http://127.0.0.1:{server.port}/v1/table/{segment}/declare"
        request = urllib.request.Request(url, data=b"{}", method="POST", headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as failure:
            urllib.request.urlopen(request)
        assert failure.value.code in (400, 404)
    assert sorted(os.listdir(tmp_path)) == ["root"]
    assert [n for n in os.listdir(root) if n != "__manifest"] == []


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_module(tmp_path):
    """``python -m lance_format.namespace.serve`` serves a folder pylance's client can use."""
    port = _free_port()
    repo = str(Path(__file__).resolve().parents[3])
    proc = subprocess.Popen([sys.executable, "-m", "lance_format.namespace.serve", "--root", str(tmp_path),
                             "--port", str(port)], cwd=repo, stderr=subprocess.PIPE)
    try:
        client = PyClient(uri=f"http://127.0.0.1:{port}")
        while True:  # until the server listens (or the process died)
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                continue
        client.create_namespace(CreateNamespaceRequest(id=["crm"]))
        client.create_table(CreateTableRequest(id=["crm", "leads"]), ipc(orders()))
        assert ours(tmp_path).list_tables(ListTablesRequest(id=["crm"])).tables == ["leads"]
    finally:
        proc.terminate()
        proc.wait()
