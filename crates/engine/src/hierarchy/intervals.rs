//! Numeric interval hierarchies ([`IntervalLevels`]): equal-width
//! intervals or explicit cut points per level, built over a numeric
//! column's distinct values with exact bounds and labels.

use super::Hierarchy;
use crate::error::{Error, Result};

/// The most intervals one level of an interval hierarchy may have: a width
/// that cuts a column's range into more (an outlier, a typo in the width)
/// is an error, not hours of work and gigabytes of labels.
pub const MAX_INTERVALS: usize = 1 << 20;

/// Levels of a numeric interval hierarchy, finest first; the root `*` is
/// added on top.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IntervalLevels {
    /// Equal-width intervals aligned to multiples of the width, e.g. `[5, 10, 20]`
    /// gives `[25-29]`, `[20-29]`, `[20-39]`. Each width must divide the next.
    Widths(Vec<f64>),
    /// Explicit cut points per level; each level's cuts must be a subset of the
    /// finer level's. Intervals are `[cut_i, cut_{i+1})`.
    Cuts(Vec<Vec<f64>>),
}

impl IntervalLevels {
    /// Builds the interval hierarchy over the given distinct values (sorted
    /// ascending). Leaf `i` is `values[i]`, labelled `leaf_labels[i]` (the
    /// exact value as the input holds it).
    ///
    /// # Errors
    /// [`Error::Hierarchy`] when widths are not positive or do not nest,
    /// when a value is infinite, NaN or beyond 2^53 (no exact interval
    /// bounds), or when a width cuts the column's range into more than
    /// [`MAX_INTERVALS`] intervals. The message never shows a value.
    pub fn build(&self, source: &str, values: &[f64], leaf_labels: &[String]) -> Result<Hierarchy> {
        self.build_coded(source, values, leaf_labels, None, None)
    }

    /// [`IntervalLevels::build`] for a top- and bottom-coded column
    /// ([`crate::spec::AttributeSpec::top_code`]): its largest value `top`
    /// stands for every value at or above it, so an interval that holds it
    /// is published open-ended (`>=80` instead of `[80-84]`, which would
    /// say nobody is 85 or older); likewise `<85` for an interval that
    /// holds `bottom`, and `*` for one that holds both.
    ///
    /// # Errors
    /// As [`IntervalLevels::build`].
    pub fn build_coded(
        &self,
        source: &str,
        values: &[f64],
        leaf_labels: &[String],
        bottom: Option<f64>,
        top: Option<f64>,
    ) -> Result<Hierarchy> {
        let Some((&min, &max)) = values.first().zip(values.last()) else {
            return Err(Error::hierarchy(
                source,
                None,
                "no values to build an interval hierarchy from",
            ));
        };
        debug_assert_eq!(values.len(), leaf_labels.len());
        if values.iter().any(|v| !v.is_finite()) {
            return Err(Error::hierarchy(
                source,
                None,
                "the column holds infinite or NaN values, which no interval covers; filter them out, or generalise the column with a hierarchy file or as ranges (no `intervals`/`cuts`)",
            ));
        }
        if values
            .iter()
            .any(|v| v.abs() > crate::number::MAX_EXACT_F64_INTEGER)
        {
            return Err(Error::hierarchy(
                source,
                None,
                "the column holds values beyond 2^53, whose interval bounds cannot be computed exactly; set `type = \"categorical\"`, or use a hierarchy file",
            ));
        }
        let integral = values.iter().all(|v| v.fract() == 0.0);
        let levels: Vec<Vec<f64>> = match self {
            IntervalLevels::Widths(widths) => {
                let mut out = Vec::new();
                for (i, &w) in widths.iter().enumerate() {
                    if !(w > 0.0 && w.is_finite()) {
                        return Err(Error::hierarchy(
                            source,
                            None,
                            format!("interval width {i} must be positive"),
                        ));
                    }
                    if i > 0 {
                        let ratio = w / widths[i - 1];
                        if (ratio - ratio.round()).abs() > 1e-9 || ratio < 1.0 {
                            return Err(Error::hierarchy(
                                source,
                                None,
                                format!(
                                    "interval widths must nest: {w} is not a multiple of {}; use e.g. 5, 10, 20",
                                    widths[i - 1]
                                ),
                            ));
                        }
                    }
                    let start = (min / w).floor() * w;
                    let count = (max - start) / w + 2.0;
                    if count.is_nan() || count > MAX_INTERVALS as f64 {
                        return Err(Error::hierarchy(
                            source,
                            None,
                            format!(
                                "interval width {w} cuts the column's range into more than {MAX_INTERVALS} intervals; use wider intervals, explicit `cuts`, or remove the outliers"
                            ),
                        ));
                    }
                    let mut cuts = Vec::new();
                    let mut c = start;
                    while c <= max {
                        cuts.push(c);
                        c += w;
                    }
                    cuts.push(c);
                    out.push(cuts);
                }
                out
            }
            IntervalLevels::Cuts(levels) => {
                for (i, cuts) in levels.iter().enumerate() {
                    if cuts.windows(2).any(|w| w[0] >= w[1]) || cuts.is_empty() {
                        return Err(Error::hierarchy(
                            source,
                            None,
                            format!(
                                "cut points of level {} must be non-empty and strictly increasing",
                                i + 1
                            ),
                        ));
                    }
                    if i > 0 && !cuts.iter().all(|c| levels[i - 1].contains(c)) {
                        return Err(Error::hierarchy(
                            source,
                            None,
                            format!(
                                "cut points of level {} must be a subset of level {}'s",
                                i + 1,
                                i
                            ),
                        ));
                    }
                }
                levels.clone()
            }
        };
        let fmt = |v: f64| {
            if integral {
                format!("{}", v as i64)
            } else {
                format!("{v}")
            }
        };
        let label = |cuts: &[f64], v: f64| -> String {
            let i = cuts.partition_point(|&c| c <= v);
            if i == 0 {
                format!("<{}", fmt(cuts[0]))
            } else if i == cuts.len() {
                format!(">={}", fmt(cuts[i - 1]))
            } else if integral && cuts[i - 1].fract() == 0.0 && cuts[i].fract() == 0.0 {
                format!("[{}-{}]", fmt(cuts[i - 1]), fmt(cuts[i] - 1.0))
            } else {
                format!("[{}-{})", fmt(cuts[i - 1]), fmt(cuts[i]))
            }
        };
        let coded_label = |cuts: &[f64], v: f64| -> String {
            let i = cuts.partition_point(|&c| c <= v);
            let same =
                |bound: Option<f64>| bound.is_some_and(|b| cuts.partition_point(|&c| c <= b) == i);
            match (same(bottom), same(top)) {
                (true, true) => "*".to_string(),
                // The interval ends at a cut above the bottom bound (the
                // first interval `<c` already reads so).
                (true, false) if i < cuts.len() => format!("<{}", fmt(cuts[i])),
                (false, true) if i > 0 => format!(">={}", fmt(cuts[i - 1])),
                // An open interval holding a bound holds every value.
                (true, false) | (false, true) => "*".to_string(),
                (false, false) => label(cuts, v),
            }
        };
        let paths = values
            .iter()
            .zip(leaf_labels)
            .map(|(&v, leaf)| {
                let mut path = vec![leaf.clone()];
                path.extend(levels.iter().map(|cuts| coded_label(cuts, v)));
                path.push("*".to_string());
                path
            })
            .collect();
        Hierarchy::from_paths(source, paths, None, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::Level;

    fn labels_of(values: &[f64]) -> Vec<String> {
        values
            .iter()
            .map(|&v| crate::number::format_float(v))
            .collect()
    }

    #[test]
    fn intervals_from_widths() {
        let values: Vec<f64> = vec![17.0, 23.0, 25.0, 29.0, 30.0, 90.0];
        let h = IntervalLevels::Widths(vec![5.0, 10.0, 20.0])
            .build("age", &values, &labels_of(&values))
            .unwrap();
        assert_eq!(h.height(), 4);
        let l25 = h.leaf("25").unwrap();
        assert_eq!(h.label(h.ancestor(l25, Level(1))), "[25-29]");
        assert_eq!(h.label(h.ancestor(l25, Level(2))), "[20-29]");
        assert_eq!(h.label(h.ancestor(l25, Level(3))), "[20-39]");
        assert_eq!(h.label(h.ancestor(l25, Level(4))), "*");
        let l30 = h.leaf("30").unwrap();
        assert_eq!(h.label(h.lca(l25, l30)), "[20-39]");
        assert!(IntervalLevels::Widths(vec![5.0, 7.0])
            .build("age", &values, &labels_of(&values))
            .is_err());
    }

    #[test]
    fn interval_building_ends_with_an_error_on_inf_nan_huge_and_absurd_values() {
        for values in [
            vec![1.0, f64::INFINITY],
            vec![1.0, f64::NAN],
            vec![1.0, 2f64.powi(60)],
            vec![0.0, 1e15],
        ] {
            let err = IntervalLevels::Widths(vec![5.0])
                .build("x", &values, &labels_of(&values))
                .unwrap_err()
                .to_string();
            assert!(err.contains("x"), "{err}");
            assert!(!err.contains("1000000000000000"), "no value: {err}");
        }
    }

    #[test]
    fn coded_bounds_make_the_intervals_that_hold_them_open_ended() {
        // Ages coded at 20 and 80: 80 stands for 80 and more, 20 for 20
        // and less.
        let values: Vec<f64> = vec![20.0, 23.0, 41.0, 78.0, 80.0];
        let mut labels = labels_of(&values);
        labels[0] = "<=20".into();
        labels[4] = ">=80".into();
        let h = IntervalLevels::Widths(vec![5.0, 10.0, 40.0, 80.0])
            .build_coded("age", &values, &labels, Some(20.0), Some(80.0))
            .unwrap();
        let at = |leaf: &str, level| h.label(h.ancestor(h.leaf(leaf).unwrap(), Level(level)));
        assert_eq!(at(">=80", 1), ">=80");
        assert_eq!(at("78", 1), "[75-79]");
        assert_eq!(at("78", 2), "[70-79]");
        assert_eq!(at("<=20", 1), "<25");
        assert_eq!(
            at("23", 1),
            "<25",
            "23 shares the interval of the bottom code"
        );
        assert_eq!(at("41", 2), "[40-49]");
        assert_eq!(
            at("41", 3),
            "[40-79]",
            "[0-39] holds the bottom code, not [40-79]"
        );
        assert_eq!(at(">=80", 3), ">=80");
        assert_eq!(at("78", 4), "<80", "[0-79] holds the bottom code");
        assert_eq!(at(">=80", 4), ">=80");
        let one = IntervalLevels::Widths(vec![200.0])
            .build_coded("age", &values, &labels, Some(20.0), Some(80.0))
            .unwrap();
        let l = one.leaf("41").unwrap();
        assert_eq!(
            one.label(one.ancestor(l, Level(1))),
            "*",
            "[0-199] holds both codes"
        );
    }

    #[test]
    fn intervals_from_cuts() {
        let values = vec![10.0, 20.0, 40.0, 70.0];
        let h = IntervalLevels::Cuts(vec![vec![18.0, 30.0, 65.0], vec![30.0]])
            .build("age", &values, &labels_of(&values))
            .unwrap();
        let l = |s| h.leaf(s).unwrap();
        assert_eq!(h.label(h.ancestor(l("10"), Level(1))), "<18");
        assert_eq!(h.label(h.ancestor(l("20"), Level(1))), "[18-29]");
        assert_eq!(h.label(h.ancestor(l("70"), Level(1))), ">=65");
        assert_eq!(h.label(h.ancestor(l("20"), Level(2))), "<30");
        assert!(IntervalLevels::Cuts(vec![vec![18.0, 30.0], vec![25.0]])
            .build("age", &values, &labels_of(&values))
            .is_err());
    }
}
