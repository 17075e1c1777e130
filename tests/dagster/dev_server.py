"""``dg dev`` as a subprocess for end-to-end tests: start it on a free port, wait for its GraphQL
server to load the code location, query it, stop it.

``dg dev`` runs as its own process group (``start_new_session=True``) so that SIGINT reaches the
webserver, daemon and code server it starts, exactly as Ctrl-C in a terminal does.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DG = Path(sys.executable).with_name("dg")
LOCATION = "example_project"  # code_location_name in pyproject.toml's [tool.dg.project]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dagster_home(path: Path) -> Path:
    """A Dagster instance directory: telemetry off, at most two runs at once (two cores)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n"
                                       "run_queue:\n  max_concurrent_runs: 2\n")
    return path


class GraphQL:
    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/graphql"

    def __call__(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(self.url, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            payload = json.loads(response.read())
        assert "errors" not in payload, payload
        return payload["data"]


class DevServer:
    def __init__(self, process: subprocess.Popen, port: int, log: Path) -> None:
        self.process = process
        self.port = port
        self.log = log
        self.url = f"http://127.0.0.1:{port}"
        self.gql = GraphQL(port)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def wait(self, what: str, predicate: Callable[[], Any], timeout: float) -> Any:
        """Poll ``predicate`` until it returns something truthy; fail if dg dev exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"dg dev exited ({self.process.returncode}) while waiting for {what}:\n"
                                     + self.tail())
            try:
                value = predicate()
            except (OSError, AssertionError, KeyError, TypeError):
                value = None
            if value:
                return value
            time.sleep(1.0)
        raise AssertionError(f"timed out waiting for {what}:\n" + self.tail())

    def wait_loaded(self, timeout: float = 240) -> None:
        query = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }"
        self.wait("the code location", lambda: any(
            entry["name"] == LOCATION and entry["loadStatus"] == "LOADED"
            for entry in self.gql(query)["workspaceOrError"]["locationEntries"]), timeout)


@contextlib.contextmanager
def dg_dev(home: Path, lake: Path, log: Path, *, dg: Path = DG,
           base_env: dict[str, str] | None = None) -> Iterator[DevServer]:
    """``dg dev`` from the repository root (the dg project directory), as the README runs it.

    ``dg``/``base_env``: another environment's ``dg`` and process environment (the README's
    first command's venv); by default the test run's own, with the repository on PYTHONPATH.
    """
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)} if base_env is None else dict(base_env)
    env.update({"DAGSTER_HOME": str(home), "LANCE_EXAMPLE_ROOT": str(lake)})
    with open(log, "wb") as out:
        process = subprocess.Popen([str(dg), "dev", "-h", "127.0.0.1", "-p", str(port)], cwd=REPO, env=env,
                                   stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = DevServer(process, port, log)
    try:
        server.wait_loaded()
        yield server
    finally:
        served = log.read_text(errors="replace")  # what it logged while serving, before the stop
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
    # Its exit status after SIGINT, and whether a child prints a KeyboardInterrupt traceback,
    # depend on which of its processes sees the signal first (both varied from run to run on a
    # loaded machine); a failure of dg dev while serving shows as a traceback before the stop.
    assert process.returncode is not None, server.tail()
    assert "Traceback (most recent call last)" not in served, served[-4000:]
