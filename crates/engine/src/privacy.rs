//! Privacy models: what a published class must satisfy.
//!
//! A model tests one class of a release ([`PrivacyModel::accepts`]); the
//! verifier ([`crate::verify`]) and the algorithms ask the models instead of
//! re-implementing them. Models declare whether they are monotone under
//! generalisation (merging two accepted classes gives an accepted class),
//! which search algorithms need for sound pruning.

use std::fmt::Debug;

use crate::encode::QiTable;
use crate::error::{Error, Result};
use crate::spec::JobSpec;

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
    fn is_monotone(&self) -> bool {
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
    /// Checks, before any work, that the table can satisfy the model at all.
    ///
    /// # Errors
    /// [`Error::Unsatisfiable`] explaining why not.
    fn check_feasible(&self, table: &QiTable, active_rows: usize) -> Result<()> {
        let _ = table;
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

/// k-anonymity (Sweeney; seed 000 Def. 1): every class has at least k rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KAnonymity {
    /// The smallest allowed class size.
    pub k: usize,
}

impl PrivacyModel for KAnonymity {
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

/// An anonymity requirement `<S, k>` (HeuristicMin, seed 002 section 3.1;
/// `SPEC.md` section 1): the projection of the release on the shield `S` (a
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

    /// `<{age, sex}, 10>`, or `<all QIs, 10>`.
    pub fn describe(&self) -> String {
        match &self.columns {
            None => format!("<all QIs, {}>", self.k),
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
        Ok(Self::with_requirements(requirements).with_suppression_limit(spec.suppression_limit()))
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
        self.models
            .iter()
            .try_for_each(|m| m.check_feasible(table, active))
    }
}
