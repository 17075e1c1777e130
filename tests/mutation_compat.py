"""Helpers for the mutation differential tests: one scripted history, run by either engine,
and structural views of transactions and manifests that ignore what legitimately differs
(uuids, random file names, timestamps, segment encodings of the same row ids)."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
from google.protobuf.unknown_fields import UnknownFieldSet

import lance_format
from lance_format.io import ObjectStore
from lance_format.proto import table_pb2
from lance_format.table.manifest import read_manifest
from lance_format.table.naming import list_versions
from lance_format.table.row_versions import decode_version_sequence
from lance_format.table.rowids import decode_row_ids
from tests.compat import SYSTEM, assert_tables_equal

STORAGE_VERSIONS = ["2.0", "2.2"]


def base_table(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "v": pa.array([f"v{i}" for i in ids]),
        "x": pa.array((ids * 3) % 50, pa.int32()),
        "tags": pa.array([[f"t{i % 3}"] * int(i % 3) for i in ids], pa.list_(pa.string())),
        "st": pa.array([{"a": int(i), "b": f"b{i}"} for i in ids],
                       pa.struct([("a", pa.int32()), ("b", pa.string())])),
    })


def history(mod, uri: str, storage_version: str, stable: bool) -> list:
    """The scripted sequence of operations; returns every operation's result."""
    out = []
    ds = mod.write_dataset(base_table(30), uri, data_storage_version=storage_version,
                           enable_stable_row_ids=stable, max_rows_per_file=10)
    ds = mod.write_dataset(base_table(10, 30), uri, mode="append")
    out.append(ds.delete("id % 7 = 3"))
    out.append(ds.update({"v": "v || '!'", "x": "x + 100"}, where="id < 15"))
    out.append(ds.delete("id >= 10 AND id < 20"))
    src = base_table(5, 0).slice(2, 3)  # ids 2, 3 (deleted: a no-match), 4
    src = pa.concat_tables([src, base_table(3, 100)]).combine_chunks()
    out.append(ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(src))
    partial = pa.table({"id": pa.array([4, 21, 22, 200], pa.int64()), "x": pa.array([-1, -2, -3, -4], pa.int32())})
    out.append(ds.merge_insert("id").when_matched_update_all("target.x < 120").execute(partial))
    out.append(ds.merge_insert("id").when_not_matched_insert_all().when_not_matched_by_source_delete("id > 35")
               .execute(base_table(2, 300)))
    out.append(ds.update({"st": "st"}, where="id = 0"))  # a no-op rewrite of one struct row
    ds.add_columns({"y": "x * 2"})
    ds.add_columns(pa.table({"z": pa.array(np.arange(ds.count_rows()) * 10, pa.int64())}))
    ds.alter_columns({"path": "v", "name": "v2"}, {"path": "x", "data_type": pa.int64()})
    ds.drop_columns(["tags"])
    out.append(ds.optimize.compact_files(target_rows_per_fragment=12))
    ds.update_config({"a": "1", "b": "2"})
    ds.update_metadata({"owner": "me"})
    ds.update_schema_metadata({"sm": "1"})
    ds.update_field_metadata({"id": {"unit": "none"}})
    ds.delete_config_keys(["a"])
    out.append(ds.delete("id = 25"))
    old = ds.checkout_version(6)
    old.restore()
    mod.write_dataset(base_table(3, 500), uri, mode="append")
    return out


# -- structural views ----------------------------------------------------------------------------
def fragment_view(f: table_pb2.DataFragment) -> dict:
    view = {
        "id": f.id,
        "rows": f.physical_rows,
        "files": [(list(d.fields), list(d.column_indices), d.file_major_version, d.file_minor_version) for d in f.files],
        "deleted": f.deletion_file.num_deleted_rows if f.HasField("deletion_file") else None,
    }
    if f.HasField("inline_row_ids"):
        view["row_ids"] = decode_row_ids(bytes(f.inline_row_ids)).tolist()
    if f.HasField("inline_created_at_versions"):
        view["created"] = decode_version_sequence(bytes(f.inline_created_at_versions)).tolist()
    if f.HasField("inline_last_updated_at_versions"):
        view["updated"] = decode_version_sequence(bytes(f.inline_last_updated_at_versions)).tolist()
    return view


def _message_view(message) -> dict:
    out = {}
    for descriptor, value in message.ListFields():
        if descriptor.message_type is table_pb2.DataFragment.DESCRIPTOR:
            out[descriptor.name] = [fragment_view(v) for v in value]
        elif descriptor.message_type is not None and descriptor.is_repeated \
                and not descriptor.message_type.GetOptions().map_entry:
            out[descriptor.name] = [_message_view(v) for v in value]
        elif descriptor.message_type is not None and descriptor.message_type.GetOptions().map_entry:
            out[descriptor.name] = {k: (_message_view(v) if hasattr(v, "ListFields") else v) for k, v in value.items()}
        elif descriptor.message_type is not None:
            out[descriptor.name] = _message_view(value)
        else:
            out[descriptor.name] = list(value) if descriptor.is_repeated else value
    unknown = [(u.field_number, u.wire_type, u.data) for u in UnknownFieldSet(message)]
    if unknown:
        out["<unknown>"] = unknown
    return out


def transaction_view(txn) -> dict:
    view = _message_view(txn)
    view.pop("uuid", None)
    # pylance emits these in hash-map / task-completion order; the order carries no meaning.
    for op in ("delete", "update"):
        body = view.get(op, {})
        if "updated_fragments" in body:
            body["updated_fragments"].sort(key=lambda f: f["id"])
        if "fields_for_preserving_frag_bitmap" in body:
            body["fields_for_preserving_frag_bitmap"].sort()
    for update_map in _update_maps(view.get("update_config", {})):
        update_map.get("update_entries", []).sort(key=lambda e: e["key"])
    return view


def _update_maps(body: dict) -> list[dict]:
    maps = [body[k] for k in ("config_updates", "table_metadata_updates", "schema_metadata_updates") if k in body]
    return maps + list(body.get("field_metadata_updates", {}).values())


def manifest_view(mf) -> dict:
    m = mf.manifest
    return {
        "fields": [(f.name, f.id, f.parent_id, f.logical_type, f.nullable, dict(f.metadata)) for f in m.fields],
        "fragments": [fragment_view(f) for f in m.fragments],
        "flags": (m.reader_feature_flags, m.writer_feature_flags),
        "max_fragment_id": m.max_fragment_id if m.HasField("max_fragment_id") else None,
        "next_row_id": m.next_row_id,
        "config": dict(m.config),
        "table_metadata": dict(m.table_metadata),
        "schema_metadata": dict(m.schema_metadata),
        "data_format": (m.data_format.file_format, m.data_format.version),
        "indices": len(mf.index_section.indices) if mf.index_section is not None else 0,
    }


def version_views(uri: str) -> dict[int, tuple[dict, dict]]:
    store = ObjectStore(uri)
    listing = list_versions(store)
    result = {}
    for version, path in sorted(listing.versions.items()):
        mf = read_manifest(store, path)
        result[version] = (manifest_view(mf), transaction_view(mf.transaction) if mf.transaction else None)
    return result


def assert_same_tables(ours_uri: str, theirs_uri: str, *, same_file_sizes: bool = True) -> None:
    """Two tables built by the same history: same versions, manifests, transactions and data.

    ``same_file_sizes=False`` tolerates different data file sizes (file versions whose writer
    is not byte-identical to pylance's)."""
    ours, theirs = version_views(ours_uri), version_views(theirs_uri)
    assert sorted(ours) == sorted(theirs)
    for version in theirs:
        assert ours[version][0] == theirs[version][0], f"manifest of version {version} differs"
        assert ours[version][1] == theirs[version][1], f"transaction of version {version} differs"
        a, b = lance.dataset(ours_uri, version=version), lance.dataset(theirs_uri, version=version)
        assert a.schema == b.schema
        columns = b.schema.names + SYSTEM
        assert_tables_equal(a.to_table(columns=columns), b.to_table(columns=columns), f"v{version} via pylance")
        mine = lance_format.dataset(ours_uri, version=version).to_table(columns=columns)
        assert_tables_equal(mine, b.to_table(columns=columns), f"v{version} via lance_format")
    def meta(uri):
        stats = [dict(v["metadata"]) for v in lance.dataset(uri).versions()]
        for s in stats:
            if not same_file_sizes:
                s.pop("total_files_size")
        return stats

    assert meta(ours_uri) == meta(theirs_uri)

