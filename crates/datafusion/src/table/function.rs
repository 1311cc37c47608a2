//! The table functions `anonymize(table, options)` and
//! `kanon_risk(table, options)` ([`AnonymizeFunc`], [`KanonRiskFunc`]):
//! checking their arguments and resolving the named table or view through
//! the session, with errors that show the usage.

use std::sync::Arc;

use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{plan_datafusion_err, plan_err, Result, ScalarValue, TableReference};
use datafusion::datasource::provider_as_source;
use datafusion::logical_expr::{Expr, LogicalPlanBuilder};
use futures::FutureExt;

use super::{usage, Function};
use crate::options::{parse_options, settings_from, FileAccess, Job};

/// `anonymize(table, options)`: `table` names a table or view of the
/// session (a string, e.g. `'adult'` or `'public.adult'`), `options` holds
/// the settings (see [`crate::options`]).
#[derive(Debug, Default)]
pub struct AnonymizeFunc {
    files: Arc<FileAccess>,
}

impl AnonymizeFunc {
    /// The function, reading files named by its options only where `files`
    /// allows.
    pub fn new(files: Arc<FileAccess>) -> Self {
        AnonymizeFunc { files }
    }
}

/// `kanon_risk(table, options)`: risk and loss of a table for the QIs of the
/// options, without changing it.
#[derive(Debug, Default)]
pub struct KanonRiskFunc {
    files: Arc<FileAccess>,
}

impl KanonRiskFunc {
    /// The function, reading files named by its options only where `files`
    /// allows.
    pub fn new(files: Arc<FileAccess>) -> Self {
        KanonRiskFunc { files }
    }
}

impl TableFunctionImpl for AnonymizeFunc {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        call(
            Function::Anonymize,
            args.exprs(),
            args.session(),
            &self.files,
        )
    }
}

impl TableFunctionImpl for KanonRiskFunc {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        call(Function::Risk, args.exprs(), args.session(), &self.files)
    }
}

fn call(
    f: Function,
    exprs: &[Expr],
    session: &dyn Session,
    files: &FileAccess,
) -> Result<Arc<dyn TableProvider>> {
    let name = f.name();
    let (table, options) = match exprs {
        [t] => (t, None),
        [t, o] => (t, Some(o)),
        _ => {
            return plan_err!(
                "{name}() takes a table and an options string, got {} arguments; {}",
                exprs.len(),
                usage(f)
            )
        }
    };
    let table = match table {
        Expr::Literal(ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)) | ScalarValue::LargeUtf8(Some(s)), _) => s.clone(),
        Expr::Column(c) => c.flat_name(),
        Expr::Literal(v, _) if v.is_null() => {
            return plan_err!("{name}(): the table argument is NULL; name a registered table or view; {}", usage(f))
        }
        other => {
            return plan_err!("{name}(): the first argument must name a table or view (a string) or be a subquery, got `{other}`; {}", usage(f))
        }
    };
    let options = match options {
        None => String::new(),
        Some(Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::Utf8View(Some(s))
            | ScalarValue::LargeUtf8(Some(s)),
            _,
        )) => s.clone(),
        Some(Expr::Literal(v, _)) if v.is_null() => {
            return plan_err!(
                "{name}(): the options are NULL; give the settings as a string; {}",
                usage(f)
            )
        }
        Some(other) => {
            return plan_err!(
                "{name}(): the options must be a string, got `{other}`; {}",
                usage(f)
            )
        }
    };
    let job = Arc::new(Job::try_new(
        settings_from(parse_options(&options, name)?, name, files)?,
        name,
    )?);
    let provider = lookup_table(session, &table, f)?;
    let reference = TableReference::from(table.as_str());
    let input = LogicalPlanBuilder::scan(reference, provider_as_source(provider), None)?.build()?;
    f.table(input, job)
}

/// Finds a table or view of the session by name. Catalogs that load tables
/// asynchronously cannot answer during planning: the error says to pass a
/// subquery instead, which DataFusion resolves ahead.
fn lookup_table(session: &dyn Session, name: &str, f: Function) -> Result<Arc<dyn TableProvider>> {
    let function = f.name();
    let reference = TableReference::from(name);
    let catalog_options = &session.config_options().catalog;
    let resolved = reference.clone().resolve(
        &catalog_options.default_catalog,
        &catalog_options.default_schema,
    );
    let not_found = || {
        plan_datafusion_err!(
            "{function}(): table '{name}' not found; register it first (CREATE EXTERNAL TABLE, or `kanon sql --table {name}=path`) or pass a query: {function}((SELECT * FROM ...), ...)"
        )
    };
    let schema = session
        .catalog_list()
        .catalog(&resolved.catalog)
        .and_then(|c| c.schema(&resolved.schema))
        .ok_or_else(not_found)?;
    match schema.table(&resolved.table).now_or_never() {
        Some(Ok(Some(t))) => Ok(t),
        Some(Ok(None)) => Err(not_found()),
        Some(Err(e)) => Err(e),
        None => plan_err!(
            "{function}(): table '{name}' is in a catalog that loads tables asynchronously; pass it as a query instead: {function}((SELECT * FROM {name}), ...)"
        ),
    }
}
