"""Converts the ARX copy of UCI Adult (adult.csv, `;`-separated) to Parquet.

Run from the repository root:  python3 data/adult/convert.py SOURCE.csv data/adult/adult.parquet
age becomes int64; every other column a dictionary-encoded string; zstd.
"""
import sys

import pyarrow as pa
import pyarrow.csv as csv
import pyarrow.parquet as pq

src, dst = sys.argv[1], sys.argv[2]
table = csv.read_csv(src, parse_options=csv.ParseOptions(delimiter=";"))
cols = []
for name in table.column_names:
    col = table[name]
    if name == "age":
        col = col.cast(pa.int64())
    else:
        col = col.cast(pa.string())
    cols.append(col)
table = pa.table(cols, names=table.column_names)
pq.write_table(table, dst, compression="zstd", use_dictionary=True, row_group_size=1 << 20)
print(f"{table.num_rows} rows -> {dst}")
