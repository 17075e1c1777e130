"""Settings of a Lance write or read, and the metadata keys that control them.

A write is configured in three layers, later ones winning: the IO manager's config (its write
mode, schema mode and the settings of :func:`io_manager_defaults`, keyed like the metadata),
the asset's definition metadata, and output metadata added at run time (``context.add_output_metadata`` or
``Output(metadata=...)``). ``resolve_write_settings`` merges them and validates every value, so a
typo fails the run before anything is written.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lance_format.errors import InvalidInputError


class WriteMode(str, enum.Enum):
    """How a materialization lands in its table."""

    OVERWRITE = "overwrite"  # whole table, or exactly the materialized partitions
    APPEND = "append"
    MERGE = "merge"  # upsert on key columns (merge_insert)
    ERROR = "error"  # refuse if the table (or partition) already has rows
    IGNORE = "ignore"  # skip the write if the table (or partition) already has rows


class SchemaMode(str, enum.Enum):
    """What to do when the data's columns differ from the table's."""

    ERROR = "error"  # refuse any difference
    ADD_COLUMNS = "add_columns"  # add new columns; missing ones are written as nulls
    OVERWRITE = "overwrite"  # replace the schema (full-table overwrites only)


class NamespaceMode(str, enum.Enum):
    """How the IO manager's ``namespace`` combines with an asset key's path."""

    PREFIX = "prefix"  # {namespace}/{whole key path}
    REPLACE = "replace"  # {namespace}/{last key component}: the key's prefix is replaced


class ReadMode(str, enum.Enum):
    """What an input reads (input metadata ``lance/read``): the table's rows, or its change feed."""

    TABLE = "table"  # the table's rows (optionally the input's partitions)
    CHANGES = "changes"  # the change feed of the input's version range


# -- metadata keys -------------------------------------------------------------------------------
WRITE_MODE = "lance/write_mode"
SCHEMA_MODE = "lance/schema_mode"
PARTITION_EXPR = "partition_expr"  # column name, or {dimension: column} for multi-partitions
TABLE_URI = "lance/uri"  # absolute table URI overriding {base_uri}/{key}.lance
TABLE_NAME = "lance/table"  # table path relative to base_uri (without .lance)
MERGE_ON = "lance/merge_on"
MERGE_WHEN_MATCHED = "lance/merge_when_matched"  # update_all | do_nothing | delete | fail
MERGE_UPDATE_CONDITION = "lance/merge_update_condition"  # SQL over source./target. columns
MERGE_WHEN_NOT_MATCHED = "lance/merge_when_not_matched"  # insert_all | do_nothing
MERGE_DELETE_NOT_MATCHED_BY_SOURCE = "lance/merge_delete_not_matched_by_source"  # bool or SQL filter
PREVIEW_ROWS = "lance/preview_rows"
CHECK_PARTITION_DATA = "lance/check_partition_data"  # refuse rows outside the written partitions
COMMIT_PROPERTIES = "lance/commit_properties"  # {key: value} added to the commit's transaction properties
TABLE_CONFIG = "lance/table_config"  # {key: value} set on the table (update_config) when it differs
MAX_ROWS_PER_FILE = "lance/max_rows_per_file"
MAX_BYTES_PER_FILE = "lance/max_bytes_per_file"
DATA_STORAGE_VERSION = "lance/data_storage_version"  # Lance file version of a new table (or overwrite)
# Settings whose layers are merged key by key (a later layer adds and overrides keys) rather than replaced.
_DICT_SETTINGS = (COMMIT_PROPERTIES, TABLE_CONFIG)

COLUMNS = "columns"
READ_VERSION = "lance/version"
READ_TAG = "lance/tag"
READ_MODE = "lance/read"
BEGIN_VERSION = "lance/begin_version"  # change feed: exclusive start
END_VERSION = "lance/end_version"  # change feed: inclusive end

_WHEN_MATCHED = ("update_all", "do_nothing", "delete", "fail")
_WHEN_NOT_MATCHED = ("insert_all", "do_nothing")


def _plain(value: Any) -> Any:
    """Unwrap Dagster MetadataValue objects (output metadata arrives wrapped)."""
    return getattr(value, "value", value) if type(value).__module__.startswith("dagster") else value


def _enum(kind: type[enum.Enum], value: Any, key: str) -> Any:
    value = _plain(value)
    try:
        return kind(value.value if isinstance(value, enum.Enum) else value)
    except ValueError:
        allowed = ", ".join(m.value for m in kind)  # type: ignore[attr-defined]
        raise InvalidInputError(f"{key} must be one of {allowed}; got {value!r}") from None


@dataclass(frozen=True)
class MergeOptions:
    """``merge_insert`` clauses: key columns and what happens to matched / unmatched rows."""

    on: tuple[str, ...]
    when_matched: str = "update_all"
    when_not_matched: str = "insert_all"
    delete_not_matched_by_source: bool | str = False
    update_condition: str | None = None  # update matched rows only where this holds

    def __post_init__(self) -> None:
        if not self.on:
            raise InvalidInputError(f"merge needs key columns: set definition metadata {MERGE_ON!r}")
        if self.when_matched not in _WHEN_MATCHED:
            raise InvalidInputError(f"{MERGE_WHEN_MATCHED} must be one of {_WHEN_MATCHED}; got {self.when_matched!r}")
        if self.when_not_matched not in _WHEN_NOT_MATCHED:
            raise InvalidInputError(
                f"{MERGE_WHEN_NOT_MATCHED} must be one of {_WHEN_NOT_MATCHED}; got {self.when_not_matched!r}"
            )


@dataclass(frozen=True)
class WriteSettings:
    mode: WriteMode
    schema_mode: SchemaMode
    partition_expr: str | dict[str, str] | None = None
    merge: MergeOptions | None = None
    preview_rows: int = 5
    check_partition_data: bool = True
    commit_properties: dict[str, str] = field(default_factory=dict)
    table_config: dict[str, str] = field(default_factory=dict)
    max_rows_per_file: int | None = None
    max_bytes_per_file: int | None = None
    data_storage_version: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def file_options(self) -> dict[str, Any]:
        """Writer properties for the engine's write calls (only those that are set)."""
        options = {"max_rows_per_file": self.max_rows_per_file, "max_bytes_per_file": self.max_bytes_per_file,
                   "data_storage_version": self.data_storage_version}
        return {k: v for k, v in options.items() if v is not None}


def _string_dict(value: Any, key: str) -> dict[str, str]:
    value = _plain(value)
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{key} must be a dict of strings; got {value!r}")
    return {str(k): str(_plain(v)) for k, v in value.items()}


def _positive_int(value: Any, key: str) -> int | None:
    if value is None:
        return None
    try:
        number = int(_plain(value))
    except (TypeError, ValueError):
        number = 0
    if number <= 0:
        raise InvalidInputError(f"{key} must be a positive integer; got {value!r}")
    return number


def _columns(value: Any, key: str) -> tuple[str, ...]:
    value = _plain(value)
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise InvalidInputError(f"{key} must be a column name or a list of column names; got {value!r}")


def resolve_write_settings(
    *,
    write_mode: WriteMode | str,
    schema_mode: SchemaMode | str,
    definition_metadata: Mapping[str, Any] | None,
    output_metadata: Mapping[str, Any] | None,
    defaults: Mapping[str, Any] | None = None,
) -> WriteSettings:
    """Merge IO-manager defaults (``defaults``: metadata keys to values; None values are unset),
    definition metadata and run-time output metadata, in that order."""
    meta: dict[str, Any] = {k: v for k, v in (defaults or {}).items() if v is not None}
    merged: dict[str, dict[str, str]] = {key: {} for key in _DICT_SETTINGS}
    for layer in (defaults or {}, definition_metadata or {}, output_metadata or {}):
        for key in _DICT_SETTINGS:
            if layer.get(key) is not None:
                merged[key].update(_string_dict(layer[key], key))
    for layer in (definition_metadata or {}, output_metadata or {}):
        meta.update({k: _plain(v) for k, v in layer.items()})
    mode = _enum(WriteMode, meta.get(WRITE_MODE, write_mode), WRITE_MODE)
    schema = _enum(SchemaMode, meta.get(SCHEMA_MODE, schema_mode), SCHEMA_MODE)
    partition_expr = meta.get(PARTITION_EXPR)
    if partition_expr is not None and not isinstance(partition_expr, (str, dict)):
        raise InvalidInputError(f"{PARTITION_EXPR} must be a column name or a dict; got {partition_expr!r}")
    merge = None
    if mode is WriteMode.MERGE:
        merge = MergeOptions(
            on=_columns(meta.get(MERGE_ON, ()), MERGE_ON) if meta.get(MERGE_ON) else (),
            when_matched=str(meta.get(MERGE_WHEN_MATCHED, "update_all")),
            when_not_matched=str(meta.get(MERGE_WHEN_NOT_MATCHED, "insert_all")),
            delete_not_matched_by_source=meta.get(MERGE_DELETE_NOT_MATCHED_BY_SOURCE, False),
            update_condition=meta.get(MERGE_UPDATE_CONDITION),
        )
    preview = int(meta.get(PREVIEW_ROWS, 5))
    return WriteSettings(
        mode=mode,
        schema_mode=schema,
        partition_expr=partition_expr,
        merge=merge,
        preview_rows=max(0, preview),
        check_partition_data=bool(meta.get(CHECK_PARTITION_DATA, True)),
        commit_properties=merged[COMMIT_PROPERTIES],
        table_config=merged[TABLE_CONFIG],
        max_rows_per_file=_positive_int(meta.get(MAX_ROWS_PER_FILE), MAX_ROWS_PER_FILE),
        max_bytes_per_file=_positive_int(meta.get(MAX_BYTES_PER_FILE), MAX_BYTES_PER_FILE),
        data_storage_version=str(meta[DATA_STORAGE_VERSION]) if meta.get(DATA_STORAGE_VERSION) else None,
    )


@dataclass(frozen=True)
class ReadSettings:
    columns: list[str] | None
    version: int | str | None
    mode: ReadMode
    begin_version: int | None = None
    end_version: int | None = None


def resolve_read_settings(input_metadata: Mapping[str, Any] | None) -> ReadSettings:
    meta = {k: _plain(v) for k, v in (input_metadata or {}).items()}
    columns = list(_columns(meta[COLUMNS], COLUMNS)) if meta.get(COLUMNS) is not None else None
    if READ_VERSION in meta and READ_TAG in meta:
        raise InvalidInputError(f"set either {READ_VERSION!r} or {READ_TAG!r}, not both")
    version: int | str | None = None
    if meta.get(READ_VERSION) is not None:
        try:
            version = int(meta[READ_VERSION])
        except (TypeError, ValueError):
            raise InvalidInputError(f"{READ_VERSION} must be an integer; got {meta[READ_VERSION]!r}") from None
    elif meta.get(READ_TAG) is not None:
        version = str(meta[READ_TAG])
    mode = _enum(ReadMode, meta.get(READ_MODE, "table"), READ_MODE)
    begin = meta.get(BEGIN_VERSION)
    end = meta.get(END_VERSION)
    return ReadSettings(
        columns=columns,
        version=version,
        mode=mode,
        begin_version=int(begin) if begin is not None else None,
        end_version=int(end) if end is not None else None,
    )
