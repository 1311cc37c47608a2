#!/usr/bin/env python3
"""Regenerates the full-domain tables of docs/bench/global.md.

Usage, from the repository root, after
`cargo build --release -p kanon-engine --example run_job`:

    python3 docs/bench/full_domain_table.py ALGORITHM [override ...]

e.g. `python3 docs/bench/full_domain_table.py incognito suppression_limit=0.02`.
Runs configs/adult.toml for k in 2, 5, 10, 20, 50, 100, three times each,
and prints one Markdown row per k from the run with the best algorithm time.
The binary is $RUN_JOB, else $CARGO_TARGET_DIR (or target)/release/examples/run_job.
"""
import json
import os
import subprocess
import sys

QIS = ["age", "sex", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
binary = os.environ.get("RUN_JOB") or os.path.join(
    os.environ.get("CARGO_TARGET_DIR", "target"), "release", "examples", "run_job"
)
algorithm, overrides = sys.argv[1], sys.argv[2:]
for k in [2, 5, 10, 20, 50, 100]:
    best = None
    for _ in range(3):
        out = subprocess.run(
            [binary, "configs/adult.toml", f"algorithm={algorithm}", f"k={k}", *overrides],
            capture_output=True, text=True, check=True,
        ).stdout
        run = json.loads(out)
        t = run["timings"]["algorithm"]
        seconds = t["secs"] + t["nanos"] / 1e9
        if best is None or seconds < best[0]:
            best = (seconds, run)
    seconds, run = best
    r, d = run["report"], run["details"]
    node = "(" + ", ".join(str(d["chosen"][q]) for q in QIS) + ")"
    row = f"| {k} | {seconds:.3f} | {node} | {r['suppressed_rows']} | {r['ncp']:.4f} | {r['distortion_ratio']:.4f} | {r['smallest_class']} | {d['nodes_evaluated']}"
    if algorithm == "incognito":
        row += f" | {d['nodes_pruned']} | {len(d['minimal_nodes'])}"
    print(row + " |")
