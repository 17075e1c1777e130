"""pylance's commit values: ``LanceOperation.*`` (dataclasses with pylance's names and
constructor arguments), ``Transaction`` and ``Index``. Plain data: converting them to and from
the manifest format's transaction message lives in :mod:`transaction_protos`.
"""

from __future__ import annotations

import dataclasses
import uuid
import warnings
from abc import ABC
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict

import pyarrow as pa

from lance_format.dataset.fragment_metadata import DataFile, FragmentMetadata
from lance_format.dataset.overlays import DataOverlayFile, DataOverlayGroup
from lance_format.errors import ArgumentTypeError
from lance_format.schema import LanceSchema

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

def _fragments(value: Any, what: str = "fragments") -> list[FragmentMetadata]:
    if not isinstance(value, list):
        raise ArgumentTypeError(f"{what} must be list[FragmentMetadata], got {type(value)}")
    bad = [f for f in value if not isinstance(f, FragmentMetadata)]
    if bad:
        raise ArgumentTypeError(f"{what} must be list[FragmentMetadata], got {type(bad[0])}")
    return value


class LanceOperation:
    """The operations a :meth:`LanceDataset.commit` can apply (pylance's ``LanceOperation``)."""

    class BaseOperation(ABC):  # noqa: B024 - a marker base, as in pylance
        """Base class of the operations."""

    @dataclass
    class Overwrite(BaseOperation):
        """Create the table or replace its contents: a new schema and new fragments."""

        new_schema: LanceSchema | pa.Schema
        fragments: Iterable[FragmentMetadata]
        initial_bases: list[Any] | None = None

        def __post_init__(self) -> None:
            _fragments(self.fragments)

    @dataclass
    class Append(BaseOperation):
        """Add new fragments (rows) to the table."""

        fragments: Iterable[FragmentMetadata]

        def __post_init__(self) -> None:
            _fragments(self.fragments)

    @dataclass
    class Delete(BaseOperation):
        """Fragments with new deletion files, fragments removed entirely, and the predicate."""

        updated_fragments: Iterable[FragmentMetadata]
        deleted_fragment_ids: Iterable[int]
        predicate: str

        def __post_init__(self) -> None:
            _fragments(self.updated_fragments, "updated_fragments")

    @dataclass
    class Update(BaseOperation):
        """Rows rewritten: fragments removed, updated (new deletion files) and added."""

        removed_fragment_ids: list[int] = dataclasses.field(default_factory=list)
        updated_fragments: list[FragmentMetadata] = dataclasses.field(default_factory=list)
        new_fragments: list[FragmentMetadata] = dataclasses.field(default_factory=list)
        fields_modified: list[int] = dataclasses.field(default_factory=list)
        fields_for_preserving_frag_bitmap: list[int] = dataclasses.field(default_factory=list)
        update_mode: str = ""
        updated_fragment_offsets: dict[int, bytes] | None = None

        def __post_init__(self) -> None:
            _fragments(self.updated_fragments, "updated_fragments")
            _fragments(self.new_fragments, "new_fragments")

    @dataclass
    class Merge(BaseOperation):
        """New columns: every fragment (with its new data files) and the widened schema."""

        fragments: Iterable[FragmentMetadata]
        schema: LanceSchema | pa.Schema
        preserves_nullability: bool = False

        def __post_init__(self) -> None:
            if isinstance(self.schema, pa.Schema):
                warnings.warn("Passing a pyarrow.Schema to Merge is deprecated. Please use a LanceSchema instead.",
                              DeprecationWarning, stacklevel=3)
            _fragments(self.fragments)

    @dataclass
    class Restore(BaseOperation):
        """Make an old version the newest again."""

        version: int

    @dataclass
    class Clone(BaseOperation):
        """A clone or branch creation (read back from transactions; shallow clones only)."""

        is_shallow: bool
        ref_name: str | None
        ref_version: int
        ref_path: str
        branch_name: str | None

    @dataclass
    class RewriteGroup:
        """Fragments replaced by rewritten ones (compaction)."""

        old_fragments: Iterable[FragmentMetadata]
        new_fragments: Iterable[FragmentMetadata]

    @dataclass
    class RewrittenIndex:
        """An index rewritten along with a compaction."""

        old_id: str
        new_id: str
        new_details_type_url: str
        new_details_value: bytes
        new_index_version: int

    @dataclass
    class Rewrite(BaseOperation):
        """Groups of fragments rewritten into new ones, and the indices rewritten with them."""

        groups: Iterable[LanceOperation.RewriteGroup]
        rewritten_indices: Iterable[LanceOperation.RewrittenIndex]

        def __post_init__(self) -> None:
            frags = [f for g in self.groups for f in list(g.old_fragments) + list(g.new_fragments)]
            _fragments(frags)

    @dataclass
    class CreateIndex(BaseOperation):
        """Index segments added and removed (:class:`Index` values, e.g. from
        ``create_index_uncommitted`` on workers)."""

        new_indices: list[Any]
        removed_indices: list[Any]

    @dataclass
    class DataReplacementGroup:
        """A fragment's data file replaced by a new one holding the same fields."""

        fragment_id: int
        new_file: DataFile

    @dataclass
    class DataReplacement(BaseOperation):
        """Data files replaced in place (carried as data: this engine does not commit it)."""

        replacements: list[LanceOperation.DataReplacementGroup]

    DataOverlayFile = DataOverlayFile
    DataOverlayGroup = DataOverlayGroup

    @dataclass
    class DataOverlay(BaseOperation):
        """Overlay files appended to fragments' overlays (see :mod:`lance_format.dataset.overlays`);
        when several target the same cells, the latest group's values win."""

        groups: list[DataOverlayGroup]

    @dataclass
    class Project(BaseOperation):
        """A new schema made of existing fields (drop, rename or reorder columns)."""

        schema: LanceSchema | pa.Schema
        preserves_nullability: bool = False

    @dataclass
    class UpdateMap:
        """Updates of a metadata map: key -> value, or None to remove the key."""

        updates: dict[str, str | None]
        replace: bool = False

    @dataclass
    class UpdateConfig(BaseOperation):
        """Updates of the table config, table metadata, schema metadata or field metadata."""

        config_updates: LanceOperation.UpdateMap | None = None
        table_metadata_updates: LanceOperation.UpdateMap | None = None
        schema_metadata_updates: LanceOperation.UpdateMap | None = None
        field_metadata_updates: dict[int, LanceOperation.UpdateMap] | None = None


@dataclass
class Transaction:
    """A commit's description: the version it was built on, its operation and properties."""

    read_version: int
    operation: LanceOperation.BaseOperation
    uuid: str = dataclasses.field(default_factory=lambda: str(uuid.uuid4()))
    transaction_properties: dict[str, str] | None = dataclasses.field(default_factory=dict)


class BulkCommitResult(TypedDict):
    dataset: LanceDataset
    merged: Transaction


@dataclass
class IndexFile:
    """A file of an index segment and its size (pylance's ``IndexFile``)."""

    path: str
    size_bytes: int


@dataclass
class Index:
    """An index of the table, as a ``CreateIndex`` operation carries it (pylance's ``Index``)."""

    uuid: str
    name: str
    fields: list[int]
    dataset_version: int
    fragment_ids: Any
    index_version: int
    created_at: datetime | None = None
    base_id: int | None = None
    files: list[Any] | None = None
    index_details: tuple[str, bytes] | None = None
    covering_fields: list[int] = dataclasses.field(default_factory=list)
