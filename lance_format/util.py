"""pylance's ``lance.util`` helpers: timestamp conversions (:func:`sanitize_ts`,
:func:`td_to_micros`); the index helpers (``validate_vector_index``, ``KMeans``, ``HNSW``) exist
for code that names them and raise :class:`~lance_format.errors.UnsupportedFeatureError`, as this
engine builds no vector indices."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from lance_format.errors import ArgumentTypeError, InvalidInputError, UnsupportedFeatureError


def sanitize_ts(ts: Any) -> datetime:
    """A ``datetime`` from a datetime, a pandas Timestamp or a ``"%Y-%m-%d %H:%M:%S"`` string."""
    if isinstance(ts, datetime):
        return ts.to_pydatetime() if hasattr(ts, "to_pydatetime") else ts
    if isinstance(ts, str):
        try:
            import pandas as pd
        except ImportError:
            try:
                return datetime.strptime(ts, "%Y-%m-%d %H:%M:%S")
            except ValueError as exc:
                raise InvalidInputError(f"Failed to parse timestamp string {ts}. Try installing Pandas.") from exc
        return pd.to_datetime(ts).to_pydatetime()
    raise ArgumentTypeError(f"Unrecognized version timestamp {ts} of type {type(ts)}")


def td_to_micros(td: timedelta) -> int:
    """Microseconds in ``td`` (rounded)."""
    return round(td / timedelta(microseconds=1))


def _no_vector_indices(what: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(f"{what}: this engine builds no vector indices")


def validate_vector_index(dataset: Any, column: str, refine_factor: int = 5, sample_size: int | None = None,
                          pass_threshold: float = 1.0) -> None:
    """pylance checks a vector index's recall; there are no vector indices here."""
    raise _no_vector_indices("validate_vector_index")


class KMeans:
    """pylance's k-means trainer of IVF centroids (not available: no vector indices)."""

    def __init__(self, k: int, metric_type: str = "l2", max_iters: int = 50, centroids: Any = None) -> None:
        raise _no_vector_indices("KMeans")


class HNSW:
    """pylance's HNSW graph builder (not available: no vector indices)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise _no_vector_indices("HNSW")

    @staticmethod
    def build(*args: Any, **kwargs: Any) -> HNSW:
        raise _no_vector_indices("HNSW.build")


__all__ = ["sanitize_ts", "td_to_micros", "validate_vector_index", "KMeans", "HNSW"]
