import lance, lance_format, time, numpy as np
for q in ["wireless", "running headphones battery"]:
    for name, mod in (("pylance", lance), ("ours", lance_format)):
        d = mod.dataset("/tmp/fts32/p"); d.to_table(full_text_query=q, limit=10)
        t = time.perf_counter(); 
        for _ in range(3): d.to_table(full_text_query=q, limit=10)
        print(q, name, round((time.perf_counter()-t)/3*1000, 1), "ms")
