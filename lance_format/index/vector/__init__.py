"""Vector indices of Lance tables in pylance 14.0.2's on-disk format: IVF partitions with FLAT,
PQ or SQ storage, and the HNSW sub-indices of IVF_HNSW_SQ / IVF_HNSW_PQ.

Building: ``kmeans`` trains centroids, ``pq`` and ``sq`` train and apply the quantizers,
``ivf_build`` assigns rows to partitions and writes ``index.idx`` and ``auxiliary.idx``, ``hnsw``
builds the per-partition graphs, ``params`` holds pylance's parameter names, defaults and the
``VectorIndexDetails`` message, ``stats`` reads a segment back for ``describe_indices`` /
``index_stats``.

Searching: ``ivf_reader`` reads an index's files (pylance's or ours), ``pq_distance`` and
``sq_distance`` measure quantized codes against a query.
"""
