//! `kanon.register(ctx)`: `anonymize(...)` and `kanon_risk(...)` in a
//! datafusion-python `SessionContext`, through DataFusion's FFI (feature
//! `datafusion`).
//!
//! Each function is kanon-datafusion's own [`TableFunctionImpl`]
//! ([`AnonymizeFunc`], [`KanonRiskFunc`]), exported as an
//! `FFI_TableFunction` in a `datafusion_table_function` PyCapsule, the
//! protocol of datafusion-python 52 and later
//! (`__datafusion_table_function__(session)`). The calling session comes
//! through the FFI with its catalog, so `anonymize('adult', '...')` finds
//! the tables registered in Python; its release is planned and verified by
//! kanon's library, its rows streamed back through the FFI. Subqueries as
//! arguments need kanon's relation planner, which datafusion-python cannot
//! take through the FFI: pass a registered table or view.

use std::sync::{Arc, OnceLock};

use datafusion::catalog::TableFunctionImpl;
use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::udtf::FFI_TableFunction;
use kanon_datafusion::{AnonymizeFunc, FileAccess, KanonRiskFunc, ANONYMIZE, KANON_RISK};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// The runtime the functions' plans run on (DataFusion's streams need a
/// tokio runtime; the caller's is in another library).
fn runtime() -> PyResult<tokio::runtime::Handle> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    match RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .thread_name("kanon-datafusion")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    }) {
        Ok(rt) => Ok(rt.handle().clone()),
        Err(e) => Err(PyRuntimeError::new_err(format!(
            "cannot start kanon's DataFusion runtime: {e}"
        ))),
    }
}

/// The session's logical extension codec, from the object datafusion-python
/// passes to `__datafusion_table_function__`.
fn codec_of(session: &Bound<'_, PyAny>) -> PyResult<FFI_LogicalExtensionCodec> {
    let name = "__datafusion_logical_extension_codec__";
    let capsule = match session.hasattr(name)? {
        true => session.getattr(name)?.call0()?,
        false => session.clone(),
    };
    let capsule = capsule.cast::<PyCapsule>().map_err(|_| {
        PyTypeError::new_err(
            "datafusion-python passed no logical extension codec: kanon.register needs datafusion-python 52 or later",
        )
    })?;
    let codec = capsule
        .pointer_checked(Some(c"datafusion_logical_extension_codec"))
        .map_err(|_| PyTypeError::new_err("not a datafusion_logical_extension_codec capsule"))?
        .cast::<FFI_LogicalExtensionCodec>();
    // SAFETY: the capsule's name says what it holds; it outlives this call,
    // and the codec is cloned (its own reference count) before it returns.
    Ok(unsafe { codec.as_ref() }.clone())
}

/// One of kanon's table functions, for `SessionContext.register_udtf`.
#[pyclass(name = "TableFunction", module = "kanon._kanon", frozen)]
pub struct TableFunction {
    /// `anonymize` or `kanon_risk`.
    #[pyo3(get)]
    name: &'static str,
    files: Arc<FileAccess>,
}

#[pymethods]
impl TableFunction {
    /// The function as an `FFI_TableFunction` capsule (datafusion-python's
    /// protocol for foreign table functions).
    fn __datafusion_table_function__<'py>(
        &self,
        py: Python<'py>,
        session: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let codec = codec_of(&session)?;
        let f: Arc<dyn TableFunctionImpl> = match self.name {
            ANONYMIZE => Arc::new(AnonymizeFunc::new(Arc::clone(&self.files))),
            _ => Arc::new(KanonRiskFunc::new(Arc::clone(&self.files))),
        };
        let ffi = FFI_TableFunction::new_with_ffi_codec(f, Some(runtime()?), codec);
        PyCapsule::new_with_value(py, ffi, c"datafusion_table_function")
    }

    fn __repr__(&self) -> String {
        format!("<kanon table function {}>", self.name)
    }
}

/// `anonymize` and `kanon_risk`, whose options may name files under
/// `allowed_dirs` only (default: the current directory), as in
/// `kanon_datafusion::Options`.
#[pyfunction]
#[pyo3(signature = (allowed_dirs=None))]
pub fn table_functions(
    allowed_dirs: Option<Vec<std::path::PathBuf>>,
) -> PyResult<Vec<TableFunction>> {
    let files = match allowed_dirs {
        Some(dirs) => FileAccess::new(&dirs).map_err(|e| PyValueError::new_err(e.to_string()))?,
        None => FileAccess::default(),
    };
    let files = Arc::new(files);
    Ok([ANONYMIZE, KANON_RISK]
        .into_iter()
        .map(|name| TableFunction {
            name,
            files: Arc::clone(&files),
        })
        .collect())
}
