//! The tables `anonymize(...)` and `kanon_risk(...)` return
//! ([`AnonymizeTable`], [`RiskTable`]): their schemas are known at
//! planning, and scanning plans the input with only the columns the engine
//! needs before handing it to [`AnonymizeExec`] or [`KanonRiskExec`].

use std::collections::HashSet;
use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{plan_datafusion_err, Column, Result};
use datafusion::execution::context::SessionState;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, TableType};
use datafusion::physical_plan::ExecutionPlan;
use kanon_engine::encode::Encoder;
use kanon_engine::recode::release_schema;
use kanon_engine::spec::Role;

use super::{ANONYMIZE, KANON_RISK};
use crate::error::engine_error;
use crate::exec::AnonymizeExec;
use crate::options::Job;
use crate::risk::{risk_schema, KanonRiskExec};

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
        kanon_engine::release::Session::new(
            job.spec(),
            job.hierarchies(),
            &in_schema,
            "the input table",
        )
        .map_err(|e| engine_error(ANONYMIZE, e, true))?;
        let schema = release_schema(job.spec(), &in_schema);
        Ok(AnonymizeTable { input, job, schema })
    }
}

/// The columns the engine reads: QIs and sensitive attributes, and the
/// research subset of a δ-presence job.
fn engine_columns(job: &Job) -> HashSet<&str> {
    job.spec()
        .attributes
        .iter()
        .filter(|a| matches!(a.role, Role::QuasiIdentifier | Role::Sensitive))
        .map(|a| a.name.as_str())
        .chain(job.spec().presence_subset())
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
    let mut single = match state.as_any().downcast_ref::<SessionState>() {
        Some(s) => s.clone(),
        // A session of another library, through DataFusion's FFI (the Python
        // package's `kanon.register` in datafusion-python): its planner would
        // need the plan serialised, and a scan of its own tables cannot be.
        // The input is planned here, on a session with its configuration;
        // its tables are still scanned by their own providers.
        None => SessionStateBuilder::new()
            .with_config(state.config().clone())
            .with_runtime_env(Arc::clone(state.runtime_env()))
            .with_default_features()
            .build(),
    };
    single
        .config_mut()
        .options_mut()
        .execution
        .target_partitions = 1;
    single.create_physical_plan(&plan).await
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
        // The identifying and pseudonymised columns are read too: repeated
        // values may be one person's rows (kanon_engine::identities).
        keep.extend(
            self.job
                .spec()
                .attributes
                .iter()
                .filter(|a| matches!(a.role, Role::Identifying | Role::Pseudonymised))
                .map(|a| a.name.as_str()),
        );
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
        // The published labels, as table_risk reads them (the entity
        // column stays: with privacy.entity, the figures count people).
        let labels = job.spec().labels_only();
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
        // The entity column too: with privacy.entity, the figures count
        // people.
        let mut keep = engine_columns(&self.job);
        keep.extend(self.job.spec().entity_column());
        let input = input_plan(state, &self.input, &keep).await?;
        Ok(Arc::new(KanonRiskExec::try_new(
            input,
            Arc::clone(&self.job),
            projection.cloned(),
        )?))
    }
}
