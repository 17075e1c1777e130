"""The ``__manifest`` table of a V2 directory namespace, read and written as pylance 14 does.

pylance 14.0.2 keeps one row per namespace and table (``object_id``, ``object_type``, ``location``,
``metadata`` as compact JSON, ``base_objects``) and commits every change as an Overwrite of the
whole table in one fragment (file format 2.2, V2 manifest naming); version 1 is the empty table.
A change is applied optimistically: read version N, commit N+1 with no retries, and on a
conflict re-read and re-apply, so two writers of the same id see each other's rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pyarrow as pa

from lance_format.dataset.dataset import LanceDataset
from lance_format.dataset.fragment_metadata import FragmentMetadata
from lance_format.dataset.fragment_writes import write_fragments
from lance_format.dataset.transactions_api import LanceOperation, commit
from lance_format.dataset.writing.write_dataset import write_dataset
from lance_format.errors import CommitConflictError, DatasetAlreadyExistsError, DatasetNotFoundError

MANIFEST_TABLE = "__manifest"
FILE_VERSION = "2.2"
# how often a change is re-applied after losing a commit race before giving up
MAX_ATTEMPTS = 50

SCHEMA = pa.schema([
    pa.field("object_id", pa.string(), nullable=False,
             metadata={"lance-schema:unenforced-primary-key:position": "0"}),
    pa.field("object_type", pa.string(), nullable=False),
    pa.field("location", pa.string()),
    pa.field("metadata", pa.string()),
    pa.field("base_objects", pa.list_(pa.field("object_id", pa.string()))),
])


def encode_metadata(properties: dict | None) -> str | None:
    """Properties as pylance stores them: compact JSON, or null when there are none."""
    return json.dumps(properties, separators=(",", ":")) if properties else None


def decode_metadata(text: str | None) -> dict | None:
    return json.loads(text) if text else None


class ManifestTable:
    """The ``__manifest`` table under a namespace root."""

    def __init__(self, root: str, storage_options: dict | None = None) -> None:
        self.uri = f"{root}/{MANIFEST_TABLE}"
        self.storage_options = storage_options

    @staticmethod
    def empty() -> pa.Table:
        return SCHEMA.empty_table()

    def _open(self) -> LanceDataset | None:
        try:
            return LanceDataset(self.uri, storage_options=self.storage_options)
        except DatasetNotFoundError:
            return None

    def exists(self) -> bool:
        return self._open() is not None

    def read(self) -> tuple[int, pa.Table]:
        """The latest version number (0: no manifest yet) and its rows."""
        ds = self._open()
        if ds is None:
            return 0, SCHEMA.empty_table()
        return ds.version, ds.to_table().select(SCHEMA.names)

    def ensure(self) -> None:
        """Create the empty version 1 (as pylance does when it opens a root) unless it exists."""
        if self._open() is None:
            try:  # version 1 fixes the file version (2.2) every later Overwrite keeps
                write_dataset(SCHEMA.empty_table(), self.uri, mode="create", data_storage_version=FILE_VERSION,
                              enable_v2_manifest_paths=True, storage_options=self.storage_options)
            except (CommitConflictError, DatasetAlreadyExistsError):
                pass  # another writer created it first

    def mutate(self, change: Callable[[pa.Table], pa.Table]) -> pa.Table:
        """Apply ``change`` to the latest rows and commit; re-applied when another writer won."""
        self.ensure()
        for _ in range(MAX_ATTEMPTS):
            version, rows = self.read()
            new_rows = change(rows)
            try:
                self._commit(version, new_rows)
                return new_rows
            except CommitConflictError:
                continue
        from lance_namespace.errors import ConcurrentModificationError

        raise ConcurrentModificationError(f"{self.uri}: other writers kept changing the namespace manifest")

    def _commit(self, read_version: int, rows: pa.Table) -> None:
        rows = rows.cast(SCHEMA)
        fragments: list[FragmentMetadata] = []
        if rows.num_rows:
            written = write_fragments(rows, self.uri, schema=SCHEMA, data_storage_version=FILE_VERSION,
                                      storage_options=self.storage_options)
            fragments = written if isinstance(written, list) else []
            for new_id, fragment in enumerate(fragments):
                fragment.id = new_id
        commit(self.uri, LanceOperation.Overwrite(SCHEMA, fragments), read_version=read_version,
               storage_options=self.storage_options, enable_v2_manifest_paths=True, max_retries=0)


def row(object_id: str, object_type: str, location: str | None, metadata: str | None) -> pa.Table:
    """One manifest row."""
    return pa.Table.from_pylist([{"object_id": object_id, "object_type": object_type, "location": location,
                                  "metadata": metadata, "base_objects": None}], schema=SCHEMA)


def without(rows: pa.Table, object_id: str) -> pa.Table:
    """``rows`` without the row of ``object_id``."""
    import pyarrow.compute as pc

    return rows.filter(pc.invert(pc.equal(rows["object_id"], object_id)))


def lookup(rows: pa.Table, object_id: str) -> dict | None:
    """The row of ``object_id`` as a dict, or None."""
    import pyarrow.compute as pc

    found = rows.filter(pc.equal(rows["object_id"], object_id))
    return found.to_pylist()[0] if found.num_rows else None
