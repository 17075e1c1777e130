"""A forwarding HTTP proxy for tests that answers chosen requests with an error status first:
puts throttling (429/503) in front of a real emulator that cannot be told to throttle."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}


class FaultProxy:
    """``endpoint`` forwards to ``target``; each entry of ``throttle`` answers one request: a
    status, or (status, error code) like (403, "ExpiredToken")."""

    def __init__(self, target: str) -> None:
        parsed = urlparse(target)
        self.throttle: list[int] = []
        self.forwarded = 0
        self.requests: list[str] = []  # "METHOD /path?query" of each forwarded request
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if proxy.throttle:
                    fault = proxy.throttle.pop(0)
                    status, code = fault if isinstance(fault, tuple) else (fault, "ServerBusy" if fault == 503
                                                                           else "SlowDown")
                    message = f"<Error><Code>{code}</Code><Message>injected by the test</Message></Error>".encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(message)))
                    self.send_header("x-ms-error-code", code)
                    self.end_headers()
                    self.wfile.write(message)
                    return
                proxy.forwarded += 1
                proxy.requests.append(f"{self.command} {self.path}")
                conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                conn.request(self.command, self.path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                self.send_response(response.status, response.reason)
                for key, value in response.getheaders():
                    if key.lower() not in _HOP_BY_HOP and key.lower() != "content-length":
                        self.send_header(key, value)
                # a HEAD answer keeps the object's length
                length = response.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}{parsed.path}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
