"""Typed exceptions of the Lance engine.

Every error derives from :class:`LanceError`. Errors carry the context a user needs to find
the problem (the table, the version, the file, the column) and render it into the message.
"""

from __future__ import annotations

from typing import Any


class LanceError(Exception):
    """Base class of every error raised by ``lance_format``."""

    def __init__(
        self,
        message: str,
        *,
        table: str | None = None,
        version: int | None = None,
        path: str | None = None,
        column: str | None = None,
    ) -> None:
        self.reason = message
        self.table = table
        self.version = version
        self.path = path
        self.column = column
        super().__init__(self._render())

    def _render(self) -> str:
        context: list[str] = []
        if self.table is not None:
            context.append(f"table={self.table}")
        if self.version is not None:
            context.append(f"version={self.version}")
        if self.path is not None:
            context.append(f"file={self.path}")
        if self.column is not None:
            context.append(f"column={self.column}")
        if not context:
            return self.reason
        return f"{self.reason} [{', '.join(context)}]"

    def with_context(self, **context: Any) -> LanceError:
        """Fill in context fields that are still unknown and re-render the message."""
        for key in ("table", "version", "path", "column"):
            if getattr(self, key) is None and context.get(key) is not None:
                setattr(self, key, context[key])
        self.args = (self._render(),)
        return self


# Each error also derives from the builtin exception pylance raises in the same situation, so
# code written against pylance (``except ValueError``, ``except OSError``) catches ours too.


class DatasetNotFoundError(LanceError, FileNotFoundError, ValueError):
    """No Lance table exists at the given URI (pylance: ``ValueError``)."""


class DatasetAlreadyExistsError(LanceError, FileExistsError):
    """``mode="create"`` was asked for, but a table already exists at the URI (pylance: ``OSError``)."""


class VersionNotFoundError(LanceError, ValueError):
    """The requested version or tag does not exist (pylance: ``ValueError``)."""


class TagError(LanceError, ValueError):
    """A tag operation failed: already exists, missing, or invalid name (pylance: ``ValueError``)."""


class TagNotFoundError(TagError, OSError):
    """The tag named does not exist (pylance: ``ValueError`` from the tag calls and opening a table,
    ``OSError`` from ``checkout_version``; this is both)."""


class TaggedVersionsError(TagError, OSError):
    """``cleanup_old_versions`` would remove versions that tags still point at (pylance: ``OSError``)."""


class BranchError(LanceError, ValueError):
    """A branch operation failed: already exists, missing, still referenced, or invalid name."""


class CommitConflictError(LanceError, OSError):
    """A concurrent writer committed an incompatible change first."""

    def __init__(self, message: str = "", **context: Any) -> None:
        # pylance's lance.commit.CommitConflictError() takes no message (commit locks raise it bare)
        super().__init__(message, **context)


class DuplicateCommitError(CommitConflictError):
    """A write carrying the same idempotency key committed first; ``version`` is that commit.

    Raised by the commit loop instead of publishing the same logical write twice (two runs of
    one job racing each other). ``transaction`` is the winner's transaction.
    """

    def __init__(self, message: str, *, transaction: Any = None, **context: Any) -> None:
        self.transaction = transaction
        super().__init__(message, **context)


class RetryableCommitConflictError(CommitConflictError):
    """A concurrent commit got in the way; redoing the operation on the latest version may work."""


class CommitLockError(LanceError, OSError):
    """A custom commit lock (pylance's ``commit_lock=``) failed to acquire or release
    (pylance: ``OSError``). When it failed on release, the version may have been committed."""


class UnsupportedFeatureError(LanceError, NotImplementedError):
    """The table or file uses a feature this engine does not implement (flags, file versions, types)."""


class UnsupportedCommitError(UnsupportedFeatureError, OSError):
    """A commit this table cannot take (pylance: ``OSError``), e.g. a detached commit to a
    table with V1 manifest names."""


class CorruptFileError(LanceError, OSError):
    """A file of the table is truncated, malformed or inconsistent with the manifest."""


class SchemaMismatchError(LanceError, OSError):
    """Data does not match the table's schema."""


class InvalidInputError(LanceError, ValueError):
    """An argument is invalid (bad mode, bad filter, bad path)."""


class MalformedInputError(InvalidInputError):
    """Arrow data handed to the engine is structurally broken (offsets that go backwards or past
    their data, buffers shorter than the length, dictionary indices out of range), e.g. built
    with ``pa.Array.from_buffers`` or passed through the C data interface (pylance: ``ValueError``)."""


class NewColumnDataError(SchemaMismatchError, InvalidInputError):
    """Data for new columns does not fit the table: a stream with fewer or more rows than the
    table has, or a UDF output whose schema is not the expected one (pylance: ``OSError`` from
    ``add_columns``, ``ValueError`` from ``LanceFragment.merge_columns``)."""


class CommitOptionError(InvalidInputError, OSError):
    """An option of a commit or cleanup is invalid: a zero ``commit_timeout``, a ``delete_rate_limit``
    of 0, a ``retain_versions`` of 0 (pylance: ``OSError``)."""


class EmptyDataError(InvalidInputError, OSError):
    """There is nothing to write: data without columns, or no rows where a fragment needs some
    (pylance: ``OSError``)."""


class InvalidRowSelectionError(InvalidInputError, OSError):
    """Rows asked of a file-level read that it cannot serve: out of range, or not in strictly
    increasing order where the read needs it (``FragmentSession.take``; pylance: ``OSError``)."""


class ArgumentTypeError(InvalidInputError, TypeError):
    """An argument has the wrong type, e.g. a fragment list holding something else (pylance: ``TypeError``)."""


class ColumnNotFoundError(InvalidInputError, RuntimeError):
    """A named column is not in the table's schema (pylance's blob reads: ``RuntimeError``)."""


class IndexColumnNotFoundError(ColumnNotFoundError, KeyError):
    """An index was asked for on a column the schema does not have (pylance: ``KeyError``)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""  # not KeyError's quoted repr


class IndexNotFoundError(LanceError, KeyError, RuntimeError):
    """No index has the given name (pylance: ``RuntimeError`` from ``drop_index``/``prewarm_index``,
    ``KeyError`` from ``index_statistics``; this is both)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class IndexExistsError(LanceError, RuntimeError):
    """An index of that name already exists and ``replace`` was not asked for (pylance: ``RuntimeError``)."""


class NotABlobColumnError(InvalidInputError):
    """A blob read (``take_blobs``, ``read_blobs``, ``read_blob_ranges``, ``BlobColumn``) was
    given a column that does not hold blobs (pylance: ``ValueError``)."""


class DeletedRowError(InvalidRowSelectionError, NotImplementedError):
    """A read by row id or row address names a deleted row (pylance's blob reads: ``NotImplementedError``)."""


class BlobFileClosedError(InvalidInputError):
    """An operation on a closed ``BlobFile`` (pylance: ``ValueError``, like any closed file)."""


class PathEscapeError(CorruptFileError):
    """A path read from a manifest points outside the table root."""


class StorageAccessError(LanceError, PermissionError):
    """The object store refused the credentials (missing, invalid or expired) or the permission."""


class ImageReadError(LanceError, OSError):
    """An image location (``ImageURIArray.read_uris``) could not be read: missing, refused or unreachable."""


class WorkerEnvironmentError(LanceError, ImportError):
    """Spark's Python workers run an interpreter that lacks ``lance_format`` or its dependencies."""


class StorageThrottledError(LanceError, OSError):
    """The object store kept throttling requests (HTTP 429/503) beyond the bounded retries."""


__all__ = [
    "LanceError",
    "BlobFileClosedError",
    "ColumnNotFoundError",
    "IndexColumnNotFoundError",
    "IndexExistsError",
    "IndexNotFoundError",
    "DeletedRowError",
    "NotABlobColumnError",
    "InvalidRowSelectionError",
    "DatasetNotFoundError",
    "DatasetAlreadyExistsError",
    "VersionNotFoundError",
    "TagError",
    "TagNotFoundError",
    "TaggedVersionsError",
    "CommitOptionError",
    "CommitConflictError",
    "DuplicateCommitError",
    "RetryableCommitConflictError",
    "CommitLockError",
    "UnsupportedCommitError",
    "UnsupportedFeatureError",
    "CorruptFileError",
    "SchemaMismatchError",
    "InvalidInputError",
    "ArgumentTypeError",
    "EmptyDataError",
    "NewColumnDataError",
    "PathEscapeError",
    "BranchError",
    "StorageAccessError",
    "StorageThrottledError",
    "ImageReadError",
    "WorkerEnvironmentError",
    "MalformedInputError",
]
