//! The utility-metric registry: every measure of information loss a run
//! reports, built in or added by a library user ([`register`]), with its
//! name, a one-line summary and how to compute it from a release, declared
//! in one place (ARX's `metric/Metric.java` plays this part there). Every
//! registered metric is computed for every run and lands in the report's
//! `utility_metrics` list (`kanon anonymize --metrics-json`), so users
//! compare algorithms on their own data with the measure they trust.
//!
//! The built-in ones (`docs/SPEC.md` section 3): NCP (Xu et al., KDD 2006),
//! ARX's granularity, Sweeney's precision loss, the uniform WHD distortion
//! ratio (Li et al., "Achieving k-anonymity by clustering in attribute
//! hierarchical structures", DaWaK 2006), the discernibility metric `DM`
//! (Bayardo and Agrawal, ICDE 2005) and the normalised average class size
//! `C_AVG` (LeFevre et al., ICDE 2006). Lower is better for each.

use crate::encode::{QiColumn, QiTable};
use crate::error::Result;
use crate::generalise::Cell;
use crate::metrics::{distortion, loss, Weights};
use crate::partition::Partition;
use crate::registry::{Named, Registry};

/// What a metric sees: the encoded input, the release's partition and the
/// requested k.
#[derive(Debug, Clone, Copy)]
pub struct ReleaseView<'a> {
    /// The encoded input.
    pub table: &'a QiTable,
    /// The groups, their published tuples and the suppressed rows.
    pub partition: &'a Partition,
    /// The k the job asked for.
    pub k: usize,
}

impl ReleaseView<'_> {
    /// The mean of `cost` over every QI cell of the release, a suppressed
    /// row's cells costing `cost` of [`Cell::Suppressed`].
    pub fn mean_cell_cost(&self, cost: impl Fn(&QiColumn, &Cell) -> f64) -> f64 {
        let (table, partition) = (self.table, self.partition);
        let sizes = partition.group_sizes();
        let mut sum = 0.0;
        for (g, &size) in sizes.iter().enumerate().take(partition.n_groups()) {
            if size > 0 {
                sum += size as f64
                    * table
                        .columns()
                        .iter()
                        .zip(partition.tuple(g))
                        .map(|(col, cell)| cost(col, cell))
                        .sum::<f64>();
            }
        }
        let suppressed = partition.suppressed() as f64;
        if suppressed > 0.0 {
            sum += suppressed
                * table
                    .columns()
                    .iter()
                    .map(|col| cost(col, &Cell::Suppressed))
                    .sum::<f64>();
        }
        sum / (table.n_rows() * table.n_qi()).max(1) as f64
    }

    /// The sizes of the published classes (groups with identical published
    /// tuples form one class).
    pub fn class_sizes(&self) -> Vec<usize> {
        let (class_of_group, n_classes) = self.partition.published_classes();
        let mut sizes = vec![0usize; n_classes];
        for (g, &size) in self.partition.group_sizes().iter().enumerate() {
            if let Some(&c) = class_of_group.get(g) {
                sizes[c as usize] += size;
            }
        }
        sizes.retain(|&s| s > 0);
        sizes
    }
}

/// Computes a metric's loss; lower keeps more information.
pub type Measure = fn(&ReleaseView<'_>) -> f64;

/// One registered utility metric.
///
/// Every registered metric is computed for every run and reported under
/// its name, so a library user measures every algorithm with the loss they
/// trust.
///
/// # Example: a new metric
///
/// ```
/// use std::sync::Arc;
/// use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
/// use arrow::datatypes::{DataType, Field, Schema};
/// use kanon_engine::metrics::utility::{self, ReleaseView, UtilityMetric};
/// use kanon_engine::{encode::Encoder, spec::JobSpec};
///
/// /// The share of rows in classes of more than 2k rows: classes larger
/// /// than they need be.
/// fn oversized(release: &ReleaseView<'_>) -> f64 {
///     let sizes = release.class_sizes();
///     let big: usize = sizes.iter().filter(|&&s| s > 2 * release.k).sum();
///     big as f64 / release.table.n_rows().max(1) as f64
/// }
///
/// utility::register(UtilityMetric {
///     name: "oversized-classes",
///     summary: "share of rows in classes of more than 2k rows",
///     measure: oversized,
/// })?;
///
/// let spec: JobSpec = serde_json::from_str(r#"{
///     "privacy": {"k": 2},
///     "algorithm": {"name": "mondrian"},
///     "attributes": [{"name": "age", "role": "quasi-identifier"},
///                    {"name": "city", "role": "quasi-identifier"}]}"#)?;
/// let schema = Arc::new(Schema::new(vec![
///     Field::new("age", DataType::Int64, false),
///     Field::new("city", DataType::Utf8, false),
/// ]));
/// let batch = RecordBatch::try_new(schema.clone(), vec![
///     Arc::new(Int64Array::from(vec![30, 41, 52, 33, 47, 38])) as ArrayRef,
///     Arc::new(StringArray::from(vec!["Lyon", "Nice", "Lyon", "Paris", "Nice", "Lyon"])),
/// ])?;
/// let mut encoder = Encoder::try_new(&spec, &Default::default(), &schema)?;
/// encoder.push(&batch)?;
/// let table = encoder.finish()?;
///
/// let run = kanon_engine::anonymize(&spec, &table)?;
/// let figure = run.report.utility_metrics.iter()
///     .find(|u| u.metric == "oversized-classes")
///     .expect("every registered metric is reported");
/// assert!((0.0..=1.0).contains(&figure.loss));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct UtilityMetric {
    /// The name reports use, lower case with hyphens.
    pub name: &'static str,
    /// One line for help texts and tables.
    pub summary: &'static str,
    /// How to compute it.
    pub measure: Measure,
}

/// The metrics kanon ships with, in the order reports list them.
const BUILT_IN: &[UtilityMetric] = &[
    UtilityMetric {
        name: "ncp",
        summary: "normalised certainty penalty: mean over QI cells of the share of the domain a published value covers",
        measure: |r| r.mean_cell_cost(loss::cell_ncp),
    },
    UtilityMetric {
        name: "granularity",
        summary: "ARX's granularity: mean over QI cells of (input values covered - 1) / (distinct input values - 1)",
        measure: |r| r.mean_cell_cost(loss::cell_granularity),
    },
    UtilityMetric {
        name: "precision-loss",
        summary: "Sweeney's precision loss: mean over QI cells of the hierarchy level reached over the height",
        measure: |r| r.mean_cell_cost(loss::cell_precision_loss),
    },
    UtilityMetric {
        name: "whd",
        summary: "weighted hierarchical distance, uniform weights: mean over QI cells",
        measure: |r| r.mean_cell_cost(|col, cell| distortion::cell_whd(col, cell, Weights::Uniform)),
    },
    UtilityMetric {
        name: "discernibility",
        summary: "discernibility metric DM: sum of squared class sizes, n per row in a class below k or suppressed",
        measure: discernibility,
    },
    UtilityMetric {
        name: "aecs",
        summary: "normalised average class size C_AVG: published rows / classes / k",
        measure: normalised_aecs,
    },
];

fn discernibility(r: &ReleaseView<'_>) -> f64 {
    let n = r.table.n_rows();
    r.class_sizes()
        .iter()
        .map(|&s| {
            if s >= r.k {
                (s * s) as f64
            } else {
                (n * s) as f64
            }
        })
        .sum::<f64>()
        + (r.partition.suppressed() * n) as f64
}

fn normalised_aecs(r: &ReleaseView<'_>) -> f64 {
    let sizes = r.class_sizes();
    if sizes.is_empty() {
        return 0.0;
    }
    sizes.iter().sum::<usize>() as f64 / sizes.len() as f64 / r.k.max(1) as f64
}

impl Named for UtilityMetric {
    fn name(&self) -> &'static str {
        self.name
    }
}

/// The built-in metrics and those registered at run time.
static REGISTRY: Registry<UtilityMetric> = Registry::new("a metric", "metrics", BUILT_IN);

/// Adds a metric to every run of this process (the CLI's, SQL's, a library
/// user's).
///
/// # Errors
/// [`Error::Spec`](crate::error::Error::Spec) when the name is empty, not lower case with hyphens, or
/// taken.
pub fn register(metric: UtilityMetric) -> Result<()> {
    REGISTRY.register(metric)
}

/// Every registered metric: the built-in ones, then those added by
/// [`register`].
pub fn all() -> Vec<UtilityMetric> {
    REGISTRY.all()
}

/// The metric of that name.
pub fn get(name: &str) -> Option<UtilityMetric> {
    REGISTRY.get(name)
}

/// Every registered metric's loss on `release`, by name, in registry order.
pub fn measure_all(release: &ReleaseView<'_>) -> Vec<(String, f64)> {
    all()
        .iter()
        .map(|m| (m.name.to_string(), (m.measure)(release)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_names_are_unique_and_taken() {
        let names: Vec<&str> = BUILT_IN.iter().map(|m| m.name).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[..i].contains(n), "{n} twice");
        }
        let err = register(UtilityMetric {
            name: "ncp",
            ..BUILT_IN[0]
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("exists"), "{err}");
        let err = register(UtilityMetric {
            name: "Bad Name",
            ..BUILT_IN[0]
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("lower case"), "{err}");
    }
}
