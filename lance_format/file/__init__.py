"""Lance data files (file versions 2.0, 2.1 and 2.2): the container, and readers and writers per layout.

- :mod:`.container`: footer, column-metadata and global-buffer tables (the same for every version);
- :mod:`.plans`: which columns hold each field (2.0: one per field; 2.1+: one per leaf);
- :mod:`.reader`: :class:`LanceFileReader`, which dispatches on the file version to
  :mod:`.reader_v2_0` (2.0 ``ArrayEncoding`` columns) or :mod:`.reader_structural` (2.1/2.2);
- :mod:`.writer`: :class:`LanceFileWriter`, with the 2.0 column writers in :mod:`.writer_v2_0`
  (the 2.1/2.2 page writers are :mod:`lance_format.encodings.structural`);
- :mod:`.utf8`: UTF-8 validation of decoded string columns.

The page encodings themselves live in :mod:`lance_format.encodings`.
"""

from lance_format.file.plans import ColumnPlan
from lance_format.file.reader import LanceFileReader
from lance_format.file.writer import LanceFileWriter, WrittenFile

__all__ = ["ColumnPlan", "LanceFileReader", "LanceFileWriter", "WrittenFile"]
