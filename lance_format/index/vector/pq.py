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
        return _encode_all(x, self.codebook)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """The float32 vectors (rows x dim) ``codes`` stand for."""
        m = self.codebook.shape[0]
        parts = self.codebook[np.arange(m)[None, :], codes.astype(np.int64)]  # rows x m x width
        return parts.reshape(len(codes), -1)

    def tensor(self, data_type: int = index_pb2.Tensor.FLOAT32, dtype: str = "<f4") -> bytes:
        """The serialized codebook ``Tensor`` (pylance's global buffer ``codebook_position``),
        in the vector column's float type."""
        m, k, width = self.codebook.shape
        message = index_pb2.Tensor(data_type=data_type, shape=[k, m * width],  # type: ignore[arg-type]
                                   data=np.ascontiguousarray(self.codebook, dtype=dtype).tobytes())
        return message.SerializeToString()


def _nearest_codes(x3: np.ndarray, books: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's nearest sub-centroid in every sub-space at once: ``x3`` (m x rows x width),
    ``books`` (m x k x width); codes (m x rows) and ``|c|^2 - 2 x.c`` at them (the distance
    less ``|x|^2``). The rows get a column of ones and the codebooks a row of ``|c|^2`` so that
    one batched matmul yields the distances; chunks of rows keep the block cache-sized."""
    m, rows, width = x3.shape
    k = books.shape[1]
    step = max(64, (1 << 20) // max(m * k, 1))
    augmented = np.empty((m, width + 1, k), dtype=np.float32)
    augmented[:, :width] = -2.0 * books.transpose(0, 2, 1)
    augmented[:, width] = np.einsum("mkw,mkw->mk", books, books)
    codes = np.empty((m, rows), dtype=np.int64)
    best = np.empty((m, rows), dtype=np.float32)
    x_aug = np.empty((m, step, width + 1), dtype=np.float32)
    x_aug[:, :, width] = 1.0
    for start in range(0, rows, step):
        n = min(step, rows - start)
        x_aug[:, :n, :width] = x3[:, start:start + n]
        block = np.matmul(x_aug[:, :n], augmented)
        found = block.argmin(axis=2)
        codes[:, start:start + n] = found
        best[:, start:start + n] = np.take_along_axis(block, found[:, :, None], axis=2)[:, :, 0]
    return codes, best


def train(sample: np.ndarray, num_sub_vectors: int, num_bits: int = 8, *, max_iters: int = 50,
          seed: int | None = None) -> ProductQuantizer:
    """Train the ``num_sub_vectors`` sub-codebooks (``2**num_bits`` centroids each, l2) together:
    k-means++ seeding per sub-space, then Lloyd iterations batched over all sub-spaces until
    ``max_iters`` or until the mean distance changes by less than the k-means tolerance."""
    x = np.ascontiguousarray(sample, dtype=np.float32)
    m, k = int(num_sub_vectors), 1 << num_bits
    width = x.shape[1] // m
    x3 = np.ascontiguousarray(x.reshape(len(x), m, width).transpose(1, 0, 2))
    rng = np.random.default_rng(seed)
    if len(x) >= k:
        books = np.stack([kmeans.seed_centroids(x3[j], k, rng) for j in range(m)])
    else:
        books = x3[:, rng.integers(0, len(x), size=k)].copy()
    row_norms = np.einsum("mnw,mnw->mn", x3, x3)
    group_base = (np.arange(m, dtype=np.int64) * k)[:, None]
    flat_x = x3.reshape(m * len(x), width).astype(np.float64)
    previous = np.inf
    for _ in range(max(1, int(max_iters))):
        codes, best = _nearest_codes(x3, books)
        dists = np.maximum(best + row_norms, 0)
        groups = (codes + group_base).ravel()
        counts = np.bincount(groups, minlength=m * k)
        order = np.argsort(groups, kind="stable")
        present = np.flatnonzero(counts)
        sums = np.zeros((m * k, width), dtype=np.float64)
        starts = np.concatenate([[0], np.cumsum(counts[present])[:-1]])
        sums[present] = np.add.reduceat(flat_x[order], starts, axis=0)
        updated = (sums / np.maximum(counts, 1)[:, None]).astype(np.float32).reshape(m, k, width)
        empty = counts.reshape(m, k) == 0
        for j in np.flatnonzero(empty.any(axis=1)):  # rare: restart empty ones at the worst-fit rows
            missing = np.flatnonzero(empty[j])
            far = np.argsort(-dists[j], kind="stable")[:len(missing)]
            updated[j, missing[:len(far)]] = x3[j, far]
        books = updated
        mean = float(dists.mean())
        if np.isfinite(previous) and abs(previous - mean) <= kmeans.TOLERANCE * max(abs(previous), 1e-12):
            break
        previous = mean
    return ProductQuantizer(np.ascontiguousarray(books, dtype=np.float32), num_bits)


def _encode_all(x: np.ndarray, codebook: np.ndarray) -> np.ndarray:
    m, _, width = codebook.shape
    x3 = np.ascontiguousarray(np.asarray(x, dtype=np.float32).reshape(len(x), m, width).transpose(1, 0, 2))
    codes, _ = _nearest_codes(x3, codebook)
    return np.ascontiguousarray(codes.T).astype(np.uint8)


def from_codebook(codebook: np.ndarray, num_bits: int) -> ProductQuantizer:
    """A quantizer from a user codebook (``m x 2**num_bits x dim/m``, pylance's ``pq_codebook``)."""
    return ProductQuantizer(np.ascontiguousarray(codebook, dtype=np.float32), num_bits)


def transpose_partition(codes: np.ndarray) -> np.ndarray:
    """One partition's (rows x m) codes in pylance's transposed layout, still rows x m in shape."""
    rows, m = codes.shape
    return np.ascontiguousarray(codes.T).reshape(rows, m)


__all__ = ["ProductQuantizer", "from_codebook", "train", "transpose_partition"]
