"""Adds a research subset to Adult for the delta-presence example.

Run from the repository root:
    python3 data/adult/presence.py data/adult/adult.parquet data/adult/adult-presence.parquet

The output is adult.parquet with one more column, `in_study` (boolean): the
30,162 records are the population, and a record is in the study when the
first two bytes of SHA-256("kanon-presence:" + its row number) are below
0.3 * 65536, a fixed pseudo-random 30 % that anyone can recompute.
"""
import hashlib
import sys

import pyarrow as pa
import pyarrow.parquet as pq

src, dst = sys.argv[1], sys.argv[2]
table = pq.read_table(src)
threshold = int(0.3 * 65536)
flags = [
    int.from_bytes(hashlib.sha256(f"kanon-presence:{i}".encode()).digest()[:2], "big") < threshold
    for i in range(table.num_rows)
]
table = table.append_column("in_study", pa.array(flags, pa.bool_()))
pq.write_table(table, dst, compression="zstd", use_dictionary=True, row_group_size=1 << 20)
print(f"{table.num_rows} rows, {sum(flags)} in the study -> {dst}")
