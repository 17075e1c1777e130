"""The S3 backend (``s3://bucket/path``): a ``pyarrow.fs.S3FileSystem`` for reads and writes,
and the atomic create-if-absent that commits need; plus S3's ``storage_options``.

S3 has no rename and no link, so the commit primitive is the one official Lance uses on S3
(``ConditionalPutCommitHandler``: ``PutMode::Create``): a PUT with ``If-None-Match: *``, which
the store rejects with 412 when the key exists. pyarrow cannot send that header, so this PUT
goes through boto3, an optional dependency (``pip install 'lance-assets[s3]'``) imported only
when a commit to S3 happens. There is no fallback to a plain PUT: two writers could then both
"win" the same version and one of them would silently lose its commit.

Options: the keys of ``object_store``'s ``AmazonS3ConfigKey`` with their aliases
(``aws_access_key_id``, ``aws_region`` / ``region``, ``aws_endpoint`` / ``endpoint``, ...).
Like Lance, endpoint, region and ``allow_http`` fall back to the ``AWS_ENDPOINT[_URL]``,
``AWS_REGION``/``AWS_DEFAULT_REGION`` and ``AWS_ALLOW_HTTP`` environment variables; credentials
left out are found by the AWS SDKs' default chain (environment, ``~/.aws``, instance metadata).
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import ParseResult, urlparse

import pyarrow.fs as pafs

from lance_format.errors import (
    CommitConflictError,
    InvalidInputError,
    StorageAccessError,
    StorageThrottledError,
    UnsupportedFeatureError,
)
from lance_format.io.backend import StorageBackend, split_bucket_uri
from lance_format.io.storage_options import (
    OptionSpec,
    check_endpoint,
    client_settings,
    normalize_storage_options,
    truthy,
)

# canonical name -> the keys (lower case) that set it
_ALIASES: dict[str, tuple[str, ...]] = {
    "access_key_id": ("aws_access_key_id", "access_key_id"),
    "secret_access_key": ("aws_secret_access_key", "secret_access_key"),
    "session_token": ("aws_session_token", "aws_token", "session_token", "token"),
    "region": ("aws_region", "region"),
    "default_region": ("aws_default_region", "default_region"),
    "endpoint": ("aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url"),
    "allow_http": ("allow_http", "aws_allow_http"),
    "virtual_hosted_style_request": ("aws_virtual_hosted_style_request", "virtual_hosted_style_request"),
    "skip_signature": ("aws_skip_signature", "skip_signature"),
    "conditional_put": ("aws_conditional_put", "conditional_put"),
}

# S3 keys Lance accepts whose effect this engine does not implement.
_UNSUPPORTED = frozenset({
    "aws_s3_express", "s3_express", "aws_server_side_encryption", "aws_sse_kms_key_id",
    "aws_sse_bucket_key_enabled", "aws_sse_customer_key_base64", "aws_request_payer", "request_payer",
    "aws_checksum_algorithm", "checksum_algorithm", "aws_imdsv1_fallback", "imdsv1_fallback",
    "aws_metadata_endpoint", "metadata_endpoint", "aws_container_credentials_relative_uri",
    "container_credentials_relative_uri", "aws_container_credentials_full_uri", "container_credentials_full_uri",
    "aws_container_authorization_token_file", "container_authorization_token_file",
    "aws_web_identity_token_file", "web_identity_token_file", "aws_endpoint_url_sts", "endpoint_url_sts",
    "aws_role_arn", "role_arn", "aws_role_session_name", "role_session_name",
    "aws_copy_if_not_exists", "copy_if_not_exists", "aws_unsigned_payload", "unsigned_payload",
    "aws_disable_tagging", "disable_tagging", "aws_bucket", "aws_bucket_name", "bucket", "bucket_name",
    "aws_dynamodb_endpoint",
})

S3_OPTIONS = OptionSpec(
    store="S3", scheme="s3://", aliases=_ALIASES, unsupported=_UNSUPPORTED, client_prefix="aws_",
    # Lance's environment fallbacks for settings that are not credentials (the SDKs find
    # credentials themselves, the same way for pyarrow and boto3).
    env={
        "endpoint": ("AWS_ENDPOINT", "AWS_ENDPOINT_URL"),
        "region": ("AWS_REGION",),
        "default_region": ("AWS_DEFAULT_REGION",),
        "allow_http": ("AWS_ALLOW_HTTP",),
        "virtual_hosted_style_request": ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST",),
    },
)


@dataclass(frozen=True)
class S3Config:
    """Settled S3 connection settings; None means: let the SDK decide."""

    bucket: str
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    region: str | None = None
    endpoint: str | None = None  # full URL with scheme, e.g. http://127.0.0.1:9000
    virtual_hosted_style: bool = False
    anonymous: bool = False
    connect_timeout: float | None = None
    request_timeout: float | None = None
    proxy_url: str | None = None
    max_attempts: int | None = None

    @property
    def endpoint_scheme(self) -> str | None:
        return urlparse(self.endpoint).scheme if self.endpoint else None

    @property
    def endpoint_host(self) -> str | None:
        if not self.endpoint:
            return None
        parsed = urlparse(self.endpoint)
        return parsed.netloc + parsed.path.rstrip("/")


def s3_config(bucket: str, options: Mapping[str, str], *, table: str | None = None,
              environ: Mapping[str, str] | None = None) -> S3Config:
    """Validate lance-style options (already normalized) for the S3 bucket ``bucket``."""
    settings = S3_OPTIONS.resolve(options, table=table, environ=environ)
    if settings.get("conditional_put", "etag").strip().lower() != "etag":
        raise UnsupportedFeatureError(
            f"storage option 'aws_conditional_put'={settings['conditional_put']!r}: commits need S3's "
            "conditional PUT (If-None-Match); other commit mechanisms are not supported", table=table)
    client = client_settings(settings, table)
    endpoint = settings.get("endpoint")
    if endpoint is not None:
        endpoint = check_endpoint("aws_endpoint", endpoint, client.allow_http, table)
    if bool(settings.get("access_key_id")) != bool(settings.get("secret_access_key")):
        missing = "aws_secret_access_key" if settings.get("access_key_id") else "aws_access_key_id"
        raise InvalidInputError(f"storage option {missing!r} is missing (access key id and secret go together)",
                                table=table)
    return S3Config(
        bucket=bucket,
        access_key_id=settings.get("access_key_id") or None,
        secret_access_key=settings.get("secret_access_key") or None,
        session_token=settings.get("session_token") or None,
        region=settings.get("region") or settings.get("default_region") or None,
        endpoint=endpoint,
        virtual_hosted_style=truthy(settings.get("virtual_hosted_style_request", "false")),
        anonymous=truthy(settings.get("skip_signature", "false")),
        connect_timeout=client.connect_timeout,
        request_timeout=client.request_timeout,
        proxy_url=client.proxy_url,
        max_attempts=None if client.max_retries is None else client.max_retries + 1,
    )


BOTO3_REQUIREMENT = "boto3>=1.35.2"  # the first release whose put_object takes IfNoneMatch
DELETE_BATCH = 1000  # DeleteObjects takes at most 1000 keys
_CONFLICT_RETRIES = 8  # 409 ConditionalRequestConflict: another conditional write of the key is in flight
_CLIENTS: dict[S3Config, Any] = {}
_CLIENTS_LOCK = threading.Lock()
_MAX_CLIENTS = 32


def s3_filesystem(config: S3Config) -> pafs.S3FileSystem:
    kwargs: dict[str, Any] = dict(
        access_key=config.access_key_id, secret_key=config.secret_access_key, session_token=config.session_token,
        region=config.region, anonymous=config.anonymous, force_virtual_addressing=config.virtual_hosted_style,
        # Small files (manifests, deletion files) then go up as one PutObject on close instead of a
        # three-request multipart upload; errors surface at close, which every writer checks.
        allow_delayed_open=True,
    )
    if config.endpoint:
        kwargs.update(endpoint_override=config.endpoint_host, scheme=config.endpoint_scheme)
    if config.connect_timeout is not None:
        kwargs["connect_timeout"] = config.connect_timeout
    if config.request_timeout is not None:
        kwargs["request_timeout"] = config.request_timeout
    if config.proxy_url:
        kwargs["proxy_options"] = config.proxy_url
    if config.max_attempts is not None:
        kwargs["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=config.max_attempts)
    return pafs.S3FileSystem(**kwargs)


def resolve_region(config: S3Config) -> S3Config:
    """Like Lance: without a region or an endpoint, ask S3 where the bucket lives."""
    if config.region or config.endpoint:
        return config
    region = _bucket_region(config.bucket)
    return replace(config, region=region) if region else config


@functools.lru_cache(maxsize=256)
def _bucket_region(bucket: str) -> str | None:
    try:
        return pafs.resolve_s3_region(bucket)
    except (OSError, ValueError):
        return None  # the SDKs' own default then applies, the same for both clients


def _boto3() -> Any:
    try:
        import boto3
        import botocore
    except ImportError:
        raise UnsupportedFeatureError(
            "committing to an s3:// table needs boto3 for S3's atomic conditional PUT (If-None-Match); "
            f"install it with: pip install 'lance-assets[s3]' ({BOTO3_REQUIREMENT})"
        ) from None
    if _version(botocore.__version__) < (1, 35, 2):
        raise UnsupportedFeatureError(
            f"botocore {botocore.__version__} cannot send If-None-Match with put_object; install "
            f"{BOTO3_REQUIREMENT} (pip install -U 'lance-assets[s3]')"
        )
    return boto3


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


class S3Objects:
    """A boto3 S3 client configured like the pyarrow filesystem, made on first use: the
    conditional PUT of commits, and deletes that leave no directory marker behind (pyarrow's
    ``delete_file`` re-creates the parent "directory" as an empty ``dir/`` object)."""

    def __init__(self, config: S3Config) -> None:
        self._config = config
        self._client: Any = None

    def _make_client(self) -> Any:
        boto3 = _boto3()
        from botocore import UNSIGNED
        from botocore.config import Config

        c = self._config
        extra: dict[str, Any] = {"s3": {"addressing_style": "virtual" if c.virtual_hosted_style or not c.endpoint
                                        else "path"}}
        if c.anonymous:
            extra["signature_version"] = UNSIGNED
        if c.connect_timeout is not None:
            extra["connect_timeout"] = c.connect_timeout
        if c.request_timeout is not None:
            extra["read_timeout"] = c.request_timeout
        if c.proxy_url:
            extra["proxies"] = {"http": c.proxy_url, "https": c.proxy_url}
        if c.max_attempts is not None:
            extra["retries"] = {"max_attempts": c.max_attempts, "mode": "standard"}
        credentials: dict[str, Any] = {}
        if c.access_key_id:
            credentials = dict(aws_access_key_id=c.access_key_id, aws_secret_access_key=c.secret_access_key,
                               aws_session_token=c.session_token)
        # else: the default chain (environment, ~/.aws, instance roles), refreshed by botocore
        return boto3.session.Session().client("s3", region_name=c.region, endpoint_url=c.endpoint, config=Config(**extra),
                              **credentials)

    def _get_client(self) -> Any:
        if self._client is None:
            # boto3 clients are thread-safe and slow to build: one per configuration and process.
            with _CLIENTS_LOCK:
                client = _CLIENTS.get(self._config)
                if client is None:
                    if len(_CLIENTS) >= _MAX_CLIENTS:  # e.g. rotating session tokens: drop the oldest
                        _CLIENTS.pop(next(iter(_CLIENTS)))
                    client = _CLIENTS[self._config] = self._make_client()
            self._client = client
        return self._client

    def available(self) -> bool:
        """Whether boto3 is installed (reads work without it, through pyarrow)."""
        try:
            self._get_client()
        except UnsupportedFeatureError:
            return False
        return True

    def call(self, what: str, operation: str, *, table: str, path: str | None = None, **kwargs: Any) -> Any:
        """``client.<operation>(Bucket=..., **kwargs)`` with typed errors. botocore already retried
        throttled requests (503 SlowDown, 429) with backoff, up to ``client_max_retries``."""
        client = self._get_client()
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(client, operation)(Bucket=self._config.bucket, **kwargs)
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            code = exc.response.get("Error", {}).get("Code", "")
            if status in (429, 503) or code in _THROTTLE_CODES:
                raise StorageThrottledError(f"the S3 store kept throttling {what} ({code or status}) beyond the "
                                            "retries of client_max_retries", table=table, path=path) from None
            if _is_access_error(status, code):
                raise StorageAccessError(f"the S3 store refused the credentials or permission while {what} "
                                         f"({code or status})", table=table, path=path) from None
            if code in ("NoSuchKey", "NoSuchBucket") or status == 404:
                raise FileNotFoundError(f"{self._config.bucket}/{kwargs.get('Key', kwargs.get('Prefix', ''))}") \
                    from None
            raise OSError(f"S3 request failed while {what}: {code or status}: {exc}") from None
        except BotoCoreError as exc:
            raise OSError(f"S3 request failed while {what}: {exc}") from None

    def list_sorted(self, prefix: str, *, table: str, first_page: int = 100,
                    page: int = 1000) -> Iterator[tuple[str, int, Any]]:
        """(key, size, mtime) of the objects directly under ``prefix`` (ending in "/"), in S3's
        lexical key order, one ListObjectsV2 page at a time (a small first page: callers that
        want the first few keys stop early)."""
        kwargs: dict[str, Any] = {"Prefix": prefix, "Delimiter": "/", "MaxKeys": first_page}
        while True:
            response = self.call(f"listing {prefix!r}", "list_objects_v2", table=table, **kwargs)
            for obj in response.get("Contents", ()):
                yield obj["Key"], int(obj.get("Size", 0)), obj.get("LastModified")
            if not response.get("IsTruncated"):
                return
            kwargs.update(ContinuationToken=response["NextContinuationToken"], MaxKeys=page)

    def delete(self, key: str) -> bool:
        """Delete ``key`` (absent keys too); False when boto3 is not installed."""
        if not self.available():
            return False
        self.call(f"deleting {key!r}", "delete_object", table=f"s3://{self._config.bucket}", Key=key)
        return True

    def delete_many(self, keys: list[str], *, table: str) -> list[str]:
        """Delete ``keys`` with DeleteObjects, 1000 keys per request (S3's limit); the keys S3
        refused one by one. A refused request raises."""
        failed: list[str] = []
        for at in range(0, len(keys), DELETE_BATCH):
            batch = keys[at:at + DELETE_BATCH]
            response = self.call(f"deleting {len(batch)} objects", "delete_objects", table=table,
                                 Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True})
            failed.extend(e["Key"] for e in response.get("Errors", ()) if e.get("Code") != "NoSuchKey")
        return failed

    def put_if_absent(self, key: str, data: bytes, *, table: str, path: str) -> bool:
        """PUT ``data`` at ``key`` unless it exists; False when it does (412)."""
        self._get_client()
        from botocore.exceptions import ClientError

        for attempt in range(_CONFLICT_RETRIES + 1):
            try:
                self._client.put_object(Bucket=self._config.bucket, Key=key, Body=data, IfNoneMatch="*")
                return True
            except ClientError as exc:
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                code = exc.response.get("Error", {}).get("Code", "")
                if status == 412 or code == "PreconditionFailed":
                    return False
                if status == 409 or code == "ConditionalRequestConflict":
                    # S3 asks to retry: the concurrent write either lands (then 412) or not.
                    time.sleep(min(1.0, 0.02 * (2 ** attempt)) * (0.5 + random.random()))
                    continue
                if status in (429, 503) or code in _THROTTLE_CODES:
                    raise StorageThrottledError(f"the S3 store kept throttling the commit ({code or status}) beyond "
                                                "client_max_retries", table=table, path=path) from None
                if _is_access_error(status, code):
                    raise StorageAccessError(f"the S3 store refused the credentials or permission ({code or status})",
                                             table=table, path=path) from None
                if status == 501 or code == "NotImplemented":
                    raise UnsupportedFeatureError(
                        "this S3-compatible store does not support conditional PUT (If-None-Match), so commits "
                        "cannot be atomic", table=table, path=path) from None
                raise OSError(f"S3 PUT of {path!r} in table {table!r} failed: {code or status}: {exc}") from None
        raise CommitConflictError("concurrent conditional writes of the same key kept conflicting (S3 409)",
                                  table=table, path=path)




_PYARROW_ACCESS_MARKERS = ("ACCESS_DENIED", "HTTP status 403", "HTTP status 401", "ExpiredToken",
                           "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken")
_PYARROW_THROTTLE_MARKERS = ("SLOW_DOWN", "SlowDown", "HTTP status 503", "HTTP status 429",
                             "THROTTLING", "Throttling", "ServiceUnavailable")
_THROTTLE_CODES = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests",
                   "ServiceUnavailable", "RequestThrottled"}
_ACCESS_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
                 "TokenRefreshRequired", "AllAccessDisabled"}


def _is_access_error(status: Any, code: str) -> bool:
    return status in (401, 403) or code in _ACCESS_CODES


CredentialProvider = Callable[[], Mapping[str, Any]]
_REFRESH_MARGIN_MS = 60_000  # refresh credentials this long before they expire


def provided_credentials(provider: CredentialProvider, *, table: str) -> tuple[dict[str, str], int | None]:
    """Call ``provider``: (access key id, secret and session token as Lance option keys, expiry
    in epoch milliseconds or None)."""
    answer = provider()
    if not isinstance(answer, Mapping):
        raise InvalidInputError(f"the credential provider must return a mapping of storage option keys, got "
                                f"{type(answer).__name__}", table=table)
    settings = S3_OPTIONS.resolve(normalize_storage_options(answer, table=table), table=table, environ={})
    extra = set(settings) - {"access_key_id", "secret_access_key", "session_token", "expires_at_millis"}
    if extra or not settings.get("access_key_id") or not settings.get("secret_access_key"):
        raise InvalidInputError("the credential provider must return aws_access_key_id and aws_secret_access_key "
                                "(and optionally aws_session_token, expires_at_millis) only", table=table)
    expires = settings.get("expires_at_millis")
    return ({k: v for k, v in settings.items() if k != "expires_at_millis"},
            int(float(expires)) if expires else None)


class S3Backend(StorageBackend):
    name = "s3"
    atomic_put = "PUT with If-None-Match: * (412 when the key exists), through boto3"

    def __init__(self, uri: str, root: str, config: S3Config, options: dict[str, str]) -> None:
        self.uri, self.root, self.config = uri, root, config
        self._fs = s3_filesystem(config)
        self.objects = S3Objects(config)
        self._provider: CredentialProvider | None = None
        self._expires_at: int | None = None
        self._refresh_lock = threading.Lock()

    @classmethod
    def open(cls, uri: str, parsed: ParseResult, options: dict[str, str]) -> S3Backend:
        bucket, prefix = split_bucket_uri(uri, parsed, "s3://bucket/path/to/table")
        root = f"{bucket}/{prefix}" if prefix else bucket
        display = f"s3://{root}"
        return cls(display, root, resolve_region(s3_config(bucket, options, table=display)), options)

    # -- refreshable credentials ---------------------------------------------------------------------
    def use_credential_provider(self, provider: CredentialProvider) -> None:
        """Take credentials from ``provider`` now, and again whenever they expire or are refused."""
        self._provider = provider
        self._apply(*provided_credentials(provider, table=self.uri))

    def _apply(self, credentials: dict[str, str], expires_at: int | None) -> bool:
        config = replace(self.config, access_key_id=credentials["access_key_id"],
                         secret_access_key=credentials["secret_access_key"],
                         session_token=credentials.get("session_token") or None)
        self._expires_at = expires_at
        if config == self.config:
            return False
        self.config, self._fs, self.objects = config, s3_filesystem(config), S3Objects(config)
        return True

    def refresh_credentials(self) -> bool:
        """Ask the provider again after the store refused the credentials; True when it gave
        other credentials (then the refused request is worth one more try)."""
        if self._provider is None:
            return False
        with self._refresh_lock:
            return self._apply(*provided_credentials(self._provider, table=self.uri))

    def _fresh(self) -> None:
        """Refresh credentials that expire within a minute, before using them."""
        if self._provider is not None and self._expires_at is not None \
                and self._expires_at - time.time() * 1000 < _REFRESH_MARGIN_MS:
            self.refresh_credentials()

    @property
    def filesystem(self) -> pafs.FileSystem:
        self._fresh()
        return self._fs

    # -- object operations ------------------------------------------------------------------------------
    def _key(self, path: str) -> str:
        return path.split("/", 1)[1]

    def translate_error(self, exc: OSError, what: str) -> Exception | None:
        # pyarrow's S3 errors are OSErrors whose text carries the AWS error name and HTTP status
        text = str(exc)
        if any(marker in text for marker in _PYARROW_ACCESS_MARKERS):
            return StorageAccessError(f"the S3 store refused the credentials or permission while {what}: "
                                      f"{text.splitlines()[0][:300]}", table=self.uri)
        if any(marker in text for marker in _PYARROW_THROTTLE_MARKERS):
            return StorageThrottledError(f"the S3 store kept throttling {what} (HTTP 429/503) beyond the retries of "
                                         f"client_max_retries: {text.splitlines()[0][:300]}", table=self.uri)
        return None

    def list_sorted(self, path: str) -> Iterator[pafs.FileInfo]:
        """Files directly under ``path`` in lexical order, listed a page at a time (boto3), so a
        caller that wants the first names (the newest V2 manifests) stops after one request."""
        self._fresh()
        if not self.objects.available():
            yield from super().list_sorted(path)
            return
        bucket = self.config.bucket
        prefix = self._key(path.rstrip("/") + "/") if "/" in path.rstrip("/") else ""
        for key, size, mtime in self.objects.list_sorted(prefix, table=self.uri):
            yield pafs.FileInfo(f"{bucket}/{key}", pafs.FileType.File, size=size, mtime=mtime)

    def read_all(self, path: str) -> bytes:
        """One GET (pyarrow would HEAD the object first)."""
        self._fresh()
        if not self.objects.available():
            return super().read_all(path)
        response = self.objects.call(f"reading {path!r}", "get_object", table=self.uri, Key=self._key(path))
        with response["Body"] as body:
            return body.read()

    def put_if_absent(self, path: str, data: bytes, *, relative: str) -> bool:
        self._fresh()
        return self.objects.put_if_absent(self._key(path), data, table=self.uri, path=relative)

    def delete(self, path: str) -> None:
        # boto3 when installed: pyarrow's delete_file re-creates the parent "directory" object.
        self._fresh()
        if not self.objects.delete(self._key(path)):
            super().delete(path)

    def delete_many(self, paths: Sequence[str]) -> list[str]:
        """DeleteObjects, 1000 keys per request."""
        self._fresh()
        if not self.objects.available():
            return super().delete_many(paths)
        bucket = self.config.bucket
        return [f"{bucket}/{key}" for key in self.objects.delete_many([self._key(p) for p in paths], table=self.uri)]

    def delete_prefix(self) -> None:
        failed = self.delete_many([info.path for info in self.list_prefix(self.root)])
        if failed:
            raise OSError(f"S3 refused to delete {len(failed)} objects of the table, e.g. {failed[0]!r}")


__all__ = ["BOTO3_REQUIREMENT", "CredentialProvider", "DELETE_BATCH", "S3Backend", "S3Config", "S3Objects", "S3_OPTIONS", "resolve_region", "s3_config",
           "s3_filesystem"]
