#!/usr/bin/env bash
# Issue 8's timing: `SELECT count(*) FROM anonymize('adult', <bundled job>)`
# in `kanon sql` vs `kanon anonymize` of the same job, 5 runs each, median.
# Run from the repository root after
#   cargo build --release -p kanon --features sql
set -euo pipefail
BIN=${CARGO_TARGET_DIR:-target}/release/kanon
OUT=$(mktemp -d)
runs=${RUNS:-5}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
time_it() {
  local s e
  s=$(date +%s.%N); "$@" > /dev/null; e=$(date +%s.%N)
  echo "$e - $s" | bc -l
}
echo "# $(date -u +%FT%TZ) $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
cli=(); sql=()
for i in $(seq "$runs"); do
  cli+=("$(time_it "$BIN" anonymize --config configs/adult.toml --output "$OUT/r.parquet" --overwrite -q)")
  sql+=("$(time_it "$BIN" sql "SELECT count(*) FROM anonymize('adult', 'config = \"configs/adult.toml\"')" --table adult=data/adult/adult.parquet)")
done
echo "kanon anonymize:  ${cli[*]}"
echo "kanon sql count:  ${sql[*]}"
m1=$(printf '%s\n' "${cli[@]}" | median); m2=$(printf '%s\n' "${sql[@]}" | median)
echo "median anonymize ${m1}s, sql ${m2}s, ratio $(echo "$m2 / $m1" | bc -l | cut -c1-5)"
rm -rf "$OUT"
