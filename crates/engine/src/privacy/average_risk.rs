//! ARX's average re-identification risk (`criteria/AverageReidentificationRisk.java`
//! in ARX 3.9.2): the mean prosecutor risk of the release's records is at
//! most `average`; optionally, records whose risk is above `highest` (those
//! in classes of fewer than `1/highest` rows) make at most the share
//! `records_at_risk` of the release.
//!
//! A record in a class of `s` rows has prosecutor risk `1/s` (El Emam and
//! Dankar, "Protecting privacy using k-anonymity", JAMIA 15(5), 2008), so the
//! mean over `n` published records in `c` classes is `c / n`, the inverse of
//! the average class size, as ARX computes it. Both parts are properties of
//! the whole release, not of one class: the algorithms build classes of at
//! least the job's k (and of `1/highest` rows when no record may be at
//! risk), and when their release misses the mean the pipeline runs them
//! again with larger classes ([`PrivacyModel::reached_with_classes_of`]):
//! classes of at least `1/average` rows always meet it.

use crate::encode::QiTable;
use crate::error::{Error, Result};

use super::{ClassView, PrivacyModel};

/// The mean prosecutor risk of the release is at most `average`, and at
/// most the share `records_at_risk` of its records have a risk above
/// `highest`.
#[derive(Debug, Clone, PartialEq)]
pub struct AverageRisk {
    /// The largest mean risk (classes / published rows), in (0, 1].
    pub average: f64,
    /// Records with a risk above this are at risk; `None`: no bound on the
    /// highest risk.
    pub highest: Option<f64>,
    /// The largest share of records at risk, in [0, 1]; 0 makes `1/highest`
    /// the smallest class.
    pub records_at_risk: f64,
}

impl AverageRisk {
    /// The smallest class whose records are not at risk: the least `s` with
    /// `1/s <= highest` (1 without `highest`).
    pub fn safe_class_size(&self) -> usize {
        self.highest
            .map_or(1, |h| ((1.0 / h) - 1e-9).ceil().max(1.0) as usize)
    }

    /// What is wrong with a release of these class sizes, by counts only.
    fn violation(&self, sizes: &[usize]) -> Option<String> {
        let rows: usize = sizes.iter().sum();
        if rows == 0 {
            return None;
        }
        let mean = sizes.len() as f64 / rows as f64;
        let mut problems = Vec::new();
        if mean > self.average + 1e-12 {
            problems.push(format!(
                "the mean risk is {} classes / {rows} rows = {mean:.4}, above {}",
                sizes.len(),
                self.average
            ));
        }
        let safe = self.safe_class_size();
        let at_risk: usize = sizes.iter().filter(|&&s| s < safe).sum();
        let share = at_risk as f64 / rows as f64;
        if share > self.records_at_risk + 1e-12 {
            problems.push(format!(
                "{at_risk} of {rows} records ({share:.4}) are in classes of fewer than {safe} rows (risk above {}), more than the share {}",
                self.highest.unwrap_or(1.0),
                self.records_at_risk
            ));
        }
        (!problems.is_empty()).then(|| format!("{}: {}", self.describe(), problems.join("; ")))
    }
}

impl PrivacyModel for AverageRisk {
    fn describe(&self) -> String {
        match self.highest {
            None => format!("average re-identification risk at most {}", self.average),
            Some(h) => format!(
                "average re-identification risk at most {} (at most {} of the records above risk {h})",
                self.average, self.records_at_risk
            ),
        }
    }
    fn min_class_size(&self) -> usize {
        if self.records_at_risk == 0.0 {
            self.safe_class_size()
        } else {
            1
        }
    }
    fn accepts(&self, class: ClassView<'_>) -> bool {
        class.rows.len() >= self.min_class_size()
    }
    /// The per-class part is a size bound; merging classes lowers the mean
    /// and the records at risk.
    fn is_monotone(&self) -> bool {
        true
    }
    fn is_monotone_with_suppression(&self) -> bool {
        true
    }
    fn needs_rows(&self) -> bool {
        false
    }
    fn sensitive_columns(&self) -> Option<Vec<&str>> {
        Some(Vec::new())
    }
    fn protects_alone(&self) -> bool {
        self.average < 1.0 || self.min_class_size() >= 2
    }
    fn achieved(&self, _table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        let rows: usize = classes.iter().map(|c| c.len()).sum();
        let safe = self.safe_class_size();
        let at_risk: usize = classes.iter().map(|c| c.len()).filter(|&s| s < safe).sum();
        Some(format!(
            "mean risk {:.4} (at most {}), records at risk {:.4}",
            classes.len() as f64 / rows.max(1) as f64,
            self.average,
            at_risk as f64 / rows.max(1) as f64
        ))
    }
    fn check_release(&self, _table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        let sizes: Vec<usize> = classes.iter().map(|c| c.len()).collect();
        self.violation(&sizes)
    }
    fn check_reached(&self, partition: &crate::partition::Partition) -> Result<()> {
        match self.violation(&super::published_class_sizes(partition)) {
            None => Ok(()),
            Some(problem) => Err(Error::Unsatisfiable(format!(
                "{problem}; classes of at least {} rows always meet it: raise k, or raise `average`{}",
                self.reached_with_classes_of().unwrap_or(1),
                if self.highest.is_some() { " or `records_at_risk`" } else { "" }
            ))),
        }
    }
    /// Classes of at least `1/average` rows have a mean risk of at most
    /// `average`, and of `1/highest` rows hold no record at risk.
    fn reached_with_classes_of(&self) -> Option<usize> {
        let mean = ((1.0 / self.average) - 1e-9).ceil().max(1.0) as usize;
        Some(mean.max(self.safe_class_size()))
    }
    fn check_feasible(
        &self,
        _table: &QiTable,
        active: usize,
        _max_suppressed: usize,
    ) -> Result<()> {
        // The lowest mean risk any release reaches: one class of every row.
        if active > 0 && 1.0 / active as f64 > self.average + 1e-12 {
            return Err(Error::Unsatisfiable(format!(
                "{}: even one class of all {active} rows has mean risk 1/{active} = {:.4}; raise `average` or add data",
                self.describe(),
                1.0 / active as f64
            )));
        }
        if active > 0 && active < self.min_class_size() {
            return Err(Error::Unsatisfiable(format!(
                "{} needs classes of at least {} rows but the input has {active}; raise `highest` or `records_at_risk`, or add data",
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

    fn model(average: f64, highest: Option<f64>, records_at_risk: f64) -> AverageRisk {
        AverageRisk {
            average,
            highest,
            records_at_risk,
        }
    }

    #[test]
    fn the_mean_is_classes_over_rows_and_at_most_is_inclusive() {
        let m = model(0.25, None, 0.0);
        assert_eq!(m.min_class_size(), 1);
        // 3 classes of 4 rows: 3/12 = 0.25, allowed (ARX: <=).
        assert_eq!(m.violation(&[4, 4, 4]), None);
        // 4 classes of 3: 0.333.
        let msg = m.violation(&[3, 3, 3, 3]).unwrap();
        assert!(msg.contains("4 classes / 12 rows = 0.3333"), "{msg}");
        // A singleton is allowed when the mean holds.
        assert_eq!(m.violation(&[1, 7]), None);
        assert_eq!(m.reached_with_classes_of(), Some(4));
    }

    #[test]
    fn records_at_risk_are_those_in_classes_below_one_over_highest() {
        let m = model(0.5, Some(0.2), 0.1);
        assert_eq!(m.safe_class_size(), 5);
        assert_eq!(m.min_class_size(), 1);
        // 2 of 22 rows (0.09) at risk: allowed.
        assert_eq!(m.violation(&[2, 10, 10]), None);
        // 4 of 24 (0.167): too many.
        let msg = m.violation(&[4, 10, 10]).unwrap();
        assert!(msg.contains("4 of 24 records"), "{msg}");
        assert_eq!(m.reached_with_classes_of(), Some(5));
        // No record may be at risk: the class size is the per-class part.
        let strict = model(0.5, Some(1.0 / 3.0), 0.0);
        assert_eq!(strict.min_class_size(), 3);
        assert!(strict.protects_alone());
    }

    #[test]
    fn the_reached_size_meets_both_parts_on_any_release() {
        // Every release of classes at least the reached size passes.
        for (avg, hi, r) in [
            (0.1, None, 0.0),
            (0.3, Some(0.05), 0.2),
            (0.07, Some(0.5), 0.0),
        ] {
            let m = model(avg, hi, r);
            let s = m.reached_with_classes_of().unwrap();
            for extra in 0..20 {
                let sizes: Vec<usize> = (0..7).map(|i| s + (i * extra) % 5).collect();
                assert_eq!(m.violation(&sizes), None, "{m:?} {sizes:?}");
            }
        }
    }

    #[test]
    fn an_input_too_small_for_the_mean_is_refused_before_work() {
        let spec: crate::spec::JobSpec =
            serde_json::from_str(r#"{"attributes": [{"name": "q", "role": "qi"}]}"#).unwrap();
        let t = QiTable::from_string_columns(&spec, &Default::default(), &[("q", vec!["x"; 4])])
            .unwrap();
        let err = model(0.2, None, 0.0)
            .check_feasible(&t, 4, 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("1/4 = 0.2500"), "{err}");
        model(0.25, None, 0.0).check_feasible(&t, 4, 0).unwrap();
    }
}
