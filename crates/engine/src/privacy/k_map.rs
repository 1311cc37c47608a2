//! k-map (Sweeney, "Computational disclosure control: a primer on data
//! privacy protection", MIT PhD thesis, 2001): every class of the release
//! matches at least `k` people of the population the data was drawn from,
//! so an attacker who knows someone is in the population (not that they
//! are in the data) finds at least k candidates.
//!
//! Without the population table, ARX 3.9.2 (`criteria/KMap.java`) estimates
//! it from the sampling fraction `π = n/N`: a population class of exactly
//! `k` people shows up in the sample `Poisson(π k)` times (Pannekoek's
//! estimator; or zero-truncated Poisson, El Emam's), so a sample class of at
//! least `k'` rows, the derived k, has a population class of at least `k`
//! people except with probability `significance` (the type I error). kanon
//! derives k' exactly as ARX does (including ARX's `+ 1` after the Poisson
//! quantile, which publishes less) and caps it at `k`; the model is then
//! k-anonymity with k' on the rows the algorithm anonymises
//! ([`PrivacyModel::for_sample`]). A verifier reading only the release
//! derives k' from the published rows, which can only lower it (fewer rows,
//! smaller `π`): what the algorithm met, the verifier accepts.

use serde::Deserialize;

use crate::encode::QiTable;
use crate::error::{Error, Result};

use super::{ClassView, PrivacyModel};

/// How a population class's count in the sample is modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CellSizeEstimator {
    /// Poisson with mean `π k` (Pannekoek), ARX's default.
    #[default]
    Poisson,
    /// Poisson truncated at zero (a class in the sample has a row).
    ZeroTruncatedPoisson,
}

/// Estimated k-map: every class of the release has, with confidence
/// `1 - significance`, at least `k` people in a population of
/// `population_size`.
#[derive(Debug, Clone, PartialEq)]
pub struct KMap {
    /// People of the population each class must match.
    pub k: usize,
    /// `N`, the records of the population.
    pub population_size: u64,
    /// The largest accepted chance that a class matches fewer than `k`
    /// people, in [0, 1).
    pub significance: f64,
    /// How sample counts are modelled.
    pub estimator: CellSizeEstimator,
    /// Records of the sample the model is bound to (the rows anonymised);
    /// `None` until [`PrivacyModel::for_sample`]: each check then derives
    /// k' from the rows of the table it is given.
    pub sample_rows: Option<usize>,
}

/// The natural logarithm of the Poisson probability of `c` with mean
/// `lambda` (`lambda > 0`).
fn ln_poisson(lambda: f64, c: usize, ln_factorial: f64) -> f64 {
    -lambda + c as f64 * lambda.ln() - ln_factorial
}

impl KMap {
    /// The derived k' for a sample of `rows` records, with the type I
    /// error it leaves, as ARX's `calculateKPoisson` and
    /// `calculateKZeroPoisson`; at most `k` and at most `rows`.
    pub fn derived_k(&self, rows: usize) -> (usize, f64) {
        let pi = (rows as f64 / self.population_size as f64).min(1.0);
        let lambda = pi * self.k as f64;
        let threshold = 1.0 - self.significance;
        if lambda <= 0.0 {
            return (self.k.min(rows.max(1)), 0.0);
        }
        let (derived, value) = match self.estimator {
            CellSizeEstimator::Poisson => {
                // value = P(X <= counter - 1) after each step.
                let mut counter = 0usize;
                let mut cdf = 0.0;
                let mut ln_fact = 0.0;
                let mut value = 0.0;
                while value < threshold {
                    if counter > 0 {
                        ln_fact += (counter as f64).ln();
                    }
                    cdf += ln_poisson(lambda, counter, ln_fact).exp();
                    value = cdf;
                    counter += 1;
                    if counter >= self.k {
                        value = 1.0;
                        break;
                    }
                }
                (counter + 1, value)
            }
            CellSizeEstimator::ZeroTruncatedPoisson => {
                let nonzero = 1.0 - (-lambda).exp();
                let mut counter = 1usize;
                let mut ln_fact = 0.0;
                let mut value = 0.0;
                while value < threshold {
                    ln_fact += (counter as f64).ln();
                    value += ln_poisson(lambda, counter, ln_fact).exp() / nonzero;
                    counter += 1;
                    if counter >= self.k {
                        value = 1.0;
                        break;
                    }
                }
                (counter, value)
            }
        };
        (derived.min(rows.max(1)).min(self.k), (1.0 - value).max(0.0))
    }

    /// k' for the rows of `table` the checks see, or for the bound sample.
    fn k_for(&self, table: &QiTable) -> usize {
        let rows = self
            .sample_rows
            .unwrap_or_else(|| table.n_rows() - table.excluded().len());
        self.derived_k(rows).0
    }
}

impl PrivacyModel for KMap {
    fn describe(&self) -> String {
        let estimator = match self.estimator {
            CellSizeEstimator::Poisson => "Poisson",
            CellSizeEstimator::ZeroTruncatedPoisson => "zero-truncated Poisson",
        };
        match self.sample_rows {
            Some(rows) => format!(
                "k-map (k = {}, population {}, significance {}, {estimator}: k' = {})",
                self.k,
                self.population_size,
                self.significance,
                self.derived_k(rows).0
            ),
            None => format!(
                "k-map (k = {}, population {}, significance {}, {estimator})",
                self.k, self.population_size, self.significance
            ),
        }
    }
    /// k' once bound to a sample; `k`, the largest k' can be, before.
    fn min_class_size(&self) -> usize {
        match self.sample_rows {
            Some(rows) => self.derived_k(rows).0,
            None => self.k,
        }
    }
    fn accepts(&self, class: ClassView<'_>) -> bool {
        class.rows.len() >= self.k_for(class.table)
    }
    fn is_monotone(&self) -> bool {
        true
    }
    fn is_monotone_with_suppression(&self) -> bool {
        true
    }
    /// Bound, the model is k-anonymity with k' (sizes decide); unbound, k'
    /// depends on the table a check is given.
    fn needs_rows(&self) -> bool {
        self.sample_rows.is_none()
    }
    fn sensitive_columns(&self) -> Option<Vec<&str>> {
        Some(Vec::new())
    }
    fn protects_alone(&self) -> bool {
        self.k >= 2
    }
    fn for_sample(&self, rows: usize) -> Option<Box<dyn PrivacyModel>> {
        Some(Box::new(KMap {
            sample_rows: Some(rows),
            ..self.clone()
        }))
    }
    fn achieved(&self, _table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        let rows: usize = classes.iter().map(|c| c.len()).sum();
        let (derived, error) = self.derived_k(self.sample_rows.unwrap_or(rows));
        Some(format!(
            "derived k' = {derived} (type I error {error:.4}), smallest class {}",
            classes.iter().map(|c| c.len()).min().unwrap_or(0)
        ))
    }
    fn check_release(&self, _table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        // The sample is the release's rows unless the model is bound.
        let rows: usize = classes.iter().map(|c| c.len()).sum();
        let derived = self.derived_k(self.sample_rows.unwrap_or(rows)).0;
        let failing = classes.iter().filter(|c| c.len() < derived).count();
        (failing > 0).then(|| {
            format!(
                "{failing} published classes have fewer than k' = {derived} rows ({})",
                self.describe()
            )
        })
    }
    fn check_feasible(
        &self,
        _table: &QiTable,
        active: usize,
        _max_suppressed: usize,
    ) -> Result<()> {
        if (self.population_size as usize) < active {
            return Err(Error::spec(
                "privacy.models.k-map.population_size",
                format!(
                    "the population ({} records) is smaller than the input ({active} rows); give the size of the population the data was drawn from",
                    self.population_size
                ),
            ));
        }
        // k' never exceeds the rows (one class of every row meets it).
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kmap(k: usize, n: u64, estimator: CellSizeEstimator) -> KMap {
        KMap {
            k,
            population_size: n,
            significance: 0.01,
            estimator,
            sample_rows: None,
        }
    }

    /// The smallest x with P(X <= x) >= 1 - alpha for X ~ Poisson(lambda),
    /// by direct summation of factorials (small lambdas only).
    fn quantile(lambda: f64, alpha: f64) -> usize {
        let mut cdf = 0.0;
        let mut fact = 1.0;
        for x in 0..60usize {
            if x > 0 {
                fact *= x as f64;
            }
            cdf += (-lambda).exp() * lambda.powi(x as i32) / fact;
            if cdf >= 1.0 - alpha {
                return x;
            }
        }
        unreachable!()
    }

    #[test]
    fn the_derived_k_is_arx_s_poisson_quantile_plus_one_capped_at_k() {
        // Adult's 30,162 rows as a sample of the US population 1994 (ARX's
        // region model, 260 million) would give k' = 2; smaller
        // populations raise it.
        for (k, n, rows) in [
            (10, 300_000, 30_162),
            (20, 100_000, 30_162),
            (50, 60_000, 30_000),
        ] {
            let m = kmap(k, n, CellSizeEstimator::Poisson);
            let lambda = rows as f64 / n as f64 * k as f64;
            let want = (quantile(lambda, 0.01) + 2).min(k);
            assert_eq!(m.derived_k(rows).0, want, "k {k} N {n}");
        }
        // The whole population sampled: k' = k.
        assert_eq!(
            kmap(5, 1000, CellSizeEstimator::Poisson).derived_k(1000).0,
            5
        );
        // Never above the rows.
        assert_eq!(kmap(50, 1000, CellSizeEstimator::Poisson).derived_k(3).0, 3);
    }

    #[test]
    fn zero_truncation_derives_no_more_than_poisson_plus_one() {
        for (k, n, rows) in [(10, 300_000, 30_162), (20, 100_000, 30_162)] {
            let p = kmap(k, n, CellSizeEstimator::Poisson).derived_k(rows).0;
            let z = kmap(k, n, CellSizeEstimator::ZeroTruncatedPoisson)
                .derived_k(rows)
                .0;
            assert!(z >= 1 && z <= p + 1, "k {k}: {z} vs {p}");
        }
    }

    #[test]
    fn the_derived_k_grows_with_the_sample() {
        let m = kmap(30, 1_000_000, CellSizeEstimator::Poisson);
        let mut last = 0;
        for rows in [1_000, 10_000, 100_000, 500_000, 1_000_000] {
            let d = m.derived_k(rows).0;
            assert!(d >= last, "{rows}: {d} < {last}");
            last = d;
        }
        assert_eq!(last, 30);
    }

    #[test]
    fn bound_the_model_is_k_anonymity_with_the_derived_k() {
        let m = kmap(10, 300_000, CellSizeEstimator::Poisson);
        assert_eq!(m.min_class_size(), 10);
        assert!(m.needs_rows());
        let bound = m.for_sample(30_162).unwrap();
        assert_eq!(bound.min_class_size(), m.derived_k(30_162).0);
        assert!(!bound.needs_rows());
        assert!(bound.describe().contains("k' = "), "{}", bound.describe());
    }
}
