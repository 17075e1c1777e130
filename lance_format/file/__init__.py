"""Lance data files (file versions 2.0, 2.1 and 2.2): the container, and readers and writers per layout.

The package exports pylance's ``lance.file`` API (:mod:`.api`): :class:`LanceFileReader`,
:class:`LanceFileWriter` and :class:`LanceFileSession` over paths and URIs, file metadata and
statistics, and :func:`stable_version`. The engine's own classes, which the table layer uses, are
in the modules:

- :mod:`.container`: footer, column-metadata and global-buffer tables (the same for every version);
- :mod:`.plans`: which columns hold each field (2.0: one per field; 2.1+: one per leaf);
- :mod:`.reader`: :class:`~.reader.DataFileReader` over an object store, which dispatches on the
  file version to :mod:`.reader_v2_0` (2.0 ``ArrayEncoding`` columns) or :mod:`.reader_structural` (2.1/2.2);
- :mod:`.writer`: :class:`~.writer.DataFileWriter` of a :class:`~lance_format.schema.LanceSchema`,
  with the 2.0 column writers in :mod:`.writer_v2_0` (the 2.1/2.2 page writers are
  :mod:`lance_format.encodings.structural`);
- :mod:`.utf8`: UTF-8 validation of decoded string columns.

The page encodings themselves live in :mod:`lance_format.encodings`.
"""

from lance_format.file.api import (
    LanceBufferDescriptor,
    LanceColumnMetadata,
    LanceColumnStatistics,
    LanceFileMetadata,
    LanceFileReader,
    LanceFileSession,
    LanceFileStatistics,
    LanceFileWriter,
    LancePageMetadata,
    ListResult,
    ReaderResults,
    stable_version,
)
from lance_format.file.plans import ColumnPlan
from lance_format.file.writer import WrittenFile

__all__ = [
    "LanceFileReader",
    "LanceFileWriter",
    "LanceFileSession",
    "LanceFileMetadata",
    "LanceColumnMetadata",
    "LancePageMetadata",
    "LanceBufferDescriptor",
    "LanceFileStatistics",
    "LanceColumnStatistics",
    "ReaderResults",
    "ListResult",
    "stable_version",
    "ColumnPlan",
    "WrittenFile",
]
