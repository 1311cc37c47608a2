#!/usr/bin/env bash
# End-to-end KACA through the CLI on the full bundled Adult (read, encode,
# anonymise, verify, recode, write), k = 10, with the tuned settings of
# configs/adult-kaca.toml and with the paper's (the same job without its
# weights/strategy/refine lines). Best of 3 by wall time; CPU = user + sys.
#
#   bash docs/bench/kaca-cli.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${KANON:-}"
if [ -z "$bin" ]; then
  cargo build --quiet --release -p kanon
  bin="${CARGO_TARGET_DIR:-target}/release/kanon"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -vE '^(weights|strategy|refine) =' configs/adult-kaca.toml > "$tmp/paper.toml"
echo "| settings | wall s | CPU s | granularity | NCP | distortion ratio | classes |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for settings in tuned paper; do
  config=configs/adult-kaca.toml
  [ "$settings" = paper ] && config="$tmp/paper.toml"
  best=""
  for _ in 1 2 3; do
    /usr/bin/time -f "%e %U %S" -o "$tmp/time" "$bin" anonymize --config "$config" \
      --output "$tmp/out.parquet" --overwrite > "$tmp/log" 2>&1
    read -r wall user sys < "$tmp/time"
    loss=$(grep -E '^ +loss' "$tmp/log" | sed -E 's/.*NCP ([0-9.]+), granularity ([0-9.]+), distortion ratio ([0-9.]+).*/\2 \1 \3/')
    classes=$(grep -E '^ +classes' "$tmp/log" | awk '{print $2}')
    row="$wall $(echo "$user + $sys" | bc) $loss $classes"
    if [ -z "$best" ] || (( $(echo "$wall < ${best%% *}" | bc) )); then best=$row; fi
  done
  read -r wall cpu gran ncp dr classes <<< "$best"
  echo "| $settings | $wall | $cpu | $gran | $ncp | $dr | $classes |"
done
