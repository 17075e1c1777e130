"""lance_format: a pure-Python engine for the Lance table format.

The public API mirrors pylance's: ``write_dataset``, ``dataset``, ``LanceDataset`` and
``DatasetBasePath`` (a base path of a multi-base table), and the distributed-write protocol:
``lance_format.fragment`` (``LanceFragment.create``, ``write_fragments``, ``FragmentMetadata``),
``LanceOperation``, ``Transaction`` and ``LanceDataset.commit``.
Subpackages: ``io`` (filesystem access), ``schema`` (fields and types), ``file`` and
``encodings`` (the Lance file format), ``table`` (manifests, transactions, commits, deletions,
row ids), ``dataset`` (the user-facing table API).

Beyond pylance's names, the package exports what integrations (such as ``lance_assets``) need,
so that they never import the subpackages, whose layout may change: ``replace_where`` and
``write_with_new_columns`` (one-commit partition replaces and schema-widening writes),
``checked_reader`` (refuse rows outside a predicate while streaming), and version discovery:
``TableVersions`` (new versions after a known one, found without listing the history, and
``VersionSummary`` of one version from its manifest; ``NewVersions`` is a probe's result), and
``sql_expression_type`` (the Arrow type of a SQL expression over a schema, e.g. to render
literals compared with ``CAST(ts AS DATE)``), and ``publish_branch`` (move main to a branch's one
commit atomically: write-audit-publish). External manifest stores (commits coordinated
through a key-value store, like official Lance's ``s3+ddb://`` DynamoDB store) plug in with
``register_manifest_store`` (a ``ManifestStore`` of ``ManifestLocation`` entries).
"""

from importlib import metadata as _metadata

import pyarrow as _pa

from lance_format import (  # noqa: E402,F401 - so are ``lance.lance``, ``.progress``, ``.util``
    fragment,  # noqa: E402,F401 - ``lance.fragment`` is a module attribute in pylance
    lance,
    progress,
    query,  # noqa: E402,F401 - ``lance.query``: the full-text query objects
    util,
)
from lance_format.blob import (
    Blob,
    BlobArray,
    BlobColumn,
    BlobDescriptor,
    BlobDescriptorArrayBuilder,
    BlobFile,
    DedicatedBlobWriter,
    PackedBlobWriter,
    blob_array,
    blob_field,
)
from lance_format.dataset.branch_publish import publish_branch
from lance_format.dataset.dataset import LanceDataset, dataset
from lance_format.dataset.evolution.new_column_writes import write_with_new_columns
from lance_format.dataset.fragment import LanceFragment
from lance_format.dataset.fragment_metadata import FragmentMetadata
from lance_format.dataset.inspection import DataStatistics, FieldStatistics, LanceStats
from lance_format.dataset.mutations.base import checked_reader
from lance_format.dataset.mutations.merge_insert import MergeInsertBuilder
from lance_format.dataset.mutations.replace_where import replace_where
from lance_format.dataset.scan_stats import ScanStatistics
from lance_format.dataset.scanner import LanceScanner
from lance_format.dataset.session import Session
from lance_format.dataset.sql.filter import to_value_expression as _to_value_expression
from lance_format.dataset.transactions_api import LanceOperation, Transaction
from lance_format.dataset.writing.write_dataset import write_dataset
from lance_format.errors import (
    ArgumentTypeError,
    BlobFileClosedError,
    BranchError,
    ColumnNotFoundError,
    CommitConflictError,
    CommitLockError,
    CommitOptionError,
    CorruptFileError,
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    DeletedRowError,
    DuplicateCommitError,
    EmptyDataError,
    ImageReadError,
    IndexColumnNotFoundError,
    IndexExistsError,
    IndexNotFoundError,
    InvalidInputError,
    InvalidRowSelectionError,
    LanceError,
    MalformedInputError,
    NewColumnDataError,
    NotABlobColumnError,
    PathEscapeError,
    RetryableCommitConflictError,
    SchemaMismatchError,
    StorageAccessError,
    StorageThrottledError,
    TagError,
    TaggedVersionsError,
    TagNotFoundError,
    UnsupportedCommitError,
    UnsupportedFeatureError,
    VersionNotFoundError,
    WorkerEnvironmentError,
)
from lance_format.io import ExternalManifestTarget, ManifestLocation, ManifestStore, register_manifest_store
from lance_format.io.counters import bytes_read_counter, iops_counter
from lance_format.log import set_logger
from lance_format.schema.json_schema import json_to_schema, schema_to_json
from lance_format.simd import simd_info
from lance_format.table.base_paths import DatasetBasePath
from lance_format.table.cleanup import (
    CleanupCandidateFile,
    CleanupExplanation,
    CleanupReferencedBranch,
    CleanupStats,
)
from lance_format.table.version_discovery import NewVersions, TableVersions, VersionSummary
from lance_format.udf import BatchUDF, batch_udf

try:
    __version__ = _metadata.version("lance-assets")
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"


def sql_expression_type(sql: str, schema: _pa.Schema) -> _pa.DataType:
    """The Arrow type of the SQL scalar expression ``sql`` (the filter dialect) over ``schema``.

    Raises :class:`InvalidInputError` for a syntax error or an unknown column.
    """
    return _to_value_expression(sql, schema)[1]


__all__ = [
    "__version__",
    "Blob",
    "BlobArray",
    "BlobColumn",
    "BlobDescriptor",
    "BlobDescriptorArrayBuilder",
    "BlobFile",
    "DedicatedBlobWriter",
    "PackedBlobWriter",
    "blob_array",
    "blob_field",
    "LanceDataset",
    "LanceStats",
    "DataStatistics",
    "FieldStatistics",
    "CleanupStats",
    "CleanupExplanation",
    "CleanupCandidateFile",
    "CleanupReferencedBranch",
    "simd_info",
    "json_to_schema",
    "schema_to_json",
    "batch_udf",
    "BatchUDF",
    "LanceFragment",
    "DatasetBasePath",
    "LanceScanner",
    "ScanStatistics",
    "MergeInsertBuilder",
    "bytes_read_counter",
    "iops_counter",
    "set_logger",
    "Session",
    "FragmentMetadata",
    "LanceOperation",
    "Transaction",
    "dataset",
    "write_dataset",
    "replace_where",
    "write_with_new_columns",
    "publish_branch",
    "checked_reader",
    "TableVersions",
    "NewVersions",
    "VersionSummary",
    "sql_expression_type",
    "ManifestStore",
    "ManifestLocation",
    "ExternalManifestTarget",
    "register_manifest_store",
    "LanceError",
    "ArgumentTypeError",
    "BlobFileClosedError",
    "ColumnNotFoundError",
    "IndexColumnNotFoundError",
    "IndexExistsError",
    "IndexNotFoundError",
    "DeletedRowError",
    "NotABlobColumnError",
    "EmptyDataError",
    "NewColumnDataError",
    "CommitConflictError",
    "CorruptFileError",
    "DatasetAlreadyExistsError",
    "DatasetNotFoundError",
    "DuplicateCommitError",
    "InvalidInputError",
    "InvalidRowSelectionError",
    "PathEscapeError",
    "RetryableCommitConflictError",
    "CommitLockError",
    "UnsupportedCommitError",
    "SchemaMismatchError",
    "StorageAccessError",
    "StorageThrottledError",
    "ImageReadError",
    "MalformedInputError",
    "WorkerEnvironmentError",
    "TagError",
    "TagNotFoundError",
    "TaggedVersionsError",
    "CommitOptionError",
    "BranchError",
    "UnsupportedFeatureError",
    "VersionNotFoundError",
]


def __getattr__(name: str) -> object:
    """``lance_format.namespace`` (as pylance's ``lance.namespace``) is imported when first used:
    it needs the optional ``lance-namespace`` package."""
    if name == "namespace":
        import importlib

        try:
            return importlib.import_module("lance_format.namespace")
        except ModuleNotFoundError as exc:
            if exc.name is None or not exc.name.startswith("lance_namespace"):
                raise
            raise ModuleNotFoundError(f"lance_format.namespace needs the 'lance-namespace' package: "
                                      f"pip install 'lance-assets[namespace]' ({exc})", name=exc.name) from exc
    raise AttributeError(f"module 'lance_format' has no attribute {name!r}")
