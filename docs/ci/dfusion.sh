# DataFusion integration (issue 8): no external server or tool needed.
# One invocation so that DataFusion is compiled once, with one feature set,
# for kanon-datafusion's tests (unit, tests/exec.rs, and the sqllogictest
# suite tests/sql/*.slt, a harness = false test printing
# "sqllogictests: N passed, N failed") and for `kanon sql` on the real
# binary (runner feature `sql`, crates/runner/tests/sql.rs).
# A clean debug build of this takes ~20-65 min on 2 cores (see
# docs/bench/dfusion.md): keep it to this one build in CI.
cargo test -p kanon-datafusion -p kanon --features kanon/sql
