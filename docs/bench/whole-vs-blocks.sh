#!/usr/bin/env bash
# Issue 19: whole-table vs block-wise Mondrian and KACA, whole-table
# hierarchy-bound Mondrian, and the cheapest-first cover (the bundled job:
# blocks of 10,000 rows beyond 100,000 rows, or whole), on generated
# Adult-like Parquet (8 QIs, the salary class, 10 extra columns), k = 10,
# against a plain DataFusion Parquet copy of the same file in the same run
# (`kanon sql "COPY (SELECT * FROM t) TO ..."`: read every column, write
# zstd Parquet, no anonymisation: the physical floor). Release build with
# `--features sql`; one run each; wall time and peak RSS from /usr/bin/time,
# phases from --metrics-json.
#
#   cargo build --release -p kanon --features sql
#   docs/bench/whole-vs-blocks.sh [DIR] [ROWS...]        (default 1M 10M)
#   RUNS="mondrian-whole kaca-blocks" docs/bench/whole-vs-blocks.sh DIR 10000000
#   CORES=0 docs/bench/whole-vs-blocks.sh ...            (pinned to one core)
#   PLAIN=1 docs/bench/whole-vs-blocks.sh ...            (no --metrics-json:
#       the run a scheduled job makes, without the risk measures the JSON
#       adds; phases and loss read from the printed summary)
#
# Prints one tab-separated line per run:
# run rows wall_s peak_rss_MiB pass1_s algorithm_s pass2_s ncp granularity classes
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR="${1:-/tmp/kanon-whole}"
shift || true
ROWS=("${@:-1000000 10000000}")
read -r -a ROWS <<<"${ROWS[*]}"
RUNS="${RUNS:-copy mondrian-whole mondrian-blocks kaca-blocks kaca-whole hierarchy-whole cover-blocks}"
KANON="${KANON:-${CARGO_TARGET_DIR:-target}/release/kanon}"
PIN=()
[ -n "${CORES:-}" ] && PIN=(taskset -c "$CORES")
mkdir -p "$DIR"

job_of() {
    case "$1" in
        mondrian-whole) echo "configs/adult.toml --algorithm mondrian --set algorithm.block_size=0" ;;
        mondrian-blocks) echo "configs/adult.toml --algorithm mondrian --set algorithm.block_size=10000" ;;
        hierarchy-whole) echo "configs/adult.toml --algorithm mondrian-hierarchy" ;;
        cover-blocks) echo "configs/adult.toml" ;;
        cover-whole) echo "configs/adult.toml --set algorithm.block_size=0" ;;
        kaca-blocks) echo "configs/adult-kaca.toml" ;;
        kaca-whole) echo "configs/adult-kaca.toml --set algorithm.block_size=0" ;;
        *) echo "unknown run $1" >&2; exit 2 ;;
    esac
}

printf 'run\trows\twall_s\tpeak_rss_MiB\tpass1_s\talgorithm_s\tpass2_s\tncp\tgranularity\tclasses\n'
for n in "${ROWS[@]}"; do
    data="$DIR/adult-$n.parquet"
    [ -f "$data" ] || "$KANON" generate --like adult --rows "$n" --extra-columns 10 --seed 1 -q "$data"
    for r in $RUNS; do
        out="$DIR/out-$r-$n.parquet"
        m="$DIR/m-$r-$n.json"
        t="$DIR/time-$r-$n.txt"
        rm -rf "$out" "$m" "$m.txt"
        if [ "$r" = copy ]; then
            "${PIN[@]}" /usr/bin/time -v "$KANON" sql -t "t=$data" \
                "COPY (SELECT * FROM t) TO '$out' STORED AS PARQUET" >/dev/null 2>"$t"
        else
            if [ -n "${PLAIN:-}" ]; then
                # shellcheck disable=SC2046
                "${PIN[@]}" /usr/bin/time -v "$KANON" anonymize -c $(job_of "$r") \
                    --set columns.unlisted=insensitive --weaken-privacy --input "$data" -o "$out" \
                    --overwrite >"$m.txt" 2>"$t"
            else
                # shellcheck disable=SC2046
                "${PIN[@]}" /usr/bin/time -v "$KANON" anonymize -q -c $(job_of "$r") \
                    --set columns.unlisted=insensitive --weaken-privacy --input "$data" -o "$out" \
                    --overwrite --metrics-json "$m" 2>"$t"
            fi
        fi
        python3 - "$r" "$n" "$m" "$t" <<'EOF'
import json, os, re, sys
r, n, m, t = sys.argv[1], int(sys.argv[2]), sys.argv[3], open(sys.argv[4]).read()
def tv(key):
    return re.search(re.escape(key) + r":\s*(\S+)", t).group(1)
wall = tv("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")
wall_s = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall)))
rss = int(tv("Maximum resident set size (kbytes)")) // 1024
if os.path.exists(m + ".txt"):
    out = open(m + ".txt").read()
    p = re.search(r"pass 1 ([0-9.]+), algorithm ([0-9.]+), verify ([0-9.]+), pass 2 ([0-9.]+)", out)
    loss = re.search(r"NCP ([0-9.]+), granularity ([0-9.]+)", out)
    classes = re.search(r"classes\s+(\d+)", out)
    cols = [f"{float(p.group(1)):.1f}", f"{float(p.group(2)):.1f}", f"{float(p.group(4)):.1f}",
            loss.group(1), loss.group(2), classes.group(1)]
elif os.path.exists(m):
    j = json.load(open(m))
    ts, rep = j["timings_s"], j["report"]
    cols = [f"{ts['pass1_read_encode']:.1f}", f"{ts['algorithm']:.1f}",
            f"{ts['pass2_recode_verify_write']:.1f}", f"{rep['ncp']:.5f}",
            f"{rep['granularity']:.5f}", rep["classes"]]
else:
    cols = ["-"] * 6
print("\t".join(str(x) for x in [r, n, f"{wall_s:.1f}", rss] + cols), flush=True)
EOF
        rm -rf "$out"
    done
done
