"""Lance-style ``storage_options`` for S3, validated and resolved into one settled config.

Keys are those official Lance (the Rust ``object_store`` crate's ``AmazonS3ConfigKey`` and
``ClientConfigKey`` plus Lance's own) accepts, matched case-insensitively like Lance does:
``aws_access_key_id``, ``aws_secret_access_key``, ``aws_session_token``, ``aws_region`` /
``region``, ``aws_endpoint`` / ``endpoint`` (with their aliases), ``allow_http``, ... A key
Lance knows but this engine cannot honour raises :class:`UnsupportedFeatureError` (silently
ignoring e.g. an encryption setting would write data the user did not ask for); a key nobody
knows raises :class:`InvalidInputError`. Both name the key.

Like Lance, endpoint, region and ``allow_http`` fall back to the ``AWS_ENDPOINT[_URL]``,
``AWS_REGION``/``AWS_DEFAULT_REGION`` and ``AWS_ALLOW_HTTP`` environment variables; credentials
left out are found by the AWS SDKs' default chain (environment, ``~/.aws``, instance metadata).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlparse

from lance_format.errors import InvalidInputError, UnsupportedFeatureError

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
    "connect_timeout": ("connect_timeout",),
    "timeout": ("timeout",),
    "proxy_url": ("proxy_url",),
    "client_max_retries": ("client_max_retries",),
    "conditional_put": ("aws_conditional_put", "conditional_put"),
    # Lance keys with nothing to configure here (retry tuning of Lance's own client, the
    # expiry of vended credentials that are used as given).
    "download_retry_count": ("download_retry_count",),
    "client_retry_timeout": ("client_retry_timeout",),
    "expires_at_millis": ("expires_at_millis",),
}
_KEY_TO_NAME = {key: name for name, keys in _ALIASES.items() for key in keys}

# Keys Lance accepts whose effect this engine does not implement.
_UNSUPPORTED = {
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
    "allow_invalid_certificates", "use_opendal", "user_agent", "default_content_type", "pool_idle_timeout",
    "pool_max_idle_per_host", "http1_only", "http2_only", "http2_keep_alive_interval",
    "http2_keep_alive_timeout", "http2_keep_alive_while_idle", "proxy_ca_certificate", "proxy_excludes",
    "randomize_addresses", "aws_dynamodb_endpoint",
}

# Environment fallbacks Lance applies for settings that are not credentials (the SDKs find
# credentials themselves, the same way for pyarrow and boto3).
_ENV = {
    "endpoint": ("AWS_ENDPOINT", "AWS_ENDPOINT_URL"),
    "region": ("AWS_REGION",),
    "default_region": ("AWS_DEFAULT_REGION",),
    "allow_http": ("AWS_ALLOW_HTTP",),
    "virtual_hosted_style_request": ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST",),
}

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|msec|millis|milliseconds?|s|sec|secs|seconds?|m|min|mins|"
                       r"minutes?|h|hr|hrs|hours?)?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def normalize_storage_options(options: Mapping[str, Any] | None, *, table: str | None = None) -> dict[str, str]:
    """Lower-cased keys and string values; refuses non-string keys and None values."""
    result: dict[str, str] = {}
    for key, value in (options or {}).items():
        if not isinstance(key, str) or not key.strip():
            raise InvalidInputError(f"storage option keys must be non-empty strings, got {key!r}", table=table)
        if value is None:
            raise InvalidInputError(f"storage option {key!r} has no value", table=table)
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        result[key.strip().lower()] = text
    return result


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


def _duration(name: str, value: str, table: str | None) -> float:
    match = _DURATION.match(value)
    if not match:
        raise InvalidInputError(f"storage option {name!r} must be a duration like '30s' or '500ms', got {value!r}",
                                table=table)
    unit = (match.group(2) or "s").lower()
    if unit in ("ms", "msec", "millis", "millisecond", "milliseconds"):
        unit = "ms"
    return float(match.group(1)) * _UNIT_SECONDS[unit if unit == "ms" else unit[0]]


def s3_config(bucket: str, options: Mapping[str, str], *, table: str | None = None,
              environ: Mapping[str, str] | None = None) -> S3Config:
    """Validate lance-style options (already normalized) for the S3 bucket ``bucket``."""
    env = os.environ if environ is None else environ
    settings: dict[str, str] = {}
    for key, value in options.items():
        name = _KEY_TO_NAME.get(key)
        if name is None:
            if key in _UNSUPPORTED:
                raise UnsupportedFeatureError(f"storage option {key!r} is not supported by lance_format's S3 store",
                                              table=table)
            raise InvalidInputError(f"unknown storage option {key!r} for an s3:// table (known keys: "
                                    f"{', '.join(sorted(_KEY_TO_NAME))})", table=table)
        if name in settings and settings[name] != value:
            raise InvalidInputError(f"storage option {key!r} conflicts with another alias of {name!r}", table=table)
        settings[name] = value
    for name, variables in _ENV.items():
        if name not in settings:
            for variable in variables:
                if env.get(variable):
                    settings[name] = env[variable]
                    break

    if settings.get("conditional_put", "etag").strip().lower() != "etag":
        raise UnsupportedFeatureError(
            f"storage option 'aws_conditional_put'={settings['conditional_put']!r}: commits need S3's "
            "conditional PUT (If-None-Match); other commit mechanisms are not supported", table=table)
    allow_http = _truthy(settings.get("allow_http", "false"))
    endpoint = settings.get("endpoint")
    if endpoint is not None:
        endpoint = endpoint.strip()
        if "://" not in endpoint:
            endpoint = "https://" + endpoint
        parsed = urlparse(endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InvalidInputError(f"storage option 'aws_endpoint' must be an http(s) URL, got {endpoint!r}",
                                    table=table)
        if parsed.scheme == "http" and not allow_http:
            raise InvalidInputError(f"the endpoint {endpoint!r} is plain http: set storage option "
                                    "allow_http='true' to allow unencrypted connections", table=table)
    if bool(settings.get("access_key_id")) != bool(settings.get("secret_access_key")):
        missing = "aws_secret_access_key" if settings.get("access_key_id") else "aws_access_key_id"
        raise InvalidInputError(f"storage option {missing!r} is missing (access key id and secret go together)",
                                table=table)
    retries = settings.get("client_max_retries")
    max_attempts = None
    if retries is not None:
        if not retries.strip().isdigit():
            raise InvalidInputError(f"storage option 'client_max_retries' must be a non-negative integer, "
                                    f"got {retries!r}", table=table)
        max_attempts = int(retries) + 1
    return S3Config(
        bucket=bucket,
        access_key_id=settings.get("access_key_id") or None,
        secret_access_key=settings.get("secret_access_key") or None,
        session_token=settings.get("session_token") or None,
        region=settings.get("region") or settings.get("default_region") or None,
        endpoint=endpoint,
        virtual_hosted_style=_truthy(settings.get("virtual_hosted_style_request", "false")),
        anonymous=_truthy(settings.get("skip_signature", "false")),
        connect_timeout=_duration("connect_timeout", settings["connect_timeout"], table)
        if "connect_timeout" in settings else None,
        request_timeout=_duration("timeout", settings["timeout"], table) if "timeout" in settings else None,
        proxy_url=settings.get("proxy_url") or None,
        max_attempts=max_attempts,
    )


__all__ = ["S3Config", "normalize_storage_options", "s3_config"]
