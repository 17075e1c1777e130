"""The DynamoDB manifest store behind official Lance's ``s3+ddb://bucket/path?ddbTableName=<table>``.

The table's files live at ``s3://bucket/path``; commits go through the DynamoDB table
``<table>`` (see :mod:`lance_format.io.manifest_store` for the protocol), laid out as Lance
lays it out, so that this engine and pylance coordinate through the same items:

- key: ``base_uri`` (string, HASH) -- the table's path under the bucket (``path``, no bucket,
  no slashes around it) -- and ``version`` (number, RANGE);
- ``path`` (string): the manifest's object path under the bucket, staged (``...manifest-<uuid>``)
  or final; ``size`` (number): its size in bytes; ``e_tag`` (string, optional);
  ``committer`` (string): who wrote the item.

Puts are conditional (``attribute_not_exists`` / ``attribute_exists`` of both key attributes),
reads strongly consistent, and the latest version is one descending query with ``Limit=1``.
The DynamoDB table must exist with that key schema (checked once per table and endpoint).

Options: the ``s3://`` ones (credentials, region, S3 endpoint), plus Lance's
``dynamodb_endpoint`` (else the ``DYNAMODB_ENDPOINT`` environment variable) for a
DynamoDB-compatible endpoint. The region is the ``aws_region`` option, else the AWS SDK's
default chain, else ``us-west-2``, like Lance. A ``credential_provider`` serves DynamoDB as it
serves S3 (:meth:`DynamoDBManifestStore.use_credential_provider`): its credentials are asked
for again a minute before they expire and once when DynamoDB refuses them, so a long-running
writer keeps committing across key rotations.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlparse

from lance_format.errors import InvalidInputError, StorageAccessError, UnsupportedFeatureError
from lance_format.io.backend import DEFAULT_MAX_RETRIES, split_bucket_uri, with_retries
from lance_format.io.manifest_store import ExternalManifestTarget, ManifestLocation
from lance_format.io.storage_options import check_endpoint

TABLE_NAME_QUERY_KEY = "ddbTableName"
ENDPOINT_OPTION = "dynamodb_endpoint"
ENDPOINT_ENV = "DYNAMODB_ENDPOINT"
DEFAULT_REGION = "us-west-2"
COMMITTER = "lance_format"

BASE_URI, VERSION, PATH, SIZE, E_TAG, COMMITTER_ATTR = "base_uri", "version", "path", "size", "e_tag", "committer"

_THROTTLE_CODES = {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
                   "LimitExceededException", "InternalServerError", "ServiceUnavailable"}
# InvalidClientTokenId: an unknown or deleted key, as moto's IAM checks answer (with HTTP 403)
_ACCESS_CODES = {"AccessDeniedException", "UnrecognizedClientException", "ExpiredTokenException",
                 "InvalidSignatureException", "MissingAuthenticationTokenException", "IncompleteSignatureException",
                 "InvalidClientTokenId", "SignatureDoesNotMatch", "ExpiredToken", "AccessDenied"}
_CHECKED_TABLES: set[tuple[str | None, str]] = set()
_CHECKED_LOCK = threading.Lock()
_REFRESH_MARGIN_MS = 60_000  # like the S3 backend: refresh credentials this long before they expire

# (access key id, secret, session token or None) -> a client signing with them
ClientForCredentials = Callable[[str, str, "str | None"], Any]


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return response.get("Error", {}).get("Code", "") if isinstance(response, dict) else ""


def _is_access_error(exc: BaseException) -> bool:
    response = getattr(exc, "response", None)
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(response, dict) else None
    return _error_code(exc) in _ACCESS_CODES or status in (401, 403)


class DynamoDBManifestStore:
    """A :class:`~lance_format.io.manifest_store.ManifestStore` on one DynamoDB table."""

    def __init__(self, client: Any, table_name: str, *, endpoint: str | None = None, uri: str = "",
                 committer: str = COMMITTER, max_retries: int = DEFAULT_MAX_RETRIES,
                 client_for_credentials: ClientForCredentials | None = None) -> None:
        self.client, self.table_name, self.committer = client, table_name, committer
        self.uri, self.max_retries = uri, max_retries
        self._checked_key = (endpoint, table_name)
        self._client_for_credentials = client_for_credentials
        self._provider: Callable[[], Mapping[str, Any]] | None = None
        self._expires_at: int | None = None
        self._credentials_lock = threading.Lock()

    # -- refreshable credentials -------------------------------------------------------------------
    def use_credential_provider(self, provider: Callable[[], Mapping[str, Any]]) -> None:
        """Sign requests with ``provider``'s credentials (the ``credential_provider`` storage option):
        asked now, again a minute before they expire, and once when DynamoDB refuses them."""
        if self._client_for_credentials is None:
            raise UnsupportedFeatureError("this DynamoDB manifest store was given a ready client; it cannot "
                                          "take a credential_provider", table=self.uri)
        self._provider = provider
        self._apply(provider)

    def _apply(self, provider: Callable[[], Mapping[str, Any]]) -> bool:
        from lance_format.io.s3 import provided_credentials

        client_for = self._client_for_credentials
        if client_for is None:  # checked by use_credential_provider
            return False
        credentials, expires_at = provided_credentials(provider, table=self.uri)
        client = client_for(credentials["access_key_id"], credentials["secret_access_key"],
                            credentials.get("session_token") or None)
        self._expires_at = expires_at
        changed = client is not self.client
        self.client = client
        return changed

    def refresh_credentials(self) -> bool:
        """Ask the provider again; True when it gave other credentials (worth one more try)."""
        if self._provider is None:
            return False
        with self._credentials_lock:
            return self._apply(self._provider)

    def _fresh(self) -> None:
        if self._provider is not None and self._expires_at is not None \
                and self._expires_at - time.time() * 1000 < _REFRESH_MARGIN_MS:
            self.refresh_credentials()

    # -- requests --------------------------------------------------------------------------------
    def _call(self, what: str, method: str, **kwargs: Any) -> Any:
        if self._checked_key not in _CHECKED_TABLES:
            # On first use rather than when opened, so that a credential provider signs it.
            # DescribeTable is slow and rate-limited: once per process and table.
            self._check_key_schema()
            with _CHECKED_LOCK:
                _CHECKED_TABLES.add(self._checked_key)
        return self._signed(what, method, **kwargs)

    def _signed(self, what: str, method: str, **kwargs: Any) -> Any:
        self._fresh()
        signed_by = self.client
        try:
            return self._request(what, method, **kwargs)
        except StorageAccessError:
            # (another thread may have refreshed meanwhile: then the new client is worth a try too)
            if not self.refresh_credentials() and self.client is signed_by:
                raise
        # Refused credentials: the request did not happen, so it goes once more, newly signed.
        return self._request(what, method, **kwargs)

    def _request(self, what: str, method: str, **kwargs: Any) -> Any:
        from botocore.exceptions import ClientError

        def call() -> Any:
            return getattr(self.client, method)(TableName=self.table_name, **kwargs)

        try:
            return with_retries(call, is_throttled=lambda e: _error_code(e) in _THROTTLE_CODES,
                                max_retries=self.max_retries, store="DynamoDB", table=self.uri, what=what)
        except ClientError as exc:
            code = _error_code(exc)
            if _is_access_error(exc):
                raise StorageAccessError(f"DynamoDB refused the credentials or permission while {what} ({code})",
                                         table=self.uri) from None
            if code == "ResourceNotFoundException":
                raise InvalidInputError(f"the DynamoDB table {self.table_name!r} of the manifest store does not "
                                        "exist", table=self.uri) from None
            raise

    def _check_key_schema(self) -> None:
        table = self._signed("describing the manifest table", "describe_table")["Table"]
        keys = {(k["AttributeName"], k["KeyType"]) for k in table.get("KeySchema", [])}
        if keys != {(BASE_URI, "HASH"), (VERSION, "RANGE")}:
            raise InvalidInputError(
                f"the DynamoDB table {self.table_name!r} must have the key schema HASH {BASE_URI!r} (string) and "
                f"RANGE {VERSION!r} (number), like Lance's; it has {sorted(keys)}", table=self.uri)

    @staticmethod
    def _location(item: dict[str, Any]) -> ManifestLocation:
        try:
            version, path = int(item[VERSION]["N"]), item[PATH]["S"]
        except (KeyError, ValueError) as exc:
            from lance_format.errors import CorruptFileError

            raise CorruptFileError(f"a manifest store item lacks a numeric {VERSION!r} or a string {PATH!r}: "
                                   f"{sorted(item)}") from exc
        size = item.get(SIZE, {}).get("N")
        return ManifestLocation(version, path, int(size) if size is not None else None, item.get(E_TAG, {}).get("S"))

    def _item(self, base_uri: str, location: ManifestLocation) -> dict[str, Any]:
        item: dict[str, Any] = {
            BASE_URI: {"S": base_uri}, VERSION: {"N": str(location.version)}, PATH: {"S": location.path},
            COMMITTER_ATTR: {"S": self.committer},
        }
        if location.size is not None:
            item[SIZE] = {"N": str(location.size)}
        if location.e_tag is not None:
            item[E_TAG] = {"S": location.e_tag}
        return item

    def _conditional_put(self, base_uri: str, location: ManifestLocation, condition: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self._call(f"putting the entry of version {location.version}", "put_item",
                       Item=self._item(base_uri, location),
                       ConditionExpression=f"{condition}({BASE_URI}) AND {condition}({VERSION})")
        except ClientError as exc:
            if _error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    # -- ManifestStore -----------------------------------------------------------------------
    def get(self, base_uri: str, version: int) -> ManifestLocation | None:
        item = self._call(f"reading the entry of version {version}", "get_item", ConsistentRead=True,
                          Key={BASE_URI: {"S": base_uri}, VERSION: {"N": str(version)}}).get("Item")
        return None if item is None else self._location(item)

    def get_latest(self, base_uri: str) -> ManifestLocation | None:
        items = self._call("reading the latest version", "query", ConsistentRead=True, ScanIndexForward=False,
                           Limit=1, KeyConditionExpression=f"{BASE_URI} = :{BASE_URI}",
                           ExpressionAttributeValues={f":{BASE_URI}": {"S": base_uri}}).get("Items", [])
        return self._location(items[0]) if items else None

    def put_if_not_exists(self, base_uri: str, location: ManifestLocation) -> bool:
        return self._conditional_put(base_uri, location, "attribute_not_exists")

    def put_if_exists(self, base_uri: str, location: ManifestLocation) -> bool:
        return self._conditional_put(base_uri, location, "attribute_exists")

    def delete(self, base_uri: str) -> None:
        start: dict[str, Any] | None = None
        while True:
            page = self._call("listing the entries to delete", "query", ConsistentRead=True,
                              KeyConditionExpression=f"{BASE_URI} = :{BASE_URI}",
                              ExpressionAttributeValues={f":{BASE_URI}": {"S": base_uri}},
                              ProjectionExpression=f"{BASE_URI}, {VERSION}",
                              **({"ExclusiveStartKey": start} if start else {}))
            for item in page.get("Items", []):
                self._call("deleting an entry", "delete_item",
                           Key={BASE_URI: item[BASE_URI], VERSION: item[VERSION]})
            start = page.get("LastEvaluatedKey")
            if not start:
                return


# -- s3+ddb:// URIs ------------------------------------------------------------------------------
_CLIENTS: dict[tuple[Any, ...], Any] = {}
_CLIENTS_LOCK = threading.Lock()
_MAX_CLIENTS = 32  # rotating credentials make new clients: the oldest are dropped


def _dynamodb_client(endpoint: str | None, region: str, access_key_id: str | None, secret_access_key: str | None,
                     session_token: str | None, connect_timeout: float | None, request_timeout: float | None) -> Any:
    key = (endpoint, region, access_key_id, secret_access_key, session_token, connect_timeout, request_timeout)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                raise UnsupportedFeatureError("s3+ddb:// tables commit through DynamoDB, which needs boto3: "
                                              "pip install 'lance-assets[s3]'") from None
            config: dict[str, Any] = {"retries": {"max_attempts": 1}}  # throttling: with_retries backs off
            if connect_timeout is not None:
                config["connect_timeout"] = connect_timeout
            if request_timeout is not None:
                config["read_timeout"] = request_timeout
            credentials: dict[str, Any] = {}
            if access_key_id:
                credentials = dict(aws_access_key_id=access_key_id, aws_secret_access_key=secret_access_key,
                                   aws_session_token=session_token)
            client = boto3.session.Session().client("dynamodb", region_name=region, endpoint_url=endpoint,
                                                     config=Config(**config), **credentials)
            if len(_CLIENTS) >= _MAX_CLIENTS:
                _CLIENTS.pop(next(iter(_CLIENTS)))
            _CLIENTS[key] = client
        return client


def _default_region() -> str:
    try:
        import boto3

        return boto3.session.Session().region_name or DEFAULT_REGION
    except ImportError:
        return DEFAULT_REGION


def parse_s3_ddb_uri(uri: str) -> tuple[str, str, str]:
    """(object store URI ``s3://bucket/path``, base_uri ``path``, DynamoDB table name) of an
    ``s3+ddb://`` URI; refuses anything but exactly one non-empty ``ddbTableName`` query."""
    parsed = urlparse(uri)
    pairs = parse_qsl(parsed.query, keep_blank_values=True)
    if len(pairs) != 1 or pairs[0][0] != TABLE_NAME_QUERY_KEY:
        raise InvalidInputError(f"an s3+ddb:// URI takes exactly one query, {TABLE_NAME_QUERY_KEY}=<DynamoDB table> "
                                "(s3+ddb://bucket/path?ddbTableName=table)", table=uri)
    table_name = pairs[0][1]
    if not table_name:
        raise InvalidInputError("an s3+ddb:// URI needs a non-empty DynamoDB table name in ddbTableName", table=uri)
    bare = parsed._replace(scheme="s3", query="", fragment=parsed.fragment)
    bucket, prefix = split_bucket_uri(uri, bare, "s3+ddb://bucket/path?ddbTableName=table")
    return f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}", prefix, table_name


def open_s3_ddb(uri: str, options: dict[str, str]) -> ExternalManifestTarget:
    """The manifest-store factory of ``s3+ddb://`` URIs (see the module docstring)."""
    from lance_format.io.s3 import s3_config

    object_uri, base_uri, table_name = parse_s3_ddb_uri(uri)
    s3_options = dict(options)
    endpoint = s3_options.pop(ENDPOINT_OPTION, None) or os.environ.get(ENDPOINT_ENV) or None
    if endpoint is not None:
        # Lance sends DynamoDB requests to this endpoint as given; http is for local emulators.
        endpoint = check_endpoint(ENDPOINT_OPTION, endpoint, True, uri)
    bucket = urlparse(object_uri).netloc
    config = s3_config(bucket, s3_options, table=uri)
    region = config.region or _default_region()
    client = _dynamodb_client(endpoint, region, config.access_key_id, config.secret_access_key,
                              config.session_token, config.connect_timeout, config.request_timeout)

    def client_for_credentials(access_key_id: str, secret_access_key: str, session_token: str | None) -> Any:
        return _dynamodb_client(endpoint, region, access_key_id, secret_access_key, session_token,
                                config.connect_timeout, config.request_timeout)

    store = DynamoDBManifestStore(client, table_name, endpoint=endpoint, uri=uri,
                                  client_for_credentials=client_for_credentials)
    return ExternalManifestTarget(object_uri=object_uri, storage_options=s3_options, store=store, base_uri=base_uri)


__all__ = ["DynamoDBManifestStore", "ENDPOINT_OPTION", "TABLE_NAME_QUERY_KEY", "open_s3_ddb", "parse_s3_ddb_uri"]
