"""Azurite (npm ``azurite``) for tests: the blob service on a free loopback port with a temp dir.

Found as ``$AZURITE_BLOB`` or ``azurite-blob`` under ``.ci/node_modules`` (what ``.ci/run``
installs) or on ``PATH``; tests skip with a clear message only when it is missing. Azurite
checks Shared Key signatures and SAS expiry like Azure does.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from lance_format.io.azure import EMULATOR_ACCOUNT, EMULATOR_KEY

ROOT = Path(__file__).resolve().parent.parent


def azurite_command() -> str | None:
    candidates = [os.environ.get("AZURITE_BLOB"), str(ROOT / ".ci" / "node_modules" / ".bin" / "azurite-blob"),
                  shutil.which("azurite-blob")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@dataclass
class AzuriteServer:
    endpoint: str  # the account URL
    process: subprocess.Popen

    def options(self, **extra: str) -> dict[str, str]:
        return {"azure_storage_account_name": EMULATOR_ACCOUNT, "azure_storage_account_key": EMULATOR_KEY,
                "azure_storage_endpoint": self.endpoint, "allow_http": "true", **extra}

    def container_client(self, name: str):
        from azure.storage.blob import ContainerClient

        return ContainerClient(self.endpoint, name, credential={"account_name": EMULATOR_ACCOUNT,
                                                                "account_key": EMULATOR_KEY})

    def new_container(self) -> str:
        name = f"t-{uuid.uuid4().hex[:16]}"
        self.container_client(name).create_container()
        return name

    def keys(self, container: str, prefix: str = "") -> list[str]:
        return sorted(b.name for b in self.container_client(container).list_blobs(name_starts_with=prefix))

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_azurite(location: Path) -> AzuriteServer:
    pytest.importorskip("azure.storage.blob", reason="azure-storage-blob is not installed (pip install -e '.[test]')")
    command = azurite_command()
    if command is None or shutil.which("node") is None:
        pytest.skip("Azurite is not available: node and `npm install --prefix .ci azurite` (see .ci/run) are needed")
    port = _free_port()
    process = subprocess.Popen(
        [command, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(location), "--silent",
         "--skipApiVersionCheck", "--loose"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"Azurite exited: {process.stderr.read().decode(errors='replace')[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        process.kill()
        raise RuntimeError("Azurite did not start listening within 30 s")
    return AzuriteServer(f"http://127.0.0.1:{port}/{EMULATOR_ACCOUNT}", process)
