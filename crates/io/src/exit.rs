//! Exit codes, so that schedulers can tell a bad job from an impossible one
//! from a storage failure worth retrying.
//!
//! | code | meaning | what to do |
//! |---|---|---|
//! | 0 | success | |
//! | 1 | `kanon verify`: the release does not satisfy the privacy model | do not publish it |
//! | 2 | bad input or configuration: job file, settings, data, missing file or bucket, rejected credentials | fix the job, the data or the permissions |
//! | 3 | the privacy model cannot be achieved on this input | lower k, allow suppression, add data |
//! | 4 | I/O failure: disk, network, object store errors | retry later |
//! | 5 | the output already exists (and `--overwrite` was not given) | nothing, or pass `--overwrite` |
//! | 70 | internal error (a bug in kanon) | report it |
//! | 124 | the job ran past `--timeout`; nothing was written | raise the limit, or use `block_size` |
//! | 130 | interrupted (Ctrl-C); nothing was written | run again |
//! | 143 | terminated (SIGTERM); nothing was written | run again |

use std::fmt;

use kanon_engine::Error;

/// The release does not satisfy the model.
pub const VERIFY_FAILED: u8 = 1;
/// Bad input or configuration.
pub const BAD_INPUT: u8 = 2;
/// The privacy model cannot be achieved.
pub const UNSATISFIABLE: u8 = 3;
/// I/O failure.
pub const IO: u8 = 4;
/// The output exists and `--overwrite` was not given.
pub const OUTPUT_EXISTS: u8 = 5;
/// A bug in kanon.
pub const INTERNAL: u8 = 70;
/// Stopped by SIGINT before anything was committed.
pub const INTERRUPTED: u8 = 130;
/// Stopped by SIGTERM before anything was committed.
pub const TERMINATED: u8 = 143;
/// Stopped by the job's time limit before anything was committed.
pub const TIMED_OUT: u8 = 124;

/// An error that knows its exit code (kanon's own failures: missing
/// files, existing outputs, interrupts, rejected credentials).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// What went wrong and how to fix it.
    pub message: String,
}

impl Failure {
    /// A failure with exit code `code`.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// Bad input or configuration (exit 2).
    pub fn bad_input(message: impl Into<String>) -> Self {
        Failure::new(BAD_INPUT, message)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// The exit code of an engine error, by its kind (every front end maps
/// the engine's errors this way: `kanon anonymize`, `kanon sql`, Python).
pub fn engine_code(e: &Error) -> u8 {
    match e {
        Error::Unsatisfiable(_) => UNSATISFIABLE,
        Error::Cancelled(_) => INTERRUPTED,
        Error::VerificationFailed(_) | Error::Internal(_) => INTERNAL,
        // A worker lost or unreachable: worth a retry, as I/O is.
        Error::ResourcesExhausted(_) | Error::Executor(_) => IO,
        _ => BAD_INPUT,
    }
}

/// The exit code for an error chain: the first cause kanon recognises.
pub fn code_of(err: &anyhow::Error) -> u8 {
    // A failure given as context is found by anyhow's downcast (the chain
    // only shows it as text).
    if let Some(f) = err.downcast_ref::<Failure>() {
        return f.code;
    }
    for cause in err.chain() {
        if let Some(f) = cause.downcast_ref::<Failure>() {
            return f.code;
        }
        if let Some(e) = cause.downcast_ref::<Error>() {
            return engine_code(e);
        }
        if let Some(e) = cause.downcast_ref::<object_store::Error>() {
            return object_store_code(e);
        }
        if let Some(e) = cause.downcast_ref::<std::io::Error>() {
            return match e.kind() {
                std::io::ErrorKind::NotFound
                | std::io::ErrorKind::PermissionDenied
                | std::io::ErrorKind::InvalidData
                | std::io::ErrorKind::InvalidInput
                // A path through a regular file, or a directory where a
                // file belongs: the job names a wrong path, a retry will
                // not help.
                | std::io::ErrorKind::NotADirectory
                | std::io::ErrorKind::IsADirectory
                | std::io::ErrorKind::ReadOnlyFilesystem => BAD_INPUT,
                _ => IO,
            };
        }
        if let Some(p) = cause.downcast_ref::<parquet::errors::ParquetError>() {
            if let parquet::errors::ParquetError::External(inner) = p {
                if let Some(e) = inner.downcast_ref::<object_store::Error>() {
                    return object_store_code(e);
                }
                return IO;
            }
            return BAD_INPUT;
        }
        if cause.downcast_ref::<toml::de::Error>().is_some()
            || cause.downcast_ref::<arrow::error::ArrowError>().is_some()
        {
            return BAD_INPUT;
        }
    }
    BAD_INPUT
}

/// Object store errors: a missing object or bucket and rejected credentials
/// need the job fixed (2); everything else may pass (4).
pub fn object_store_code(e: &object_store::Error) -> u8 {
    use object_store::Error as E;
    match e {
        E::NotFound { .. }
        | E::PermissionDenied { .. }
        | E::Unauthenticated { .. }
        | E::InvalidPath { .. }
        | E::UnknownConfigurationKey { .. } => BAD_INPUT,
        E::AlreadyExists { .. } => OUTPUT_EXISTS,
        _ => IO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn codes_follow_the_first_known_cause() {
        let e = anyhow::Error::new(Error::Unsatisfiable("x".into())).context("running");
        assert_eq!(code_of(&e), UNSATISFIABLE);
        let e = anyhow::Error::new(Failure::new(OUTPUT_EXISTS, "exists")).context("writing");
        assert_eq!(code_of(&e), OUTPUT_EXISTS);
        let e = anyhow::Error::new(std::io::Error::other("disk"))
            .context(Failure::new(BAD_INPUT, "bucket missing"))
            .context("reading");
        assert_eq!(code_of(&e), BAD_INPUT);
        let e = Err::<(), _>(std::io::Error::other("disk"))
            .context("writing")
            .unwrap_err();
        assert_eq!(code_of(&e), IO);
        let e = anyhow::Error::new(Error::spec("privacy.k", "bad"));
        assert_eq!(code_of(&e), BAD_INPUT);
        let e = anyhow::Error::new(object_store::Error::NotFound {
            path: "b/k".into(),
            source: "404".into(),
        });
        assert_eq!(code_of(&e), BAD_INPUT);
        let e = anyhow::Error::new(object_store::Error::Generic {
            store: "S3",
            source: "connection refused".into(),
        });
        assert_eq!(code_of(&e), IO);
        assert_eq!(code_of(&anyhow::anyhow!("plain")), BAD_INPUT);
    }
}
