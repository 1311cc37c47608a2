#!/usr/bin/env bash
# What each KACA setting contributes on the full bundled Adult (8 QIs, ARX
# hierarchies), k = 10: granularity, NCP and distortion ratio (uniform WHD),
# from the paper's settings to the tuned ones of configs/adult-kaca.toml.
# Deterministic (seed 1).
#
#   bash docs/results/kaca-ablation.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${RUN_JOB:-}"
if [ -z "$bin" ]; then
  cargo build --quiet --release -p kanon-engine --example run_job
  bin="${CARGO_TARGET_DIR:-target}/release/examples/run_job"
fi
base=(configs/adult-kaca.toml k=10 'param.refine=false')
echo "| weights | strategy | refine | numeric cells | granularity | NCP | distortion ratio |"
echo "|---|---|---|---|---:|---:|---:|"
while read -r weights strategy refine cells; do
  "$bin" "${base[@]}" "param.weights=\"$weights\"" "param.strategy=\"$strategy\"" \
    "param.refine=$refine" "param.numeric_cells=\"$cells\"" | jq -r \
    "\"| $weights | $strategy | $refine | $cells | \" +
     (.report.granularity * 10000 | round / 10000 | tostring) + \" | \" +
     (.report.ncp * 10000 | round / 10000 | tostring) + \" | \" +
     (.report.distortion_ratio * 10000 | round / 10000 | tostring) + \" |\""
done <<'ROWS'
uniform random false hierarchy
uniform smallest-first false hierarchy
uniform largest-distortion-first false hierarchy
uniform least-distortion-first false hierarchy
uniform least-distortion-first true hierarchy
height random false hierarchy
levels random false hierarchy
granularity random false hierarchy
granularity smallest-first false hierarchy
granularity largest-distortion-first false hierarchy
granularity least-distortion-first false hierarchy
granularity least-distortion-first true hierarchy
granularity least-distortion-first true ranges
ROWS
