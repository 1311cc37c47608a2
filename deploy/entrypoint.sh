#!/bin/sh
# kanon-job: run one scheduled `kanon anonymize` and exit with kanon's own
# exit code (deploy/README.md lists them), logging one JSON object per line.
#
# Settings, from the environment:
#   KANON_JOB          the job file (default /etc/kanon/job.toml, the ConfigMap)
#   KANON_OUTPUT       release path or s3:// URL; strftime fields are filled
#                      from the run's UTC date, e.g.
#                      s3://lake/adult/release_date=%Y-%m-%d/ (default: the
#                      job file's output.path)
#   KANON_PARTITION    a Delta release's partition as COLUMN=VALUE[,...],
#                      strftime fields filled, e.g. release_date=%Y-%m-%d
#                      (with KANON_OUTPUT_FORMAT=delta, KANON_OUTPUT_MODE=append)
#   KANON_METRICS_JSON also write the metrics JSON here (strftime fields too)
#   KANON_TIMEOUT      stop after this many seconds (exit 124, nothing written)
#   KANON_BIN          the kanon binary (default: kanon on PATH)
#   KANON_SECTION_KEY  any job setting, read by kanon itself (e.g.
#                      KANON_STORAGE_ENDPOINT); AWS_* credentials likewise
# Arguments after the image name are passed to `kanon anonymize` unchanged.
set -eu

job="${KANON_JOB:-/etc/kanon/job.toml}"
bin="${KANON_BIN:-kanon}"

if [ ! -r "$job" ]; then
    echo "kanon-job: the job file $job is not readable; mount it (the ConfigMap) or set KANON_JOB" >&2
    exit 2
fi
if ! command -v "$bin" >/dev/null 2>&1; then
    echo "kanon-job: the kanon binary ($bin) is not on PATH; set KANON_BIN" >&2
    exit 2
fi

dated() {
    date -u +"$1"
}

set -- anonymize --config "$job" --log-format json "$@"
if [ -n "${KANON_OUTPUT:-}" ]; then
    set -- "$@" --output "$(dated "$KANON_OUTPUT")"
fi
if [ -n "${KANON_PARTITION:-}" ]; then
    partitions="$(dated "$KANON_PARTITION")"
    old_ifs="$IFS"
    IFS=,
    for p in $partitions; do
        case "$p" in
            *=*) set -- "$@" --set "output.partition.${p%%=*}=\"${p#*=}\"" ;;
            *)
                echo "kanon-job: KANON_PARTITION part '$p' is not COLUMN=VALUE" >&2
                exit 2
                ;;
        esac
    done
    IFS="$old_ifs"
fi
if [ -n "${KANON_METRICS_JSON:-}" ]; then
    set -- "$@" --metrics-json "$(dated "$KANON_METRICS_JSON")"
fi
if [ -n "${KANON_TIMEOUT:-}" ]; then
    set -- "$@" --timeout "$KANON_TIMEOUT"
fi

exec "$bin" "$@"
