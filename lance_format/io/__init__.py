"""IO layer: a table-rooted view (:class:`ObjectStore`) of one storage backend chosen by URI
scheme (local paths, ``s3://``, ``gs://``, ``az://``/``abfss://``, ``memory://``), each with an
atomic put-if-absent for commits, and Lance-style ``storage_options`` validated per backend;
and external manifest stores (``s3+ddb://``, or any registered with :func:`register_manifest_store`)
that coordinate commits through a key-value store."""

from lance_format.io.backend import BACKENDS, SUPPORTED_SCHEMES, StorageBackend
from lance_format.io.manifest_store import (
    ExternalManifestTarget,
    InMemoryManifestStore,
    ManifestLocation,
    ManifestStore,
    register_manifest_store,
)
from lance_format.io.object_store import ObjectStore, check_relative_path, object_store_for
from lance_format.io.storage_options import normalize_storage_options

__all__ = [
    "BACKENDS", "ObjectStore", "SUPPORTED_SCHEMES", "StorageBackend", "check_relative_path", "normalize_storage_options",
    "object_store_for", "ExternalManifestTarget", "InMemoryManifestStore", "ManifestLocation", "ManifestStore",
    "register_manifest_store",
]
