#!/usr/bin/env bash
# Issue 35: `kanon inspect` of generated Adult-like Parquet (8 QIs, the
# salary class, 10 extra columns) split into FILES files, read by this
# process alone (0) or by 1 and 2 `kanon worker` processes on this machine
# (`--workers`: the coordinator lists the files and merges the workers'
# tuple counts). Release build with `--features distributed`; one run each;
# wall time and peak RSS of the coordinator and every worker from
# /usr/bin/time.
#
#   cargo build --release -p kanon --features distributed
#   docs/bench/census.sh [DIR] [ROWS] [FILES]      (default /tmp/kanon-census 10000000 8)
#
# Prints one tab-separated line per run:
# workers wall_s coord_rss_MiB worker_rss_MiB... rows classes unique_rows
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR="${1:-/tmp/kanon-census}"
ROWS="${2:-10000000}"
FILES="${3:-8}"
WORKERS="${WORKERS:-0 1 2}"
KANON="${KANON:-${CARGO_TARGET_DIR:-target}/release/kanon}"
QIS="age,sex,race,marital-status,education,native-country,workclass,occupation"
mkdir -p "$DIR/parts"
data="$DIR/adult-$ROWS.parquet"
[ -f "$data" ] || "$KANON" generate --like adult --rows "$ROWS" --extra-columns 10 --seed 1 -q "$data"
if [ ! -f "$DIR/parts/part-0.parquet" ]; then
    python3 - "$data" "$DIR/parts" "$FILES" <<'PY'
import sys
import pyarrow.parquet as pq
src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = pq.read_table(src)
per = -(-t.num_rows // n)
for i in range(n):
    pq.write_table(t.slice(i * per, per), f"{out}/part-{i}.parquet")
PY
fi

printf 'workers\twall_s\tcoord_rss_MiB\tworker_rss_MiB\trows\tclasses\tunique_rows\n'
for w in $WORKERS; do
    pids=() urls=() times=()
    for i in $(seq 1 "$w"); do
        t="$DIR/time-worker-$w-$i.txt"
        fifo="$DIR/worker-$w-$i.out"
        rm -f "$fifo"
        /usr/bin/time -v "$KANON" -q worker --listen 127.0.0.1:0 >"$fifo" 2>"$t" &
        pids+=("$!") times+=("$t")
        until grep -q listening "$fifo" 2>/dev/null; do sleep 0.1; done
        urls+=("$(sed -n 's/^kanon worker listening on //p' "$fifo")")
    done
    j="$DIR/inspect-$w.json" t="$DIR/time-coordinator-$w.txt"
    args=()
    [ "$w" -gt 0 ] && args=(--workers "$(IFS=,; echo "${urls[*]}")")
    /usr/bin/time -v "$KANON" -q inspect "$DIR/parts" --qi "$QIS" --msu-size 0 --json \
        "${args[@]}" >"$j" 2>"$t"
    for p in "${pids[@]}"; do pkill -TERM -P "$p"; done
    wait
    python3 - "$w" "$j" "$t" "${times[@]}" <<'PY'
import json, re, sys
w, j, t, workers = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def tv(text, key):
    return re.search(re.escape(key) + r":\s*(\S+)", text).group(1)
def rss(path):
    return str(int(tv(open(path).read(), "Maximum resident set size (kbytes)")) // 1024)
text = open(t).read()
wall = tv(text, "Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")
wall_s = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall)))
r = json.load(open(j))
print("\t".join([w, f"{wall_s:.2f}", rss(t), ",".join(rss(p) for p in workers) or "-",
                 str(r["rows"]), str(r["risk"]["classes"]), str(r["risk"]["unique_rows"])]))
PY
done
