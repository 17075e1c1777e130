import lance, lance_format, numpy as np, pyarrow as pa, shutil, sys, glob
sys.path.append("tests")
from test_fts_read import _texts
texts = _texts(20000)
shutil.rmtree("/tmp/fts32/p", ignore_errors=True)
ds = lance.write_dataset(pa.table({"id": np.arange(len(texts)), "text": pa.array(texts, pa.string())}), "/tmp/fts32/p", max_rows_per_file=5000)
ds.create_scalar_index("text", "INVERTED")
print(sorted(p.split("/")[-1] for p in glob.glob("/tmp/fts32/p/_indices/*/*")))
for q in ["wireless", "running headphones battery", "数据 straße"]:
    a = lance.dataset("/tmp/fts32/p").to_table(full_text_query=q, limit=30)
    b = lance_format.dataset("/tmp/fts32/p").to_table(full_text_query=q, limit=30)
    print(q, np.abs(a["_score"].to_numpy() - b["_score"].to_numpy()).max(), set(a["id"].to_pylist()) == set(b["id"].to_pylist()))
