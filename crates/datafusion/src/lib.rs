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

mod error;
pub mod exec;
pub mod options;
pub mod risk;
pub mod table;

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::prelude::SessionContext;

pub use exec::AnonymizeExec;
pub use options::{AnonymizeSettings, HierarchySource};
pub use risk::KanonRiskExec;
pub use table::{
    AnonymizeFunc, AnonymizeTable, KanonRelationPlanner, KanonRiskFunc, RiskTable, ANONYMIZE,
    KANON_RISK,
};

/// Registers `anonymize(...)`, `kanon_risk(...)` and the relation planner
/// for subquery and named arguments in `ctx`.
///
/// # Errors
/// When DataFusion refuses the relation planner.
pub fn register(ctx: &SessionContext) -> Result<()> {
    ctx.register_udtf(ANONYMIZE, Arc::new(AnonymizeFunc));
    ctx.register_udtf(KANON_RISK, Arc::new(KanonRiskFunc));
    ctx.register_relation_planner(Arc::new(KanonRelationPlanner))
}
