#!/bin/sh
# ARX 3.9.2's local recoding (the ARX GUI's "local transformation") on Adult
# and on the ARX team's benchmark sets creditcard and mach2019, one
# (set, variant, k) per call: the ARX side of kanon's granularity comparison.
# The ARX program is docs/bench/ArxLocal.java (settings and the supp2 variant
# in its header); this script compiles it, runs it, scores the release with
# the peers kit's granularity.py and checks it independently of ARX.
#
#   docs/bench/arx-local.sh ARX_BUILD_DIR DATA_CSV HIER_DIR VARIANT K OUT_DIR [WARM]
#
# ARX_BUILD_DIR  output directory of the peers kit's arx/build.sh (ARX 3.9.2's
#                core library built from arx-deidentifier/arx: arx-core.jar
#                and classpath.txt)
# DATA_CSV       adult.csv (ARX's Adult), or creditcard_int.csv / mach2019_int.csv
#                from arx-deidentifier/genetic-benchmark (data/); ';'-separated
# HIER_DIR       directory of the hierarchies <name>_hierarchy_<qi>.csv, <name>
#                being DATA_CSV's file name without .csv (Adult: next to
#                adult.csv; genetic-benchmark: hierarchies/)
# VARIANT        k | l2 | supp2 | supp2stop (see ArxLocal.java)
# K              k
# OUT_DIR        OUT_DIR/<set>-<variant>-k<K>.csv (ARX release, ';'),
#                OUT_DIR/arx-raw.csv (ArxLocal's line per JVM: all timings,
#                ARX's own statistics), OUT_DIR/results.csv (set,variant,k,
#                arx_granularity (granularity.py), warm_ms_min,warm_ms_median,
#                cold_ms, suppressed_rows and classes (ARX's own counts of the
#                release: suppressed records, equivalence classes without them)),
#                OUT_DIR/checks.csv (the checks below)
# WARM           warm runs after the cold one in the same JVM (default 2; 1
#                when the cold run takes more than 60 s)
# Set by DATA_CSV's name (override with env QIS, SENSITIVE):
#   adult      age,sex,race,marital-status,education,native-country,workclass,
#              occupation; sensitive salary-class
#   creditcard LIMIT_BAL,SEX,EDUCATION,MARRIAGE,AGE,PAY_0,BILL_AMT1;
#              sensitive default-payment-next-month
#   mach2019   age,familysize,gender,married,race,religion; sensitive Q1A
# env: GRANULARITY (required: the peers kit's granularity.py; needs pandas),
#      NUMERIC (its --numeric, default none: every QI, Adult's age too, is scored
#      through its hierarchy), JAVA_OPTS (default -Xmx6g), ARX_RUN_LIMIT_S (one
#      run's time limit, default 900: the JVM stops and results.csv gets a
#      timeout line), ARX_SLOW_MS (default 60000).
# Checks of the release (checks.csv), independent of ARX: row count equals the
# input's; every QI cell is '*' or a label of the hierarchy that covers the
# input row's value (ARX keeps the row order); every combination of QI values
# other than all-'*' occurs >= K times; and the number of those classes with
# < 2 distinct SENSITIVE values (a violation only for l2), and the distinct
# SENSITIVE values among the all-'*' rows (ARX exempts suppressed rows from
# l-diversity but publishes their sensitive values). Rows with '*' in
# every QI are ARX's suppressed rows, and on Adult (root '*' in every
# hierarchy) also rows generalized to the root of every QI: the release cannot
# tell them apart (same granularity), ARX's counts in results.csv can.
# Prints one line: set, variant, k, granularity, warm time, suppressed rows.
set -eu
[ $# -ge 6 ] || { sed -n '2,51p' "$0"; exit 2; }
arx=$1; data=$2; hier=$3; variant=$4; k=$5; out=$6
warm=${7:-2}
: "${GRANULARITY:?set GRANULARITY to the peers kit's granularity.py}"
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/classes"
arx=$(cd "$arx" && pwd); out=$(cd "$out" && pwd); hier=$(cd "$hier" && pwd)
data=$(cd "$(dirname "$data")" && pwd)/$(basename "$data")

name=$(basename "$data" .csv)
case $name in
adult)          set=adult
                dq=age,sex,race,marital-status,education,native-country,workclass,occupation
                ds=salary-class ;;
creditcard_int) set=creditcard
                dq=LIMIT_BAL,SEX,EDUCATION,MARRIAGE,AGE,PAY_0,BILL_AMT1
                ds=default-payment-next-month ;;
mach2019_int)   set=mach2019
                dq=age,familysize,gender,married,race,religion
                ds=Q1A ;;
*)              set=$name; dq=; ds= ;;
esac
qis=${QIS:-$dq}; sens=${SENSITIVE:-$ds}
[ -n "$qis" ] && [ -n "$sens" ] || { echo "unknown set $name: set QIS and SENSITIVE" >&2; exit 2; }
prefix=${name}_hierarchy_
release=$out/$set-$variant-k$k.csv

# classpath.txt holds paths relative to the build directory: make them absolute
cp="$arx/arx-core.jar:$(tr ':' '\n' < "$arx/classpath.txt" | sed "/^\//!s|^|$arx/|" | paste -sd: -)"
if [ ! "$out/classes/ArxLocal.class" -nt "$here/ArxLocal.java" ]; then
    javac -nowarn -encoding UTF-8 -cp "$cp" -d "$out/classes" "$here/ArxLocal.java"
fi

[ -s "$out/results.csv" ] || echo "set,variant,k,arx_granularity,warm_ms_min,warm_ms_median,cold_ms,suppressed_rows,classes" > "$out/results.csv"
[ -s "$out/checks.csv" ] || echo "set,variant,k,rows_in,rows_out,all_star_rows,classes_excl_all_star,min_class,classes_below_k,classes_below_l2,rows_in_classes_below_l2,all_star_sensitive_distinct,cells_not_covering_input,k_ok,l2_ok" > "$out/checks.csv"

rm -f "$release"
status=0
line=$(java ${JAVA_OPTS:--Xmx6g} -cp "$cp:$out/classes" ArxLocal local "$variant" "$k" "$warm" "$data" "$hier" \
       "$prefix" "$qis" "$sens" "$out/arx-raw.csv" "$release") || status=$?
echo "$line" > "$out/$set-$variant-k$k.arx.txt"
if [ $status -eq 124 ]; then
    echo "$set,$variant,$k,timeout,,,,," >> "$out/results.csv"
    echo "set=$set variant=$variant k=$k TIMEOUT (one ARX run > ${ARX_RUN_LIMIT_S:-900} s)"
    exit 0
elif [ $status -ne 0 ]; then
    echo "ArxLocal failed ($status) for $set $variant k=$k" >&2; exit $status
fi
kv() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

gran=$(python3 "$GRANULARITY" "$data" "$release" "$qis" --numeric "${NUMERIC:-}" --hier-dir "$hier" \
       --hier-prefix "$prefix" | python3 -c 'import json,sys; print(json.load(sys.stdin)["granularity"])')

check=$(python3 - "$data" "$release" "$hier" "$prefix" "$qis" "$sens" "$k" "$variant" <<'PY'
import sys
import pandas as pd
data, release, hier, prefix, qis, sens, k, variant = sys.argv[1:]
qis, k = qis.split(","), int(k)
read = lambda p: pd.read_csv(p, sep=";", dtype=str, keep_default_na=False)
orig, rel = read(data), read(release)
bad = 0
if len(orig) == len(rel):
    for q in qis:
        h = pd.read_csv(f"{hier}/{prefix}{q}.csv", sep=";", header=None, dtype=str, keep_default_na=False)
        cover = {}
        for row in h.itertuples(index=False):
            for lab in row:
                cover.setdefault(lab, set()).add(row[0])
        bad += sum(1 for o, r in zip(orig[q], rel[q]) if r != "*" and o not in cover.get(r, ()))
else:
    bad = -1
supp = (rel[qis] == "*").all(axis=1)
kept = rel[~supp]
g = kept.groupby(qis, sort=False)
sizes = g.size()
div = g[sens].nunique()
below_k = int((sizes < k).sum())
below_l = int((div < 2).sum())
rows_below_l = int(sizes[div < 2].sum())
star_div = int(rel[supp][sens].nunique())
k_ok = below_k == 0 and bad == 0
l_ok = below_l == 0 if variant == "l2" else ""
print(f"{len(orig)},{len(rel)},{int(supp.sum())},{len(sizes)},{int(sizes.min()) if len(sizes) else 0},"
      f"{below_k},{below_l},{rows_below_l},{star_div},{bad},{k_ok},{l_ok}")
PY
)
echo "$set,$variant,$k,$check" >> "$out/checks.csv"
supp=$(kv arx_suppressed); classes=$(kv arx_classes)
echo "$set,$variant,$k,$gran,$(kv warm_ms_min),$(kv warm_ms_median),$(kv cold_ms),$supp,$classes" >> "$out/results.csv"
echo "set=$set variant=$variant k=$k arx_granularity=$gran warm_ms_median=$(kv warm_ms_median)" \
     "warm_ms_min=$(kv warm_ms_min) cold_ms=$(kv cold_ms) suppressed_rows=$supp classes=$classes" \
     "k_ok=$(echo "$check" | cut -d, -f11) l2_ok=$(echo "$check" | cut -d, -f12)"
