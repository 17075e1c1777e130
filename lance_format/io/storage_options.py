"""Lance-style ``storage_options``: the validation every storage backend shares.

Keys are those official Lance accepts (the Rust ``object_store`` crate's per-store config keys
and its ``ClientConfigKey``, plus Lance's own), matched case-insensitively like Lance does.
Each backend declares an :class:`OptionSpec` (its aliases, the keys Lance knows but the backend
cannot honour, and environment fallbacks); :meth:`OptionSpec.resolve` turns user options into
one setting per canonical name. A key Lance knows but this engine cannot honour raises
:class:`UnsupportedFeatureError` (silently ignoring e.g. an encryption setting would write data
the user did not ask for); a key nobody knows raises :class:`InvalidInputError`. Both name the key.

The S3 keys live in :mod:`lance_format.io.s3` (``S3Config`` and ``s3_config`` are re-exported
here for existing callers); GCS in :mod:`lance_format.io.gcs`, Azure in :mod:`lance_format.io.azure`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lance_format.errors import InvalidInputError, UnsupportedFeatureError

# object_store's ClientConfigKey names and Lance's own generic keys that this engine honours,
# canonical name -> keys. Stores also accept them behind their prefix (``google_timeout``).
CLIENT_ALIASES: dict[str, tuple[str, ...]] = {
    "allow_http": ("allow_http",),
    "connect_timeout": ("connect_timeout",),
    "timeout": ("timeout",),
    "proxy_url": ("proxy_url",),
    "client_max_retries": ("client_max_retries",),
    # Lance keys with nothing to configure here (its download retries, the expiry of vended
    # credentials that are used as given).
    "client_retry_timeout": ("client_retry_timeout",),
    "download_retry_count": ("download_retry_count",),
    "expires_at_millis": ("expires_at_millis",),
}

# Keys meant for another part of a Lance deployment than the table's object store: the
# DynamoDB endpoint of ``s3+ddb://`` tables. pylance takes one ``storage_options`` dict for all
# tables and ignores these where they do not apply, so shared options must not be refused.
IGNORED_KEYS = frozenset({"dynamodb_endpoint"})

# Generic keys Lance accepts whose effect this engine does not implement.
CLIENT_UNSUPPORTED = frozenset({
    "allow_invalid_certificates", "use_opendal", "user_agent", "default_content_type", "pool_idle_timeout",
    "pool_max_idle_per_host", "http1_only", "http2_only", "http2_keep_alive_interval", "http2_keep_alive_timeout",
    "http2_keep_alive_while_idle", "http2_max_frame_size", "proxy_ca_certificate", "proxy_excludes",
    "randomize_addresses",
})

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|msec|millis|milliseconds?|s|sec|secs|seconds?|m|min|mins|"
                       r"minutes?|h|hr|hrs|hours?)?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def truthy(value: str) -> bool:
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


def duration(name: str, value: str, table: str | None) -> float:
    """Seconds of a Lance duration string ('30s', '500ms', '2 min'; a bare number is seconds)."""
    match = _DURATION.match(value)
    if not match:
        raise InvalidInputError(f"storage option {name!r} must be a duration like '30s' or '500ms', got {value!r}",
                                table=table)
    unit = (match.group(2) or "s").lower()
    if unit in ("ms", "msec", "millis", "millisecond", "milliseconds"):
        unit = "ms"
    return float(match.group(1)) * _UNIT_SECONDS[unit if unit == "ms" else unit[0]]


def non_negative_int(name: str, value: str, table: str | None) -> int:
    if not value.strip().isdigit():
        raise InvalidInputError(f"storage option {name!r} must be a non-negative integer, got {value!r}", table=table)
    return int(value)


@dataclass(frozen=True)
class OptionSpec:
    """The storage options one backend accepts."""

    store: str  # for messages: "S3", "GCS", "Azure"
    scheme: str  # for messages: "s3://"
    aliases: Mapping[str, tuple[str, ...]]  # canonical name -> accepted keys (lower case)
    unsupported: frozenset[str] = frozenset()
    env: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # canonical name -> variables
    client_prefix: str = ""  # object_store strips it before trying ClientConfigKey ("google_", "azure_")

    def _key_names(self) -> dict[str, str]:
        names = {key: name for name, keys in CLIENT_ALIASES.items() for key in keys}
        if self.client_prefix:
            names.update({self.client_prefix + key: name for key, name in list(names.items())})
        names.update({key: name for name, keys in self.aliases.items() for key in keys})
        return names

    def _unsupported(self) -> frozenset[str]:
        prefixed = {self.client_prefix + key for key in CLIENT_UNSUPPORTED} if self.client_prefix else set()
        return self.unsupported | CLIENT_UNSUPPORTED | prefixed

    def resolve(self, options: Mapping[str, str], *, table: str | None = None,
                environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """Settings by canonical name from normalized options, then the environment fallbacks."""
        env = os.environ if environ is None else environ
        names = self._key_names()
        settings: dict[str, str] = {}
        for key, value in options.items():
            if key in IGNORED_KEYS and key not in names:
                continue
            name = names.get(key)
            if name is None:
                if key in self._unsupported():
                    raise UnsupportedFeatureError(
                        f"storage option {key!r} is not supported by lance_format's {self.store} store", table=table)
                raise InvalidInputError(f"unknown storage option {key!r} for a {self.scheme} table (known keys: "
                                        f"{', '.join(sorted(names))})", table=table)
            if name in settings and settings[name] != value:
                raise InvalidInputError(f"storage option {key!r} conflicts with another alias of {name!r}",
                                        table=table)
            settings[name] = value
        for name, variables in self.env.items():
            if name not in settings:
                for variable in variables:
                    if env.get(variable):
                        settings[name] = env[variable]
                        break
        return settings


@dataclass(frozen=True)
class ClientSettings:
    """Generic HTTP client settings every remote backend honours; None means: the SDK's default."""

    allow_http: bool = False
    connect_timeout: float | None = None
    request_timeout: float | None = None
    proxy_url: str | None = None
    max_retries: int | None = None  # retries of throttled/failed requests (client_max_retries)


def client_settings(settings: Mapping[str, str], table: str | None) -> ClientSettings:
    return ClientSettings(
        allow_http=truthy(settings.get("allow_http", "false")),
        connect_timeout=duration("connect_timeout", settings["connect_timeout"], table)
        if "connect_timeout" in settings else None,
        request_timeout=duration("timeout", settings["timeout"], table) if "timeout" in settings else None,
        proxy_url=settings.get("proxy_url") or None,
        max_retries=non_negative_int("client_max_retries", settings["client_max_retries"], table)
        if "client_max_retries" in settings else None,
    )


def check_endpoint(key: str, endpoint: str, allow_http: bool, table: str | None) -> str:
    """An http(s) endpoint URL (``https://`` added when the scheme is left out)."""
    from urllib.parse import urlparse

    endpoint = endpoint.strip()
    if "://" not in endpoint:
        endpoint = "https://" + endpoint
    parsed = urlparse(endpoint)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise InvalidInputError(f"storage option {key!r} must be an http(s) URL, got {endpoint!r}", table=table)
    if parsed.scheme == "http" and not allow_http:
        raise InvalidInputError(f"the endpoint {endpoint!r} is plain http: set storage option "
                                "allow_http='true' to allow unencrypted connections", table=table)
    return endpoint.rstrip("/")


def __getattr__(name: str) -> Any:
    # The S3 options used to live here; importing them lazily avoids an import cycle.
    if name in ("S3Config", "s3_config"):
        from lance_format.io import s3

        return getattr(s3, name)
    raise AttributeError(name)


__all__ = [
    "CLIENT_ALIASES", "ClientSettings", "IGNORED_KEYS", "OptionSpec", "check_endpoint", "client_settings", "duration",
    "normalize_storage_options", "truthy",
]
