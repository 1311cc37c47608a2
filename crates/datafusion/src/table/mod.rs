//! The table functions `anonymize(table, options)` and
//! `kanon_risk(table, options)`, the tables they return, and the relation
//! planner that lets a subquery and named arguments stand in their place.
//!
//! One file per part: the table functions and how a call resolves its
//! table (`function`), the tables they return (`tables`), and the relation
//! planner (`planner`). The two functions share the [`ANONYMIZE`] and
//! [`KANON_RISK`] names, the choice between them and their usage line here.

mod function;
mod planner;
mod tables;

pub use function::{AnonymizeFunc, KanonRiskFunc};
pub use planner::KanonRelationPlanner;
pub use tables::{AnonymizeTable, RiskTable};

use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::common::Result;
use datafusion::logical_expr::LogicalPlan;

use crate::options::Job;

/// Name of the anonymising table function.
pub const ANONYMIZE: &str = "anonymize";
/// Name of the risk report table function.
pub const KANON_RISK: &str = "kanon_risk";

/// Which of the two functions a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Function {
    Anonymize,
    Risk,
}

impl Function {
    fn name(self) -> &'static str {
        match self {
            Function::Anonymize => ANONYMIZE,
            Function::Risk => KANON_RISK,
        }
    }

    fn table(self, input: LogicalPlan, job: Arc<Job>) -> Result<Arc<dyn TableProvider>> {
        Ok(match self {
            Function::Anonymize => Arc::new(AnonymizeTable::try_new(input, job)?),
            Function::Risk => Arc::new(RiskTable::try_new(input, job)?),
        })
    }
}

fn usage(f: Function) -> String {
    format!(
        "call it as {0}('table', 'k = 10, qi = [\"age\", \"zip\"]'), {0}('table', 'config = \"configs/adult.toml\"') or {0}((SELECT ... FROM ...), k => 10, config => 'configs/adult.toml')",
        f.name()
    )
}
