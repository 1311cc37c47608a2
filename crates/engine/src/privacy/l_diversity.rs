//! The three l-diversity models of Machanavajjhala et al. ("l-Diversity:
//! Privacy beyond k-anonymity", ICDE 2006; `docs/SPEC.md` section 1), each
//! on one sensitive column, and the one way kanon counts a class's
//! sensitive values ([`frequencies`]: missing values are not values).

use crate::codes::{with_codes, Code};
use crate::encode::{QiTable, SensitiveColumn};
use crate::error::{Error, Result};
use crate::table::ValueSets;

use super::{ClassView, PrivacyModel};

/// The sensitive column a model reads, found by name (so a model built from
/// a job also checks a release encoded from labels alone). `None` when the
/// table lacks it: models then accept nothing (fail closed).
fn sensitive_column<'a>(table: &'a QiTable, name: &str) -> Option<&'a SensitiveColumn> {
    table.sensitive().iter().find(|c| c.name() == name)
}

/// How many times each sensitive value occurs among `rows`: the non-zero
/// counts, in no particular order. Missing values (NULL, NaN, `""` under
/// `missing_sensitive = "ignore"`) are not values: they are left out. This
/// is the one definition every l-diversity model, the verifiers, the
/// metrics and `kanon_risk()` count with.
///
/// When the rows stand for people with several values (the
/// one-row-per-person table of [`crate::entity`]), a value counts the
/// people who hold it: each person once per value.
pub(crate) fn frequencies(column: &SensitiveColumn, rows: &[u32]) -> Vec<u32> {
    if let Some(sets) = column.value_sets() {
        let mut counts: rustc_hash::FxHashMap<u32, u32> = rustc_hash::FxHashMap::default();
        for &r in rows {
            for &v in sets.of(r) {
                *counts.entry(v).or_default() += 1;
            }
        }
        let mut counts: Vec<u32> = counts.into_values().collect();
        counts.sort_unstable();
        return counts;
    }
    with_codes!(column.codes(), |codes| frequencies_of(column, codes, rows))
}

/// The distinct values of a class of people who may hold several values
/// each, counting each person once: the fewest values that every person
/// of `rows` holding any value holds one of (the smallest hitting set of
/// their value sets), counted no further than `stop`.
///
/// With one value per person this is the number of distinct values. With
/// several it is what distinct l-diversity means for people: an attacker
/// who places someone in the class can name fewer than `l` values one of
/// which that person surely has only when this number is below `l`. A
/// person with two diagnoses alone is 1, not 2; three people who all have
/// diagnosis A besides another are 1 (A is certain). Exact, by a search
/// bounded by `stop` that branches on the smallest set not yet hit.
fn hitting_number(sets: &ValueSets, rows: &[u32], stop: usize) -> usize {
    hitting_number_of(rows.iter().map(|&r| sets.of(r)).collect(), stop)
}

/// [`hitting_number`] of people given by their value sets (empty sets,
/// people with no value, are left out).
pub(crate) fn hitting_number_of(people: Vec<&[u32]>, stop: usize) -> usize {
    let people: Vec<&[u32]> = people.into_iter().filter(|s| !s.is_empty()).collect();
    // `stop` pairwise disjoint sets need `stop` values: a cheap yes.
    let mut used: rustc_hash::FxHashSet<u32> = rustc_hash::FxHashSet::default();
    let mut disjoint = 0;
    let mut by_size = people.clone();
    by_size.sort_by_key(|s| s.len());
    for s in &by_size {
        if s.iter().all(|v| !used.contains(v)) {
            used.extend(s.iter().copied());
            disjoint += 1;
            if disjoint >= stop {
                return stop;
            }
        }
    }
    fn hits_within(people: &[&[u32]], chosen: &mut Vec<u32>, budget: usize) -> bool {
        let unhit = people
            .iter()
            .filter(|s| !s.iter().any(|v| chosen.contains(v)))
            .min_by_key(|s| s.len());
        let Some(set) = unhit else {
            return true;
        };
        if budget == 0 {
            return false;
        }
        for &v in *set {
            chosen.push(v);
            let found = hits_within(people, chosen, budget - 1);
            chosen.pop();
            if found {
                return true;
            }
        }
        false
    }
    // At least `disjoint` values are needed: search from there.
    (disjoint..stop)
        .find(|&b| hits_within(&people, &mut Vec::new(), b))
        .unwrap_or(stop)
}

/// [`frequencies`] over codes of one width.
fn frequencies_of<T: Code>(column: &SensitiveColumn, codes: &[T], rows: &[u32]) -> Vec<u32> {
    let d = column.distinct();
    let mut counts = if d <= 4096 || d <= 4 * rows.len() {
        let mut counts = vec![0u32; d];
        for &r in rows {
            let c: u32 = codes[r as usize].into();
            counts[c as usize] += 1;
        }
        if column.has_missing() {
            for (c, n) in counts.iter_mut().enumerate() {
                if column.is_missing(c as u32) {
                    *n = 0;
                }
            }
        }
        counts
    } else {
        let mut values: Vec<T> = rows
            .iter()
            .map(|&r| codes[r as usize])
            .filter(|&c| !column.is_missing(c.into()))
            .collect();
        values.sort_unstable();
        values
            .chunk_by(|a, b| a == b)
            .map(|run| run.len() as u32)
            .collect()
    };
    counts.retain(|&n| n > 0);
    counts
}

/// Number of distinct values among `rows`, counting no further than `stop`.
fn distinct_up_to(column: &SensitiveColumn, rows: &[u32], stop: usize) -> usize {
    if let Some(sets) = column.value_sets() {
        return hitting_number(sets, rows, stop);
    }
    let d = column.distinct();
    if d <= 4096 || d <= 4 * rows.len() {
        let mut seen = vec![false; d];
        let mut n = 0;
        with_codes!(column.codes(), |codes| {
            for &r in rows {
                let c = u32::from(codes[r as usize]) as usize;
                if !seen[c] && !column.is_missing(c as u32) {
                    seen[c] = true;
                    n += 1;
                    if n >= stop {
                        break;
                    }
                }
            }
        });
        n
    } else {
        frequencies(column, rows).len()
    }
}

/// Shannon entropy (natural logarithm) of a distribution given by counts.
pub(crate) fn entropy(counts: &[u32]) -> f64 {
    let n: f64 = counts.iter().map(|&c| c as f64).sum();
    if n == 0.0 {
        return 0.0;
    }
    -counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            p * p.ln()
        })
        .sum::<f64>()
}

/// Tolerance of the entropy comparison: a class of exactly l equally frequent
/// values has entropy `ln l`, which floating point may compute a few ulps
/// below.
const ENTROPY_EPS: f64 = 1e-9;

/// The counts of `rows` plus one occurrence of `row`'s value.
fn with_row(column: &SensitiveColumn, rows: &[u32], row: u32) -> (Vec<u32>, Vec<u32>) {
    let before = frequencies(column, rows);
    let mut extended = rows.to_vec();
    extended.push(row);
    (before, frequencies(column, &extended))
}

/// The value counts of `column` over the table's active rows, after the
/// check every l-diversity model starts with: no class can hold more
/// distinct values than the whole table, so it needs at least `l`. `None`
/// when no row is active.
fn table_counts(
    model: &dyn PrivacyModel,
    column: &str,
    l: usize,
    table: &QiTable,
    active: usize,
) -> Result<Option<Vec<u32>>> {
    let col = sensitive_column(table, column)
        .ok_or_else(|| Error::data(column, "is not an encoded sensitive column of the table"))?;
    if active == 0 {
        return Ok(None);
    }
    let counts = frequencies(col, &table.active_rows());
    if counts.len() < l {
        return Err(unsatisfiable(
            column,
            format!(
                "{} needs at least {l} distinct values in every class but the input has only {} (missing values do not count unless `privacy.missing_sensitive = \"value\"`); lower l or choose another sensitive column",
                model.describe(),
                counts.len()
            ),
        ));
    }
    Ok(Some(counts))
}

fn unsatisfiable(column: &str, message: String) -> Error {
    Error::Unsatisfiable(format!("sensitive column `{column}`: {message}"))
}

/// Distinct l-diversity (Machanavajjhala et al. 2006; the L-clustering paper's model):
/// every class holds at least `l` distinct values of the sensitive column.
///
/// Monotone: a union of classes holds every value of each of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistinctLDiversity {
    /// The sensitive column.
    pub column: String,
    /// Distinct values every class must hold.
    pub l: usize,
}

impl PrivacyModel for DistinctLDiversity {
    fn sensitive_columns(&self) -> Option<Vec<&str>> {
        Some(vec![self.column.as_str()])
    }
    /// Each person counts once (the smallest hitting set of their values).
    fn counts_value_sets(&self) -> bool {
        true
    }
    fn is_monotone(&self) -> bool {
        true
    }
    fn describe(&self) -> String {
        format!("distinct l-diversity (l = {}) on `{}`", self.l, self.column)
    }
    fn min_class_size(&self) -> usize {
        self.l
    }
    fn accepts(&self, class: ClassView<'_>) -> bool {
        let Some(col) = sensitive_column(class.table, &self.column) else {
            return false;
        };
        class.rows.len() >= self.l && distinct_up_to(col, class.rows, self.l) >= self.l
    }
    fn achieved(&self, table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        let col = sensitive_column(table, &self.column)?;
        let fewest = classes
            .iter()
            .map(|rows| distinct_up_to(col, rows, frequencies(col, rows).len()))
            .min()?;
        Some(format!("fewest distinct values in a class: {fewest}"))
    }
    /// A class holding an l-diverse class holds its l values: suppressing
    /// the rest of a table never breaks an accepted class.
    fn is_monotone_with_suppression(&self) -> bool {
        true
    }
    fn helps(&self, class: ClassView<'_>, row: u32) -> bool {
        sensitive_column(class.table, &self.column).is_some_and(|col| {
            if let Some(sets) = col.value_sets() {
                // A person helps with a value nobody in the class holds.
                return sets
                    .of(row)
                    .iter()
                    .any(|v| !class.rows.iter().any(|&r| sets.of(r).contains(v)));
            }
            with_codes!(col.codes(), |codes| {
                let v = codes[row as usize];
                !col.is_missing(v.into()) && !class.rows.iter().any(|&r| codes[r as usize] == v)
            })
        })
    }
    fn check_feasible(&self, table: &QiTable, active: usize, _max_suppressed: usize) -> Result<()> {
        // Suppression removes values, it never adds one: the whole table is
        // the most diverse class there is.
        table_counts(self, &self.column, self.l, table, active).map(|_| ())
    }
}

/// Entropy l-diversity (Machanavajjhala et al. 2006, Def. 4.1): the entropy
/// `-sum p(s) ln p(s)` of the sensitive values of every class is at least
/// `ln l`.
///
/// Monotone: entropy is concave, so the entropy of a union is at least the
/// smallest entropy of its parts. Adding arbitrary rows to an accepted class
/// can break it, though (many copies of one value), so it is not monotone
/// with suppression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntropyLDiversity {
    /// The sensitive column.
    pub column: String,
    /// The class entropy must be at least `ln l`.
    pub l: usize,
}

impl EntropyLDiversity {
    fn accepts_counts(&self, counts: &[u32]) -> bool {
        entropy(counts) >= (self.l as f64).ln() - ENTROPY_EPS
    }
}

impl PrivacyModel for EntropyLDiversity {
    fn sensitive_columns(&self) -> Option<Vec<&str>> {
        Some(vec![self.column.as_str()])
    }
    fn is_monotone(&self) -> bool {
        true
    }
    fn describe(&self) -> String {
        format!("entropy l-diversity (l = {}) on `{}`", self.l, self.column)
    }
    fn min_class_size(&self) -> usize {
        self.l
    }
    fn accepts(&self, class: ClassView<'_>) -> bool {
        let Some(col) = sensitive_column(class.table, &self.column) else {
            return false;
        };
        class.rows.len() >= self.l && self.accepts_counts(&frequencies(col, class.rows))
    }
    fn achieved(&self, table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        let col = sensitive_column(table, &self.column)?;
        let lowest = classes
            .iter()
            .map(|rows| entropy(&frequencies(col, rows)))
            .fold(f64::INFINITY, f64::min);
        lowest.is_finite().then(|| {
            format!(
                "lowest class entropy {lowest:.4} = ln {:.3} (ln l = {:.4})",
                lowest.exp(),
                (self.l as f64).ln()
            )
        })
    }
    /// A row helps when it raises the class's entropy.
    fn helps(&self, class: ClassView<'_>, row: u32) -> bool {
        sensitive_column(class.table, &self.column).is_some_and(|col| {
            let (before, after) = with_row(col, class.rows, row);
            entropy(&after) > entropy(&before) + ENTROPY_EPS
        })
    }
    fn check_feasible(&self, table: &QiTable, active: usize, max_suppressed: usize) -> Result<()> {
        let Some(counts) = table_counts(self, &self.column, self.l, table, active)? else {
            return Ok(());
        };
        // Without suppression every row is published, and the entropy of the
        // whole table is at least the smallest entropy of its classes
        // (concavity): the whole table must pass.
        if max_suppressed == 0 && !self.accepts_counts(&counts) {
            let top = counts.iter().copied().max().unwrap_or(0);
            return Err(unsatisfiable(
                &self.column,
                format!(
                    "{} needs entropy >= ln {} = {:.4} in every class, but the whole input has entropy {:.4} (its most frequent value holds {:.1} % of the rows), so no partition can reach it; lower l, allow suppression, or choose another sensitive column",
                    self.describe(),
                    self.l,
                    (self.l as f64).ln(),
                    entropy(&counts),
                    100.0 * top as f64 / active as f64
                ),
            ));
        }
        Ok(())
    }
}

/// Recursive (c,l)-diversity (Machanavajjhala et al. 2006, Def. 4.2): with
/// the class's value counts sorted `r_1 >= r_2 >= ... >= r_m`, the class has
/// `m >= l` values and `r_1 < c * (r_l + r_{l+1} + ... + r_m)`: the most
/// frequent value is not too frequent.
///
/// Monotone (ibid., Theorem 4.2 on generalisation): merging two classes
/// keeps the property; adding arbitrary rows does not (not monotone with
/// suppression).
#[derive(Debug, Clone, PartialEq)]
pub struct RecursiveCLDiversity {
    /// The sensitive column.
    pub column: String,
    /// The bound on the most frequent value.
    pub c: f64,
    /// Distinct values every class must hold.
    pub l: usize,
}

impl RecursiveCLDiversity {
    /// `c * (r_l + ... + r_m) - r_1`, positive when the class passes;
    /// `None` with fewer than l values.
    fn margin(&self, counts: &[u32]) -> Option<f64> {
        if counts.len() < self.l || self.l == 0 {
            return None;
        }
        let mut sorted = counts.to_vec();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let tail: u64 = sorted[self.l - 1..].iter().map(|&c| c as u64).sum();
        Some(self.c * tail as f64 - sorted[0] as f64)
    }

    fn accepts_counts(&self, counts: &[u32]) -> bool {
        self.margin(counts).is_some_and(|m| m > 0.0)
    }
}

impl PrivacyModel for RecursiveCLDiversity {
    fn sensitive_columns(&self) -> Option<Vec<&str>> {
        Some(vec![self.column.as_str()])
    }
    fn is_monotone(&self) -> bool {
        true
    }
    fn describe(&self) -> String {
        format!(
            "recursive (c,l)-diversity (c = {}, l = {}) on `{}`",
            self.c, self.l, self.column
        )
    }
    fn min_class_size(&self) -> usize {
        self.l
    }
    fn accepts(&self, class: ClassView<'_>) -> bool {
        let Some(col) = sensitive_column(class.table, &self.column) else {
            return false;
        };
        class.rows.len() >= self.l && self.accepts_counts(&frequencies(col, class.rows))
    }
    /// A row helps when it adds a value the class lacks while it has fewer
    /// than l, or else widens the margin `c * (r_l + ...) - r_1`.
    fn helps(&self, class: ClassView<'_>, row: u32) -> bool {
        sensitive_column(class.table, &self.column).is_some_and(|col| {
            let (before, after) = with_row(col, class.rows, row);
            if before.len() < self.l {
                return after.len() > before.len();
            }
            match (self.margin(&before), self.margin(&after)) {
                (Some(b), Some(a)) => a > b,
                _ => false,
            }
        })
    }
    fn check_feasible(&self, table: &QiTable, active: usize, max_suppressed: usize) -> Result<()> {
        let Some(counts) = table_counts(self, &self.column, self.l, table, active)? else {
            return Ok(());
        };
        // Without suppression every row is published and the union of
        // (c,l)-diverse classes is (c,l)-diverse: the whole table must pass.
        if max_suppressed == 0 && !self.accepts_counts(&counts) {
            let mut sorted = counts.clone();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            let tail: u64 = sorted[self.l - 1..].iter().map(|&c| c as u64).sum();
            return Err(unsatisfiable(
                &self.column,
                format!(
                    "{}: the most frequent value holds {} rows, not fewer than c = {} times the {tail} rows of the {}-th and rarer values, even over the whole input; raise c, lower l, or allow suppression",
                    self.describe(),
                    sorted[0],
                    self.c,
                    self.l
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::JobSpec;

    /// One QI and one sensitive column `s` with the given values.
    fn table(values: &[&str]) -> QiTable {
        let spec: JobSpec = serde_json::from_str(
            r#"{"attributes": [{"name": "q", "role": "qi"}, {"name": "s", "role": "sensitive"}]}"#,
        )
        .unwrap();
        QiTable::from_string_columns(
            &spec,
            &Default::default(),
            &[("q", vec!["x"; values.len()]), ("s", values.to_vec())],
        )
        .unwrap()
    }

    fn all(t: &QiTable) -> Vec<u32> {
        (0..t.n_rows() as u32).collect()
    }

    fn accepts(m: &dyn PrivacyModel, t: &QiTable) -> bool {
        m.accepts(ClassView {
            table: t,
            rows: &all(t),
        })
    }

    fn distinct(l: usize) -> DistinctLDiversity {
        DistinctLDiversity {
            column: "s".into(),
            l,
        }
    }

    fn entropy_l(l: usize) -> EntropyLDiversity {
        EntropyLDiversity {
            column: "s".into(),
            l,
        }
    }

    fn recursive(c: f64, l: usize) -> RecursiveCLDiversity {
        RecursiveCLDiversity {
            column: "s".into(),
            c,
            l,
        }
    }

    #[test]
    fn distinct_counts_values() {
        let t = table(&["a", "a", "b"]);
        assert!(accepts(&distinct(2), &t));
        assert!(!accepts(&distinct(3), &t));
        // A class of one row: only `b` helps a class holding `a`.
        let class = ClassView {
            table: &t,
            rows: &[0],
        };
        assert!(!distinct(2).helps(class, 1));
        assert!(distinct(2).helps(class, 2));
    }

    #[test]
    fn entropy_matches_hand_computed_cases() {
        // Counts {2,1,1}: H = -(1/2 ln 1/2 + 2 * 1/4 ln 1/4) = 1.0397.
        let t = table(&["a", "a", "b", "c"]);
        let h = entropy(&frequencies(&t.sensitive()[0], &all(&t)));
        assert!((h - (0.5 * 2f64.ln() + 0.5 * 4f64.ln())).abs() < 1e-12);
        assert!((h - 1.0397).abs() < 1e-4);
        assert!(accepts(&entropy_l(2), &t), "1.0397 >= ln 2 = 0.693");
        assert!(!accepts(&entropy_l(3), &t), "1.0397 < ln 3 = 1.0986");
        // Exactly l equally frequent values: H = ln 3, accepted.
        let t = table(&["a", "b", "c", "a", "b", "c"]);
        assert!(accepts(&entropy_l(3), &t));
        assert!(!accepts(&entropy_l(4), &t));
        // Distinct 2-diverse but far from entropy 2-diverse: {9, 1}, H = 0.325.
        let mut v = vec!["a"; 9];
        v.push("b");
        let t = table(&v);
        assert!(accepts(&distinct(2), &t));
        assert!(!accepts(&entropy_l(2), &t));
        // Adding `b` raises the entropy, adding `a` lowers it.
        let rows = all(&t);
        let class = ClassView {
            table: &t,
            rows: &rows[..9],
        };
        assert!(entropy_l(2).helps(class, 9));
        assert!(!entropy_l(2).helps(class, 0));
    }

    #[test]
    fn entropy_helps_only_rows_that_raise_it() {
        // Counts {10, 9, 1}: p = .45 > exp(-H) = .425, so one more of the
        // second value lowers the entropy although it is not the most frequent.
        let mut v = vec!["a"; 10];
        v.extend(vec!["b"; 9]);
        v.push("c");
        v.push("b");
        let t = table(&v);
        let rows = all(&t);
        let class = ClassView {
            table: &t,
            rows: &rows[..20],
        };
        assert!(!entropy_l(3).helps(class, 20), "another b lowers H");
        assert!(entropy_l(3).helps(class, 19), "another c raises H");
    }

    #[test]
    fn recursive_matches_hand_computed_cases() {
        // Counts r = (3, 2, 1). l = 2: r1 = 3 < c * (2 + 1) needs c > 1.
        let t = table(&["a", "a", "a", "b", "b", "c"]);
        assert!(!accepts(&recursive(1.0, 2), &t));
        assert!(accepts(&recursive(1.01, 2), &t));
        // l = 3: r1 = 3 < c * 1 needs c > 3.
        assert!(!accepts(&recursive(3.0, 3), &t));
        assert!(accepts(&recursive(3.5, 3), &t));
        // Fewer than l values never pass.
        assert!(!accepts(&recursive(100.0, 4), &t));
        // With r = (3,2,1) and l = 3, another `c` widens the margin, another
        // `a` narrows it.
        let rows = all(&t);
        let class = ClassView {
            table: &t,
            rows: &rows[..5],
        };
        assert!(recursive(3.0, 3).helps(class, 5), "a third value");
        assert!(!recursive(3.0, 3).helps(class, 0), "r1 grows");
    }
    #[test]
    fn models_merge_monotonically() {
        // Two accepted classes give an accepted union, for every variant.
        let t = table(&["a", "b", "c", "a", "b", "c", "c", "d", "e"]);
        let (x, y): (Vec<u32>, Vec<u32>) = ((0..3).collect(), (3..9).collect());
        let union = all(&t);
        let models: Vec<Box<dyn PrivacyModel>> = vec![
            Box::new(distinct(3)),
            Box::new(entropy_l(3)),
            Box::new(recursive(2.0, 3)),
        ];
        for m in &models {
            let view = |rows| ClassView { table: &t, rows };
            assert!(m.is_monotone());
            assert!(
                m.accepts(view(&x)) && m.accepts(view(&y)),
                "{}",
                m.describe()
            );
            assert!(m.accepts(view(&union)), "{}", m.describe());
        }
    }

    #[test]
    fn infeasible_tables_fail_before_any_work_without_values() {
        let t = table(&["Secret-a", "Secret-a", "Secret-a", "Secret-b"]);
        let err = distinct(3)
            .check_feasible(&t, 4, 0)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`s`") && err.contains("only 2") && err.contains("l = 3"),
            "{err}"
        );
        assert!(!err.contains("Secret"), "{err}");
        // Entropy: {3, 1} has H = 0.562 < ln 2; fails without suppression
        // (no partition can beat the whole table), passes the early check
        // when rows may be withheld.
        let err = entropy_l(2)
            .check_feasible(&t, 4, 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("entropy") && err.contains("75.0 %"), "{err}");
        assert!(!err.contains("Secret"), "{err}");
        entropy_l(2).check_feasible(&t, 4, 2).unwrap();
        // Recursive: r1 = 3 < c * 1 fails for c = 2.
        let err = recursive(2.0, 2)
            .check_feasible(&t, 4, 0)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("holds 3 rows") && err.contains("c = 2"),
            "{err}"
        );
        recursive(4.0, 2).check_feasible(&t, 4, 0).unwrap();
        // A model on a column the table lacks accepts nothing.
        let other = DistinctLDiversity {
            column: "nope".into(),
            l: 1,
        };
        assert!(!accepts(&other, &t));
    }
}
