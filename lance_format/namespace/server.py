"""A Lance Namespace REST server (official Lance's REST spec) over any ``LanceNamespace``.

Routes are the spec's (``POST /v1/namespace/{id}/create``, ``POST /v1/table/{id}/insert``, ...),
each accepted with GET or POST because clients of different spec versions use either. ``{id}``
is the object id joined with the ``delimiter`` query parameter (``$`` by default; the delimiter
alone is the root). Rows travel as Arrow IPC in the body (create, insert, merge_insert) and
come back as an Arrow IPC file (query). Errors are the spec's ``ErrorResponse`` JSON with the
package's error code and the HTTP status official Lance's server uses. Requests may be required
to carry ``Authorization: Bearer <token>`` (or ``x-api-key: <token>``).

Built on Starlette (served with uvicorn by :mod:`lance_format.namespace.serve`); the namespace's
blocking calls run in Starlette's thread pool.
"""

from __future__ import annotations

import hmac
import json
import typing
from collections.abc import Callable
from typing import Any

import lance_namespace
from lance_namespace import LanceNamespace
from lance_namespace import errors as ns_errors
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from lance_format.namespace.routes import EMPTY_OUT, NAMESPACE_ROUTES, ROWS_IN, ROWS_OUT, TABLE_ROUTES

E = ns_errors.ErrorCode
# official Lance's server: the HTTP status of each error code
_STATUS = {
    E.NAMESPACE_NOT_FOUND: 404, E.TABLE_NOT_FOUND: 404, E.TABLE_INDEX_NOT_FOUND: 404, E.TABLE_TAG_NOT_FOUND: 404,
    E.TRANSACTION_NOT_FOUND: 404, E.TABLE_VERSION_NOT_FOUND: 404, E.TABLE_COLUMN_NOT_FOUND: 404,
    E.TABLE_BRANCH_NOT_FOUND: 404, E.NAMESPACE_ALREADY_EXISTS: 409, E.TABLE_ALREADY_EXISTS: 409,
    E.TABLE_INDEX_ALREADY_EXISTS: 409, E.TABLE_TAG_ALREADY_EXISTS: 409, E.TABLE_BRANCH_ALREADY_EXISTS: 409,
    E.CONCURRENT_MODIFICATION: 409, E.NAMESPACE_NOT_EMPTY: 409, E.INVALID_TABLE_STATE: 409, E.INVALID_INPUT: 400,
    E.TABLE_SCHEMA_VALIDATION_ERROR: 400, E.UNSUPPORTED: 406, E.PERMISSION_DENIED: 403, E.UNAUTHENTICATED: 401,
    E.SERVICE_UNAVAILABLE: 503, E.THROTTLING: 429, E.INTERNAL: 500,
}

def parse_id(text: str, delimiter: str | None) -> list[str]:
    """The object id of a path segment (the delimiter alone: the root namespace)."""
    delimiter = delimiter or "$"
    if text == delimiter:
        return []
    return [part for part in text.split(delimiter) if part]


def error_response(exc: ns_errors.LanceNamespaceError) -> JSONResponse:
    code = E(exc.code) if isinstance(exc.code, int) else E.INTERNAL
    return JSONResponse({"error": str(exc), "code": int(code)}, status_code=_STATUS.get(code, 500))


def _unwrap(annotation: Any) -> Any:
    """``Optional[Annotated[bool, Strict()]]`` -> ``bool``."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin is typing.Union or str(origin) == "types.UnionType":
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            annotation = args[0]
        else:
            return annotation


def _typed(value: str, annotation: Any) -> Any:
    """A query parameter as the model field's type (the models are strict)."""
    target = _unwrap(annotation)
    origin = typing.get_origin(target) or target
    if origin is bool:
        return value.strip().lower() in ("true", "1", "yes")
    if origin is int:
        return int(value)
    if origin is list:
        return [v for v in value.split(",") if v]
    if origin is dict:
        return json.loads(value)
    return value


def _request_model(model: Any, body: dict, request: Request, ident: list[str]) -> Any:
    fields = dict(body)
    for name, info in model.model_fields.items():
        key = info.alias or name
        if key in request.query_params and key not in fields:
            if typing.get_origin(_unwrap(info.annotation)) is list:
                values = request.query_params.getlist(key)
                fields[key] = values if len(values) > 1 else _typed(values[0], info.annotation)
            else:
                fields[key] = _typed(request.query_params[key], info.annotation)
    fields["id"] = ident
    fields.pop("identity", None)  # the caller's identity is the server's business, not the body's
    return model.from_dict(fields)


def _checker(token: str | None) -> Callable[[Request], bool]:
    def allowed(request: Request) -> bool:
        if token is None:
            return True
        given = request.headers.get("x-api-key")
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        return given is not None and hmac.compare_digest(given.encode(), token.encode())
    return allowed


def create_app(namespace: LanceNamespace, *, token: str | None = None) -> Starlette:
    """The ASGI app serving ``namespace``; with ``token``, requests must present it."""
    allowed = _checker(token)

    def endpoint(method: str, model_name: str, kind: str, status: int) -> Callable[[Request], Any]:
        model = getattr(lance_namespace, model_name)

        async def handle(request: Request) -> Response:
            if not allowed(request):
                return error_response(ns_errors.UnauthenticatedError("a valid bearer token is required"))
            ident = parse_id(request.path_params["id"], request.query_params.get("delimiter"))
            raw = await request.body()
            try:
                body: dict = {}
                if kind != ROWS_IN and raw:
                    try:
                        body = json.loads(raw)
                    except ValueError as exc:
                        raise ns_errors.InvalidInputError(f"{request.url.path}: the body is not JSON ({exc})") from exc
                try:
                    parsed = _request_model(model, body, request, ident)
                except (ValueError, TypeError) as exc:
                    raise ns_errors.InvalidInputError(f"{request.url.path}: bad request ({exc})") from exc
                call = getattr(namespace, method)
                if kind == ROWS_IN:
                    result = await run_in_threadpool(call, parsed, raw)
                else:
                    result = await run_in_threadpool(call, parsed)
            except ns_errors.LanceNamespaceError as exc:
                return error_response(exc)
            except Exception as exc:  # noqa: BLE001 - every failure is answered in the spec's form
                return error_response(ns_errors.InternalError(f"{type(exc).__name__}: {exc}"))
            if kind == EMPTY_OUT:
                return Response(status_code=status)
            if kind == ROWS_OUT:
                data = result.data if hasattr(result, "data") else result
                return Response(bytes(data), status_code=status, media_type="application/vnd.apache.arrow.file")
            if method == "count_table_rows":  # pylance 14's client reads a bare integer
                return JSONResponse(int(result.count), status_code=status)
            payload = result.to_dict() if hasattr(result, "to_dict") else result
            return JSONResponse(payload if payload is not None else {}, status_code=status)

        return handle

    routes = [Route(f"/v1/namespace/{{id}}/{suffix}", endpoint(*spec), methods=["GET", "POST"])
              for suffix, spec in NAMESPACE_ROUTES.items()]
    routes += [Route(f"/v1/table/{{id}}/{suffix}", endpoint(*spec), methods=["GET", "POST"])
               for suffix, spec in TABLE_ROUTES.items()]
    return Starlette(routes=routes)
