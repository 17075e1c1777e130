"""``RestAdapter``: pylance's in-process REST server of a namespace, on uvicorn in a thread."""

from __future__ import annotations

import socket
import threading
from typing import Any

import lance_namespace


def connect(impl: str, properties: dict) -> lance_namespace.LanceNamespace:
    """This engine's namespace for ``"dir"`` and ``"rest"`` (even where official Lance is
    installed, which ``lance_namespace.connect`` would prefer); any other through ``connect``."""
    from lance_format.namespace import IMPLS

    return lance_namespace.connect(IMPLS.get(impl, impl), properties)


class RestAdapter:
    """Serve the namespace :func:`connect` builds over REST on ``host:port``
    (port 0 or None: a free port, readable from :attr:`port` after :meth:`start`)."""

    def __init__(self, namespace_client_impl: str, namespace_client_properties: dict | None = None,
                 session: Any = None, host: str | None = None, port: int | None = None,
                 token: str | None = None) -> None:
        properties = {str(k): str(v) for k, v in (namespace_client_properties or {}).items()}
        self._namespace = connect(namespace_client_impl, properties)
        self.host = host or "127.0.0.1"
        self._requested_port = 2333 if port is None else int(port)
        self._port: int | None = None
        self._token = token
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._port if self._port is not None else self._requested_port

    def start(self) -> None:
        import uvicorn

        from lance_format.namespace.server import create_app

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self._requested_port))
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(create_app(self._namespace, token=self._token), log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True,
                                        name=f"lance-namespace-rest-{self._port}")
        self._thread.start()
        ready = threading.Event()
        while not self._server.started and self._thread.is_alive():
            ready.wait(0.02)
        if not self._server.started:
            raise RuntimeError(f"the REST namespace server did not start on {self.host}:{self._port}")

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join()
        self._server = self._thread = None

    def __enter__(self) -> RestAdapter:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RestAdapter(host='{self.host}', port={self.port})"
