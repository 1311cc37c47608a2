#!/usr/bin/env python3
"""Issue 10: the information lost to block-wise runs on Adult, k = 10.

Each local-recoding algorithm on the whole table (block_size = 0) and in
blocks of 1k, 5k and 10k rows (default cut rule "least-loss"), through the
engine alone. Prints a Markdown table. From the repository root:

    cargo build --release -p kanon-engine --example run_job
    docs/results/partition-cost.py
"""
import json
import os
import subprocess

RUN = os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release/examples/run_job")
JOBS = [
    ("mondrian", "configs/adult.toml", ["algorithm=mondrian"]),
    ("mondrian-hierarchy", "configs/adult.toml", ["algorithm=mondrian-hierarchy"]),
    ("cover", "configs/adult.toml", ["algorithm=cover"]),
    ("sbc", "configs/adult.toml", ["algorithm=sbc"]),
    ("kaca (configs/adult-kaca.toml)", "configs/adult-kaca.toml", []),
    ("kaca (paper settings)", "configs/adult-kaca.toml",
     ['param.weights="uniform"', 'param.strategy="random"', "param.refine=false"]),
    ("l-clustering (l = 2)", "configs/adult.toml", ["algorithm=l-clustering", "l=2"]),
]

print("| algorithm | block size | NCP | vs whole | granularity | distortion | classes | blocks | block rows | time (s) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for label, config, extra in JOBS:
    whole = None
    for b in [0, 1000, 5000, 10000]:
        out = subprocess.run([RUN, config, "k=10", *extra, f"param.block_size={b}"],
                             check=True, capture_output=True, text=True).stdout
        d = json.loads(out)
        r = d["report"]
        p = (d.get("details") or {}).get("partitioned") or {}
        ncp = r["ncp"]
        vs = "-" if whole is None else f"{(ncp / whole - 1) * 100:+.1f} %"
        size = "whole table" if b == 0 else f"{b:,}"
        rows = f"{p['block_rows_min']}-{p['block_rows_max']}" if p else "-"
        print(f"| {label} | {size} | {ncp:.4f} | {vs} | {r['granularity']:.4f} | "
              f"{r['distortion_ratio']:.4f} | {r['classes']} | {p.get('blocks', 1)} | {rows} | "
              f"{d['anonymize_s']:.2f} |", flush=True)
        if b == 0:
            whole = ncp
