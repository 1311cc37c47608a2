//! The engine's error type, one variant per party at fault.
//!
//! Messages name the column, file and setting involved and how to fix the
//! problem; they never contain the quasi-identifier or sensitive values of
//! records (only counts and row numbers).

/// Everything that can go wrong inside the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The job specification is inconsistent or incomplete (a user error in
    /// the config or the command line).
    #[error("invalid setting `{setting}`: {message}")]
    Spec {
        /// The setting at fault, e.g. `privacy.k` or `attributes.age.generalisation`.
        setting: String,
        /// What is wrong and what to do about it.
        message: String,
    },
    /// A hierarchy definition is malformed.
    #[error("hierarchy {source_name}{}: {message}", line.map(|l| format!(", line {l}")).unwrap_or_default())]
    Hierarchy {
        /// File name (or other description) of the hierarchy source.
        source_name: String,
        /// 1-based line number, when the problem is on one line.
        line: Option<usize>,
        /// What is wrong and what to do about it.
        message: String,
    },
    /// The input data does not fit the job (types, nulls, values missing from
    /// a hierarchy). Reports counts, never values.
    #[error("column `{column}`: {message}")]
    Data {
        /// The input column at fault.
        column: String,
        /// What is wrong (with the number of affected rows) and how to fix it.
        message: String,
    },
    /// The requested privacy model cannot be met on this input at all.
    #[error("privacy model cannot be satisfied: {0}")]
    Unsatisfiable(String),
    /// An output failed verification against the requested privacy model.
    /// This is a bug in an algorithm; the release must not be written.
    #[error("verification failed, release refused: {0}")]
    VerificationFailed(String),
    /// The work was cancelled (interrupt, time limit, dropped query)
    /// before it finished; nothing may be released.
    #[error("cancelled: {0}; nothing was released")]
    Cancelled(String),
    /// A memory or size limit was reached.
    #[error("resources exhausted: {0}")]
    ResourcesExhausted(String),
    /// An arrow kernel failed.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// The blocks of a block-wise run could not be clustered where they
    /// were sent (a worker lost or unreachable, a worker's own error).
    #[error("block-wise run failed on the workers, nothing was released: {0}")]
    Executor(String),
    /// A broken internal invariant: a bug in kanon, please report it.
    #[error("internal error (a bug in kanon, please report it): {0}")]
    Internal(String),
}

impl Error {
    /// Shorthand for [`Error::Spec`].
    pub fn spec(setting: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Spec {
            setting: setting.into(),
            message: message.into(),
        }
    }

    /// Shorthand for [`Error::Data`].
    pub fn data(column: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Data {
            column: column.into(),
            message: message.into(),
        }
    }

    /// Shorthand for [`Error::Hierarchy`].
    pub fn hierarchy(
        source_name: impl Into<String>,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Self {
        Error::Hierarchy {
            source_name: source_name.into(),
            line,
            message: message.into(),
        }
    }
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
