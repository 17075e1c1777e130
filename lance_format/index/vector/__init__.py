"""Building vector indices in pylance 14.0.2's on-disk format (IVF_FLAT, IVF_PQ, IVF_SQ,
IVF_HNSW_SQ, IVF_HNSW_PQ).

``kmeans`` trains centroids, ``pq`` and ``sq`` train and apply the quantizers, ``ivf_build``
assigns rows to partitions and writes ``index.idx`` and ``auxiliary.idx``, ``hnsw`` builds the
per-partition graphs of the HNSW types, ``params`` holds
pylance's parameter names, defaults and the ``VectorIndexDetails`` message, ``stats`` reads a
segment back for ``describe_indices`` / ``index_stats``.
"""
