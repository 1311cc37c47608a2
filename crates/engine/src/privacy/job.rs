//! All of a job's privacy models together ([`Privacy`]): its anonymity
//! requirements, its per-class models and the suppression limit, built from
//! the job spec, with the one stand-in k-anonymity model that algorithms
//! understanding a single k search with.

use super::{
    ClassView, DeltaPresence, DistinctLDiversity, EntropyLDiversity, KAnonymity, PrivacyModel,
    RecursiveCLDiversity, Requirement,
};
use std::sync::Arc;

use crate::encode::QiTable;
use crate::error::Result;
use crate::spec::{Diversity, JobSpec};

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
#[derive(Debug, Clone)]
pub struct Privacy {
    /// Per-class models; `models[0]` is the requirements' stand-in when
    /// `standin` is set. Shared, so a job's models bound to a sample or
    /// with a raised class size ([`Privacy::for_sample`],
    /// [`Privacy::with_class_floor`]) are cheap copies.
    models: Vec<Arc<dyn PrivacyModel>>,
    standin: bool,
    requirements: Vec<Requirement>,
    suppression_limit: f64,
    /// δ-presence of a research subset: not a per-class model (a class's
    /// population depends on its published cells), so apart.
    presence: Option<Arc<DeltaPresence>>,
}

impl Privacy {
    /// The models a job asks for.
    ///
    /// # Errors
    /// [`Error::Spec`](crate::error::Error::Spec) for invalid settings.
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
        for model in super::registry::build_all(spec)? {
            privacy = privacy.with_model(model);
        }
        privacy.presence = super::registry::delta_presence_of(spec)?.map(Arc::new);
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
            models: vec![Arc::new(KAnonymity { k })],
            standin: true,
            requirements,
            suppression_limit: 0.0,
            presence: None,
        }
    }

    /// The job's δ-presence of a research subset, if any.
    pub fn presence(&self) -> Option<&DeltaPresence> {
        self.presence.as_deref()
    }

    /// These models with δ-presence of a research subset.
    pub fn with_presence(mut self, presence: DeltaPresence) -> Self {
        self.presence = Some(Arc::new(presence));
        self
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
    pub fn class_models(&self) -> &[Arc<dyn PrivacyModel>] {
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
        self.models.push(Arc::from(model));
        self
    }

    /// The models bound to a sample of `rows` records
    /// ([`PrivacyModel::for_sample`]: estimated k-map derives its class size
    /// from it); models that do not depend on it are shared unchanged.
    pub fn for_sample(&self, rows: usize) -> Privacy {
        let mut bound = self.clone();
        for m in &mut bound.models {
            if let Some(b) = m.for_sample(rows) {
                *m = Arc::from(b);
            }
        }
        bound
    }

    /// These models, every class also of at least `size` rows: how the
    /// pipeline reaches a whole-release part the algorithm missed
    /// ([`PrivacyModel::reached_with_classes_of`]). The floor is one more
    /// per-class model; the requirements and the verifiers' models are
    /// unchanged.
    pub fn with_class_floor(&self, size: usize) -> Privacy {
        self.clone().with_model(Box::new(KAnonymity { k: size }))
    }

    /// The class size with which every release meets the whole-release
    /// parts of all models, when each of them has one
    /// ([`PrivacyModel::reached_with_classes_of`]); `None` when some model
    /// with such a part is not reached by larger classes.
    pub fn reached_with_classes_of(&self) -> Option<usize> {
        self.models
            .iter()
            .filter_map(|m| m.reached_with_classes_of())
            .max()
    }

    /// Whether some model bounds the risk of every record on its own
    /// ([`PrivacyModel::protects_alone`]), so k may be 1.
    pub fn protects_alone(&self) -> bool {
        self.models.iter().any(|m| m.protects_alone())
    }

    /// Sets the share of rows that may be suppressed.
    pub fn with_suppression_limit(mut self, limit: f64) -> Self {
        self.suppression_limit = limit;
        self
    }

    /// The models.
    pub fn models(&self) -> &[Arc<dyn PrivacyModel>] {
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

    /// Whether every model is monotone. δ-presence is not (merging two
    /// classes can move the share of either bound's side).
    pub fn is_monotone(&self) -> bool {
        self.presence.is_none() && self.models.iter().all(|m| m.is_monotone())
    }

    /// Whether every model is monotone with suppression (see
    /// [`PrivacyModel::is_monotone_with_suppression`]).
    pub fn is_monotone_with_suppression(&self) -> bool {
        self.presence.is_none() && self.models.iter().all(|m| m.is_monotone_with_suppression())
    }

    /// Whether some model needs the rows of a class (see
    /// [`PrivacyModel::needs_rows`]); when not, a class is accepted exactly
    /// when it has at least [`Privacy::min_class_size`] rows.
    pub fn needs_rows(&self) -> bool {
        self.models.iter().any(|m| m.needs_rows())
    }

    /// A readable description of all requirements and models.
    pub fn describe(&self) -> String {
        // k = 1 beside a risk model that protects alone says nothing.
        let trivial = |r: &&Requirement| r.k() <= 1 && !self.class_models().is_empty();
        self.requirements
            .iter()
            .filter(|r| !trivial(r))
            .map(Requirement::describe)
            .chain(self.class_models().iter().map(|m| m.describe()))
            .chain(self.presence.iter().map(|p| p.describe()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Checks the whole-release parts the algorithms do not aim at
    /// ([`PrivacyModel::check_reached`]) on a partition; models without
    /// such a part cost nothing.
    ///
    /// # Errors
    /// [`Error::Unsatisfiable`](crate::error::Error::Unsatisfiable) naming the model.
    pub fn check_reached(&self, partition: &crate::partition::Partition) -> Result<()> {
        self.models
            .iter()
            .try_for_each(|m| m.check_reached(partition))
    }

    /// Checks that the table can satisfy every model at all.
    ///
    /// # Errors
    /// [`Error::Unsatisfiable`](crate::error::Error::Unsatisfiable) naming the model and the reason.
    pub fn check_feasible(&self, table: &QiTable) -> Result<()> {
        let active = table.n_rows() - table.excluded().len();
        let max_suppressed = self.max_suppressed(table.rows_in_scope());
        self.models
            .iter()
            .try_for_each(|m| m.check_feasible(table, active, max_suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
