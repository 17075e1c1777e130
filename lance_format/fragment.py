"""pylance's ``lance.fragment`` module: fragments and the first phase of a distributed write.

Workers call :meth:`LanceFragment.create` or :func:`write_fragments` and send the returned
:class:`FragmentMetadata` (as JSON or pickled) to one process, which commits them with
``LanceDataset.commit(uri, LanceOperation.Append(fragments), read_version=...)``.
"""

from lance_format.dataset.fragment import LanceFragment
from lance_format.dataset.fragment_metadata import (
    DataFile,
    DeletionFile,
    FragmentMetadata,
    RowDatasetVersionMeta,
    RowIdMeta,
    RowIdSequence,
)
from lance_format.dataset.fragment_session import FragmentSession
from lance_format.dataset.fragment_writes import write_fragments
from lance_format.dataset.writing.fragment_sink import DEFAULT_MAX_BYTES_PER_FILE

__all__ = [
    "LanceFragment", "FragmentMetadata", "DataFile", "DeletionFile", "RowIdMeta", "RowDatasetVersionMeta",
    "RowIdSequence", "write_fragments", "DEFAULT_MAX_BYTES_PER_FILE", "FragmentSession",
]
