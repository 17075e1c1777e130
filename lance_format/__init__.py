"""lance_format: a pure-Python engine for the Lance table format.

The public API mirrors pylance's: ``write_dataset``, ``dataset`` and ``LanceDataset``.
Subpackages: ``io`` (filesystem access), ``schema`` (fields and types), ``file`` and
``encodings`` (the Lance file format), ``table`` (manifests, transactions, commits, deletions,
row ids), ``dataset`` (the user-facing table API).
"""

from lance_format.dataset.dataset import LanceDataset, dataset
from lance_format.dataset.fragment import LanceFragment
from lance_format.dataset.scanner import LanceScanner
from lance_format.dataset.write import write_dataset
from lance_format.errors import (
    CommitConflictError,
    CorruptFileError,
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    InvalidInputError,
    LanceError,
    PathEscapeError,
    SchemaMismatchError,
    StorageAccessError,
    StorageThrottledError,
    TagError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)

__all__ = [
    "LanceDataset",
    "LanceFragment",
    "LanceScanner",
    "dataset",
    "write_dataset",
    "LanceError",
    "CommitConflictError",
    "CorruptFileError",
    "DatasetAlreadyExistsError",
    "DatasetNotFoundError",
    "InvalidInputError",
    "PathEscapeError",
    "SchemaMismatchError",
    "StorageAccessError",
    "StorageThrottledError",
    "TagError",
    "UnsupportedFeatureError",
    "VersionNotFoundError",
]
