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
# wall seconds, peak RSS, pass 1 / algorithm / pass 2 seconds (metrics
# JSON), and for Delta the read-back verification and the log commit
# seconds (JSON log lines).
set -eu
dir=$1
shift
kanon=${KANON:-target/release/kanon}
job=${JOB:-configs/adult-kaca.toml}
mkdir -p "$dir"

phases() {
    python3 - "$1" "$2" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])) if sys.argv[1] != "-" else {}
t = m.get("timings_s", {})
logs = {}
for line in open(sys.argv[2]):
    try:
        v = json.loads(line)
    except ValueError:
        continue
    logs[v.get("message")] = v
verify = logs.get("Delta data files read back and verified", {}).get("seconds")
commit = logs.get("Delta log commit done", {}).get("seconds")
f = lambda x: "-" if x is None else f"{x:.2f}"
print(f"pass1 {f(t.get('pass1_read_encode'))} algorithm {f(t.get('algorithm'))} pass2 {f(t.get('pass2_recode_verify_write'))} readback+verify {f(verify)} commit {f(commit)}")
PY
}

one() {
    name=$1
    shift
    /usr/bin/time -f "%e %M" -o "$dir/time" "$kanon" anonymize -q --log-format json \
        -c "$job" --metrics-json "$dir/metrics.json" "$@" 2>"$dir/log" || true
    read -r wall rss <"$dir/time"
    if [ -s "$dir/metrics.json" ]; then m="$dir/metrics.json"; else m=-; fi
    printf '%-28s wall %7.2f s  peak RSS %5d MiB  %s\n' "$name" "$wall" $((rss / 1024)) "$(phases "$m" "$dir/log")"
    rm -f "$dir/metrics.json"
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
