//! [`KanonRiskExec`]: the plan node of `kanon_risk(...)`, one row of
//! re-identification risk and information loss of its input, computed by
//! [`kanon_engine::metrics::risk::table_risk`].

use std::fmt;
use std::sync::{Arc, OnceLock};

use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use kanon_engine::metrics::risk::table_risk;
use kanon_engine::spec::Role;

use crate::error::engine_error;
use crate::exec::{consume, only_child, only_partition};
use crate::options::Job;

/// The columns of `kanon_risk(...)`.
pub fn risk_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    Arc::clone(SCHEMA.get_or_init(|| {
        let int = |n: &str| Field::new(n, DataType::Int64, false);
        let float = |n: &str| Field::new(n, DataType::Float64, false);
        Arc::new(Schema::new(vec![
            int("rows"),
            int("k"),
            int("classes"),
            int("smallest_class"),
            int("largest_class"),
            int("classes_below_k"),
            int("rows_below_k"),
            float("max_risk"),
            float("avg_risk"),
            Field::new("l_achieved", DataType::Int64, true),
            float("ncp"),
            int("excluded_rows"),
            Field::new("requirements_met", DataType::Boolean, false),
            int("rows_below_requirements"),
            Field::new("requirements", DataType::Utf8, false),
            float("risk_threshold"),
            int("records_above_threshold"),
            float("marketer_risk"),
            int("sample_uniques"),
            Field::new("population_uniques", DataType::Float64, true),
            Field::new("uniqueness_model", DataType::Utf8, true),
            Field::new("msus", DataType::Int64, true),
            Field::new("riskiest_qis", DataType::Utf8, true),
            Field::new("models_met", DataType::Boolean, true),
            Field::new("models", DataType::Utf8, true),
        ]))
    }))
}

/// Computes the risk report of its input (one row).
#[derive(Debug, Clone)]
pub struct KanonRiskExec {
    input: Arc<dyn ExecutionPlan>,
    job: Arc<Job>,
    projection: Option<Vec<usize>>,
    cache: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl KanonRiskExec {
    /// The risk report of `input` for the QIs of `job`.
    ///
    /// # Errors
    /// When the projection does not fit the report's columns.
    pub(crate) fn try_new(
        input: Arc<dyn ExecutionPlan>,
        job: Arc<Job>,
        projection: Option<Vec<usize>>,
    ) -> Result<Self> {
        let schema = match &projection {
            Some(p) => Arc::new(risk_schema().project(p)?),
            None => risk_schema(),
        };
        let cache = PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        Ok(KanonRiskExec {
            input,
            job,
            projection,
            cache: Arc::new(cache),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }
}

impl DisplayAs for KanonRiskExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let spec = self.job.spec();
        let names = |role: Role| {
            spec.attributes
                .iter()
                .filter(|a| a.role == role)
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let pairs = [
            format!("k={}", spec.privacy.k),
            format!("qi=[{}]", names(Role::QuasiIdentifier)),
            format!("sensitive=[{}]", names(Role::Sensitive)),
        ];
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(f, "KanonRiskExec: {}", pairs.join(", "))
            }
            DisplayFormatType::TreeRender => write!(f, "{}", pairs.join("\n")),
        }
    }
}

impl ExecutionPlan for KanonRiskExec {
    fn name(&self) -> &'static str {
        "KanonRiskExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(KanonRiskExec::try_new(
            only_child("KanonRiskExec", children)?,
            Arc::clone(&self.job),
            self.projection.clone(),
        )?))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        only_partition("KanonRiskExec", partition)?;
        let input = Arc::clone(&self.input);
        let job = Arc::clone(&self.job);
        let projection = self.projection.clone();
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let rows_in = MetricBuilder::new(&self.metrics).counter("rows_in", partition);
        let schema = self.schema();
        let run = async move {
            let held = consume(
                &input,
                &context,
                &format!("KanonRiskExec[{partition}]"),
                |b| {
                    rows_in.add(b.num_rows());
                    Ok(())
                },
            )
            .await?;
            let in_schema = input.schema();
            let task = SpawnedTask::spawn_blocking(move || {
                let timer = baseline.elapsed_compute().timer();
                let r = table_risk(job.spec(), job.hierarchies(), &in_schema, &held.batches)
                    .map_err(|e| engine_error("kanon_risk", e, false))?;
                drop(held);
                let i = |v: usize| Arc::new(Int64Array::from(vec![v as i64])) as ArrayRef;
                let x = |v: f64| Arc::new(Float64Array::from(vec![v])) as ArrayRef;
                let s = |v: Option<String>| Arc::new(StringArray::from(vec![v])) as ArrayRef;
                let p = &r.profile;
                let batch = RecordBatch::try_new(
                    risk_schema(),
                    vec![
                        i(r.rows),
                        i(job.spec().privacy.k),
                        i(r.classes),
                        i(r.smallest_class),
                        i(r.largest_class),
                        i(r.classes_below_k),
                        i(r.rows_below_k),
                        x(r.max_risk),
                        x(r.avg_risk),
                        Arc::new(Int64Array::from(vec![r.l_achieved.map(|l| l as i64)])),
                        x(r.ncp),
                        i(r.excluded_rows),
                        Arc::new(BooleanArray::from(vec![r
                            .requirements
                            .iter()
                            .all(|q| q.is_met())])),
                        i(r.rows_below_requirements),
                        s(Some(
                            r.requirements
                                .iter()
                                .map(|q| format!("{}: achieved {}", q.requirement, q.achieved_k))
                                .collect::<Vec<_>>()
                                .join("; "),
                        )),
                        x(p.prosecutor.threshold),
                        i(p.prosecutor.records_above_threshold),
                        x(p.marketer),
                        i(p.sample_uniques.records),
                        Arc::new(Float64Array::from(vec![p
                            .population_uniqueness
                            .as_ref()
                            .and_then(|u| u.dankar.share)])),
                        s(p.population_uniqueness
                            .as_ref()
                            .and_then(|u| u.dankar_model)
                            .map(|m| format!("{m:?}").to_lowercase())),
                        Arc::new(Int64Array::from(vec![p
                            .msus
                            .as_ref()
                            .map(|m| m.msus as i64)])),
                        s(p.msus
                            .as_ref()
                            .and_then(|m| m.top_combinations.first())
                            .map(|c| c.attributes.join(", "))),
                        Arc::new(BooleanArray::from(vec![
                            (!r.models.is_empty()).then(|| r.models.iter().all(|m| m.met))
                        ])),
                        s((!r.models.is_empty()).then(|| {
                            r.models
                                .iter()
                                // A violation names its model already.
                                .map(|m| match m.met {
                                    true => format!("{}: {}", m.model, m.detail),
                                    false => m.detail.clone(),
                                })
                                .collect::<Vec<_>>()
                                .join("; ")
                        })),
                    ],
                )?;
                let batch = match &projection {
                    Some(p) => batch.project(p)?,
                    None => batch,
                };
                timer.done();
                baseline.record_output(batch.num_rows());
                Ok::<_, DataFusionError>(batch)
            });
            task.join()
                .await
                .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))?
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            futures::stream::once(run),
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
