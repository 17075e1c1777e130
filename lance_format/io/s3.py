"""The S3 backend: a ``pyarrow.fs.S3FileSystem`` for reads and writes, and the atomic
create-if-absent that commits need.

S3 has no rename and no link, so the commit primitive is the one official Lance uses on S3
(``ConditionalPutCommitHandler``: ``PutMode::Create``): a PUT with ``If-None-Match: *``, which
the store rejects with 412 when the key exists. pyarrow cannot send that header, so this PUT
goes through boto3, an optional dependency (``pip install 'lance-assets[s3]'``) imported only
when a commit to S3 happens. There is no fallback to a plain PUT: two writers could then both
"win" the same version and one of them would silently lose its commit.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from dataclasses import replace
from typing import Any

import pyarrow.fs as pafs

from lance_format.errors import CommitConflictError, UnsupportedFeatureError
from lance_format.io.storage_options import S3Config

BOTO3_REQUIREMENT = "boto3>=1.35.2"  # the first release whose put_object takes IfNoneMatch
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

    def delete(self, key: str) -> bool:
        """Delete ``key`` (absent keys too); False when boto3 is not installed."""
        try:
            client = self._get_client()
        except UnsupportedFeatureError:
            return False
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            client.delete_object(Bucket=self._config.bucket, Key=key)
        except (ClientError, BotoCoreError) as exc:
            raise OSError(f"S3 DELETE of {key!r} failed: {exc}") from None
        return True

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
                if status == 501 or code == "NotImplemented":
                    raise UnsupportedFeatureError(
                        "this S3-compatible store does not support conditional PUT (If-None-Match), so commits "
                        "cannot be atomic", table=table, path=path) from None
                raise OSError(f"S3 PUT of {path!r} in table {table!r} failed: {code or status}: {exc}") from None
        raise CommitConflictError("concurrent conditional writes of the same key kept conflicting (S3 409)",
                                  table=table, path=path)


__all__ = ["BOTO3_REQUIREMENT", "S3Objects", "resolve_region", "s3_filesystem"]
