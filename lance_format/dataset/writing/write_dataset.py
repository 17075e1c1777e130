"""``write_dataset``: stream Arrow data into data files and commit them as one new version.

Data is consumed batch by batch; a file (one fragment) is rolled over after
``max_rows_per_file`` rows or ``max_bytes_per_file`` bytes. Nothing is visible until the
commit publishes the manifest; if anything fails first, the files written so far are removed.

Multi-base tables (pylance's ``initial_bases``, ``target_bases``, ``target_all_bases``): a new
table may register base paths; a write sends its files to the bases it names, file by file in
turn, and the manifest records each file's base id.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from lance_format.dataset.dataset import LanceDataset
from lance_format.dataset.fragment_metadata import fragment_from_proto
from lance_format.dataset.namespace_target import resolve as resolve_namespace
from lance_format.dataset.writing.arrow_input import as_reader
from lance_format.dataset.writing.fragment_sink import (
    DATA_DIR,
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    WriteTarget,
    write_fragment_files,
    write_target,
)
from lance_format.errors import ArgumentTypeError, DatasetAlreadyExistsError, InvalidInputError
from lance_format.file.legacy_v0_1_writer import rows_per_group
from lance_format.io import ObjectStore, object_store_for
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.table import feature_flags
from lance_format.table.auto_cleanup import config_values
from lance_format.table.base_paths import (
    BaseStores,
    DatasetBasePath,
    check_base_store_params,
    new_base_protos,
    target_bases_of,
)
from lance_format.table.commit import commit_landed, commit_lock_held_by, commit_transaction, latest_manifest
from lance_format.table.naming import ManifestNaming
from lance_format.table.transaction import BuildOptions, new_transaction

MODES = ("create", "append", "overwrite")


# pylance options that tune its own writer (caches, page sizes): no effect on what is written here
_TUNING_OPTIONS = ("data_cache_bytes", "max_page_bytes", "progress_callback")
# pylance options this engine cannot honour: accepted only at their defaults
_UNSUPPORTED_OPTIONS: dict[str, Any] = {
    "session": None,
    "external_blob_mode": "reference", "allow_external_blob_outside_bases": False,
    "blob_pack_file_size_threshold": None,
}


def progress_hook(progress: Any, fragment_id: int | None = None) -> Callable[[str, table_pb2.DataFragment], None] | None:
    """The sink's per-file hook calling ``progress`` as each file opens ("begin") and is
    finished ("complete"): a pylance ``FragmentWriteProgress`` through its JSON entry points
    (``_do_begin``/``_do_complete`` parse it into its own ``FragmentMetadata``), anything else
    with ``begin``/``complete`` with the fragment itself. ``fragment_id``: the id the fragment
    will have (``LanceFragment.create``); else the sink's own."""
    if progress is None:
        return None

    def on_file(hook: str, fragment: table_pb2.DataFragment) -> None:
        metadata = fragment_from_proto(fragment)
        if fragment_id is not None:
            metadata.id = int(fragment_id)
        via_json = getattr(progress, f"_do_{hook}", None)
        if via_json is not None:
            via_json(json.dumps(metadata.to_json()))
        else:
            getattr(progress, hook)(metadata)

    return on_file


def write_dataset(
    data_obj: Any,
    uri: str | os.PathLike[str] | ObjectStore | LanceDataset | None = None,
    schema: pa.Schema | None = None,
    mode: str = "create",
    *,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    enable_stable_row_ids: bool = False,
    data_storage_version: str | None = None,
    enable_v2_manifest_paths: bool = True,
    storage_options: Mapping[str, str] | None = None,
    initial_bases: list[DatasetBasePath] | None = None,
    target_bases: list[str] | None = None,
    target_all_bases: bool | None = None,
    max_rows_per_group: int = 1024,
    use_legacy_format: bool | None = None,
    auto_cleanup_options: Mapping[str, int] | None = None,
    progress: Any = None,
    commit_lock: Callable[[int], Any] | None = None,
    base_store_params: Mapping[str, Mapping[str, str]] | None = None,
    **options: Any,
) -> LanceDataset:
    """Write ``data_obj`` as a new version of the table at ``uri`` (pylance's ``write_dataset``).

    Parameters
    ----------
    data_obj
        The rows: a pyarrow ``Table``, ``RecordBatch`` or ``RecordBatchReader``, an iterable of
        record batches (with ``schema``), a pandas DataFrame, or a list of dicts. Batches are
        streamed: memory stays bounded by a file's worth of rows.
    uri
        Where the table lives: a local path, an object-store URI (``s3://``, ``gs://``,
        ``az://``, ``memory://``), an open store, or a :class:`LanceDataset` (written on the
        branch it is checked out on).
    schema
        The schema of ``data_obj`` when it does not carry one (an iterable of batches).
    mode
        ``"create"`` (the default: fail if the table exists), ``"append"`` (create the table if
        missing) or ``"overwrite"`` (replace all rows in a new version; create if missing).
    max_rows_per_file, max_bytes_per_file
        Roll to a new data file at this many rows (default 1,048,576) or written bytes
        (default 90 GB), as pylance does.
    commit_message, transaction_properties
        Recorded in the commit's transaction (``read_transaction()`` returns them).
    enable_stable_row_ids
        Give every row a stable id (needed by the change feed); at creation only.
    data_storage_version
        The file version of a new table: ``"2.2"`` (the default, as in pylance 14), ``"2.1"``,
        ``"2.0"``, ``"legacy"`` (0.1), or ``"stable"``/``"next"``. Appends use the table's.
    enable_v2_manifest_paths
        Name manifests the V2 way (newest first when listed); True as in pylance.
    storage_options
        Object-store settings with Lance's keys (credentials, endpoint, region, ...), for the
        table and its bases.
    initial_bases
        Base paths a new table registers (mode ``"create"`` only).
    target_bases
        Names or paths of registered bases the new data files go to, in turn.
    target_all_bases
        Spread the new data files over every registered base (after the table's own root).
    max_rows_per_group
        Rows per group of legacy (0.1) files (1024, like pylance's); 2.x files ignore it.
    use_legacy_format
        True is ``data_storage_version="legacy"``, False ``"stable"``.
    auto_cleanup_options
        ``{"interval": N, "older_than_seconds": S}`` when creating a table: clean up versions
        older than S seconds after every N-th commit (see ``enable_auto_cleanup``).
    progress
        A pylance ``FragmentWriteProgress`` (or any object with ``begin(fragment)`` and
        ``complete(fragment)``), called as each data file is opened and finished.
    commit_lock
        pylance's custom lock: called with the version being committed; the context manager
        it returns is held while that version's manifest is published.
    base_store_params
        pylance's storage options per base path; bases are opened with ``storage_options``
        here, so only empty ones are accepted.
    **options
        pylance's tuning options (``data_cache_bytes``, ``max_page_bytes``) are accepted and
        ignored; a ``session`` or blob-ingest option is refused. ``namespace_client`` and
        ``table_id`` (pylance 14) address the table through a Lance Namespace instead of ``uri``:
        ``declare_table`` locates a new table (``mode="create"``), ``describe_table`` an existing one.

    Returns
    -------
    LanceDataset
        The table at the version this write committed.

    Raises
    ------
    DatasetAlreadyExistsError
        ``mode="create"`` and a table exists at ``uri``.
    SchemaMismatchError
        Appended rows do not match the table's schema.
    InvalidInputError
        An unknown mode or option, or contradictory options.
    CommitConflictError
        A concurrent commit conflicts with this one, or the retries ran out.

    Examples
    --------
    >>> import tempfile, pyarrow as pa, lance_format as lance
    >>> uri = tempfile.mkdtemp() + "/people.lance"
    >>> ds = lance.write_dataset(pa.table({"id": [1, 2, 3], "name": ["ann", "bo", "cy"]}), uri)
    >>> ds = lance.write_dataset(pa.table({"id": [4], "name": ["di"]}), uri, mode="append")
    >>> ds.version, ds.count_rows()
    (2, 4)
    """
    if mode in MODES:
        uri, storage_options = resolve_namespace(uri, options.pop("namespace_client", None),
                                                 options.pop("table_id", None), mode, storage_options)
    for name, value in options.items():
        if name in _TUNING_OPTIONS:
            continue
        if name in _UNSUPPORTED_OPTIONS and value in (None, _UNSUPPORTED_OPTIONS[name]):
            continue
        raise InvalidInputError(f"unsupported write_dataset argument {name}={value!r}")
    if commit_lock is not None and not callable(commit_lock):
        raise ArgumentTypeError(f"commit_lock must be a function, got {type(commit_lock)}")
    if max_rows_per_group <= 0:
        raise InvalidInputError(f"max_rows_per_group must be positive, got {max_rows_per_group}")
    if use_legacy_format is not None:
        if data_storage_version is not None:
            raise InvalidInputError("give data_storage_version or use_legacy_format, not both")
        data_storage_version = "legacy" if use_legacy_format else "stable"
    cleanup_config = config_values(auto_cleanup_options) if auto_cleanup_options is not None else None
    if mode not in MODES:
        raise InvalidInputError(f"mode must be one of {MODES}, got {mode!r}")
    if uri is None:
        raise InvalidInputError("Must specify either 'uri' or both 'namespace_client' and 'table_id'.")
    # a LanceDataset: write to its store, which is its branch's when it is checked out on one
    store = object_store_for(uri.object_store if isinstance(uri, LanceDataset) else uri, storage_options)
    check_base_store_params(base_store_params, table=store.uri)
    existing = latest_manifest(store)
    start_over = getattr(store.backend, "start_over", None)
    if existing is not None and mode == "create" and start_over is not None:
        start_over()  # memory://: like pylance, where each write_dataset call opens a store of its own
        existing = None
    if existing is not None:
        path, manifest_file = existing
        feature_flags.check_writable(manifest_file.manifest, table=store.uri, path=path)
        if mode == "create":
            raise DatasetAlreadyExistsError(
                "a table already exists here; use mode='append' or 'overwrite'",
                table=store.uri,
                version=manifest_file.manifest.version,
            )

    if initial_bases is not None and mode != "create":
        raise InvalidInputError(f"Cannot register new bases in {mode.capitalize()} mode. Only CREATE mode can register "
                                "new bases (add them to an existing table with add_bases)", table=store.uri)
    bases = new_base_protos(initial_bases, [], table=store.uri) if initial_bases is not None else []
    registered = bases if existing is None else list(existing[1].manifest.base_paths)
    targets = write_targets(store, registered, target_bases, target_all_bases)
    reader = as_reader(data_obj, schema)
    _check_utf8_metadata(reader.schema)
    append_to = existing[1].manifest if existing is not None and mode == "append" else None
    previous = existing[1].manifest.data_format.version if existing is not None else None
    table_schema, storage_version = write_target(append_to, reader.schema, data_storage_version, previous,
                                                 table=store.uri)

    with rows_per_group(max_rows_per_group):  # legacy (0.1) files only: 2.x files have no groups
        fragments, writer = write_fragment_files(
            reader, store, table_schema, storage_version,
            max_rows_per_file=max_rows_per_file, max_bytes_per_file=max_bytes_per_file, targets=targets,
            new_table=existing is None or mode != "append", on_file=progress_hook(progress),
        )
    read_version = existing[1].manifest.version if existing is not None else 0
    txn = new_transaction(read_version, properties=transaction_properties, commit_message=commit_message)
    if existing is not None and mode == "append":
        txn.append.fragments.extend(fragments)
    else:
        overwrite: transaction_pb2.Transaction.Overwrite = txn.overwrite
        overwrite.fragments.extend(fragments)
        overwrite.schema.extend(table_schema.to_protos())
        overwrite.schema_metadata.update(table_schema.metadata)
        overwrite.initial_bases.extend(bases)
        if cleanup_config is not None and existing is None:  # like pylance: only a new table takes them
            overwrite.config_upsert_values.update(cleanup_config)
    build_options = BuildOptions(enable_stable_row_ids=enable_stable_row_ids, data_storage_version=storage_version)
    naming = ManifestNaming.V2 if enable_v2_manifest_paths else ManifestNaming.V1
    try:
        with commit_lock_held_by(store, commit_lock):
            committed = commit_transaction(store, txn, options=build_options, new_table_naming=naming)
    except BaseException as error:
        if not commit_landed(error):
            writer.abort()
        raise
    return LanceDataset._just_committed(store, committed.path, committed.manifest_file)


def _check_utf8_metadata(schema: pa.Schema) -> None:
    """Refuse schema and field metadata that is not UTF-8, as pylance does (its manifests hold
    metadata as strings)."""
    def check(metadata: Mapping[bytes, bytes] | None) -> None:
        for key, value in (metadata or {}).items():
            try:
                key.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidInputError(f"Parser error: metadata key {key!r} is not valid utf8. Consider base64 "
                                        "encode for generic binary metadata.") from None
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidInputError(f"Metadata key {key!r} is not valid utf8. Consider base64 encode for "
                                        "generic binary metadata.") from None

    check(schema.metadata)
    for field in schema:
        _check_field_metadata(field, check)


def _check_field_metadata(field: pa.Field, check: Callable[[Any], None]) -> None:
    check(field.metadata)
    for index in range(field.type.num_fields):
        _check_field_metadata(field.type.field(index), check)


def write_targets(store: ObjectStore, bases: list[table_pb2.BasePath], target_bases: Any,
             target_all_bases: bool | None) -> list[WriteTarget]:
    ids = target_bases_of(bases, target_bases, target_all_bases, table=store.uri)
    stores = BaseStores(store, table_pb2.Manifest(base_paths=bases))
    return [WriteTarget(stores.store(i), i, DATA_DIR if stores.is_dataset_root(i) else "") for i in ids]
