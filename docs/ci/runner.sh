#!/usr/bin/env bash
# CI steps of the kanon runner (issue 9), to be folded into .ci/run.
#
# The S3 tests (crates/runner/tests/s3.rs) start `moto_server` on a free
# port of 127.0.0.1 themselves and stop it afterwards; they need it
# installed. Without it they skip with a printed reason, except when CI is
# set: then they fail.
set -euo pipefail

if ! command -v moto_server >/dev/null 2>&1; then
    python3 -m pip install --quiet "moto[server]"
fi
moto_server --help >/dev/null

# The runner's unit and integration tests (local files, bad inputs, S3).
# Release mode: each test runs the Adult job through the real binary.
cargo test --release -p kanon
