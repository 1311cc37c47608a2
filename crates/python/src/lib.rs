//! `kanon._kanon`: the native half of the Python package (`python/`).
//!
//! The Python functions (`kanon.anonymize`, `verify`, `risk`, `report`)
//! build a command line and call `run`, which runs it through the
//! runner's [`kanon::embed`] exactly as `kanon` would: the same job
//! loading, overrides and weakening rule, checks, verification before the
//! commit, and the same bytes. What differs is at the edges:
//!
//! - a table given in memory is read through the Arrow C stream interface
//!   (`__arrow_c_stream__`, a PyCapsule): its batches are imported without
//!   a copy and read as the job's input ([`kanon::MemoryTable`]);
//! - the command runs on a thread of its own, the GIL released; the
//!   calling thread polls for Python's signals (Ctrl-C in a notebook stops
//!   the job through [`kanon::embed::interrupt`]) and calls the progress
//!   callback with [`kanon::embed::progress_now`];
//! - a failure is raised as `kanon._kanon.Failed(code, message)`, which
//!   the package turns into its exception classes.

#[cfg(feature = "datafusion")]
mod sql;

use std::sync::mpsc;
use std::time::Duration;

use arrow::ffi_stream::{ArrowArrayStreamReader, FFI_ArrowArrayStream};
use arrow::record_batch::RecordBatchReader;
use kanon::embed::{self, Failed as EmbedFailed};
use kanon::MemoryTable;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

create_exception!(
    _kanon,
    Failed,
    PyException,
    "A kanon command that failed: args are (exit code, message)."
);

/// How often the calling thread looks for signals and reports progress.
const POLL: Duration = Duration::from_millis(100);

/// Imports an object with `__arrow_c_stream__` as a table in memory,
/// without copying its buffers.
fn table_of(data: &Bound<'_, PyAny>, label: &str) -> PyResult<MemoryTable> {
    let py = data.py();
    let Some(method) = data.getattr_opt(pyo3::intern!(py, "__arrow_c_stream__"))? else {
        return Err(PyTypeError::new_err(format!(
            "the data ({label}) is not an Arrow table: pass a pyarrow Table or RecordBatchReader, a polars or pandas DataFrame, a DuckDB relation, or any object with `__arrow_c_stream__`"
        )));
    };
    let capsule = method.call0()?;
    let capsule = capsule.cast::<PyCapsule>().map_err(|_| {
        PyTypeError::new_err(format!(
            "`__arrow_c_stream__` of the data ({label}) did not return a capsule"
        ))
    })?;
    let ptr = capsule
        .pointer_checked(Some(c"arrow_array_stream"))
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "`__arrow_c_stream__` of the data ({label}) did not return an `arrow_array_stream` capsule"
            ))
        })?
        .cast::<FFI_ArrowArrayStream>();
    // SAFETY: the capsule holds an `ArrowArrayStream` (checked by its
    // name); `from_raw` moves it out, leaving a released stream behind for
    // the capsule's destructor.
    let stream = unsafe { FFI_ArrowArrayStream::from_raw(ptr.as_ptr()) };
    let reader = ArrowArrayStreamReader::try_new(stream)
        .map_err(|e| PyValueError::new_err(format!("cannot read the data ({label}): {e}")))?;
    let schema = reader.schema();
    // The producer may need the GIL to make its batches (a Python
    // generator behind a RecordBatchReader): read them holding it.
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PyValueError::new_err(format!("cannot read the data ({label}): {e}")))?;
    MemoryTable::new(label, schema, batches).map_err(|e| PyValueError::new_err(format!("{e:#}")))
}

/// Runs the kanon command `args` (`["anonymize", "--config", ...]`), with
/// `data` (an Arrow stream object named `label` in messages) as its input
/// when given, and returns what it printed. `progress`, when given, is
/// called as `progress(step, done, total, message)` while it runs.
#[pyfunction]
#[pyo3(signature = (args, data=None, label="table", progress=None))]
fn run(
    py: Python<'_>,
    args: Vec<String>,
    data: Option<&Bound<'_, PyAny>>,
    label: &str,
    progress: Option<&Bound<'_, PyAny>>,
) -> PyResult<String> {
    let table = data.map(|d| table_of(d, label)).transpose()?;
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .name("kanon".into())
        .spawn(move || {
            let _ = tx.send(embed::run(&args, table));
        })
        .map_err(|e| PyException::new_err(format!("cannot start the kanon thread: {e}")))?;
    let mut interrupted: Option<PyErr> = None;
    let mut last = None;
    let mut rx = rx;
    let outcome = loop {
        // The receiver goes to the detached closure and comes back (it is
        // `Send`, not `Sync`).
        let (received, back) = py.detach(move || (rx.recv_timeout(POLL), rx));
        rx = back;
        match received {
            Ok(outcome) => break outcome,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err(EmbedFailed {
                    code: 70,
                    message: "the kanon thread ended without a result (a bug in kanon)".into(),
                })
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Err(e) = py.check_signals() {
            // Stop the job (it cleans up and returns); keep asking until it
            // has, in case it had not started listening yet.
            interrupted.get_or_insert(e);
        }
        if interrupted.is_some() {
            embed::interrupt();
            continue;
        }
        if let (Some(cb), Some(now)) = (progress, embed::progress_now()) {
            if last.as_ref() != Some(&now) {
                cb.call1((&now.step, now.done, now.total, &now.message))?;
                last = Some(now);
            }
        }
    };
    let _ = worker.join();
    match (outcome, interrupted) {
        (Ok(printed), None) => Ok(printed),
        (Err(f), Some(e)) if f.code == 130 => Err(e),
        (Err(f), Some(_)) => Err(PyKeyboardInterrupt::new_err(f.message)),
        (Ok(_), Some(e)) => Err(e),
        (Err(f), None) => Err(Failed::new_err((f.code, f.message))),
    }
}

/// The TOML text of a job given as JSON (the package's dict jobs).
#[pyfunction]
fn toml_of(json: &str) -> PyResult<String> {
    let value: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| PyValueError::new_err(format!("the job is not JSON: {e}")))?;
    let table: toml::Table = serde_json::from_value(value).map_err(|e| {
        PyValueError::new_err(format!(
            "the job cannot be written as TOML: {e} (a job is a dict of sections, e.g. {{\"privacy\": {{\"k\": 5}}}})"
        ))
    })?;
    toml::to_string(&table)
        .map_err(|e| PyValueError::new_err(format!("the job cannot be written as TOML: {e}")))
}

#[pymodule]
fn _kanon(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(toml_of, m)?)?;
    m.add("Failed", m.py().get_type::<Failed>())?;
    #[cfg(feature = "datafusion")]
    {
        m.add_class::<sql::TableFunction>()?;
        m.add_function(wrap_pyfunction!(sql::table_functions, m)?)?;
    }
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
