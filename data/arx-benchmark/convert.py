"""Copies two of the ARX team's benchmark sets into this repository:
`creditcard` and `mach2019` from arx-deidentifier/genetic-benchmark
(Apache-2.0, see LICENSE), recoded to random integers by the ARX team.

Run from the repository root:
    python3 data/arx-benchmark/convert.py SOURCE_DIR data/arx-benchmark

SOURCE_DIR holds the repository's `data/` files (`creditcard_int.csv`,
`mach2019_int.csv`) and `hierarchies/`. Only the columns the jobs in
`configs/` use are kept (the quasi-identifiers and the sensitive column
listed below), each as a string column (the codes are categories, not
numbers), zstd; their hierarchy files are copied unchanged.
"""
import os
import shutil
import sys

import pyarrow as pa
import pyarrow.csv as csv
import pyarrow.parquet as pq

SETS = {
    # Demographics, credit limit, last month's repayment status and bill:
    # what an attacker could know of a card holder. default-payment is the
    # sensitive column of the l-diversity jobs.
    "creditcard": (
        ["LIMIT_BAL", "SEX", "EDUCATION", "MARRIAGE", "AGE", "PAY_0", "BILL_AMT1"],
        ["default-payment-next-month"],
    ),
    # The six demographic attributes the ARX team gives hierarchy heights
    # for; Q1A (an answer of the test) is the sensitive column.
    "mach2019": (
        ["age", "familysize", "gender", "married", "race", "religion"],
        ["Q1A"],
    ),
}

src, dst = sys.argv[1], sys.argv[2]
for name, (qis, sensitive) in SETS.items():
    columns = qis + sensitive
    table = csv.read_csv(
        os.path.join(src, f"{name}_int.csv"),
        parse_options=csv.ParseOptions(delimiter=";"),
        convert_options=csv.ConvertOptions(
            include_columns=columns,
            column_types={c: pa.string() for c in columns},
        ),
    )
    out = os.path.join(dst, f"{name}.parquet")
    pq.write_table(table, out, compression="zstd", use_dictionary=True)
    os.makedirs(os.path.join(dst, "hierarchies", name), exist_ok=True)
    for c in qis:
        shutil.copyfile(
            os.path.join(src, "hierarchies", f"{name}_int_hierarchy_{c}.csv"),
            os.path.join(dst, "hierarchies", name, f"{c}.csv"),
        )
    print(f"{name}: {table.num_rows} rows, {len(qis)} QIs -> {out}")
