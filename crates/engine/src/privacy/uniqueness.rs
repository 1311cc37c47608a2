//! Uniqueness thresholds, as ARX 3.9.2's `SampleUniqueness` and
//! `PopulationUniqueness` criteria: the share of the release's records that
//! are alone in their class (sample uniqueness), or the share of the
//! population estimated to be unique from the release's class sizes
//! (population uniqueness: Pitman, Zayatz, SNB or Dankar et al.'s rule,
//! [`crate::population::population_uniqueness`]), is at most a threshold.
//!
//! Both are properties of the whole release. A release without classes of
//! one record has no sample uniques, and every estimator then gives 0
//! population uniques, so classes of 2 rows always meet either
//! ([`PrivacyModel::reached_with_classes_of`]): a job may set k = 1 and let
//! the pipeline raise the class size only when the release needs it. As in
//! ARX, an estimator that gives no estimate for a release with sample
//! uniques, or an estimate of none, fails it (fail closed).

use serde::Deserialize;

use crate::encode::QiTable;
use crate::error::{Error, Result};
use crate::population::population_uniqueness;

use super::{ClassView, PrivacyModel};

/// Which uniques a [`UniquenessThreshold`] bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UniquenessThresholdModel {
    /// Records alone in their class of the release (ARX's sample
    /// uniqueness).
    Sample,
    /// Hoshino's Pitman model.
    Pitman,
    /// Zayatz's model.
    Zayatz,
    /// Chen and McNulty's SNB model.
    Snb,
    /// Dankar et al.'s choice among the three, ARX's default.
    #[default]
    Dankar,
}

impl UniquenessThresholdModel {
    fn name(self) -> &'static str {
        match self {
            Self::Sample => "sample",
            Self::Pitman => "Pitman",
            Self::Zayatz => "Zayatz",
            Self::Snb => "SNB",
            Self::Dankar => "Dankar",
        }
    }
}

/// At most the share `threshold` of the records are unique: in the release
/// (`Sample`) or, estimated by a statistical model, in a population of
/// `population_size` records.
#[derive(Debug, Clone, PartialEq)]
pub struct UniquenessThreshold {
    /// The largest share of unique records, in (0, 1].
    pub threshold: f64,
    /// Sample uniques, or the estimator of population uniques.
    pub model: UniquenessThresholdModel,
    /// `N`, the records of the population the input was drawn from
    /// (needed by every model but `Sample`).
    pub population_size: Option<u64>,
}

impl UniquenessThreshold {
    /// The share of unique records of a release of these class sizes, or
    /// why it cannot be told.
    fn share(&self, sizes: &[usize]) -> std::result::Result<f64, String> {
        let rows: usize = sizes.iter().sum();
        let uniques = sizes.iter().filter(|&&s| s == 1).count();
        if rows == 0 || uniques == 0 {
            return Ok(0.0);
        }
        if self.model == UniquenessThresholdModel::Sample {
            return Ok(uniques as f64 / rows as f64);
        }
        let n = self
            .population_size
            .ok_or_else(|| "no population size was given".to_string())?;
        let mut frequencies: Vec<(usize, usize)> = Vec::new();
        let mut sorted = sizes.to_vec();
        sorted.sort_unstable();
        for s in sorted {
            match frequencies.last_mut() {
                Some((size, count)) if *size == s => *count += 1,
                _ => frequencies.push((s, 1)),
            }
        }
        let u = population_uniqueness(&frequencies, n).map_err(|e| e.to_string())?;
        let estimate = match self.model {
            UniquenessThresholdModel::Pitman => u.pitman,
            UniquenessThresholdModel::Zayatz => u.zayatz,
            UniquenessThresholdModel::Snb => u.snb,
            _ => u.dankar,
        };
        match estimate.share {
            // As ARX: no population uniques although the sample has some
            // is a model that did not fit, not a safe release.
            Some(share) if share > 0.0 => Ok(share),
            Some(_) => Err(format!(
                "the {} model estimates no population uniques although the release has {uniques} sample uniques, which ARX and kanon take as an estimate that failed",
                self.model.name()
            )),
            None => Err(format!(
                "the {} model gives no estimate for the release's {uniques} sample uniques ({})",
                self.model.name(),
                estimate.note.unwrap_or_default()
            )),
        }
    }

    /// What is wrong with a release of these class sizes, by counts only.
    fn violation(&self, sizes: &[usize]) -> Option<String> {
        match self.share(sizes) {
            Ok(share) if share <= self.threshold + 1e-12 => None,
            Ok(share) => Some(format!(
                "{}: the release's share of unique records is {share:.6}, above {}",
                self.describe(),
                self.threshold
            )),
            Err(why) => Some(format!(
                "{}: {why}; nothing can show the share is below the threshold",
                self.describe()
            )),
        }
    }
}

impl PrivacyModel for UniquenessThreshold {
    fn describe(&self) -> String {
        match self.model {
            UniquenessThresholdModel::Sample => {
                format!("sample uniqueness at most {}", self.threshold)
            }
            m => format!(
                "population uniqueness at most {} ({} model, population {})",
                self.threshold,
                m.name(),
                self.population_size.unwrap_or(0)
            ),
        }
    }
    fn min_class_size(&self) -> usize {
        1
    }
    fn accepts(&self, _class: ClassView<'_>) -> bool {
        true
    }
    /// The per-class part accepts every class; the whole-release part is
    /// checked on the release ([`PrivacyModel::check_release`]).
    fn is_monotone(&self) -> bool {
        true
    }
    fn needs_rows(&self) -> bool {
        false
    }
    fn sensitive_columns(&self) -> Option<Vec<&str>> {
        Some(Vec::new())
    }
    fn protects_alone(&self) -> bool {
        self.threshold < 1.0
    }
    fn achieved(&self, _table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        let sizes: Vec<usize> = classes.iter().map(|c| c.len()).collect();
        Some(match self.share(&sizes) {
            Ok(share) => format!("unique share {share:.6} (at most {})", self.threshold),
            Err(why) => format!("no estimate: {why}"),
        })
    }
    fn check_release(&self, _table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        let sizes: Vec<usize> = classes.iter().map(|c| c.len()).collect();
        self.violation(&sizes)
    }
    fn check_reached(&self, partition: &crate::partition::Partition) -> Result<()> {
        match self.violation(&super::published_class_sizes(partition)) {
            None => Ok(()),
            Some(problem) => Err(Error::Unsatisfiable(format!(
                "{problem}; classes of at least 2 rows hold no uniques: set k = 2, or raise `threshold`"
            ))),
        }
    }
    /// No class of one record, no uniques: every estimator gives 0.
    fn reached_with_classes_of(&self) -> Option<usize> {
        Some(2)
    }
    fn check_feasible(
        &self,
        _table: &QiTable,
        active: usize,
        _max_suppressed: usize,
    ) -> Result<()> {
        match self.population_size {
            Some(n) if self.model != UniquenessThresholdModel::Sample && (n as usize) < active => {
                Err(Error::spec(
                    "privacy.models.population-uniqueness.population_size",
                    format!(
                        "the population ({n} records) is smaller than the input ({active} rows it may publish); give the size of the population the data was drawn from"
                    ),
                ))
            }
            _ if active == 1 => Err(Error::Unsatisfiable(format!(
                "{}: a table of one row is unique whatever is generalised; add data",
                self.describe()
            ))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(threshold: f64, model: UniquenessThresholdModel) -> UniquenessThreshold {
        UniquenessThreshold {
            threshold,
            model,
            population_size: Some(10_000),
        }
    }

    #[test]
    fn sample_uniqueness_counts_records_alone_in_their_class() {
        let m = model(0.1, UniquenessThresholdModel::Sample);
        // 1 unique of 12 rows: 0.083.
        assert_eq!(m.violation(&[1, 5, 6]), None);
        // 2 of 12: 0.167.
        let msg = m.violation(&[1, 1, 10]).unwrap();
        assert!(msg.contains("0.166667"), "{msg}");
        assert_eq!(m.violation(&[2, 2, 2]), None);
    }

    #[test]
    fn population_uniqueness_reads_the_chosen_estimate() {
        // 100 sample uniques, 40 pairs, 20 triples of 10,000 people.
        let mut sizes = vec![1; 100];
        sizes.extend([2; 40]);
        sizes.extend([3; 20]);
        let freq = [(1, 100), (2, 40), (3, 20)];
        let u = population_uniqueness(&freq, 10_000).unwrap();
        for (m, e) in [
            (UniquenessThresholdModel::Zayatz, &u.zayatz),
            (UniquenessThresholdModel::Dankar, &u.dankar),
        ] {
            let share = e.share.unwrap();
            assert_eq!(model(share + 1e-6, m).violation(&sizes), None, "{m:?}");
            assert!(model(share * 0.99, m).violation(&sizes).is_some(), "{m:?}");
        }
        // No uniques: no estimate is needed, the share is 0.
        assert_eq!(
            model(1e-9, UniquenessThresholdModel::Pitman).violation(&[2, 3]),
            None
        );
    }

    #[test]
    fn without_a_population_the_estimators_fail_closed() {
        let m = UniquenessThreshold {
            threshold: 0.5,
            model: UniquenessThresholdModel::Dankar,
            population_size: None,
        };
        assert!(m.violation(&[1, 4]).unwrap().contains("no population size"));
        assert_eq!(m.reached_with_classes_of(), Some(2));
    }
}
