"""A GCS API for tests: ``gcp-storage-emulator`` (PyPI) on a free loopback port, in a thread.

The emulator does not evaluate preconditions, and GCS's commit primitive is one: an upload
with ``ifGenerationMatch=0`` (JSON API) or ``x-goog-if-generation-match: 0`` (XML API) must be
refused with 412 when the object exists. The request handler here adds exactly that check to
the emulator's (the emulator serves one request at a time, so check and create are atomic),
and the three XML API calls pylance's ``object_store`` client makes that the emulator lacks:
``GET /bucket?list-type=2`` listings, ``HEAD`` and ``DELETE`` of objects (pylance reaches
the emulator through a service account key with ``gcs_base_url`` and ``disable_oauth``). It
also lets a test inject faults: answer the next requests with 429/503 (throttling), or refuse
a bearer token with 401 (expired credentials), as GCS does.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import formatdate
from urllib.parse import parse_qs, unquote, urlparse
from xml.sax.saxutils import escape

import pytest

EXPIRED_TOKEN = "expired-token"


@dataclass
class Faults:
    throttle: list[int] = field(default_factory=list)  # statuses for the next requests
    requests: int = 0
    listings: list[dict] = field(default_factory=list)  # the query of each JSON API object listing


class _Refused(Exception):
    pass


@dataclass
class GcsServer:
    endpoint: str
    server: object
    faults: Faults

    def service_account_key(self) -> str:
        """A key in ``object_store``'s emulator form: pylance and this engine both read it."""
        return json.dumps({"gcs_base_url": self.endpoint, "disable_oauth": True, "client_email": "",
                           "private_key": "", "private_key_id": ""})

    def options(self) -> dict[str, str]:
        return {"google_service_account_key": self.service_account_key(), "allow_http": "true"}

    def new_bucket(self) -> str:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        name = f"t-{uuid.uuid4().hex[:16]}"
        client = storage.Client(project="test", credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": self.endpoint})
        client.create_bucket(name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        client = storage.Client(project="test", credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": self.endpoint})
        return sorted(b.name for b in client.list_blobs(bucket, prefix=prefix))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server() -> GcsServer:
    pytest.importorskip("google.cloud.storage", reason="google-cloud-storage is not installed (pip install -e '.[test]')")
    server_module = pytest.importorskip("gcp_storage_emulator.server",
                                        reason="gcp-storage-emulator is not installed (pip install -e '.[test]')")
    from gcp_storage_emulator.exceptions import NotFound
    from gcp_storage_emulator.handlers import objects

    logging.getLogger("gcp_storage_emulator").setLevel(logging.CRITICAL)
    faults = Faults()
    base_handler = server_module.RequestHandler

    class _PreconditionHandler(base_handler):
        def _fault(self) -> bool:
            faults.requests += 1
            if faults.throttle:
                self._reply(faults.throttle.pop(0), "rateLimitExceeded")
                return True
            if self.headers.get("Authorization", "") == f"Bearer {EXPIRED_TOKEN}":
                self._reply(401, "Invalid Credentials")
                return True
            return False

        def _reply(self, status: int, message: str, *, body_read: bool = False) -> None:
            body = json.dumps({"error": {"code": status, "message": message}}).encode()
            length = int(self.headers.get("Content-Length") or 0)
            if length and not body_read:
                self.rfile.read(length)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _create_only(self) -> bool:
            parsed = urlparse(self.path)
            query = parse_qs(parsed.query)
            wanted = query.get("ifGenerationMatch", [self.headers.get("x-goog-if-generation-match")])[0]
            return wanted == "0"

        def _guarded(self, run) -> None:
            if not self._create_only():
                return run()
            original = self.storage.create_file

            def create_if_absent(bucket_name, file_name, content, file_obj, *args, **kwargs):
                try:
                    self.storage.get_file_obj(bucket_name, file_name)
                except NotFound:
                    return original(bucket_name, file_name, content, file_obj, *args, **kwargs)
                raise _Refused(file_name)

            self.storage.create_file = create_if_absent
            try:
                run()
            except _Refused:
                self._reply(412, "conditionNotMet", body_read=True)
            finally:
                del self.storage.create_file

        def do_POST(self):
            if not self._fault():
                self._guarded(super().do_POST)

        def _xml_put(self) -> bool:
            target = self._xml_object()
            if target is None or "uploadId" in self.path or "uploads" in self.path:
                return False
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self._create_only():
                try:
                    self.storage.get_file_obj(*target)
                    return self._reply(412, "PreconditionFailed", body_read=True) or True
                except NotFound:
                    pass
            content_type = self.headers.get("Content-Type", "application/octet-stream")
            obj = objects._make_object_resource(f"http://{self.headers.get('Host')}", target[0], target[1],
                                                content_type, str(len(data)))
            obj = objects._checksums(data, obj)
            try:
                self.storage.create_file(target[0], target[1], data, obj)
            except NotFound:
                return self._reply(404, "NoSuchBucket", body_read=True) or True
            self._send(200, b"", "text/plain", self._object_headers(self.storage.get_file_obj(*target)))
            return True

        def do_PUT(self):
            if self._fault() or self._xml_put():
                return
            self._guarded(super().do_PUT)

        def _xml_object(self) -> tuple[str, str] | None:
            """(bucket, object) of an XML API object path ``/bucket/key``, else None."""
            path = urlparse(self.path).path
            if path.startswith(("/storage/", "/upload/", "/download/", "/b/", "/batch/")):
                return None
            bucket, _, key = path.lstrip("/").partition("/")
            return (unquote(bucket), unquote(key)) if bucket and key else None

        def _xml_list(self) -> bool:
            parsed = urlparse(self.path)
            query = parse_qs(parsed.query)
            bucket = unquote(parsed.path.strip("/"))
            if "list-type" not in query or not bucket or "/" in bucket:
                return False
            prefix = query.get("prefix", [""])[0]
            delimiter = query.get("delimiter", [None])[0]
            try:
                objs, prefixes = self.storage.get_file_list(bucket, prefix=prefix or None, delimiter=delimiter)
            except NotFound:
                self._reply(404, "NoSuchBucket")
                return True
            parts = [f"<?xml version='1.0' encoding='UTF-8'?><ListBucketResult><Name>{escape(bucket)}</Name>"
                     f"<Prefix>{escape(prefix)}</Prefix><KeyCount>{len(objs)}</KeyCount><IsTruncated>false</IsTruncated>"]
            for obj in objs:
                parts.append(f"<Contents><Key>{escape(obj['name'])}</Key><Size>{obj['size']}</Size>"
                             f"<LastModified>{obj['updated']}</LastModified><ETag>\"{obj['generation']}\"</ETag>"
                             "</Contents>")
            for common in prefixes:
                parts.append(f"<CommonPrefixes><Prefix>{escape(common)}</Prefix></CommonPrefixes>")
            self._send(200, ("".join(parts) + "</ListBucketResult>").encode(), "application/xml")
            return True

        def _send(self, status: int, body: bytes, content_type: str, headers: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _object_headers(self, obj: dict) -> dict:
            modified = datetime.fromisoformat(obj["updated"].replace("Z", "+00:00"))
            return {"Last-Modified": formatdate(modified.timestamp(), usegmt=True),
                    "ETag": f'"{obj["generation"]}"', "x-goog-generation": str(obj["generation"])}

        def _xml_get(self) -> bool:
            target = self._xml_object()
            if target is None:
                return False
            try:
                obj = self.storage.get_file_obj(*target)
                data = self.storage.get_file(*target)
            except NotFound:
                self._reply(404, "NoSuchKey")
                return True
            headers = self._object_headers(obj)
            match = re.fullmatch(r"\s*bytes=(\d+)-(\d*)\s*", self.headers.get("Range", "") or "")
            if match:
                start = int(match.group(1))
                end = min(len(data), int(match.group(2)) + 1) if match.group(2) else len(data)
                headers["Content-Range"] = f"bytes {start}-{end - 1}/{len(data)}"
                self._send(206, data[start:end], "application/octet-stream", headers)
            else:
                self._send(200, data, "application/octet-stream", headers)
            return True

        def _json_list(self) -> bool:
            """Object listings of the JSON API with GCS's paging (``maxResults``, ``pageToken``,
            ``startOffset``), which the emulator ignores (it answers everything at once)."""
            parsed = urlparse(self.path)
            match = re.fullmatch(r"/storage/v1/b/([^/]+)/o", parsed.path)
            if match is None:
                return False
            query = {k: v[0] for k, v in parse_qs(parsed.query).items()}
            faults.listings.append(query)
            try:
                objs, prefixes = self.storage.get_file_list(unquote(match.group(1)), query.get("prefix") or None,
                                                            query.get("delimiter") or None)
            except NotFound:
                self._reply(404, "Not Found")
                return True
            entries = sorted([(o["name"], o) for o in objs] + [(p, None) for p in prefixes], key=lambda e: e[0])
            after = query.get("pageToken")
            start = query.get("startOffset")
            entries = [e for e in entries if (after is None or e[0] > after) and (start is None or e[0] >= start)]
            limit = int(query.get("maxResults") or 1000)
            page, rest = entries[:limit], entries[limit:]
            body: dict = {"kind": "storage#objects", "items": [o for _, o in page if o is not None],
                          "prefixes": [name for name, o in page if o is None]}
            if rest:
                body["nextPageToken"] = page[-1][0]
            self._send(200, json.dumps(body).encode(), "application/json")
            return True

        def do_GET(self):
            if not self._fault() and not self._xml_list() and not self._xml_get() and not self._json_list():
                super().do_GET()

        def do_HEAD(self):
            target = self._xml_object()
            if self._fault():
                return
            try:
                obj = self.storage.get_file_obj(*target) if target else None
            except NotFound:
                obj = None
            if obj is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(obj["size"]))
            for key, value in self._object_headers(obj).items():
                self.send_header(key, value)
            self.end_headers()

        def do_DELETE(self):
            if self._fault():
                return
            target = self._xml_object()
            if target is None:
                return super().do_DELETE()
            try:
                self.storage.delete_file(*target)
            except NotFound:
                return self._reply(404, "NoSuchKey")
            self._send(204, b"", "text/plain")

    server_module.RequestHandler = _PreconditionHandler  # looked up when the API thread starts
    port = _free_port()
    server = server_module.create_server("127.0.0.1", port, in_memory=True)
    try:
        server.start()
    finally:
        server_module.RequestHandler = base_handler
    return GcsServer(f"http://127.0.0.1:{port}", server, faults)


__all__ = ["EXPIRED_TOKEN", "GcsServer", "start_server"]
