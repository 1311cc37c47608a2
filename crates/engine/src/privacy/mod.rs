//! Privacy models: what a published class must satisfy.
//!
//! A model tests one class of a release ([`PrivacyModel::accepts`]); the
//! verifier ([`crate::verify`]) and the algorithms ask the models instead of
//! re-implementing them. Models declare whether they are monotone under
//! generalisation (merging two accepted classes gives an accepted class),
//! which search algorithms need for sound pruning.
//!
//! Besides k-anonymity the module holds the three l-diversity models of
//! Machanavajjhala et al. ("l-Diversity: Privacy beyond k-anonymity", ICDE
//! 2006; `docs/SPEC.md` section 1): [`DistinctLDiversity`],
//! [`EntropyLDiversity`] and [`RecursiveCLDiversity`], each on one sensitive
//! column; [`TCloseness`] of Li, Li and Venkatasubramanian ("t-Closeness:
//! Privacy Beyond k-Anonymity and l-Diversity", ICDE 2007), on one
//! sensitive column with three ground distances; [`BetaLikeness`] (Cao and
//! Karras, PVLDB 2012) and [`DeltaDisclosure`] (Brickell and Shmatikov, KDD
//! 2008), which bound each value's frequency in a class against the
//! table's; [`RiskThreshold`] and [`AverageRisk`], bounds on the largest
//! and the mean prosecutor risk of a release (the latter as ARX's average
//! re-identification risk, with records at risk); [`UniquenessThreshold`],
//! a bound on the sample or estimated population uniques; and [`KMap`],
//! Sweeney's k-map estimated from the sampling fraction as ARX does; and
//! [`DifferentialPrivacy`], (ε, δ)-differential privacy by SafePub's
//! sampling and the k it derives. [`DeltaPresence`] bounds what a release
//! tells about whether a person of a population is in the data; it is a
//! whole-release model over the population, kept apart like the
//! requirements.
//!
//! One model per file: [`KAnonymity`] and the l-diversity models; an
//! anonymity [`Requirement`] on a subset of the QIs is not a per-class
//! model and lives apart, and [`Privacy`] gathers all of a job's models.

use std::fmt::Debug;

use crate::encode::QiTable;
use crate::error::{Error, Result};

mod job;
mod k_anonymity;
mod l_diversity;
mod likeness;
pub(crate) use l_diversity::hitting_number_of;
mod average_risk;
mod delta_presence;
mod differential_privacy;
mod k_map;
pub mod registry;
mod requirement;
mod risk_threshold;
mod t_closeness;
mod uniqueness;

pub use average_risk::AverageRisk;
pub use delta_presence::{DeltaPresence, PresenceCount};
pub use differential_privacy::{DifferentialPrivacy, DpSearch, GeneralisationDegree};
pub use job::Privacy;
pub use k_anonymity::KAnonymity;
pub use k_map::{CellSizeEstimator, KMap};
pub(crate) use l_diversity::{entropy, frequencies};
pub use l_diversity::{DistinctLDiversity, EntropyLDiversity, RecursiveCLDiversity};
pub use likeness::{BetaLikeness, DeltaDisclosure};
pub use requirement::Requirement;
pub use risk_threshold::RiskThreshold;
pub use t_closeness::{GroundDistance, TCloseness};
pub use uniqueness::{UniquenessThreshold, UniquenessThresholdModel};

/// The sizes of the published classes of an algorithm's partition (groups
/// with equal published tuples are one class), for whole-release models
/// that judge a release by its class sizes.
pub(crate) fn published_class_sizes(partition: &crate::partition::Partition) -> Vec<usize> {
    let (class_of_group, classes) = partition.published_classes();
    let mut class_sizes = vec![0usize; classes];
    for (g, size) in partition.group_sizes().into_iter().enumerate() {
        class_sizes[class_of_group[g] as usize] += size;
    }
    class_sizes.retain(|&s| s > 0);
    class_sizes
}

/// One class of a (working or released) table, as models see it.
#[derive(Debug, Clone, Copy)]
pub struct ClassView<'a> {
    /// The table the rows belong to.
    pub table: &'a QiTable,
    /// The rows of the class.
    pub rows: &'a [u32],
}

/// A privacy model over the classes of a release.
///
/// The algorithms ask the models whether a class may be published, and both
/// verifiers decide with [`PrivacyModel::accepts`], so a model is defined
/// once. Registered by name ([`registry::register`]), it is what a job's
/// `[privacy.models.NAME]` section names; its capabilities default to the
/// conservative answers (not monotone, reads the rows), which are always
/// correct and only make searches prune less.
///
/// # Example: a new model
///
/// ```
/// use std::sync::Arc;
/// use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
/// use arrow::datatypes::{DataType, Field, Schema};
/// use kanon_engine::privacy::registry::{self, ModelRegistration};
/// use kanon_engine::privacy::{ClassView, PrivacyModel};
/// use kanon_engine::{encode::Encoder, spec::JobSpec, Error};
///
/// /// Every published class holds at least `m` rows.
/// #[derive(Debug)]
/// struct AtLeast {
///     m: usize,
/// }
///
/// impl PrivacyModel for AtLeast {
///     fn describe(&self) -> String {
///         format!("at least {} rows", self.m)
///     }
///     fn min_class_size(&self) -> usize {
///         self.m
///     }
///     fn accepts(&self, class: ClassView<'_>) -> bool {
///         class.rows.len() >= self.m
///     }
/// }
///
/// registry::register(ModelRegistration {
///     name: "at-least",
///     summary: "every class holds at least m rows",
///     // The job and the parameters under [privacy.models.at-least].
///     build: |_job, params| {
///         let m = params["m"].as_u64().ok_or_else(|| {
///             Error::spec("privacy.models.at-least.m", "give m, a number of rows")
///         })?;
///         Ok(vec![Box::new(AtLeast { m: m as usize })])
///     },
/// })?;
///
/// let spec: JobSpec = serde_json::from_str(r#"{
///     "privacy": {"k": 2, "models": {"at-least": {"m": 4}}},
///     "algorithm": {"name": "mondrian"},
///     "attributes": [{"name": "age", "role": "quasi-identifier"},
///                    {"name": "city", "role": "quasi-identifier"}]}"#)?;
/// let schema = Arc::new(Schema::new(vec![
///     Field::new("age", DataType::Int64, false),
///     Field::new("city", DataType::Utf8, false),
/// ]));
/// let batch = RecordBatch::try_new(schema.clone(), vec![
///     Arc::new(Int64Array::from(vec![30, 41, 52, 33, 47, 38, 29, 60])) as ArrayRef,
///     Arc::new(StringArray::from(vec!["Lyon", "Nice", "Lyon", "Paris", "Nice", "Lyon", "Paris", "Nice"])),
/// ])?;
/// let mut encoder = Encoder::try_new(&spec, &Default::default(), &schema)?;
/// encoder.push(&batch)?;
/// let table = encoder.finish()?;
///
/// // Mondrian cuts only where both parts satisfy k = 2 and the new model;
/// // the release is verified against both.
/// let run = kanon_engine::anonymize(&spec, &table)?;
/// assert!(run.report.smallest_class >= 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait PrivacyModel: Debug + Send + Sync {
    /// A readable name with parameters, e.g. `k-anonymity (k = 10)`.
    fn describe(&self) -> String;
    /// The smallest class the model can accept (k for k-anonymity).
    fn min_class_size(&self) -> usize;
    /// Whether a class satisfies the model.
    fn accepts(&self, class: ClassView<'_>) -> bool;
    /// Whether the union of two accepted classes is always accepted.
    /// Searches prune with it (Incognito, Datafly), so a wrong `true`
    /// publishes a release that was never checked node by node: the default
    /// is the conservative `false`, and each model that is monotone says so.
    fn is_monotone(&self) -> bool {
        false
    }
    /// Whether adding `row` to `class`, which this model does not accept
    /// yet, moves the class towards acceptance. Algorithms that grow a class
    /// tuple by tuple (L-clustering) pick their candidates with it. The
    /// default, every row helps, suits size-only models such as k-anonymity.
    fn helps(&self, class: ClassView<'_>, row: u32) -> bool {
        let _ = (class, row);
        true
    }
    /// Whether a class containing an accepted class is always accepted, so
    /// merging classes never adds rows to the rejected ones (ARX: "monotonic
    /// with suppression"). Lattice searches (Incognito) prune soundly under a
    /// suppression limit only when every model says so; `false`, the
    /// default, is always safe (no pruning).
    fn is_monotone_with_suppression(&self) -> bool {
        false
    }
    /// Whether [`PrivacyModel::accepts`] looks at the rows of a class.
    /// `false` promises that `accepts(class)` is exactly
    /// `class.rows.len() >= self.min_class_size()`, so searches may test
    /// classes by their sizes alone (the lattice of Datafly and Incognito
    /// rolls up counts, not row lists). `true`, the default, is always
    /// correct, only slower.
    fn needs_rows(&self) -> bool {
        true
    }
    /// The sensitive columns the model reads. `None`, the default, means
    /// unknown and is taken as every column.
    fn sensitive_columns(&self) -> Option<Vec<&str>> {
        None
    }
    /// Whether the model counts each person once when rows stand for
    /// people holding several values of a sensitive column
    /// ([`crate::entity`], [`crate::table::ValueSets`]). A model that does
    /// not (the default) only sees one of each person's values, so a job
    /// whose people hold several values of a column it reads is refused.
    fn counts_value_sets(&self) -> bool {
        false
    }
    /// Checks a whole release: `classes` are all its published classes, as
    /// rows of `table` (the rows of the classes are exactly the published
    /// rows). Returns what violates the model, described by counts only
    /// (never a value), or `None` when the release satisfies it.
    ///
    /// Both verifiers ([`crate::verify`]) decide with this method, and
    /// their decision is final: a release it rejects is never published.
    /// The default rejects the release when [`PrivacyModel::accepts`]
    /// rejects a class. Models with a part that is a property of the whole
    /// release rather than of one class override it: the mean risk of
    /// [`RiskThreshold`], and [`TCloseness`], whose reference distribution
    /// is that of the published rows (what a reader of the release sees).
    fn check_release(&self, table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        let failing = classes
            .iter()
            .filter(|rows| !self.accepts(ClassView { table, rows }))
            .count();
        (failing > 0).then(|| format!("{failing} published classes violate {}", self.describe()))
    }
    /// What the release achieves under this model, in one line of figures
    /// (never a value), e.g. `largest distance 0.1432` for t-closeness:
    /// what a report shows next to the model. `None`, the default, says
    /// nothing beyond passing.
    fn achieved(&self, table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        let _ = (table, classes);
        None
    }
    /// Checks, after the algorithm and before the verification, a part of
    /// the model that is a property of the whole release which the
    /// algorithms do not aim at (the mean risk of a [`RiskThreshold`]), on
    /// the algorithm's `partition`. Missing it means
    /// the model cannot be reached by this algorithm on this input, not a
    /// bug, so it is [`Error::Unsatisfiable`] (exit 3), and the verifier
    /// still refuses such a release whatever this says. The default checks
    /// nothing.
    ///
    /// # Errors
    /// [`Error::Unsatisfiable`] saying what was reached and how to reach it.
    fn check_reached(&self, partition: &crate::partition::Partition) -> Result<()> {
        let _ = partition;
        Ok(())
    }
    /// A class size with which every release meets this model's
    /// whole-release part ([`PrivacyModel::check_reached`]): when the
    /// algorithm's release misses it, the pipeline runs the algorithm again
    /// with a larger smallest class, searching for the smallest size
    /// between the job's and this one that reaches it
    /// ([`crate::pipeline::anonymize`]). `None`, the default, says larger
    /// classes do not help (or there is no such part): a miss then stops
    /// the job.
    fn reached_with_classes_of(&self) -> Option<usize> {
        None
    }
    /// Whether the model bounds the re-identification risk of every record
    /// on its own (an average-risk or uniqueness threshold), so a job that
    /// names it may leave k at 1 (ARX's risk-based models are used this
    /// way). `false`, the default, keeps the rule that a job sets k >= 2
    /// or l >= 2.
    fn protects_alone(&self) -> bool {
        false
    }
    /// The model for a sample of `rows` records, for models whose
    /// threshold depends on the size of the sample (estimated k-map derives
    /// its class size from the sampling fraction). The pipeline binds every
    /// model to the rows it anonymises before the algorithm runs; `None`,
    /// the default, keeps the model as it is.
    fn for_sample(&self, rows: usize) -> Option<Box<dyn PrivacyModel>> {
        let _ = rows;
        None
    }
    /// Checks, before any work, that the table (with `active_rows` rows the
    /// algorithms may publish, of which up to `max_suppressed` may be
    /// withheld) can satisfy the model at all.
    ///
    /// # Errors
    /// [`Error::Unsatisfiable`] explaining why not.
    fn check_feasible(
        &self,
        table: &QiTable,
        active_rows: usize,
        max_suppressed: usize,
    ) -> Result<()> {
        let _ = (table, max_suppressed);
        if active_rows > 0 && active_rows < self.min_class_size() {
            return Err(Error::Unsatisfiable(format!(
                "{} needs at least {} rows but the input has {active_rows}; lower the parameter or add data",
                self.describe(),
                self.min_class_size()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model is taken as monotone only when it says so: searches prune
    /// with monotonicity, so the default must be the safe one.
    #[test]
    fn a_model_is_not_monotone_unless_it_says_so() {
        #[derive(Debug)]
        struct Custom;
        impl PrivacyModel for Custom {
            fn describe(&self) -> String {
                "custom".into()
            }
            fn min_class_size(&self) -> usize {
                2
            }
            fn accepts(&self, class: ClassView<'_>) -> bool {
                class.rows.len().is_multiple_of(2)
            }
        }
        assert!(!Custom.is_monotone());
        assert!(!Custom.is_monotone_with_suppression());
        assert!(KAnonymity { k: 2 }.is_monotone());
    }
}
