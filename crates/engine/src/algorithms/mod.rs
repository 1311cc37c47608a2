//! The anonymisation algorithms, behind one trait and a registry by name
//! ([`registry`]: name, summary, capabilities, builder).
//!
//! Every algorithm reads the encoded table and its classes and returns a
//! [`Partition`]; none writes output, verifies or computes metrics itself.

pub mod cover;
pub mod datafly;
pub mod heuristic_min;
pub mod incognito;
pub mod kaca;
pub mod l_clustering;
pub(crate) mod lattice;
pub mod mdav;
pub mod mondrian;
pub mod partitioned;
pub mod registry;
pub mod safepub;
pub mod sbc;

use serde::Serialize;

use crate::encode::{EquivalenceClasses, QiTable};
use crate::error::{Error, Result};
use crate::partition::Partition;
use crate::privacy::Privacy;
use crate::spec::JobSpec;

/// What an algorithm sees.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The encoded working set.
    pub table: &'a QiTable,
    /// Its equivalence classes (identical QI tuples).
    pub classes: &'a EquivalenceClasses,
    /// The privacy models to satisfy and the suppression limit.
    pub privacy: &'a Privacy,
    /// The whole job (algorithm parameters, seed, attribute weights).
    pub spec: &'a JobSpec,
    /// Checked in every algorithm's inner loops: stop with
    /// [`Error::Cancelled`] once it fires.
    pub cancel: &'a crate::cancel::Cancellation,
    /// Where the algorithm reports how much of its work is done (optional;
    /// see [`crate::progress`]).
    pub progress: &'a dyn crate::progress::Progress,
    /// Where a block-wise run clusters its blocks
    /// ([`partitioned::LocalBlocks`] unless a front end names another).
    pub blocks: &'a dyn partitioned::BlockExecutor,
}

#[cfg(test)]
impl<'a> Context<'a> {
    /// The context of a unit test: never cancelled, no progress, blocks
    /// clustered on this machine.
    pub(crate) fn local(
        table: &'a QiTable,
        classes: &'a EquivalenceClasses,
        privacy: &'a Privacy,
        spec: &'a JobSpec,
    ) -> Self {
        Context {
            table,
            classes,
            privacy,
            spec,
            cancel: crate::cancel::Cancellation::never(),
            progress: crate::progress::Silent::sink(),
            blocks: partitioned::LocalBlocks::get(),
        }
    }
}

/// What an algorithm returns.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The groups, their published tuples and the suppressed rows.
    pub partition: Partition,
    /// Algorithm-specific facts for the report (chosen lattice node, nodes
    /// expanded, ...), as JSON.
    pub details: serde_json::Value,
}

/// An anonymisation algorithm.
///
/// An algorithm reads the encoded table and returns a [`Partition`]: which
/// rows form each group (and which are suppressed) and the tuple each group
/// publishes. It never verifies, writes or measures: the release path does,
/// and refuses a partition that breaks the job's privacy models (fail
/// closed). Registered by name ([`registry::register`]), it is what a job's
/// `[algorithm] name` runs, from the command line, SQL and Python alike.
///
/// # Example: a new algorithm
///
/// ```
/// use std::sync::Arc;
/// use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
/// use arrow::datatypes::{DataType, Field, Schema};
/// use kanon_engine::algorithms::registry::{self, Capabilities, Registration};
/// use kanon_engine::algorithms::{Algorithm, Context, Outcome};
/// use kanon_engine::{encode::Encoder, partition::Partition, spec::JobSpec};
///
/// /// Publishes the whole table as one class: the coarsest local recoding.
/// #[derive(Debug)]
/// struct OneClass;
///
/// impl Algorithm for OneClass {
///     fn name(&self) -> &'static str {
///         "one-class"
///     }
///     fn run(&self, ctx: &Context<'_>) -> kanon_engine::Result<Outcome> {
///         ctx.cancel.check()?; // in every inner loop of a real algorithm
///         let group_of_row = vec![0; ctx.table.n_rows()];
///         Ok(Outcome {
///             // Each group publishes its tightest cells.
///             partition: Partition::tightest(ctx.table, group_of_row),
///             details: serde_json::json!({ "classes": 1 }),
///         })
///     }
/// }
///
/// registry::register(Registration {
///     name: "one-class",
///     summary: "every row in one class",
///     // No l-diversity, no block-wise runs: jobs asking for them are refused.
///     capabilities: Capabilities::NONE,
///     build: |_params| Ok(Box::new(OneClass)),
/// })?;
///
/// let spec: JobSpec = serde_json::from_str(r#"{
///     "privacy": {"k": 3},
///     "algorithm": {"name": "one-class"},
///     "attributes": [{"name": "age", "role": "quasi-identifier"},
///                    {"name": "city", "role": "quasi-identifier"}]}"#)?;
/// let schema = Arc::new(Schema::new(vec![
///     Field::new("age", DataType::Int64, false),
///     Field::new("city", DataType::Utf8, false),
/// ]));
/// let batch = RecordBatch::try_new(schema.clone(), vec![
///     Arc::new(Int64Array::from(vec![30, 41, 52, 33])) as ArrayRef,
///     Arc::new(StringArray::from(vec!["Lyon", "Nice", "Lyon", "Paris"])),
/// ])?;
/// let mut encoder = Encoder::try_new(&spec, &Default::default(), &schema)?;
/// encoder.push(&batch)?;
/// let table = encoder.finish()?;
///
/// // Runs it, verifies the partition against k = 3 and measures it.
/// let run = kanon_engine::anonymize(&spec, &table)?;
/// assert_eq!(run.algorithm, "one-class");
/// assert_eq!(run.report.smallest_class, 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Algorithm: Send + Sync + std::fmt::Debug {
    /// The registered name.
    fn name(&self) -> &'static str;
    /// Computes a partition satisfying `ctx.privacy`.
    ///
    /// # Errors
    /// [`Error::Unsatisfiable`] when the model cannot be met; [`Error::Spec`]
    /// for a job the algorithm cannot honour.
    fn run(&self, ctx: &Context<'_>) -> Result<Outcome>;

    /// The parameters of the top-down cuts the algorithm makes itself
    /// (Mondrian's), so that a block-wise run cuts its blocks the same way
    /// and each block continues those cuts ([`partitioned`]); `None` for
    /// algorithms that do not cut top-down.
    fn top_down_cuts(&self) -> Option<&mondrian::MondrianParams> {
        None
    }
}

/// The algorithm a job names ([`registry`]), with its parameters parsed,
/// after checking that it honours the job ([`registry::Capabilities`]);
/// run block by block as [`partitioned::wrap`] decides.
///
/// # Errors
/// [`Error::Spec`] for an unknown name, bad parameters, or a job the
/// algorithm does not honour (l-diversity without the capability).
pub fn by_name(spec: &JobSpec) -> Result<Box<dyn Algorithm>> {
    let registration = registry::lookup(&spec.algorithm.name)?;
    let asks = if spec.privacy.l.is_some() {
        Some(("privacy.l", "l-diversity", "`l`"))
    } else if !spec.privacy.models.is_empty() {
        Some((
            "privacy.models",
            "privacy models beyond k",
            "`[privacy.models]`",
        ))
    } else {
        None
    };
    if let (Some((setting, what, remove)), false) = (asks, registration.capabilities.l_diversity) {
        let with_l: Vec<&str> = registry::all()
            .iter()
            .filter(|r| r.capabilities.l_diversity)
            .map(|r| r.name)
            .collect();
        return Err(Error::spec(
            setting,
            format!(
                "`{}` does not honour {what}; remove {remove} or choose one of: {}",
                registration.name,
                with_l.join(", ")
            ),
        ));
    }
    match partitioned::wrap(spec, registration.capabilities)? {
        Some(blockwise) => Ok(blockwise),
        None => (registration.build)(&spec.algorithm),
    }
}

/// The algorithm a job names, run on whatever table it is given.
pub(crate) fn whole_table(spec: &JobSpec) -> Result<Box<dyn Algorithm>> {
    (registry::lookup(&spec.algorithm.name)?.build)(&spec.algorithm)
}

/// Serialises algorithm details, mapping failure to an internal error.
pub(crate) fn details<T: Serialize>(value: &T) -> Result<serde_json::Value> {
    serde_json::to_value(value).map_err(|e| Error::Internal(e.to_string()))
}
