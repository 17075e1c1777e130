"""Google Cloud Storage (``gs://bucket/path``) through ``google-cloud-storage``, an optional
dependency (``pip install 'lance-assets[gcs]'``) imported when a ``gs://`` table is opened.

Commits are create-only uploads with ``ifGenerationMatch=0``: GCS accepts the object only when
no live generation of it exists and answers 412 otherwise (what official Lance does on GCS,
``PutMode::Create``). The SDK is the official, maintained client; it speaks the JSON API and
takes a custom endpoint, so the same code reaches GCS and an emulator.

Options: ``object_store``'s ``GoogleConfigKey`` names with their aliases: a service account
JSON file (``google_service_account`` / ``service_account_path``), its contents
(``google_service_account_key``), an application-credentials file
(``google_application_credentials``), Lance's ``google_storage_token`` (a bearer token, also
``google_bearer_token``), ``google_skip_signature`` (anonymous), and ``google_base_url`` (the
endpoint). Like ``object_store``, a service account JSON may carry ``gcs_base_url`` and
``disable_oauth`` (how emulators are reached). Unset keys fall back to the ``GOOGLE_*``
environment variables of the same names, then to Google's default credentials.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import ParseResult

import pyarrow.fs as pafs

from lance_format.errors import InvalidInputError, StorageAccessError, UnsupportedFeatureError
from lance_format.io.backend import (
    DEFAULT_MAX_RETRIES,
    BlobBackend,
    ObjectInfo,
    list_in_pages,
    missing_extra,
    split_bucket_uri,
    with_retries,
)
from lance_format.io.storage_options import ClientSettings, OptionSpec, check_endpoint, client_settings, truthy

T = TypeVar("T")
FIRST_LIST_PAGE, LIST_PAGE = 100, 1000  # objects per listing request: a small first page, then GCS's maximum
GCS_REQUIREMENT = "google-cloud-storage>=2.18,<4"
_SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"
_DEFAULT_BASE_URL = "https://storage.googleapis.com"

GCS_OPTIONS = OptionSpec(
    store="GCS", scheme="gs://", client_prefix="google_",
    aliases={
        "service_account": ("google_service_account", "service_account", "google_service_account_path",
                            "service_account_path"),
        "service_account_key": ("google_service_account_key", "service_account_key"),
        "application_credentials": ("google_application_credentials", "application_credentials"),
        "token": ("google_storage_token", "google_bearer_token", "bearer_token"),
        "skip_signature": ("google_skip_signature", "skip_signature"),
        "base_url": ("google_base_url", "base_url"),
    },
    # the bucket comes from the URI; a second source could only disagree with it
    unsupported=frozenset({"google_bucket", "google_bucket_name", "bucket", "bucket_name"}),
    env={
        "service_account": ("GOOGLE_SERVICE_ACCOUNT", "GOOGLE_SERVICE_ACCOUNT_PATH"),
        "service_account_key": ("GOOGLE_SERVICE_ACCOUNT_KEY",),
        "token": ("GOOGLE_STORAGE_TOKEN",),
        "base_url": ("GOOGLE_BASE_URL",),
    },
)


@dataclass(frozen=True)
class GcsConfig:
    bucket: str
    base_url: str | None  # None: Google's endpoint
    credentials: tuple[str, str] | None  # (kind, value): ("token", t), ("key", json), ("file", path), ("anonymous", "")
    project: str | None
    client: ClientSettings


def gcs_config(bucket: str, options: dict[str, str], *, table: str | None = None,
               environ: dict[str, str] | None = None) -> GcsConfig:
    settings = GCS_OPTIONS.resolve(options, table=table, environ=environ)
    client = client_settings(settings, table)
    key_text = settings.get("service_account_key")
    if settings.get("service_account"):
        try:
            with open(settings["service_account"], encoding="utf-8") as f:
                key_text = f.read()
        except OSError as exc:
            raise InvalidInputError(f"storage option 'google_service_account': cannot read "
                                    f"{settings['service_account']!r}: {exc}", table=table) from None
    key: dict[str, Any] | None = None
    if key_text is not None:
        try:
            key = json.loads(key_text)
            assert isinstance(key, dict)
        except (ValueError, AssertionError):
            raise InvalidInputError("the GCS service account key is not a JSON object", table=table) from None
    base_url = settings.get("base_url") or (key or {}).get("gcs_base_url")
    if base_url and base_url.rstrip("/") != _DEFAULT_BASE_URL:
        base_url = check_endpoint("google_base_url", base_url, client.allow_http, table)
    else:
        base_url = None
    credentials: tuple[str, str] | None = None
    if truthy(settings.get("skip_signature", "false")) or (key is not None and key.get("disable_oauth")):
        credentials = ("anonymous", "")
    elif settings.get("token"):
        credentials = ("token", settings["token"])
    elif key is not None:
        credentials = ("key", json.dumps(key))
    elif settings.get("application_credentials"):
        credentials = ("file", settings["application_credentials"])
    project = (key or {}).get("project_id") or None
    return GcsConfig(bucket, base_url, credentials, project, client)


def _missing(exc: ImportError) -> UnsupportedFeatureError:
    return missing_extra(exc, "gs://", "google-cloud-storage", "gcs", GCS_REQUIREMENT)


def _sdk() -> Any:
    try:
        from google.cloud import storage
    except ImportError as exc:
        raise _missing(exc) from None
    return storage


def _exceptions() -> tuple[Any, Any]:
    """The SDK's exception modules (``google.api_core.exceptions``, ``google.auth.exceptions``)."""
    try:
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc
    except ImportError as exc:
        raise _missing(exc) from None
    return gexc, auth_exc


_CLIENTS: dict[GcsConfig, Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _make_client(config: GcsConfig) -> Any:
    storage = _sdk()
    kind, value = config.credentials or (None, "")
    if kind == "anonymous":
        from google.auth.credentials import AnonymousCredentials

        credentials: Any = AnonymousCredentials()
    elif kind == "token":
        from google.oauth2.credentials import Credentials

        credentials = Credentials(token=value)  # used as given, like Lance's static token provider
    elif kind == "key":
        from google.oauth2 import service_account

        credentials = service_account.Credentials.from_service_account_info(json.loads(value), scopes=[_SCOPE])
    elif kind == "file":
        import google.auth

        credentials, _ = google.auth.load_credentials_from_file(value, scopes=[_SCOPE])
    else:
        import google.auth

        credentials, _ = google.auth.default(scopes=[_SCOPE])
    options = {"api_endpoint": config.base_url} if config.base_url else None
    return storage.Client(project=config.project or "_", credentials=credentials, client_options=options)


class GcsBackend(BlobBackend):
    name = "gcs"
    atomic_put = "create-only upload with ifGenerationMatch=0 (412 when the object exists)"

    def __init__(self, uri: str, root: str, config: GcsConfig) -> None:
        self.uri, self.root, self.config = uri, root, config
        self._max_retries = DEFAULT_MAX_RETRIES if config.client.max_retries is None else config.client.max_retries
        self._timeout = config.client.request_timeout or 60.0
        self._bucket: Any = None

    @classmethod
    def open(cls, uri: str, parsed: ParseResult, options: dict[str, str]) -> GcsBackend:
        bucket, prefix = split_bucket_uri(uri, parsed, "gs://bucket/path/to/table")
        root = f"{bucket}/{prefix}" if prefix else bucket
        display = f"gs://{root}"
        return cls(display, root, gcs_config(bucket, options, table=display))

    # -- plumbing -----------------------------------------------------------------------------
    def _client_bucket(self) -> Any:
        if self._bucket is None:
            with _CLIENTS_LOCK:  # clients are slow to build and thread-safe: one per config
                client = _CLIENTS.get(self.config)
                if client is None:
                    client = _CLIENTS[self.config] = self._call("connecting", lambda: _make_client(self.config))
            self._bucket = client.bucket(self.config.bucket)
        return self._bucket

    def _blob(self, path: str) -> Any:
        return self._client_bucket().blob(path.split("/", 1)[1])

    def _call(self, what: str, call: Callable[[], T]) -> T:
        gexc, auth_exc = _exceptions()

        def throttled(exc: BaseException) -> bool:
            return isinstance(exc, (gexc.TooManyRequests, gexc.ServiceUnavailable))

        try:
            return with_retries(call, is_throttled=throttled, max_retries=self._max_retries, store="GCS",
                                table=self.uri, what=what)
        except (gexc.Unauthorized, gexc.Forbidden, auth_exc.RefreshError, auth_exc.DefaultCredentialsError) as exc:
            raise StorageAccessError(f"the GCS store refused the credentials or permission while {what}: "
                                     f"{_short(exc)}", table=self.uri) from None
        except gexc.NotFound as exc:
            raise FileNotFoundError(f"{what}: {_short(exc)}") from None
        except gexc.PreconditionFailed:
            raise  # a refused create-only upload: put_if_absent's answer
        except gexc.GoogleAPICallError as exc:
            raise OSError(f"GCS request failed while {what} in table {self.uri!r}: {_short(exc)}") from None

    # -- primitives ---------------------------------------------------------------------------
    def head(self, path: str) -> ObjectInfo | None:
        bucket = self._client_bucket()
        blob = self._call(f"reading the metadata of {path!r}",
                          lambda: bucket.get_blob(path.split("/", 1)[1], retry=None, timeout=self._timeout))
        return None if blob is None else ObjectInfo(path, int(blob.size or 0), blob.updated)

    def read_range(self, path: str, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        blob = self._blob(path)
        return self._call(f"reading {path!r}", lambda: blob.download_as_bytes(
            start=start, end=start + length - 1, checksum=None, raw_download=True, retry=None, timeout=self._timeout))

    def list_objects(self, prefix: str) -> list[ObjectInfo]:
        bucket_name, _, key_prefix = prefix.partition("/")
        bucket = self._client_bucket()

        def listing() -> list[ObjectInfo]:
            return [ObjectInfo(f"{bucket_name}/{b.name}", int(b.size or 0), b.updated)
                    for b in bucket.client.list_blobs(bucket, prefix=key_prefix, retry=None, timeout=self._timeout)]

        return self._call(f"listing {prefix!r}", listing)

    def list_sorted(self, path: str) -> Iterator[pafs.FileInfo]:
        """Objects directly under ``path`` in lexical order, one listing page at a time (GCS
        lists names in that order): a caller that wants the first names (the newest V2
        manifests) stops after one small request."""
        bucket_name, _, key_prefix = (path.rstrip("/") + "/").partition("/")
        bucket = self._client_bucket()

        def page(token: str | None, page_size: int) -> tuple[list[pafs.FileInfo], str | None]:
            def request() -> tuple[list[Any], str | None]:
                listing = bucket.client.list_blobs(bucket, prefix=key_prefix, delimiter="/", page_size=page_size,
                                                   page_token=token, retry=None, timeout=self._timeout)
                return list(next(listing.pages, ())), listing.next_page_token

            blobs, next_token = self._call(f"listing {path!r}", request)
            return [pafs.FileInfo(f"{bucket_name}/{blob.name}", pafs.FileType.File, size=int(blob.size or 0),
                                  mtime=blob.updated) for blob in blobs], next_token

        yield from list_in_pages(page, first_page=FIRST_LIST_PAGE, page=LIST_PAGE)

    def write(self, path: str, data: bytes) -> None:
        blob = self._blob(path)
        self._call(f"writing {path!r}", lambda: blob.upload_from_string(
            bytes(data), content_type="application/octet-stream", retry=None, timeout=self._timeout))

    def write_file(self, path: str, file: Any, size: int) -> None:
        blob = self._blob(path)

        def upload() -> None:
            file.seek(0)
            blob.upload_from_file(file, size=size, content_type="application/octet-stream", retry=None,
                                  timeout=self._timeout)

        self._call(f"writing {path!r}", upload)

    def put_if_absent(self, path: str, data: bytes, *, relative: str) -> bool:
        gexc, _ = _exceptions()

        blob = self._blob(path)
        try:
            self._call(f"committing {relative!r}", lambda: blob.upload_from_string(
                bytes(data), content_type="application/octet-stream", if_generation_match=0, retry=None,
                timeout=self._timeout))
        except gexc.PreconditionFailed:
            return False
        return True

    def delete(self, path: str) -> None:
        blob = self._blob(path)
        try:
            self._call(f"deleting {path!r}", lambda: blob.delete(retry=None, timeout=self._timeout))
        except FileNotFoundError:
            pass


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) < 300 else text[:300] + "..."


__all__ = ["GCS_OPTIONS", "GCS_REQUIREMENT", "GcsBackend", "GcsConfig", "gcs_config"]
