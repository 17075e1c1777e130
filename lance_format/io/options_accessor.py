"""pylance's ``StorageOptionsAccessor``: a table's storage options, static and from a provider.

``LanceDataset.storage_options_accessor`` hands one out (None when a table was opened with no
options and no provider): :meth:`~StorageOptionsAccessor.initial_storage_options` are the options
given, :meth:`~StorageOptionsAccessor.get_storage_options` those merged with the credentials the
``credential_provider`` gives, asked again once they are within
:meth:`~StorageOptionsAccessor.refresh_offset_secs` of their ``expires_at_millis``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

# pylance refreshes credentials this long before they expire
REFRESH_OFFSET_SECS = 60


class StorageOptionsAccessor:
    """Static storage options and an optional credential provider (pylance's class)."""

    def __init__(self, options: Mapping[str, str] | None = None,
                 provider: Callable[[], Mapping[str, Any]] | None = None) -> None:
        self._options = {str(k): str(v) for k, v in (options or {}).items()}
        self._provider = provider
        self._lock = threading.Lock()
        self._fetched: dict[str, str] | None = None

    @staticmethod
    def with_static_options(options: Mapping[str, str]) -> StorageOptionsAccessor:
        """An accessor of ``options`` alone."""
        return StorageOptionsAccessor(options)

    def accessor_id(self) -> str:
        """Names the accessor: equal options give equal ids (a provider, its object)."""
        if self._provider is not None:
            return f"provider_{id(self._provider):x}"
        digest = hashlib.sha256(json.dumps(self._options, sort_keys=True).encode()).hexdigest()[:16]
        return f"static_options_{digest}"

    def has_provider(self) -> bool:
        return self._provider is not None

    def refresh_offset_secs(self) -> int:
        return REFRESH_OFFSET_SECS

    def initial_storage_options(self) -> dict[str, str]:
        """The options given, without the provider's credentials."""
        return dict(self._options)

    def get_storage_options(self) -> dict[str, str]:
        """The options with the provider's current credentials (asked again when near expiry)."""
        if self._provider is None:
            return dict(self._options)
        with self._lock:
            if self._fetched is None or self._expiring(self._fetched):
                self._fetched = {str(k): str(v) for k, v in self._provider().items()}
            return {**self._options, **self._fetched}

    @staticmethod
    def _expiring(credentials: Mapping[str, str]) -> bool:
        expires = credentials.get("expires_at_millis")
        if expires is None:
            return False
        return time.time() * 1000 >= float(expires) - REFRESH_OFFSET_SECS * 1000

    def __repr__(self) -> str:
        return f"StorageOptionsAccessor(id={self.accessor_id()}, has_provider={str(self.has_provider()).lower()})"


__all__ = ["REFRESH_OFFSET_SECS", "StorageOptionsAccessor"]
