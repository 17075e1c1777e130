"""The REST spec's operations: route suffix -> (LanceNamespace method, request model, kind, status).

Shared by the server (:mod:`lance_format.namespace.server`) and the client
(:mod:`lance_format.namespace.rest`), which needs no web framework.
"""

from __future__ import annotations

# kinds of operation: JSON body in, JSON out; Arrow body in (query parameters), JSON out;
# JSON in, Arrow out; JSON in, 204 out (the *_exists checks)
JSON, ROWS_IN, ROWS_OUT, EMPTY_OUT = "json", "rows_in", "rows_out", "empty_out"

# route suffix -> (LanceNamespace method, request model name, kind, status on success)
NAMESPACE_ROUTES = {
    "create": ("create_namespace", "CreateNamespaceRequest", JSON, 200),
    "list": ("list_namespaces", "ListNamespacesRequest", JSON, 200),
    "describe": ("describe_namespace", "DescribeNamespaceRequest", JSON, 200),
    "drop": ("drop_namespace", "DropNamespaceRequest", JSON, 200),
    "exists": ("namespace_exists", "NamespaceExistsRequest", EMPTY_OUT, 204),
    "table/list": ("list_tables", "ListTablesRequest", JSON, 200),
}
TABLE_ROUTES = {
    "create": ("create_table", "CreateTableRequest", ROWS_IN, 200),
    "declare": ("declare_table", "DeclareTableRequest", JSON, 200),
    "register": ("register_table", "RegisterTableRequest", JSON, 200),
    "describe": ("describe_table", "DescribeTableRequest", JSON, 200),
    "exists": ("table_exists", "TableExistsRequest", EMPTY_OUT, 204),
    "drop": ("drop_table", "DropTableRequest", JSON, 200),
    "deregister": ("deregister_table", "DeregisterTableRequest", JSON, 200),
    "count_rows": ("count_table_rows", "CountTableRowsRequest", JSON, 200),
    "insert": ("insert_into_table", "InsertIntoTableRequest", ROWS_IN, 200),
    "merge_insert": ("merge_insert_into_table", "MergeInsertIntoTableRequest", ROWS_IN, 200),
    "update": ("update_table", "UpdateTableRequest", JSON, 200),
    "delete": ("delete_from_table", "DeleteFromTableRequest", JSON, 200),
    "query": ("query_table", "QueryTableRequest", ROWS_OUT, 200),
    "restore": ("restore_table", "RestoreTableRequest", JSON, 200),
    "version/list": ("list_table_versions", "ListTableVersionsRequest", JSON, 200),
    "version/describe": ("describe_table_version", "DescribeTableVersionRequest", JSON, 200),
    "tags/list": ("list_table_tags", "ListTableTagsRequest", JSON, 200),
    "tags/version": ("get_table_tag_version", "GetTableTagVersionRequest", JSON, 200),
    "tags/create": ("create_table_tag", "CreateTableTagRequest", JSON, 200),
    "tags/delete": ("delete_table_tag", "DeleteTableTagRequest", JSON, 200),
    "tags/update": ("update_table_tag", "UpdateTableTagRequest", JSON, 200),
    "branches/create": ("create_table_branch", "CreateTableBranchRequest", JSON, 200),
    "branches/list": ("list_table_branches", "ListTableBranchesRequest", JSON, 200),
    "branches/delete": ("delete_table_branch", "DeleteTableBranchRequest", JSON, 200),
}
