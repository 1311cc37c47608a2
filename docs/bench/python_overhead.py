"""Python overhead against the command line (issue 37; BENCHMARKS.md, "Python").

Runs the same job three ways, each in a fresh process, and prints wall time
and peak RSS (ru_maxrss of the process):

- cli:    `kanon anonymize` (the release binary given as KANON_BIN)
- path:   kanon.anonymize("<input path>", job): the CLI's code path in process
- memory: pyarrow.parquet.read_table(input), then kanon.anonymize(table, job):
          the table imported through the Arrow C stream without a copy
          (its read is timed apart: a user has the table already)

usage: python docs/bench/python_overhead.py INPUT JOB RUNS [--set KEY=VALUE ...]
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, os, resource, sys, time
mode, input_path, job, out, sets = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
import kanon, pyarrow.parquet as pq
sections = {}
for k, v in sets.items():
    s, key = k.split(".", 1)
    sections.setdefault(s, {})[key] = v
read = 0.0
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if mode == "memory":
    t = time.perf_counter()
    data = pq.read_table(input_path)
    read = time.perf_counter() - t
else:
    data = input_path
held = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
kanon.anonymize(data, job, output=out, overwrite=True, weaken_privacy=bool(sets), **sections)
run = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"run_s": run, "read_s": read, "base_kib": base, "held_kib": held, "peak_kib": peak}))
"""


def main() -> None:
    input_path, job, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sets = {}
    for a in sys.argv[4:]:
        if a.startswith("--set="):
            k, v = a[len("--set="):].split("=", 1)
            sets[k] = json.loads(v)
    kanon_bin = os.environ["KANON_BIN"]
    out = tempfile.mkdtemp(prefix="kanon-bench-")
    for i in range(runs):
        for mode in ["cli", "path", "memory"]:
            target = os.path.join(out, f"{mode}.parquet")
            if mode == "cli":
                args = [kanon_bin, "anonymize", "-q", "--config", job, "--input", input_path,
                        "--output", target, "--overwrite",
                        "--metrics-json", os.path.join(out, "m.json")]
                if sets:
                    args += [f"--set={k}={json.dumps(v)}" for k, v in sets.items()]
                    args.append("--weaken-privacy")
                rss = os.path.join(out, "rss")
                t = time.perf_counter()
                subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss, *args], check=True)
                wall = time.perf_counter() - t
                peak_kib = int(open(rss).read().split()[-1])
                print(json.dumps({"mode": mode, "run": i, "run_s": round(wall, 3),
                                  "peak_mib": round(peak_kib / 1024)}))
            else:
                r = subprocess.run([sys.executable, "-c", CHILD, mode, input_path, job, target,
                                    json.dumps(sets)], check=True, capture_output=True, text=True)
                m = json.loads(r.stdout)
                print(json.dumps({"mode": mode, "run": i, "run_s": round(m["run_s"], 3),
                                  "read_s": round(m["read_s"], 3),
                                  "base_mib": round(m["base_kib"] / 1024),
                                  "held_mib": round(m["held_kib"] / 1024),
                                  "peak_mib": round(m["peak_kib"] / 1024)}))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
