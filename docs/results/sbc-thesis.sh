#!/usr/bin/env bash
# Regenerates the SBC thesis comparison (seed 001, section 4.3, Figure 4-2,
# Tables 4-1 and 4-2): the first 5,000 rows of the bundled Adult, QIs age,
# sex, native-country, k in {2, 5, 10, 20, ..., 100}; total NCP, utility
# (1 - NCP) and distinct published tuples per algorithm.
#
#   bash docs/results/sbc-thesis.sh [ALGORITHM:CONFIG[@OVERRIDE,...] ...]
#
# A run names an algorithm, a job file in configs/ and optional run_job
# overrides, e.g. incognito:adult@param.loss="ncp",suppression_limit=0.02.
# Default runs: SBC without hierarchies, Mondrian with the bundled
# hierarchies (as the thesis ran it) and without, Datafly and Incognito
# (least NCP) with the bundled hierarchies, all without suppression.
# Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -gt 0 ]; then runs=("$@"); else
  runs=(sbc:adult-flexible mondrian:adult mondrian:adult-flexible datafly:adult
    'incognito:adult@param.loss="ncp"'); fi
# RUN_JOB names an already built run_job example (skips the build).
bin="${RUN_JOB:-}"
if [ -z "$bin" ]; then
  cargo build --quiet --release -p kanon-engine --example run_job
  bin="${CARGO_TARGET_DIR:-target}/release/examples/run_job"
fi
header="| k |"; rule="|---:|"
for r in "${runs[@]}"; do
  header+=" ${r%%:*} (${r#*:}) NCP | utility | tuples |"; rule+="---:|---:|---:|"
  header=${header//@/, }
done
echo "$header"; echo "$rule"
for k in 2 5 10 20 30 40 50 60 70 80 90 100; do
  line="| $k |"
  for r in "${runs[@]}"; do
    spec=${r#*:}; config=${spec%%@*}; overrides=()
    [[ $spec == *@* ]] && IFS=, read -r -a overrides <<< "${spec#*@}"
    line+=$("$bin" "configs/$config.toml" "algorithm=${r%%:*}" "k=$k" rows=5000 \
      qis=age,sex,native-country "${overrides[@]}" |
      jq -r '" \(.report.ncp * 10000 | round / 100) % | \(.report.utility * 10000 | round / 100) % | \(.report.classes) |"')
  done
  echo "$line"
done
