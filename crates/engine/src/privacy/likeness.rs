//! Models that bound how much a class moves an attacker's belief about
//! each sensitive value, value by value, against the whole table's
//! distribution `q`: β-likeness and δ-disclosure privacy.
//!
//! - **β-likeness** (Cao and Karras, "Publishing Microdata with a Robust
//!   Privacy Guarantee", PVLDB 5(11), 2012): for every value `v` whose
//!   frequency in a class `p(v)` is above its frequency in the table
//!   `q(v)`, the relative gain `(p(v) - q(v)) / q(v)` is at most `β`
//!   (basic β-likeness, the paper's Definition 2), or at most
//!   `min(β, -ln q(v))` (enhanced β-likeness, its Definition 4, which
//!   protects rare values more). ARX: `BasicBLikeness`, `EnhancedBLikeness`.
//! - **δ-disclosure privacy** (Brickell and Shmatikov, "The Cost of
//!   Privacy: Destruction of Data-Mining Utility in Anonymized Data
//!   Publishing", KDD 2008, Definition 3): for every value `v` of the table,
//!   `|log(p(v) / q(v))| < δ`.
//!
//! # Readings where the sources leave a choice (each publishes less)
//!
//! - δ-disclosure takes the logarithm to base 2, as ARX's
//!   `DDisclosurePrivacy` does (the paper does not fix a base): for a given
//!   δ it is the stricter reading.
//! - δ-disclosure holds for **every value of the table**, as the paper's
//!   definition says: a class that lacks a value has `p(v) = 0`, an
//!   infinite log ratio, and is refused. ARX checks only the values present
//!   in a class, which accepts classes the paper refuses. With the paper's
//!   reading the model is also monotone (the frequency of a value in a
//!   union lies between its frequencies in the parts), so every algorithm
//!   that honours l-diversity honours it.
//! - The reference distribution `q` is that of t-closeness
//!   ([`super::TCloseness`]): the table's active rows for the algorithms
//!   (a block of a block-wise run keeps the whole table's counts), the
//!   published rows for both verifiers, what a reader of the release sees.
//!   Missing values are not values: they are left out of `p` and `q`, and a
//!   class without any value is refused (fail closed).

use crate::encode::{QiTable, SensitiveColumn};
use crate::error::{Error, Result};

use super::t_closeness::{counts_by_code, reference_values};
use super::{ClassView, PrivacyModel};

/// Tolerance of the comparisons: the gain of a union is at most the largest
/// gain of its parts, which floating point may compute a few ulps above.
const EPS: f64 = 1e-9;

/// β-likeness on one sensitive column: no value's frequency in a class
/// exceeds its frequency in the table by more than the share `β` of it
/// (basic), or by more than `min(β, -ln q)` (enhanced).
#[derive(Debug, Clone, PartialEq)]
pub struct BetaLikeness {
    /// The sensitive column.
    pub column: String,
    /// The largest relative gain, above 0.
    pub beta: f64,
    /// Enhanced β-likeness: the bound of a value of table frequency `q` is
    /// `min(β, -ln q)`.
    pub enhanced: bool,
}

/// δ-disclosure privacy on one sensitive column: every value of the table
/// has `|log2(p / q)| < δ` in every class.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaDisclosure {
    /// The sensitive column.
    pub column: String,
    /// The bound on the log ratio, above 0.
    pub delta: f64,
}

/// A class measured against a reference distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Measure {
    /// Values of the reference the class lacks (δ-disclosure refuses any).
    absent: usize,
    /// The largest statistic over the values the class holds: the gain as a
    /// share of its bound (β-likeness, accepted up to 1), or `|log2 p/q|`
    /// (δ-disclosure, accepted below δ).
    worst: f64,
}

/// The two models differ only in the statistic of one value.
trait PerValue {
    fn column(&self) -> &str;
    /// The statistic of a value of class frequency `p` and table frequency
    /// `q` (both in (0, 1] for a value of the class, `p` = 0 for an absent
    /// one), and whether an absent value breaks the model.
    fn statistic(&self, p: f64, q: f64) -> f64;
    fn absent_breaks(&self) -> bool;
    fn within(&self, m: Measure) -> bool;
}

impl PerValue for BetaLikeness {
    fn column(&self) -> &str {
        &self.column
    }
    fn statistic(&self, p: f64, q: f64) -> f64 {
        if p <= q {
            return 0.0;
        }
        let bound = if self.enhanced {
            self.beta.min(-q.ln())
        } else {
            self.beta
        };
        let gain = (p - q) / q;
        if bound > 0.0 {
            gain / bound
        } else {
            // A value held by every row (q = 1) has bound 0 under the
            // enhanced model, but then p = q and this is not reached.
            f64::INFINITY
        }
    }
    fn absent_breaks(&self) -> bool {
        false
    }
    fn within(&self, m: Measure) -> bool {
        m.worst <= 1.0 + EPS
    }
}

impl PerValue for DeltaDisclosure {
    fn column(&self) -> &str {
        &self.column
    }
    fn statistic(&self, p: f64, q: f64) -> f64 {
        (p / q).log2().abs()
    }
    fn absent_breaks(&self) -> bool {
        true
    }
    fn within(&self, m: Measure) -> bool {
        m.absent == 0 && m.worst < self.delta
    }
}

fn sensitive_column<'a>(table: &'a QiTable, name: &str) -> Option<&'a SensitiveColumn> {
    table.sensitive().iter().find(|c| c.name() == name)
}

/// `rows` measured against the reference counts `reference` (missing
/// values left out of both); `None` when the class or the reference holds
/// no value, or the column is not in the table.
fn measure<M: PerValue>(
    m: &M,
    table: &QiTable,
    rows: &[u32],
    reference: &[u32],
) -> Option<Measure> {
    let column = sensitive_column(table, m.column())?;
    let (p, p_total) = counts_by_code(column, rows);
    let value = |c: usize| !column.is_missing(c as u32);
    let q_total: u64 = (0..reference.len())
        .filter(|&c| value(c))
        .map(|c| reference[c] as u64)
        .sum();
    if p_total == 0 || q_total == 0 {
        return None;
    }
    let mut out = Measure {
        absent: 0,
        worst: 0.0,
    };
    for (c, &n) in p.iter().enumerate() {
        let q_n = reference.get(c).copied().unwrap_or(0);
        if !value(c) || (n == 0 && q_n == 0) {
            continue;
        }
        if q_n == 0 {
            // A value of the class the reference lacks: not possible when
            // the reference holds the class's rows; refuse (fail closed).
            out.worst = f64::INFINITY;
            continue;
        }
        let (p_v, q_v) = (n as f64 / p_total as f64, q_n as f64 / q_total as f64);
        if n == 0 {
            out.absent += 1;
            if !m.absent_breaks() {
                continue;
            }
        } else {
            out.worst = out.worst.max(m.statistic(p_v, q_v));
        }
    }
    Some(out)
}

/// Per published class against the distribution of the published rows.
struct Release {
    failing: usize,
    without_values: usize,
    lacking: usize,
    worst: f64,
}

fn release<M: PerValue>(m: &M, table: &QiTable, classes: &[&[u32]]) -> Option<Release> {
    let column = sensitive_column(table, m.column())?;
    let all: Vec<u32> = classes.iter().flat_map(|c| c.iter().copied()).collect();
    let (reference, _) = counts_by_code(column, &all);
    let mut r = Release {
        failing: 0,
        without_values: 0,
        lacking: 0,
        worst: 0.0,
    };
    for rows in classes {
        match measure(m, table, rows, &reference) {
            Some(x) => {
                if !m.within(x) {
                    r.failing += 1;
                }
                if x.absent > 0 && m.absent_breaks() {
                    r.lacking += 1;
                }
                r.worst = r.worst.max(x.worst);
            }
            None => {
                r.failing += 1;
                r.without_values += 1;
            }
        }
    }
    Some(r)
}

/// What a whole release fails, by counts only.
fn check_release<M: PerValue + PrivacyModel>(
    m: &M,
    table: &QiTable,
    classes: &[&[u32]],
    statistic: &str,
) -> Option<String> {
    if classes.is_empty() {
        return None;
    }
    let Some(r) = release(m, table, classes) else {
        return Some(format!(
            "{}: the release has no sensitive column `{}`",
            m.describe(),
            m.column()
        ));
    };
    (r.failing > 0).then(|| {
        let mut why = format!("{statistic} {:.4}", r.worst);
        if r.lacking > 0 {
            why.push_str(&format!(
                ", {} of them lacking a value of the published rows",
                r.lacking
            ));
        }
        if r.without_values > 0 {
            why.push_str(&format!(
                ", {} of them without any sensitive value",
                r.without_values
            ));
        }
        format!(
            "{} published classes violate {} ({why}, against the distribution of the published rows)",
            r.failing,
            m.describe()
        )
    })
}

/// Whether adding `row` brings the class closer to acceptance: fewer
/// absent values, a lower worst statistic, or a first value.
fn helps<M: PerValue>(m: &M, class: ClassView<'_>, row: u32) -> bool {
    let Some(column) = sensitive_column(class.table, m.column()) else {
        return false;
    };
    let reference = column.reference_counts();
    let before = measure(m, class.table, class.rows, reference);
    let mut rows = class.rows.to_vec();
    rows.push(row);
    let after = measure(m, class.table, &rows, reference);
    match (before, after) {
        (None, Some(_)) => true,
        (Some(b), Some(a)) => {
            (m.absent_breaks() && a.absent < b.absent)
                || (a.absent <= b.absent || !m.absent_breaks()) && a.worst < b.worst - EPS
        }
        _ => false,
    }
}

fn check_feasible<M: PerValue + PrivacyModel>(m: &M, table: &QiTable, active: usize) -> Result<()> {
    let column = sensitive_column(table, m.column()).ok_or_else(|| {
        Error::data(
            m.column(),
            "is not an encoded sensitive column of the table",
        )
    })?;
    if active == 0 {
        return Ok(());
    }
    if reference_values(column) == 0 {
        return Err(Error::Unsatisfiable(format!(
            "sensitive column `{}`: {} compares the frequency of each value in every class with the whole input's, but all {active} rows hold a missing value (missing values are not values unless `privacy.missing_sensitive = \"value\"`); choose another sensitive column",
            m.column(),
            m.describe()
        )));
    }
    // One class of every active row has the table's distribution itself
    // (gain 0, log ratio 0): a release always exists.
    Ok(())
}

impl BetaLikeness {
    fn class_measure(&self, class: ClassView<'_>) -> Option<Measure> {
        let column = sensitive_column(class.table, &self.column)?;
        measure(self, class.table, class.rows, column.reference_counts())
    }
}

impl DeltaDisclosure {
    fn class_measure(&self, class: ClassView<'_>) -> Option<Measure> {
        let column = sensitive_column(class.table, &self.column)?;
        measure(self, class.table, class.rows, column.reference_counts())
    }
}

impl PrivacyModel for BetaLikeness {
    fn sensitive_columns(&self) -> Option<Vec<&str>> {
        Some(vec![self.column.as_str()])
    }
    fn describe(&self) -> String {
        format!(
            "{} β-likeness (β = {}) on `{}`",
            if self.enhanced { "enhanced" } else { "basic" },
            self.beta,
            self.column
        )
    }
    fn min_class_size(&self) -> usize {
        1
    }
    fn accepts(&self, class: ClassView<'_>) -> bool {
        self.class_measure(class).is_some_and(|m| self.within(m))
    }
    /// A value's frequency in a union lies between its frequencies in the
    /// parts, so no gain of the union exceeds the parts' largest.
    fn is_monotone(&self) -> bool {
        true
    }
    fn helps(&self, class: ClassView<'_>, row: u32) -> bool {
        helps(self, class, row)
    }
    fn check_release(&self, table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        check_release(self, table, classes, "largest gain as a share of its bound")
    }
    fn achieved(&self, table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        let r = release(self, table, classes)?;
        Some(format!(
            "largest gain {:.4} of its bound (at most 1) against the distribution of the published rows",
            r.worst
        ))
    }
    fn check_feasible(&self, table: &QiTable, active: usize, _max_suppressed: usize) -> Result<()> {
        check_feasible(self, table, active)
    }
}

impl PrivacyModel for DeltaDisclosure {
    fn sensitive_columns(&self) -> Option<Vec<&str>> {
        Some(vec![self.column.as_str()])
    }
    fn describe(&self) -> String {
        format!(
            "δ-disclosure privacy (δ = {}, log base 2) on `{}`",
            self.delta, self.column
        )
    }
    fn min_class_size(&self) -> usize {
        1
    }
    fn accepts(&self, class: ClassView<'_>) -> bool {
        self.class_measure(class).is_some_and(|m| self.within(m))
    }
    /// With every value of the table required in every class (the paper's
    /// reading), a value's frequency in a union lies between its
    /// frequencies in the parts, inside the parts' interval
    /// `(q 2^-δ, q 2^δ)`.
    fn is_monotone(&self) -> bool {
        true
    }
    fn helps(&self, class: ClassView<'_>, row: u32) -> bool {
        helps(self, class, row)
    }
    fn check_release(&self, table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        check_release(self, table, classes, "largest |log2 p/q|")
    }
    fn achieved(&self, table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        let r = release(self, table, classes)?;
        Some(format!(
            "largest |log2 p/q| {:.4} (below δ = {}) against the distribution of the published rows",
            r.worst, self.delta
        ))
    }
    fn check_feasible(&self, table: &QiTable, active: usize, _max_suppressed: usize) -> Result<()> {
        check_feasible(self, table, active)
    }
}

#[cfg(test)]
mod tests {
    use rustc_hash::FxHashMap;

    use super::*;
    use crate::spec::JobSpec;

    fn table(values: &[&str]) -> QiTable {
        let spec: JobSpec = serde_json::from_str(
            r#"{"attributes": [{"name": "q", "role": "qi"}, {"name": "s", "role": "sensitive", "type": "categorical"}]}"#,
        )
        .unwrap();
        QiTable::from_string_columns(
            &spec,
            &FxHashMap::default(),
            &[("q", vec!["x"; values.len()]), ("s", values.to_vec())],
        )
        .unwrap()
    }

    fn beta(beta: f64, enhanced: bool) -> BetaLikeness {
        BetaLikeness {
            column: "s".into(),
            beta,
            enhanced,
        }
    }

    fn delta(delta: f64) -> DeltaDisclosure {
        DeltaDisclosure {
            column: "s".into(),
            delta,
        }
    }

    /// The definitions computed directly from the frequencies, as a reader
    /// of the paper would: (p - q) / q <= bound for every value with p > q;
    /// |log2 p/q| < δ for every value of the table.
    fn oracle_beta(values: &[&str], class: &[u32], b: f64, enhanced: bool) -> bool {
        let freq = |rows: &[usize], v: &str| {
            rows.iter().filter(|&&r| values[r] == v).count() as f64 / rows.len() as f64
        };
        let all: Vec<usize> = (0..values.len()).collect();
        let class: Vec<usize> = class.iter().map(|&r| r as usize).collect();
        values.iter().all(|v| {
            let (p, q) = (freq(&class, v), freq(&all, v));
            let bound = if enhanced { b.min(-q.ln()) } else { b };
            p <= q || (p - q) / q <= bound + 1e-12
        })
    }

    fn oracle_delta(values: &[&str], class: &[u32], d: f64) -> bool {
        let freq = |rows: &[usize], v: &str| {
            rows.iter().filter(|&&r| values[r] == v).count() as f64 / rows.len() as f64
        };
        let all: Vec<usize> = (0..values.len()).collect();
        let class: Vec<usize> = class.iter().map(|&r| r as usize).collect();
        values
            .iter()
            .all(|v| (freq(&class, v) / freq(&all, v)).log2().abs() < d)
    }

    #[test]
    fn hand_computed_cases() {
        // Table a a a b (q = 3/4, 1/4). Class {a, b}: p(b) = 1/2, gain
        // (1/2 - 1/4) / (1/4) = 1; p(a) = 1/2 below q.
        let t = table(&["a", "a", "a", "b"]);
        let view = |rows| ClassView { table: &t, rows };
        assert!(beta(1.0, false).accepts(view(&[0, 3])));
        assert!(!beta(0.99, false).accepts(view(&[0, 3])));
        // Enhanced: the bound of b is min(1, -ln 1/4 = 1.386) = 1.
        assert!(beta(1.0, true).accepts(view(&[0, 3])));
        // Class {b}: p(b) = 1, gain (1 - 1/4) / (1/4) = 3. Enhanced with
        // β = 5: the bound is min(5, 1.386) < 3.
        assert!(!beta(2.0, false).accepts(view(&[3])));
        assert!(beta(3.0, false).accepts(view(&[3])));
        assert!(!beta(5.0, true).accepts(view(&[3])));
        // δ: {a, b}: |log2 (1/2)/(3/4)| = 0.585, |log2 2| = 1.
        assert!(delta(1.01).accepts(view(&[0, 3])));
        assert!(!delta(1.0).accepts(view(&[0, 3])));
        // {a}: b absent, refused whatever δ.
        assert!(!delta(100.0).accepts(view(&[0])));
        // The whole table: ratio 1 everywhere.
        assert!(delta(0.01).accepts(view(&[0, 1, 2, 3])));
    }

    #[test]
    fn agree_with_the_definitions_on_random_classes() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for _ in 0..300 {
            let n = rng.gen_range(2..14);
            let values: Vec<&str> = (0..n)
                .map(|_| ["a", "b", "c"][rng.gen_range(0..3)])
                .collect();
            let t = table(&values);
            let class: Vec<u32> = (0..n as u32).filter(|_| rng.gen_bool(0.5)).collect();
            if class.is_empty() {
                continue;
            }
            let view = ClassView {
                table: &t,
                rows: &class,
            };
            let b = rng.gen_range(0.1..3.0);
            for enhanced in [false, true] {
                assert_eq!(
                    beta(b, enhanced).accepts(view),
                    oracle_beta(&values, &class, b, enhanced),
                    "{values:?} {class:?} β = {b} enhanced = {enhanced}"
                );
            }
            let d = rng.gen_range(0.1..2.0);
            assert_eq!(
                delta(d).accepts(view),
                oracle_delta(&values, &class, d),
                "{values:?} {class:?} δ = {d}"
            );
        }
    }

    #[test]
    fn unions_of_accepted_classes_are_accepted() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let mut checked = 0;
        for _ in 0..2000 {
            let n = rng.gen_range(4..16);
            let values: Vec<&str> = (0..n)
                .map(|_| ["a", "b", "c"][rng.gen_range(0..3)])
                .collect();
            let t = table(&values);
            let (x, y): (Vec<u32>, Vec<u32>) = (0..n as u32).partition(|_| rng.gen_bool(0.5));
            if x.is_empty() || y.is_empty() {
                continue;
            }
            let view = |rows| ClassView { table: &t, rows };
            let union: Vec<u32> = x.iter().chain(&y).copied().collect();
            let models: [Box<dyn PrivacyModel>; 3] = [
                Box::new(beta(0.8, false)),
                Box::new(beta(0.8, true)),
                Box::new(delta(0.9)),
            ];
            for m in &models {
                if m.accepts(view(&x)) && m.accepts(view(&y)) {
                    checked += 1;
                    assert!(m.is_monotone());
                    assert!(m.accepts(view(&union)), "{} {values:?}", m.describe());
                }
            }
        }
        assert!(checked > 50, "only {checked} pairs of accepted classes");
    }

    #[test]
    fn the_verifier_uses_the_published_rows_and_names_no_value() {
        // Table a a b b; b's rows suppressed: the release {a, a} has the
        // published distribution itself.
        let t = table(&["a", "a", "b", "b"]);
        let m = delta(0.5);
        assert!(!m.accepts(ClassView {
            table: &t,
            rows: &[0, 1]
        }));
        assert_eq!(m.check_release(&t, &[&[0, 1]]), None);
        let msg = m.check_release(&t, &[&[0, 2], &[1], &[3]]).unwrap();
        assert!(
            msg.starts_with(
                "2 published classes violate δ-disclosure privacy (δ = 0.5, log base 2) on `s`"
            ),
            "{msg}"
        );
        assert!(msg.contains("2 of them lacking a value"), "{msg}");
        assert!(!msg.contains("\"a\"") && !msg.contains("`a`"), "{msg}");
        let msg = beta(0.5, false)
            .check_release(&t, &[&[0, 2], &[1], &[3]])
            .unwrap();
        assert!(
            msg.starts_with("2 published classes violate basic β-likeness"),
            "{msg}"
        );
    }

    #[test]
    fn helps_picks_the_rows_that_bring_a_class_closer() {
        let t = table(&["a", "a", "a", "b", "b", "c"]);
        let view = |rows| ClassView { table: &t, rows };
        // {a}: b and c absent; a b or a c row helps, another a does not.
        let m = delta(1.0);
        assert!(m.helps(view(&[0]), 3));
        assert!(m.helps(view(&[0]), 5));
        assert!(!m.helps(view(&[0]), 1));
        // {c}: gain of c is 5; adding an a lowers it.
        let m = beta(1.0, false);
        assert!(m.helps(view(&[5]), 0));
        assert!(!m.helps(view(&[5, 0]), 5));
    }
}
