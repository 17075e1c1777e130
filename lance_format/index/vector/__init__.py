"""Vector indices of Lance tables (IVF partitions with FLAT, PQ or SQ storage, HNSW sub-indices):
reading pylance's index files (``ivf_reader``) and measuring quantized codes (``pq_distance``,
``sq_distance``); building them lives beside them."""
