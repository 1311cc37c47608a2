# DataFusion integration (issue 8): no external server or tool needed.
# kanon-datafusion's unit tests, the sqllogictest suite (tests/sql/*.slt,
# a harness = false test that prints "sqllogictests: N passed, N failed"),
# and `kanon sql` on the real binary (runner feature `sql`).
cargo test -p kanon-datafusion
cargo test -p kanon --features sql
