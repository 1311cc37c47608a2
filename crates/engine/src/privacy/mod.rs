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
//! column.

use std::fmt::Debug;

use crate::encode::QiTable;
use crate::error::{Error, Result};
use crate::spec::{Diversity, JobSpec};

mod l_diversity;

pub(crate) use l_diversity::{entropy, frequencies};
pub use l_diversity::{DistinctLDiversity, EntropyLDiversity, RecursiveCLDiversity};

/// One class of a (working or released) table, as models see it.
#[derive(Debug, Clone, Copy)]
pub struct ClassView<'a> {
    /// The table the rows belong to.
    pub table: &'a QiTable,
    /// The rows of the class.
    pub rows: &'a [u32],
}

/// A privacy model over the classes of a release.
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

/// k-anonymity (Sweeney; the KACA paper Def. 1): every class has at least k rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KAnonymity {
    /// The smallest allowed class size.
    pub k: usize,
}

impl PrivacyModel for KAnonymity {
    fn is_monotone(&self) -> bool {
        true
    }
    fn describe(&self) -> String {
        format!("k-anonymity (k = {})", self.k)
    }
    fn min_class_size(&self) -> usize {
        self.k
    }
    fn accepts(&self, class: ClassView<'_>) -> bool {
        class.rows.len() >= self.k
    }
    fn is_monotone_with_suppression(&self) -> bool {
        true
    }
    fn needs_rows(&self) -> bool {
        false
    }
}

/// An anonymity requirement `<S, k>` (HeuristicMin, the HeuristicMin paper section 3.1;
/// `docs/SPEC.md` section 1): the projection of the release on the shield `S` (a
/// set of QIs) holds every tuple at least `k` times. Plain k-anonymity is
/// `<all QIs, k>`.
///
/// A requirement on a strict subset of the QIs is not a property of one
/// class: a projected tuple gathers every published class that agrees on the
/// shield. It is therefore not a [`PrivacyModel`]; the verifier checks it on
/// the projection of the whole release ([`crate::verify`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// QI indices (job order, ascending), `None` for all QIs.
    columns: Option<Vec<usize>>,
    names: Vec<String>,
    k: usize,
}

impl Requirement {
    /// `<all QIs, k>`: k-anonymity.
    pub fn all(k: usize) -> Self {
        Requirement {
            columns: None,
            names: Vec::new(),
            k,
        }
    }

    /// `<S, k>` on the QIs at the given indices (job order) with their names.
    /// A shield naming every one of `n_qi` QIs is `<all QIs, k>`.
    pub fn on(shield: impl IntoIterator<Item = (usize, String)>, k: usize, n_qi: usize) -> Self {
        let mut cols: Vec<(usize, String)> = shield.into_iter().collect();
        cols.sort();
        cols.dedup_by_key(|(q, _)| *q);
        if cols.len() == n_qi {
            return Requirement::all(k);
        }
        Requirement {
            columns: Some(cols.iter().map(|(q, _)| *q).collect()),
            names: cols.into_iter().map(|(_, n)| n).collect(),
            k,
        }
    }

    /// The anonymity degree.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Whether the shield is every QI (plain k-anonymity, a per-class check).
    pub fn is_all(&self) -> bool {
        self.columns.is_none()
    }

    /// The shield's QI indices among `n_qi` QIs, ascending.
    pub fn columns(&self, n_qi: usize) -> Vec<usize> {
        match &self.columns {
            Some(c) => c.clone(),
            None => (0..n_qi).collect(),
        }
    }

    /// Whether QI `q` is in the shield.
    pub fn contains(&self, q: usize) -> bool {
        self.columns
            .as_ref()
            .is_none_or(|c| c.binary_search(&q).is_ok())
    }

    /// `<{age, sex}, 10>`, or `k-anonymity (k = 10)` for all QIs.
    pub fn describe(&self) -> String {
        match &self.columns {
            None => format!("k-anonymity (k = {})", self.k),
            Some(_) => format!("<{{{}}}, {}>", self.names.join(", "), self.k),
        }
    }

    /// Whether every release satisfying `other` satisfies `self`: `other`'s
    /// shield contains this one and its k is at least this k (a projection on
    /// fewer attributes only merges tuples).
    pub fn is_implied_by(&self, other: &Requirement) -> bool {
        other.k >= self.k
            && match (&self.columns, &other.columns) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some(a), Some(b)) => a.iter().all(|q| b.binary_search(q).is_ok()),
            }
    }
}

/// The complete privacy requirement of a job: its anonymity requirements,
/// its per-class models and how many rows may be suppressed.
///
/// Algorithms that understand a single k (every one but HeuristicMin) see
/// the requirements through one stand-in model: k-anonymity with the largest
/// k of all requirements, on all QIs. A tuple of any shield's projection
/// gathers whole classes of the release, so it has at least as many rows as
/// one class: the stand-in satisfies every requirement (over-protecting the
/// smaller ones). The verifier does
/// not use the stand-in: it checks every requirement by projection, so
/// requirement-aware algorithms are held to exactly what the job asked.
#[derive(Debug)]
pub struct Privacy {
    /// Per-class models; `models[0]` is the requirements' stand-in when
    /// `standin` is set.
    models: Vec<Box<dyn PrivacyModel>>,
    standin: bool,
    requirements: Vec<Requirement>,
    suppression_limit: f64,
}

impl Privacy {
    /// The models a job asks for.
    ///
    /// # Errors
    /// [`Error::Spec`] for invalid settings.
    pub fn from_spec(spec: &JobSpec) -> Result<Self> {
        spec.validate()?;
        let qis: Vec<&str> = spec.quasi_identifiers().map(|a| a.name.as_str()).collect();
        let mut requirements = Vec::new();
        if spec.privacy.k >= 1 {
            requirements.push(Requirement::all(spec.privacy.k));
        }
        for r in &spec.privacy.requirements {
            let shield = r.shield.iter().map(|name| {
                let q = qis
                    .iter()
                    .position(|n| n == name)
                    .expect("validated: shields name QIs");
                (q, name.clone())
            });
            requirements.push(Requirement::on(shield, r.k, qis.len()));
        }
        if requirements.is_empty() {
            requirements.push(Requirement::all(1));
        }
        let mut privacy =
            Self::with_requirements(requirements).with_suppression_limit(spec.suppression_limit());
        if let Some(l) = spec.privacy.l {
            for column in spec.diversity_columns() {
                privacy = privacy.with_model(match spec.diversity() {
                    Diversity::Distinct => Box::new(DistinctLDiversity { column, l }),
                    Diversity::Entropy => Box::new(EntropyLDiversity { column, l }),
                    Diversity::Recursive => Box::new(RecursiveCLDiversity {
                        column,
                        c: spec.privacy.c.unwrap_or(1.0),
                        l,
                    }),
                });
            }
        }
        Ok(privacy)
    }

    /// Plain k-anonymity without suppression.
    pub fn k_anonymity(k: usize) -> Self {
        Self::with_requirements(vec![Requirement::all(k)])
    }

    /// The given anonymity requirements without suppression.
    ///
    /// # Panics
    /// When `requirements` is empty.
    pub fn with_requirements(requirements: Vec<Requirement>) -> Self {
        let k = requirements
            .iter()
            .map(Requirement::k)
            .max()
            .expect("at least one requirement");
        Privacy {
            models: vec![Box::new(KAnonymity { k })],
            standin: true,
            requirements,
            suppression_limit: 0.0,
        }
    }

    /// The anonymity requirements `<shield, k>` (plain k is `<all QIs, k>`).
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether the job holds a requirement on a strict subset of the QIs,
    /// which single-k algorithms meet through the stand-in (largest k on all
    /// QIs).
    pub fn has_shield_requirements(&self) -> bool {
        self.requirements.iter().any(|r| !r.is_all())
    }

    /// The per-class models besides the requirements (l-diversity, ...):
    /// what a requirement-aware algorithm must check on classes itself.
    pub fn class_models(&self) -> &[Box<dyn PrivacyModel>] {
        &self.models[self.standin as usize..]
    }

    /// The smallest class size the job itself demands of every class: the
    /// largest k of the requirements on all QIs and the models' minimum
    /// (1 when only shield requirements are given).
    pub fn class_min_size(&self) -> usize {
        self.requirements
            .iter()
            .filter(|r| r.is_all())
            .map(Requirement::k)
            .chain(self.class_models().iter().map(|m| m.min_class_size()))
            .max()
            .unwrap_or(1)
    }

    /// Adds a model.
    pub fn with_model(mut self, model: Box<dyn PrivacyModel>) -> Self {
        self.models.push(model);
        self
    }

    /// Sets the share of rows that may be suppressed.
    pub fn with_suppression_limit(mut self, limit: f64) -> Self {
        self.suppression_limit = limit;
        self
    }

    /// The models.
    pub fn models(&self) -> &[Box<dyn PrivacyModel>] {
        &self.models
    }

    /// The largest minimum class size of all models (k).
    pub fn min_class_size(&self) -> usize {
        self.models
            .iter()
            .map(|m| m.min_class_size())
            .max()
            .unwrap_or(1)
    }

    /// The share of rows that may be suppressed.
    pub fn suppression_limit(&self) -> f64 {
        self.suppression_limit
    }

    /// The number of rows that may be suppressed out of `n_rows`.
    pub fn max_suppressed(&self, n_rows: usize) -> usize {
        (self.suppression_limit * n_rows as f64 + 1e-9).floor() as usize
    }

    /// Whether every model accepts a class.
    pub fn accepts(&self, class: ClassView<'_>) -> bool {
        self.models.iter().all(|m| m.accepts(class))
    }

    /// Whether adding `row` to `class` helps every model that does not
    /// accept the class yet (see [`PrivacyModel::helps`]).
    pub fn helps(&self, class: ClassView<'_>, row: u32) -> bool {
        self.models
            .iter()
            .filter(|m| !m.accepts(class))
            .all(|m| m.helps(class, row))
    }

    /// Whether every model is monotone.
    pub fn is_monotone(&self) -> bool {
        self.models.iter().all(|m| m.is_monotone())
    }

    /// Whether every model is monotone with suppression (see
    /// [`PrivacyModel::is_monotone_with_suppression`]).
    pub fn is_monotone_with_suppression(&self) -> bool {
        self.models.iter().all(|m| m.is_monotone_with_suppression())
    }

    /// Whether some model needs the rows of a class (see
    /// [`PrivacyModel::needs_rows`]); when not, a class is accepted exactly
    /// when it has at least [`Privacy::min_class_size`] rows.
    pub fn needs_rows(&self) -> bool {
        self.models.iter().any(|m| m.needs_rows())
    }

    /// A readable description of all requirements and models.
    pub fn describe(&self) -> String {
        self.requirements
            .iter()
            .map(Requirement::describe)
            .chain(self.class_models().iter().map(|m| m.describe()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Checks that the table can satisfy every model at all.
    ///
    /// # Errors
    /// [`Error::Unsatisfiable`] naming the model and the reason.
    pub fn check_feasible(&self, table: &QiTable) -> Result<()> {
        let active = table.n_rows() - table.excluded().len();
        let max_suppressed = self.max_suppressed(table.n_rows());
        self.models
            .iter()
            .try_for_each(|m| m.check_feasible(table, active, max_suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                class.rows.len() % 2 == 0
            }
        }
        assert!(!Custom.is_monotone());
        assert!(!Custom.is_monotone_with_suppression());
        assert!(KAnonymity { k: 2 }.is_monotone());
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

    #[test]
    fn privacy_from_spec_builds_one_model_per_sensitive_column() {
        let spec: JobSpec = toml::from_str(
            r#"
            [privacy]
            k = 2
            l = 3
            diversity = "recursive"
            c = 2.5
            [[attributes]]
            name = "q"
            role = "qi"
            [[attributes]]
            name = "s"
            role = "sensitive"
            [[attributes]]
            name = "t"
            role = "sensitive"
            "#,
        )
        .unwrap();
        let p = Privacy::from_spec(&spec).unwrap();
        assert_eq!(
            p.describe(),
            "k-anonymity (k = 2), recursive (c,l)-diversity (c = 2.5, l = 3) on `s`, recursive (c,l)-diversity (c = 2.5, l = 3) on `t`"
        );
        assert_eq!(p.min_class_size(), 3);
        assert!(p.is_monotone());
    }
}
