#!/bin/sh
# ARX 3.9.2 vs kanon on Adult under five privacy models (beta-likeness,
# delta-disclosure, k-map, average-risk, population-uniqueness) and three
# transformations (top-bottom-coding, microaggregation, cell-suppression): the
# ARX side is docs/bench/ArxModels.java (settings in its header), the kanon
# side configs/adult-<model>.toml.
#
#   docs/bench/arx-models.sh ARX_BUILD_DIR DATA_DIR OUT_DIR [WARM] [MODEL...]
#
# ARX_BUILD_DIR  output directory of the peers kit's arx/build.sh (holds
#                arx-core.jar and classpath.txt)
# DATA_DIR       ARX's Adult: adult.csv and adult_hierarchy_<qi>.csv (';')
# OUT_DIR        releases, logs and metrics are written here
# WARM           warm ARX runs per model in one JVM (default 3; median reported)
# MODEL          default: all eight
# env: KANON (default target/release/kanon; run from the repository root),
#      SKIP_KANON=1 to run ARX only, JAVA_OPTS (default -Xmx6g),
#      ARX_GLOBAL_SUPP (suppression limit when ARX falls back to / is asked
#      for global Flash; default 0, the ARX GUI default; cell-suppression: 0.02),
#      ARX_ALG (local|global, default local; cell-suppression is always global),
#      GRANULARITY (the peers kit's granularity.py: when set, both releases of a
#      transformation are scored into OUT_DIR/score-<model>.txt).
# Per model: OUT_DIR/arx-<model>.csv (ARX release, ';'), OUT_DIR/arx-<model>.txt
# (ARX's summary line: median warm anonymize ms, suppressed rows, granularity,
# derived k, ...), OUT_DIR/kanon-<model>.parquet and .json (metrics, timings),
# OUT_DIR/kanon-<model>.verify (kanon verify on the release). microaggregation
# also runs kanon on a copy of the job with a pass-through row_id
# (OUT_DIR/id/) to match its reordered release to the input for the age error.
set -eu
[ $# -ge 3 ] || { sed -n '2,33p' "$0"; exit 2; }
arx=$1; data=$2; out=$3; shift 3
warm=${1:-3}; [ $# -gt 0 ] && shift
models=${*:-beta-likeness delta-disclosure k-map average-risk population-uniqueness top-bottom-coding microaggregation cell-suppression}
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
        "$kanon" verify --config "configs/adult-$m.toml" --input "$out/kanon-$m.parquet" \
            > "$out/kanon-$m.verify" 2>&1 && echo "kanon verify $m: ok" \
            || echo "kanon verify $m FAILED (see $out/kanon-$m.verify)"
        if [ "$m" = microaggregation ]; then
            idcfg=$(python3 "$here/arx_models_check.py" --with-id "configs/adult-$m.toml" "$out/id")
            "$kanon" anonymize --config "$idcfg" --overwrite --metrics-json "$out/id/kanon-$m-id.json" \
                > "$out/id/kanon-$m-id.log" 2>&1 || echo "kanon $m with row_id failed (see $out/id/kanon-$m-id.log)"
        fi
    fi
    if [ -n "${GRANULARITY:-}" ]; then
        qis=age,sex,race,marital-status,education,native-country,workclass,occupation
        check="python3 $here/arx_models_check.py"
        score() { python3 "$GRANULARITY" "$data/adult.csv" "$1" "$2" --numeric age --hier-dir "$data"; }
        for tool in arx kanon; do
            rel=$out/$tool-$m.csv; [ $tool = kanon ] && rel=$out/kanon-$m.parquet
            [ -f "$rel" ] || continue
            case $m in
            top-bottom-coding)
                $check "$rel" $m --original "$data/adult.csv" --normalized "$out/$tool-$m.closed.csv"
                echo "$tool granularity $(score "$out/$tool-$m.closed.csv" $qis)" ;;
            microaggregation)
                [ $tool = kanon ] && rel=$out/id/adult-microaggregation-id.parquet
                $check "$rel" $m --original "$data/adult.csv"
                echo "$tool granularity of the 7 other QIs $(score "$rel" "${qis#age,}")" ;;
            cell-suppression)
                $check "$rel" $m
                echo "$tool granularity $(score "$rel" $qis)" ;;
            *)
                echo "$tool granularity $(score "$rel" $qis)" ;;
            esac
        done > "$out/score-$m.txt"
        cat "$out/score-$m.txt"
    fi
done
