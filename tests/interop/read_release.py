"""Reads a kanon release with pyarrow, pandas, DuckDB and polars.

Usage:
  read_release.py pandas-input SRC DST   # rewrite SRC with pandas, with an index
  read_release.py check RELEASE ROWS DROPPED...
      RELEASE is a file or a directory of parts; ROWS the expected row count;
      DROPPED the columns that must not appear (neither as a column nor in
      any schema metadata). Exits non-zero with a message on any failure.
"""
import glob
import json
import os
import sys


def pandas_input(src, dst):
    import pandas as pd

    df = pd.read_parquet(src)
    # A non-default index: pandas stores it as `__index_level_0__` and names
    # it, with every column, in the `pandas` schema metadata.
    df.index = pd.Index(df.index.to_numpy() * 3 + 7)
    df.to_parquet(dst)


def files(release):
    if os.path.isdir(release):
        return sorted(glob.glob(os.path.join(release, "*.parquet")))
    return [release]


def check(release, rows, dropped):
    import duckdb
    import pandas as pd
    import polars as pl
    import pyarrow.parquet as pq

    paths = files(release)
    assert paths, f"no Parquet files in {release}"
    for p in paths:
        meta = pq.read_schema(p).metadata or {}
        for key, value in meta.items():
            key, value = key.decode(), value.decode(errors="replace")
            assert key != "pandas", f"{p}: stale pandas metadata: {value[:200]}"
            if not key.startswith("kanon.") and key != "ARROW:schema":
                for d in dropped:
                    assert d not in value, f"{p}: metadata {key} names dropped column {d}"

    def same(reader, n, columns):
        assert n == rows, f"{reader}: {n} rows, expected {rows}"
        for d in dropped:
            assert d not in columns, f"{reader}: dropped column {d} is back: {columns}"

    t = pq.read_table(paths[0] if len(paths) == 1 else release)
    same("pyarrow", t.num_rows, t.column_names)

    df = pd.read_parquet(release)
    same("pandas", len(df), list(df.columns) + list(df.index.names))
    # No index from the input: a fresh RangeIndex.
    assert isinstance(df.index, pd.RangeIndex), f"pandas: index {type(df.index).__name__}"

    quoted = "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"
    con = duckdb.connect()
    n = con.execute(f"SELECT count(*) FROM read_parquet({quoted})").fetchone()[0]
    cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet({quoted})").fetchall()]
    same("duckdb", n, cols)

    pf = pl.read_parquet(paths)
    same("polars", pf.height, pf.columns)
    print(json.dumps({"rows": rows, "files": len(paths), "ok": True}))


if __name__ == "__main__":
    if sys.argv[1] == "pandas-input":
        pandas_input(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "check":
        check(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    else:
        sys.exit(f"unknown command {sys.argv[1]}")
