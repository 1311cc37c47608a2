//! Engine errors as DataFusion errors, by who is at fault.

use datafusion::common::DataFusionError;
use kanon_engine::Error;

/// Maps an engine error of `function` to a DataFusion error: settings and
/// data that do not fit the job are the user's (a plan error when found
/// while planning, an execution error when found in the data), a memory
/// limit is resources exhausted; the rest (unsatisfiable models, failed
/// verification, kanon bugs) are execution errors whose text says which. Messages
/// come from the engine, which never prints values of records.
pub(crate) fn engine_error(function: &str, e: Error, planning: bool) -> DataFusionError {
    let msg = format!("{function}(): {e}");
    match e {
        Error::Spec { .. } | Error::Hierarchy { .. } => DataFusionError::Plan(msg),
        Error::Data { .. } if planning => DataFusionError::Plan(msg),
        Error::ResourcesExhausted(_) => DataFusionError::ResourcesExhausted(msg),
        // Not `Internal`: DataFusion's text for it blames DataFusion; the
        // engine's message already says it is a kanon bug.
        _ => DataFusionError::Execution(msg),
    }
}
