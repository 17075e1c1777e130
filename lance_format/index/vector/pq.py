"""Product quantization: codebook training and encoding, with pylance's on-disk layout.

A row of ``dim`` values is split into ``num_sub_vectors`` sub-vectors of ``dim / m`` values;
each is replaced by the index (one byte with ``num_bits=8``) of its nearest of ``2**num_bits``
sub-centroids trained by k-means (l2) on that slice of the sample. pylance stores the codebook as
a ``Tensor`` of shape ``[2**num_bits, dim]`` whose data is the ``m`` sub-codebooks one after the
other (``m x 2**num_bits x dim/m``, C order), and the codes of each IVF partition *transposed*
(all rows' first code bytes, then all second ones, ...) cut back into rows of ``m`` bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lance_format.index.vector import kmeans
from lance_format.proto import index_pb2


@dataclass(frozen=True)
class ProductQuantizer:
    """A trained codebook: ``m x 2**num_bits x dim/m`` float32."""

    codebook: np.ndarray
    num_bits: int

    @property
    def num_sub_vectors(self) -> int:
        return int(self.codebook.shape[0])

    @property
    def dimension(self) -> int:
        return int(self.codebook.shape[0] * self.codebook.shape[2])

    def encode(self, x: np.ndarray) -> np.ndarray:
        """The (rows x m) uint8 codes of ``x``."""
        m, _, width = self.codebook.shape
        codes = np.empty((len(x), m), dtype=np.uint8)
        for j in range(m):  # one vectorized assignment per sub-vector (m is small)
            ids, _ = kmeans.assign(np.ascontiguousarray(x[:, j * width:(j + 1) * width]), self.codebook[j], "l2")
            codes[:, j] = ids
        return codes

    def tensor(self) -> bytes:
        """The serialized codebook ``Tensor`` (pylance's global buffer ``codebook_position``)."""
        m, k, width = self.codebook.shape
        message = index_pb2.Tensor(data_type=index_pb2.Tensor.FLOAT32, shape=[k, m * width],
                                   data=np.ascontiguousarray(self.codebook, dtype="<f4").tobytes())
        return message.SerializeToString()


def train(sample: np.ndarray, num_sub_vectors: int, num_bits: int = 8, *, max_iters: int = 50,
          seed: int | None = None) -> ProductQuantizer:
    """Train one k-means (``2**num_bits`` centroids, l2) per sub-vector slice of ``sample``."""
    x = np.ascontiguousarray(sample, dtype=np.float32)
    width = x.shape[1] // num_sub_vectors
    k = 1 << num_bits
    books = np.empty((num_sub_vectors, k, width), dtype=np.float32)
    for j in range(num_sub_vectors):
        part = np.ascontiguousarray(x[:, j * width:(j + 1) * width])
        books[j] = kmeans.train(part, k, "l2", max_iters=max_iters, seed=None if seed is None else seed + j).centroids
    return ProductQuantizer(books, num_bits)


def from_codebook(codebook: np.ndarray, num_bits: int) -> ProductQuantizer:
    """A quantizer from a user codebook (``m x 2**num_bits x dim/m``, pylance's ``pq_codebook``)."""
    return ProductQuantizer(np.ascontiguousarray(codebook, dtype=np.float32), num_bits)


def transpose_partition(codes: np.ndarray) -> np.ndarray:
    """One partition's (rows x m) codes in pylance's transposed layout, still rows x m in shape."""
    rows, m = codes.shape
    return np.ascontiguousarray(codes.T).reshape(rows, m)


__all__ = ["ProductQuantizer", "from_codebook", "train", "transpose_partition"]
