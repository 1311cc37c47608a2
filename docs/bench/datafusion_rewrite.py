"""Baseline of issue 9's time target: a plain Parquet read-and-rewrite of the
same file by DataFusion (datafusion-python 55.0.0, the Python binding of
DataFusion 55), zstd level 3 like kanon's releases.

    python docs/bench/datafusion_rewrite.py IN.parquet OUT.parquet
"""
import sys
import time

from datafusion import SessionContext

src, dst = sys.argv[1], sys.argv[2]
start = time.perf_counter()
ctx = SessionContext()
df = ctx.read_parquet(src)
df.write_parquet(dst, compression="zstd", compression_level=3)
print(f"datafusion read+rewrite: {time.perf_counter() - start:.2f} s")
