//! Exit codes, so that schedulers can tell a bad job from an impossible one
//! from a storage failure.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | `kanon verify`: the release does not satisfy the privacy model |
//! | 2 | bad input or configuration (fix the job or the data) |
//! | 3 | the privacy model cannot be achieved on this input |
//! | 4 | I/O failure (file system, object store) |
//! | 70 | internal error (a bug in kanon) |

use std::process::ExitCode;

use kanon_engine::Error;

/// The release does not satisfy the model.
pub const VERIFY_FAILED: u8 = 1;
/// Bad input or configuration.
pub const BAD_INPUT: u8 = 2;
/// The privacy model cannot be achieved.
pub const UNSATISFIABLE: u8 = 3;
/// I/O failure.
pub const IO: u8 = 4;
/// A bug in kanon.
pub const INTERNAL: u8 = 70;

/// The exit code for an error chain.
pub fn code_of(err: &anyhow::Error) -> ExitCode {
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<Error>() {
            return ExitCode::from(match e {
                Error::Unsatisfiable(_) => UNSATISFIABLE,
                Error::VerificationFailed(_) | Error::Internal(_) => INTERNAL,
                Error::ResourcesExhausted(_) => IO,
                _ => BAD_INPUT,
            });
        }
        if cause.downcast_ref::<std::io::Error>().is_some() {
            return ExitCode::from(IO);
        }
        if let Some(p) = cause.downcast_ref::<parquet::errors::ParquetError>() {
            return ExitCode::from(match p {
                parquet::errors::ParquetError::External(_) => IO,
                _ => BAD_INPUT,
            });
        }
        if cause.downcast_ref::<toml::de::Error>().is_some()
            || cause.downcast_ref::<arrow::error::ArrowError>().is_some()
        {
            return ExitCode::from(BAD_INPUT);
        }
    }
    ExitCode::from(BAD_INPUT)
}
