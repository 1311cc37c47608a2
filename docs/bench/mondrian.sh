#!/usr/bin/env bash
# Mondrian on the bundled Adult job, k in {2,5,10,20,50,100}: best-of-3 wall
# time of `kanon anonymize` (end to end, release build), NCP, granularity.
# Usage: bash docs/bench/mondrian.sh [extra kanon args]
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p kanon
bin="${CARGO_TARGET_DIR:-target}/release/kanon"
out=$(mktemp -d)
echo "| k | time (s, best of 3) | algorithm (s) | classes | NCP | granularity | distortion ratio |"
echo "|---|---|---|---|---|---|---|"
for k in 2 5 10 20 50 100; do
  best=""
  for i in 1 2 3; do
    start=$(date +%s.%N)
    "$bin" anonymize -q --config configs/adult.toml --algorithm mondrian --k "$k" -o "$out/r.parquet" --overwrite --metrics-json "$out/m.json" "$@"
    t=$(echo "$(date +%s.%N) - $start" | bc)
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc)" = 1 ]; then best=$t; fi
  done
  python3 - "$out/m.json" "$k" "$best" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); r = m["report"]
print(f"| {sys.argv[2]} | {float(sys.argv[3]):.3f} | {m['timings_s']['algorithm']:.3f} | {r['classes']} | {r['ncp']:.4f} | {r['granularity']:.4f} | {r['distortion_ratio']:.4f} |")
PY
done
rm -rf "$out"
