"""``RestNamespace``: a client of official Lance's REST namespace spec on the generated client
(``lance_namespace_urllib3_client``, which the ``lance-namespace`` package depends on).

Each ``LanceNamespace`` operation calls the generated API method of the same name, filling its
parameters by name: the object id joined with the delimiter, the request model, the Arrow IPC
body, and query parameters from the request's fields. HTTP errors come back as the package's
typed errors (from the ``code`` of the spec's ``ErrorResponse``).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import lance_namespace
import lance_namespace_urllib3_client as client
from lance_namespace import LanceNamespace
from lance_namespace.errors import ErrorCode, InternalError, from_error_code

from lance_format.namespace.routes import NAMESPACE_ROUTES, TABLE_ROUTES

_APIS = ("NamespaceApi", "TableApi", "DataApi", "TagApi", "BranchApi", "MetadataApi")
_OPERATIONS = sorted({spec[0] for spec in (*NAMESPACE_ROUTES.values(), *TABLE_ROUTES.values())})


def _raise_typed(exc: Exception) -> None:
    status = getattr(exc, "status", None)
    body = getattr(exc, "body", None)
    try:
        payload = json.loads(body) if body else {}
    except (ValueError, TypeError):
        payload = {}
    if isinstance(payload, dict) and "code" in payload:
        raise from_error_code(int(payload["code"]), str(payload.get("error") or payload)) from exc
    code = {404: ErrorCode.TABLE_NOT_FOUND, 401: ErrorCode.UNAUTHENTICATED, 403: ErrorCode.PERMISSION_DENIED,
            400: ErrorCode.INVALID_INPUT, 406: ErrorCode.UNSUPPORTED, 503: ErrorCode.SERVICE_UNAVAILABLE}
    if status in code:
        raise from_error_code(int(code[status]), f"HTTP {status}: {body}") from exc
    raise InternalError(f"HTTP {status}: {body or exc}") from exc


class RestNamespace(LanceNamespace):
    """A REST namespace, as pylance's ``lance.namespace.RestNamespace``.

    Parameters
    ----------
    uri
        The server, ``http://host:port``.
    delimiter
        Joins an id's parts in URLs (``$``, the spec's default).
    header.*
        HTTP headers sent with every request (``header.Authorization="Bearer ..."``).
    context_provider
        An object with ``provide_context(info) -> dict`` (pylance's ``DynamicContextProvider``),
        asked before each request (``info``: ``operation``, ``object_id``); its
        ``headers.<Name>`` entries are sent as HTTP headers.
    """

    def __init__(self, session: Any = None, context_provider: Any = None, **properties: Any) -> None:
        uri = properties.get("uri")
        if not uri:
            raise lance_namespace.InvalidInputError("RestNamespace needs a 'uri' property (http://host:port)")
        self._uri = str(uri).rstrip("/")
        self._delimiter = str(properties.get("delimiter") or "$")
        api_client = client.ApiClient(client.Configuration(host=self._uri))
        for key, value in properties.items():
            if key.startswith("header."):
                api_client.set_default_header(key[len("header."):], str(value))
        self._apis = [getattr(client, name)(api_client) for name in _APIS]
        # pylance's DynamicContextProvider: per-request entries, ``headers.X`` become HTTP headers
        self._context_provider = context_provider

    def namespace_id(self) -> str:
        """A description of this namespace naming its endpoint and delimiter (pylance's text)."""
        return f'RestNamespace {{ endpoint: "{self._uri}", delimiter: "{self._delimiter}" }}'

    def __repr__(self) -> str:
        return f"RestNamespace({self.namespace_id()})"

    def _method(self, name: str) -> Callable[..., Any]:
        for api in self._apis:
            if hasattr(api, name):
                return getattr(api, name)
        raise lance_namespace.UnsupportedOperationError(f"{name} is not in the REST client")

    def _call(self, name: str, request: Any, data: bytes | None = None) -> Any:
        method = self._method(name)
        ident = list(getattr(request, "id", None) or [])
        kwargs: dict[str, Any] = {}
        for param in inspect.signature(method).parameters.values():
            if param.name == "id":
                kwargs["id"] = self._delimiter.join(ident) if ident else self._delimiter
            elif param.name == "delimiter":
                kwargs["delimiter"] = self._delimiter
            elif param.name == "body":
                kwargs["body"] = data
            elif param.name.endswith("_request") and param.name != "_request":
                kwargs[param.name] = request
            elif not param.name.startswith("_") and getattr(request, param.name, None) is not None:
                value = getattr(request, param.name)
                kwargs[param.name] = json.dumps(value) if isinstance(value, dict) else value
        if self._context_provider is not None:
            context = self._context_provider.provide_context(
                {"operation": name, "object_id": self._delimiter.join(ident)}) or {}
            headers = {k[len("headers."):]: str(v) for k, v in context.items() if k.startswith("headers.")}
            if headers:
                kwargs["_headers"] = headers
        try:
            return method(**kwargs)
        except client.ApiException as exc:
            _raise_typed(exc)

    def _operation(name: str) -> Callable[..., Any]:  # type: ignore[misc]  # noqa: N805 - builds methods
        def call(self: RestNamespace, request: Any, request_data: bytes | None = None) -> Any:
            result = self._call(name, request, request_data)
            if name == "count_table_rows":
                return lance_namespace.CountTableRowsResponse(count=int(result))
            if name == "query_table":
                return lance_namespace.QueryTableResponse(data=bytes(result))
            if name == "namespace_exists":
                return lance_namespace.NamespaceExistsResponse()
            if name == "table_exists":
                return lance_namespace.TableExistsResponse()
            return result

        call.__name__ = name
        call.__doc__ = f"``{name}`` through the REST API."
        return call

    for _name in _OPERATIONS:
        locals()[_name] = _operation(_name)
    del _name
