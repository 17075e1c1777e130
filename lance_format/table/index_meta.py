"""How a commit carries the previous version's index section forward (pylance's rules).

Index files are immutable; a commit only edits the metadata: indices whose fields left the
schema are dropped (Merge, Project), an Overwrite drops every index and a Restore takes the
restored version's section. Compaction never rewrites indexed fragments (pylance's indices
address rows by physical address, so that would need the index files remapped).
"""

from __future__ import annotations

from pyroaring import BitMap

from lance_format.errors import UnsupportedFeatureError
from lance_format.proto import table_pb2, transaction_pb2

FRAG_REUSE_INDEX_NAME = "__lance_frag_reuse"


def _copy(section: table_pb2.IndexSection) -> table_pb2.IndexSection:
    out = table_pb2.IndexSection()
    out.CopyFrom(section)
    return out


def retain_relevant(section: table_pb2.IndexSection | None, field_ids: set[int]) -> table_pb2.IndexSection | None:
    """Drop indices over fields that are no longer in the schema (system indices stay)."""
    if section is None:
        return None
    out = _copy(section)
    kept = [i for i in out.indices if i.name == FRAG_REUSE_INDEX_NAME or all(f in field_ids for f in i.fields)]
    del out.indices[:]
    out.indices.extend(kept)
    return out


def check_rewrite_untouched(section: table_pb2.IndexSection | None, groups) -> None:
    """Refuse a Rewrite of indexed fragments: pylance 14's scalar indices hold row *addresses*
    (even with stable row ids), so moving indexed rows would need the index files remapped."""
    covered = indexed_fragment_ids(section)
    for group in groups:
        for fragment in group.old_fragments:
            if any(bitmap is None or fragment.id in bitmap for bitmap in covered):
                raise UnsupportedFeatureError(
                    f"fragment {fragment.id} is covered by an index; rewriting it would need the index remapped"
                )


def indexed_fragment_ids(section: table_pb2.IndexSection | None) -> list[BitMap | None]:
    """The fragment ids each index covers; None for an index without a bitmap (covers all)."""
    result: list[BitMap | None] = []
    if section is None:
        return result
    for index in section.indices:
        if index.name == FRAG_REUSE_INDEX_NAME:
            continue
        result.append(BitMap.deserialize(bytes(index.fragment_bitmap)) if index.fragment_bitmap else None)
    return result


def apply_create_index(section: table_pb2.IndexSection | None,
                       body: transaction_pb2.Transaction.CreateIndex) -> table_pb2.IndexSection:
    """The index section after a ``CreateIndex``: existing segments minus the removed ones and
    minus those a new segment replaces (same uuid), then the new segments (pylance's order)."""
    gone = {bytes(i.uuid.uuid) for i in body.removed_indices} | {bytes(i.uuid.uuid) for i in body.new_indices}
    out = table_pb2.IndexSection()
    if section is not None:
        out.indices.extend(i for i in section.indices if bytes(i.uuid.uuid) not in gone)
    out.indices.extend(body.new_indices)
    return out
