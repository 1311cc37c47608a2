//! The table functions `anonymize(table, options)` and
//! `kanon_risk(table, options)`, the tables they return, and the relation
//! planner that lets a subquery and named arguments stand in their place.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{
    plan_datafusion_err, plan_err, Column, DFSchema, Result, ScalarValue, TableReference,
};
use datafusion::datasource::provider_as_source;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::planner::{
    PlannedRelation, RelationPlanner, RelationPlannerContext, RelationPlanning,
};
use datafusion::logical_expr::{lit, Expr, LogicalPlan, LogicalPlanBuilder, TableType};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::sql::sqlparser::ast::{
    self, FunctionArg, FunctionArgExpr, Ident, ObjectName, ObjectNamePart, TableFactor,
};
use futures::FutureExt;
use kanon_engine::encode::Encoder;
use kanon_engine::recode::release_schema;
use kanon_engine::spec::Role;
use serde_json::{Map, Value};

use crate::error::engine_error;
use crate::exec::AnonymizeExec;
use crate::options::{parse_options, settings_from, FileAccess, Job};
use crate::risk::{risk_schema, KanonRiskExec};

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

/// The table `anonymize(...)` returns: the release of its input, computed by
/// [`AnonymizeExec`] when scanned. Its schema is known at planning: the
/// input's columns with QIs as dictionary-encoded labels and identifying
/// columns dropped.
#[derive(Debug)]
pub struct AnonymizeTable {
    input: LogicalPlan,
    job: Arc<Job>,
    schema: SchemaRef,
}

impl AnonymizeTable {
    /// The release of `input` under `job`.
    ///
    /// # Errors
    /// A plan error when a QI or sensitive column is missing from the input
    /// or has a type kanon cannot read.
    pub fn try_new(input: LogicalPlan, job: Arc<Job>) -> Result<Self> {
        let in_schema = input.schema().as_arrow().clone();
        kanon_engine::columns::check(job.spec(), &in_schema, "the input table")
            .map_err(|e| engine_error(ANONYMIZE, e, true))?;
        Encoder::try_new(job.spec(), job.hierarchies(), &in_schema)
            .map_err(|e| engine_error(ANONYMIZE, e, true))?;
        let schema = release_schema(job.spec(), &in_schema);
        Ok(AnonymizeTable { input, job, schema })
    }
}

/// The columns the engine reads: QIs and sensitive attributes.
fn engine_columns(job: &Job) -> HashSet<&str> {
    job.spec()
        .attributes
        .iter()
        .filter(|a| matches!(a.role, Role::QuasiIdentifier | Role::Sensitive))
        .map(|a| a.name.as_str())
        .collect()
}

/// Plans `input` keeping only the columns named in `keep`, on one partition
/// so that rows arrive in a deterministic order (the release depends only on
/// the data, the settings and the seed).
async fn input_plan(
    state: &dyn Session,
    input: &LogicalPlan,
    keep: &HashSet<&str>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let schema = input.schema();
    let columns: Vec<Expr> = (0..schema.fields().len())
        .filter(|&i| keep.contains(schema.field(i).name().as_str()))
        .map(|i| Expr::Column(Column::from(schema.qualified_field(i))))
        .collect();
    let plan = if columns.len() == schema.fields().len() {
        input.clone()
    } else {
        LogicalPlanBuilder::from(input.clone())
            .project(columns)?
            .build()?
    };
    match state.as_any().downcast_ref::<SessionState>() {
        Some(s) => {
            let mut single = s.clone();
            single
                .config_mut()
                .options_mut()
                .execution
                .target_partitions = 1;
            single.create_physical_plan(&plan).await
        }
        None => state.create_physical_plan(&plan).await,
    }
}

#[async_trait]
impl TableProvider for AnonymizeTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    fn get_logical_plan(&self) -> Option<std::borrow::Cow<'_, LogicalPlan>> {
        None
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        // Filters and limits apply to the release, after anonymisation: they
        // are not pushed into the input (the default `Unsupported`).
        let mut keep = engine_columns(&self.job);
        let wanted: Vec<&str> = match projection {
            Some(p) => p
                .iter()
                .map(|&i| self.schema.field(i).name().as_str())
                .collect(),
            None => self
                .schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect(),
        };
        keep.extend(wanted.iter().copied());
        let input = input_plan(state, &self.input, &keep).await?;
        let release: Schema = release_schema(self.job.spec(), &input.schema())
            .as_ref()
            .clone();
        let mapped = wanted
            .iter()
            .map(|n| {
                release.index_of(n).map_err(|_| {
                    plan_datafusion_err!(
                        "anonymize(): column `{n}` is missing from the planned input"
                    )
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        Ok(Arc::new(AnonymizeExec::with_job(
            input,
            Arc::clone(&self.job),
            Some(mapped),
        )?))
    }
}

/// The table `kanon_risk(...)` returns: one row of risk and loss figures of
/// its input, computed by [`KanonRiskExec`] when scanned.
#[derive(Debug)]
pub struct RiskTable {
    input: LogicalPlan,
    job: Arc<Job>,
}

impl RiskTable {
    /// The risk report of `input` for the QIs of `job`.
    ///
    /// # Errors
    /// A plan error when a QI or sensitive column is missing from the input.
    pub fn try_new(input: LogicalPlan, job: Arc<Job>) -> Result<Self> {
        let in_schema = input.schema().as_arrow().clone();
        let mut labels = job.spec().clone();
        labels
            .attributes
            .retain(|a| matches!(a.role, Role::QuasiIdentifier | Role::Sensitive));
        for a in &mut labels.attributes {
            a.hierarchy = None;
            a.intervals = None;
            a.cuts = None;
            a.masking = false;
            a.kind = Some(kanon_engine::spec::Kind::Categorical);
        }
        Encoder::try_new(&labels, &Default::default(), &in_schema)
            .map_err(|e| engine_error(KANON_RISK, e, true))?;
        Ok(RiskTable { input, job })
    }
}

#[async_trait]
impl TableProvider for RiskTable {
    fn schema(&self) -> SchemaRef {
        risk_schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let input = input_plan(state, &self.input, &engine_columns(&self.job)).await?;
        Ok(Arc::new(KanonRiskExec::try_new(
            input,
            Arc::clone(&self.job),
            projection.cloned(),
        )?))
    }
}

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

fn usage(f: Function) -> String {
    format!(
        "call it as {0}('table', 'k = 10, qi = [\"age\", \"zip\"]'), {0}('table', 'config = \"configs/adult.toml\"') or {0}((SELECT ... FROM ...), k => 10, config => 'configs/adult.toml')",
        f.name()
    )
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

/// Plans `anonymize(...)` and `kanon_risk(...)` in a FROM clause when a
/// subquery stands for the table (`anonymize((SELECT ... WHERE ...), ...)`)
/// or when settings are given as named arguments (`k => 10`,
/// `config => 'configs/adult.toml'`); other calls go on to the table
/// functions.
#[derive(Debug, Default)]
pub struct KanonRelationPlanner {
    files: Arc<FileAccess>,
}

impl KanonRelationPlanner {
    /// The planner, reading files named by the options only where `files`
    /// allows.
    pub fn new(files: Arc<FileAccess>) -> Self {
        KanonRelationPlanner { files }
    }
}

impl RelationPlanner for KanonRelationPlanner {
    fn plan_relation(
        &self,
        relation: TableFactor,
        context: &mut dyn RelationPlannerContext,
    ) -> Result<RelationPlanning> {
        let f = match &relation {
            TableFactor::Table {
                name,
                args: Some(_),
                ..
            } if name.0.len() == 1 => {
                let ident = name.0[0]
                    .as_ident()
                    .cloned()
                    .unwrap_or_else(|| Ident::new(""));
                match context.normalize_ident(ident).as_str() {
                    ANONYMIZE => Function::Anonymize,
                    KANON_RISK => Function::Risk,
                    _ => return Ok(RelationPlanning::Original(Box::new(relation))),
                }
            }
            _ => return Ok(RelationPlanning::Original(Box::new(relation))),
        };
        let TableFactor::Table {
            alias,
            args: Some(args),
            ..
        } = relation
        else {
            unreachable!("matched above")
        };
        let name = f.name();
        let mut source: Option<ast::Expr> = None;
        let mut options: Option<String> = None;
        let mut named: Map<String, Value> = Map::new();
        let mut positional = 0;
        for arg in args.args {
            match arg {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => {
                    match positional {
                        0 => source = Some(e),
                        1 => options = Some(option_string(context, e, f)?),
                        _ => return plan_err!("{name}() takes a table and an options string, and settings as named arguments; {}", usage(f)),
                    }
                    positional += 1;
                }
                FunctionArg::Named {
                    name: key,
                    arg: FunctionArgExpr::Expr(e),
                    ..
                } => {
                    let key = context.normalize_ident(key);
                    match key.as_str() {
                        "table" => source = Some(e),
                        "options" => options = Some(option_string(context, e, f)?),
                        _ => {
                            named.insert(key.clone(), option_value(context, e, &key, f)?);
                        }
                    }
                }
                other => {
                    return plan_err!("{name}(): unsupported argument `{other}`; {}", usage(f))
                }
            }
        }
        let Some(source) = source else {
            return plan_err!("{name}() needs a table; {}", usage(f));
        };
        let mut settings = parse_options(options.as_deref().unwrap_or(""), name)?;
        let mut merged = Map::new();
        merged.append(&mut settings);
        for (k, v) in named {
            merged.insert(k, v);
        }
        let input = match source {
            ast::Expr::Subquery(query) => Some(context.plan(TableFactor::Derived {
                lateral: false,
                subquery: query,
                alias: None,
                sample: None,
            })?),
            ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_) => {
                return plan_err!(
                    "{name}(): write the table name as a string, {name}('{source}', ...), or pass a query, {name}((SELECT * FROM {source}), ...)"
                )
            }
            other => {
                let table = match context.sql_to_expr(other, &DFSchema::empty())? {
                    Expr::Literal(ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)), _) => s,
                    Expr::Literal(v, _) if v.is_null() => {
                        return plan_err!("{name}(): the table argument is NULL; name a registered table or view; {}", usage(f))
                    }
                    e => return plan_err!("{name}(): the first argument must name a table or view (a string) or be a subquery, got `{e}`; {}", usage(f)),
                };
                // A CTE, or a table DataFusion already resolved for this
                // statement, plans directly; anything else is looked up in
                // the session by the table function.
                let reference = TableReference::from(table.as_str());
                let object = ObjectName(
                    reference
                        .to_vec()
                        .into_iter()
                        .map(|p| ObjectNamePart::Identifier(Ident::with_quote('"', p)))
                        .collect(),
                );
                match context.plan(TableFactor::Table {
                    name: object,
                    alias: None,
                    args: None,
                    with_hints: vec![],
                    version: None,
                    with_ordinality: false,
                    partitions: vec![],
                    json_path: None,
                    sample: None,
                    index_hints: vec![],
                }) {
                    Ok(plan) => Some(plan),
                    Err(_) => {
                        let json = serde_json::to_string(&Value::Object(merged.clone()))
                            .map_err(|e| plan_datafusion_err!("{name}(): {e}"))?;
                        let source = context
                            .context_provider()
                            .get_table_function_source(name, vec![lit(table.clone()), lit(json)])?;
                        let plan = LogicalPlanBuilder::scan(format!("{name}()"), source, None)?.build()?;
                        return Ok(RelationPlanning::Planned(Box::new(PlannedRelation::new(plan, alias))));
                    }
                }
            }
        };
        let input = input.expect("planned above");
        let job = Arc::new(Job::try_new(
            settings_from(merged, name, &self.files)?,
            name,
        )?);
        let provider = f.table(input, job)?;
        let plan =
            LogicalPlanBuilder::scan(format!("{name}()"), provider_as_source(provider), None)?
                .build()?;
        Ok(RelationPlanning::Planned(Box::new(PlannedRelation::new(
            plan, alias,
        ))))
    }
}

fn option_string(
    context: &mut dyn RelationPlannerContext,
    e: ast::Expr,
    f: Function,
) -> Result<String> {
    match context.sql_to_expr(e, &DFSchema::empty())? {
        Expr::Literal(ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)), _) => Ok(s),
        Expr::Literal(v, _) if v.is_null() => plan_err!(
            "{}(): the options are NULL; give the settings as a string; {}",
            f.name(),
            usage(f)
        ),
        other => plan_err!(
            "{}(): the options must be a string, got `{other}`; {}",
            f.name(),
            usage(f)
        ),
    }
}

fn option_value(
    context: &mut dyn RelationPlannerContext,
    e: ast::Expr,
    key: &str,
    f: Function,
) -> Result<Value> {
    let name = f.name();
    let v = match context.sql_to_expr(e, &DFSchema::empty())? {
        Expr::Literal(v, _) => v,
        other => return plan_err!("{name}(): argument `{key}` must be a constant, got `{other}`"),
    };
    Ok(match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::Utf8View(Some(s))
        | ScalarValue::LargeUtf8(Some(s)) => Value::String(s),
        ScalarValue::Boolean(Some(b)) => Value::Bool(b),
        ScalarValue::Float64(Some(x)) => serde_json::Number::from_f64(x)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        v if v.is_null() => return plan_err!("{name}(): argument `{key}` is NULL"),
        v => match v.cast_to(&arrow::datatypes::DataType::Int64) {
            Ok(ScalarValue::Int64(Some(i))) => Value::from(i),
            _ => match v.cast_to(&arrow::datatypes::DataType::Float64) {
                Ok(ScalarValue::Float64(Some(x))) => serde_json::Number::from_f64(x)
                    .map(Value::Number)
                    .unwrap_or(Value::Null),
                _ => {
                    return plan_err!(
                        "{name}(): argument `{key}` must be a string, number or boolean"
                    )
                }
            },
        },
    })
}
