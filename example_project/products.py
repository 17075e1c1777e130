"""The example's search pipeline: a product catalog, its embeddings and their nearest neighbours.

* ``product_embeddings``: each product's name and description with a 64-dimension embedding
  computed locally and deterministically (no model download): hashed character trigrams of the
  text, projected by a fixed-seed random matrix and normalized. ``defs/lake/defs.yaml`` declares
  an IVF_PQ index on ``embedding`` and an INVERTED (full-text) index on ``description``; the IO
  manager builds them after the write, and their coverage and presence are asset checks.
* ``similar_products``: for a few query products, the nearest products by embedding (through the
  IVF_PQ index) and the best full-text matches of a query, read with ``LanceTableResource.search``.
"""

# No ``from __future__ import annotations`` here: Dagster inspects the ``context`` annotations.
import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_assets import LanceTableResource

DIMENSIONS = 64
BUCKETS = 1024  # hashed trigram features before the projection
COLORS = ["red", "blue", "green", "black", "white"]
ITEMS = ["running shoe", "rain jacket", "wool hat", "leather bag", "garden hose", "desk lamp", "coffee mug",
         "yoga mat"]
MATERIALS = ["waterproof", "recycled", "handmade", "lightweight", "organic"]
QUERY_PRODUCTS = [0, 17, 42, 123]
FULL_TEXT_QUERY = "waterproof jacket"


def product_catalog() -> pa.Table:
    """200 products: every color, item and material combination (ids 0..199), with an e-mail-like
    supplier and a URL; a few descriptions are null."""
    ids = np.arange(len(COLORS) * len(ITEMS) * len(MATERIALS))
    color = pa.array(COLORS).take(pa.array(ids % len(COLORS)))
    item = pa.array(ITEMS).take(pa.array(ids // len(COLORS) % len(ITEMS)))
    material = pa.array(MATERIALS).take(pa.array(ids // (len(COLORS) * len(ITEMS))))
    name = pc.binary_join_element_wise(color, item, " ")
    description = pc.binary_join_element_wise(material, name, pa.scalar("for everyday use"), " ")
    description = pc.if_else(pa.array(ids % 37 == 36), pa.nulls(len(ids), pa.string()), description)
    return pa.table({
        "product_id": pa.array(ids, pa.int64()),
        "name": name,
        "description": description,
        "url": pc.binary_join_element_wise("https://shop.example.com/p/", pa.array(ids.astype(str)), ""),
    })


def embed(texts: pa.Array) -> np.ndarray:
    """Unit-length float32 embeddings (rows x DIMENSIONS) of ``texts`` (nulls embed as empty text):
    counts of hashed character trigrams, projected with a fixed-seed Gaussian matrix. Vectorized:
    the texts become one padded byte matrix, and every trigram's hash is arithmetic on it."""
    texts = pc.utf8_lower(pc.fill_null(texts, ""))
    raw = np.frombuffer(texts.buffers()[2] or b"", dtype=np.uint8) if len(texts) else np.zeros(0, np.uint8)
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)[texts.offset:texts.offset + len(texts) + 1]
    lengths = np.diff(offsets)
    width = int(lengths.max(initial=0)) + 2
    padded = np.zeros((len(texts), width), np.int64)  # a leading and a trailing 0 mark word ends
    column = np.arange(width - 2)
    inside = column[None, :] < lengths[:, None]
    padded[:, 1:-1][inside] = raw[(offsets[:-1, None] + column[None, :])[inside]]
    trigram = (padded[:, :-2] * 65599 + padded[:, 1:-1]) * 65599 + padded[:, 2:]
    valid = np.arange(width - 2)[None, :] < lengths[:, None]
    rows = np.broadcast_to(np.arange(len(texts))[:, None], trigram.shape)[valid]
    counts = np.zeros((len(texts), BUCKETS), np.float32)
    np.add.at(counts, (rows, trigram[valid] % BUCKETS), 1.0)
    projection = np.random.default_rng(20240101).standard_normal((BUCKETS, DIMENSIONS)).astype(np.float32)
    vectors = counts @ projection
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


@dg.asset(kinds={"lance", "numpy"}, group_name="search")
def product_embeddings() -> pa.Table:
    """The product catalog with an ``embedding`` of each product's name and description
    (hashed character trigrams, no model: the same text always gets the same vector)."""
    catalog = product_catalog()
    text = pc.binary_join_element_wise(catalog.column("name"), pc.fill_null(catalog.column("description"), ""), " ")
    vectors = embed(text.combine_chunks())
    embedding = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel(), pa.float32()), DIMENSIONS)
    return catalog.append_column("embedding", embedding)


SIMILAR_SCHEMA = pa.schema([("query_id", pa.int64()), ("query", pa.string()), ("kind", pa.string()),
                            ("rank", pa.int64()), ("product_id", pa.int64()), ("name", pa.string()),
                            ("score", pa.float32())])


@dg.asset(kinds={"lance", "pyarrow"}, group_name="search", deps=[product_embeddings])
def similar_products(context: dg.AssetExecutionContext, lance: LanceTableResource) -> pa.Table:
    """The 5 nearest products to each query product (vector search through the IVF_PQ index) and
    the 5 best full-text matches of ``FULL_TEXT_QUERY`` (BM25 through the INVERTED index)."""
    queries = lance.read("product_embeddings", columns=["product_id", "name", "embedding"]).take(QUERY_PRODUCTS)
    parts = []
    for query_id, name, vector in zip(*(queries.column(c).to_pylist() for c in ("product_id", "name", "embedding"))):
        found = lance.search("product_embeddings", np.asarray(vector, np.float32), column="embedding", k=5,
                             columns=["product_id", "name"], nprobes=2)
        parts.append((query_id, name, "vector", found, found.column("_distance")))
    found = lance.search("product_embeddings", full_text=FULL_TEXT_QUERY, k=5, columns=["product_id", "name"])
    parts.append((None, FULL_TEXT_QUERY, "full_text", found, found.column("_score")))
    tables = [pa.table({
        "query_id": pa.array([query_id] * found.num_rows, pa.int64()), "query": [query] * found.num_rows,
        "kind": [kind] * found.num_rows, "rank": pa.array(np.arange(1, found.num_rows + 1), pa.int64()),
        "product_id": found.column("product_id"), "name": found.column("name"), "score": score.cast(pa.float32()),
    }, schema=SIMILAR_SCHEMA) for query_id, query, kind, found, score in parts]
    result = pa.concat_tables(tables)
    context.add_output_metadata({"search/queries": len(parts), "search/full_text_query": FULL_TEXT_QUERY})
    return result
