//! `kanon`: anonymise Parquet and CSV tables from a job file, on local disk
//! or S3.
//!
//! The command line itself is the `kanon` library ([`kanon::run`]), so
//! embedders can register algorithms and run the same path.

use std::process::ExitCode;

fn main() -> ExitCode {
    kanon::run(std::env::args_os())
}
