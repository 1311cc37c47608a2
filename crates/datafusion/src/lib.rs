//! kanon inside a DataFusion [`SessionContext`]: anonymise any table the
//! session can see, in SQL.
//!
//! [`register`] adds, in one call:
//! - the table function `anonymize(table, options)`: the release of `table`
//!   (a registered table or view named by a string, or a subquery) under
//!   the settings `options` (the settings of a job file, see [`options`]);
//!   planned as an [`AnonymizeExec`] over the input's plan;
//! - the table function `kanon_risk(table, options)`: one row of
//!   re-identification risk and information loss of a table for the QIs of
//!   the options (smallest class, classes and rows below k, achieved l,
//!   NCP read from the labels), planned as a [`KanonRiskExec`];
//! - a relation planner ([`KanonRelationPlanner`]) so that a subquery and
//!   named arguments can be passed: `anonymize((SELECT ...), k => 10)`.
//!
//! Files named in the options (`config`, hierarchy files) are read only
//! under the current directory; [`register_with`] allows other directories
//! ([`Options::allowed_dirs`]).
//!
//! ```no_run
//! # async fn demo() -> datafusion::error::Result<()> {
//! use datafusion::prelude::*;
//! let ctx = SessionContext::new();
//! kanon_datafusion::register(&ctx)?;
//! ctx.register_parquet("adult", "data/adult/adult.parquet", ParquetReadOptions::default())
//!     .await?;
//! let release = ctx
//!     .sql("SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\", k = 5')")
//!     .await?;
//! release.show_limit(5).await?;
//! # Ok(()) }
//! ```
//!
//! Everything computed comes from `kanon-engine` (encode, the pipeline,
//! recode, release verification, metrics); this crate plans and streams.
#![warn(missing_docs)]

#[cfg(feature = "distributed")]
pub mod distributed;
mod error;
pub mod exec;
pub mod options;
pub mod risk;
pub mod table;

use std::path::PathBuf;
use std::sync::Arc;

use datafusion::common::Result;
use datafusion::prelude::SessionContext;

pub use error::FunctionError;
pub use exec::{AnonymizeExec, BlockExecutors};
pub use options::{AnonymizeSettings, FileAccess, HierarchySource};
pub use risk::KanonRiskExec;
pub use table::{
    AnonymizeFunc, AnonymizeTable, KanonRelationPlanner, KanonRiskFunc, RiskTable, ANONYMIZE,
    KANON_RISK,
};

/// Settings of kanon's integration in one session.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// The directories under which the options of `anonymize()` and
    /// `kanon_risk()` may name files (`config`, hierarchy files), compared
    /// after resolving `..` and symbolic links. Default: the current
    /// directory. Empty: no file may be named.
    pub allowed_dirs: Vec<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            allowed_dirs: std::env::current_dir().into_iter().collect(),
        }
    }
}

impl Options {
    /// Options allowing files under `dirs` only.
    pub fn allowed_dirs(dirs: impl IntoIterator<Item = impl Into<PathBuf>>) -> Self {
        Options {
            allowed_dirs: dirs.into_iter().map(Into::into).collect(),
        }
    }
}

/// Registers `anonymize(...)`, `kanon_risk(...)` and the relation planner
/// for subquery and named arguments in `ctx`, with the default [`Options`]
/// (files only under the current directory).
///
/// # Errors
/// When DataFusion refuses the relation planner.
pub fn register(ctx: &SessionContext) -> Result<()> {
    register_with(ctx, Options::default())
}

/// [`register`] with explicit [`Options`].
///
/// # Errors
/// A configuration error when an allowed directory does not exist; when
/// DataFusion refuses the relation planner.
pub fn register_with(ctx: &SessionContext, options: Options) -> Result<()> {
    let files = Arc::new(FileAccess::new(&options.allowed_dirs)?);
    ctx.register_udtf(ANONYMIZE, Arc::new(AnonymizeFunc::new(Arc::clone(&files))));
    ctx.register_udtf(KANON_RISK, Arc::new(KanonRiskFunc::new(Arc::clone(&files))));
    ctx.register_relation_planner(Arc::new(KanonRelationPlanner::new(files)))
}
