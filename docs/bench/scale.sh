#!/usr/bin/env bash
# Issue 10: kanon anonymize on Adult-like Parquet of 1M..100M rows (8 QIs,
# 10 extra columns), release build, one run each, peak RSS from
# /usr/bin/time -v and phase times from --metrics-json.
#
#   docs/bench/scale.sh [DIR] [ROWS...]       (default: /tmp/kanon-scale, 1M 2M 5M 10M)
#   ALGORITHMS="kaca mondrian sbc" docs/bench/scale.sh /tmp/kanon-scale 10000000
#
# Prints one tab-separated line per run:
# algorithm rows wall_s user_s sys_s peak_rss_MiB pass1_s algorithm_s
# partition_s blocks_s blocks block_rows pass2_s rows_per_s ncp
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR="${1:-/tmp/kanon-scale}"
shift || true
ROWS=("${@:-1000000 2000000 5000000 10000000}")
read -r -a ROWS <<<"${ROWS[*]}"
ALGORITHMS="${ALGORITHMS:-kaca}"
mkdir -p "$DIR"
cargo build --release -q -p kanon
KANON=${CARGO_TARGET_DIR:-target}/release/kanon

config_of() {
    case "$1" in
        kaca) echo configs/adult-kaca.toml ;;
        mondrian) echo configs/adult.toml ;;
        sbc) echo configs/adult.toml ;;
        *) echo "unknown algorithm $1" >&2; exit 2 ;;
    esac
}

printf 'algorithm\trows\twall_s\tuser_s\tsys_s\tpeak_rss_MiB\tpass1_s\talgorithm_s\tpartition_s\tblocks_s\tblocks\tblock_rows\tpass2_s\trows_per_s\tncp\n'
for n in "${ROWS[@]}"; do
    data="$DIR/adult-$n.parquet"
    [ -f "$data" ] || "$KANON" generate --like adult --rows "$n" --extra-columns 10 --seed 1 -q "$data"
    for a in $ALGORITHMS; do
        out="$DIR/out-$a-$n.parquet"
        m="$DIR/m-$a-$n.json"
        t="$DIR/time-$a-$n.txt"
        /usr/bin/time -v "$KANON" anonymize -q -c "$(config_of "$a")" --algorithm "$a" \
            --input "$data" -o "$out" --overwrite --metrics-json "$m" 2>"$t"
        python3 - "$a" "$n" "$m" "$t" <<'EOF'
import json, re, sys
a, n, m, t = sys.argv[1], int(sys.argv[2]), json.load(open(sys.argv[3])), open(sys.argv[4]).read()
def tv(key):
    return re.search(re.escape(key) + r":\s*(\S+)", t).group(1)
wall = tv("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")
wall_s = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall)))
ts = m["timings_s"]
p = (m.get("details") or {}).get("partitioned") or {}
print("\t".join(str(x) for x in [
    a, n, f"{wall_s:.1f}", tv("User time (seconds)"), tv("System time (seconds)"),
    int(tv("Maximum resident set size (kbytes)")) // 1024,
    f"{ts['pass1_read_encode']:.1f}", f"{ts['algorithm']:.1f}",
    f"{p.get('partition_s', 0):.1f}", f"{p.get('blocks_s', 0):.1f}",
    p.get("blocks", 1), f"{p.get('block_rows_min', n)}-{p.get('block_rows_max', n)}",
    f"{ts['pass2_recode_verify_write']:.1f}", f"{n / wall_s:,.0f}", f"{m['report']['ncp']:.4f}",
]))
EOF
        rm -f "$out"
    done
done
