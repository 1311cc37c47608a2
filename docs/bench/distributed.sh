#!/usr/bin/env bash
# Issue 18: a block-wise run on 0 (this process alone), 1 and 2 `kanon
# worker` processes on this machine, on generated Adult-like Parquet (8 QIs,
# the salary class, 10 extra columns), k = 10, Mondrian in blocks of
# BLOCK rows (default 10000). Release build with `--features distributed`;
# one run each; wall time and peak RSS (coordinator and every worker) from
# /usr/bin/time, stages from --metrics-json.
#
#   cargo build --release -p kanon --features distributed
#   docs/bench/distributed.sh [DIR] [ROWS]        (default /tmp/kanon-dist 10000000)
#   WORKERS="0 1 2" ALGORITHM=kaca BLOCK=10000 docs/bench/distributed.sh ...
#   ALGORITHM=l-clustering EXTRA="--set privacy.l=2" docs/bench/distributed.sh ...
#
# Prints one tab-separated line per run:
# workers wall_s coord_rss_MiB pass1_s cuts_s ship_s distributed_s union_s
#   algorithm_s pass2_s MiB_to_workers MiB_from_workers worker_rss_MiB... classes ncp
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR="${1:-/tmp/kanon-dist}"
ROWS="${2:-10000000}"
WORKERS="${WORKERS:-0 1 2}"
ALGORITHM="${ALGORITHM:-mondrian}"
BLOCK="${BLOCK:-10000}"
KANON="${KANON:-${CARGO_TARGET_DIR:-target}/release/kanon}"
mkdir -p "$DIR"
data="$DIR/adult-$ROWS.parquet"
[ -f "$data" ] || "$KANON" generate --like adult --rows "$ROWS" --extra-columns 10 --seed 1 -q "$data"

printf 'workers\twall_s\tcoord_rss_MiB\tpass1_s\tcuts_s\tship_s\tdistributed_s\tunion_s\talgorithm_s\tpass2_s\tMiB_to_workers\tMiB_from_workers\tworker_rss_MiB\tclasses\tncp\n'
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
    out="$DIR/out-$w.parquet" m="$DIR/m-$w.json" t="$DIR/time-coordinator-$w.txt"
    rm -rf "$out" "$m"
    args=()
    [ "$w" -gt 0 ] && args=(--workers "$(IFS=,; echo "${urls[*]}")")
    /usr/bin/time -v "$KANON" anonymize -q -c configs/adult.toml --algorithm "$ALGORITHM" \
        --set algorithm.block_size="$BLOCK" --set columns.unlisted=insensitive ${EXTRA:-} \
        --input "$data" -o "$out" --overwrite --metrics-json "$m" "${args[@]}" 2>"$t"
    # The workers are the children of /usr/bin/time, which then reports them.
    for p in "${pids[@]}"; do pkill -TERM -P "$p"; done
    wait
    python3 - "$w" "$m" "$t" "${times[@]}" <<'PY'
import json, re, sys
w, m, t, workers = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def tv(text, key):
    return re.search(re.escape(key) + r":\s*(\S+)", text).group(1)
def rss(path):
    return str(int(tv(open(path).read(), "Maximum resident set size (kbytes)")) // 1024)
text = open(t).read()
wall = tv(text, "Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")
wall_s = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall)))
j = json.load(open(m))
ts, rep = j["timings_s"], j["report"]
p = j["details"]["partitioned"]
e = p.get("executor") or {}
mib = lambda b: f"{b / 2**20:.1f}" if b is not None else "-"
cols = [w, f"{wall_s:.1f}", rss(t), f"{ts['pass1_read_encode']:.1f}", f"{p['partition_s']:.1f}",
        f"{e['encode_s']:.1f}" if e else "-", f"{e['distributed_s']:.1f}" if e else f"{p['blocks_s']:.1f}",
        f"{p['union_s']:.2f}", f"{ts['algorithm']:.1f}", f"{ts['pass2_recode_verify_write']:.1f}",
        mib(e.get("bytes_to_workers")), mib(e.get("bytes_from_workers")),
        ",".join(rss(x) for x in workers) or "-", rep["classes"], f"{rep['ncp']:.5f}"]
print("\t".join(str(c) for c in cols), flush=True)
PY
    sha256sum "$out" | cut -c1-16 >&2
    rm -rf "$out"
done
