#!/bin/sh
# Delta vs Parquet release time (issue 17): the same job on the same input
# written as a Parquet release and committed to a Delta table, on
# `kanon generate --like adult --extra-columns 10 --seed 1` rows.
#
#   docs/bench/delta.sh DIR ROWS...      e.g. docs/bench/delta.sh /tmp/kanon-delta 1000000 10000000
#
# For each size: a Parquet release; a Delta table created with the release
# (version 0); a second release appended to it (another seed: version 1); a
# rerun of that job (a no-op: nothing to do). Prints one line per run:
# wall seconds and peak RSS (/usr/bin/time), and from the JSON log lines
# pass 1, the algorithm, for Delta the read-back verification and the log
# commit, and the total.
set -eu
dir=$1
shift
kanon=${KANON:-target/release/kanon}
job=${JOB:-configs/adult-kaca.toml}
mkdir -p "$dir"

phases() {
    python3 - "$1" <<'PY'
import json, sys
logs = {}
for line in open(sys.argv[1]):
    try:
        v = json.loads(line)
    except ValueError:
        continue
    logs[v.get("message")] = v
s = lambda m: logs.get(m, {}).get("seconds")
f = lambda x: "-" if x is None else f"{x:.2f}"
print(f"pass 1 {f(s('pass 1 done'))}  algorithm {f(s('partition computed and verified'))}"
      f"  read back + verify {f(s('Delta data files read back and verified'))}"
      f"  log commit {f(s('Delta log commit done'))}  total {f(s('release committed'))}")
PY
}

one() {
    name=$1
    shift
    /usr/bin/time -f "%e %M" -o "$dir/time" "$kanon" anonymize --log-format json \
        -c "$job" --set columns.unlisted=insensitive "$@" >/dev/null 2>"$dir/log" || true
    read -r wall rss <<EOT
$(tail -n 1 "$dir/time")
EOT
    printf '%-26s wall %6.2f s  peak RSS %5d MiB  %s\n' "$name" "$wall" $((rss / 1024)) "$(phases "$dir/log")"
}

for rows in "$@"; do
    input="$dir/g$rows.parquet"
    [ -f "$input" ] || "$kanon" generate -q --like adult --rows "$rows" --seed 1 \
        --extra-columns 10 --overwrite "$input"
    rm -rf "$dir/table$rows"
    one "$rows parquet" -i "$input" -o "$dir/release$rows.parquet" --overwrite
    one "$rows delta create" -i "$input" -o "$dir/table$rows" --set output.format=delta
    one "$rows delta append" -i "$input" -o "$dir/table$rows" --set output.format=delta \
        --set output.mode=append --seed 2
    one "$rows delta rerun (no-op)" -i "$input" -o "$dir/table$rows" --set output.format=delta \
        --set output.mode=append --seed 2
done
