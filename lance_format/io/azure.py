"""Azure Blob Storage / ADLS Gen2 (``az://container/path``, ``abfss://container@account.dfs.core.windows.net/path``)
through ``azure-storage-blob``, an optional dependency (``pip install 'lance-assets[azure]'``).

Commits are uploads with ``If-None-Match: *``: the service creates the blob only when none
exists and answers 409 ``BlobAlreadyExists`` (or 412) otherwise, what official Lance does on
Azure (``PutMode::Create``). ADLS Gen2 accounts serve the same data over the Blob endpoint, so
``abfss://`` tables go through it too.

Options: ``object_store``'s ``AzureConfigKey`` names with their aliases: the account
(``azure_storage_account_name`` / ``account_name``, or in the URI as ``container@account``),
an account key (``azure_storage_account_key`` / ``access_key`` / ...), a SAS token
(``azure_storage_sas_token`` / ``sas_key``), a bearer token (``azure_storage_token``),
``azure_skip_signature`` (anonymous), ``azure_storage_endpoint`` (the account URL) and
``azure_storage_use_emulator`` (Azurite's well-known account on ``AZURITE_BLOB_STORAGE_URL`` or
``http://127.0.0.1:10000``). Unset keys fall back to ``AZURE_*`` environment variables of the
same names; without any credential, ``azure-identity``'s default chain is used when installed.
"""

from __future__ import annotations

import os
import threading
import time
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
FIRST_LIST_PAGE, LIST_PAGE = 100, 5000  # blobs per listing request: a small first page, then Azure's maximum
AZURE_REQUIREMENT = "azure-storage-blob>=12.19,<13"
# Azurite's well-known development account (public, documented by Microsoft)
EMULATOR_ACCOUNT = "devstoreaccount1"
EMULATOR_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

_ALIASES = {
    "account_key": ("azure_storage_account_key", "azure_storage_access_key", "azure_storage_master_key",
                    "master_key", "account_key", "access_key"),
    "account_name": ("azure_storage_account_name", "account_name"),
    "sas_key": ("azure_storage_sas_key", "azure_storage_sas_token", "sas_key", "sas_token"),
    "token": ("azure_storage_token", "bearer_token", "token"),
    "use_emulator": ("azure_storage_use_emulator", "use_emulator"),
    "endpoint": ("azure_storage_endpoint", "azure_endpoint", "endpoint"),
    "skip_signature": ("azure_skip_signature", "skip_signature"),
    "allow_http": ("allow_http", "azure_allow_http"),
}
# Azure keys Lance accepts whose effect this engine does not implement (service principals,
# managed identities, Fabric, customer-provided keys), and the container (it comes from the URI).
_UNSUPPORTED = frozenset({
    "azure_storage_client_id", "azure_client_id", "client_id", "azure_storage_client_secret", "azure_client_secret",
    "client_secret", "azure_storage_tenant_id", "azure_storage_authority_id", "azure_tenant_id",
    "azure_authority_id", "tenant_id", "authority_id", "azure_storage_authority_host", "azure_authority_host",
    "authority_host", "azure_msi_endpoint", "azure_identity_endpoint", "identity_endpoint", "msi_endpoint",
    "azure_object_id", "object_id", "azure_msi_resource_id", "msi_resource_id", "azure_federated_token_file",
    "federated_token_file", "azure_use_fabric_endpoint", "use_fabric_endpoint", "azure_use_azure_cli",
    "use_azure_cli", "azure_container_name", "container_name", "azure_disable_tagging", "disable_tagging",
    "azure_fabric_token_service_url", "fabric_token_service_url", "azure_fabric_workload_host",
    "fabric_workload_host", "azure_fabric_session_token", "fabric_session_token", "azure_fabric_cluster_identifier",
    "fabric_cluster_identifier", "azure_credential_type", "credential_type", "azure_storage_encryption_key",
    "encryption_key",
})
AZURE_OPTIONS = OptionSpec(
    store="Azure", scheme="az://", aliases=_ALIASES, unsupported=_UNSUPPORTED, client_prefix="azure_",
    env={name: (keys[0].upper(),) for name, keys in _ALIASES.items() if keys[0].startswith("azure_")},
)


@dataclass(frozen=True)
class AzureConfig:
    account: str
    container: str
    account_url: str
    credential: tuple[str, str] | None  # ("key", k), ("sas", s), ("token", t), ("anonymous", ""), None: default
    client: ClientSettings


def azure_config(container: str, account: str | None, options: dict[str, str], *, table: str | None = None,
                 environ: dict[str, str] | None = None) -> AzureConfig:
    env = os.environ if environ is None else environ
    settings = AZURE_OPTIONS.resolve(options, table=table, environ=env)
    emulator = truthy(settings.get("use_emulator", "false"))
    client = client_settings(settings, table)
    account = account or settings.get("account_name") or (EMULATOR_ACCOUNT if emulator else None)
    if not account:
        raise InvalidInputError("no Azure storage account: set storage option 'azure_storage_account_name' or use "
                                "az://container@account/path", table=table)
    if emulator:
        base = env.get("AZURITE_BLOB_STORAGE_URL", "http://127.0.0.1:10000").rstrip("/")
        account_url = f"{base}/{account}"
        client = ClientSettings(True, client.connect_timeout, client.request_timeout, client.proxy_url,
                                client.max_retries)
    elif settings.get("endpoint"):
        account_url = check_endpoint("azure_storage_endpoint", settings["endpoint"], client.allow_http, table)
    else:
        account_url = f"https://{account}.blob.core.windows.net"
    credential: tuple[str, str] | None = None
    if truthy(settings.get("skip_signature", "false")):
        credential = ("anonymous", "")
    elif settings.get("account_key"):
        credential = ("key", settings["account_key"])
    elif settings.get("sas_key"):
        credential = ("sas", settings["sas_key"].lstrip("?"))
    elif settings.get("token"):
        credential = ("token", settings["token"])
    elif emulator:
        credential = ("key", EMULATOR_KEY)
    return AzureConfig(account, container, account_url, credential, client)


def _split_uri(uri: str, parsed: ParseResult) -> tuple[str, str | None, str]:
    """(container, account or None, key prefix) of az:// and abfss:// URIs."""
    container, prefix = split_bucket_uri(uri, parsed, "az://container/path or abfss://container@account.dfs."
                                                      "core.windows.net/path")
    account = None
    if "@" in container:
        container, _, host = container.partition("@")
        account = host.split(".", 1)[0] or None
    elif parsed.scheme == "abfss":
        raise InvalidInputError("an abfss:// URI names its account: abfss://container@account.dfs.core.windows.net/"
                                "path", table=uri)
    return container, account, prefix


class _StaticToken:
    """A bearer token used as given (like Lance's static credential); expiry shows up as 401."""

    def __init__(self, token: str) -> None:
        self._token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken(self._token, int(time.time()) + 3600)


_CLIENTS: dict[AzureConfig, Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _missing(exc: ImportError) -> UnsupportedFeatureError:
    return missing_extra(exc, "az://", "azure-storage-blob", "azure", AZURE_REQUIREMENT)


def _exceptions() -> Any:
    """``azure.core.exceptions``."""
    try:
        from azure.core import exceptions as aexc
    except ImportError as exc:
        raise _missing(exc) from None
    return aexc


def _make_container_client(config: AzureConfig) -> Any:
    try:
        from azure.storage.blob import ContainerClient
    except ImportError as exc:
        raise _missing(exc) from None
    kind, value = config.credential or (None, "")
    if kind == "key":
        from azure.core.credentials import AzureNamedKeyCredential

        credential: Any = AzureNamedKeyCredential(config.account, value)
    elif kind == "sas":
        from azure.core.credentials import AzureSasCredential

        credential = AzureSasCredential(value)
    elif kind == "token":
        credential = _StaticToken(value)
    elif kind == "anonymous":
        credential = None
    else:
        try:
            from azure.identity import DefaultAzureCredential
        except ImportError:
            raise UnsupportedFeatureError(
                "no Azure credential in storage_options (account key, SAS token or bearer token), and azure-identity "
                "is not installed for the default credential chain") from None
        credential = DefaultAzureCredential()
    kwargs: dict[str, Any] = {"retry_total": 0}  # retries are ours, bounded by client_max_retries
    if config.client.connect_timeout is not None:
        kwargs["connection_timeout"] = config.client.connect_timeout
    if config.client.request_timeout is not None:
        kwargs["read_timeout"] = config.client.request_timeout
    if config.client.proxy_url:
        kwargs["proxies"] = {"http": config.client.proxy_url, "https": config.client.proxy_url}
    return ContainerClient(config.account_url, config.container, credential=credential, **kwargs)


class AzureBackend(BlobBackend):
    name = "azure"
    atomic_put = "upload with If-None-Match: * (409/412 when the blob exists)"

    def __init__(self, uri: str, root: str, config: AzureConfig) -> None:
        self.uri, self.root, self.config = uri, root, config
        self._max_retries = DEFAULT_MAX_RETRIES if config.client.max_retries is None else config.client.max_retries
        self._container: Any = None

    @classmethod
    def open(cls, uri: str, parsed: ParseResult, options: dict[str, str]) -> AzureBackend:
        container, account, prefix = _split_uri(uri, parsed)
        display = uri.rstrip("/")
        config = azure_config(container, account, options, table=display)
        return cls(display, f"{container}/{prefix}" if prefix else container, config)

    def _client(self) -> Any:
        if self._container is None:
            with _CLIENTS_LOCK:
                client = _CLIENTS.get(self.config)
                if client is None:
                    client = _CLIENTS[self.config] = _make_container_client(self.config)
            self._container = client
        return self._container

    def _blob(self, path: str) -> Any:
        return self._client().get_blob_client(path.split("/", 1)[1])

    def _call(self, what: str, call: Callable[[], T]) -> T:
        aexc = _exceptions()

        def throttled(exc: BaseException) -> bool:
            return isinstance(exc, aexc.HttpResponseError) and exc.status_code in (429, 503)

        try:
            return with_retries(call, is_throttled=throttled, max_retries=self._max_retries, store="Azure",
                                table=self.uri, what=what)
        except aexc.ClientAuthenticationError as exc:
            raise StorageAccessError(f"the Azure store refused the credentials or permission while {what}: "
                                     f"{_short(exc)}", table=self.uri) from None
        except aexc.ResourceNotFoundError as exc:
            raise FileNotFoundError(f"{what}: {_short(exc)}") from None
        except (aexc.ResourceExistsError, aexc.ResourceModifiedError):
            raise  # a refused conditional upload: put_if_absent's answer
        except aexc.HttpResponseError as exc:
            if exc.status_code in (401, 403):
                raise StorageAccessError(f"the Azure store refused the credentials or permission while {what}: "
                                         f"{_short(exc)}", table=self.uri) from None
            raise OSError(f"Azure request failed while {what} in table {self.uri!r}: {_short(exc)}") from None
        except aexc.AzureError as exc:
            raise OSError(f"Azure request failed while {what} in table {self.uri!r}: {_short(exc)}") from None

    # -- primitives ---------------------------------------------------------------------------
    def head(self, path: str) -> ObjectInfo | None:
        blob = self._blob(path)
        try:
            props = self._call(f"reading the metadata of {path!r}", blob.get_blob_properties)
        except FileNotFoundError:
            return None
        return ObjectInfo(path, int(props.size), props.last_modified)

    def read_range(self, path: str, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        blob = self._blob(path)
        return self._call(f"reading {path!r}", lambda: blob.download_blob(offset=start, length=length).readall())

    def list_objects(self, prefix: str) -> list[ObjectInfo]:
        container, _, key_prefix = prefix.partition("/")
        client = self._client()
        return self._call(f"listing {prefix!r}", lambda: [
            ObjectInfo(f"{container}/{b.name}", int(b.size), b.last_modified)
            for b in client.list_blobs(name_starts_with=key_prefix)])

    def list_sorted(self, path: str) -> Iterator[pafs.FileInfo]:
        """Blobs directly under ``path`` in lexical order, one List Blobs page at a time (Azure
        lists names in that order and continues from a marker): a caller that wants the first
        names (the newest V2 manifests) stops after one small request."""
        container, _, key_prefix = (path.rstrip("/") + "/").partition("/")
        client = self._client()

        def page(token: str | None, page_size: int) -> tuple[list[pafs.FileInfo], str | None]:
            def request() -> tuple[list[Any], str | None]:
                pages = client.walk_blobs(name_starts_with=key_prefix, delimiter="/",
                                          results_per_page=page_size).by_page(continuation_token=token)
                return list(next(pages, ())), pages.continuation_token

            blobs, next_token = self._call(f"listing {path!r}", request)
            # names ending in "/" are "directories" (BlobPrefix) below the listed one
            return [pafs.FileInfo(f"{container}/{blob.name}", pafs.FileType.File, size=int(blob.size),
                                  mtime=blob.last_modified) for blob in blobs if not blob.name.endswith("/")], next_token

        yield from list_in_pages(page, first_page=FIRST_LIST_PAGE, page=LIST_PAGE)

    def write(self, path: str, data: bytes) -> None:
        blob = self._blob(path)
        self._call(f"writing {path!r}", lambda: blob.upload_blob(bytes(data), overwrite=True))

    def write_file(self, path: str, file: Any, size: int) -> None:
        blob = self._blob(path)

        def upload() -> None:
            file.seek(0)
            blob.upload_blob(file, length=size, overwrite=True)

        self._call(f"writing {path!r}", upload)

    def put_if_absent(self, path: str, data: bytes, *, relative: str) -> bool:
        aexc = _exceptions()

        blob = self._blob(path)
        try:
            # overwrite=False: the SDK sends If-None-Match: * (a single-shot Put Blob for small data)
            self._call(f"committing {relative!r}", lambda: blob.upload_blob(bytes(data), overwrite=False))
        except (aexc.ResourceExistsError, aexc.ResourceModifiedError):
            return False
        return True

    def delete(self, path: str) -> None:
        blob = self._blob(path)
        try:
            self._call(f"deleting {path!r}", blob.delete_blob)
        except FileNotFoundError:
            pass


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) < 300 else text[:300] + "..."


__all__ = ["AZURE_OPTIONS", "AZURE_REQUIREMENT", "AzureBackend", "AzureConfig", "azure_config"]
