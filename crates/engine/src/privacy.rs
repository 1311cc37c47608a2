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

/// The complete privacy requirement of a job: its models and how many rows
/// may be suppressed.
#[derive(Debug)]
pub struct Privacy {
    models: Vec<Box<dyn PrivacyModel>>,
    suppression_limit: f64,
}

impl Privacy {
    /// The models a job asks for.
    ///
    /// # Errors
    /// [`Error::Spec`] for invalid settings.
    pub fn from_spec(spec: &JobSpec) -> Result<Self> {
        spec.validate()?;
        Ok(Privacy {
            models: vec![Box::new(KAnonymity { k: spec.privacy.k })],
            suppression_limit: spec.suppression_limit(),
        })
    }

    /// Plain k-anonymity without suppression.
    pub fn k_anonymity(k: usize) -> Self {
        Privacy {
            models: vec![Box::new(KAnonymity { k })],
            suppression_limit: 0.0,
        }
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

    /// A readable description of all models.
    pub fn describe(&self) -> String {
        self.models
            .iter()
            .map(|m| m.describe())
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
