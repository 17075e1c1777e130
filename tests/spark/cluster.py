"""A Spark standalone cluster on this machine, from the installed PySpark (no downloads).

One master and two workers (``spark-class ...deploy.master.Master`` / ``...worker.Worker``),
each worker offering one core and a small memory. The workers start with a clean environment
(no ``PYTHONPATH``) and the executors' Python is :func:`deps_only_python`: an interpreter that
has lance_format's dependencies but not lance_format itself, as on a cluster where only the
dependencies are installed. Every process runs in its own session, so :meth:`stop` ends it
together with the executors and Python workers it started.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import venv
from pathlib import Path

DAEMON_JAVA_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData -Xss1m"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def spark_home() -> str:
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def deps_only_python(directory: Path) -> str:
    """A virtual environment whose only packages are this venv's site-packages as a plain path
    entry: pyarrow, pyspark, ... import, while the editable install of lance_format (a path
    finder installed by a ``.pth`` hook of that directory) is not run, so lance_format does not."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(directory)
    site_packages = next(p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p))
    lib = next((directory / "lib").glob("python3*")) / "site-packages"
    (lib / "shared_dependencies.pth").write_text(site_packages + "\n")
    return str(directory / "bin" / "python")


def _clean_env(base: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "HOME", "JAVA_HOME", "LANG", "TZ") if k in os.environ}
    env.update(SPARK_HOME=spark_home(), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(base / "logs"),
               SPARK_DAEMON_MEMORY="192m", SPARK_DAEMON_JAVA_OPTS=DAEMON_JAVA_OPTS,
               SPARK_NO_DAEMONIZE="1")
    return env


class StandaloneCluster:
    """A master and two one-core workers; ``url`` is the master's ``spark://`` address."""

    def __init__(self, base: Path, workers: int = 2, worker_memory: str = "640m") -> None:
        self.base = base
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.python = deps_only_python(base / "deps-venv")
        self._workers = workers
        self._worker_memory = worker_memory
        self.processes: list[subprocess.Popen] = []

    def _spawn(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.base / f"{name}.log", "wb")
        process = subprocess.Popen(
            [os.path.join(spark_home(), "bin", "spark-class"), *args], env=_clean_env(self.base),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.base,
        )
        log.close()
        self.processes.append(process)
        return process

    def start(self, timeout: float = 90.0) -> StandaloneCluster:
        (self.base / "logs").mkdir(parents=True, exist_ok=True)
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(free_port()))
        self._wait(lambda: self._listening(self.port), timeout, "the master")
        for i in range(self._workers):
            work = self.base / f"worker{i}"
            work.mkdir(exist_ok=True)
            self._spawn(f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                        "--cores", "1", "--memory", self._worker_memory, "--webui-port", str(free_port()),
                        "--work-dir", str(work))
        self._wait(lambda: self._registered() >= self._workers, timeout, "the workers")
        return self

    def _registered(self) -> int:
        text = (self.base / "master.log").read_text(errors="replace")
        return text.count("Registering worker")

    def _listening(self, port: int) -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            dead = [p.args for p in self.processes if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{what} did not start: {dead} exited; see {self.base}/*.log")
            time.sleep(0.2)
        raise TimeoutError(f"{what} did not start within {timeout} s; see {self.base}/*.log")

    def stop(self) -> None:
        """End every process the cluster started (master, workers, executors, Python workers)."""
        for process in reversed(self.processes):
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 15
        for process in self.processes:
            try:
                process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
        for process in self.processes:  # the session's stragglers too (executors outlive SIGTERM)
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
