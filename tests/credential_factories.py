"""Credential provider factories named by ``"tests.credential_factories:<name>"`` strings in
storage options: imported and called by every process that opens a store (Spark's Python
workers, Dagster run workers), like a deployment's own factory module would be."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any


def key_file_provider(key_file: str, log_file: str | None = None,
                      lifetime_ms: int = 30_000) -> Callable[[], Mapping[str, Any]]:
    """A provider handing out the access key currently in ``key_file`` (rotated by the test),
    valid for ``lifetime_ms`` (below the refresh margin of a minute: every use asks again, like
    short-lived STS credentials near their end); each call is logged as ``<pid> <key id>``."""

    def provider() -> Mapping[str, Any]:
        with open(key_file, encoding="utf-8") as f:
            key = json.load(f)
        if log_file is not None:
            with open(log_file, "a", encoding="utf-8") as log:
                log.write(f"{os.getpid()} {key['aws_access_key_id']}\n")
        return {**key, "expires_at_millis": str(int(time.time() * 1000) + lifetime_ms)}

    return provider


def not_a_factory() -> str:
    return "no provider here"
