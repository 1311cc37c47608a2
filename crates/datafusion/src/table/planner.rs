//! The relation planner ([`KanonRelationPlanner`]) that plans
//! `anonymize(...)` and `kanon_risk(...)` in a FROM clause when a subquery
//! stands for the table or settings are given as named arguments; other
//! calls go on to the table functions.

use std::sync::Arc;

use datafusion::common::{
    plan_datafusion_err, plan_err, DFSchema, Result, ScalarValue, TableReference,
};
use datafusion::datasource::provider_as_source;
use datafusion::logical_expr::planner::{
    PlannedRelation, RelationPlanner, RelationPlannerContext, RelationPlanning,
};
use datafusion::logical_expr::{lit, Expr, LogicalPlanBuilder};
use datafusion::sql::sqlparser::ast::{
    self, FunctionArg, FunctionArgExpr, Ident, ObjectName, ObjectNamePart, TableFactor,
};
use serde_json::{Map, Value};

use super::{usage, Function, ANONYMIZE, KANON_RISK};
use crate::options::{parse_options, settings_from, FileAccess, Job};

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
