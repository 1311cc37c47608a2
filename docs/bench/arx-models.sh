#!/bin/sh
# ARX 3.9.2 vs kanon on Adult under five privacy models (beta-likeness,
# delta-disclosure, k-map, average-risk, population-uniqueness): the ARX side
# is docs/bench/ArxModels.java (settings in its header), the kanon side
# configs/adult-<model>.toml.
#
#   docs/bench/arx-models.sh ARX_BUILD_DIR DATA_DIR OUT_DIR [WARM] [MODEL...]
#
# ARX_BUILD_DIR  output directory of the peers kit's arx/build.sh (holds
#                arx-core.jar and classpath.txt)
# DATA_DIR       ARX's Adult: adult.csv and adult_hierarchy_<qi>.csv (';')
# OUT_DIR        releases, logs and metrics are written here
# WARM           warm ARX runs per model in one JVM (default 3; median reported)
# MODEL          default: all five
# env: KANON (default target/release/kanon; run from the repository root),
#      SKIP_KANON=1 to run ARX only, JAVA_OPTS (default -Xmx6g),
#      ARX_GLOBAL_SUPP (suppression limit when ARX falls back to / is asked
#      for global Flash; default 0, the ARX GUI default), ARX_ALG (local|global,
#      default local).
# Per model: OUT_DIR/arx-<model>.csv (ARX release, ';'), OUT_DIR/arx-<model>.txt
# (ARX's summary line: median warm anonymize ms, suppressed rows, granularity,
# derived k, ...), OUT_DIR/kanon-<model>.parquet and .json (metrics, timings).
set -eu
[ $# -ge 3 ] || { sed -n '2,22p' "$0"; exit 2; }
arx=$1; data=$2; out=$3; shift 3
warm=${1:-3}; [ $# -gt 0 ] && shift
models=${*:-beta-likeness delta-disclosure k-map average-risk population-uniqueness}
kanon=${KANON:-target/release/kanon}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/classes"

arx=$(cd "$arx" && pwd); out=$(cd "$out" && pwd); data=$(cd "$data" && pwd)
# classpath.txt holds paths relative to the build directory: make them absolute
cp="$arx/arx-core.jar:$(tr ':' '\n' < "$arx/classpath.txt" | sed "/^\//!s|^|$arx/|" | paste -sd: -)"
javac -nowarn -encoding UTF-8 -cp "$cp" -d "$out/classes" "$here/ArxModels.java"

for m in $models; do
    echo "== $m"
    java ${JAVA_OPTS:--Xmx6g} -cp "$cp:$out/classes" ArxModels "$m" "$warm" "$data" \
        "$out/arx-$m.csv" "${ARX_ALG:-local}" | tee "$out/arx-$m.txt"
    if [ "${SKIP_KANON:-0}" != 1 ]; then
        /usr/bin/time -f "kanon $m wall %e s, peak RSS %M KB" \
            "$kanon" anonymize --config "configs/adult-$m.toml" -o "$out/kanon-$m.parquet" \
            --overwrite --metrics-json "$out/kanon-$m.json" > "$out/kanon-$m.log" 2>&1 \
            || { echo "kanon $m failed (see $out/kanon-$m.log)"; continue; }
        tail -n 1 "$out/kanon-$m.log"
    fi
done
