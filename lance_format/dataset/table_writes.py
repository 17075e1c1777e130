"""pylance's convenience writes on ``LanceDataset``: ``insert``, ``merge`` (new columns joined
on a key), ``truncate_table``, the deprecated ``replace_*_metadata`` and ``drop``.

Each is a thin entry point over an operation that exists elsewhere (``write_dataset``, the
``Merge`` of schema evolution, ``delete``, the metadata commits), kept out of ``committing.py``
so that module stays about the operations themselves. Methods that commit move this object to
the new version, like pylance.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_format.dataset.mixin import DatasetMixin
from lance_format.errors import DatasetNotFoundError, InvalidInputError, UnsupportedFeatureError

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


class TableWriteMethods(DatasetMixin):
    """Mixed into ``LanceDataset`` (see the module docstring)."""

    def insert(self, data: Any, *, mode: str = "append", **kwargs: Any) -> None:
        """Write ``data`` to this table (``write_dataset(data, self, mode=mode, **kwargs)``) and
        move this object to the new version.

        Raises
        ------
        SchemaMismatchError
            ``data`` does not fit the table's schema (append).
        InvalidInputError
            An unknown mode or argument.
        """
        from lance_format.dataset.writing.write_dataset import write_dataset

        ds = self._as_dataset()
        written = write_dataset(data, ds, mode=mode, **kwargs)
        ds._replace_version(written.version)

    def merge(self, data_obj: Any, left_on: str, right_on: str | None = None, schema: pa.Schema | None = None,
              ) -> None:
        """Add the columns of ``data_obj`` by a left join on ``left_on`` = ``right_on`` (pylance's ``merge``).

        Rows of the table without a match get nulls; when ``data_obj`` repeats a key, its last
        row wins. One ``Merge`` commit: each fragment gets one new data file.

        Raises
        ------
        SchemaMismatchError
            A key column is missing, a new column already exists, or the key types cannot be
            compared (also an ``OSError``, like pylance's error).
        """
        from lance_format.dataset.evolution.columns import merge_on_key

        merge_on_key(self._as_dataset(), data_obj, left_on, right_on, schema)

    def truncate_table(self) -> None:
        """Delete every row, keeping the schema, in a new version (a ``Delete`` of all fragments)."""
        self._as_dataset().delete("true")

    def replace_schema_metadata(self, new_metadata: Mapping[str, str]) -> None:
        """Deprecated in pylance: ``update_schema_metadata(new_metadata, replace=True)``."""
        warnings.warn("replace_schema_metadata is deprecated. Use update_schema_metadata(metadata, replace=True) "
                      "instead.", DeprecationWarning, stacklevel=2)
        self._as_dataset().update_schema_metadata(dict(new_metadata), replace=True)

    def replace_field_metadata(self, field_name: str, new_metadata: Mapping[str, str]) -> None:
        """Deprecated in pylance: ``update_field_metadata({field_name: new_metadata}, replace=True)``."""
        warnings.warn("replace_field_metadata is deprecated. Use update_field_metadata with field paths and "
                      "replace=True instead.", DeprecationWarning, stacklevel=2)
        self._as_dataset().update_field_metadata({field_name: dict(new_metadata)}, replace=True)

    def enable_auto_cleanup(self, auto_cleanup_config: Mapping[str, int], **kwargs: Any) -> None:
        """Clean up old versions automatically every ``interval`` commits, removing versions older
        than ``older_than_seconds`` (pylance's ``enable_auto_cleanup``; a config commit).

        Raises
        ------
        InvalidInputError
            The config lacks an integer ``interval`` > 0 or ``older_than_seconds`` >= 0.
        """
        from lance_format.table.auto_cleanup import OLDER_THAN_KEY, config_values

        values = config_values(auto_cleanup_config)
        # pylance writes plain seconds here (write_dataset's auto_cleanup_options: "1m 40s")
        values[OLDER_THAN_KEY] = f"{int(auto_cleanup_config['older_than_seconds'])}s"
        self._as_dataset().update_config(values, **kwargs)

    def disable_auto_cleanup(self, **kwargs: Any) -> None:
        """Stop automatic cleanup (removes the ``lance.auto_cleanup.*`` config keys)."""
        from lance_format.table.auto_cleanup import INTERVAL_KEY, OLDER_THAN_KEY

        self._as_dataset().delete_config_keys([INTERVAL_KEY, OLDER_THAN_KEY], **kwargs)

    def replace_schema(self, schema: pa.Schema) -> None:
        """Not supported, as in pylance (use ``alter_columns``, ``add_columns``, ``drop_columns``)."""
        raise UnsupportedFeatureError("replace_schema is not supported; use alter_columns, add_columns or "
                                      "drop_columns", table=self._as_dataset().uri)

    @staticmethod
    def from_pydantic_model(model_class: type, data: list[Any], uri: str | os.PathLike[str] | None = None,
                            mode: str = "create", **kwargs: Any) -> LanceDataset:
        """Write pydantic model instances as a table whose schema comes from the model class
        (pylance's ``from_pydantic_model``; see :mod:`lance_format.pydantic` for the type mapping).
        ``uri`` defaults to the class name in snake_case.

        Raises
        ------
        TypeError
            ``model_class`` is not a pydantic model, ``data`` holds other objects, or a field
            type has no Arrow mapping.
        ValueError
            ``data`` is empty.
        """
        import re

        from lance_format.dataset.writing.write_dataset import write_dataset
        from lance_format.pydantic import models_to_table

        table = models_to_table(model_class, data)
        if uri is None:
            uri = re.sub(r"(?<!^)(?=[A-Z])", "_", model_class.__name__).lower()
        return write_dataset(table, uri, mode=mode, **kwargs)

    @staticmethod
    def drop(base_uri: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None,
             ignore_not_found: bool | None = None) -> None:
        """Delete the table at ``base_uri`` and everything under it (pylance's ``LanceDataset.drop``).

        ``base_uri`` must be a table root (a readable manifest in ``_versions/``); anything else is
        refused, so that a wrong path never deletes unrelated files.

        Raises
        ------
        DatasetNotFoundError
            No table at ``base_uri`` (unless ``ignore_not_found``); also a ``ValueError``.
        """
        from lance_format.dataset.dataset import LanceDataset

        try:
            ds = LanceDataset(base_uri, storage_options=storage_options)
        except DatasetNotFoundError:
            if ignore_not_found:
                return
            raise
        store = ds.object_store
        if store.root in ("", "/"):
            raise InvalidInputError("refusing to drop a table at the root of a store", table=ds.uri)
        store.delete_dir_contents()
