//! A risk threshold on re-identification: no record of the release has a
//! prosecutor risk above `1/k`, and the mean prosecutor risk over the
//! records stays below `mean` (as ARX's `AverageReidentificationRisk`
//! criterion with a bound on the highest risk).
//!
//! A record's prosecutor risk is `1 / |class|`, so its largest value is
//! below `1/k` exactly when every class has at least `k` rows, and the mean
//! over the `n` published records is `sum_classes |c| * (1/|c|) / n =
//! classes / n`. The first part is a per-class model; the mean is a
//! property of the whole release, which [`RiskThreshold::check_release`]
//! checks in both verifiers.

use crate::encode::QiTable;
use crate::error::{Error, Result};

use super::{ClassView, PrivacyModel};

/// No record has a prosecutor risk above `1/k` (every class holds at least
/// `k` rows) and the mean prosecutor risk of the published records
/// (classes / published rows) is below `mean`.
///
/// Algorithms honour the per-class part (they see a minimum class size of
/// `k`, like k-anonymity) but do not aim at the mean: the verifiers check
/// it over the whole release and refuse a release whose mean is `mean` or
/// more (fail closed). Classes of more than `1/mean` rows always meet it, so
/// raising `k` above `1/mean` is the way out the refusal names.
///
/// Monotone, also with suppression (the per-class part is a size bound;
/// merging classes only lowers the mean).
#[derive(Debug, Clone, PartialEq)]
pub struct RiskThreshold {
    /// Every class holds at least `k` rows (largest risk `1/k`).
    pub k: usize,
    /// The mean prosecutor risk must be below this, in (0, 1].
    pub mean: f64,
}

impl RiskThreshold {
    /// `classes / rows`, the mean prosecutor risk of `rows` published
    /// records in `classes` classes (0 for an empty release).
    pub fn mean_risk(classes: usize, rows: usize) -> f64 {
        if rows == 0 {
            0.0
        } else {
            classes as f64 / rows as f64
        }
    }
}

impl PrivacyModel for RiskThreshold {
    fn sensitive_columns(&self) -> Option<Vec<&str>> {
        Some(Vec::new())
    }
    fn describe(&self) -> String {
        format!(
            "risk threshold (largest risk 1/{}, mean risk below {})",
            self.k, self.mean
        )
    }
    fn min_class_size(&self) -> usize {
        self.k
    }
    fn accepts(&self, class: ClassView<'_>) -> bool {
        class.rows.len() >= self.k
    }
    fn is_monotone(&self) -> bool {
        true
    }
    fn is_monotone_with_suppression(&self) -> bool {
        true
    }
    fn needs_rows(&self) -> bool {
        false
    }
    fn achieved(&self, _table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        let rows: usize = classes.iter().map(|c| c.len()).sum();
        let smallest = classes.iter().map(|c| c.len()).min().unwrap_or(0);
        Some(format!(
            "highest risk 1/{smallest}, mean risk {:.4} (below {})",
            Self::mean_risk(classes.len(), rows),
            self.mean
        ))
    }
    /// The per-class part in every class, then the mean over the release.
    fn check_release(&self, _table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        let small = classes.iter().filter(|c| c.len() < self.k).count();
        let rows: usize = classes.iter().map(|c| c.len()).sum();
        let mean = Self::mean_risk(classes.len(), rows);
        let mut problems = Vec::new();
        if small > 0 {
            problems.push(format!(
                "{small} published classes violate {} (fewer than {} rows)",
                self.describe(),
                self.k
            ));
        }
        if rows > 0 && mean >= self.mean {
            problems.push(format!(
                "the mean prosecutor risk of the release is {} classes / {rows} rows = {mean:.4}, not below {} ({}); the algorithms make every class at least k = {} rows but do not aim at the mean: raise k (classes of more than 1/mean = {:.1} rows always meet it) or raise `mean`",
                classes.len(),
                self.mean,
                self.describe(),
                self.k,
                1.0 / self.mean
            ));
        }
        (!problems.is_empty()).then(|| problems.join("; "))
    }
    /// The mean over the algorithm's classes: the algorithms make every
    /// class at least `k` rows but do not aim at the mean, so a mean not
    /// below the bound is a model this run could not reach (exit 3).
    fn check_reached(&self, partition: &crate::partition::Partition) -> Result<()> {
        let class_sizes = super::published_class_sizes(partition);
        let rows: usize = class_sizes.iter().sum();
        let mean = Self::mean_risk(class_sizes.len(), rows);
        if rows > 0 && mean >= self.mean {
            return Err(Error::Unsatisfiable(format!(
                "{}: the algorithm's {} classes of {rows} rows have mean risk {mean:.4}, not below {}; the algorithms make every class at least k = {} rows but do not aim at the mean: raise k (classes of more than 1/mean = {:.1} rows always meet it) or raise `mean`",
                self.describe(),
                class_sizes.len(),
                self.mean,
                self.k,
                1.0 / self.mean
            )));
        }
        Ok(())
    }
    /// Classes of more than `1/mean` rows give a mean risk below `mean`.
    fn reached_with_classes_of(&self) -> Option<usize> {
        Some(((1.0 / self.mean).floor() as usize + 1).max(self.k))
    }
    fn check_feasible(
        &self,
        _table: &QiTable,
        active: usize,
        _max_suppressed: usize,
    ) -> Result<()> {
        if active > 0 && active < self.k {
            return Err(Error::Unsatisfiable(format!(
                "{} needs at least {} rows but the input has {active}; lower k or add data",
                self.describe(),
                self.k
            )));
        }
        // The lowest mean risk any release reaches: one class of every row.
        if active > 0 && Self::mean_risk(1, active) >= self.mean {
            return Err(Error::Unsatisfiable(format!(
                "{}: even one class of all {active} rows has mean risk 1/{active} = {:.4}, not below {}; raise `mean` or add data",
                self.describe(),
                Self::mean_risk(1, active),
                self.mean
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::JobSpec;

    fn table(n: usize) -> QiTable {
        let spec: JobSpec =
            serde_json::from_str(r#"{"attributes": [{"name": "q", "role": "qi"}]}"#).unwrap();
        QiTable::from_string_columns(&spec, &Default::default(), &[("q", vec!["x"; n])]).unwrap()
    }

    #[test]
    fn per_class_and_mean_parts() {
        let t = table(12);
        let m = RiskThreshold { k: 3, mean: 0.3 };
        assert_eq!(m.min_class_size(), 3);
        assert!(!m.needs_rows() && m.is_monotone());
        assert!(m.accepts(ClassView {
            table: &t,
            rows: &[0, 1, 2]
        }));
        assert!(!m.accepts(ClassView {
            table: &t,
            rows: &[0, 1]
        }));
        // 3 classes of 4 rows: mean 3/12 = 0.25 < 0.3: passes.
        let fours: [&[u32]; 3] = [&[0, 1, 2, 3], &[4, 5, 6, 7], &[8, 9, 10, 11]];
        assert_eq!(m.check_release(&t, &fours), None);
        // 4 classes of 3 rows: every class >= k, but mean 4/12 = 0.333.
        let threes: [&[u32]; 4] = [&[0, 1, 2], &[3, 4, 5], &[6, 7, 8], &[9, 10, 11]];
        let msg = m.check_release(&t, &threes).unwrap();
        assert!(
            msg.contains("4 classes / 12 rows = 0.3333") && msg.contains("raise k"),
            "{msg}"
        );
        assert!(!msg.contains("published classes violate"), "{msg}");
        // A class below k is named too.
        let msg = m
            .check_release(&t, &[&[0, 1], &[2, 3, 4, 5, 6, 7, 8, 9, 10, 11]])
            .unwrap();
        assert!(msg.starts_with("1 published classes violate risk threshold (largest risk 1/3, mean risk below 0.3)"), "{msg}");
        // The mean is strict: exactly r fails.
        let m = RiskThreshold { k: 3, mean: 0.25 };
        assert!(m.check_release(&t, &fours).is_some());
    }

    #[test]
    fn infeasible_thresholds_fail_before_any_work() {
        let t = table(4);
        let err = RiskThreshold { k: 2, mean: 0.25 }
            .check_feasible(&t, 4, 0)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("1/4 = 0.2500") && err.contains("raise `mean`"),
            "{err}"
        );
        RiskThreshold { k: 2, mean: 0.3 }
            .check_feasible(&t, 4, 0)
            .unwrap();
        let err = RiskThreshold { k: 5, mean: 0.9 }
            .check_feasible(&t, 4, 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("at least 5 rows"), "{err}");
    }
}
