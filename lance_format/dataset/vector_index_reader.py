"""pylance's ``lance.dataset.VectorIndexReader``: the partitions of a vector index, as stored.

``read_partition(i)`` is partition ``i``'s rows of the index's ``auxiliary.idx`` (``_rowid``, and
with ``with_vector=True`` the stored codes: ``flat`` vectors, ``__pq_code`` (as stored:
transposed within the partition, as pylance returns them) or ``__sq_code``), with the file's
schema metadata, exactly as pylance returns them. The first segment of the index is read (as
pylance's, which reads its ``index_stats``' first entry).
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

import pyarrow as pa

from lance_format.file.api import LanceFileReader
from lance_format.index.vector.ivf_reader import cached_segment

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


def _uuid(raw: bytes) -> str:
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


class VectorIndexReader:
    """Reads the IVF partitions of the vector index ``index_name`` of ``dataset``.

    Raises
    ------
    KeyError
        No index has that name (pylance's ``Index "<name>" not found``).
    ValueError
        The index is not a vector index.
    """

    def __init__(self, dataset: LanceDataset, index_name: str) -> None:
        section = dataset.manifest_file.index_section
        entries = [e for e in (section.indices if section is not None else []) if e.name == index_name]
        if not entries:
            raise KeyError(f'Index "{index_name}" not found')
        entry = entries[0]
        if not entry.index_details.type_url.endswith("VectorIndexDetails"):
            raise ValueError(f"Index {index_name} is not vector index")
        self.dataset = dataset
        self.index_name = index_name
        self._directory = posixpath.join(dataset.uri, "_indices", _uuid(entry.uuid.uuid))
        self._segment = cached_segment(self._directory)

    def num_partitions(self) -> int:
        """The number of IVF partitions."""
        return self._segment.num_partitions

    def read_partition(self, partition_id: int, *, with_vector: bool = False) -> pa.Table:
        """Partition ``partition_id``'s rows: ``_rowid`` (and the stored codes with ``with_vector``).

        Raises
        ------
        IndexError
            ``partition_id`` is not a partition number.
        """
        if partition_id < 0 or partition_id >= self.num_partitions():
            raise IndexError(f"Partition id {partition_id} is out of range, expected 0 <= partition_id < "
                             f"{self.num_partitions()}")
        reader = LanceFileReader(posixpath.join(self._directory, "auxiliary.idx"))
        start = int(self._segment.offsets[partition_id])
        length = int(self._segment.lengths[partition_id])
        schema = reader.metadata().schema
        if length:
            table = reader.read_range(start, length).to_table()
        else:
            table = schema.empty_table()
        columns = ["_rowid", self._segment.code_column] if with_vector else ["_rowid"]
        return table.select(columns).replace_schema_metadata(schema.metadata)


__all__ = ["VectorIndexReader"]
