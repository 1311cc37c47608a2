#!/usr/bin/env bash
# Times SBC (index and scan searches) and Mondrian on the full bundled Adult
# without hierarchies (configs/adult-flexible.toml: 30,162 rows, 8 QIs),
# release build, best of 3 runs of the run_job example. Prints a Markdown
# table: NCP, published tuples, algorithm time and engine time (classes,
# algorithm, verification, metrics; reading and encoding excluded).
#
#   bash docs/bench/sbc-bench.sh [k ...]        (default k = 2 10 50 100)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${RUN_JOB:-}"
if [ -z "$bin" ]; then
  cargo build --quiet --release -p kanon-engine --example run_job
  bin="${CARGO_TARGET_DIR:-target}/release/examples/run_job"
fi
ks=("${@}"); [ ${#ks[@]} -gt 0 ] || ks=(2 10 50 100)
secs='(.secs + .nanos / 1e9)'
echo "| k | algorithm | NCP | tuples | encode ms | algorithm ms | engine ms |"
echo "|---:|---|---:|---:|---:|---:|---:|"
for k in "${ks[@]}"; do
  for alg in "sbc" 'sbc param.search="scan"' "mondrian"; do
    best=""
    for _ in 1 2 3; do
      # shellcheck disable=SC2086
      row=$("$bin" configs/adult-flexible.toml algorithm=$alg "k=$k" | jq -r "[
        (.report.ncp * 10000 | round / 100), .report.classes,
        (.encode_s * 1000 | round),
        (.timings.algorithm | $secs * 1000 | round),
        (.anonymize_s * 1000 | round)] | @tsv")
      t=$(cut -f5 <<< "$row")
      if [ -z "$best" ] || [ "$t" -lt "$(cut -f5 <<< "$best")" ]; then best=$row; fi
    done
    IFS=$'\t' read -r ncp tuples enc algms total <<< "$best"
    echo "| $k | ${alg/param./} | $ncp % | $tuples | $enc | $algms | $total |"
  done
done
