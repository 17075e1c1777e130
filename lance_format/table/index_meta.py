"""How a commit carries the previous version's index section forward (pylance's rules).

Index files are immutable; a commit only edits the metadata: indices whose fields left the
schema are dropped (Merge, Project), an Overwrite drops every index and a Restore takes the
restored version's section. A compaction's ``Rewrite`` carries the segments it remapped
(:func:`apply_rewrite`).
"""

from __future__ import annotations

from pyroaring import BitMap

from lance_format.errors import InvalidInputError
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


def holds_row_addresses(index: table_pb2.IndexMetadata) -> bool:
    """Whether a segment's entries are row *addresses* in a table with stable row ids (pylance
    14.0.2: ZONEMAP and BLOOMFILTER zones, and BTREE written with ``index_version`` 1)."""
    url = index.index_details.type_url
    return (url.endswith("ZoneMapIndexDetails") or url.endswith("BloomFilterIndexDetails")
            or (url.endswith("BTreeIndexDetails") and index.index_version >= 1))


def kept_through_rewrite(index: table_pb2.IndexMetadata) -> bool:
    """Whether pylance 14.0.2 keeps a segment untouched (uuid and bitmap) when a compaction
    without stable row ids rewrites fragments it covers: its zones name fragments and offsets
    that stay valid for the fragments still listed (ZONEMAP, BLOOMFILTER)."""
    url = index.index_details.type_url
    return url.endswith("ZoneMapIndexDetails") or url.endswith("BloomFilterIndexDetails")


def _remapped_bitmap(bitmap: BitMap, groups, uuid_text: str) -> BitMap:
    """``bitmap`` with each rewrite group it covers replaced by the group's new fragments."""
    out = BitMap(bitmap)
    for group in groups:
        old = [f.id for f in group.old_fragments]
        inside = [i in bitmap for i in old]
        if any(inside) and not all(inside):
            raise InvalidInputError(f"a rewrite group {old} is partly covered by index segment {uuid_text}; "
                                    "compaction never mixes indexed and unindexed fragments")
        if any(inside):
            for i in old:
                out.discard(i)
            out.update(f.id for f in group.new_fragments)
    return out


def apply_rewrite(section: table_pb2.IndexSection | None, rewrite: transaction_pb2.Transaction.Rewrite,
                  stable_row_ids: bool) -> table_pb2.IndexSection | None:
    """The index section after a compaction's ``Rewrite`` (pylance 14.0.2's rules).

    A segment listed in ``rewritten_indices`` takes its new uuid, files, details and version, and
    its bitmap swaps each covered group's old fragments for the new ones. Otherwise, with stable
    row ids, a segment holding row ids follows its rows to the new fragments while one holding
    row addresses loses the rewritten fragments (they are scanned); without stable row ids,
    ZONEMAP/BLOOMFILTER segments are kept as they are and any other segment loses the rewritten
    fragments it covers (its entries would point at rows that moved)."""
    if section is None:
        return None
    groups = list(rewrite.groups)
    rewritten = {bytes(r.old_id.uuid): r for r in rewrite.rewritten_indices}
    rewritten_ids = {i for g in groups for i in (f.id for f in g.old_fragments)}
    out = _copy(section)
    for index in out.indices:
        if index.name == FRAG_REUSE_INDEX_NAME or not index.fragment_bitmap:
            continue
        bitmap = BitMap.deserialize(bytes(index.fragment_bitmap))
        change = rewritten.pop(bytes(index.uuid.uuid), None)
        if change is not None:
            index.fragment_bitmap = _remapped_bitmap(bitmap, groups, index.name).serialize()
            index.uuid.CopyFrom(change.new_id)
            index.ClearField("base_id")  # the new files live with the version that wrote them
            index.index_details.CopyFrom(change.new_index_details)
            index.index_version = change.new_index_version
            del index.files[:]
            index.files.extend(change.new_index_files)
        elif stable_row_ids and not holds_row_addresses(index):
            index.fragment_bitmap = _remapped_bitmap(bitmap, groups, index.name).serialize()
        elif stable_row_ids or not kept_through_rewrite(index):
            if bitmap & BitMap(rewritten_ids):
                index.fragment_bitmap = (bitmap - BitMap(rewritten_ids)).serialize()
    return out


def apply_update(section: table_pb2.IndexSection | None, body: transaction_pb2.Transaction.Update,
                 pure_rewrites: list[int], stable_row_ids: bool) -> table_pb2.IndexSection | None:
    """The index section after an ``Update`` (pylance's rules).

    Fragments whose columns were rewritten in place (``updated_fragments`` with
    ``fields_modified``) leave the bitmaps of the indices on those fields. With stable row ids, a
    rows rewrite whose new fragments hold only moved rows (``pure_rewrites``: every row keeps its
    row id) adds them to the indices that hold row ids, cover none of the updated fields
    (``fields_for_preserving_frag_bitmap``) and covered every fragment the rows came from."""
    if section is None:
        return None
    out = _copy(section)
    modified = set(body.fields_modified)
    updated = [f.id for f in body.updated_fragments]
    value_fields = set(body.fields_for_preserving_frag_bitmap)
    originals = list(body.removed_fragment_ids) + updated
    for index in out.indices:
        if index.name == FRAG_REUSE_INDEX_NAME or not index.fragment_bitmap:
            continue
        bitmap = BitMap.deserialize(bytes(index.fragment_bitmap))
        if modified and any(f in modified for f in index.fields):
            bitmap.difference_update(BitMap(updated))
        if (stable_row_ids and body.update_mode == 0 and pure_rewrites and not holds_row_addresses(index)
                and not any(f in value_fields for f in index.fields) and all(i in bitmap for i in originals)):
            bitmap.update(pure_rewrites)
        index.fragment_bitmap = bitmap.serialize()
    return out


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
