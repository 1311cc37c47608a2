#!/usr/bin/env bash
# Issue 35: `kanon anonymize --workers` with a full-domain algorithm
# (incognito, the Adult hierarchies, k = 10) on generated Adult-like rows
# (8 QIs, the salary class, EXTRA extra columns) in FILES Parquet files on
# a local S3 server (moto, one process): the workers read the input and
# write the release, the coordinator plans from the workers' counts and
# commits. Runs with 1 and 2 `kanon worker` processes on this machine
# (WORKERS="1 2"; 0 = one process reading and writing alone), each with
# its own access key so that the server's log tells the processes apart.
# Release build with `--features distributed`; one run each.
#
#   cargo build --release -p kanon --features distributed
#   docs/bench/scale-out.sh [DIR] [ROWS] [FILES]   (default /tmp/kanon-scale 100000000 16)
#
# Prints one tab-separated line per run and process: workers, process,
# wall s, CPU s (user + sys), peak RSS MiB, bytes read from and written to
# the store (request and response bodies, from the server's log), and for
# the coordinator its phases (census, plan, parts, total) from
# --metrics-json.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"
DIR="${1:-/tmp/kanon-scale}"
ROWS="${2:-100000000}"
FILES="${3:-16}"
EXTRA="${EXTRA:-4}"
WORKERS="${WORKERS:-1 2}"
KANON="${KANON:-${CARGO_TARGET_DIR:-target}/release/kanon}"
mkdir -p "$DIR/parts"

# The input, generated file by file (each FILES-th of the rows, its own seed).
per=$(( (ROWS + FILES - 1) / FILES ))
for i in $(seq 0 $((FILES - 1))); do
    f="$DIR/parts/part-$(printf %03d "$i").parquet"
    [ -f "$f" ] || "$KANON" generate --like adult --rows "$per" --extra-columns "$EXTRA" --seed "$((i + 1))" -q "$f"
done

# The S3 server, logging every request's key, method, path and bytes.
cat >"$DIR/moto_logged.py" <<'PY'
import sys
from moto.moto_server import werkzeug_app
handle = werkzeug_app.DomainDispatcherApplication.__call__
log = open(sys.argv[2], "a", buffering=1)
def logged(self, environ, start_response):
    auth = environ.get("HTTP_AUTHORIZATION", "")
    key = auth.split("Credential=")[1].split("/")[0] if "Credential=" in auth else "-"
    sent = int(environ.get("CONTENT_LENGTH") or 0)
    out = 0
    for chunk in handle(self, environ, start_response):
        out += len(chunk)
        yield chunk
    log.write("%s %s %s %d %d\n" % (key, environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), sent, out))
werkzeug_app.DomainDispatcherApplication.__call__ = logged
from moto.server import main
main(["-H", "127.0.0.1", "-p", sys.argv[1]])
PY
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log="$DIR/requests.log"
: >"$log"
python3 "$DIR/moto_logged.py" "$port" "$log" >/dev/null 2>&1 &
moto=$!
trap 'kill $moto 2>/dev/null || true' EXIT
until curl -s "http://127.0.0.1:$port" >/dev/null; do sleep 0.2; done
export AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
export KANON_STORAGE_ENDPOINT="http://127.0.0.1:$port" KANON_STORAGE_ALLOW_HTTP=true
python3 - "$port" "$DIR/parts" <<'PY'
import sys, os, boto3
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{sys.argv[1]}", aws_access_key_id="AKIABENCHUPLOAD00000",
                  aws_secret_access_key="bench", region_name="us-east-1")
s3.create_bucket(Bucket="lake")
for name in sorted(os.listdir(sys.argv[2])):
    s3.upload_file(os.path.join(sys.argv[2], name), "lake", f"input/{name}")
PY

# The job: the bundled Adult job with incognito.
sed -e 's/^name = "cover"/name = "incognito"/' -e '/^windows/d' \
    -e "s#\"data/adult/#\"$ROOT/data/adult/#" configs/adult.toml >"$DIR/job.toml"
# The generated extra columns are published as they are.
printf '\n[columns]\nunlisted = "insensitive"\n' >>"$DIR/job.toml"

printf 'workers\tprocess\twall_s\tcpu_s\trss_MiB\tread_MB\twritten_MB\tphases\n'
for w in $WORKERS; do
    pids=() urls=() names=()
    for i in $(seq 1 "$w"); do
        out="$DIR/worker-$w-$i.out"
        rm -f "$out"
        AWS_ACCESS_KEY_ID="AKIABENCHWORKER0000$i" /usr/bin/time -v "$KANON" -q worker --listen 127.0.0.1:0 \
            >"$out" 2>"$DIR/time-worker-$w-$i.txt" &
        pids+=("$!") names+=("worker-$w-$i")
        until grep -q listening "$out" 2>/dev/null; do sleep 0.1; done
        urls+=("$(sed -n 's/^kanon worker listening on //p' "$out")")
    done
    # One process alone writes a directory of parts of the workers' size.
    args=(--max-file-size 256MB)
    [ "$w" -gt 0 ] && args=(--workers "$(IFS=,; echo "${urls[*]}")")
    mark=$(wc -l <"$log")
    AWS_ACCESS_KEY_ID=AKIABENCHCOORDINATOR /usr/bin/time -v "$KANON" -q anonymize -c "$DIR/job.toml" \
        -i s3://lake/input/ -o "s3://lake/release-$w/" --overwrite --metrics-json "$DIR/metrics-$w.json" \
        "${args[@]}" 2>"$DIR/time-coordinator-$w.txt"
    # (`wait` without a pid would wait for the server too.)
    for p in "${pids[@]}"; do
        pkill -TERM -P "$p" || true
        wait "$p" 2>/dev/null || true
    done
    tail -n +"$((mark + 1))" "$log" >"$DIR/requests-$w.log"
    python3 - "$w" "$DIR" "${names[@]}" <<'PY'
import json, re, sys
w, d, workers = sys.argv[1], sys.argv[2], sys.argv[3:]
def tv(text, key):
    return re.search(re.escape(key) + r":\s*(\S+)", text).group(1)
io = {}
for line in open(f"{d}/requests-{w}.log"):
    key, _, _, sent, got = line.split()
    r = io.setdefault(key, [0, 0])
    r[0] += int(got); r[1] += int(sent)
def row(name, timefile, key, phases):
    text = open(timefile).read()
    wall = tv(text, "Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")
    wall_s = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall)))
    cpu = float(tv(text, "User time (seconds)")) + float(tv(text, "System time (seconds)"))
    rss = int(tv(text, "Maximum resident set size (kbytes)")) // 1024
    read, written = io.get(key, [0, 0])
    print("\t".join([w, name, f"{wall_s:.1f}", f"{cpu:.1f}", str(rss), f"{read/1e6:.0f}", f"{written/1e6:.0f}", phases]))
m = json.load(open(f"{d}/metrics-{w}.json"))
t = m.get("timings", {})
phases = " ".join(f"{k}={v:.1f}" for k, v in t.items() if isinstance(v, (int, float)))
row("coordinator", f"{d}/time-coordinator-{w}.txt", "AKIABENCHCOORDINATOR", phases)
for i, name in enumerate(workers, 1):
    task = [x for x in m.get("tasks", []) if x.get("worker")][i - 1::len(workers)]
    ph = " ".join(f"read_s={x['read_s']:.1f} write_s={x['write_s']:.1f} rows={x['rows']}" for x in task)
    row(name, f"{d}/time-{name}.txt", f"AKIABENCHWORKER0000{i}", ph)
PY
done
