#!/usr/bin/env bash
# Times KACA on the full bundled Adult (configs/adult-kaca.toml: 30,162 rows,
# 8 QIs with the ARX hierarchies), release build, best of 3 runs of the
# run_job example per row, with the tuned settings of the config
# (granularity cost, least-distortion-first, refinement) and with the
# paper's (random order, uniform WHD, no refinement). Prints a Markdown table.
#
#   bash docs/bench/kaca-bench.sh [k ...]        (default k = 2 5 10 20 50 100)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${RUN_JOB:-}"
if [ -z "$bin" ]; then
  cargo build --quiet --release -p kanon-engine --example run_job
  bin="${CARGO_TARGET_DIR:-target}/release/examples/run_job"
fi
ks=("${@}"); [ ${#ks[@]} -gt 0 ] || ks=(2 5 10 20 50 100)
secs='(.secs + .nanos / 1e9)'
echo "| k | settings | granularity | NCP | distortion ratio | classes | largest class | algorithm ms | engine ms |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|"
for k in "${ks[@]}"; do
  for settings in tuned paper; do
    if [ "$settings" = paper ]; then
      params=('param.weights="uniform"' 'param.strategy="random"' 'param.refine=false')
    else
      params=()
    fi
    best=""
    for _ in 1 2 3; do
      row=$("$bin" configs/adult-kaca.toml "k=$k" "${params[@]}" | jq -r "[
        (.report.granularity * 10000 | round / 10000),
        (.report.ncp * 10000 | round / 10000),
        (.report.distortion_ratio * 10000 | round / 10000),
        .report.classes, .report.largest_class,
        (.timings.algorithm | $secs * 1000 | round),
        (.anonymize_s * 1000 | round)] | @tsv")
      t=$(cut -f7 <<< "$row")
      if [ -z "$best" ] || [ "$t" -lt "$(cut -f7 <<< "$best")" ]; then best=$row; fi
    done
    IFS=$'\t' read -r gran ncp dr classes largest algms total <<< "$best"
    echo "| $k | $settings | $gran | $ncp | $dr | $classes | $largest | $algms | $total |"
  done
done
