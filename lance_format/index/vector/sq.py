"""Scalar quantization with pylance's layout: every value of every dimension to ``num_bits``.

One pair of bounds for the whole index (the minimum and maximum value of the training sample,
over all dimensions); a value becomes ``floor((v - start) / (end - start) * (2**bits - 1))``,
clipped to the code range, as pylance's codes are (checked on its IVF_SQ files). Rows are
quantized as they are (no residual), after cosine normalization where the metric asks for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ScalarQuantizer:
    """Bounds and bit width of an SQ index."""

    start: float
    end: float
    num_bits: int = 8

    def encode(self, x: np.ndarray) -> np.ndarray:
        """The (rows x dim) uint8 codes of ``x``."""
        top = (1 << self.num_bits) - 1
        span = self.end - self.start
        scaled = (np.asarray(x, dtype=np.float64) - self.start) * (top / span if span > 0 else 0.0)
        return np.clip(np.floor(scaled), 0, top).astype(np.uint8)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Approximate float32 values of ``codes`` (the start of each code's bucket)."""
        top = (1 << self.num_bits) - 1
        return (self.start + codes.astype(np.float32) * np.float32((self.end - self.start) / top)).astype(np.float32)

    def storage_metadata(self, dim: int) -> str:
        """The ``storage_metadata`` entry pylance writes in ``auxiliary.idx``."""
        return json.dumps({"dim": dim, "num_bits": self.num_bits,
                           "bounds": {"start": self.start, "end": self.end}}, separators=(",", ":"))


def train(sample: np.ndarray, num_bits: int = 8) -> ScalarQuantizer:
    """Bounds from the sample's smallest and largest value (as float32, like pylance's)."""
    x = np.asarray(sample, dtype=np.float32)
    return ScalarQuantizer(float(x.min()), float(x.max()), num_bits)


__all__ = ["ScalarQuantizer", "train"]
