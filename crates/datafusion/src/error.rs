//! Engine errors as DataFusion errors, by who is at fault, with the engine's
//! error kept typed.

use std::fmt;

use datafusion::common::DataFusionError;
use kanon_engine::Error;

/// An engine error raised by one of kanon's SQL functions while it ran,
/// carried inside [`DataFusionError::External`]: a caller finds it in the
/// error's source chain and acts on its kind ([`FunctionError::engine`]:
/// an unsatisfiable model, a failed verification, ...), never on its text.
/// It reads `anonymize(): <the engine's message>`.
#[derive(Debug)]
pub struct FunctionError {
    function: String,
    error: Error,
}

impl FunctionError {
    /// The SQL function that failed (`anonymize`, `kanon_risk`).
    pub fn function(&self) -> &str {
        &self.function
    }

    /// The engine's error.
    pub fn engine(&self) -> &Error {
        &self.error
    }

    /// The first engine error in `e`'s source chain (through DataFusion's
    /// wrappers and those of sinks and other crates that keep their sources).
    pub fn find<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a Error> {
        let mut cause = Some(e);
        while let Some(c) = cause {
            if let Some(f) = c.downcast_ref::<FunctionError>() {
                return Some(&f.error);
            }
            if let Some(engine) = c.downcast_ref::<Error>() {
                return Some(engine);
            }
            cause = c.source();
        }
        None
    }
}

impl fmt::Display for FunctionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(): {}", self.function, self.error)
    }
}

impl std::error::Error for FunctionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Maps an engine error of `function` to a DataFusion error: settings and
/// data that do not fit the job are the user's (a plan error when found
/// while planning), a memory limit is resources exhausted (DataFusion's own
/// kind, which its memory pool and callers understand); the rest
/// (unsatisfiable models, failed verification, bad data found while
/// running, kanon bugs) stay typed as a [`FunctionError`]. Messages come
/// from the engine, which never prints values of records.
pub(crate) fn engine_error(function: &str, e: Error, planning: bool) -> DataFusionError {
    match e {
        Error::Spec { .. } | Error::Hierarchy { .. } => {
            DataFusionError::Plan(format!("{function}(): {e}"))
        }
        Error::Data { .. } if planning => DataFusionError::Plan(format!("{function}(): {e}")),
        Error::ResourcesExhausted(_) => {
            DataFusionError::ResourcesExhausted(format!("{function}(): {e}"))
        }
        error => DataFusionError::External(Box::new(FunctionError {
            function: function.to_string(),
            error,
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_errors_stay_typed_through_wrappers() {
        let e = engine_error("anonymize", Error::Unsatisfiable("k".into()), false);
        assert_eq!(
            e.to_string(),
            "External error: anonymize(): privacy model cannot be satisfied: k"
        );
        // A sink wraps the plan's error; the engine's kind is still found.
        let wrapped = DataFusionError::External(Box::new(e)).context("INSERT INTO t");
        assert!(matches!(
            FunctionError::find(&wrapped),
            Some(Error::Unsatisfiable(_))
        ));
        let plan = engine_error("anonymize", Error::spec("privacy.k", "x"), false);
        assert!(matches!(plan, DataFusionError::Plan(_)));
        assert!(FunctionError::find(&plan).is_none());
    }
}
